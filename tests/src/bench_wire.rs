//! The control-protocol lines the benchmark writes by hand (`rootsd-bench`, `bench-reader`).
//!
//! The benchmark talks to rootsd without rootsctl where rootsctl's own start-up would swamp what
//! is measured (thousands of sessions, single `roots.add` round trips). This module is the only
//! place the benchmark spells a control message, so a protocol change is one edit here. It does
//! no I/O.

use serde_json::json;

/// `hello` with this build's control-protocol version.
pub fn hello(id: u64) -> String {
    request(
        id,
        "hello",
        json!({"protocol_version": crate::PROTOCOL_VERSION, "client": "rootsd-bench"}),
    )
}

/// `session.register`: makes the connection an MCP session of `workspace` that declared
/// `listChanged`, so the daemon pushes `roots.changed` to it on every change.
pub fn register(id: u64, workspace: &str, label: &str, pid: u32) -> String {
    request(
        id,
        "session.register",
        json!({"workspace": workspace, "label": label, "pid": pid, "state": {"list_changed": true}}),
    )
}

/// `roots.add` of one root under `name`. Adding an existing root under a new name renames it:
/// a durable change that leaves the workspace's size, and so every pushed line's length, as it
/// was. The benchmark changes roots this way so that rounds stay comparable.
pub fn add(id: u64, workspace: &str, uri: &str, name: &str) -> String {
    request(
        id,
        "roots.add",
        json!({"workspace": workspace, "roots": [{"uri": uri, "name": name}]}),
    )
}

/// `roots.remove` of the root at `uri`.
pub fn remove(id: u64, workspace: &str, uri: &str) -> String {
    request(
        id,
        "roots.remove",
        json!({"workspace": workspace, "targets": [{"input": uri, "uri": uri}]}),
    )
}

/// `wait` until every awaited session of `workspace` has caught up on `revision`.
pub fn wait(id: u64, workspace: &str, revision: u64, timeout_ms: u64) -> String {
    request(
        id,
        "wait",
        json!({"workspace": workspace, "revision": revision, "timeout_ms": timeout_ms}),
    )
}

/// Whether a response line reports success.
pub fn is_success(line: &str) -> bool {
    line.contains("\"result\"") && !line.contains("\"error\"")
}

/// The start of every `roots.changed` push, for a cheap check that a line is one.
pub const PUSH_PREFIX: &str = r#"{"jsonrpc":"2.0","method":"roots.changed""#;

fn request(id: u64, method: &str, params: serde_json::Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}
