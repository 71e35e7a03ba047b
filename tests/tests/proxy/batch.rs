//! JSON-RPC batches through the proxy (2025-03-26 allowed them on stdio): the host's batches
//! reach the fake byte for byte but for what the proxy owns, and a server batch asking for roots
//! is answered with a batch.

use serde_json::json;

use crate::support::{
    FakeSession, FakeSetup, add_wait, daemon_roots, emit_raw, list_changed_count,
    roots_answer_line, roots_answers, roots_result_text, show, show_lines,
};

#[test]
fn host_batches_carry_the_handshake_and_lose_only_the_hosts_list_changed() {
    let mut fake = FakeSession::start(
        "reference",
        FakeSetup {
            roots: &["a"],
            ..FakeSetup::default()
        },
    );
    let (sb, log, proxy) = (&fake.sb, &fake.log, &mut fake.proxy);
    let roots = roots_result_text(sb, "default");
    let b = sb.mkdir("b");

    // initialize inside a batch gains the roots capability where it stands.
    proxy.send_raw(
        r#"[{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{"sampling":{}},"clientInfo":{"name":"batcher","version":"1"}}}]"#,
    );
    let init = proxy.response(&json!("init"));
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        json!("fake-mcp"),
        "{init}"
    );

    // initialized inside a batch counts (the fake fetches after it, and the proxy notifies only
    // initialized servers); the host's own list_changed beside it is dropped.
    proxy.send_raw(
        r#"[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
    );
    let pong = proxy.response(&json!(2));
    assert_eq!(pong["result"], json!({}), "{pong}");
    log.wait_for("the answer to its first roots/list", |m| {
        !roots_answers(m).is_empty()
    });

    // A batch of nothing but the host's list_changed leaves nothing to forward; an empty batch
    // is not the proxy's to judge and passes as it is.
    proxy.send_raw(r#"[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]"#);
    proxy.send_raw("[]");
    proxy.send_raw(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    proxy.response(&json!(3));

    let expected = [
        r#"[{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{"sampling":{},"roots":{"listChanged":true}},"clientInfo":{"name":"batcher","version":"1"}}}]"#.to_owned(),
        r#"[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#.to_owned(),
        roots_answer_line("0", &roots),
        "[]".to_owned(),
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#.to_owned(),
    ];
    let lines = log.byte_lines();
    let expected_bytes: Vec<Vec<u8>> = expected.iter().map(|l| l.as_bytes().to_vec()).collect();
    assert!(
        lines == expected_bytes,
        "the fake received:\n{}\nexpected:\n{}",
        show_lines(&lines),
        expected.join("\n")
    );

    // The session is initialized: a change reaches the server, which fetches the new list.
    let (change, said) = add_wait(sb, &[&b], &[]);
    assert_eq!(change["notified_sessions"], json!(1), "{change}");
    assert!(said.contains("1 of 1"), "add --wait said {said:?}");
    let messages = log.wait_for_fetch_of(&daemon_roots(sb, "default"));
    assert_eq!(list_changed_count(&messages), 1, "{}", show(&messages));
    // The host saw the responses to its requests and nothing else.
    assert_eq!(proxy.received.len(), 3, "{}", show(&proxy.received));
}

#[test]
fn a_server_batch_asking_for_roots_is_answered_with_a_batch() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["a"],
            ..FakeSetup::default()
        },
    );
    let roots = roots_result_text(&fake.sb, "default");
    let (log, proxy) = (&fake.log, &mut fake.proxy);
    proxy.initialize();

    let note = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"between"}}"#;
    emit_raw(
        proxy,
        &format!(
            r#"[{{"jsonrpc":"2.0","id":"b1","method":"roots/list"}},{note},{{"jsonrpc":"2.0","id":7,"method":"roots/list"}}]"#
        ),
    );
    // The host gets what was not the proxy's, still as a batch.
    let (batch, line) = proxy.next_message_with_line();
    assert_eq!(line, format!("[{note}]"), "{batch}");

    let answer = format!(
        "[{},{}]",
        roots_answer_line(r#""b1""#, &roots),
        roots_answer_line("7", &roots)
    );
    log.wait_for_line(&answer);
    // One batch answer, and nothing else, came after the fake sent its batch.
    let lines = log.byte_lines();
    let emitted = lines
        .iter()
        .position(|l| l.windows(13).any(|w| w == b"test/emit_raw"))
        .expect("the fake logged the emit request");
    assert!(
        lines[emitted + 1..] == [answer.as_bytes().to_vec()],
        "{}",
        show_lines(&lines)
    );
}
