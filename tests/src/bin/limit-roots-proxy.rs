//! `limit-roots-proxy RESULT COMMAND ARGS…`: the cheapest process in `rootsctl proxy`'s place
//! for the benchmark's `roots/list` rows, measured beside the row's limit (a host thread
//! answering from memory) as a reference.
//!
//! It sits where the proxy sits and runs `limit-relay`'s loop ([`rootsd_tests::limit_relay`]),
//! but answers the server's `roots/list` itself with `RESULT` (the bytes the proxy answers with)
//! and forwards the server's other lines: a byte search for the method and the id, no parsing.
//! It shows what any process between a server and its host costs against a thread of the host
//! itself: a proxy process cannot do less per request. It knows only the form `bench-server`
//! writes (`{"jsonrpc":"2.0","id":N,"method":…}`), and must stay this small.

/// How a request for roots starts, as `bench-server` writes it, up to its id.
const REQUEST_START: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
const ROOTS_LIST: &[u8] = br#","method":"roots/list""#;

fn main() {
    // Without RESULT there is no command either, and `run` prints the usage.
    let result = std::env::args_os()
        .nth(1)
        .unwrap_or_default()
        .into_encoded_bytes();
    // The server's bytes not yet ended by a newline.
    let mut pending: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut answer: Vec<u8> = Vec::with_capacity(result.len() + 64);
    let synopsis = "RESULT COMMAND [ARGS...]";
    rootsd_tests::limit_relay::run("limit-roots-proxy", synopsis, 1, |bytes, sides| {
        pending.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(end) = pending[start..].iter().position(|&b| b == b'\n') {
            let line = &pending[start..start + end + 1];
            match roots_request_id(line) {
                Some(id) => {
                    answer.clear();
                    answer.extend_from_slice(REQUEST_START);
                    answer.extend_from_slice(id);
                    answer.extend_from_slice(br#","result":"#);
                    answer.extend_from_slice(&result);
                    answer.extend_from_slice(b"}\n");
                    sides.to_server(&answer);
                }
                None => sides.to_host(line),
            }
            start += end + 1;
        }
        pending.drain(..start);
    });
}

/// The id of a `roots/list` request in `bench-server`'s form.
fn roots_request_id(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(REQUEST_START)?;
    let end = rest.iter().position(|&b| b == b',')?;
    rest[end..].starts_with(ROOTS_LIST).then(|| &rest[..end])
}
