//! The control protocol on rootsd's local socket: newline-delimited JSON-RPC 2.0.
//!
//! Each line is one JSON-RPC message. A client opens with [`Hello`]; after that it may send any
//! request, and the daemon may push [`RootsChanged`] notifications on connections that asked for
//! them ([`Watch`], [`RegisterSession`]). `docs/PROTOCOL.md` shows every method with example lines.
//!
//! Every method is a type implementing [`Method`], which ties its name to its parameter and result
//! types, so the client and the daemon cannot disagree about either.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::history::{LogEntry, LogParams, LogResult, LoggedPeer, Omitted, Renamed, Who};
pub use crate::host_roots::{HostAnswer, HostRoots, HostRootsMode};
pub use crate::mapping::{Withheld, WithheldReason, WithheldRoot};
use crate::root::Root;
pub use crate::session::{
    Era, FetchBehaviour, PreviousSession, ServerInfo, SessionState, UnknownWorkspace, WorkspaceVia,
};
use crate::workspace::WorkspaceName;

/// Version of this control protocol. A client and daemon with different versions refuse each
/// other at [`Hello`] with a message saying which side to upgrade or restart.
pub const PROTOCOL_VERSION: u32 = 2;

/// The longest line either side accepts, in bytes, newline excluded. A longer line is a framing
/// violation and closes the connection.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// A JSON-RPC method of the control protocol.
pub trait Method {
    const NAME: &'static str;
    /// What calling it does to the roots sessions see; the daemon checks the caller's role
    /// against it.
    const EFFECT: Effect;
    type Params: Serialize + DeserializeOwned;
    type Result: Serialize + DeserializeOwned;
}

/// A JSON-RPC request or notification, as read off the wire before its params are typed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    pub jsonrpc: String,
    /// Absent for notifications. Any JSON value other than `null` is echoed back verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    pub method: String,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub params: Value,
}

/// A JSON-RPC response: exactly one of `result` and `error` is present.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Response {
    pub jsonrpc: String,
    pub id: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
}

/// A JSON-RPC notification sent by the daemon.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Notification {
    pub jsonrpc: String,
    pub method: String,
    pub params: Value,
}

/// The `error` member of a failed response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// Error codes. The first five are JSON-RPC's own; the rest are rootsd's, in the range JSON-RPC
/// leaves to implementations.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The client's protocol version differs from the daemon's.
    pub const VERSION_MISMATCH: i64 = -32000;
    /// A request other than `hello` arrived before `hello`.
    pub const HELLO_REQUIRED: i64 = -32001;
    /// A root, workspace or session named in the request does not exist.
    pub const NOT_FOUND: i64 = -32002;
    /// A root in the request is not acceptable (not `file://`, remote host, …).
    pub const INVALID_ROOT: i64 = -32003;
    /// The store could not persist the change; nothing was changed.
    pub const STORAGE: i64 = -32004;
    /// A name matched more than one root.
    pub const AMBIGUOUS: i64 = -32005;
    /// The connection is not in a state that allows the request (e.g. a second registration).
    pub const INVALID_STATE: i64 = -32006;
    /// The peer may not do this: changing roots takes the daemon's own user, root, or a member
    /// of its admin group, and this peer is only a member of the shared service's group.
    pub const FORBIDDEN: i64 = -32007;
    /// The daemon does not admit this peer at all; sent once, with `"id": null`, and then the
    /// connection closes. The message says who the peer is, whom the daemon admits, and what to
    /// do.
    pub const NOT_ADMITTED: i64 = -32008;
    /// The daemon is at one of its limits (the memory its clients' unfinished lines may hold);
    /// sent with `"id": null`, and then the connection closes. Retrying later may succeed.
    pub const BUSY: i64 = -32009;
    /// The request would take the daemon past one of its limits (`daemon/src/limits.rs`): a
    /// workspace's roots or bytes, the workspaces, the session table or a user's share of it.
    /// The message names the limit; nothing was changed and the connection stays open.
    pub const LIMIT: i64 = -32010;
}

impl ErrorObject {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
}

impl Request {
    pub fn new<M: Method>(id: u64, params: &M::Params) -> Self {
        Self {
            jsonrpc: "2.0".to_owned(),
            id: Some(Value::from(id)),
            method: M::NAME.to_owned(),
            params: serde_json::to_value(params).expect("wire params always serialise"),
        }
    }

    /// A notification (no id, no response) of method `M`.
    pub fn notification<M: Method>(params: &M::Params) -> Self {
        Self {
            id: None,
            ..Self::new::<M>(0, params)
        }
    }
}

// Only the tests build responses this way: the daemon writes its lines with the id echoed byte for
// byte (`daemon/src/envelope.rs`), and clients only read them.
#[cfg(test)]
impl Response {
    pub fn success(id: Value, result: Value) -> Self {
        Self {
            jsonrpc: "2.0".to_owned(),
            id,
            result: Some(result),
            error: None,
        }
    }

    pub fn failure(id: Value, error: ErrorObject) -> Self {
        Self {
            jsonrpc: "2.0".to_owned(),
            id,
            result: None,
            error: Some(error),
        }
    }
}

impl Notification {
    /// Notification `M` with `params` as one line, newline included. Serialised straight from
    /// the params: going through a [`Value`] first built (and freed) a map per root, which was
    /// most of the cost of pushing a large workspace.
    pub fn line<M: Method>(params: &M::Params) -> String {
        #[derive(Serialize)]
        struct Borrowed<'a, P> {
            jsonrpc: &'static str,
            method: &'static str,
            params: &'a P,
        }
        let mut line = serde_json::to_string(&Borrowed {
            jsonrpc: "2.0",
            method: M::NAME,
            params,
        })
        .expect("wire params always serialise");
        line.push('\n');
        line
    }
}

/// Anything the daemon writes: a response to a request, or a pushed notification.
///
/// Clients read a line into this to tell the two apart by the presence of `id`.
#[derive(Clone, Debug, Deserialize)]
pub struct Incoming {
    #[serde(default)]
    pub id: Option<Value>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub params: Option<Value>,
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub error: Option<ErrorObject>,
}

/// What a method does to the roots sessions see, which decides who may call it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// It reads, or touches only the caller's own connection or session: every admitted peer
    /// may call it.
    Reads,
    /// It changes a workspace's roots, which every session of the workspace sees: it takes a
    /// peer whose role may change roots, and a read-only member of a shared service is refused
    /// ([`code::FORBIDDEN`]).
    ChangesRoots,
}

/// One method the daemon serves, as its dispatch looks it up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MethodInfo {
    pub name: &'static str,
    pub effect: Effect,
}

/// The table's entry for `M`.
pub const fn method_info<M: Method>() -> MethodInfo {
    MethodInfo {
        name: M::NAME,
        effect: M::EFFECT,
    }
}

/// The entry of the method named `name`, if the daemon serves one.
pub fn method_named(name: &str) -> Option<&'static MethodInfo> {
    METHODS.iter().find(|info| info.name == name)
}

/// Declares a method: its type, wire name, params, result and [`Effect`]. The effect has no
/// default, so a new method says what it does to the roots where it is declared.
macro_rules! method {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $params:ty, $result:ty, $effect:ident) => {
        $(#[$doc])*
        pub enum $ty {}
        impl Method for $ty {
            const NAME: &'static str = $name;
            const EFFECT: Effect = Effect::$effect;
            type Params = $params;
            type Result = $result;
        }
    };
}

/// Declares the methods the daemon serves, each as [`method!`] does, and [`METHODS`], the table
/// of them: a method declared here is in the table, and one declared elsewhere cannot be.
macro_rules! methods {
    ($($(#[$doc:meta])* $ty:ident, $name:literal, $params:ty, $result:ty, $effect:ident;)*) => {
        $(method!($(#[$doc])* $ty, $name, $params, $result, $effect);)*

        /// Every method a client may send the daemon, each with its [`Effect`], in the order
        /// declared. The daemon dispatches only what this table names, and checks the caller's
        /// role against its effect before anything else, so a method cannot be served without
        /// saying whether it changes roots.
        pub const METHODS: &[MethodInfo] = &[$(method_info::<$ty>()),*];
    };
}

methods! {
    /// `hello`: the first request on every connection; checks protocol versions.
    Hello, "hello", HelloParams, HelloResult, Reads;
    /// `roots.list`: the roots of one workspace, in insertion order, each with its origin.
    ListRoots, "roots.list", WorkspaceParams, RootsListing, Reads;
    /// `roots.add`: adds roots to a workspace, or renames existing ones; atomic.
    AddRoots, "roots.add", AddParams, ChangeResult, ChangesRoots;
    /// `roots.remove`: removes roots by URI or name; atomic, and nothing changes if any target is
    /// unknown.
    RemoveRoots, "roots.remove", RemoveParams, ChangeResult, ChangesRoots;
    /// `workspaces.list`: every workspace that has roots or sessions.
    ListWorkspaces, "workspaces.list", EmptyParams, WorkspacesResult, Reads;
    /// `status`: what the daemon is and how it is doing.
    Status, "status", EmptyParams, StatusResult, Reads;
    /// `watch`: subscribe this connection to [`RootsChanged`] notifications.
    Watch, "watch", WatchParams, WatchResult, Reads;
    /// `session.register`: this connection is an MCP session (a `rootsctl proxy`); the daemon
    /// pushes [`RootsChanged`] for its workspace until the connection closes. It changes no
    /// roots: members of a shared service attach sessions too.
    RegisterSession, "session.register", RegisterParams, RegisterResult, Reads;
    /// `session.update` (usually a notification): the session's whole state, which replaces what
    /// the daemon held.
    UpdateSession, "session.update", SessionState, EmptyResult, Reads;
    /// `session.publish`: the host's whole current list of roots, which the session publishes
    /// into its workspace (`rootsctl proxy --host-roots publish`) in place of what it published
    /// before. Acknowledged once durable. Every session of the workspace sees them, so it
    /// changes roots like `roots.add`.
    PublishRoots, "session.publish", PublishParams, PublishResult, ChangesRoots;
    /// `sessions.list`: the live MCP sessions, by id, in pages that fit a line.
    ListSessions, "sessions.list", SessionsParams, SessionsResult, Reads;
    /// `wait`: resolves once every notified session of a workspace has fetched `revision`, or
    /// when the timeout passes.
    WaitForSessions, "wait", WaitParams, WaitResult, Reads;
    /// `log`: the recorded changes, newest first: what each did, when, and who made it.
    Log, "log", LogParams, LogResult, Reads;
}
method!(
    /// `roots.changed` (daemon → client notification): a workspace's roots changed. Not in
    /// [`METHODS`]: the daemon sends it and serves it to nobody.
    RootsChanged, "roots.changed", RootsSnapshot, EmptyResult, Reads
);

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmptyParams {}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmptyResult {}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloParams {
    pub protocol_version: u32,
    /// Who is calling, for logs: e.g. `rootsctl 0.1.0`.
    #[serde(default)]
    pub client: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloResult {
    pub protocol_version: u32,
    pub daemon_version: String,
    pub pid: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceParams {
    #[serde(default)]
    pub workspace: WorkspaceName,
}

/// One workspace's roots at one store revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootsSnapshot {
    pub workspace: WorkspaceName,
    pub revision: u64,
    pub roots: Vec<Root>,
}

/// One workspace's roots at one store revision, each with where it comes from: what
/// `roots.list` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootsListing {
    pub workspace: WorkspaceName,
    pub revision: u64,
    pub roots: Vec<ListedRoot>,
}

impl From<RootsListing> for RootsSnapshot {
    /// The listing without who holds each root: what sessions and servers are given.
    fn from(listing: RootsListing) -> Self {
        Self {
            workspace: listing.workspace,
            revision: listing.revision,
            roots: listing
                .roots
                .into_iter()
                .map(|listed| listed.root)
                .collect(),
        }
    }
}

/// A root as `roots.list` shows it: MCP's `Root`, and who holds it in the workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedRoot {
    #[serde(flatten)]
    pub root: Root,
    /// Who holds the root: the user (`{"by":"hand"}`), sessions that publish their host's roots
    /// (`{"by":"session",…}`), or both. Never empty from a daemon that knows origins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origin: Vec<RootOrigin>,
}

/// Why a root is in its workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum RootOrigin {
    /// Added by hand (`rootsctl add`, `roots.add`): it stays until removed.
    Hand,
    /// Published by a live session from its host's roots: it goes when the session ends.
    Session {
        session: u64,
        #[serde(default)]
        label: String,
        #[serde(default)]
        pid: u32,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddParams {
    #[serde(default)]
    pub workspace: WorkspaceName,
    /// Canonical `file://` URIs; a root with a name renames an existing root of the same URI.
    pub roots: Vec<Root>,
}

/// A root to remove: by URI when the caller could make one of its argument, else by name.
/// Both may be given; the URI is tried first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveTarget {
    /// What the user typed, for error messages.
    pub input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveParams {
    #[serde(default)]
    pub workspace: WorkspaceName,
    pub targets: Vec<RemoveTarget>,
}

/// What an add or remove did. `revision` is the store revision after the change (unchanged if
/// nothing changed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeResult {
    pub workspace: WorkspaceName,
    pub revision: u64,
    #[serde(default)]
    pub added: Vec<Root>,
    #[serde(default)]
    pub renamed: Vec<Root>,
    #[serde(default)]
    pub unchanged: Vec<Root>,
    #[serde(default)]
    pub removed: Vec<Root>,
    /// Roots that were in the workspace only because sessions published them, and are now the
    /// user's too: they stay when those sessions end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adopted: Vec<Root>,
    /// How many roots the workspace has now.
    pub total: usize,
    /// How many sessions of the workspace will be sent `list_changed` for this change.
    #[serde(default)]
    pub notified_sessions: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceSummary {
    pub name: WorkspaceName,
    pub roots: usize,
    pub sessions: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspacesResult {
    pub workspaces: Vec<WorkspaceSummary>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusResult {
    pub daemon_version: String,
    pub protocol_version: u32,
    pub pid: u32,
    pub uptime_secs: u64,
    pub socket: String,
    /// Whether the socket was handed over by systemd rather than bound by rootsd.
    #[serde(default)]
    pub socket_activated: bool,
    pub state_dir: String,
    pub revision: u64,
    pub roots: usize,
    pub workspaces: usize,
    /// Connected clients, this one included.
    pub clients: usize,
    pub sessions: usize,
    /// How the store is doing.
    #[serde(default)]
    pub store: StoreHealth,
}

/// Whether the store takes changes as it should.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreHealth {
    pub state: StoreState,
    /// What failed, and whether acknowledged changes are safe; only when degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Since when (seconds since the Unix epoch); only when degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_unix: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreState {
    #[default]
    Ok,
    /// A write failed: changes are refused, or the database lags the journal. rootsd retries
    /// with every change and heals once writes succeed.
    Degraded,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchParams {
    /// Only this workspace; every workspace when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceName>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchResult {
    /// The revision the subscription starts after: changes with a higher revision are pushed.
    pub revision: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterParams {
    #[serde(default)]
    pub workspace: WorkspaceName,
    #[serde(default)]
    pub label: String,
    /// The proxy's process id.
    pub pid: u32,
    /// The session as the proxy knows it so far; after a daemon restart, everything it learnt.
    #[serde(default)]
    pub state: SessionState,
    /// The proxy's own id, the same at every registration of one proxy (at start and after each
    /// reconnection) and different for every proxy: how a restarted daemon recognises the
    /// sessions of its previous run coming back. Empty from proxies that have none; those are not
    /// expected back.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterResult {
    pub session_id: u64,
    pub snapshot: RootsSnapshot,
    /// Present when the session's workspace does not exist (it never had a root): most likely
    /// a misspelt `--workspace`, and the server gets no roots until it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_workspace: Option<UnknownWorkspace>,
}

/// `session.publish`: the host's roots, all of them, replacing what the session published before.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishParams {
    /// Canonical local `file://` URIs, at most [`crate::host_roots::MAX_HOST_ROOTS`]; an empty
    /// list withdraws everything the session published.
    pub roots: Vec<Root>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishResult {
    pub workspace: WorkspaceName,
    /// The store revision from which the workspace holds this publication (its current revision
    /// if nothing changed).
    pub revision: u64,
    /// How many roots the session publishes now.
    pub published: usize,
    /// Roots of the list that the session does not publish, because the user removed them
    /// (`rootsctl remove`) while it published them; they come back only once the host drops
    /// them and offers them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declined: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: u64,
    pub label: String,
    pub pid: u32,
    pub workspace: WorkspaceName,
    /// The workspace does not exist (it never had a root), so the server is given no roots:
    /// most likely a misspelt `rootsctl proxy --workspace`. Absent when it exists.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub workspace_missing: bool,
    pub list_changed: bool,
    pub era: Era,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// Seconds since the Unix epoch when the server last fetched roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fetch_unix: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_revision: Option<u64>,
    pub notifications_sent: u64,
    pub connected_secs: u64,
    /// How the server keeps its roots current, as the proxy has seen it.
    #[serde(default)]
    pub fetch_behaviour: FetchBehaviour,
    /// The roots the server was not given (`rootsctl proxy --map`); absent when none were.
    #[serde(default, skip_serializing_if = "Withheld::is_empty")]
    pub withheld: Withheld,
    /// What the session does with its host's roots (`rootsctl proxy --host-roots`).
    #[serde(default)]
    pub host_roots: HostRoots,
    /// How the server gets the workspace: it asks for roots, it is started with it
    /// (`rootsctl proxy -- server {roots}`, `--env`, `--cwd`), or both.
    #[serde(default)]
    pub workspace_via: WorkspaceVia,
    /// How many times the proxy restarted the server because a change altered what it is
    /// started with.
    #[serde(default)]
    pub restarts: u64,
    /// Why no server runs now, when none does; the proxy tries again at the next change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_failure: Option<String>,
}

/// `sessions.list` params: every field optional; none means the first page.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionsParams {
    /// Only sessions with a higher id: the next page after a result whose `more` was true, from
    /// its last session's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionsResult {
    /// By id, lowest first.
    pub sessions: Vec<SessionInfo>,
    /// More sessions follow these (past what fits in one answer): ask again with `after` set
    /// to the last one's id. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitParams {
    #[serde(default)]
    pub workspace: WorkspaceName,
    pub revision: u64,
    pub timeout_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitResult {
    /// Sessions that were expected to fetch and did.
    pub caught_up: Vec<SessionInfo>,
    /// Sessions that had not fetched `revision` when the timeout passed; empty on success.
    pub lagging: Vec<SessionInfo>,
    /// Sessions that were told but fetch roots only when they need them: they get `revision`
    /// at their next request, and are not waited for.
    #[serde(default)]
    pub on_use: Vec<SessionInfo>,
    /// Sessions of the workspace that the daemon's previous run had, still expected back when
    /// the timeout passed (the daemon started moments ago and they are reconnecting); empty on
    /// success.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reconnecting: Vec<PreviousSession>,
    /// Sessions of the workspace that the daemon's previous run had and that did not come back
    /// within the reconnection window after its start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_reconnected: Vec<PreviousSession>,
    /// The daemon started moments ago and could not read its record of the previous run's
    /// sessions, so it cannot know whether sessions are still reconnecting.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub previous_unknown: bool,
}

#[cfg(test)]
mod tests;
