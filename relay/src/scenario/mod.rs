//! Generated scenarios for the relay, and the invariants every one of them must keep: what the
//! fuzz target `proxy_relay` (fuzz/) and the property tests of the normal suite run.
//!
//! A [`Scenario`] is built from unstructured bytes ([`arbitrary`]): lines from the host and the
//! server (JSON-RPC messages and batches made of the methods, ids and shapes the relay cares
//! about, the same cut short, and raw bytes), lists from the daemon, over-long lines and clock
//! ticks. [`run`] drives them through a [`Relay`] and panics, naming the rule, on the first
//! output that breaks one ([`check`]). Nothing here runs in the proxy itself.

mod check;
mod stream;

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use rootsd_proto::root::ListRootsResult;
use rootsd_proto::wire::RootsSnapshot;
use rootsd_proto::{Root, WorkspaceName};
use serde_json::{Map, Value, json};

use super::{Config, Relay, Side};

/// One run: the session's configuration and what happens to it, in order.
#[derive(Debug, Arbitrary)]
pub struct Scenario {
    pub list_changed: bool,
    pub events: Vec<Event>,
}

#[derive(Debug, Arbitrary)]
pub enum Event {
    Host(Line),
    Server(Line),
    /// The daemon's list: `count % 4` roots at revision `revision`.
    Roots {
        revision: u8,
        count: u8,
    },
    /// The clock moves on by this many milliseconds times 16 (up to about 17 minutes).
    Tick(u16),
    /// A line too long to relay, of which only this beginning was kept.
    TooLong {
        from_host: bool,
        prefix: Line,
    },
}

#[derive(Debug, Arbitrary)]
pub enum Line {
    Message(Message, Spacing),
    Batch(Vec<Message>, Spacing),
    /// A message cut after this many bytes (modulo its length): never a whole JSON value.
    Truncated(Message, u16),
    /// Any bytes (newlines removed, as the line reader removes them).
    Raw(Vec<u8>),
}

/// How a message is spelt: the relay finds members by their spans, whatever the spacing.
#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum Spacing {
    Compact,
    /// A space after every `:` and `,`.
    Spaced,
    /// Whitespace around the line.
    Padded,
    /// The members in reverse order: `result` or `error` before `id`, as the TypeScript SDK
    /// writes them (a batch's messages stay compact).
    Reversed,
}

/// One JSON-RPC message of the shapes the relay reads.
#[derive(Debug, Arbitrary)]
pub struct Message {
    pub jsonrpc: bool,
    pub id: Id,
    pub method: Option<Method>,
    pub body: Body,
}

#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum Id {
    Absent,
    Null,
    /// A number from a small pool, so that ids collide.
    Int(u8),
    /// A string from a small pool, the proxy's own spelling among them.
    Text(u8),
    Float,
    Object,
}

#[derive(Debug, Arbitrary)]
pub enum Method {
    Initialize,
    Initialized,
    RootsList,
    ListChanged,
    Cancelled,
    ToolsCall,
    PromptsGet,
    ResourcesRead,
    ToolsList,
    Ping,
    Discover,
    Elicitation,
    Log,
    Other(String),
}

#[derive(Debug, Arbitrary)]
pub enum Body {
    None,
    Params(Params),
    Result(ResultBody),
    Error,
}

#[derive(Debug, Arbitrary)]
pub enum Params {
    Empty,
    NotObject,
    Initialize {
        version: Version,
        roots: Option<bool>,
        capabilities_not_object: bool,
    },
    /// A 2026-07-28 request: `_meta` with the protocol version.
    Modern {
        version: Version,
        capabilities: bool,
        state: Option<u8>,
        responses: Vec<u8>,
    },
    MetaNotObject,
    Cancel(Id),
}

#[derive(Debug, Arbitrary)]
pub enum ResultBody {
    Empty,
    NotObject,
    Initialize {
        version: Version,
        info: bool,
    },
    InputRequired {
        requests: Vec<InputKind>,
        state: Option<u8>,
    },
    ServerInfoMeta,
    Complete,
}

#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum InputKind {
    Roots,
    Elicitation,
    Sampling,
}

#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum Version {
    V20241105,
    V20250326,
    V20251125,
    V20260728,
    Unknown,
}

/// Runs `scenario` through a relay whose clock starts at `start`, checking every output; panics
/// on the first broken rule.
///
/// A second relay, the twin, is given the same events, except that each server line it may
/// stream ([`Relay::stream_from_server`], decided on the line's first half) reaches it in two
/// pieces: its output must be the first relay's, the streamed line in place of the whole one
/// ([`stream::agrees`]).
pub fn run(scenario: &Scenario, start: Instant) {
    let mut now = start;
    let mut relay = Relay::new(Config::new(scenario.list_changed), now);
    let mut twin = Relay::new(Config::new(scenario.list_changed), now);
    let mut checker = check::Checker::new(scenario.list_changed);
    for event in &scenario.events {
        let mut streamed = None;
        let expected = match event {
            Event::Host(line) => {
                let bytes = line.bytes();
                let expected = checker.host_line(line, &bytes);
                relay.from_host(bytes.clone(), now);
                twin.from_host(bytes, now);
                expected
            }
            Event::Server(line) => {
                let bytes = line.bytes();
                let expected = checker.server_line(line, &bytes);
                relay.from_server(bytes.clone(), now);
                streamed = stream::server_line(&mut twin, bytes, now);
                expected
            }
            Event::Roots { revision, count } => {
                let paths: Vec<String> = (0..count % 4).map(|i| format!("srv/r{i}")).collect();
                let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
                let snapshot = daemon_list(u64::from(*revision), &paths);
                checker.roots(
                    serde_json::to_value(ListRootsResult {
                        roots: snapshot.roots.clone(),
                    })
                    .expect("roots serialise"),
                );
                relay.roots_changed(snapshot.clone(), now);
                twin.roots_changed(snapshot, now);
                check::Expected::Anything
            }
            Event::Tick(step) => {
                now += Duration::from_millis(u64::from(*step) * 16);
                relay.tick(now);
                twin.tick(now);
                check::Expected::Anything
            }
            Event::TooLong { from_host, prefix } => {
                let bytes = prefix.bytes();
                let side = if *from_host { Side::Host } else { Side::Server };
                checker.too_long(&bytes);
                relay.line_too_long(side, &bytes, 16 << 20);
                twin.line_too_long(side, &bytes, 16 << 20);
                check::Expected::Anything
            }
        };
        let _ = relay.next_deadline();
        let outputs = relay.take_output();
        stream::agrees(&outputs, streamed, twin.take_output(), event);
        checker.outputs(&outputs, &expected, event);
    }
}

/// The daemon's list of the default workspace at `revision`: each of `paths` (relative, without
/// a leading `/`) as `file:///<path>`, named after its last component. The one builder of lists
/// for the relay's scenarios, transcripts and unit tests.
pub(crate) fn daemon_list(revision: u64, paths: &[&str]) -> RootsSnapshot {
    RootsSnapshot {
        workspace: WorkspaceName::default(),
        revision,
        roots: paths
            .iter()
            .map(|p| Root {
                uri: format!("file:///{p}"),
                name: p.rsplit('/').next().map(str::to_owned),
            })
            .collect(),
    }
}

impl Line {
    /// The line as it reaches the relay: without a newline.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        match self {
            Self::Message(message, Spacing::Reversed) => reversed(&message.to_value()),
            Self::Message(message, spacing) => spaced(&message.to_value().to_string(), *spacing),
            Self::Batch(messages, spacing) => {
                let batch = Value::Array(messages.iter().map(Message::to_value).collect());
                spaced(&batch.to_string(), *spacing)
            }
            Self::Truncated(message, at) => {
                let whole = message.to_value().to_string().into_bytes();
                whole[..usize::from(*at) % whole.len()].to_vec()
            }
            Self::Raw(bytes) => bytes.iter().copied().filter(|b| *b != b'\n').collect(),
        }
    }
}

/// An object's members written in reverse order; anything else compact.
fn reversed(value: &Value) -> Vec<u8> {
    let Value::Object(members) = value else {
        return value.to_string().into_bytes();
    };
    let members: Vec<String> = members
        .iter()
        .rev()
        .map(|(key, value)| format!("{}:{value}", Value::from(key.as_str())))
        .collect();
    format!("{{{}}}", members.join(",")).into_bytes()
}

/// `json` (compact, as serde_json writes it) respaced; strings are left alone.
fn spaced(json: &str, spacing: Spacing) -> Vec<u8> {
    match spacing {
        Spacing::Compact | Spacing::Reversed => json.as_bytes().to_vec(),
        Spacing::Padded => format!(" \t{json} \r").into_bytes(),
        Spacing::Spaced => {
            let mut out = Vec::with_capacity(json.len() * 2);
            let (mut in_string, mut escaped) = (false, false);
            for b in json.bytes() {
                out.push(b);
                if in_string {
                    match (escaped, b) {
                        (true, _) => escaped = false,
                        (false, b'\\') => escaped = true,
                        (false, b'"') => in_string = false,
                        _ => {}
                    }
                } else if b == b'"' {
                    in_string = true;
                } else if b == b':' || b == b',' {
                    out.push(b' ');
                }
            }
            out
        }
    }
}

impl Id {
    pub(crate) fn to_value(self) -> Option<Value> {
        match self {
            Self::Absent => None,
            Self::Null => Some(Value::Null),
            Self::Int(n) => Some(json!(n % 6)),
            Self::Text(n) => Some(json!(match n % 6 {
                0 => "a".to_owned(),
                1 => "b".to_owned(),
                2 => "1".to_owned(),
                3 => format!("rootsd-retry-{}", n / 6 % 3),
                4 => format!("rootsd-relay-{}", n / 6 % 3),
                _ => format!("rootsd-discover-{}", n / 6 % 3),
            })),
            Self::Float => Some(json!(1.5)),
            Self::Object => Some(json!({"id": 1})),
        }
    }
}

impl Method {
    pub(crate) fn name(&self) -> &str {
        match self {
            Self::Initialize => "initialize",
            Self::Initialized => "notifications/initialized",
            Self::RootsList => "roots/list",
            Self::ListChanged => "notifications/roots/list_changed",
            Self::Cancelled => "notifications/cancelled",
            Self::ToolsCall => "tools/call",
            Self::PromptsGet => "prompts/get",
            Self::ResourcesRead => "resources/read",
            Self::ToolsList => "tools/list",
            Self::Ping => "ping",
            Self::Discover => "server/discover",
            Self::Elicitation => "elicitation/create",
            Self::Log => "notifications/message",
            Self::Other(name) => name,
        }
    }

    /// Whether the relay has a rule for this method, from either side.
    pub(crate) fn is_owned(&self) -> bool {
        matches!(
            self,
            Self::Initialize
                | Self::Initialized
                | Self::RootsList
                | Self::ListChanged
                | Self::Cancelled
                | Self::ToolsCall
                | Self::PromptsGet
                | Self::ResourcesRead
        ) || [
            "initialize",
            "notifications/initialized",
            "roots/list",
            "notifications/roots/list_changed",
            "notifications/cancelled",
            "tools/call",
            "prompts/get",
            "resources/read",
        ]
        .contains(&self.name())
    }
}

impl Version {
    fn name(self) -> &'static str {
        match self {
            Self::V20241105 => "2024-11-05",
            Self::V20250326 => "2025-03-26",
            Self::V20251125 => "2025-11-25",
            Self::V20260728 => "2026-07-28",
            Self::Unknown => "1999-01-01",
        }
    }
}

impl Message {
    pub(crate) fn to_value(&self) -> Value {
        let mut message = Map::new();
        if self.jsonrpc {
            message.insert("jsonrpc".into(), json!("2.0"));
        }
        if let Some(id) = self.id.to_value() {
            message.insert("id".into(), id);
        }
        if let Some(method) = &self.method {
            message.insert("method".into(), json!(method.name()));
        }
        match &self.body {
            Body::None => {}
            Body::Params(params) => {
                message.insert("params".into(), params.to_value());
            }
            Body::Result(result) => {
                message.insert("result".into(), result.to_value());
            }
            Body::Error => {
                message.insert(
                    "error".into(),
                    json!({"code": -32601, "message": "no such method"}),
                );
            }
        }
        Value::Object(message)
    }

    /// Whether the relay has no rule for this message and must pass it on as it came: a request
    /// or notification of a method it does not own, without 2026-07-28 `_meta`, under an id none
    /// of the proxy's own requests can hold.
    pub(crate) fn is_unowned(&self) -> bool {
        let Some(method) = &self.method else {
            return false;
        };
        let modern = matches!(self.body, Body::Params(Params::Modern { .. }));
        let proxy_spelling = matches!(self.id, Id::Text(n) if n % 6 >= 3);
        !method.is_owned() && !modern && !proxy_spelling
    }
}

impl Params {
    fn to_value(&self) -> Value {
        match self {
            Self::Empty => json!({}),
            Self::NotObject => json!(5),
            Self::Initialize {
                version,
                roots,
                capabilities_not_object,
            } => {
                let capabilities = match (capabilities_not_object, roots) {
                    (true, _) => json!(1),
                    (false, None) => json!({}),
                    (false, Some(list_changed)) => {
                        json!({"roots": {"listChanged": list_changed}})
                    }
                };
                json!({
                    "protocolVersion": version.name(),
                    "capabilities": capabilities,
                    "clientInfo": {"name": "fuzz", "version": "1"}
                })
            }
            Self::Modern {
                version,
                capabilities,
                state,
                responses,
            } => {
                let mut meta = Map::new();
                meta.insert(
                    "io.modelcontextprotocol/protocolVersion".into(),
                    json!(version.name()),
                );
                if *capabilities {
                    meta.insert(
                        "io.modelcontextprotocol/clientCapabilities".into(),
                        json!({"elicitation": {}}),
                    );
                }
                let mut params = Map::new();
                params.insert("name".into(), json!("tool"));
                params.insert("_meta".into(), Value::Object(meta));
                if let Some(state) = state {
                    params.insert("requestState".into(), json!(format!("s{}", state % 4)));
                }
                if !responses.is_empty() {
                    let answers: Map<String, Value> = responses
                        .iter()
                        .map(|k| (format!("k{}", k % 4), json!({"action": "accept"})))
                        .collect();
                    params.insert("inputResponses".into(), Value::Object(answers));
                }
                Value::Object(params)
            }
            Self::MetaNotObject => json!({"_meta": 3}),
            Self::Cancel(id) => {
                let mut params = Map::new();
                if let Some(id) = id.to_value() {
                    params.insert("requestId".into(), id);
                }
                params.insert("reason".into(), json!("changed my mind"));
                Value::Object(params)
            }
        }
    }
}

impl ResultBody {
    fn to_value(&self) -> Value {
        match self {
            Self::Empty => json!({}),
            Self::NotObject => json!("done"),
            Self::Initialize { version, info } => {
                let mut result = json!({"protocolVersion": version.name(), "capabilities": {}});
                if *info {
                    result["serverInfo"] = json!({"name": "fuzzed", "version": "0.1"});
                }
                result
            }
            Self::InputRequired { requests, state } => {
                let requests: Map<String, Value> = requests
                    .iter()
                    .enumerate()
                    .map(|(i, kind)| {
                        let method = match kind {
                            InputKind::Roots => "roots/list",
                            InputKind::Elicitation => "elicitation/create",
                            InputKind::Sampling => "sampling/createMessage",
                        };
                        (format!("k{i}"), json!({"method": method, "params": {}}))
                    })
                    .collect();
                let mut result = json!({"resultType": "input_required", "inputRequests": requests});
                if let Some(state) = state {
                    result["requestState"] = json!(format!("s{}", state % 4));
                }
                result
            }
            Self::ServerInfoMeta => json!({
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "2"}},
                "content": []
            }),
            Self::Complete => json!({"resultType": "complete", "content": []}),
        }
    }
}
