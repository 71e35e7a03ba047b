//! What the proxy does not own passes through it byte for byte, in both directions: a
//! handshake-era server's sampling and elicitation requests to the host and the host's answers,
//! and `ping` either way. Odd spacing, key order, escapes and non-ASCII text are there on purpose:
//! a proxy that re-serialised anything would change them.

use serde_json::json;

use crate::support::{FakeSession, FakeSetup, emit_raw, show_lines};

/// A handshake-era session with the fake, initialized, the host declaring sampling and
/// elicitation as a host that answers them does.
fn handshake_session() -> FakeSession {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["a"],
            ..FakeSetup::default()
        },
    );
    let proxy = &mut fake.proxy;
    let id = proxy.send_initialize(json!({"sampling": {}, "elicitation": {"form": {}}}));
    let response = proxy.response(&id);
    proxy.finish_initialize(&response);
    fake
}

#[test]
fn sampling_and_elicitation_pass_between_server_and_host_byte_for_byte() {
    let mut fake = handshake_session();
    let (log, proxy) = (&fake.log, &mut fake.proxy);

    let exchanges = [
        (
            r#"{"jsonrpc":"2.0", "id":"s-1","method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"Résumé \u2028 \"quoted\" ✓"}}],"maxTokens":5,"temperature":0.70,"_meta":{"progressToken":"p"}}}"#,
            r#"{"result":{"role":"assistant","content":{"type":"text","text":"ok ✓ \u00e9"},"model":"m-1","stopReason":"endTurn"},"id":"s-1","jsonrpc":"2.0"}"#,
        ),
        (
            r#"{"method":"elicitation/create","jsonrpc":"2.0","id":17,"params":{"mode":"form","message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}"#,
            r#"{"jsonrpc":"2.0","id":17,"result":{"action":"accept","content":{"name":"Ada  Lovelace"}}}"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":18,"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{}}}}"#,
            r#"{"jsonrpc":"2.0","id":18,"error":{"code":-1,"message":"user declined the dialog"}}"#,
        ),
    ];
    for (request, answer) in exchanges {
        emit_raw(proxy, request);
        let (message, line) = proxy.next_message_with_line();
        assert_eq!(line, request, "the host got {message}");
        proxy.send_raw(answer);
        log.wait_for_line(answer);
    }
    assert_eq!(proxy.received_raw.len(), 4, "{:?}", proxy.received_raw);
}

#[test]
fn ping_passes_both_ways() {
    let mut fake = handshake_session();
    let (log, proxy) = (&fake.log, &mut fake.proxy);

    // The host pings the server.
    let host_ping = r#"{"jsonrpc":"2.0","id":"ping-1","method":"ping"}"#;
    proxy.send_raw(host_ping);
    let (pong, line) = proxy.response_with_line(&json!("ping-1"));
    assert_eq!(
        line, r#"{"jsonrpc":"2.0","id":"ping-1","result":{}}"#,
        "{pong}"
    );
    log.wait_for_line(host_ping);

    // The server pings the host.
    let server_ping = r#"{"jsonrpc":"2.0","id":99,"method":"ping"}"#;
    emit_raw(proxy, server_ping);
    let (message, line) = proxy.next_message_with_line();
    assert_eq!(line, server_ping, "the host got {message}");
    let host_pong = r#"{"jsonrpc":"2.0","id":99,"result":{}}"#;
    proxy.send_raw(host_pong);
    log.wait_for_line(host_pong);

    // Each crossed once.
    let lines = log.byte_lines();
    for line in [host_ping, host_pong] {
        let seen = lines.iter().filter(|l| *l == line.as_bytes()).count();
        assert_eq!(seen, 1, "{line}:\n{}", show_lines(&lines));
    }
}
