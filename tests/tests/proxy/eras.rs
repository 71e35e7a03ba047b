//! How a session's era is settled, as `rootsctl sessions --json` shows it: a host that probes with
//! `server/discover` and falls back to `initialize`, and a server that refuses `initialize`.

use serde_json::json;

use crate::support::{
    FakeSession, FakeSetup, HANDSHAKE_VERSION, add_wait, daemon_roots, list_changed_count,
    modern_meta, roots_answers, show,
};

#[test]
fn server_discover_refused_then_initialize_makes_a_handshake_session_that_is_notified() {
    let mut fake = FakeSession::start(
        "reference",
        FakeSetup {
            roots: &["a"],
            ..FakeSetup::default()
        },
    );
    let (sb, log, proxy) = (&fake.sb, &fake.log, &mut fake.proxy);
    let b = sb.mkdir("b");

    // A dual-era host probes first, as the 2026-07-28 stdio transport advises.
    proxy.send(
        &json!({"jsonrpc": "2.0", "id": "probe", "method": "server/discover",
                       "params": {"_meta": modern_meta()}}),
    );
    let refused = proxy.response(&json!("probe"));
    assert_eq!(refused["error"]["code"], json!(-32601), "{refused}");

    // It falls back to the handshake.
    let init = proxy.initialize();
    assert_eq!(
        init["result"]["protocolVersion"],
        json!(HANDSHAKE_VERSION),
        "{init}"
    );
    log.wait_for("the answer to its roots/list", |m| {
        !roots_answers(m).is_empty()
    });
    let session = fake.session("the handshake era", |s| {
        s["era"] == json!("handshake") && s["server"]["name"] == json!("fake-mcp")
    });
    assert_eq!(
        session["protocol_version"],
        json!(HANDSHAKE_VERSION),
        "{session}"
    );
    assert_eq!(session["list_changed"], json!(true), "{session}");

    let (change, said) = add_wait(sb, &[&b], &[]);
    assert_eq!(change["notified_sessions"], json!(1), "{change}");
    assert!(said.contains("1 of 1"), "add --wait said {said:?}");
    let messages = log.wait_for_fetch_of(&daemon_roots(sb, "default"));
    assert_eq!(list_changed_count(&messages), 1, "{}", show(&messages));
}

#[test]
fn a_refused_initialize_reaches_the_host_and_leaves_the_era_unknown() {
    let mut fake = FakeSession::start(
        "refuse-init",
        FakeSetup {
            roots: &["a"],
            ..FakeSetup::default()
        },
    );
    let (sb, log, proxy) = (&fake.sb, &fake.log, &mut fake.proxy);
    let b = sb.mkdir("b");

    // A version no server speaks, so that the session shows this request was seen.
    proxy.send_raw(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-01-01","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}"#,
    );
    let (_, line) = proxy.response_with_line(&json!(0));
    assert_eq!(
        line,
        r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32602,"message":"Unsupported protocol version"}}"#
    );
    // Nothing was negotiated: no era, no version (2024-01-01 was only asked for), no promise of
    // list_changed. While the initialize was in flight the session showed what it asked for.
    let session = fake.session("the refused initialize", |s| {
        s["era"] == json!("unknown") && s["list_changed"] == json!(false)
    });
    assert_eq!(session.get("protocol_version"), None, "{session}");
    assert_eq!(session["server"], json!(null), "{session}");

    // Nothing was negotiated, so a change is announced to nobody.
    let (change, _) = add_wait(sb, &[&b], &[]);
    assert_eq!(change["notified_sessions"], json!(0), "{change}");
    let messages = log.messages();
    assert_eq!(list_changed_count(&messages), 0, "{}", show(&messages));
}
