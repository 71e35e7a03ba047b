//! The host's own roots (`rootsctl proxy --host-roots merge|publish`): asking the host for them,
//! taking its answer, and what the session does with it.
//!
//! - Handshake era: a host that declared `roots` in its `initialize` is asked with a `roots/list`
//!   of the proxy's own (id `"rootsd-roots-N"`) once its `notifications/initialized` has passed,
//!   and again on each of its `notifications/roots/list_changed`. One request is in flight at a
//!   time; a host that does not answer within [`super::Config::host_patience`] holds up nothing,
//!   and its late answer still counts.
//! - 2026-07-28: there are no requests to the host. When the server asks for roots inside a
//!   request whose `_meta` declares the host's own `roots` capability, the `input_required`
//!   result goes to the host with its `roots/list` entries, and the host's retry carries its
//!   answer ([`super::stateless`] passes it here and answers the server itself).
//!
//! With `merge` the list the server sees is the union, computed where the relay maps its list
//! ([`super::Shared::refresh_served`]); with `publish` the host's list goes to the daemon as a
//! [`Publication`], and comes back in the workspace's list like any change. Answers of roots wait
//! (boundedly) for the host's first list and for a publication to come back, so that a server is
//! not first told a list without the host's roots and then told again.

use std::collections::VecDeque;
use std::time::Instant;

use rootsd_proto::host_roots::{self, HostAnswer, HostRootsMode};
use rootsd_proto::root::Root;
use rootsd_proto::session::Era;
use serde_json::Value;

use super::json;
use super::message::Msg;
use super::{Output, Shared};

/// The host's list of roots, for the daemon: everything the session publishes from now on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publication {
    /// Counts publications, so that an acknowledgement is matched to the one it is for.
    pub generation: u64,
    pub roots: Vec<Root>,
}

/// What became of a [`Publication`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishAck {
    /// The workspace holds it from store revision `revision` on.
    Done { generation: u64, revision: u64 },
    /// The daemon refused it, or could not be reached in time.
    Failed { generation: u64 },
}

/// A publication the relay waits to see in the workspace's list.
#[derive(Clone, Copy, Debug)]
struct Pending {
    generation: u64,
    /// Known once the daemon acknowledged it.
    revision: Option<u64>,
    deadline: Instant,
}

/// How many of the proxy's `roots/list` that ran out of patience are remembered, so that their
/// late answers are taken (or dropped) rather than shown to the server.
const LATE_MEMORY: usize = 8;

/// The proxy's `roots/list` to the host, in flight.
#[derive(Clone, Debug)]
struct Asking {
    key: Vec<u8>,
    /// Which request it is (the `N` of its id): a late answer is taken only if no answer to a
    /// later request was.
    number: u64,
    deadline: Instant,
}

/// What the relay knows of the host's roots.
#[derive(Default)]
pub(super) struct HostSide {
    /// The host's list as last taken, once it gave one.
    roots: Option<Vec<Root>>,
    /// Handshake era: the host declared `roots` in its `initialize`.
    declared: bool,
    asking: Option<Asking>,
    /// Requests that ran out of patience, newest last: their late answers still count.
    late: VecDeque<(Vec<u8>, u64)>,
    /// The number of the request whose answer was taken last.
    taken: u64,
    /// The host said its list changed while a request was in flight: ask again after it.
    again: bool,
    next_id: u64,
    /// Until when answers of roots wait for the host's first list.
    first_by: Option<Instant>,
    /// The last list published, and the publication on its way.
    published: Option<Vec<Root>>,
    generation: u64,
    pending: Option<Pending>,
}

impl HostSide {
    /// The host's roots to merge, in `merge` mode once it gave them.
    pub(super) fn merged(&self, mode: HostRootsMode) -> Option<&[Root]> {
        (mode == HostRootsMode::Merge)
            .then_some(self.roots.as_deref())
            .flatten()
    }

    /// Whether answers of roots should wait: for the host's first list, or for a publication to
    /// come back from the daemon, at revision `newest` now.
    pub(super) fn holds(&self, newest: Option<u64>) -> bool {
        self.first_by.is_some()
            || self.pending.is_some_and(|p| match (p.revision, newest) {
                (Some(wanted), Some(newest)) => newest < wanted,
                _ => true,
            })
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        [
            self.asking.as_ref().map(|a| a.deadline),
            self.first_by,
            self.pending.map(|p| p.deadline),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Whether a response from the host with this id answers the proxy's own `roots/list`.
    pub(super) fn owns(&self, id: &[u8]) -> bool {
        if self.asking.is_none() && self.late.is_empty() {
            // Every response of the host passes here: most sessions never ask it for roots.
            return false;
        }
        let key = json::id_key_ref(id);
        self.asking.as_ref().is_some_and(|a| *a.key == *key)
            || self.late.iter().any(|(k, _)| **k == *key)
    }

    /// Forgets the request `id` answers; returns its number and whether it is the one in flight.
    fn settle(&mut self, id: &[u8]) -> (u64, bool) {
        let key = json::id_key(id);
        if let Some(asking) = self.asking.take_if(|a| a.key == key) {
            return (asking.number, true);
        }
        let number = self
            .late
            .iter()
            .position(|(k, _)| *k == key)
            .and_then(|index| self.late.remove(index))
            .map_or(0, |(_, number)| number);
        (number, false)
    }
}

/// The host's `initialize`: whether it has roots of its own to give.
pub(super) fn initialize(shared: &mut Shared, msg: &Msg<'_>) {
    let declared = msg
        .at(&["params", "capabilities", "roots"])
        .is_some_and(|span| json::is_object(msg.text, span));
    shared.host.declared = declared;
    if shared.config.host_roots != HostRootsMode::Replace && !declared {
        shared.state.host_roots.host = HostAnswer::NotDeclared;
    }
}

/// The host's `notifications/initialized` passed: the host may be asked from now on, and answers
/// of roots wait a little for its first list.
pub(super) fn initialized(shared: &mut Shared) {
    if !wanted(shared) || shared.host.roots.is_some() || shared.host.asking.is_some() {
        return;
    }
    shared.host.first_by = Some(shared.now + shared.config.host_patience);
    ask(shared);
}

/// The host's `notifications/roots/list_changed`: ask again (after the request in flight).
pub(super) fn list_changed(shared: &mut Shared) {
    if !wanted(shared) {
        return;
    }
    if shared.host.asking.is_some() {
        shared.host.again = true;
    } else {
        ask(shared);
    }
}

/// Whether the handshake-era host is to be asked at all.
fn wanted(shared: &Shared) -> bool {
    shared.config.host_roots != HostRootsMode::Replace && shared.host.declared
}

fn ask(shared: &mut Shared) {
    shared.host.next_id += 1;
    let id = serde_json::to_vec(&format!("rootsd-roots-{}", shared.host.next_id))
        .expect("strings always serialise");
    let mut line = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    line.extend_from_slice(&id);
    line.extend_from_slice(br#","method":"roots/list"}"#);
    shared.emit(Output::ToHost(line));
    shared.host.asking = Some(Asking {
        key: json::id_key(&id),
        number: shared.host.next_id,
        deadline: shared.now + shared.config.host_patience,
    });
    shared.host.again = false;
    if shared.state.host_roots.host != HostAnswer::Answered {
        shared.state.host_roots.host = HostAnswer::Asking;
    }
}

/// The host's response to the proxy's `roots/list` (the caller checked [`HostSide::owns`]).
/// Returns whether the list the server sees changed.
pub(super) fn answered(shared: &mut Shared, msg: &Msg<'_>) -> bool {
    let (number, current) = shared.host.settle(msg.id().unwrap_or_default());
    if number < shared.host.taken {
        // A late answer older than one already taken: the host's list has moved on since.
        return false;
    }
    shared.host.taken = number;
    let list = msg
        .at(&["result"])
        .and_then(|span| json::parse::<Value>(msg.text, span))
        .and_then(|result| roots_of(&result));
    let changed = match list {
        Some(roots) => learn(shared, &roots),
        None => {
            refused(shared);
            false
        }
    };
    if current && shared.host.again {
        ask(shared);
    }
    changed
}

/// The host's answer for a line too long to read: as good as a refusal.
pub(super) fn too_long(shared: &mut Shared, id: &[u8]) {
    let (_, current) = shared.host.settle(id);
    refused(shared);
    if current && shared.host.again {
        ask(shared);
    }
}

/// The host gave no list where it was asked for one.
pub(super) fn refused(shared: &mut Shared) {
    shared.host.first_by = None;
    shared.state.host_roots.host = HostAnswer::Refused;
}

/// The roots of a `ListRootsResult` the host gave, read leniently: an entry without a string
/// `uri` is kept as one that [`host_roots::accept`] then leaves out and counts. `None` unless
/// it has a `roots` array.
pub(super) fn roots_of(result: &Value) -> Option<Vec<Root>> {
    let entries = result.get("roots")?.as_array()?;
    Some(
        entries
            .iter()
            .map(|entry| Root {
                uri: entry
                    .get("uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                name: entry.get("name").and_then(Value::as_str).map(str::to_owned),
            })
            .collect(),
    )
}

/// Takes a list the host gave (in either era). Returns whether the list the server sees changed
/// (with `merge`); with `publish` the list goes to the daemon.
pub(super) fn learn(shared: &mut Shared, roots: &[Root]) -> bool {
    let accepted = host_roots::accept(roots);
    shared.host.first_by = None;
    let state = &mut shared.state.host_roots;
    state.host = HostAnswer::Answered;
    state.roots = accepted.roots.len() as u64;
    state.ignored = accepted.ignored;
    let changed = match shared.config.host_roots {
        HostRootsMode::Replace => false,
        HostRootsMode::Merge => {
            shared.host.roots = Some(accepted.roots);
            let changed = shared.refresh_served();
            // The server holds a list that no revision says is stale.
            if changed
                && shared.state.era == Era::Handshake
                && shared.state.fetched_revision.is_some()
            {
                shared.state.owes_notification = true;
            }
            changed
        }
        HostRootsMode::Publish => {
            // The same roots in another order change nothing in the workspace.
            if !shared
                .host
                .published
                .as_ref()
                .is_some_and(|last| same_roots(last, &accepted.roots))
            {
                shared.host.generation += 1;
                shared.host.pending = Some(Pending {
                    generation: shared.host.generation,
                    revision: None,
                    deadline: shared.now + shared.config.host_patience,
                });
                shared.emit(Output::Publish(Publication {
                    generation: shared.host.generation,
                    roots: accepted.roots.clone(),
                }));
                shared.host.published = Some(accepted.roots.clone());
            }
            shared.host.roots = Some(accepted.roots);
            false
        }
    };
    shared.update_held();
    changed
}

/// Whether two lists hold the same roots (names included), in whatever order.
fn same_roots(a: &[Root], b: &[Root]) -> bool {
    fn sorted(roots: &[Root]) -> Vec<(&str, Option<&str>)> {
        let mut all: Vec<(&str, Option<&str>)> = roots
            .iter()
            .map(|r| (r.uri.as_str(), r.name.as_deref()))
            .collect();
        all.sort_unstable();
        all
    }
    a.len() == b.len() && sorted(a) == sorted(b)
}

/// 2026-07-28: the server asked for roots inside a request whose `_meta` did not declare the
/// host's own, so the host cannot be asked.
pub(super) fn undeclared(shared: &mut Shared) {
    if shared.config.host_roots != HostRootsMode::Replace
        && shared.state.host_roots.host == HostAnswer::NotAsked
    {
        shared.state.host_roots.host = HostAnswer::NotDeclared;
    }
}

/// 2026-07-28: the host is asked for its roots inside an `input_required` result.
pub(super) fn asked_in_round(shared: &mut Shared) {
    if shared.state.host_roots.host != HostAnswer::Answered {
        shared.state.host_roots.host = HostAnswer::Asking;
    }
}

/// What became of a publication.
pub(super) fn acknowledged(shared: &mut Shared, ack: PublishAck) {
    let Some(pending) = &mut shared.host.pending else {
        return;
    };
    match ack {
        PublishAck::Done {
            generation,
            revision,
        } if generation == pending.generation => pending.revision = Some(revision),
        PublishAck::Failed { generation } if generation == pending.generation => {
            shared.host.pending = None;
            // Published again with the next list the host gives.
            shared.host.published = None;
        }
        _ => {}
    }
}

/// The clock moved: a host that ran out of patience is not waited for any more.
pub(super) fn tick(shared: &mut Shared) {
    let now = shared.now;
    if shared.host.first_by.is_some_and(|by| by <= now) {
        shared.host.first_by = None;
    }
    if shared.host.pending.is_some_and(|p| p.deadline <= now) {
        shared.host.pending = None;
    }
    if let Some(asking) = shared.host.asking.take_if(|a| a.deadline <= now) {
        if shared.host.late.len() == LATE_MEMORY {
            shared.host.late.pop_front();
        }
        shared.host.late.push_back((asking.key, asking.number));
        shared.state.host_roots.host = HostAnswer::NoAnswer;
        if shared.host.again {
            ask(shared);
        }
    }
}

/// A new list from the daemon: a publication it holds is waited for no more.
pub(super) fn daemon_list(shared: &mut Shared, revision: u64) {
    if shared
        .host
        .pending
        .is_some_and(|p| p.revision.is_some_and(|r| revision >= r))
    {
        shared.host.pending = None;
    }
}

#[cfg(test)]
mod tests;
