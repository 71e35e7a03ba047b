//! 2026-07-28 exchanges through the real proxy and daemon: progress across the proxy's retries,
//! several requests in flight answered out of order, a request that takes a proxy round and a
//! host round, ids of every JSON type, and a host id that one of the proxy's retries holds.

use serde_json::{Value, json};

use crate::support::{
    FakeLog, FakeSession, FakeSetup, calls_of, caps_with_roots, modern_call, modern_meta, show,
};

/// The fake's `requestState` for `needs_roots` (see the script).
const STATE_ROOTS: &str = "st-1/\"roots\" \\ é\u{2028}{\"x\":1}==";

/// A 2026-07-28 session (no handshake) with one root in the daemon, registered.
fn modern_session() -> FakeSession {
    let fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["a"],
            ..FakeSetup::default()
        },
    );
    fake.registered();
    fake
}

/// `needs_roots` calls the fake received that carry the proxy's answer (its retries, or host
/// retries it completed), in order.
fn answered_calls(log: &FakeLog) -> Vec<Value> {
    calls_of(&log.messages(), "needs_roots")
        .into_iter()
        .filter(|c| c["params"].get("inputResponses").is_some())
        .collect()
}

/// Waits until the fake holds `n` completed `needs_roots` results (arguments.hold), each reached
/// through a retry of the proxy's; returns those retries.
#[track_caller]
fn wait_for_held(log: &FakeLog, n: usize) -> Vec<Value> {
    log.wait_for(&format!("{n} retries of the proxy's"), |_| {
        answered_calls(log).len() >= n
    });
    answered_calls(log)
}

/// Whether the host's `line` is a response whose id is `id`, as raw JSON, in the place the fake
/// wrote it.
fn has_raw_id(line: &str, id: &str) -> bool {
    line.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result""#))
}

/// Asserts a complete result of the fake's that answered `arguments` with the daemon's `roots`.
#[track_caller]
fn assert_completed(response: &Value, arguments: &Value, roots: &Value) {
    let result = &response["result"];
    assert_eq!(result["resultType"], json!("complete"), "{response}");
    assert_eq!(
        result["structuredContent"],
        json!({"inputResponses": {"ws": {"roots": roots}}, "arguments": arguments}),
        "{response}"
    );
}

#[test]
fn progress_reaches_the_host_across_the_proxys_retry() {
    let mut fake = modern_session();
    let roots = fake.roots();
    let (log, proxy) = (&fake.log, &mut fake.proxy);

    let mut call = modern_call(json!("p-1"), "needs_roots", json!({}));
    call["params"]["_meta"]["progressToken"] = json!("tok-1");
    proxy.send(&call);
    let mut lines = Vec::new();
    for _ in 0..3 {
        lines.push(proxy.next_message_with_line());
    }
    // One progress notification per round, the retry's under the host's token, then the result.
    for (round, (message, line)) in lines.iter().take(2).enumerate() {
        let round = round + 1;
        assert_eq!(
            *line,
            format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"tok-1","progress":{round},"message":"round {round}"}}}}"#
            ),
            "{message}"
        );
    }
    assert_completed(&lines[2].0, &json!({}), &roots);
    assert!(has_raw_id(&lines[2].1, r#""p-1""#), "{}", lines[2].1);

    let calls = calls_of(&log.messages(), "needs_roots");
    assert_eq!(calls.len(), 2, "{}", show(&calls));
    let retry = &calls[1];
    assert!(
        retry["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("rootsd-retry-")),
        "{retry}"
    );
    assert_eq!(
        retry["params"]["_meta"]["progressToken"],
        json!("tok-1"),
        "the retry lost the host's progress token: {retry}"
    );
    assert_eq!(retry["params"]["_meta"], calls[0]["params"]["_meta"]);
}

#[test]
fn exchanges_in_flight_together_are_answered_out_of_order_under_the_hosts_ids() {
    let mut fake = modern_session();
    let roots = fake.roots();
    let (log, proxy) = (&fake.log, &mut fake.proxy);

    // A number, a string, and an integer no double can hold: ids come back as they went.
    let calls = [
        (json!(1), "1", "a"),
        (json!("two"), r#""two""#, "b"),
        (json!(9_007_199_254_740_993_u64), "9007199254740993", "c"),
    ];
    for (id, _, tag) in &calls {
        proxy.send(&modern_call(
            id.clone(),
            "needs_roots",
            json!({"hold": tag}),
        ));
    }
    let retries = wait_for_held(log, 3);
    let mut retry_ids: Vec<&str> = retries
        .iter()
        .map(|r| r["id"].as_str().unwrap_or_else(|| panic!("{r}")))
        .collect();
    for (retry, (_, _, tag)) in retries.iter().zip(&calls) {
        assert_eq!(
            retry["params"]["arguments"],
            json!({"hold": tag}),
            "{retry}"
        );
        assert_eq!(
            retry["params"]["requestState"],
            json!(STATE_ROOTS),
            "{retry}"
        );
        assert_eq!(
            retry["params"]["inputResponses"],
            json!({"ws": {"roots": roots}})
        );
    }
    retry_ids.sort_unstable();
    retry_ids.dedup();
    assert_eq!(retry_ids.len(), 3, "retry ids reused: {}", show(&retries));

    // The server answers the last first.
    proxy.notify("test/answer", json!({"tags": ["c", "a", "b"]}));
    for index in [2, 0, 1] {
        let (id, raw_id, tag) = &calls[index];
        let (response, line) = proxy.next_message_with_line();
        assert_eq!(&response["id"], id, "{line}");
        assert!(has_raw_id(&line, raw_id), "{line}");
        assert_completed(&response, &json!({"hold": tag}), &roots);
    }
    assert_eq!(proxy.received.len(), 3, "{}", show(&proxy.received));
}

#[test]
fn a_request_takes_a_proxy_round_for_roots_then_a_host_round_for_elicitation() {
    let mut fake = modern_session();
    let roots = fake.roots();
    let (log, proxy) = (&fake.log, &mut fake.proxy);

    proxy.send(&modern_call(json!("m-1"), "two_rounds", json!({"n": 1})));
    let asked = proxy.response(&json!("m-1"));
    let result = &asked["result"];
    assert_eq!(result["resultType"], json!("input_required"), "{asked}");
    assert_eq!(
        result["inputRequests"]
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect::<Vec<_>>()),
        Some(vec!["confirm"]),
        "only the elicitation is the host's to answer: {asked}"
    );
    assert_eq!(result["requestState"], json!("two-2"), "{asked}");

    let elicited = json!({"action": "accept", "content": {"ok": true}});
    let mut retry = modern_call(json!("m-2"), "two_rounds", json!({"n": 1}));
    retry["params"]["inputResponses"] = json!({"confirm": elicited});
    retry["params"]["requestState"] = json!("two-2");
    proxy.send(&retry);
    let done = proxy.response(&json!("m-2"));
    assert_eq!(done["result"]["resultType"], json!("complete"), "{done}");
    let both = json!({"confirm": elicited, "ws": {"roots": roots}});
    assert_eq!(
        done["result"]["structuredContent"]["inputResponses"], both,
        "{done}"
    );
    assert_eq!(proxy.received.len(), 2, "{}", show(&proxy.received));

    let calls = calls_of(&log.messages(), "two_rounds");
    assert_eq!(calls.len(), 3, "{}", show(&calls));
    assert_eq!(calls[0]["id"], json!("m-1"));
    assert!(calls[0]["params"].get("inputResponses").is_none());
    assert!(
        calls[1]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("rootsd-retry-")),
        "{}",
        calls[1]
    );
    assert_eq!(calls[1]["params"]["requestState"], json!("two-1"));
    assert_eq!(
        calls[1]["params"]["inputResponses"],
        json!({"ws": {"roots": roots}})
    );
    assert_eq!(
        calls[2]["id"],
        json!("m-2"),
        "the host's retry keeps its id"
    );
    assert_eq!(calls[2]["params"]["requestState"], json!("two-2"));
    assert_eq!(calls[2]["params"]["inputResponses"], both);
    for call in &calls {
        assert_eq!(
            call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
            caps_with_roots(),
            "{call}"
        );
    }
}

#[test]
fn a_host_id_that_a_proxy_retry_holds_is_relayed_under_another_and_restored() {
    let mut fake = modern_session();
    let roots = fake.roots();
    let (log, proxy) = (&fake.log, &mut fake.proxy);

    proxy.send(&modern_call(json!(7), "needs_roots", json!({"hold": "x"})));
    let retry = wait_for_held(log, 1).remove(0);
    let retry_id = retry["id"].clone();
    assert!(
        retry_id
            .as_str()
            .is_some_and(|id| id.starts_with("rootsd-retry-")),
        "{retry}"
    );

    // While the retry is in flight, the host uses its id for a request of its own.
    proxy.send(&modern_call(retry_id.clone(), "echo", json!({"k": "v"})));
    let echoed = proxy.response(&retry_id);
    assert_eq!(
        echoed["result"]["content"][0]["text"],
        json!(r#"{"k": "v"}"#),
        "{echoed}"
    );
    let echo = calls_of(&log.messages(), "echo").remove(0);
    let relay_id = echo["id"].as_str().unwrap_or_else(|| panic!("{echo}"));
    assert!(
        relay_id.starts_with("rootsd-relay-") && echo["id"] != retry_id,
        "the host's request reached the server under an id in use: {echo}"
    );
    assert_eq!(
        echo["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        modern_meta()["io.modelcontextprotocol/protocolVersion"]
    );

    // The retry's own answer still reaches the host under the id of the host's first request.
    proxy.notify("test/answer", json!({"tags": ["x"]}));
    let done = proxy.response(&json!(7));
    assert_completed(&done, &json!({"hold": "x"}), &roots);

    let ids: Vec<&Value> = proxy.received.iter().map(|m| &m["id"]).collect();
    assert_eq!(ids, [&retry_id, &json!(7)], "{}", show(&proxy.received));
}
