//! The MCP relay of `rootsctl proxy` as a pure state machine: lines in from the host, the server
//! and the daemon, and the clock; lines and the session's state out. No I/O happens here (the
//! crate depends on no I/O library, which tests/tests/tidy/ checks), and time is an input, so
//! every rule of the protocol can be tested with plain function calls. Beside it, what else of
//! the proxy is pure: the server's launch [`template`] and the session's default [`label`].
//!
//! The crate's root handles what both protocol eras share: splitting a line into messages (a
//! 2025-03-26 batch holds several), deciding each message's fate, forwarding what is left, the
//! requests in flight, and the list the server is given: the roots the daemon last sent, joined
//! by the host's own with `--host-roots merge` (`host_roots`), rewritten with `--map`
//! ([`Mapping`]), built once per change; both eras answer from that one list. The rules of each
//! era live beside it:
//! - `handshake` (2024-11-05 … 2025-11-25): the host's `initialize` gains
//!   `capabilities.roots`; the server's `roots/list` is answered here and never reaches the host;
//!   the host's own `notifications/roots/list_changed` is dropped; `list_changed` goes to the
//!   server when [`rootsd_proto::session::notice`] says it is due;
//! - `stateless` (2026-07-28): requests that may need roots gain `roots: {}` in their client
//!   capabilities, and `roots/list` entries of `input_required` results are answered here,
//!   retrying with a new id;
//! - `host_roots` (both eras, `--host-roots merge|publish`): the host's own roots, asked for
//!   and taken from its answers.
//!
//! Every other message, and every part of a message the proxy does not change, is forwarded byte
//! for byte: changes are spliced into the original line (`json::Editor`).

mod handshake;
mod host_roots;
mod json;
pub mod label;
mod message;
#[cfg(test)]
mod properties;
mod restart;
#[cfg(any(test, feature = "fuzzing"))]
pub mod scenario;
mod stateless;
mod stream;
pub mod template;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transcript;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rootsd_proto::host_roots::{HostRoots, HostRootsMode};
use rootsd_proto::mapping::Mapping;
use rootsd_proto::root::Root;
use rootsd_proto::session::SessionState;
use rootsd_proto::wire::RootsSnapshot;

use handshake::Handshake;
use host_roots::HostSide;
use message::Msg;
use restart::Restart;
use stateless::Stateless;

pub use host_roots::{Publication, PublishAck};
pub use restart::ServedPaths;
pub use stream::{Forward, Streamed};

/// How long a request for roots may wait for the daemon's first list before it is answered with
/// an error.
pub const FIRST_LIST_PATIENCE: Duration = Duration::from_secs(5);

/// How long a server has to fetch roots after `list_changed` before the proxy concludes that it
/// does not react to notifications and fetches on use instead. The reference filesystem server
/// reacts within milliseconds.
const NOTIFY_WINDOW: Duration = Duration::from_secs(1);

/// How long the host has to answer the proxy's `roots/list` (`--host-roots merge|publish`), and
/// how long answers of roots wait for the host's first list or for a publication to come back
/// from the daemon. Hosts answer in milliseconds; one that does not holds nothing up for longer.
const HOST_ROOTS_PATIENCE: Duration = Duration::from_secs(2);

/// How many requests of the host the relay follows at once (for id uniqueness and the era);
/// past that, new ones are forwarded without being followed.
const MAX_IN_FLIGHT: usize = 65_536;

/// How the relay behaves; fixed for the session.
#[derive(Clone, Debug)]
pub struct Config {
    /// Declare `roots.listChanged` to the server in `initialize`.
    pub list_changed: bool,
    pub patience: Duration,
    pub notify_window: Duration,
    /// `--map`: the server sees each root at its mapped path, and not at all outside the maps.
    /// `None` gives it the daemon's list as it is.
    pub mapping: Option<Mapping>,
    /// `--host-roots`: what the session does with the host's own roots.
    pub host_roots: HostRootsMode,
    pub host_patience: Duration,
    /// The server is started with the workspace in its command line, environment or working
    /// directory, and restarted when a change alters them.
    pub templated: bool,
}

impl Config {
    pub fn new(list_changed: bool) -> Self {
        Self {
            list_changed,
            patience: FIRST_LIST_PATIENCE,
            notify_window: NOTIFY_WINDOW,
            mapping: None,
            host_roots: HostRootsMode::Replace,
            host_patience: HOST_ROOTS_PATIENCE,
            templated: false,
        }
    }
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
    /// The server fetched again and only the count in [`Relay::state`] moved: worth telling
    /// the daemon, but not at once.
    Fetched,
    /// `--host-roots publish`: the host's list, for the daemon; acknowledge it with
    /// [`Relay::published`].
    Publish(Publication),
}

/// Which side a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Host,
    Server,
}

/// What the relay does with one message.
enum Fate {
    /// Forward it as it came.
    Keep,
    /// Forward these bytes instead.
    Replace(Vec<u8>),
    /// It was the proxy's alone; forward nothing.
    Drop,
}

/// The daemon's newest list for this session's workspace, and whether it is worth waiting for.
#[derive(Default)]
struct Roots {
    snapshot: Option<RootsSnapshot>,
    /// `{"roots":[…]}` as the server is to see it (with the host's roots merged, mapped),
    /// serialised once per change: `roots/list` is on the hot path.
    json: Vec<u8>,
    /// The handshake era's `roots/list` response around `json`, made when `json` is.
    answer: message::ReadyAnswer,
    /// The same roots as local paths, for a server started with the workspace in its command
    /// line, environment or working directory ([`Relay::served_paths`]).
    paths: Vec<std::path::PathBuf>,
    /// Counts the changes of `json` or of the revision behind it, so that the proxy expands its
    /// template only when something moved.
    generation: u64,
    /// The server was given `json` as it is now: a new revision that leaves it unchanged (a
    /// change outside the `--map`s, a root the host already gave, a change of who holds a root)
    /// leaves the server up to date.
    given: bool,
    /// Answers wait for the host's roots ([`HostSide::holds`]).
    held: bool,
    /// A request waited its whole patience for a first list in vain: until one arrives, requests
    /// for roots are answered with an error at once.
    given_up: bool,
}

/// Whether a request for roots can be answered now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Availability {
    Ready,
    /// No list yet; one is expected soon.
    Awaited,
    /// No list, and a request already waited for one in vain.
    Unavailable,
}

impl Roots {
    fn availability(&self) -> Availability {
        match (&self.snapshot, self.given_up) {
            (Some(_), _) if self.held => Availability::Awaited,
            (Some(_), _) => Availability::Ready,
            (None, false) => Availability::Awaited,
            (None, true) => Availability::Unavailable,
        }
    }

    fn revision(&self) -> Option<u64> {
        self.snapshot.as_ref().map(|s| s.revision)
    }
}

/// A host request on its way, by the key of its id.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    /// It carried 2026-07-28 `_meta` (and the handshake was not negotiated).
    modern: bool,
}

/// What both eras read and write.
struct Shared {
    config: Config,
    state: SessionState,
    roots: Roots,
    host: HostSide,
    now: Instant,
    /// Host requests whose responses have not passed yet.
    in_flight: HashMap<Vec<u8>, InFlight>,
    out: Vec<Output>,
}

impl Shared {
    fn emit(&mut self, output: Output) {
        self.out.push(output);
    }

    /// The server was given the roots the proxy holds.
    fn note_fetch(&mut self) {
        if let Some(revision) = self.roots.revision() {
            self.state.fetched_revision = Some(revision);
            self.state.fetches += 1;
            self.roots.given = true;
        }
    }

    /// Builds the list the server is to see from the daemon's (with the host's merged, then
    /// mapped). Returns whether it changed.
    fn refresh_served(&mut self) -> bool {
        let Some(snapshot) = &self.roots.snapshot else {
            return false;
        };
        let merged;
        let roots = match self.host.merged(self.config.host_roots) {
            Some(host) => {
                merged = rootsd_proto::host_roots::union(&snapshot.roots, host);
                &merged
            }
            None => &snapshot.roots,
        };
        self.roots.generation += 1;
        let mapped;
        let served = match &self.config.mapping {
            None => roots,
            Some(mapping) => {
                let applied = mapping.apply(roots);
                self.state.withheld = applied.withheld;
                mapped = applied.roots;
                &mapped
            }
        };
        let json = roots_json(served);
        if json == self.roots.json {
            return false;
        }
        // Every root the daemon or a host gives is a canonical local file:// URI by now; one that
        // did not decode could not be named on a command line anyway.
        self.roots.paths = served
            .iter()
            .filter_map(|root| rootsd_proto::root::path_from_uri(&root.uri).ok())
            .collect();
        self.roots.answer = message::ReadyAnswer::new(&json);
        self.roots.json = json;
        self.roots.given = false;
        true
    }

    /// Whether answers wait for the host's roots, now.
    fn update_held(&mut self) {
        self.roots.held = self.host.holds(self.roots.revision());
    }
}

/// The relay's state for one MCP session.
pub struct Relay {
    shared: Shared,
    handshake: Handshake,
    stateless: Stateless,
    restart: Restart,
    /// The state as last handed out in [`Output::State`].
    reported: SessionState,
}

/// What to do after a host line was forwarded.
enum After {
    Initialized,
    /// The host gave its roots, and the list the server sees changed, or a wait may be over.
    HostRootsChanged,
}

impl Relay {
    pub fn new(config: Config, now: Instant) -> Self {
        let mut state = SessionState {
            host_roots: HostRoots::new(config.host_roots),
            ..SessionState::default()
        };
        state.launch.templated = config.templated;
        Self {
            shared: Shared {
                config,
                state: state.clone(),
                roots: Roots::default(),
                host: HostSide::default(),
                now,
                in_flight: HashMap::new(),
                out: Vec::new(),
            },
            handshake: Handshake::default(),
            stateless: Stateless::default(),
            restart: Restart::default(),
            reported: state,
        }
    }

    /// Everything the relay wants done since the last call, in order, followed by the session's
    /// state if it changed.
    pub fn take_output(&mut self) -> Vec<Output> {
        self.drain_output().collect()
    }

    /// [`Relay::take_output`] without a new vector per turn: the relay keeps its queue's room,
    /// so a turn that relays a line allocates nothing for it.
    pub fn drain_output(&mut self) -> std::vec::Drain<'_, Output> {
        if self.reported.differs_beyond_fetch_count(&self.shared.state) {
            self.reported = self.shared.state.clone();
            self.shared.emit(Output::State(self.reported.clone()));
        } else if self.reported.fetches != self.shared.state.fetches {
            self.reported.fetches = self.shared.state.fetches;
            self.shared.emit(Output::Fetched);
        }
        self.shared.out.drain(..)
    }

    /// The session as the relay knows it now.
    pub fn state(&self) -> &SessionState {
        &self.shared.state
    }

    /// When [`Relay::tick`] must next be called, if anything is waiting on the clock.
    pub fn next_deadline(&self) -> Option<Instant> {
        [
            self.handshake.next_deadline(),
            self.stateless.next_deadline(),
            self.shared.host.next_deadline(),
            self.restart.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The clock reached `now`: give up on what waited too long.
    pub fn tick(&mut self, now: Instant) {
        self.shared.now = now;
        host_roots::tick(&mut self.shared);
        self.release();
        self.handshake.tick(&mut self.shared);
        self.stateless.tick(&mut self.shared);
        self.replay_tick();
    }

    /// What became of a publication of the host's roots (`--host-roots publish`).
    pub fn published(&mut self, ack: PublishAck, now: Instant) {
        self.shared.now = now;
        host_roots::acknowledged(&mut self.shared, ack);
        self.release();
    }

    /// Answers what waited for roots, if they can be answered now.
    fn release(&mut self) {
        self.shared.update_held();
        if self.shared.roots.availability() == Availability::Ready {
            self.handshake.answer_waiting(&mut self.shared);
            self.stateless.resume_parked(&mut self.shared);
        }
    }

    /// The list the server sees changed without a new revision (its host's roots, with
    /// `merge`): tell it, as a change of revision would.
    fn served_changed(&mut self) {
        self.release();
        self.handshake.maybe_notify(&mut self.shared);
    }

    /// A line from the host. It is taken by value: a line the proxy does not change (most of
    /// them, some megabytes long) is forwarded as the very same buffer, never copied.
    pub fn from_host(&mut self, line: impl Into<Vec<u8>>, now: Instant) {
        self.shared.now = now;
        self.relay(line.into(), Side::Host);
    }

    /// A line from the server; see [`Relay::from_host`].
    pub fn from_server(&mut self, line: impl Into<Vec<u8>>, now: Instant) {
        self.shared.now = now;
        self.relay(line.into(), Side::Server);
    }

    /// The daemon's newest list for this session's workspace.
    pub fn roots_changed(&mut self, snapshot: RootsSnapshot, now: Instant) {
        self.shared.now = now;
        if self.shared.roots.snapshot.as_ref() == Some(&snapshot) {
            return;
        }
        let revision = snapshot.revision;
        self.shared.roots.snapshot = Some(snapshot);
        self.shared.roots.given_up = false;
        let changed = self.shared.refresh_served();
        if !changed && self.shared.roots.given {
            // A change the server cannot see (outside the maps, a root its host gave already, a
            // change of who holds a root) leaves it holding the new revision's list already: it
            // is not notified, and `wait` finds it caught up as soon as this state reaches the
            // daemon.
            self.shared.state.fetched_revision = Some(revision);
        }
        host_roots::daemon_list(&mut self.shared, revision);
        self.release();
        self.handshake.maybe_notify(&mut self.shared);
    }

    /// A line from `side` was longer than the proxy accepts and was discarded; `prefix` is its
    /// beginning. If the prefix shows an id, the peer waiting on that message gets an error
    /// response instead of silence: the sender of a request, or whoever asked for a response.
    pub fn line_too_long(&mut self, side: Side, prefix: &[u8], limit: usize) {
        let Some(leading) = leading_members(prefix) else {
            return;
        };
        let Some(id) = leading.id else { return };
        let what = if leading.request {
            "request"
        } else {
            "response"
        };
        let message = format!(
            "the {} {what} was longer than {limit} bytes, which rootsctl proxy does not relay",
            match side {
                Side::Host => "host's",
                Side::Server => "server's",
            }
        );
        let output = match (side, leading.request) {
            (Side::Host, true) => Output::ToHost(message::internal_error(&id, &message)),
            (Side::Server, true) => Output::ToServer(message::internal_error(&id, &message)),
            (Side::Host, false) if self.shared.host.owns(&id) => {
                // The host's answer to the proxy's own roots/list: nothing for the server.
                host_roots::too_long(&mut self.shared, &id);
                self.release();
                return;
            }
            (Side::Host, false) => Output::ToServer(message::internal_error(&id, &message)),
            (Side::Server, false) => {
                // The host knows the request by its own id, which a retry may have replaced.
                let key = json::id_key(&id);
                self.shared.in_flight.remove(&key);
                let host_id = self.stateless.forget_exchange(&key).unwrap_or(id);
                Output::ToHost(message::internal_error(&host_id, &message))
            }
        };
        self.shared.emit(output);
    }

    /// Handles one line (a message, or a batch as 2025-03-26 allowed) from `side`, and forwards
    /// what is left of it: the original bytes if nothing changed, the edited message if
    /// something did, nothing if everything was the proxy's own.
    fn relay(&mut self, line: Vec<u8>, side: Side) {
        let wrap = match side {
            Side::Host => Output::ToServer,
            Side::Server => Output::ToHost,
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            // Not a message: nothing to forward, and a blank line is no error to answer.
            return;
        }
        if side == Side::Host && self.restart.down().is_some() {
            return self.refuse_host_line(&line);
        }
        // One scan reads the line: the members of an object, or the elements of a batch; a line
        // that is neither is not ours to judge, and the receiver answers it as it sees fit.
        let whole = json::trimmed(&line);
        let single = [whole];
        let batch_items;
        let (items, is_batch): (&[json::Span], bool) = if json::is_array(&line, whole) {
            match json::elements(&line, whole) {
                Some(items) => {
                    batch_items = items;
                    (&batch_items, true)
                }
                None => return self.shared.emit(wrap(line)),
            }
        } else {
            (&single, false)
        };
        // What is kept of each item of a batch: `(i, None)` keeps item i's original bytes, which
        // are only copied if another item changed (most lines change nothing and go on as they
        // came). A lone message's fate is applied as it is, with no list around it.
        let mut kept: Vec<(usize, Option<Vec<u8>>)> = Vec::new();
        let mut lone = None;
        let mut changed = false;
        let mut after = Vec::new();
        let mut roots_requests = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let fate = match (Msg::read(item.of(&line)), side) {
                (None, _) => Fate::Keep,
                (Some(msg), Side::Host) => self.host_message(&msg, &mut after),
                (Some(msg), Side::Server) => self.server_message(&msg, &mut roots_requests),
            };
            if !is_batch {
                lone = Some(fate);
                continue;
            }
            match fate {
                Fate::Keep => kept.push((index, None)),
                Fate::Replace(bytes) => {
                    changed = true;
                    kept.push((index, Some(bytes)));
                }
                Fate::Drop => changed = true,
            }
        }
        if !roots_requests.is_empty() {
            self.handshake
                .roots_list(&mut self.shared, roots_requests, is_batch);
        }
        if let Some(fate) = lone {
            match fate {
                Fate::Keep => self.shared.emit(wrap(line)),
                Fate::Replace(bytes) => self.shared.emit(wrap(bytes)),
                Fate::Drop => {}
            }
        } else if !changed {
            self.shared.emit(wrap(line));
        } else if !kept.is_empty() {
            let kept: Vec<Vec<u8>> = kept
                .into_iter()
                .map(|(index, bytes)| bytes.unwrap_or_else(|| items[index].of(&line).to_vec()))
                .collect();
            match kept.as_slice() {
                [_] if !is_batch => {
                    let single = kept.into_iter().next().expect("one item");
                    self.shared.emit(wrap(single));
                }
                _ => self.shared.emit(wrap(message::batch(&kept))),
            }
        }
        for effect in after {
            match effect {
                After::Initialized => {
                    self.handshake.initialized(&mut self.shared);
                    host_roots::initialized(&mut self.shared);
                    self.shared.update_held();
                }
                After::HostRootsChanged => self.served_changed(),
            }
        }
    }

    /// Decides the fate of one message from the host.
    fn host_message(&mut self, msg: &Msg<'_>, after: &mut Vec<After>) -> Fate {
        let method = msg.method();
        if let Some(method) = method.as_deref() {
            self.restart.record(msg, method);
        }
        match (method.as_deref(), msg.id()) {
            (Some("initialize"), Some(id)) => {
                self.follow(id, false);
                host_roots::initialize(&mut self.shared, msg);
                self.handshake.initialize(&mut self.shared, msg, id)
            }
            (Some("notifications/initialized"), None) => {
                after.push(After::Initialized);
                Fate::Keep
            }
            (Some("notifications/roots/list_changed"), None) => {
                // Never the server's: the proxy tells it about its own list. The host's list is
                // asked for again.
                host_roots::list_changed(&mut self.shared);
                Fate::Drop
            }
            (None, Some(id)) if msg.is_response() && self.shared.host.owns(id) => {
                host_roots::answered(&mut self.shared, msg);
                after.push(After::HostRootsChanged);
                Fate::Drop
            }
            (None, Some(id))
                if msg.is_response()
                    && self.shared.config.templated
                    && self.restart.answers_old_server(&json::id_key(id)) =>
            {
                // The server that asked was restarted away: the new one never asked.
                Fate::Drop
            }
            (Some("notifications/cancelled"), None) => {
                self.stateless.host_cancel(&self.shared, msg)
            }
            (Some(method), Some(id)) => {
                let modern = stateless::is_modern(msg) && !self.handshake.negotiated();
                self.follow(id, modern);
                if modern {
                    let method = method.to_owned();
                    self.stateless
                        .host_request(&mut self.shared, msg, &method, id)
                } else {
                    self.stateless.avoid_collision(&mut self.shared, msg, id)
                }
            }
            _ => Fate::Keep,
        }
    }

    /// Decides the fate of one message from the server. `roots/list` requests are collected in
    /// `roots_requests`, to be answered together once the line is read.
    fn server_message(&mut self, msg: &Msg<'_>, roots_requests: &mut Vec<Vec<u8>>) -> Fate {
        let method = msg.method();
        match (method.as_deref(), msg.id()) {
            (Some("roots/list"), Some(id)) => {
                roots_requests.push(id.to_vec());
                Fate::Drop
            }
            (Some("notifications/cancelled"), None) => self.handshake.server_cancel(msg),
            (Some(_), Some(id)) if self.shared.config.templated => {
                self.restart.server_asked(json::id_key(id));
                Fate::Keep
            }
            (None, Some(id))
                if msg.is_response()
                    && self.restart.owns_any()
                    && self.restart.owns(&json::id_key_ref(id)) =>
            {
                self.replayed_answer(msg, id)
            }
            (None, Some(id)) if msg.is_response() => {
                let key = json::id_key_ref(id);
                let followed = self.shared.in_flight.remove(&*key);
                self.restart.host_answered(&key, msg.is_success());
                if self
                    .handshake
                    .initialize_response(&mut self.shared, msg, id)
                {
                    return Fate::Keep;
                }
                let modern = followed.is_some_and(|f| f.modern);
                self.stateless.response(
                    &mut self.shared,
                    msg,
                    id,
                    modern,
                    self.handshake.negotiated(),
                )
            }
            _ => Fate::Keep,
        }
    }

    /// Remembers a host request until its response passes.
    fn follow(&mut self, id: &[u8], modern: bool) {
        if self.shared.in_flight.len() < MAX_IN_FLIGHT {
            self.shared
                .in_flight
                .insert(json::id_key(id), InFlight { modern });
        }
    }
}

/// `{"roots":[…]}`, as `roots/list` answers it (MCP's `ListRootsResult`, without copying the
/// roots into one).
fn roots_json(roots: &[Root]) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct ListRootsResult<'a> {
        roots: &'a [Root],
    }
    serde_json::to_vec(&ListRootsResult { roots }).expect("roots always serialise")
}

/// What the first bytes of an over-long line show: its id, and whether it is a request.
struct Leading {
    id: Option<Vec<u8>>,
    request: bool,
}

/// Reads the complete top-level members at the start of `prefix`: peers put `id`, `method` and
/// `jsonrpc` before the `params` or `result` that make a line long. `None` unless the prefix
/// starts an object.
fn leading_members(prefix: &[u8]) -> Option<Leading> {
    let start = prefix.iter().position(|b| !b.is_ascii_whitespace())?;
    if prefix[start] != b'{' {
        return None;
    }
    let mut leading = Leading {
        id: None,
        request: false,
    };
    let mut pos = start + 1;
    loop {
        while pos < prefix.len() && (prefix[pos].is_ascii_whitespace() || prefix[pos] == b',') {
            pos += 1;
        }
        let Some(member) = json::member_at(prefix, pos) else {
            return Some(leading);
        };
        let value = member.value.of(prefix);
        if member.value.end == prefix.len() && !matches!(value.first(), Some(b'"' | b'{' | b'[')) {
            // A number or literal that runs to the end of the prefix may go on in the part
            // that was dropped: it is not complete.
            return Some(leading);
        }
        match member.key(prefix).as_ref() {
            "id" => {
                let raw = member.value.of(prefix);
                leading.id = (raw != b"null").then(|| raw.to_vec());
            }
            "method" => leading.request = true,
            _ => {}
        }
        pos = member.whole.end;
    }
}
