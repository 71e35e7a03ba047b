//! The relay's rules, one behaviour per test, with plain function calls.

use rootsd_proto::session::{Era, ServerInfo, SessionState};
use serde_json::{Value, json};

mod map;

use super::*;

/// The moment every test starts at; deadlines count from it. ([`map`] shares it.)
fn t0() -> Instant {
    static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *T0.get_or_init(Instant::now)
}

fn to_line(message: &Value) -> Vec<u8> {
    serde_json::to_vec(message).unwrap()
}

/// Test shorthand: the daemon's list, at the start.
trait At {
    fn roots_changed_at(&mut self, snapshot: RootsSnapshot);
}

impl At for Relay {
    fn roots_changed_at(&mut self, snapshot: RootsSnapshot) {
        self.roots_changed(snapshot, t0());
    }
}

/// The daemon's list at `revision`: `dirs` at the root of the file system, named after
/// themselves.
fn snapshot(revision: u64, dirs: &[&str]) -> RootsSnapshot {
    crate::scenario::daemon_list(revision, dirs)
}

fn host(relay: &mut Relay, message: Value) -> Vec<Output> {
    relay.from_host(to_line(&message), t0());
    relay.take_output()
}

fn server(relay: &mut Relay, message: Value) -> Vec<Output> {
    relay.from_server(to_line(&message), t0());
    relay.take_output()
}

fn lines(outputs: &[Output], to_server: bool) -> Vec<Value> {
    outputs
        .iter()
        .filter_map(|o| match (o, to_server) {
            (Output::ToServer(l), true) | (Output::ToHost(l), false) => {
                Some(serde_json::from_slice::<Value>(l).unwrap())
            }
            _ => None,
        })
        // The proxy asks a nameless 2026-07-28 server who it is once; the transcripts test
        // that, and it is beside the point here.
        .filter(|m| m["method"] != "server/discover")
        .collect()
}

/// The session state the relay handed out last in `outputs`, if it handed one out.
fn reported(outputs: &[Output]) -> Option<&SessionState> {
    outputs.iter().rev().find_map(|o| match o {
        Output::State(state) => Some(state),
        _ => None,
    })
}

fn list_changed_count(outputs: &[Output]) -> usize {
    lines(outputs, true)
        .iter()
        .filter(|m| m["method"] == "notifications/roots/list_changed")
        .count()
}

/// A handshake-era session that has been initialized and has fetched revision 1.
fn initialized(list_changed: bool) -> Relay {
    let mut relay = Relay::new(Config::new(list_changed), t0());
    relay.roots_changed_at(snapshot(1, &["a"]));
    host(
        &mut relay,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}),
    );
    server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"2"}}}),
    );
    host(
        &mut relay,
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    );
    server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":"r0","method":"roots/list"}),
    );
    relay
}

#[test]
fn initialize_gains_the_roots_capability_and_keeps_the_rest() {
    for (list_changed, expected) in [(true, json!({"listChanged": true})), (false, json!({}))] {
        let mut relay = Relay::new(Config::new(list_changed), t0());
        let out = host(
            &mut relay,
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{},"roots":{"listChanged":false}}}}),
        );
        let sent = &lines(&out, true)[0];
        assert_eq!(sent["params"]["capabilities"]["roots"], expected);
        assert_eq!(sent["params"]["capabilities"]["sampling"], json!({}));
        assert_eq!(sent["params"]["protocolVersion"], "2025-06-18");
    }
}

#[test]
fn untouched_messages_are_forwarded_byte_for_byte() {
    let mut relay = Relay::new(Config::new(true), t0());
    let line = br#"{"id":5,  "jsonrpc":"2.0","method":"tools/list"}"#;
    relay.from_host(line, t0());
    assert_eq!(relay.take_output(), vec![Output::ToServer(line.to_vec())]);
    relay.from_server(b"not json at all", t0());
    assert_eq!(
        relay.take_output(),
        vec![Output::ToHost(b"not json at all".to_vec())]
    );
}

#[test]
fn roots_list_is_answered_locally_with_the_same_id() {
    let mut relay = Relay::new(Config::new(true), t0());
    relay.roots_changed_at(snapshot(4, &["a", "b"]));
    let out = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":"x7","method":"roots/list"}),
    );
    assert!(
        lines(&out, false).is_empty(),
        "the host must not see roots/list"
    );
    assert_eq!(
        lines(&out, true),
        vec![json!({"jsonrpc":"2.0","id":"x7","result":{"roots":[
            {"uri":"file:///a","name":"a"},{"uri":"file:///b","name":"b"}]}})]
    );
    assert_eq!(reported(&out).and_then(|s| s.fetched_revision), Some(4));
}

#[test]
fn the_hosts_own_list_changed_is_dropped() {
    let mut relay = initialized(true);
    let out = host(
        &mut relay,
        json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}),
    );
    assert!(out.is_empty());
}

#[test]
fn changes_notify_once_until_the_server_fetches_again() {
    let mut relay = initialized(true);
    relay.roots_changed_at(snapshot(2, &["a", "b"]));
    let first = relay.take_output();
    assert_eq!(list_changed_count(&first), 1);
    assert_eq!(reported(&first).map(|s| s.notifications_sent), Some(1));
    for revision in 3..50 {
        relay.roots_changed_at(snapshot(revision, &["a", &format!("d{revision}")]));
    }
    assert_eq!(list_changed_count(&relay.take_output()), 0);
    let fetch = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":"r1","method":"roots/list"}),
    );
    assert_eq!(
        lines(&fetch, true)[0]["result"]["roots"][1]["uri"],
        "file:///d49",
        "the fetch gets the newest list"
    );
    relay.roots_changed_at(snapshot(50, &["z"]));
    assert_eq!(list_changed_count(&relay.take_output()), 1);
}

#[test]
fn no_notification_without_list_changed() {
    let mut relay = initialized(false);
    relay.roots_changed_at(snapshot(2, &["b"]));
    assert_eq!(list_changed_count(&relay.take_output()), 0);
}

#[test]
fn changes_before_initialized_are_held_until_it_reaches_the_server() {
    let mut relay = Relay::new(Config::new(true), t0());
    relay.roots_changed_at(snapshot(1, &["a"]));
    host(
        &mut relay,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{}}}),
    );
    // An early roots/list (before initialized) is answered at once.
    let early = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":1,"method":"roots/list"}),
    );
    assert_eq!(lines(&early, true)[0]["id"], 1);
    relay.roots_changed_at(snapshot(2, &["b"]));
    assert_eq!(list_changed_count(&relay.take_output()), 0);
    let out = host(
        &mut relay,
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    );
    let sent = lines(&out, true);
    assert_eq!(sent[0]["method"], "notifications/initialized");
    assert_eq!(sent[1]["method"], "notifications/roots/list_changed");
}

#[test]
fn a_roots_list_before_any_list_waits_and_can_be_cancelled() {
    let mut relay = Relay::new(Config::new(true), t0());
    assert!(
        server(
            &mut relay,
            json!({"jsonrpc":"2.0","id":1,"method":"roots/list"})
        )
        .is_empty()
    );
    assert!(
        server(
            &mut relay,
            json!({"jsonrpc":"2.0","id":2,"method":"roots/list"})
        )
        .is_empty()
    );
    let cancel = server(
        &mut relay,
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}),
    );
    assert!(
        cancel.is_empty(),
        "the host never saw request 1, so not its cancellation"
    );
    relay.roots_changed_at(snapshot(1, &["a"]));
    let answered: Vec<Value> = lines(&relay.take_output(), true)
        .into_iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(answered, vec![json!(2)]);
}

#[test]
fn a_late_cancel_of_an_answered_roots_list_is_dropped() {
    let mut relay = initialized(true);
    let out = server(
        &mut relay,
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r0"}}),
    );
    assert!(out.is_empty(), "{out:?}");
    let other = server(
        &mut relay,
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s9"}}),
    );
    assert_eq!(
        lines(&other, false).len(),
        1,
        "other cancellations reach the host"
    );
}

#[test]
fn waiting_too_long_answers_with_an_error() {
    let mut relay = Relay::new(Config::new(true), t0());
    server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":1,"method":"roots/list"}),
    );
    relay.tick(t0() + FIRST_LIST_PATIENCE);
    let out = lines(&relay.take_output(), true);
    assert_eq!(out[0]["error"]["code"], -32603);
    let later = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":2,"method":"roots/list"}),
    );
    assert_eq!(lines(&later, true)[0]["error"]["code"], -32603);
}

fn modern_call(id: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
        "name":"scan","arguments":{},
        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                 "io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}})
}

#[test]
fn modern_requests_declare_roots_and_input_required_is_fulfilled() {
    let mut relay = Relay::new(Config::new(true), t0());
    relay.roots_changed_at(snapshot(3, &["a"]));
    let out = host(&mut relay, modern_call(json!(41)));
    let sent = &lines(&out, true)[0];
    let caps = &sent["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert_eq!(caps, &json!({"elicitation":{},"roots":{}}));
    let state = "c2lnbmVk\u{e9}+/=";
    let out = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":41,"result":{"resultType":"input_required",
            "inputRequests":{"ws":{"method":"roots/list"}},"requestState":state}}),
    );
    assert!(
        lines(&out, false).is_empty(),
        "the host sees only the final result"
    );
    let retry = &lines(&out, true)[0];
    assert_ne!(retry["id"], json!(41));
    assert_eq!(retry["params"]["requestState"], state);
    assert_eq!(
        retry["params"]["inputResponses"]["ws"],
        json!({"roots":[{"uri":"file:///a","name":"a"}]})
    );
    assert_eq!(retry["params"]["name"], "scan");
    let done = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":retry["id"],"result":{"resultType":"complete","content":[]}}),
    );
    assert_eq!(lines(&done, false)[0]["id"], 41);
    relay.roots_changed_at(snapshot(4, &["b"]));
    assert_eq!(
        list_changed_count(&relay.take_output()),
        0,
        "never list_changed in 2026-07-28"
    );
}

#[test]
fn mixed_input_requests_go_to_the_host_and_roots_join_its_retry() {
    let mut relay = Relay::new(Config::new(true), t0());
    relay.roots_changed_at(snapshot(3, &["a"]));
    host(&mut relay, modern_call(json!(1)));
    let out = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required",
            "inputRequests":{"ws":{"method":"roots/list"},"ask":{"method":"elicitation/create","params":{}}},
            "requestState":"s1"}}),
    );
    let to_host = &lines(&out, false)[0];
    assert_eq!(to_host["id"], 1);
    let requests = to_host["result"]["inputRequests"].as_object().unwrap();
    assert_eq!(requests.keys().collect::<Vec<_>>(), vec!["ask"]);
    let mut retry = modern_call(json!(2));
    retry["params"]["requestState"] = json!("s1");
    retry["params"]["inputResponses"] = json!({"ask":{"action":"accept"}});
    let out = host(&mut relay, retry);
    let sent = &lines(&out, true)[0];
    assert_eq!(
        sent["params"]["inputResponses"]["ask"],
        json!({"action":"accept"})
    );
    assert_eq!(
        sent["params"]["inputResponses"]["ws"],
        json!({"roots":[{"uri":"file:///a","name":"a"}]})
    );
}

#[test]
fn rounds_are_capped() {
    let mut relay = Relay::new(Config::new(true), t0());
    relay.roots_changed_at(snapshot(1, &["a"]));
    host(&mut relay, modern_call(json!(9)));
    let mut id = json!(9);
    for _ in 0..stateless::MAX_MRTR_ROUNDS {
        let out = server(
            &mut relay,
            json!({"jsonrpc":"2.0","id":id,"result":{"resultType":"input_required",
                "inputRequests":{"r":{"method":"roots/list"}}}}),
        );
        id = lines(&out, true)[0]["id"].clone();
    }
    let out = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":id,"result":{"resultType":"input_required",
            "inputRequests":{"r":{"method":"roots/list"}}}}),
    );
    let error = &lines(&out, false)[0];
    assert_eq!(error["id"], 9);
    assert_eq!(error["error"]["code"], -32603);
}

#[test]
fn a_host_cancel_follows_the_retry_id() {
    let mut relay = Relay::new(Config::new(true), t0());
    relay.roots_changed_at(snapshot(1, &["a"]));
    host(&mut relay, modern_call(json!(5)));
    let out = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required",
            "inputRequests":{"r":{"method":"roots/list"}}}}),
    );
    let retry_id = lines(&out, true)[0]["id"].clone();
    let out = host(
        &mut relay,
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}),
    );
    assert_eq!(lines(&out, true)[0]["params"]["requestId"], retry_id);
}

#[test]
fn batches_are_split_between_proxy_and_host() {
    let mut relay = Relay::new(Config::new(true), t0());
    relay.roots_changed_at(snapshot(1, &["a"]));
    let out = server(
        &mut relay,
        json!([{"jsonrpc":"2.0","id":1,"method":"roots/list"},{"jsonrpc":"2.0","method":"notifications/message","params":{}}]),
    );
    // A batch's requests are answered with a batch (JSON-RPC 2.0, as 2025-03-26 allowed).
    assert_eq!(lines(&out, true)[0][0]["id"], 1);
    let forwarded = &lines(&out, false)[0];
    assert_eq!(forwarded.as_array().unwrap().len(), 1);
    assert_eq!(forwarded[0]["method"], "notifications/message");
}

#[test]
fn a_server_refused_for_want_of_a_list_is_notified_once_one_arrives() {
    let mut relay = Relay::new(Config::new(true), t0());
    host(
        &mut relay,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{}}}),
    );
    host(
        &mut relay,
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    );
    server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":1,"method":"roots/list"}),
    );
    relay.tick(t0() + FIRST_LIST_PATIENCE);
    relay.take_output();
    relay.roots_changed_at(snapshot(1, &["a"]));
    assert_eq!(list_changed_count(&relay.take_output()), 1);
}

#[test]
fn input_required_before_any_list_waits_for_it() {
    let mut relay = Relay::new(Config::new(true), t0());
    host(&mut relay, modern_call(json!(3)));
    let out = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required",
            "inputRequests":{"ws":{"method":"roots/list"}},"requestState":"s"}}),
    );
    assert!(
        lines(&out, true).is_empty() && lines(&out, false).is_empty(),
        "nothing may be answered without a list: {out:?}"
    );
    relay.roots_changed_at(snapshot(2, &["a"]));
    let retry = &lines(&relay.take_output(), true)[0];
    assert_eq!(
        retry["params"]["inputResponses"]["ws"],
        json!({"roots":[{"uri":"file:///a","name":"a"}]})
    );
}

#[test]
fn results_the_proxy_does_not_own_pass_untouched_at_any_size() {
    let mut relay = initialized(true);
    let big = format!(
        r#"{{"jsonrpc":"2.0", "id":77,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat(1 << 20)
    );
    relay.from_server(big.as_bytes(), t0());
    assert_eq!(relay.take_output(), vec![Output::ToHost(big.into_bytes())]);
}

#[test]
fn the_initialize_result_reports_the_server() {
    let mut relay = Relay::new(Config::new(true), t0());
    host(
        &mut relay,
        json!({"jsonrpc":"2.0","id":"i","method":"initialize","params":{"capabilities":{}}}),
    );
    let out = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":"i","result":{"protocolVersion":"2025-03-26","serverInfo":{"name":"fs","version":"0.6"}}}),
    );
    let state = reported(&out).expect("the state changed");
    assert_eq!(state.era, Era::Handshake);
    assert_eq!(state.protocol_version.as_deref(), Some("2025-03-26"));
    assert_eq!(
        state.server,
        Some(ServerInfo {
            name: "fs".into(),
            version: "0.6".into()
        })
    );
    assert_eq!(lines(&out, false)[0]["id"], "i");
}

#[test]
fn lines_with_crlf_invalid_utf8_or_nothing_in_them_are_handled_as_bytes() {
    let mut relay = Relay::new(Config::new(true), t0());
    for line in [
        &b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}\r"[..],
        b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"x\",\"params\":{\"bad\":\"\xff\xfe\"}}",
        b"\xc3\x28 not json",
    ] {
        relay.from_host(line, t0());
        assert_eq!(relay.take_output(), vec![Output::ToServer(line.to_vec())]);
    }
    for blank in [&b""[..], b"  \t", b"\r"] {
        relay.from_host(blank, t0());
        relay.from_server(blank, t0());
        assert!(relay.take_output().is_empty(), "{blank:?} is no message");
    }
}

#[test]
fn a_retry_answer_that_no_parser_accepts_still_reaches_the_host_under_its_id() {
    let mut relay = Relay::new(Config::new(true), t0());
    relay.roots_changed_at(snapshot(1, &["a"]));
    host(&mut relay, modern_call(json!(7)));
    let out = server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required",
            "inputRequests":{"ws":{"method":"roots/list"}},
            "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}}),
    );
    let retry_id = serde_json::to_vec(&lines(&out, true)[0]["id"]).unwrap();
    // Nesting far past serde_json's limit, and bytes that are not UTF-8: serde_json refuses
    // this line, so only a relay that does not parse what it forwards gets it through.
    let mut answer = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    answer.extend_from_slice(&retry_id);
    answer.extend_from_slice(br#","result":{"content":[{"text":"#);
    answer.extend_from_slice(b"\"\xff\xfe\"}],\"deep\":");
    answer.extend(std::iter::repeat_n(b'[', 5000));
    answer.extend(std::iter::repeat_n(b']', 5000));
    answer.extend_from_slice(b"}}");
    assert!(serde_json::from_slice::<Value>(&answer).is_err());
    relay.from_server(answer.clone(), t0());
    let out = relay.take_output();
    let Some(Output::ToHost(forwarded)) = out.first() else {
        panic!("nothing reached the host: {out:?}");
    };
    let mut expected = br#"{"jsonrpc":"2.0","id":7"#.to_vec();
    expected.extend_from_slice(&answer[br#"{"jsonrpc":"2.0","id":"#.len() + retry_id.len()..]);
    assert_eq!(forwarded, &expected);
}

#[test]
fn a_server_whose_initialize_could_not_declare_roots_is_never_notified() {
    // The host's capabilities are not an object, so the proxy cannot declare listChanged in
    // them; the server must then never get a list_changed. Found by the scenario invariants.
    let mut relay = Relay::new(Config::new(true), t0());
    let initialize = json!({"jsonrpc":"2.0","id":0,"method":"initialize",
        "params":{"protocolVersion":"2025-11-25","capabilities":null}});
    let out = host(&mut relay, initialize.clone());
    assert_eq!(lines(&out, true), [initialize]);
    server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}),
    );
    host(
        &mut relay,
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    );
    relay.roots_changed_at(snapshot(1, &["a"]));
    server(
        &mut relay,
        json!({"jsonrpc":"2.0","id":"r","method":"roots/list"}),
    );
    relay.roots_changed_at(snapshot(2, &["a", "b"]));
    assert_eq!(list_changed_count(&relay.take_output()), 0);
    assert!(!relay.state().list_changed);
}
