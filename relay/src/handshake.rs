//! The handshake era (2024-11-05 … 2025-11-25): the server asks `roots/list`, and the client
//! tells it about changes with `notifications/roots/list_changed`.
//!
//! The proxy declares roots in the host's `initialize`, answers every `roots/list` itself from
//! the daemon's newest list (the host never sees one), sends `list_changed` exactly when
//! [`session::notice`] says it is due, and learns from the server's reaction whether it fetches
//! after a notification or only on use.

use std::collections::VecDeque;
use std::time::Instant;

use rootsd_proto::session::{self, Era, FetchBehaviour, Notice};

use super::json::{self, Editor};
use super::message::{self, Msg};
use super::{Availability, Fate, Output, Shared};

/// How many answered `roots/list` ids the proxy remembers for late cancellations.
const ANSWERED_MEMORY: usize = 32;

/// `roots/list` requests of one server line waiting for the daemon's first list: they are
/// answered together, as a batch if they came in one.
struct Waiting {
    ids: Vec<Vec<u8>>,
    batch: bool,
    deadline: Instant,
}

/// The session's era, version and `listChanged` promise, as negotiated before an `initialize`.
struct Spoken {
    era: Era,
    protocol_version: Option<String>,
    list_changed: bool,
}

/// The handshake era's state.
#[derive(Default)]
pub(super) struct Handshake {
    /// The key of the id of the host's `initialize`, until the server answers it.
    initialize_id: Option<Vec<u8>>,
    /// What the session spoke before that `initialize`, restored if the server refuses it: a
    /// refused `initialize` negotiates nothing, so a session that spoke 2026-07-28 still does.
    before_initialize: Option<Spoken>,
    /// The server accepted an `initialize`: the session's era is the handshake's, whatever
    /// shape later requests have.
    negotiated: bool,
    waiting: Vec<Waiting>,
    /// Keys of the last `roots/list` ids the proxy answered (with roots or an error), so that a
    /// late cancellation of one is dropped rather than shown to a host that never saw it.
    answered: VecDeque<Vec<u8>>,
    /// Until when the server may fetch after the last `list_changed` and count as reacting to
    /// notifications (if no host request is in flight then); past it unanswered, the server is
    /// judged to fetch on use.
    notify_deadline: Option<Instant>,
}

impl Handshake {
    pub(super) fn negotiated(&self) -> bool {
        self.negotiated
    }

    /// Whether the host's `initialize` awaits its response.
    pub(super) fn initializing(&self) -> bool {
        self.initialize_id.is_some()
    }

    /// The host's `initialize`: declare roots to the server, as the session was configured.
    pub(super) fn initialize(&mut self, shared: &mut Shared, msg: &Msg<'_>, id: &[u8]) -> Fate {
        if self.initialize_id.is_none() {
            // A second `initialize` before the first is answered keeps what was spoken before
            // the first.
            self.before_initialize = Some(Spoken {
                era: shared.state.era,
                protocol_version: shared.state.protocol_version.clone(),
                list_changed: shared.state.list_changed,
            });
        }
        shared.state.era = Era::Handshake;
        shared.state.list_changed = shared.config.list_changed;
        if let Some(version) = msg.string_at(&["params", "protocolVersion"]) {
            shared.state.protocol_version = Some(version);
        }
        self.initialize_id = Some(json::id_key(id));
        let roots: &[u8] = if shared.config.list_changed {
            br#"{"listChanged":true}"#
        } else {
            b"{}"
        };
        let mut editor = Editor::new(msg.text);
        match editor.ensure(
            msg.span(),
            &["params", "capabilities"],
            "roots",
            roots,
            false,
        ) {
            Some(()) => Fate::Replace(editor.finish()),
            // `params` or `capabilities` is not an object: the server will refuse the request
            // itself, and it is not the proxy's to repair. Nothing was declared, so should the
            // server accept it anyway, it is never sent list_changed.
            None => {
                shared.state.list_changed = false;
                Fate::Keep
            }
        }
    }

    /// The server's response to the host's `initialize`, if `msg` is it: learns the negotiated
    /// version and the server's identity. Returns whether it was.
    pub(super) fn initialize_response(
        &mut self,
        shared: &mut Shared,
        msg: &Msg<'_>,
        id: &[u8],
    ) -> bool {
        if self.initialize_id.is_none()
            || self.initialize_id.as_deref() != Some(&json::id_key_ref(id)[..])
        {
            return false;
        }
        self.initialize_id = None;
        let before = self.before_initialize.take();
        if !msg.is_success() {
            // The server refused: nothing was negotiated (a host may try again, or another era),
            // so the session speaks what it spoke before, a 2026-07-28 session included.
            if !self.negotiated
                && let Some(before) = before
            {
                shared.state.era = before.era;
                shared.state.protocol_version = before.protocol_version;
                shared.state.list_changed = before.list_changed;
            }
            return true;
        }
        self.negotiated = true;
        shared.state.era = Era::Handshake;
        if let Some(version) = msg.string_at(&["result", "protocolVersion"]) {
            shared.state.protocol_version = Some(version);
        }
        if let Some(info) = msg
            .at(&["result", "serverInfo"])
            .and_then(|span| message::server_info(msg.text, span))
        {
            shared.state.server = Some(info);
        }
        true
    }

    /// The host's `notifications/initialized` is on its way to the server: notifications may
    /// follow it from now on.
    pub(super) fn initialized(&mut self, shared: &mut Shared) {
        shared.state.initialized = true;
        self.maybe_notify(shared);
    }

    /// The server's `roots/list` requests of one line: answered now, after the daemon's first
    /// list, or with an error. A batch gets its answers as a batch.
    pub(super) fn roots_list(&mut self, shared: &mut Shared, ids: Vec<Vec<u8>>, batch: bool) {
        match shared.roots.availability() {
            Availability::Ready => self.answer(shared, &ids, batch),
            Availability::Awaited => self.waiting.push(Waiting {
                ids,
                batch,
                deadline: shared.now + shared.config.patience,
            }),
            Availability::Unavailable => self.refuse(shared, &ids, batch),
        }
    }

    /// The server cancels a request. A cancellation of the proxy's own `roots/list` is for the
    /// proxy alone: the host never saw that request.
    pub(super) fn server_cancel(&mut self, msg: &Msg<'_>) -> Fate {
        let Some(cancelled) = msg.at(&["params", "requestId"]) else {
            return Fate::Keep;
        };
        let key = json::id_key(cancelled.of(msg.text));
        let mut found = false;
        for group in &mut self.waiting {
            let before = group.ids.len();
            group.ids.retain(|id| json::id_key(id) != key);
            found |= group.ids.len() < before;
        }
        self.waiting.retain(|group| !group.ids.is_empty());
        if found || self.answered.contains(&key) {
            Fate::Drop
        } else {
            Fate::Keep
        }
    }

    /// The daemon's first list arrived: answer the requests waiting for it.
    pub(super) fn answer_waiting(&mut self, shared: &mut Shared) {
        for group in std::mem::take(&mut self.waiting) {
            self.answer(shared, &group.ids, group.batch);
        }
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.waiting
            .iter()
            .map(|w| w.deadline)
            .chain(self.notify_deadline)
            .min()
    }

    /// Answers the requests that waited their whole patience with the list there is, or refuses
    /// them if there is none; and concludes that a server that let a notification go unanswered
    /// fetches on use.
    pub(super) fn tick(&mut self, shared: &mut Shared) {
        let now = shared.now;
        let (expired, waiting): (Vec<Waiting>, Vec<Waiting>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|w| w.deadline <= now);
        self.waiting = waiting;
        if !expired.is_empty() && shared.roots.snapshot.is_none() {
            shared.roots.given_up = true;
        }
        for group in expired {
            if shared.roots.snapshot.is_some() {
                // It waited for the host's roots in vain: the workspace's must do.
                self.answer(shared, &group.ids, group.batch);
            } else {
                self.refuse(shared, &group.ids, group.batch);
            }
        }
        if self.notify_deadline.is_some_and(|d| d <= now) {
            self.notify_deadline = None;
            shared.state.fetch_behaviour = FetchBehaviour::OnUse;
        }
    }

    /// Sends `list_changed` if the one notification rule says it is due.
    pub(super) fn maybe_notify(&mut self, shared: &mut Shared) {
        let Some(newest) = shared.roots.revision() else {
            return;
        };
        if session::notice(&shared.state, newest) != Notice::Due {
            return;
        }
        shared.state.notification_outstanding = true;
        shared.state.owes_notification = false;
        shared.state.notifications_sent += 1;
        self.notify_deadline = Some(shared.now + shared.config.notify_window);
        shared.emit(Output::ToServer(
            br#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#.to_vec(),
        ));
    }

    fn answer(&mut self, shared: &mut Shared, ids: &[Vec<u8>], batch: bool) {
        if batch {
            let replies: Vec<Vec<u8>> = ids
                .iter()
                .map(|id| {
                    self.remember(id);
                    shared.roots.answer.to(id)
                })
                .collect();
            send(shared, replies, batch);
        } else {
            // The common case, a server asking again and again: each answer goes straight out,
            // with no list of replies around it.
            for id in ids {
                self.remember(id);
                let reply = shared.roots.answer.to(id);
                shared.emit(Output::ToServer(reply));
            }
        }
        shared.note_fetch();
        shared.state.notification_outstanding = false;
        // It holds the newest list now, whatever it was owed.
        shared.state.owes_notification = false;
        // The host's `initialize` does not count: no server needs roots to answer it.
        let host_request_in_flight = shared
            .in_flight
            .keys()
            .any(|key| self.initialize_id.as_ref() != Some(key));
        if self.notify_deadline.take().is_some() && !host_request_in_flight {
            // A fetch within the window after a notification, with no request of the host's
            // before the server, can only answer the notification: the server keeps its list
            // up to date by itself. A fetch while a host request is in flight proves nothing
            // either way (a server that fetches on use fetches inside a tool call too, and one
            // may land just after a notification), so the session keeps what it was judged to
            // be; timing alone never changes its classification.
            shared.state.fetch_behaviour = FetchBehaviour::AfterNotification;
        }
    }

    /// Answers `roots/list` with an error while rootsd cannot be reached. With `listChanged`
    /// declared, that promises a `list_changed` once it can.
    fn refuse(&mut self, shared: &mut Shared, ids: &[Vec<u8>], batch: bool) {
        let promise = shared.state.list_changed;
        let text = if promise {
            "rootsd is not reachable, so no roots are available yet; a list_changed notification follows when it is"
        } else {
            "rootsd is not reachable, so no roots are available yet; ask again later"
        };
        let replies = ids
            .iter()
            .map(|id| {
                self.remember(id);
                message::internal_error(id, text)
            })
            .collect();
        send(shared, replies, batch);
        if promise {
            shared.state.owes_notification = true;
        }
    }

    fn remember(&mut self, id: &[u8]) {
        // The oldest key's buffer holds the newest: a server asking all the time costs no
        // allocation here once the memory is full.
        let mut key = if self.answered.len() == ANSWERED_MEMORY {
            self.answered.pop_front().unwrap_or_default()
        } else {
            Vec::new()
        };
        json::id_key_into(id, &mut key);
        self.answered.push_back(key);
    }
}

/// Sends replies to the server: one line each, or one batch line if they answer a batch.
fn send(shared: &mut Shared, replies: Vec<Vec<u8>>, batch: bool) {
    if batch {
        shared.emit(Output::ToServer(message::batch(&replies)));
    } else {
        for reply in replies {
            shared.emit(Output::ToServer(reply));
        }
    }
}
