//! The proxy in front of the real `@modelcontextprotocol/server-everything` (pinned in
//! tests/interop/package-lock.json), a second real server: its `get-roots-list` tool shows the
//! roots it fetched and follows `list_changed`, and its sampling and elicitation tools send the
//! host requests that must reach it, and come back, unchanged.

use rootsd_tests::{PATIENCE, Sandbox, eventually};
use serde_json::{Value, json};

use crate::support::{Proxy, add_wait, daemon_roots, everything_server, is_method, show};

/// The tool that shows the roots the server holds (only listed when the client declared roots).
const ROOTS_TOOL: &str = "get-roots-list";
const SAMPLING_TOOL: &str = "trigger-sampling-request";
const ELICITATION_TOOL: &str = "trigger-elicitation-request";

/// A proxied server-everything, initialized by a host that declares `capabilities` (never roots:
/// the proxy declares those).
fn everything_session(sb: &Sandbox, capabilities: Value) -> Proxy {
    let mut proxy = Proxy::spawn(sb, &["--name", "everything"], &everything_server());
    let id = proxy.send_initialize(capabilities);
    let response = proxy.response(&id);
    assert_eq!(
        response["result"]["serverInfo"]["name"],
        json!("mcp-servers/everything"),
        "{response}"
    );
    proxy.finish_initialize(&response);
    proxy
}

/// The names `tools/list` gives.
fn tool_names(proxy: &mut Proxy) -> Vec<String> {
    let listed = proxy.request("tools/list", json!({}));
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list failed: {listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// The URIs `get-roots-list` shows, in order: its text lists each root as
/// `N. NAME\n   URI: URI`.
fn listed_uris(proxy: &mut Proxy) -> Vec<String> {
    let response = proxy.call_tool(ROOTS_TOOL, json!({}));
    let text = response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{ROOTS_TOOL} failed: {response}"));
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("URI: "))
        .map(str::to_owned)
        .collect()
}

fn uris_of(roots: &Value) -> Vec<String> {
    roots
        .as_array()
        .expect("a roots array")
        .iter()
        .map(|r| r["uri"].as_str().expect("a uri").to_owned())
        .collect()
}

/// Reads the host's messages until the server's request `method`; returns it.
#[track_caller]
fn server_request(proxy: &mut Proxy, method: &str) -> Value {
    loop {
        let message = proxy.next_message();
        if is_method(&message, method) && message.get("id").is_some() {
            return message;
        }
    }
}

/// The text of a tool result's content items, joined.
fn result_text(response: &Value) -> String {
    response["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content: {response}"))
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("")
}

#[test]
fn server_everything_shows_the_workspaces_roots_and_follows_a_change() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let a = sb.mkdir("a");
    let b = sb.mkdir("b b");
    sb.ctl_ok(&["add", a.to_str().unwrap()]);
    let mut proxy = everything_session(&sb, json!({}));

    let tools = tool_names(&mut proxy);
    assert!(
        tools.iter().any(|t| t == ROOTS_TOOL),
        "the host declared no roots, the proxy did, so {ROOTS_TOOL} is listed: {tools:?}"
    );
    assert_eq!(
        listed_uris(&mut proxy),
        uris_of(&daemon_roots(&sb, "default"))
    );

    let (change, said) = add_wait(&sb, &[&b], &[]);
    assert_eq!(change["notified_sessions"], json!(1), "{change}");
    assert!(said.contains("1 of 1"), "add --wait said {said:?}");
    let expected = uris_of(&daemon_roots(&sb, "default"));
    assert_eq!(expected.len(), 2);
    eventually("get-roots-list to show the new list", PATIENCE, || {
        let shown = listed_uris(&mut proxy);
        if shown == expected {
            Ok(())
        } else {
            Err(format!("{shown:?}"))
        }
    });
    // The server said so itself, in a log message to the host.
    assert!(
        proxy
            .received
            .iter()
            .any(|m| is_method(m, "notifications/message")
                && m["params"]["data"] == json!("Roots updated: 2 root(s) received from client")),
        "{}",
        show(&proxy.received)
    );
    // Its roots/list never reached the host: the proxy answered it.
    assert!(
        !proxy.received.iter().any(|m| is_method(m, "roots/list")),
        "{}",
        show(&proxy.received)
    );
}

#[test]
fn server_everything_sampling_and_elicitation_reach_the_host_and_its_answers_the_server() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    sb.mkdir("a");
    sb.ctl_ok(&["add", "a"]);
    let mut proxy = everything_session(&sb, json!({"sampling": {}, "elicitation": {"form": {}}}));
    let tools = tool_names(&mut proxy);
    for tool in [SAMPLING_TOOL, ELICITATION_TOOL] {
        assert!(tools.iter().any(|t| t == tool), "no {tool} in {tools:?}");
    }

    // Sampling: the request is the one the tool builds (dist/tools/trigger-sampling-request.js).
    let call = proxy.send_request(
        "tools/call",
        json!({"name": SAMPLING_TOOL, "arguments": {"prompt": "Say hi", "maxTokens": 7}}),
    );
    let request = server_request(&mut proxy, "sampling/createMessage");
    assert_eq!(
        request["params"],
        json!({
            "messages": [{"role": "user", "content": {"type": "text",
                "text": "Resource trigger-sampling-request context: Say hi"}}],
            "systemPrompt": "You are a helpful test server.",
            "maxTokens": 7,
            "temperature": 0.7,
        }),
        "{request}"
    );
    let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "Hi ✓"},
                         "model": "host-model-1", "stopReason": "endTurn"});
    proxy.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": sampled}));
    let response = proxy.response(&call);
    let text = result_text(&response);
    let reported = text
        .strip_prefix("LLM sampling result: \n")
        .unwrap_or_else(|| panic!("{response}"));
    assert_eq!(
        serde_json::from_str::<Value>(reported).expect("the tool shows JSON"),
        sampled,
        "the server got another answer than the host gave: {response}"
    );

    // Elicitation: the form the tool asks for, and the host's answer in its result.
    let call = proxy.send_request(
        "tools/call",
        json!({"name": ELICITATION_TOOL, "arguments": {}}),
    );
    let request = server_request(&mut proxy, "elicitation/create");
    assert_eq!(
        request["params"]["message"],
        json!("Please provide inputs for the following fields:"),
        "{request}"
    );
    assert_eq!(
        request["params"]["requestedSchema"]["required"],
        json!(["name"]),
        "{request}"
    );
    let elicited = json!({"action": "accept", "content": {"name": "Ada Lovelace", "check": true}});
    proxy.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": elicited}));
    let response = proxy.response(&call);
    let text = result_text(&response);
    assert!(
        text.contains("User provided the requested information!"),
        "{response}"
    );
    let raw = text
        .split_once("Raw result: ")
        .map(|(_, raw)| raw)
        .unwrap_or_else(|| panic!("{response}"));
    assert_eq!(
        serde_json::from_str::<Value>(raw).expect("the tool shows JSON"),
        elicited,
        "{response}"
    );
}
