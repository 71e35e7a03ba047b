//! The streaming path of a scenario: a server line given to the twin relay in pieces when it may
//! be streamed, and the rule that this changes nothing but how the line travels.

use std::time::Instant;

use serde_json::Value;

use super::Event;
use crate::{Output, Relay};

/// The longest line the proxy relays (no scenario line comes near it).
const LIMIT: usize = 16 << 20;

/// Gives `line` to `twin`: streamed, in two pieces, if the twin may stream it when it has seen
/// its first half, and whole otherwise. Returns the line as the host got it when streamed.
///
/// A line with both a `method` and a `result` or `error` is no JSON-RPC message: the proxy
/// forwards it unchanged when it streams it and does nothing more with it (see
/// `crate::stream`), where the whole-line path reads it as a request. Such lines are given
/// whole here, so that the twin stays in step.
pub(super) fn server_line(twin: &mut Relay, line: Vec<u8>, now: Instant) -> Option<Vec<u8>> {
    let half = line.len() / 2;
    let ambiguous = serde_json::from_slice::<Value>(&line).is_ok_and(|message| {
        message.get("method").is_some()
            && (message.get("result").is_some() || message.get("error").is_some())
    });
    let streamed = (!ambiguous)
        .then(|| twin.stream_from_server(&line[..half], LIMIT))
        .flatten();
    let Some(mut streamed) = streamed else {
        twin.from_server(line, now);
        return None;
    };
    let mut host = Vec::with_capacity(line.len());
    for piece in [&line[..half], &line[half..]] {
        let forward = streamed.part(piece);
        assert!(!forward.cut, "no scenario line reaches the limit");
        host.extend_from_slice(&piece[..forward.bytes]);
    }
    twin.stream_end(streamed, now);
    Some(host)
}

/// The twin's output for an event is the relay's: when the twin streamed a server line, the
/// relay's first output is that line whole, and the rest are the same.
pub(super) fn agrees(
    outputs: &[Output],
    streamed: Option<Vec<u8>>,
    twin: Vec<Output>,
    event: &Event,
) {
    let mut expected = Vec::with_capacity(twin.len() + 1);
    if let Some(line) = streamed {
        expected.push(Output::ToHost(line));
    }
    expected.extend(twin);
    assert!(
        outputs == expected.as_slice(),
        "a streamed line changes nothing but how it travels: after {event:?}\nwhole:    {outputs:?}\nstreamed: {expected:?}"
    );
}

#[cfg(test)]
mod tests;
