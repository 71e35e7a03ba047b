//! Small helpers for reading and editing JSON-RPC messages as `serde_json::Value`s.

use rootsd_proto::session::ServerInfo;
use serde_json::{Map, Value};

/// A message's `method` and `id`, either of which may be absent.
pub(super) fn method_and_id(message: &Value) -> (Option<String>, Option<Value>) {
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    (method, message.get("id").cloned())
}

/// The object at `message[key]`, if `message` is an object and that member is one.
pub(super) fn object_at<'a>(
    message: &'a mut Value,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    message.get_mut(key).and_then(Value::as_object_mut)
}

/// The object member `key` of `map`, created empty if absent; `None` if it is not an object.
pub(super) fn object_in<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    map.entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
}

/// A server's identity from an `Implementation` object; missing fields are empty.
pub(super) fn server_info(info: &Value) -> ServerInfo {
    let text = |key| {
        info.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    ServerInfo {
        name: text("name"),
        version: text("version"),
    }
}

/// Ids compare by JSON text, so `1` and `"1"` stay different.
pub(super) fn id_key(id: &Value) -> String {
    serde_json::to_string(id).expect("ids always serialise")
}

pub(super) fn to_line(message: &Value) -> Vec<u8> {
    serde_json::to_vec(message).expect("JSON values always serialise")
}

/// A JSON-RPC error response with code -32603 (internal error).
pub(super) fn internal_error(id: Value, message: &str) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message},
    })
}
