//! The handshake era (2024-11-05 … 2025-11-25): the server asks `roots/list`, and the client
//! tells it about changes with `notifications/roots/list_changed`.
//!
//! The proxy declares roots in the host's `initialize`, answers every `roots/list` itself from
//! the daemon's newest list (the host never sees one), and sends `list_changed` exactly when
//! [`session::notice`] says it is due.

use std::collections::VecDeque;

use rootsd_proto::session::{self, Era, Notice};
use serde_json::{Value, json};

use super::message::{id_key, internal_error, object_at, object_in, server_info, to_line};
use super::{Availability, Fate, Output, Shared};

/// How many answered `roots/list` ids the proxy remembers for late cancellations.
const ANSWERED_MEMORY: usize = 32;

/// The handshake era's state.
#[derive(Default)]
pub(super) struct Handshake {
    /// The id of the host's `initialize`, until the server answers it.
    initialize_id: Option<Value>,
    /// Ids of the server's `roots/list` requests waiting for a first list from the daemon.
    waiting: Vec<Value>,
    /// Ids (as JSON text) of the last `roots/list` requests the proxy answered, so that a late
    /// cancellation of one is dropped rather than shown to a host that never saw the request.
    answered: VecDeque<String>,
}

impl Handshake {
    /// The host's `initialize`: declare roots to the server, as the session was configured.
    pub(super) fn initialize(
        &mut self,
        shared: &mut Shared,
        message: &mut Value,
        id: Value,
    ) -> Fate {
        shared.state.era = Era::Handshake;
        shared.state.protocol_version = message
            .pointer("/params/protocolVersion")
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.initialize_id = Some(id);
        let roots = if shared.state.list_changed {
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

    /// Side effects that must follow the forwarding of a host message: once the host's
    /// `notifications/initialized` is on its way to the server, notifications may follow it.
    pub(super) fn after_host_message(&mut self, shared: &mut Shared, message: &Value) {
        if message.get("method").and_then(Value::as_str) == Some("notifications/initialized")
            && message.get("id").is_none()
        {
            shared.state.initialized = true;
            self.maybe_notify(shared);
        }
    }

    /// Whether a response with `id` is the one to the host's `initialize`.
    pub(super) fn awaits_response(&self, id: &Value) -> bool {
        self.initialize_id.as_ref() == Some(id)
    }

    /// Learns the negotiated version and the server's identity from the `initialize` result.
    /// Returns whether `message` was that result.
    pub(super) fn learn_from_response(
        &mut self,
        shared: &mut Shared,
        id: &Value,
        message: &Value,
    ) -> bool {
        if !self.awaits_response(id) {
            return false;
        }
        self.initialize_id = None;
        if let Some(version) = message
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
        {
            shared.state.protocol_version = Some(version.to_owned());
        }
        if let Some(info) = message.pointer("/result/serverInfo") {
            shared.state.server = Some(server_info(info));
        }
        true
    }

    /// The server's `roots/list`: answered now, after the daemon's first list, or with an error.
    pub(super) fn roots_list(&mut self, shared: &mut Shared, id: Value) {
        match shared.roots.availability() {
            Availability::Ready => self.answer(shared, id),
            Availability::Awaited => self.waiting.push(id),
            Availability::Unavailable => answer_unavailable(shared, id),
        }
    }

    /// The server cancels a request. A cancellation of the proxy's own `roots/list` is for the
    /// proxy alone: the host never saw that request.
    pub(super) fn server_cancel(&mut self, message: &Value) -> Fate {
        let cancelled = message.pointer("/params/requestId").cloned();
        let before = self.waiting.len();
        self.waiting.retain(|w| Some(w) != cancelled.as_ref());
        let late = cancelled
            .as_ref()
            .is_some_and(|id| self.answered.contains(&id_key(id)));
        if self.waiting.len() < before || late {
            Fate::Dropped
        } else {
            Fate::Unchanged
        }
    }

    /// The daemon's first list arrived: answer the requests waiting for it.
    pub(super) fn answer_waiting(&mut self, shared: &mut Shared) {
        for id in std::mem::take(&mut self.waiting) {
            self.answer(shared, id);
        }
    }

    /// The proxy stopped waiting for the daemon: answer the waiting requests with an error.
    pub(super) fn refuse_waiting(&mut self, shared: &mut Shared) {
        for id in std::mem::take(&mut self.waiting) {
            answer_unavailable(shared, id);
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
        shared.emit(Output::ToServer(
            br#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#.to_vec(),
        ));
    }

    fn answer(&mut self, shared: &mut Shared, id: Value) {
        let id = id_key(&id);
        if self.answered.len() == ANSWERED_MEMORY {
            self.answered.pop_front();
        }
        self.answered.push_back(id.clone());
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#,
            shared.roots.json
        );
        shared.emit(Output::ToServer(line.into_bytes()));
        shared.note_fetch();
        shared.state.notification_outstanding = false;
    }
}

/// Answers a `roots/list` with an error while rootsd cannot be reached, promising a
/// `list_changed` once it can.
fn answer_unavailable(shared: &mut Shared, id: Value) {
    shared.state.owes_notification = true;
    let error = internal_error(
        id,
        "rootsd is not reachable, so no roots are available yet; a list_changed notification follows when it is",
    );
    shared.emit(Output::ToServer(to_line(&error)));
}
