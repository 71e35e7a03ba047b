//! What the daemon does with input rootsctl would never send.

use rootsd_tests::{RawClient, Sandbox};
use serde_json::{Value, json};

use crate::support::status;

/// The biggest line the daemon must accept, newline excluded.
const MAX_LINE_BYTES: usize = 1 << 20;

/// `request` followed by spaces (which JSON allows after a value) to make `len` bytes.
fn padded(request: &str, len: usize) -> String {
    let line = format!("{request}{}", " ".repeat(len - request.len()));
    assert_eq!(line.len(), len);
    line
}

#[track_caller]
fn assert_error(response: &Value, id: Value, code: i64) {
    assert_eq!(response["jsonrpc"], json!("2.0"), "{response}");
    assert_eq!(response["id"], id, "{response}");
    assert_eq!(response["error"]["code"], json!(code), "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "an error says what went wrong: {response}"
    );
    assert!(response.get("result").is_none(), "{response}");
}

/// The one error a framing violation gets: id null, a code in JSON-RPC's reserved range.
#[track_caller]
fn assert_framing_error(line: Option<String>) -> String {
    let line = line.expect("an error response before the connection closes");
    let response: Value = serde_json::from_str(&line).expect("the error is JSON");
    let code = response["error"]["code"].as_i64().unwrap_or(0);
    assert!((-32768..=-32000).contains(&code), "{response}");
    assert_error(&response, Value::Null, code);
    response["error"]["message"].as_str().unwrap().to_owned()
}

#[track_caller]
fn assert_serves(client: &mut RawClient) {
    let response = client.request("status", json!({}));
    assert!(response["result"]["pid"].is_u64(), "{response}");
}

#[test]
fn garbage_gets_a_parse_error_and_the_connection_keeps_working() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut other = sb.connect();
    let mut client = sb.connect();
    for garbage in ["this is not json", "{\"jsonrpc\":", "\u{1}\u{2}", "}{"] {
        client.send_line(garbage);
        assert_error(&client.read_json(), Value::Null, -32700);
        assert_serves(&mut client);
    }
    // Valid JSON that is not a request object.
    client.send_line("[1, 2, 3]");
    assert_error(&client.read_json(), Value::Null, -32600);
    client.send_line(r#"{"jsonrpc":"2.0","id":77}"#);
    assert_error(&client.read_json(), json!(77), -32600);
    assert_serves(&mut client);
    assert_serves(&mut other);
}

#[test]
fn unknown_methods_and_wrong_params_get_their_error_codes() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut client = sb.connect();
    let unknown = client.request("roots.frobnicate", json!({}));
    assert_error(&unknown, unknown["id"].clone(), -32601);
    assert!(unknown["id"].is_u64(), "the id is echoed: {unknown}");

    for (method, params) in [
        ("roots.add", json!({"roots": 5})),
        ("roots.add", json!({"roots": [{"uri": 7}]})),
        ("roots.list", json!({"workspace": ["default"]})),
        ("roots.remove", json!({"targets": "everything"})),
        ("watch", json!({"workspace": 3})),
    ] {
        let response = client.request(method, params.clone());
        assert_error(&response, response["id"].clone(), -32602);
        assert!(response["id"].is_u64(), "{method} {params}: {response}");
    }
    // String ids are echoed as they came.
    client.send_line(r#"{"jsonrpc":"2.0","id":"abc","method":"nope"}"#);
    assert_error(&client.read_json(), json!("abc"), -32601);
    assert_serves(&mut client);
    assert_eq!(status(&sb)["revision"], json!(0), "nothing was changed");
}

#[test]
fn requests_before_hello_are_refused_until_hello() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut client = RawClient::connect(&sb.socket);
    for method in ["status", "roots.list", "roots.add"] {
        let response = client.request(method, json!({}));
        assert_error(&response, response["id"].clone(), -32001);
    }
    let hello = client.request(
        "hello",
        json!({"protocol_version": rootsd_tests::PROTOCOL_VERSION, "client": "late"}),
    );
    assert_eq!(
        hello["result"]["protocol_version"],
        json!(rootsd_tests::PROTOCOL_VERSION),
        "{hello}"
    );
    assert_serves(&mut client);
}

#[test]
fn a_line_of_exactly_the_limit_is_served() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut client = sb.connect();
    let request = r#"{"jsonrpc":"2.0","id":41,"method":"status","params":{}}"#;
    let line = padded(request, MAX_LINE_BYTES);
    client.send_line(&line);
    let response = client.read_json();
    assert_eq!(response["id"], json!(41), "{response}");
    assert!(response["result"]["pid"].is_u64(), "{response}");
}

#[test]
fn an_over_long_line_closes_only_its_connection() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut bystander = sb.connect();
    let mut client = sb.connect();
    // A valid request, one byte too long: the limit is about length, not content.
    let request = r#"{"jsonrpc":"2.0","id":42,"method":"status","params":{}}"#;
    let line = padded(request, MAX_LINE_BYTES + 1);
    client.send_line(&line);
    let message = assert_framing_error(client.read_line());
    assert!(
        message.contains("1048576"),
        "the message gives the limit: {message}"
    );
    assert_eq!(client.read_line(), None, "the connection is closed");

    assert_serves(&mut bystander);
    assert_serves(&mut sb.connect());
}

#[test]
fn invalid_utf8_closes_only_its_connection() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut bystander = sb.connect();
    let mut client = sb.connect();
    client.send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":43,\"method\":\"status\",\"x\":\"\xff\xfe\"}");
    let message = assert_framing_error(client.read_line());
    assert!(message.contains("UTF-8"), "{message}");
    assert_eq!(client.read_line(), None, "the connection is closed");

    assert_serves(&mut bystander);
    assert_serves(&mut sb.connect());
    // rootsctl too.
    sb.ctl_ok(&["list"]);
}

#[test]
fn a_session_that_never_reads_delays_nobody_else() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon();
    let register = |client: &mut RawClient| {
        let reply = client.request(
            "session.register",
            json!({"workspace": "w", "pid": 1, "list_changed": true}),
        );
        assert!(reply.get("result").is_some(), "register failed: {reply}");
    };
    // This session registers and then never reads: its socket buffer fills with pushes.
    let mut stuck = sandbox.connect();
    register(&mut stuck);
    let mut reader = sandbox.connect();
    register(&mut reader);
    let mut control = sandbox.connect();
    let long_name = "n".repeat(4000);
    let mut revision = 0;
    // Each push carries the whole list, so 80 changes send the stuck session megabytes.
    for i in 0..80 {
        let reply = control.request(
            "roots.add",
            json!({"workspace": "w", "roots": [{"uri": format!("file:///stuck/d{i}"), "name": long_name}]}),
        );
        revision = reply["result"]["revision"]
            .as_u64()
            .unwrap_or_else(|| panic!("add {i} failed: {reply}"));
    }
    // The reading session still gets the newest list, even though pushes to it were coalesced.
    loop {
        let pushed = reader.read_json();
        assert_eq!(pushed["method"], "roots.changed");
        if pushed["params"]["revision"].as_u64() == Some(revision) {
            assert_eq!(pushed["params"]["roots"].as_array().map(Vec::len), Some(80));
            break;
        }
    }
    assert_serves(&mut control);
}

#[test]
fn a_client_of_another_protocol_version_is_refused_with_both_versions_named() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut client = RawClient::connect(&sb.socket);
    let refused = client.request(
        "hello",
        json!({"protocol_version": rootsd_tests::PROTOCOL_VERSION + 1, "client": "rootsctl 9.0.0"}),
    );
    assert_error(&refused, refused["id"].clone(), -32000);
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "rootsctl 9.0.0 speaks control protocol {}",
            rootsd_tests::PROTOCOL_VERSION + 1
        )) && message.contains(&format!("speaks {}", rootsd_tests::PROTOCOL_VERSION)),
        "{message}"
    );
    // Refused means not greeted: other requests are still turned away.
    let status = client.request("status", json!({}));
    assert_error(&status, status["id"].clone(), -32001);
}

#[test]
fn rootsctl_refuses_a_daemon_of_another_protocol_version_and_names_the_side_to_update() {
    // A stand-in daemon from a future release greets with a newer protocol: restarting it would not
    // help, this rootsctl is the one behind.
    let sb = Sandbox::new();
    let fake = rootsd_tests::fake_daemon(&sb.socket, |hello| {
        json!({"jsonrpc": "2.0", "id": hello["id"], "result":
            {"protocol_version": rootsd_tests::PROTOCOL_VERSION + 1, "daemon_version": "9.0.0", "pid": 1}})
    });
    let output = sb.ctl(&["status"]);
    fake.join().unwrap();
    crate::support::assert_exit(&output, 1, "status against a newer daemon");
    let stderr = crate::support::stderr_of(&output);
    assert!(
        stderr.contains("rootsd 9.0.0")
            && stderr.contains(&format!(
                "speaks control protocol {}, newer than",
                rootsd_tests::PROTOCOL_VERSION + 1
            ))
            && stderr.contains("upgrade rootsctl to rootsd 9.0.0's release"),
        "{stderr}"
    );
    assert!(!stderr.contains("restart"), "{stderr}");

    // One from an older release, still running after an upgrade: it must be restarted.
    let sb = Sandbox::new();
    let fake = rootsd_tests::fake_daemon(&sb.socket, |hello| {
        json!({"jsonrpc": "2.0", "id": hello["id"], "result":
            {"protocol_version": 0, "daemon_version": "0.0.1", "pid": 1}})
    });
    let output = sb.ctl(&["status"]);
    fake.join().unwrap();
    crate::support::assert_exit(&output, 1, "status against an older daemon");
    let stderr = crate::support::stderr_of(&output);
    assert!(
        stderr.contains("speaks control protocol 0, older than")
            && stderr.contains("restart rootsd, so that the one from rootsctl"),
        "{stderr}"
    );
    assert!(!stderr.contains("upgrade rootsctl"), "{stderr}");
}

#[test]
fn rootsctl_explains_a_daemon_that_refuses_its_protocol_version() {
    // What every rootsd answers a hello of another protocol: -32000, with the versions in words.
    let sb = Sandbox::new();
    let refusal = "rootsctl 0.1.0 speaks control protocol 1 but this rootsd 0.2.0 (pid 4242) speaks 2: use rootsctl and rootsd from the same release, and restart the daemon after upgrading";
    let fake = rootsd_tests::fake_daemon(
        &sb.socket,
        move |hello| json!({"jsonrpc": "2.0", "id": hello["id"], "error": {"code": -32000, "message": refusal}}),
    );
    let output = sb.ctl(&["status"]);
    fake.join().unwrap();
    crate::support::assert_exit(&output, 1, "status against a daemon refusing its protocol");
    let stderr = crate::support::stderr_of(&output);
    assert!(
        stderr.contains(&format!(
            "rootsd at {} refused the hello of rootsctl",
            sb.socket.display()
        )) && stderr.contains(refusal)
            && stderr.contains("after an upgrade, restart rootsd")
            && stderr.contains("if rootsd is the newer one, upgrade rootsctl"),
        "{stderr}"
    );
}

#[test]
fn ids_come_back_exactly_as_spelt() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut client = sb.connect();
    // Numbers no f64 holds exactly, or at all, and strings with escapes: a client matches its
    // answers by the id it sent, so the id must come back as the same text.
    for id in [
        "123456789012345678901234567890",
        "1e400",
        "1.50",
        r#""caf\u00e9""#,
    ] {
        client.send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"status","params":{{}}}}"#
        ));
        let line = client.read_line().expect("an answer");
        assert!(
            line.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#)),
            "{line}"
        );
    }
}
