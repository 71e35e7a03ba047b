//! The invariants a scenario's outputs must keep, checked one output at a time against what the
//! host, the server and the daemon have said so far:
//!
//! - every line out is one line: no newline inside;
//! - a line that is not a JSON object or batch by the relay's reading (raw text, a message cut
//!   short), and a message no rule is about, is forwarded unchanged and alone; a blank line is
//!   dropped;
//! - while everything in is valid JSON, everything out is valid JSON;
//! - nothing reaches the host that the server did not send, except responses to the host's own
//!   requests; nothing reaches the server that the host did not send, except requests under the
//!   proxy's own ids, answers to the server's requests, and `list_changed`;
//! - `roots/list` is answered only with the daemon's newest list (or an error);
//! - `list_changed` goes only to a server whose last `initialize` declared `listChanged: true`,
//!   once `notifications/initialized` has reached it, and never while one is outstanding.

use serde_json::Value;

use super::super::Output;
use super::{Event, Line};

/// What one event must produce, beyond the general rules.
pub(super) enum Expected {
    Anything,
    Nothing,
    /// Exactly this line, to the server (`true`) or to the host.
    Forwarded(bool, Vec<u8>),
}

const LIST_CHANGED: &str = "notifications/roots/list_changed";

pub(super) struct Checker {
    list_changed: bool,
    /// Every input so far was valid JSON (or blank), so every output must be.
    all_valid: bool,
    /// Every message (and batch element) the host sent, parsed.
    host_messages: Vec<Value>,
    /// `(id, method)` of every request the host sent.
    host_requests: Vec<(Value, String)>,
    host_notifications: Vec<String>,
    server_messages: Vec<Value>,
    /// `(id, method)` of every request the server sent.
    server_requests: Vec<(Value, String)>,
    /// Ids seen at the start of over-long lines, which the proxy may answer with an error.
    too_long_ids: Vec<Value>,
    /// The daemon's newest list, as `roots/list` returns it.
    roots: Option<Value>,
    /// The last `initialize` the server got declared `roots.listChanged: true`.
    declared: bool,
    initialized: bool,
    outstanding: bool,
}

impl Checker {
    pub(super) fn new(list_changed: bool) -> Self {
        Self {
            list_changed,
            all_valid: true,
            host_messages: Vec::new(),
            host_requests: Vec::new(),
            host_notifications: Vec::new(),
            server_messages: Vec::new(),
            server_requests: Vec::new(),
            too_long_ids: Vec::new(),
            roots: None,
            declared: false,
            initialized: false,
            outstanding: false,
        }
    }

    pub(super) fn host_line(&mut self, line: &Line, bytes: &[u8]) -> Expected {
        let messages = self.note_input(bytes);
        for message in &messages {
            match (message.get("id"), method_of(message)) {
                (Some(id), Some(method)) if !id.is_null() => {
                    self.host_requests.push((id.clone(), method.to_owned()));
                }
                (_, Some(method)) => self.host_notifications.push(method.to_owned()),
                _ => {}
            }
        }
        self.host_messages.extend(messages);
        expected(line, bytes, true)
    }

    pub(super) fn server_line(&mut self, line: &Line, bytes: &[u8]) -> Expected {
        let messages = self.note_input(bytes);
        for message in &messages {
            if let (Some(id), Some(method)) = (message.get("id"), method_of(message)) {
                self.server_requests.push((id.clone(), method.to_owned()));
            }
        }
        self.server_messages.extend(messages);
        expected(line, bytes, false)
    }

    pub(super) fn too_long(&mut self, prefix: &[u8]) {
        if prefix.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        // The proxy answers with the id it finds at the start: any `"id":` value in the prefix.
        match ids_in_prefix(prefix) {
            Some(ids) => self.too_long_ids.extend(ids),
            None => self.all_valid = false,
        }
    }

    pub(super) fn roots(&mut self, roots: Value) {
        self.roots = Some(roots);
    }

    /// Reads a line in: its messages (batch elements included), and whether it was JSON.
    fn note_input(&mut self, bytes: &[u8]) -> Vec<Value> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Vec::new();
        }
        match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Array(items)) => items,
            Ok(value) => vec![value],
            Err(_) => {
                self.all_valid = false;
                Vec::new()
            }
        }
    }

    pub(super) fn outputs(&mut self, outputs: &[Output], expected: &Expected, event: &Event) {
        let lines: Vec<(bool, &[u8])> = outputs
            .iter()
            .filter_map(|o| match o {
                Output::ToServer(line) => Some((true, &line[..])),
                Output::ToHost(line) => Some((false, &line[..])),
                Output::State(_) | Output::Fetched | Output::Publish(_) => None,
            })
            .collect();
        match expected {
            Expected::Anything => {}
            Expected::Nothing => {
                assert!(
                    lines.is_empty(),
                    "a blank line produced {lines:?} ({event:?})"
                )
            }
            Expected::Forwarded(to_server, line) => assert!(
                lines.len() == 1 && lines[0] == (*to_server, &line[..]),
                "{} was not forwarded alone and unchanged: {} ({event:?})",
                String::from_utf8_lossy(line),
                show(&lines)
            ),
        }
        for (to_server, line) in lines {
            assert!(
                !line.contains(&b'\n'),
                "an output line holds a newline: {}",
                String::from_utf8_lossy(line)
            );
            if !self.all_valid {
                continue;
            }
            let value: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
                panic!(
                    "valid JSON in, invalid JSON out ({e}): {} ({event:?})",
                    String::from_utf8_lossy(line)
                )
            });
            let messages = match value {
                Value::Array(items) => items,
                other => vec![other],
            };
            for message in &messages {
                if to_server {
                    self.sent_to_server(message);
                } else {
                    self.sent_to_host(message);
                }
            }
        }
    }

    fn sent_to_host(&self, message: &Value) {
        if self.server_messages.contains(message) {
            return;
        }
        let answers_host = is_response(message)
            && message.get("id").is_some_and(|id| {
                self.host_requests.iter().any(|(h, _)| h == id) || self.too_long_ids.contains(id)
            });
        assert!(
            answers_host,
            "the host got a message the server did not send that answers none of its requests: {message}"
        );
    }

    fn sent_to_server(&mut self, message: &Value) {
        let id = message.get("id").filter(|id| !id.is_null());
        let method = method_of(message);
        // What the server has been told, whoever told it.
        match (method, id) {
            (Some("initialize"), Some(_)) => {
                self.declared = message
                    .pointer("/params/capabilities/roots/listChanged")
                    .and_then(Value::as_bool)
                    == Some(true);
            }
            (Some("notifications/initialized"), None) => self.initialized = true,
            _ => {}
        }
        if self.host_messages.contains(message) {
            return;
        }
        match (method, id) {
            (Some(method), Some(id)) => {
                let own =
                    method != "initialize" && id.as_str().is_some_and(|s| s.starts_with("rootsd-"));
                assert!(
                    own || self
                        .host_requests
                        .iter()
                        .any(|(h, m)| h == id && m == method),
                    "the server got a request the host did not send, under an id that is not the proxy's: {message}"
                );
            }
            (Some(LIST_CHANGED), None) => {
                assert!(
                    self.list_changed && self.declared,
                    "list_changed reached a server that was not told listChanged: true: {message}"
                );
                assert!(
                    self.initialized,
                    "list_changed reached a server before notifications/initialized"
                );
                assert!(
                    !self.outstanding,
                    "a second list_changed reached the server before it fetched"
                );
                self.outstanding = true;
            }
            (Some(method), None) => assert!(
                self.host_notifications.iter().any(|m| m == method),
                "the server got a notification the host did not send: {message}"
            ),
            (None, Some(id)) => {
                let asked = self.server_requests.iter().find(|(s, _)| s == id);
                assert!(
                    asked.is_some() || self.too_long_ids.contains(id),
                    "the server got an answer to a request it did not make: {message}"
                );
                if asked.is_some_and(|(_, m)| m == "roots/list")
                    && let Some(result) = message.get("result")
                {
                    assert_eq!(
                        Some(result),
                        self.roots.as_ref(),
                        "roots/list was answered with something else than the daemon's newest list"
                    );
                    self.outstanding = false;
                }
            }
            (None, None) => {
                panic!("the server got a message that is none of the proxy's: {message}")
            }
        }
    }
}

/// What the relay must do with a line, beyond the general rules.
fn expected(line: &Line, bytes: &[u8], from_host: bool) -> Expected {
    let Some(first) = bytes.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Expected::Nothing;
    };
    let unchanged = match line {
        // Neither an object nor a batch: no message to act on, whatever the bytes are.
        Line::Raw(_) => !matches!(first, b'{' | b'['),
        // A proper prefix of a value is no value.
        Line::Truncated(..) => true,
        Line::Message(message, _) => message.is_unowned(),
        Line::Batch(..) => false,
    };
    if unchanged {
        Expected::Forwarded(from_host, bytes.to_vec())
    } else {
        Expected::Anything
    }
}

fn method_of(message: &Value) -> Option<&str> {
    message.get("method").and_then(Value::as_str)
}

fn is_response(message: &Value) -> bool {
    message.get("method").is_none()
        && (message.get("result").is_some() || message.get("error").is_some())
}

/// The values of `"id":` members found in a line's beginning, when each parses as JSON; `None`
/// when one does not (the proxy would echo it as it is).
fn ids_in_prefix(prefix: &[u8]) -> Option<Vec<Value>> {
    let text = String::from_utf8_lossy(prefix);
    let mut ids = Vec::new();
    for (at, _) in text.match_indices("\"id\":") {
        let rest = text[at + 5..].trim_start();
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        match stream.next() {
            Some(Ok(id)) => ids.push(id),
            // Cut short: no complete member, so nothing the proxy would echo.
            Some(Err(e)) if e.is_eof() => {}
            None => {}
            Some(Err(_)) => return None,
        }
    }
    Some(ids)
}

fn show(lines: &[(bool, &[u8])]) -> String {
    let shown: Vec<String> = lines
        .iter()
        .map(|(to_server, line)| {
            format!(
                "{} {}",
                if *to_server { "to server:" } else { "to host:" },
                String::from_utf8_lossy(line)
            )
        })
        .collect();
    format!("[{}]", shown.join(", "))
}
