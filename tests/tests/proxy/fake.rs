//! The proxy in front of the scripted fake server (tests/fixtures/fake_mcp_server.py), which logs
//! every line it receives, so that these tests assert exactly what reached the server.

use std::time::{Duration, Instant};

use rootsd_tests::{PATIENCE, eventually};
use serde_json::{Value, json};

use crate::support::{
    FakeLog, FakeSession, FakeSetup, MODERN_VERSION, Proxy, add_wait, assert_exit, calls_of,
    caps_with_roots, daemon_roots, emit, fake_server, is_method, is_response_to,
    list_changed_count, modern_call, modern_meta, roots_answers, round_trip, show,
    wait_for_no_sessions, wait_for_session,
};

/// The fake's `requestState` values (see the script); they must come back unchanged.
const STATE_ROOTS: &str = "st-1/\"roots\" \\ é\u{2028}{\"x\":1}==";
const STATE_MIXED: &str = "st-2/\"mixed\" \\ ü{\"y\":[2]}";

/// A session whose daemon held one root (directory `a`), then went away before the proxy started.
fn stored_root_without_daemon(scenario: &str) -> FakeSession {
    FakeSession::start(
        scenario,
        FakeSetup {
            roots: &["a"],
            daemon_gone: true,
            ..FakeSetup::default()
        },
    )
}

/// A session whose daemon holds one root (directory `a`) and is running.
fn one_root(scenario: &str) -> FakeSession {
    FakeSession::start(
        scenario,
        FakeSetup {
            roots: &["a"],
            ..FakeSetup::default()
        },
    )
}

/// Asserts that the host saw no server-initiated message (roots/list, cancellations, …).
#[track_caller]
fn assert_host_saw_only_responses(proxy: &Proxy) {
    let requests: Vec<&Value> = proxy
        .received
        .iter()
        .filter(|m| m.get("method").is_some())
        .collect();
    assert!(requests.is_empty(), "the host saw {requests:?}");
}

#[test]
fn modern_input_required_for_roots_is_answered_by_the_proxy() {
    let mut fake = one_root("quiet");
    fake.registered();
    let roots = fake.roots();
    let (sb, log, proxy) = (&fake.sb, &fake.log, &mut fake.proxy);
    let b = sb.mkdir("b");

    // No initialize: a 2026-07-28 host just calls.
    let arguments = json!({"path": "/x", "deep": {"list": [1, 2]}});
    proxy.send(&modern_call(json!(7), "needs_roots", arguments.clone()));
    let response = proxy.response(&json!(7));
    assert_eq!(
        response["result"]["resultType"],
        json!("complete"),
        "{response}"
    );
    assert_eq!(
        response["result"]["structuredContent"]["inputResponses"],
        json!({"ws": {"roots": roots}}),
        "{response}"
    );
    assert_eq!(proxy.received.len(), 1, "{:?}", proxy.received);

    let messages = log.messages();
    let calls = calls_of(&messages, "needs_roots");
    assert_eq!(calls.len(), 2, "{}", show(&messages));
    let (first, retry) = (&calls[0], &calls[1]);
    assert_eq!(first["id"], json!(7));
    assert_eq!(first["params"]["arguments"], arguments);
    assert!(first["params"].get("inputResponses").is_none(), "{first}");
    assert!(first["params"].get("requestState").is_none(), "{first}");
    let meta = &first["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        caps_with_roots()
    );
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        json!(MODERN_VERSION)
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"],
        modern_meta()["io.modelcontextprotocol/clientInfo"]
    );

    let retry_id = retry["id"].as_str().unwrap_or_else(|| panic!("{retry}"));
    assert!(retry_id.starts_with("rootsd-retry-"), "{retry}");
    assert_eq!(
        retry["params"]["inputResponses"],
        json!({"ws": {"roots": roots}}),
        "{retry}"
    );
    assert_eq!(
        retry["params"]["requestState"],
        json!(STATE_ROOTS),
        "{retry}"
    );
    assert_eq!(retry["params"]["name"], json!("needs_roots"));
    assert_eq!(retry["params"]["arguments"], arguments);
    assert_eq!(retry["params"]["_meta"], first["params"]["_meta"]);

    let session = wait_for_session(sb, proxy.pid(), "the stateless era", |s| {
        s["era"] == json!("stateless") && s["server"].is_object()
    });
    assert_eq!(
        session["protocol_version"],
        json!(MODERN_VERSION),
        "{session}"
    );
    assert_eq!(session["server"]["name"], json!("fake-mcp"), "{session}");
    assert_eq!(session["fetched_revision"], json!(1), "{session}");

    // A change is not announced to a stateless session, and --wait does not wait for it.
    let (change, said) = add_wait(sb, &[&b], &[]);
    assert_eq!(change["notified_sessions"], json!(0), "{change}");
    assert!(said.contains("0 of 0"), "add --wait said {said:?}");
    let new_roots = daemon_roots(sb, "default");
    // Call until the proxy answers with the new list: it has the change then, and any
    // list_changed it sent for it reached the fake before that retry.
    let mut id = 100;
    eventually("the proxy to answer with the new roots", PATIENCE, || {
        id += 1;
        proxy.send(&modern_call(json!(id), "needs_roots", json!({})));
        let response = proxy.response(&json!(id));
        let got = &response["result"]["structuredContent"]["inputResponses"]["ws"]["roots"];
        if *got == new_roots {
            Ok(())
        } else {
            Err(response)
        }
    });
    round_trip(proxy);
    let messages = log.messages();
    assert_eq!(
        list_changed_count(&messages),
        0,
        "a stateless session was sent list_changed:\n{}",
        show(&messages)
    );
    assert!(
        !messages.iter().any(|m| is_method(m, "initialize")),
        "the proxy invented a handshake"
    );
    let session = wait_for_session(sb, proxy.pid(), "the new fetch", |s| {
        s["fetched_revision"] == change["revision"]
    });
    assert_eq!(session["notifications_sent"], json!(0), "{session}");
    assert_host_saw_only_responses(proxy);
}

#[test]
fn mixed_input_required_leaves_elicitation_to_the_host_and_adds_roots_to_its_retry() {
    let mut fake = one_root("quiet");
    fake.registered();
    let roots = fake.roots();
    let (log, proxy) = (&fake.log, &mut fake.proxy);

    proxy.send(&modern_call(
        json!("host-1"),
        "needs_roots_and_elicit",
        json!({"n": 1}),
    ));
    let asked = proxy.response(&json!("host-1"));
    let result = &asked["result"];
    assert_eq!(result["resultType"], json!("input_required"), "{asked}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        vec!["confirm"],
        "only the elicitation is the host's to answer: {asked}"
    );
    assert_eq!(requests["confirm"]["method"], json!("elicitation/create"));
    assert_eq!(result["requestState"], json!(STATE_MIXED), "{asked}");

    let elicited = json!({"action": "accept", "content": {"ok": true}});
    let mut retry = modern_call(json!("host-2"), "needs_roots_and_elicit", json!({"n": 1}));
    retry["params"]["inputResponses"] = json!({"confirm": elicited});
    retry["params"]["requestState"] = result["requestState"].clone();
    proxy.send(&retry);
    let done = proxy.response(&json!("host-2"));
    assert_eq!(done["result"]["resultType"], json!("complete"), "{done}");
    let both = json!({"ws": {"roots": roots}, "confirm": elicited});
    assert_eq!(
        done["result"]["structuredContent"]["inputResponses"], both,
        "{done}"
    );
    assert_eq!(proxy.received.len(), 2, "{:?}", proxy.received);

    let messages = log.messages();
    let calls = calls_of(&messages, "needs_roots_and_elicit");
    assert_eq!(calls.len(), 2, "{}", show(&messages));
    assert_eq!(calls[0]["id"], json!("host-1"));
    assert_eq!(
        calls[1]["id"],
        json!("host-2"),
        "the host's retry keeps its id"
    );
    assert_eq!(calls[1]["params"]["inputResponses"], both, "{}", calls[1]);
    assert_eq!(calls[1]["params"]["requestState"], json!(STATE_MIXED));
    assert_eq!(
        calls[1]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        caps_with_roots()
    );
}

#[test]
fn a_cancelled_roots_list_waiting_for_the_daemon_is_never_answered() {
    let mut fake = stored_root_without_daemon("quiet");
    let (sb, log, proxy) = (&fake.sb, &fake.log, &mut fake.proxy);
    let daemon = &mut fake.daemon;
    proxy.initialize();
    // The proxy relays while the daemon is unreachable.
    round_trip(proxy);

    emit(
        proxy,
        json!({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"}),
    );
    emit(
        proxy,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": "r1", "reason": "no longer needed"}}),
    );
    emit(
        proxy,
        json!({"jsonrpc": "2.0", "id": "r2", "method": "roots/list"}),
    );
    round_trip(proxy);
    let messages = log.messages();
    assert!(
        roots_answers(&messages).is_empty(),
        "answered without a list: {}",
        show(&messages)
    );

    *daemon = Some(sb.start_daemon());
    let messages = log.wait_for("the answer to r2", |m| {
        m.iter().any(|m| is_response_to(m, &json!("r2")))
    });
    let answer = messages
        .iter()
        .find(|m| is_response_to(m, &json!("r2")))
        .unwrap();
    assert_eq!(
        answer["result"],
        json!({"roots": daemon_roots(sb, "default")}),
        "{answer}"
    );
    // r1 would have been answered before r2: it never will be.
    round_trip(proxy);
    let messages = log.messages();
    assert!(
        !messages.iter().any(|m| m.get("id") == Some(&json!("r1"))),
        "the cancelled roots/list was answered:\n{}",
        show(&messages)
    );
    assert_eq!(roots_answers(&messages).len(), 1, "{}", show(&messages));
    assert_host_saw_only_responses(proxy);
}

#[test]
fn a_roots_list_before_initialized_is_answered_and_list_changed_waits_for_initialized() {
    let mut fake = one_root("early");
    let first_roots = fake.roots();
    let (sb, log, proxy) = (&fake.sb, &fake.log, &mut fake.proxy);
    let b = sb.mkdir("b");

    let id = proxy.send_initialize(json!({}));
    let init = proxy.response(&id);
    assert!(init.get("result").is_some(), "{init}");
    // The fake asked right after its initialize result; the host has not sent initialized.
    let messages = log.wait_for("the answer to its early roots/list", |m| {
        m.iter().any(|m| is_response_to(m, &json!(0)))
    });
    let answer = messages
        .iter()
        .find(|m| is_response_to(m, &json!(0)))
        .unwrap();
    assert_eq!(answer["result"], json!({"roots": first_roots}), "{answer}");

    // A change before initialized: no list_changed may reach the server yet.
    sb.ctl_ok(&["add", b.to_str().unwrap()]);
    let session = wait_for_session(sb, proxy.pid(), "registration", |_| true);
    assert_eq!(session["notifications_sent"], json!(0), "{session}");
    round_trip(proxy);
    proxy.notify("notifications/initialized", json!({}));

    // Then it does, and the fake fetches the new list.
    let new_roots = daemon_roots(sb, "default");
    let messages = log.wait_for("a fetch of the new list", |m| {
        roots_answers(m)
            .last()
            .is_some_and(|a| a["result"] == json!({"roots": new_roots}))
    });
    let position = |f: &dyn Fn(&Value) -> bool| messages.iter().position(f);
    let initialized = position(&|m| is_method(m, "notifications/initialized")).unwrap();
    let notified = position(&|m| is_method(m, "notifications/roots/list_changed"))
        .unwrap_or_else(|| panic!("no list_changed:\n{}", show(&messages)));
    assert!(
        initialized < notified,
        "list_changed reached the server before initialized:\n{}",
        show(&messages)
    );
    assert_eq!(list_changed_count(&messages), 1, "{}", show(&messages));
    assert_host_saw_only_responses(proxy);
}

#[test]
fn a_burst_of_changes_is_coalesced_and_the_last_fetch_is_the_final_list() {
    const CHANGES: usize = 100;
    // `hold`: the fake fetches on every list_changed, but only once released.
    let mut fake = FakeSession::start(
        "hold",
        FakeSetup {
            roots: &["base"],
            ..FakeSetup::default()
        },
    );
    let first = fake.roots();
    let (sb, log, proxy) = (&fake.sb, &fake.log, &mut fake.proxy);
    let dirs: Vec<_> = (0..CHANGES)
        .map(|i| sb.mkdir(&format!("burst/d{i:03}")))
        .collect();
    proxy.initialize();
    log.wait_for("the first fetch", |m| {
        roots_answers(m)
            .first()
            .is_some_and(|a| a["result"] == json!({"roots": first}))
    });

    // 100 changes, pipelined on one connection.
    let mut client = sb.connect();
    for (i, dir) in dirs.iter().enumerate() {
        let uri = url::Url::from_file_path(dir)
            .expect("an absolute path")
            .to_string();
        client.send_line(
            &json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "roots.add",
                    "params": {"workspace": "default", "roots": [{"uri": uri}]}})
            .to_string(),
        );
    }
    for _ in 0..CHANGES {
        let response = client.read_json();
        assert!(response.get("result").is_some(), "{response}");
    }
    let last = daemon_roots(sb, "default");
    assert_eq!(last.as_array().map(Vec::len), Some(CHANGES + 1));

    // The fake has not fetched again, so exactly one notification is outstanding.
    log.wait_for("a list_changed", |m| list_changed_count(m) >= 1);
    round_trip(proxy);
    let messages = log.messages();
    assert_eq!(list_changed_count(&messages), 1, "{}", show(&messages));

    proxy.notify("test/release", json!({}));
    let messages = log.wait_for("a fetch of the final list", |m| {
        roots_answers(m)
            .last()
            .is_some_and(|a| a["result"] == json!({"roots": last}))
    });
    let count = list_changed_count(&messages);
    assert!(
        (1..=10).contains(&count),
        "{count} list_changed for a burst:\n{}",
        show(&messages)
    );
    // Nothing more follows: the server holds the newest list.
    round_trip(proxy);
    let messages = log.messages();
    assert_eq!(list_changed_count(&messages), count, "{}", show(&messages));
    let session = wait_for_session(sb, proxy.pid(), "the final fetch", |s| {
        s["fetched_revision"] == json!(CHANGES + 1)
    });
    assert_eq!(session["notifications_sent"], json!(count), "{session}");
    assert_host_saw_only_responses(proxy);
}

#[test]
fn the_hosts_list_changed_is_dropped_and_initialize_keeps_its_other_capabilities() {
    let mut fake = FakeSession::start("quiet", FakeSetup::default());
    let (sb, log, proxy) = (&fake.sb, &fake.log, &mut fake.proxy);

    let params = json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {
            "sampling": {"tools": {}},
            "elicitation": {"form": {}, "url": {}},
            "experimental": {"com.example/x": {"deep": [1, 2, {"k": "v"}]}},
            "roots": {"listChanged": false},
        },
        "clientInfo": {"name": "host", "title": "A Host", "version": "3.1"},
        "_meta": {"progressToken": "p-1"},
    });
    proxy.send(&json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params}));
    let init = proxy.response(&json!("init"));
    assert!(init.get("result").is_some(), "{init}");
    proxy.notify("notifications/roots/list_changed", json!({}));
    proxy.notify("notifications/initialized", json!({}));
    proxy.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#);
    // Anything else passes byte for byte, odd spacing and key order included.
    let odd = r#"{ "params" : {"arguments":{"z":1,"a":[true,null]},"name":"echo"}, "method":"tools/call","id":"odd" , "jsonrpc":"2.0"}"#;
    proxy.send_raw(odd);
    let echoed = proxy.response(&json!("odd"));
    assert!(echoed.get("result").is_some(), "{echoed}");

    let messages = log.messages();
    let seen = messages
        .iter()
        .find(|m| is_method(m, "initialize"))
        .unwrap_or_else(|| panic!("{}", show(&messages)));
    let mut expected = params.clone();
    expected["capabilities"]["roots"] = json!({"listChanged": true});
    assert_eq!(seen["params"], expected);
    assert_eq!(seen["id"], json!("init"));
    assert_eq!(
        list_changed_count(&messages),
        0,
        "the host's list_changed reached the server:\n{}",
        show(&messages)
    );
    assert!(
        messages
            .iter()
            .any(|m| is_method(m, "notifications/initialized"))
    );
    assert!(
        log.raw_lines().iter().any(|l| l == odd),
        "the echo call was rewritten: {:?}",
        log.raw_lines()
    );

    // With --no-list-changed the server is told roots without listChanged.
    let log = FakeLog::new(sb, "fake-nlc");
    let mut proxy = Proxy::spawn(sb, &["--no-list-changed"], &fake_server("quiet", &log));
    let id = proxy.send_initialize(json!({"sampling": {}}));
    let init = proxy.response(&id);
    assert!(init.get("result").is_some(), "{init}");
    let messages = log.messages();
    let seen = messages
        .iter()
        .find(|m| is_method(m, "initialize"))
        .unwrap();
    assert_eq!(
        seen["params"]["capabilities"],
        json!({"sampling": {}, "roots": {}}),
        "{seen}"
    );
}

#[test]
fn a_server_that_keeps_asking_for_roots_gets_ten_retries_then_the_host_gets_an_error() {
    let mut fake = one_root("quiet");
    fake.registered();
    let roots = fake.roots();
    let (log, proxy) = (&fake.log, &mut fake.proxy);

    proxy.send(&modern_call(json!(21), "always_roots", json!({})));
    let response = proxy.response(&json!(21));
    let error = response
        .get("error")
        .unwrap_or_else(|| panic!("expected a JSON-RPC error, got {response}"));
    assert!(error["code"].is_i64(), "{response}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{response}"
    );
    assert!(response.get("result").is_none(), "{response}");

    round_trip(proxy);
    let messages = log.messages();
    let calls = calls_of(&messages, "always_roots");
    assert_eq!(
        calls.len(),
        11,
        "the original and 10 retries:\n{}",
        show(&messages)
    );
    assert_eq!(calls[0]["id"], json!(21));
    let mut ids = std::collections::BTreeSet::new();
    for (round, call) in calls.iter().enumerate().skip(1) {
        let id = call["id"].as_str().unwrap_or_else(|| panic!("{call}"));
        assert!(id.starts_with("rootsd-retry-"), "{call}");
        assert!(ids.insert(id.to_owned()), "retry id {id} reused");
        assert_eq!(
            call["params"]["requestState"],
            json!(format!("round-{round}"))
        );
        assert_eq!(
            call["params"]["inputResponses"],
            json!({"ws": {"roots": roots}})
        );
    }
    assert_eq!(proxy.received.len(), 2, "{:?}", proxy.received);
}

#[test]
fn the_proxy_exits_with_the_servers_exit_status() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            server_args: &["--exit-code", "7"],
            ..FakeSetup::default()
        },
    );
    let (sb, proxy) = (&fake.sb, &mut fake.proxy);
    proxy.initialize();
    round_trip(proxy);
    proxy.close_stdin();
    let status = proxy.wait_exit();
    assert_eq!(status.code(), Some(7), "stderr:\n{}", proxy.final_stderr());
    wait_for_no_sessions(sb);
}

#[test]
fn modern_input_required_before_the_first_list_waits_for_the_daemons_list() {
    let mut fake = stored_root_without_daemon("quiet");
    let (sb, log, proxy) = (&fake.sb, &fake.log, &mut fake.proxy);
    let daemon = &mut fake.daemon;
    proxy.send(&modern_call(json!(7), "needs_roots", json!({})));
    // Once this returns, the proxy has read the fake's input_required for call 7.
    round_trip(proxy);

    *daemon = Some(sb.start_daemon());
    let roots = daemon_roots(sb, "default");
    let response = proxy.response(&json!(7));
    let messages = log.messages();
    let retries: Vec<Value> = calls_of(&messages, "needs_roots").split_off(1);
    assert!(!retries.is_empty(), "{}", show(&messages));
    for retry in &retries {
        assert_eq!(
            retry["params"]["inputResponses"],
            json!({"ws": {"roots": roots}}),
            "the proxy answered for roots it did not have yet:\n{}",
            show(&messages)
        );
    }
    assert_eq!(
        response["result"]["structuredContent"]["inputResponses"],
        json!({"ws": {"roots": roots}}),
        "{response}"
    );
}

#[test]
fn add_wait_does_not_wait_for_a_session_whose_server_never_asked_for_roots() {
    // A server that does not use roots: it never sends roots/list, so the proxy never sends it
    // list_changed either (it only notifies servers that fetched before).
    let mut fake = FakeSession::start("quiet", FakeSetup::default());
    let (sb, log, proxy) = (&fake.sb, &fake.log, &mut fake.proxy);
    let a = sb.mkdir("a");
    proxy.initialize();
    round_trip(proxy);
    wait_for_session(sb, proxy.pid(), "the handshake era", |s| {
        s["era"] == json!("handshake")
    });

    let started = Instant::now();
    let output = sb.ctl(&[
        "add",
        a.to_str().unwrap(),
        "--wait",
        "--timeout",
        "60",
        "--json",
    ]);
    assert_exit(
        &output,
        0,
        "add --wait with a session that is never notified",
    );
    // Waiting for the session would take the whole 60 s timeout (the harness gives up on a
    // command after 20 s); a command that does not wait takes milliseconds, and 15 s leaves
    // slack for a loaded machine where a bound just under the timeout did not.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}: add --wait waited for a session that is never notified",
        started.elapsed()
    );
    let change: Value = serde_json::from_slice(&output.stdout).expect("add --json");
    assert_eq!(change["notified_sessions"], json!(0), "{change}");
    round_trip(proxy);
    assert_eq!(list_changed_count(&log.messages()), 0);
}

#[test]
fn a_server_refused_roots_while_rootsd_was_away_is_told_once_it_is_back() {
    let mut fake = stored_root_without_daemon("reference");
    let started = fake.spawned;
    let (sb, log, proxy) = (&fake.sb, &fake.log, &mut fake.proxy);
    let daemon = &mut fake.daemon;
    proxy.initialize();
    // The fake asks right after initialized; with no daemon the proxy holds the request, then
    // (5 s after it started) answers it with an error.
    let messages = log.wait_for("the error answer", |m| !roots_answers(m).is_empty());
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "the roots/list did not wait for the daemon: refused after {:?}",
        started.elapsed()
    );
    let refused = &roots_answers(&messages)[0];
    assert_eq!(refused["id"], json!(0), "{refused}");
    assert_eq!(refused["error"]["code"], json!(-32603), "{refused}");

    *daemon = Some(sb.start_daemon());
    let roots = daemon_roots(sb, "default");
    // The error said a list_changed follows once rootsd is reachable: the server asks again then.
    let messages = log.wait_for("list_changed and a fetch of the daemon's list", |m| {
        roots_answers(m)
            .last()
            .is_some_and(|a| a["result"] == json!({"roots": roots}))
    });
    assert_eq!(list_changed_count(&messages), 1, "{}", show(&messages));
    assert_host_saw_only_responses(proxy);
}
