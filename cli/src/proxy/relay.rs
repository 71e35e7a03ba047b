//! The MCP relay as a pure state machine: lines in from the host, the server and the daemon;
//! lines and reports out. No I/O happens here, so every rule of the protocol can be tested with
//! plain function calls.
//!
//! What it changes, and nothing else (every other message is forwarded byte for byte):
//! - handshake era: the host's `initialize` gains `capabilities.roots`; the server's `roots/list`
//!   is answered here from the daemon's newest list and never reaches the host; the host's own
//!   `notifications/roots/list_changed` is dropped; `list_changed` is sent to the server when the
//!   daemon's list changes, at most one outstanding, never before the host's `initialized`;
//! - 2026-07-28 era: requests gain `roots: {}` in their client capabilities, and `roots/list`
//!   entries of `input_required` results are answered here, retrying with a new id.

use std::collections::{HashMap, VecDeque};

use rootsd_proto::root::ListRootsResult;
use rootsd_proto::session::{self, Era, Notice, ServerInfo, SessionState};
use rootsd_proto::wire::RootsSnapshot;
use serde_json::{Map, Value, json};

/// `_meta` key carrying the protocol version of a 2026-07-28 request.
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying the client capabilities of a 2026-07-28 request.
const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key a 2026-07-28 server may put its identity under.
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Methods whose results may be `input_required` (SEP-2322).
const MRTR_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];
/// How many times the proxy retries one request on its own before giving up, as the SDKs do.
pub const MAX_MRTR_ROUNDS: u32 = 10;
/// How many answered `roots/list` ids the proxy remembers for late cancellations.
const ANSWERED_MEMORY: usize = 32;
/// Prefix of the ids the proxy gives its own retries; a string, so it never equals a host's
/// numeric id, and distinctive, so it never equals a host's string id in practice.
const RETRY_ID_PREFIX: &str = "rootsd-retry-";

/// Which way a line travels through the relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    ToServer,
    ToHost,
}

/// What the relay did with one message.
enum Fate {
    /// Forward it as it came.
    Unchanged,
    /// Forward the rewritten message.
    Rewritten,
    /// It was the proxy's alone; forward nothing.
    Dropped,
}

/// Something the relay wants done.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A line for the server's stdin (no trailing newline).
    ToServer(Vec<u8>),
    /// A line for the host (our stdout; no trailing newline).
    ToHost(Vec<u8>),
    /// The session's state changed; the daemon should hold this copy instead of its old one.
    State(SessionState),
}

/// One host request the proxy is carrying through `input_required` rounds.
struct Exchange {
    host_id: Value,
    /// The request as last sent to the server.
    request: Value,
    rounds: u32,
}

/// The relay's state for one MCP session.
pub struct Relay {
    list_changed: bool,
    era: Era,
    protocol_version: Option<String>,
    server: Option<ServerInfo>,
    snapshot: Option<RootsSnapshot>,
    /// `{"roots":[…]}` of the snapshot, serialised once per change: `roots/list` is on the hot
    /// path.
    roots_json: String,
    initialize_id: Option<Value>,
    /// Whether the host's `notifications/initialized` has been passed to the server.
    initialized: bool,
    served_revision: Option<u64>,
    notification_outstanding: bool,
    /// Ids of the server's `roots/list` requests waiting for a first list from the daemon.
    waiting: Vec<Value>,
    /// Ids (as JSON text) of the last `roots/list` requests the proxy answered, so that a late
    /// cancellation of one is dropped rather than shown to a host that never saw the request.
    answered: VecDeque<String>,
    /// Set once waiting for the daemon's first list has taken too long: requests are then
    /// answered with an error at once until a list arrives.
    unavailable: bool,
    /// A `roots/list` was answered with an error, which promised a `list_changed` once rootsd
    /// is reachable.
    owe_notification: bool,
    /// 2026-07-28 exchanges whose `roots/list` input requests wait for the daemon's first list.
    parked: Vec<(Exchange, Value)>,
    /// In-flight 2026-07-28 requests, keyed by the id the server knows them by.
    exchanges: HashMap<String, Exchange>,
    /// `roots/list` keys of `input_required` results passed to the host, keyed by their
    /// `requestState`, to be answered when the host retries.
    held: HashMap<String, Vec<String>>,
    next_retry: u64,
    /// How many times the server was given roots.
    fetches: u64,
    /// How many `list_changed` notifications were sent.
    notifications_sent: u64,
    /// The state as last handed out in [`Output::State`].
    reported: SessionState,
    out: Vec<Output>,
}

impl Relay {
    pub fn new(list_changed: bool) -> Self {
        Self {
            list_changed,
            era: Era::Unknown,
            protocol_version: None,
            server: None,
            snapshot: None,
            roots_json: String::new(),
            initialize_id: None,
            initialized: false,
            served_revision: None,
            notification_outstanding: false,
            waiting: Vec::new(),
            answered: VecDeque::with_capacity(ANSWERED_MEMORY),
            unavailable: false,
            owe_notification: false,
            parked: Vec::new(),
            exchanges: HashMap::new(),
            held: HashMap::new(),
            next_retry: 1,
            fetches: 0,
            notifications_sent: 0,
            reported: SessionState {
                list_changed,
                ..SessionState::default()
            },
            out: Vec::new(),
        }
    }

    /// Everything the relay wants done since the last call, in order, followed by the session's
    /// state if it changed.
    pub fn take_output(&mut self) -> Vec<Output> {
        let state = self.state();
        if state != self.reported {
            self.reported = state.clone();
            self.emit(Output::State(state));
        }
        std::mem::take(&mut self.out)
    }

    /// The session as the relay knows it now.
    pub fn state(&self) -> SessionState {
        SessionState {
            list_changed: self.list_changed,
            era: self.era,
            protocol_version: self.protocol_version.clone(),
            server: self.server.clone(),
            initialized: self.initialized,
            fetched_revision: self.served_revision,
            fetches: self.fetches,
            notification_outstanding: self.notification_outstanding,
            owes_notification: self.owe_notification,
            notifications_sent: self.notifications_sent,
        }
    }

    /// A line from the host.
    pub fn from_host(&mut self, line: &[u8]) {
        self.relay(line, Direction::ToServer);
    }

    /// A line from the server.
    pub fn from_server(&mut self, line: &[u8]) {
        // Most server lines are results the proxy only passes on, some of them megabytes of file
        // contents: a glance at `id` and `method` decides, without building the whole message.
        if !self.concerns_proxy(line) {
            return self.emit(Output::ToHost(line.to_vec()));
        }
        self.relay(line, Direction::ToHost);
    }

    /// Handles one line (a message, or a batch as 2025-03-26 allowed) travelling `direction`,
    /// and forwards what is left of it: the original bytes if nothing changed, a re-serialised
    /// message if something did, nothing if everything was the proxy's own.
    fn relay(&mut self, line: &[u8], direction: Direction) {
        let wrap = match direction {
            Direction::ToServer => Output::ToServer,
            Direction::ToHost => Output::ToHost,
        };
        let Ok(message) = serde_json::from_slice::<Value>(line) else {
            // Not ours to judge: the receiver answers malformed input as it sees fit.
            return self.emit(wrap(line.to_vec()));
        };
        let is_batch = message.is_array();
        let items = match message {
            Value::Array(items) => items,
            single => vec![single],
        };
        let mut kept = Vec::with_capacity(items.len());
        let mut changed = false;
        for mut item in items {
            let fate = match direction {
                Direction::ToServer => self.host_message(&mut item),
                Direction::ToHost => self.server_message(&mut item),
            };
            match fate {
                Fate::Unchanged => kept.push(item),
                Fate::Rewritten => {
                    changed = true;
                    kept.push(item);
                }
                Fate::Dropped => changed = true,
            }
        }
        let out = match (changed, kept.as_slice()) {
            (false, _) => line.to_vec(),
            (true, []) => return,
            (true, [single]) if !is_batch => to_line(single),
            (true, _) => to_line(&Value::Array(kept.clone())),
        };
        self.emit(wrap(out));
        if direction == Direction::ToServer {
            for message in &kept {
                self.after_host_message(message);
            }
        }
    }

    /// Whether a server line may need more than forwarding. Errs on the side of yes: anything
    /// that is not a plain JSON object is looked at in full.
    fn concerns_proxy(&self, line: &[u8]) -> bool {
        #[derive(serde::Deserialize)]
        struct Glance {
            #[serde(default)]
            id: Option<Value>,
            #[serde(default)]
            method: Option<String>,
        }
        let starts_object = line
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'{');
        let Some(glance) = starts_object
            .then(|| serde_json::from_slice::<Glance>(line).ok())
            .flatten()
        else {
            return true;
        };
        match (glance.method.as_deref(), &glance.id) {
            (Some("roots/list" | "notifications/cancelled"), _) => true,
            (Some(_), _) => false,
            (None, Some(id)) => {
                self.initialize_id.as_ref() == Some(id)
                    || self.exchanges.contains_key(&id_key(id))
                    || (self.server.is_none() && self.era == Era::Stateless)
            }
            (None, None) => false,
        }
    }

    /// The daemon's newest list for this session's workspace.
    pub fn roots_changed(&mut self, snapshot: RootsSnapshot) {
        if self.snapshot.as_ref() == Some(&snapshot) {
            return;
        }
        self.roots_json = serde_json::to_string(&ListRootsResult {
            roots: snapshot.roots.clone(),
        })
        .expect("roots always serialise");
        self.snapshot = Some(snapshot);
        for id in std::mem::take(&mut self.waiting) {
            self.answer_roots_list(id);
        }
        for (exchange, response) in std::mem::take(&mut self.parked) {
            if let Some(response) = self.finish_exchange(exchange, response) {
                self.emit(Output::ToHost(to_line(&response)));
            }
        }
        self.maybe_notify();
    }

    /// The daemon could not be reached for long enough that waiting servers must be answered.
    pub fn give_up_waiting(&mut self) {
        self.unavailable = self.snapshot.is_none();
        for id in std::mem::take(&mut self.waiting) {
            self.answer_unavailable(id);
        }
        for (exchange, _) in std::mem::take(&mut self.parked) {
            let error = json!({
                "jsonrpc": "2.0",
                "id": exchange.host_id,
                "error": {
                    "code": -32603,
                    "message": "the server asked for roots, but rootsd is not reachable; retry once it is",
                },
            });
            self.emit(Output::ToHost(to_line(&error)));
        }
    }

    fn answer_unavailable(&mut self, id: Value) {
        self.owe_notification = true;
        {
            let error = json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": -32603,
                    "message": "rootsd is not reachable, so no roots are available yet; a list_changed notification follows when it is",
                },
            });
            self.emit(Output::ToServer(to_line(&error)));
        }
    }

    fn emit(&mut self, output: Output) {
        self.out.push(output);
    }

    /// Rewrites, drops or keeps one message from the host.
    fn host_message(&mut self, message: &mut Value) -> Fate {
        let (method, id) = method_and_id(message);
        match (method.as_deref(), id) {
            (Some("initialize"), Some(id)) => {
                self.era = Era::Handshake;
                self.initialize_id = Some(id);
                self.protocol_version = message
                    .pointer("/params/protocolVersion")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let roots = if self.list_changed {
                    json!({"listChanged": true})
                } else {
                    json!({})
                };
                if let Some(params) = object_at(message, "params")
                    && let Some(capabilities) = object_in(params, "capabilities")
                {
                    capabilities.insert("roots".to_owned(), roots);
                }
                Fate::Rewritten
            }
            (Some("notifications/roots/list_changed"), None) => Fate::Dropped,
            (Some("notifications/cancelled"), None) => {
                if self.translate_cancel(message) {
                    Fate::Rewritten
                } else {
                    Fate::Unchanged
                }
            }
            (Some(method), Some(id)) if is_modern(message) => {
                self.note_modern(message);
                add_roots_capability(message);
                if MRTR_METHODS.contains(&method) {
                    self.answer_held(message);
                    self.exchanges.insert(
                        id_key(&id),
                        Exchange {
                            host_id: id,
                            request: message.clone(),
                            rounds: 0,
                        },
                    );
                }
                Fate::Rewritten
            }
            _ => Fate::Unchanged,
        }
    }

    /// Side effects that must follow the forwarding of a host message.
    fn after_host_message(&mut self, message: &Value) {
        if message.get("method").and_then(Value::as_str) == Some("notifications/initialized")
            && message.get("id").is_none()
        {
            self.initialized = true;
            self.maybe_notify();
        }
    }

    /// Handles one message from the server: dropped when it was for the proxy alone.
    fn server_message(&mut self, message: &mut Value) -> Fate {
        let (method, id) = method_and_id(message);
        match (method.as_deref(), id) {
            (Some("roots/list"), Some(id)) => {
                if self.snapshot.is_some() {
                    self.answer_roots_list(id);
                } else if self.unavailable {
                    self.answer_unavailable(id);
                } else {
                    self.waiting.push(id);
                }
                Fate::Dropped
            }
            (Some("notifications/cancelled"), None) => {
                let cancelled = message.pointer("/params/requestId").cloned();
                let before = self.waiting.len();
                self.waiting.retain(|w| Some(w) != cancelled.as_ref());
                let late = cancelled
                    .as_ref()
                    .is_some_and(|id| self.answered.contains(&id_key(id)));
                // A cancellation of the proxy's own roots/list is for the proxy alone: the host
                // never saw that request.
                if self.waiting.len() < before || late {
                    Fate::Dropped
                } else {
                    Fate::Unchanged
                }
            }
            (None, Some(id)) => {
                self.learn_from_response(&id, message);
                let Some(exchange) = self.exchanges.remove(&id_key(&id)) else {
                    return Fate::Unchanged;
                };
                match self.finish_exchange(exchange, std::mem::take(message)) {
                    Some(response) => {
                        *message = response;
                        Fate::Rewritten
                    }
                    None => Fate::Dropped,
                }
            }
            _ => Fate::Unchanged,
        }
    }

    fn learn_from_response(&mut self, id: &Value, message: &Value) {
        if self.initialize_id.as_ref() == Some(id) {
            self.initialize_id = None;
            if let Some(version) = message
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
            {
                self.protocol_version = Some(version.to_owned());
            }
            if let Some(info) = message.pointer("/result/serverInfo") {
                self.server = Some(server_info(info));
            }
        } else if self.server.is_none()
            && let Some(info) = message.pointer(&format!(
                "/result/_meta/{}",
                META_SERVER_INFO.replace('/', "~1")
            ))
        {
            self.server = Some(server_info(info));
        }
    }

    /// Answers `roots/list` entries of an `input_required` result and retries, or passes the
    /// result to the host.
    fn finish_exchange(&mut self, mut exchange: Exchange, mut response: Value) -> Option<Value> {
        response["id"] = exchange.host_id.clone();
        let Some(result) = response.get("result") else {
            return Some(response);
        };
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            return Some(response);
        }
        let requests = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let roots_keys: Vec<String> = requests
            .iter()
            .filter(|(_, r)| r.get("method").and_then(Value::as_str) == Some("roots/list"))
            .map(|(k, _)| k.clone())
            .collect();
        if roots_keys.is_empty() {
            return Some(response);
        }
        let state = result.get("requestState").cloned();
        if roots_keys.len() < requests.len() {
            // Elicitation or sampling is mixed in: only the host can answer those. Pass them on
            // and answer the roots part when the host retries with the same requestState.
            if let Some(Value::String(state)) = &state {
                self.held.insert(state.clone(), roots_keys.clone());
            }
            if let Some(requests) = response
                .pointer_mut("/result/inputRequests")
                .and_then(Value::as_object_mut)
            {
                for key in &roots_keys {
                    requests.remove(key);
                }
            }
            return Some(response);
        }
        if self.snapshot.is_none() && !self.unavailable {
            // No list yet: answering now would tell the server there are no roots.
            self.parked.push((exchange, response));
            return None;
        }
        if exchange.rounds >= MAX_MRTR_ROUNDS {
            return Some(json!({
                "jsonrpc": "2.0",
                "id": exchange.host_id,
                "error": {
                    "code": -32603,
                    "message": format!("the server still asked for roots after {MAX_MRTR_ROUNDS} rounds; rootsctl proxy gave up on this request"),
                },
            }));
        }
        let retry_id = Value::String(format!("{RETRY_ID_PREFIX}{}", self.next_retry));
        self.next_retry += 1;
        let mut request = exchange.request.clone();
        request["id"] = retry_id.clone();
        if let Some(params) = object_at(&mut request, "params") {
            let mut answers = Map::new();
            for key in roots_keys {
                answers.insert(key, self.roots_value());
            }
            params.insert("inputResponses".to_owned(), Value::Object(answers));
            match state {
                Some(state) => params.insert("requestState".to_owned(), state),
                None => params.remove("requestState"),
            };
        }
        if let Some(revision) = self.snapshot.as_ref().map(|s| s.revision) {
            self.note_fetch(revision);
        }
        self.emit(Output::ToServer(to_line(&request)));
        exchange.request = request;
        exchange.rounds += 1;
        self.exchanges.insert(id_key(&retry_id), exchange);
        None
    }

    /// A host retry of a request whose roots part the proxy owes: add the roots answers.
    fn answer_held(&mut self, message: &mut Value) {
        let Some(state) = message
            .pointer("/params/requestState")
            .and_then(Value::as_str)
        else {
            return;
        };
        let Some(keys) = self.held.remove(state) else {
            return;
        };
        let roots = self.roots_value();
        if let Some(params) = object_at(message, "params")
            && let Some(responses) = object_in(params, "inputResponses")
        {
            for key in keys {
                responses.insert(key, roots.clone());
            }
        }
        if let Some(revision) = self.snapshot.as_ref().map(|s| s.revision) {
            self.note_fetch(revision);
        }
    }

    /// The host cancels a request the proxy is retrying under another id: cancel that id.
    /// Returns whether the message changed.
    fn translate_cancel(&mut self, message: &mut Value) -> bool {
        let Some(host_id) = message.pointer("/params/requestId").cloned() else {
            return false;
        };
        let current = self
            .exchanges
            .iter()
            .find(|(_, e)| e.host_id == host_id)
            .map(|(_, e)| e.request["id"].clone());
        match (current, message.pointer_mut("/params/requestId")) {
            (Some(current), Some(request_id)) if *request_id != current => {
                *request_id = current;
                true
            }
            _ => false,
        }
    }

    fn note_modern(&mut self, message: &Value) {
        if self.era == Era::Stateless {
            return;
        }
        self.era = Era::Stateless;
        self.protocol_version = message
            .pointer("/params/_meta")
            .and_then(|m| m.get(META_PROTOCOL_VERSION))
            .and_then(Value::as_str)
            .map(str::to_owned);
    }

    fn roots_value(&self) -> Value {
        serde_json::from_str(&self.roots_json).unwrap_or_else(|_| json!({"roots": []}))
    }

    fn answer_roots_list(&mut self, id: Value) {
        let id = id_key(&id);
        if self.answered.len() == ANSWERED_MEMORY {
            self.answered.pop_front();
        }
        self.answered.push_back(id.clone());
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#,
            self.roots_json
        );
        self.emit(Output::ToServer(line.into_bytes()));
        if let Some(revision) = self.snapshot.as_ref().map(|s| s.revision) {
            self.note_fetch(revision);
        }
        self.notification_outstanding = false;
    }

    fn note_fetch(&mut self, revision: u64) {
        self.served_revision = Some(revision);
        self.fetches += 1;
    }

    /// Sends `list_changed` if the one notification rule says it is due.
    fn maybe_notify(&mut self) {
        let Some(newest) = self.snapshot.as_ref().map(|s| s.revision) else {
            return;
        };
        if session::notice(&self.state(), newest) != Notice::Due {
            return;
        }
        self.notification_outstanding = true;
        self.owe_notification = false;
        self.notifications_sent += 1;
        self.emit(Output::ToServer(
            br#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#.to_vec(),
        ));
    }
}

/// A message's `method` and `id`, either of which may be absent.
fn method_and_id(message: &Value) -> (Option<String>, Option<Value>) {
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    (method, message.get("id").cloned())
}

/// A 2026-07-28 request carries its protocol version in `_meta`.
fn is_modern(message: &Value) -> bool {
    message
        .pointer("/params/_meta")
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .is_some()
}

fn add_roots_capability(message: &mut Value) {
    let Some(params) = object_at(message, "params") else {
        return;
    };
    let Some(meta) = object_in(params, "_meta") else {
        return;
    };
    if let Some(capabilities) = object_in(meta, META_CLIENT_CAPABILITIES) {
        capabilities
            .entry("roots".to_owned())
            .or_insert_with(|| json!({}));
    }
}

/// The object at `message[key]`, if `message` is an object and that member is one.
fn object_at<'a>(message: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    message.get_mut(key).and_then(Value::as_object_mut)
}

/// The object member `key` of `map`, created empty if absent; `None` if it is not an object.
fn object_in<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    map.entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
}

fn server_info(info: &Value) -> ServerInfo {
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
fn id_key(id: &Value) -> String {
    serde_json::to_string(id).expect("ids always serialise")
}

fn to_line(message: &Value) -> Vec<u8> {
    serde_json::to_vec(message).expect("JSON values always serialise")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rootsd_proto::{Root, WorkspaceName};

    fn snapshot(revision: u64, dirs: &[&str]) -> RootsSnapshot {
        RootsSnapshot {
            workspace: WorkspaceName::default(),
            revision,
            roots: dirs
                .iter()
                .map(|d| Root {
                    uri: format!("file:///{d}"),
                    name: Some((*d).to_owned()),
                })
                .collect(),
        }
    }

    fn host(relay: &mut Relay, message: Value) -> Vec<Output> {
        relay.from_host(&to_line(&message));
        relay.take_output()
    }

    fn server(relay: &mut Relay, message: Value) -> Vec<Output> {
        relay.from_server(&to_line(&message));
        relay.take_output()
    }

    fn lines(outputs: &[Output], to_server: bool) -> Vec<Value> {
        outputs
            .iter()
            .filter_map(|o| match (o, to_server) {
                (Output::ToServer(l), true) | (Output::ToHost(l), false) => {
                    Some(serde_json::from_slice(l).unwrap())
                }
                _ => None,
            })
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
        let mut relay = Relay::new(list_changed);
        relay.roots_changed(snapshot(1, &["a"]));
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
            let mut relay = Relay::new(list_changed);
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
        let mut relay = Relay::new(true);
        let line = br#"{"id":5,  "jsonrpc":"2.0","method":"tools/list"}"#;
        relay.from_host(line);
        assert_eq!(relay.take_output(), vec![Output::ToServer(line.to_vec())]);
        relay.from_server(b"not json at all");
        assert_eq!(
            relay.take_output(),
            vec![Output::ToHost(b"not json at all".to_vec())]
        );
    }

    #[test]
    fn roots_list_is_answered_locally_with_the_same_id() {
        let mut relay = Relay::new(true);
        relay.roots_changed(snapshot(4, &["a", "b"]));
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
        relay.roots_changed(snapshot(2, &["a", "b"]));
        let first = relay.take_output();
        assert_eq!(list_changed_count(&first), 1);
        assert_eq!(reported(&first).map(|s| s.notifications_sent), Some(1));
        for revision in 3..50 {
            relay.roots_changed(snapshot(revision, &["a", &format!("d{revision}")]));
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
        relay.roots_changed(snapshot(50, &["z"]));
        assert_eq!(list_changed_count(&relay.take_output()), 1);
    }

    #[test]
    fn no_notification_without_list_changed() {
        let mut relay = initialized(false);
        relay.roots_changed(snapshot(2, &["b"]));
        assert_eq!(list_changed_count(&relay.take_output()), 0);
    }

    #[test]
    fn changes_before_initialized_are_held_until_it_reaches_the_server() {
        let mut relay = Relay::new(true);
        relay.roots_changed(snapshot(1, &["a"]));
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
        relay.roots_changed(snapshot(2, &["b"]));
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
        let mut relay = Relay::new(true);
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
        relay.roots_changed(snapshot(1, &["a"]));
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
        let mut relay = Relay::new(true);
        server(
            &mut relay,
            json!({"jsonrpc":"2.0","id":1,"method":"roots/list"}),
        );
        relay.give_up_waiting();
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
        let mut relay = Relay::new(true);
        relay.roots_changed(snapshot(3, &["a"]));
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
        relay.roots_changed(snapshot(4, &["b"]));
        assert_eq!(
            list_changed_count(&relay.take_output()),
            0,
            "never list_changed in 2026-07-28"
        );
    }

    #[test]
    fn mixed_input_requests_go_to_the_host_and_roots_join_its_retry() {
        let mut relay = Relay::new(true);
        relay.roots_changed(snapshot(3, &["a"]));
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
        let mut relay = Relay::new(true);
        relay.roots_changed(snapshot(1, &["a"]));
        host(&mut relay, modern_call(json!(9)));
        let mut id = json!(9);
        for _ in 0..MAX_MRTR_ROUNDS {
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
        let mut relay = Relay::new(true);
        relay.roots_changed(snapshot(1, &["a"]));
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
        let mut relay = Relay::new(true);
        relay.roots_changed(snapshot(1, &["a"]));
        let out = server(
            &mut relay,
            json!([{"jsonrpc":"2.0","id":1,"method":"roots/list"},{"jsonrpc":"2.0","method":"notifications/message","params":{}}]),
        );
        assert_eq!(lines(&out, true)[0]["id"], 1);
        let forwarded = &lines(&out, false)[0];
        assert_eq!(forwarded.as_array().unwrap().len(), 1);
        assert_eq!(forwarded[0]["method"], "notifications/message");
    }

    #[test]
    fn a_server_refused_for_want_of_a_list_is_notified_once_one_arrives() {
        let mut relay = Relay::new(true);
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
        relay.give_up_waiting();
        relay.take_output();
        relay.roots_changed(snapshot(1, &["a"]));
        assert_eq!(list_changed_count(&relay.take_output()), 1);
    }

    #[test]
    fn input_required_before_any_list_waits_for_it() {
        let mut relay = Relay::new(true);
        host(&mut relay, modern_call(json!(3)));
        let out = server(
            &mut relay,
            json!({"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required",
                "inputRequests":{"ws":{"method":"roots/list"}},"requestState":"s"}}),
        );
        assert!(
            out.is_empty(),
            "nothing may be answered without a list: {out:?}"
        );
        relay.roots_changed(snapshot(2, &["a"]));
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
        relay.from_server(big.as_bytes());
        assert_eq!(relay.take_output(), vec![Output::ToHost(big.into_bytes())]);
    }

    #[test]
    fn the_initialize_result_reports_the_server() {
        let mut relay = Relay::new(true);
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
}
