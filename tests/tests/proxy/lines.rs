//! Lines from the host as they come on a real pipe: CRLF endings, blank lines, lines that are not
//! JSON or not UTF-8, a large request, and one over the proxy's 16 MiB limit.

use rootsd_tests::{PATIENCE, eventually};
use serde_json::json;

use crate::support::{FakeSession, FakeSetup, show_lines};

/// A handshake-era session with the fake, initialized.
fn session() -> FakeSession {
    let mut fake = FakeSession::start("quiet", FakeSetup::default());
    fake.proxy.initialize();
    fake
}

/// The lines the fake received after the host's `notifications/initialized`.
fn after_handshake(lines: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let at = lines
        .iter()
        .position(|l| l.windows(25).any(|w| w == b"notifications/initialized"))
        .unwrap_or_else(|| panic!("no initialized:\n{}", show_lines(lines)));
    lines[at + 1..].to_vec()
}

#[test]
fn crlf_blank_malformed_and_non_utf8_lines_reach_the_server_as_they_came() {
    let mut fake = session();
    let (log, proxy) = (&fake.log, &mut fake.proxy);

    let crlf = b"{\"jsonrpc\":\"2.0\",\"id\":\"crlf\",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"n\":1}}}\r";
    let malformed = b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":";
    let not_utf8 =
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"\xff\xfe \xc3\"}}";
    let next = br#"{"jsonrpc":"2.0","id":"next","method":"tools/call","params":{"name":"echo","arguments":{"n":2}}}"#;

    proxy.send_bytes(crlf);
    let answer = proxy.response(&json!("crlf"));
    assert_eq!(
        answer["result"]["content"][0]["text"],
        json!(r#"{"n": 1}"#),
        "{answer}"
    );
    for blank in [&b""[..], b"   \t ", b"\r"] {
        proxy.send_bytes(blank);
    }
    proxy.send_bytes(malformed);
    proxy.send_bytes(not_utf8);
    proxy.send_bytes(next);
    let answer = proxy.response(&json!("next"));
    assert_eq!(
        answer["result"]["content"][0]["text"],
        json!(r#"{"n": 2}"#),
        "{answer}"
    );

    // Blank lines are no messages and are dropped; everything else arrives byte for byte.
    let lines = after_handshake(&log.byte_lines());
    let expected: Vec<Vec<u8>> = [&crlf[..], malformed, not_utf8, next]
        .iter()
        .map(|l| l.to_vec())
        .collect();
    assert!(
        lines == expected,
        "the fake received:\n{}\nexpected:\n{}",
        show_lines(&lines),
        show_lines(&expected)
    );
    // The host was told nothing about lines that were not its requests.
    assert_eq!(proxy.received.len(), 3, "{:?}", proxy.received_raw);
}

#[test]
fn a_two_mib_request_reaches_the_server_whole() {
    let mut fake = session();
    let (log, proxy) = (&fake.log, &mut fake.proxy);

    let blob = format!("{}é", "y".repeat(2 << 20));
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{{"name":"echo","arguments":{{"blob":"{blob}"}}}}}}"#
    );
    assert!(line.len() > 2 << 20);
    proxy.send_raw(&line);
    let answer = proxy.response(&json!("big"));
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no echo: {:.300}", answer.to_string()));
    let echoed: serde_json::Value = serde_json::from_str(text).expect("the echo is JSON");
    assert!(echoed["blob"] == json!(blob), "the echo differs");

    let lines = after_handshake(&log.byte_lines());
    assert_eq!(lines.len(), 1, "{}", show_lines(&lines));
    assert!(
        lines[0] == line.as_bytes(),
        "the request was changed on its way"
    );
}

#[test]
fn a_request_over_the_line_limit_gets_an_error_and_the_next_one_passes() {
    let mut fake = session();
    let (log, proxy) = (&fake.log, &mut fake.proxy);

    // 17 MiB: over the proxy's 16 MiB limit (and the TypeScript SDK's 10 MiB).
    let blob = "x".repeat(17 << 20);
    proxy.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{{"name":"echo","arguments":{{"blob":"{blob}"}}}}}}"#
    ));
    drop(blob);
    let (refused, line) = proxy.response_with_line(&json!("huge"));
    assert_eq!(refused["error"]["code"], json!(-32603), "{line}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("longer than 16777216 bytes"),
        "the error says why: {line}"
    );
    // Its diagnostic travels on stderr, another pipe, which may lag the response.
    eventually("the proxy to say it discarded the line", PATIENCE, || {
        let stderr = proxy.stderr();
        if stderr.contains("discarded a line from the host") {
            Ok(())
        } else {
            Err(stderr)
        }
    });

    proxy.send_raw(
        r#"{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"n":3}}}"#,
    );
    let answer = proxy.response(&json!("after"));
    assert_eq!(
        answer["result"]["content"][0]["text"],
        json!(r#"{"n": 3}"#),
        "{answer}"
    );
    // Nothing of the long line reached the server.
    let lines = after_handshake(&log.byte_lines());
    assert_eq!(lines.len(), 1, "{}", show_lines(&lines));
    assert!(
        lines[0].starts_with(br#"{"jsonrpc":"2.0","id":"after""#),
        "{}",
        show_lines(&lines)
    );
}
