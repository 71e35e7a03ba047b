//! What a restarted server must be told so that the host never notices the restart.
//!
//! A server started with the workspace in its command line, environment or working directory
//! (`rootsctl proxy -- server {roots}`) is restarted by the proxy when a change alters them. The
//! host set the session up once, with the old server: its `initialize`, its
//! `notifications/initialized`, its `resources/subscribe` requests and its `logging/setLevel`.
//! This module keeps those as the host sent them and replays them to the new server under ids of
//! the proxy's own, swallows the answers, and then tells the host that the tools, resources and
//! prompts the new server declares with `listChanged` may differ. While no server can run (it
//! failed to start, or `{root}` has no root to name), the host's requests are answered with an
//! error saying why, instead of waiting for a server that is not there.
//!
//! The process side (stopping the old server, starting the new one, holding the host's lines
//! meanwhile) is the proxy's loop; this is bookkeeping only.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rootsd_proto::session::Era;

use super::handshake::Handshake;
use super::json::{self, Editor};
use super::message::{self, Msg};
use super::stateless::Stateless;
use super::{Fate, Output, Relay};

/// How long a restarted server has to answer the replayed `initialize` before the proxy resumes
/// relaying without it (and reports the failure in `rootsctl sessions`).
pub const REPLAY_PATIENCE: Duration = Duration::from_secs(10);

/// How many `resources/subscribe` requests are kept for a replay; past that, the oldest is
/// forgotten (a host subscribing to that many resources is not one the proxy can help).
const MAX_SUBSCRIPTIONS: usize = 1024;

/// How many of the server's requests to the host are followed across a restart; past that, new
/// ones are not (their late answers would reach the new server, which ignores them).
const MAX_ASKED: usize = 4096;

/// The lists whose `list_changed` notification the host is sent after a restart, when the new
/// server declares `listChanged` for them.
const LISTS: [&str; 3] = ["tools", "resources", "prompts"];

/// The replay's state.
#[derive(Default)]
pub(super) struct Restart {
    /// The host's `initialize` as it came (its own id), once the server accepted one.
    initialize: Option<Vec<u8>>,
    /// The host's `initialize` on its way, until the server answers it.
    initialize_pending: Option<(Vec<u8>, Vec<u8>)>,
    /// The host's `notifications/initialized` as it came.
    initialized: Option<Vec<u8>>,
    /// `resources/subscribe` requests as they came, by the resource's URI, oldest first.
    subscriptions: Vec<(String, Vec<u8>)>,
    /// The host's last `logging/setLevel`.
    log_level: Option<Vec<u8>>,
    /// Keys of the proxy's own replayed requests whose answers are swallowed.
    owned: HashSet<Vec<u8>>,
    /// The key of the replayed `initialize`, until the new server answers it.
    replaying: Option<Vec<u8>>,
    deadline: Option<Instant>,
    /// The revision the new server was started with: caught up once it answers.
    revision: Option<u64>,
    /// Why no server runs, while none does.
    down: Option<String>,
    /// Keys of the server's requests to the host not answered yet.
    asked: HashSet<Vec<u8>>,
    /// Those of a server since restarted: the host's late answers to them are dropped, not
    /// given to a server that never asked (until the new server asks under the same id).
    stale: HashSet<Vec<u8>>,
    next_id: u64,
}

/// What to do once the replayed `initialize` is answered: the lines for the server, then those
/// for the host.
pub(super) struct Resumed {
    pub to_server: Vec<Vec<u8>>,
    pub to_host: Vec<Vec<u8>>,
    pub revision: Option<u64>,
}

impl Restart {
    /// Notes what the host sets up on the session, as it passes on its way to the server.
    pub(super) fn record(&mut self, msg: &Msg<'_>, method: &str) {
        match (method, msg.id()) {
            ("initialize", Some(id)) => {
                self.initialize_pending = Some((json::id_key(id), msg.text.to_vec()));
            }
            ("notifications/initialized", None) => self.initialized = Some(msg.text.to_vec()),
            ("logging/setLevel", Some(_)) => self.log_level = Some(msg.text.to_vec()),
            ("resources/subscribe", Some(_)) => {
                let Some(uri) = msg.string_at(&["params", "uri"]) else {
                    return;
                };
                self.subscriptions.retain(|(u, _)| *u != uri);
                if self.subscriptions.len() == MAX_SUBSCRIPTIONS {
                    self.subscriptions.remove(0);
                }
                self.subscriptions.push((uri, msg.text.to_vec()));
            }
            ("resources/unsubscribe", Some(_)) => {
                if let Some(uri) = msg.string_at(&["params", "uri"]) {
                    self.subscriptions.retain(|(u, _)| *u != uri);
                }
            }
            _ => {}
        }
    }

    /// The server answered a request of the host: an `initialize` it accepted is the one to
    /// replay.
    pub(super) fn host_answered(&mut self, key: &[u8], success: bool) {
        if self
            .initialize_pending
            .as_ref()
            .is_some_and(|(pending, _)| pending == key)
        {
            let (_, line) = self.initialize_pending.take().expect("checked");
            if success {
                self.initialize = Some(line);
            }
        }
    }

    /// The server sent the host a request (sampling, elicitation, …).
    pub(super) fn server_asked(&mut self, key: Vec<u8>) {
        self.stale.remove(&key);
        if self.asked.len() < MAX_ASKED {
            self.asked.insert(key);
        }
    }

    /// The host answered a request of the server: whether the server that asked is gone.
    pub(super) fn answers_old_server(&mut self, key: &[u8]) -> bool {
        self.asked.remove(key);
        self.stale.remove(key)
    }

    /// Whether a response from the server answers one of the proxy's replayed requests.
    pub(super) fn owns(&self, key: &[u8]) -> bool {
        self.owned.contains(key)
    }

    /// Whether any replayed request of the proxy's own awaits its answer.
    pub(super) fn owns_any(&self) -> bool {
        !self.owned.is_empty()
    }

    /// Whether the replayed `initialize` is being waited for.
    pub(super) fn replaying(&self) -> bool {
        self.replaying.is_some()
    }

    pub(super) fn down(&self) -> Option<&str> {
        self.down.as_deref()
    }

    pub(super) fn set_down(&mut self, reason: Option<String>) {
        if reason.is_some() {
            self.replaying = None;
            self.deadline = None;
            self.owned.clear();
        }
        self.down = reason;
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// A new server was started with the workspace at `revision`: the host's `initialize` under
    /// the proxy's own id, if there is one to replay (`None` when the host has not initialized
    /// the session, or speaks 2026-07-28, which has no handshake).
    pub(super) fn start(
        &mut self,
        revision: u64,
        now: Instant,
        handshake: bool,
    ) -> Option<(Vec<u8>, Vec<u8>)> {
        self.owned.clear();
        self.initialize_pending = None;
        self.stale = std::mem::take(&mut self.asked);
        let line = self.initialize.clone().filter(|_| handshake)?;
        let (id, replayed) = self.with_own_id(&line)?;
        self.replaying = Some(json::id_key(&id));
        self.owned.insert(json::id_key(&id));
        self.deadline = Some(now + REPLAY_PATIENCE);
        self.revision = Some(revision);
        Some((id, replayed))
    }

    /// The new server answered the replayed `initialize` (`result` is its answer): the rest of
    /// the host's set-up for the server, and the `list_changed` notifications for the host.
    pub(super) fn answered(&mut self, answer: &Msg<'_>) -> Resumed {
        self.replaying = None;
        self.deadline = None;
        let mut to_server = Vec::new();
        if let Some(line) = &self.initialized {
            to_server.push(line.clone());
        }
        let setup: Vec<Vec<u8>> = self
            .subscriptions
            .iter()
            .map(|(_, line)| line.clone())
            .chain(self.log_level.clone())
            .collect();
        for line in setup {
            if let Some((id, replayed)) = self.with_own_id(&line) {
                self.owned.insert(json::id_key(&id));
                to_server.push(replayed);
            }
        }
        let to_host = LISTS
            .iter()
            .filter(|list| {
                answer
                    .at(&["result", "capabilities", list, "listChanged"])
                    .is_some_and(|span| span.of(answer.text) == b"true")
            })
            .map(|list| {
                format!(r#"{{"jsonrpc":"2.0","method":"notifications/{list}/list_changed"}}"#)
                    .into_bytes()
            })
            .collect();
        Resumed {
            to_server,
            to_host,
            revision: self.revision.take(),
        }
    }

    /// The replayed `initialize` went unanswered for its whole patience.
    pub(super) fn expired(&mut self, now: Instant) -> bool {
        if self.deadline.is_some_and(|d| d <= now) {
            self.deadline = None;
            self.replaying = None;
            self.revision = None;
            true
        } else {
            false
        }
    }

    /// Whether the replay sent the host's `notifications/initialized`.
    pub(super) fn initialized_replayed(&self) -> bool {
        self.initialized.is_some()
    }

    /// A replayed answer passed: forget its id.
    pub(super) fn forget(&mut self, key: &[u8]) {
        self.owned.remove(key);
    }

    /// `line` with its id replaced by a new one of the proxy's own; returns the id too.
    fn with_own_id(&mut self, line: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        let msg = Msg::read(line)?;
        let span = msg.get("id")?;
        self.next_id += 1;
        let id = format!(r#""rootsd-replay-{}""#, self.next_id).into_bytes();
        let mut editor = Editor::new(line);
        editor.replace(span, id.clone());
        Some((id, editor.finish()))
    }
}

/// The roots the server is shown, as paths: what a launch template is expanded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServedPaths<'a> {
    pub revision: u64,
    /// Moves whenever the paths or their revision do.
    pub generation: u64,
    pub paths: &'a [std::path::PathBuf],
}

/// The restart as the proxy's loop drives it.
impl Relay {
    /// The roots the server is shown, as local paths (the daemon's list, joined by the host's with
    /// `--host-roots merge`, mapped with `--map`), with the revision they come from and a count
    /// that moves whenever either does; `None` before the daemon's first list.
    pub fn served_paths(&self) -> Option<ServedPaths<'_>> {
        let revision = self.shared.roots.revision()?;
        Some(ServedPaths {
            revision,
            generation: self.shared.roots.generation,
            paths: &self.shared.roots.paths,
        })
    }

    /// How many requests of the host the server has not answered yet.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.len()
    }

    /// The server is going away before answering the requests still in flight: each gets an
    /// error response saying `why`, so that no host waits for an answer that cannot come.
    pub fn abort_in_flight(&mut self, why: &str) {
        let mut keys: Vec<Vec<u8>> = self.shared.in_flight.drain().map(|(k, _)| k).collect();
        // In a stable order, so that a transcript can say what comes out.
        keys.sort();
        for key in keys {
            // A key is the id as the host wrote it, strings re-encoded: still its id.
            self.shared
                .emit(Output::ToHost(message::internal_error(&key, why)));
        }
    }

    /// A server was started with the workspace at `revision`; `restarted` when it replaces one
    /// the host was already talking to. What the host set up on the session is replayed to it,
    /// and the host's lines should stay unread until [`Relay::replaying`] is over.
    pub fn server_started(&mut self, revision: u64, restarted: bool, now: Instant) {
        self.shared.now = now;
        self.restart.set_down(None);
        self.shared.state.launch.failure = None;
        if restarted {
            self.shared.state.launch.restarts += 1;
            // Whatever the old server knew is gone with it.
            self.shared.in_flight.clear();
            self.handshake = Handshake::default();
            self.stateless = Stateless::default();
            let state = &mut self.shared.state;
            state.initialized = false;
            state.fetched_revision = None;
            state.notification_outstanding = false;
            state.owes_notification = false;
            self.shared.roots.given = false;
        }
        let handshake = self.shared.state.era != Era::Stateless;
        match self.restart.start(revision, now, handshake) {
            Some((id, line)) => {
                let Some(msg) = Msg::read(&line) else { return };
                let fate = self.handshake.initialize(&mut self.shared, &msg, &id);
                let line = match fate {
                    Fate::Replace(bytes) => bytes,
                    Fate::Keep | Fate::Drop => line.clone(),
                };
                self.shared.emit(Output::ToServer(line));
            }
            None => self.launch_current(revision),
        }
    }

    /// No server runs, for `why` (it could not be started, or `{root}` has no root to name):
    /// until one is started, the host's requests are answered with an error saying so.
    pub fn server_down(&mut self, why: String) {
        self.shared.state.launch.failure = Some(why.clone());
        self.restart.set_down(Some(why));
    }

    /// The running server is started with what the workspace at `revision` expands to: it is up
    /// to date with it (once a replay, if any, is over).
    pub fn launch_current(&mut self, revision: u64) {
        if self.restart.replaying() || self.restart.down().is_some() {
            return;
        }
        let launched = &mut self.shared.state.launch.revision;
        if launched.is_none_or(|r| r < revision) {
            *launched = Some(revision);
        }
    }

    /// Whether the running server has answered an `initialize` (the host's, or the one replayed
    /// to it after a restart).
    pub fn negotiated(&self) -> bool {
        self.handshake.negotiated()
    }

    /// Whether the restarted server has yet to answer the replayed `initialize`: the host's lines
    /// wait until it has.
    pub fn replaying(&self) -> bool {
        self.restart.replaying()
    }

    /// The server answered one of the proxy's replayed requests: swallowed. The answer to the
    /// replayed `initialize` is learnt from, as the host's own would be, and sends the rest of
    /// the replay.
    pub(super) fn replayed_answer(&mut self, msg: &Msg<'_>, id: &[u8]) -> Fate {
        let key = json::id_key(id);
        self.restart.forget(&key);
        if !self
            .handshake
            .initialize_response(&mut self.shared, msg, id)
        {
            return Fate::Drop;
        }
        let resumed = self.restart.answered(msg);
        if !msg.is_success() {
            self.shared.state.launch.failure =
                Some("the restarted server refused the host's initialize".to_owned());
        }
        let initialized = self.restart.initialized_replayed();
        for line in resumed.to_server {
            self.shared.emit(Output::ToServer(line));
        }
        if initialized {
            self.handshake.initialized(&mut self.shared);
        }
        for line in resumed.to_host {
            self.shared.emit(Output::ToHost(line));
        }
        if let Some(revision) = resumed.revision {
            self.launch_current(revision);
        }
        Fate::Drop
    }

    /// The replayed `initialize` went unanswered: relay again without it, and say so.
    pub(super) fn replay_tick(&mut self) {
        if self.restart.expired(self.shared.now) {
            self.shared.state.launch.failure = Some(format!(
                "the restarted server did not answer the replayed initialize within {} s",
                REPLAY_PATIENCE.as_secs()
            ));
        }
    }

    /// A line of the host while no server runs: each request in it gets an error saying why;
    /// the host's answers to the proxy's own requests are taken as usual; the rest waits for
    /// nobody and is dropped.
    pub(super) fn refuse_host_line(&mut self, line: &[u8]) {
        let why = self.restart.down().unwrap_or_default().to_owned();
        let whole = json::trimmed(line);
        let (items, batch) = if json::is_array(line, whole) {
            (json::elements(line, whole).unwrap_or_default(), true)
        } else {
            (vec![whole], false)
        };
        let mut errors = Vec::new();
        for item in items {
            let Some(msg) = Msg::read(item.of(line)) else {
                continue;
            };
            match (msg.method(), msg.id()) {
                (None, Some(id)) if msg.is_response() && self.shared.host.owns(id) => {
                    let mut after = Vec::new();
                    self.host_message(&msg, &mut after);
                    if !after.is_empty() {
                        self.served_changed();
                    }
                }
                (Some(_), Some(id)) => errors.push(message::internal_error(id, &why)),
                _ => {}
            }
        }
        match errors.len() {
            0 => {}
            1 if !batch => self
                .shared
                .emit(Output::ToHost(errors.pop().expect("one error"))),
            _ => self.shared.emit(Output::ToHost(message::batch(&errors))),
        }
    }
}

#[cfg(test)]
mod tests;
