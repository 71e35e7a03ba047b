//! What the proxy tests say about MCP messages: the version their hosts ask for, and how a
//! message is recognised and shown. Both the host's end ([`crate::host`]) and the rest of the
//! helpers ([`crate::support`], which re-exports these) use them.

use serde_json::Value;

/// The protocol version the tests' hosts ask for in `initialize`.
pub const HANDSHAKE_VERSION: &str = "2025-11-25";

/// Messages, one per line, for failure messages.
pub fn show(messages: &[Value]) -> String {
    messages
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `message` is a request or notification of `method`.
pub fn is_method(message: &Value, method: &str) -> bool {
    message.get("method").and_then(Value::as_str) == Some(method)
}

/// Whether `message` is a response (has an id, no method) to `id`.
pub fn is_response_to(message: &Value, id: &Value) -> bool {
    message.get("method").is_none() && message.get("id") == Some(id)
}
