//! The daemon's control-protocol decoder on arbitrary bytes: framed into lines by the same
//! codec and limit a connection uses, then each line through `envelope::parse_request` and
//! the params of the method it names, with the checks of `daemon/tests/decoder/check.rs`
//! (never a panic; an error with the documented code; every answer one line of JSON).

#![no_main]

#[path = "../../daemon/tests/decoder/check.rs"]
#[allow(dead_code)]
mod check;

use libfuzzer_sys::fuzz_target;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, LinesCodec};

fuzz_target!(|data: &[u8]| {
    let mut codec = LinesCodec::new_with_max_length(rootsd_proto::wire::MAX_LINE_BYTES);
    // Arrives in two reads, split where the input says, as a socket may split it.
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut buffer = BytesMut::new();
    for part in [&data[..split], &data[split..]] {
        buffer.extend_from_slice(part);
        loop {
            match codec.decode(&mut buffer) {
                Ok(Some(line)) => {
                    check::decode(&line);
                }
                Ok(None) => break,
                // A framing violation (not UTF-8): the daemon answers once and closes.
                Err(_) => return,
            }
        }
    }
    if let Ok(Some(line)) = codec.decode_eof(&mut buffer) {
        check::decode(&line);
    }
});
