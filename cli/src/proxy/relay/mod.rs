//! The MCP relay as a pure state machine: lines in from the host, the server and the daemon;
//! lines and the session's state out. No I/O happens here, so every rule of the protocol can be
//! tested with plain function calls.
//!
//! This module handles what both protocol eras share: splitting a line into messages (a
//! 2025-03-26 batch holds several), deciding each message's fate, forwarding what is left, and
//! the roots the daemon last sent. The rules of each era live beside it:
//! - [`handshake`] (2024-11-05 … 2025-11-25): the host's `initialize` gains
//!   `capabilities.roots`; the server's `roots/list` is answered here and never reaches the host;
//!   the host's own `notifications/roots/list_changed` is dropped; `list_changed` goes to the
//!   server when [`rootsd_proto::session::notice`] says it is due;
//! - [`stateless`] (2026-07-28): requests gain `roots: {}` in their client capabilities, and
//!   `roots/list` entries of `input_required` results are answered here, retrying with a new id.
//!
//! Every other message is forwarded byte for byte.

mod handshake;
mod message;
mod stateless;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transcript;

use rootsd_proto::root::ListRootsResult;
use rootsd_proto::session::SessionState;
use rootsd_proto::wire::RootsSnapshot;
use serde_json::Value;

use handshake::Handshake;
use message::{method_and_id, to_line};
use stateless::Stateless;

pub use stateless::MAX_MRTR_ROUNDS;

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

/// The daemon's newest list for this session's workspace, and whether it is worth waiting for.
#[derive(Default)]
struct Roots {
    snapshot: Option<RootsSnapshot>,
    /// `{"roots":[…]}` of the snapshot, serialised once per change: `roots/list` is on the hot
    /// path.
    json: String,
    /// Waiting for the daemon's first list has taken too long: requests for roots are answered
    /// with an error at once until a list arrives.
    given_up: bool,
}

/// Whether a request for roots can be answered now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Availability {
    Ready,
    /// No list yet; one is expected soon.
    Awaited,
    /// No list, and the proxy stopped waiting for one.
    Unavailable,
}

impl Roots {
    fn availability(&self) -> Availability {
        match (&self.snapshot, self.given_up) {
            (Some(_), _) => Availability::Ready,
            (None, false) => Availability::Awaited,
            (None, true) => Availability::Unavailable,
        }
    }

    fn revision(&self) -> Option<u64> {
        self.snapshot.as_ref().map(|s| s.revision)
    }

    /// The `ListRootsResult` as a value, for splicing into a 2026-07-28 retry.
    fn value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or_else(|_| serde_json::json!({"roots": []}))
    }
}

/// What both eras read and write: the session's state, the roots, and the output queue.
struct Shared {
    state: SessionState,
    roots: Roots,
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
        }
    }
}

/// The relay's state for one MCP session.
pub struct Relay {
    shared: Shared,
    handshake: Handshake,
    stateless: Stateless,
    /// The state as last handed out in [`Output::State`].
    reported: SessionState,
}

impl Relay {
    /// A relay that declares `listChanged` to its server if `list_changed`.
    pub fn new(list_changed: bool) -> Self {
        let state = SessionState {
            list_changed,
            ..SessionState::default()
        };
        Self {
            shared: Shared {
                state: state.clone(),
                roots: Roots::default(),
                out: Vec::new(),
            },
            handshake: Handshake::default(),
            stateless: Stateless::default(),
            reported: state,
        }
    }

    /// Everything the relay wants done since the last call, in order, followed by the session's
    /// state if it changed.
    pub fn take_output(&mut self) -> Vec<Output> {
        if self.shared.state != self.reported {
            self.reported = self.shared.state.clone();
            self.shared.emit(Output::State(self.reported.clone()));
        }
        std::mem::take(&mut self.shared.out)
    }

    /// The session as the relay knows it now.
    pub fn state(&self) -> &SessionState {
        &self.shared.state
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
            return self.shared.emit(Output::ToHost(line.to_vec()));
        }
        self.relay(line, Direction::ToHost);
    }

    /// The daemon's newest list for this session's workspace.
    pub fn roots_changed(&mut self, snapshot: RootsSnapshot) {
        if self.shared.roots.snapshot.as_ref() == Some(&snapshot) {
            return;
        }
        self.shared.roots.json = serde_json::to_string(&ListRootsResult {
            roots: snapshot.roots.clone(),
        })
        .expect("roots always serialise");
        self.shared.roots.snapshot = Some(snapshot);
        self.handshake.answer_waiting(&mut self.shared);
        self.stateless.resume_parked(&mut self.shared);
        self.handshake.maybe_notify(&mut self.shared);
    }

    /// The daemon could not be reached for long enough that waiting servers must be answered.
    pub fn give_up_waiting(&mut self) {
        self.shared.roots.given_up = self.shared.roots.snapshot.is_none();
        self.handshake.refuse_waiting(&mut self.shared);
        self.stateless.refuse_parked(&mut self.shared);
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
            return self.shared.emit(wrap(line.to_vec()));
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
        self.shared.emit(wrap(out));
        if direction == Direction::ToServer {
            for message in &kept {
                self.handshake.after_host_message(&mut self.shared, message);
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
                self.handshake.awaits_response(id)
                    || self.stateless.awaits_response(&self.shared.state, id)
            }
            (None, None) => false,
        }
    }

    /// Rewrites, drops or keeps one message from the host.
    fn host_message(&mut self, message: &mut Value) -> Fate {
        let (method, id) = method_and_id(message);
        match (method.as_deref(), id) {
            (Some("initialize"), Some(id)) => {
                self.handshake.initialize(&mut self.shared, message, id)
            }
            (Some("notifications/roots/list_changed"), None) => Fate::Dropped,
            (Some("notifications/cancelled"), None) => self.stateless.translate_cancel(message),
            (Some(method), Some(id)) if stateless::is_modern(message) => {
                let method = method.to_owned();
                self.stateless
                    .host_request(&mut self.shared, message, &method, id)
            }
            _ => Fate::Unchanged,
        }
    }

    /// Handles one message from the server: dropped when it was for the proxy alone.
    fn server_message(&mut self, message: &mut Value) -> Fate {
        let (method, id) = method_and_id(message);
        match (method.as_deref(), id) {
            (Some("roots/list"), Some(id)) => {
                self.handshake.roots_list(&mut self.shared, id);
                Fate::Dropped
            }
            (Some("notifications/cancelled"), None) => self.handshake.server_cancel(message),
            (None, Some(id)) => {
                if !self
                    .handshake
                    .learn_from_response(&mut self.shared, &id, message)
                {
                    self.stateless.learn_server_info(&mut self.shared, message);
                }
                self.stateless
                    .server_response(&mut self.shared, &id, message)
            }
            _ => Fate::Unchanged,
        }
    }
}
