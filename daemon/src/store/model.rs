//! The roots as stored: the types the database and the journal hold, separate from the wire
//! types on purpose (the wire may grow without forcing a migration, and a migration never
//! changes the wire).
//!
//! Nothing here does I/O; [`crate::store::database`] keeps these in sled and [`crate::store::journal`] in its
//! file. Every change carries who made it ([`Origin`]) and when; applying it records what it
//! did in the history ([`crate::store::history`]), so the history is part of the contents and is as
//! durable, and as checked at start, as the roots.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use rootsd_proto::{Root, WorkspaceName};
use serde::{Deserialize, Serialize};

/// One workspace as stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredWorkspaceV1 {
    /// The store revision of the last change to this workspace.
    pub revision: u64,
    /// Each root shared (`Arc`): a change copies its workspace's list to make the next state,
    /// and a copy that shares the roots costs one reference count per root (and a list an eighth
    /// the size) instead of a copy of each root; a root a change did not touch is the same
    /// allocation in both states, which the walks comparing them see at once.
    pub roots: Vec<Arc<StoredRootV1>>,
}

/// One root as stored, with who holds it: the user, sessions that publish their host's roots
/// (`rootsctl proxy --host-roots publish`), or both. A root nobody holds is not stored.
///
/// The texts are shared (`Arc<str>`), so that the copies a change makes of the roots it touches
/// (out of the list its workspace shares with the state before, and into its history entry)
/// copy no text, and compare equal by pointer.
#[derive(Clone, Debug, Eq, Serialize, Deserialize)]
pub struct StoredRootV1 {
    pub uri: Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Arc<str>>,
    /// Added by hand: it stays until removed. Records written before roots could be published
    /// lack the field, and every root then was added by hand; it is written only when false, so
    /// such records keep their bytes.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub by_hand: bool,
    /// The sessions that publish it, first publisher first. Sessions do not outlive the daemon:
    /// at start-up these are withdrawn ([`Contents::without_sessions`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub published_by: Vec<StoredPublisherV1>,
}

/// A session that publishes a root, as `rootsctl list` names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredPublisherV1 {
    /// The session's id in the daemon run that stored it.
    pub session: u64,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub pid: u32,
}

// By hand, for the texts' pointer comparison first: the roots a change compares (its
// workspace before and after, a copy and its original) mostly share their texts.
impl PartialEq for StoredRootV1 {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        same_text(&self.uri, &other.uri)
            && same_name(&self.name, &other.name)
            && self.by_hand == other.by_hand
            && self.published_by == other.published_by
    }
}

/// Whether two roots of two states of a workspace have the same URI: at once if they are the
/// same allocation, as every root a change did not touch is, so that a walk over a large
/// workspace's two states reads the two lists and not each root behind them.
#[inline]
pub fn same_uri(a: &Arc<StoredRootV1>, b: &Arc<StoredRootV1>) -> bool {
    Arc::ptr_eq(a, b) || same_text(&a.uri, &b.uri)
}

/// The two lists without the roots they share at their start and at their end (the same
/// allocations, in the same places): what a change did lies between, since a change touches a
/// few roots and leaves the rest of a large workspace shared by both states. For the walks that
/// judge roots by content (a history entry, a listing's size), not by place: a delta must also
/// say where new roots go, and the roots it moves past are not shared in that sense.
pub fn unshared<'a>(
    before: &'a [Arc<StoredRootV1>],
    after: &'a [Arc<StoredRootV1>],
) -> (&'a [Arc<StoredRootV1>], &'a [Arc<StoredRootV1>]) {
    let prefix = before
        .iter()
        .zip(after)
        .take_while(|(a, b)| Arc::ptr_eq(a, b))
        .count();
    let (before, after) = (&before[prefix..], &after[prefix..]);
    let suffix = before
        .iter()
        .rev()
        .zip(after.iter().rev())
        .take_while(|(a, b)| Arc::ptr_eq(a, b))
        .count();
    (
        &before[..before.len() - suffix],
        &after[..after.len() - suffix],
    )
}

/// Whether two shared texts are equal, by pointer first. std's comparison of `Arc<str>` always
/// reads both texts (its pointer shortcut is only for sized types), and a large workspace's
/// lists, compared root by root on every change, share almost all of theirs.
#[inline]
pub fn same_text(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// [`same_text`] for a root's name, which it may lack.
#[inline]
pub fn same_name(a: &Option<Arc<str>>, b: &Option<Arc<str>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same_text(a, b),
        (None, None) => true,
        _ => false,
    }
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

impl StoredRootV1 {
    /// Whether anyone still holds the root: one that nobody holds leaves the workspace.
    pub fn is_held(&self) -> bool {
        self.by_hand || !self.published_by.is_empty()
    }

    /// A root added by hand and published by nobody, as the store's tests build them.
    #[cfg(test)]
    pub fn by_hand(uri: &str, name: Option<&str>) -> Self {
        Self {
            uri: uri.into(),
            name: name.map(Arc::from),
            by_hand: true,
            published_by: Vec::new(),
        }
    }
}

/// Everything stored: every workspace, at one store revision, and the newest changes.
///
/// Each workspace's state is shared (`Arc`) with the change that made it: applying a change
/// to the pending and to the committed contents, and publishing it, take the change's state
/// rather than copying its roots, so that they cost the same whatever the workspace's size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contents {
    pub revision: u64,
    pub workspaces: BTreeMap<WorkspaceName, Arc<StoredWorkspaceV1>>,
    /// The newest changes, oldest first: at most [`crate::limits::HISTORY_ENTRIES`].
    pub history: VecDeque<HistoryEntryV1>,
}

/// One acknowledged change: the new state of one workspace, which is the store's `revision`,
/// and who made it when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub revision: u64,
    pub workspace: WorkspaceName,
    pub state: Arc<StoredWorkspaceV1>,
    /// Who made it. `None` only for a change journaled by a rootsd that kept no history: it
    /// gets no entry.
    pub origin: Option<Origin>,
    /// When the daemon planned it, in milliseconds since the Unix epoch.
    pub time_unix_ms: u64,
}

impl Change {
    /// `state` as the next state of `workspace`, made by `origin` now: the store revision after
    /// `pending`'s, stamped on the state too. Every change the daemon decides (by hand, for a
    /// session, at start-up) is made here, so that the rule is said once; a tidy test
    /// (`tests/tests/tidy/changes.rs`) fails a `Change { … }` built anywhere else.
    pub fn next(
        pending: &Contents,
        workspace: WorkspaceName,
        mut state: StoredWorkspaceV1,
        origin: Origin,
    ) -> Self {
        let revision = pending.revision + 1;
        state.revision = revision;
        Self {
            revision,
            workspace,
            state: Arc::new(state),
            origin: Some(origin),
            time_unix_ms: crate::clock::unix_ms(),
        }
    }

    /// A change from its parts as a journal record holds them, for reading one back (and for
    /// tests that need a change of their own making): nothing is decided or stamped here, and
    /// only the journal calls it outside tests.
    pub fn recorded(
        revision: u64,
        workspace: WorkspaceName,
        state: Arc<StoredWorkspaceV1>,
        origin: Option<Origin>,
        time_unix_ms: u64,
    ) -> Self {
        Self {
            revision,
            workspace,
            state,
            origin,
            time_unix_ms,
        }
    }
}

/// Who made a change, as the daemon knew it when it planned the change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// A client of the control socket.
    Peer(PeerV1),
    /// The daemon, on behalf of an MCP session; `peer` is the session's connection.
    Session {
        id: u64,
        #[serde(default)]
        label: String,
        peer: PeerV1,
    },
    /// The daemon itself, for `reason`.
    Daemon { reason: String },
}

impl Origin {
    /// A change the daemon makes on behalf of session `id` (labelled `label`), whose proxy is
    /// connected as `peer`; the label is cut to [`crate::limits::HISTORY_TEXT_BYTES`].
    pub fn session(id: u64, label: &str, peer: PeerV1) -> Self {
        Self::Session {
            id,
            label: bounded_text(label),
            peer,
        }
    }

    /// A change the daemon makes of its own accord, for `reason`.
    pub fn daemon(reason: &str) -> Self {
        Self::Daemon {
            reason: bounded_text(reason),
        }
    }
}

/// A peer of the control socket. `uid` and `pid` are the kernel's (`SO_PEERCRED`), `user` the
/// uid's name in `/etc/passwd`, `process` its `/proc/PID/comm` at hello, `client` what it
/// claimed in hello.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerV1 {
    pub uid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Arc<str>>,
}

/// What one change did to its workspace, when, and who made it: computed from the change and
/// the workspace before it ([`crate::store::history::entry`]), never sent by a client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntryV1 {
    pub revision: u64,
    pub time_unix_ms: u64,
    pub workspace: WorkspaceName,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<StoredRootV1>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renamed: Vec<RenamedV1>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<StoredRootV1>,
    /// Roots left out of the lists above, which are bounded in bytes.
    #[serde(default, skip_serializing_if = "OmittedV1::is_empty")]
    pub omitted: OmittedV1,
    pub origin: Origin,
}

/// A root whose name a change replaced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenamedV1 {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_name: Option<String>,
}

/// How many roots of each kind an entry does not list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OmittedV1 {
    #[serde(default)]
    pub added: usize,
    #[serde(default)]
    pub renamed: usize,
    #[serde(default)]
    pub removed: usize,
}

impl OmittedV1 {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl Contents {
    /// Every change from this revision on has an entry in the history: the oldest entry's, or
    /// the next revision's when there is none.
    pub fn recorded_from(&self) -> u64 {
        self.history
            .front()
            .map_or(self.revision + 1, |entry| entry.revision)
    }

    /// How many roots there are in all.
    pub fn root_count(&self) -> usize {
        self.workspaces.values().map(|w| w.roots.len()).sum()
    }

    /// The workspaces that hold roots published by sessions, each as it is without them: what
    /// start-up withdraws before serving, since no session outlives the daemon.
    pub fn without_sessions(&self) -> Vec<(WorkspaceName, StoredWorkspaceV1)> {
        self.workspaces
            .iter()
            .filter(|(_, ws)| ws.roots.iter().any(|r| !r.published_by.is_empty()))
            .map(|(name, ws)| {
                let mut state = StoredWorkspaceV1::clone(ws);
                for root in &mut state.roots {
                    if !root.published_by.is_empty() {
                        Arc::make_mut(root).published_by.clear();
                    }
                }
                state.roots.retain(|r| r.is_held());
                (name.clone(), state)
            })
            .collect()
    }

    /// `revision 7, 12 roots in 3 workspaces, 7 changes in the history`, for messages about
    /// damage.
    pub fn describe(&self) -> String {
        format!(
            "revision {}, {} roots in {} workspaces, {} changes in the history",
            self.revision,
            self.root_count(),
            self.workspaces.len(),
            self.history.len()
        )
    }
}

impl From<&Root> for StoredRootV1 {
    /// A root added by hand.
    fn from(root: &Root) -> Self {
        Self {
            uri: root.uri.as_str().into(),
            name: root.name.as_deref().map(Arc::from),
            by_hand: true,
            published_by: Vec::new(),
        }
    }
}

impl From<&StoredRootV1> for Root {
    fn from(root: &StoredRootV1) -> Self {
        Self {
            uri: String::from(&*root.uri),
            name: root.name.as_deref().map(str::to_owned),
        }
    }
}

/// `text` cut to at most [`crate::limits::HISTORY_TEXT_BYTES`] at a character boundary, for what an entry
/// records about who made a change.
pub fn bounded_text(text: &str) -> String {
    let mut end = text.len().min(crate::limits::HISTORY_TEXT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(uris: &[&str]) -> Vec<Arc<StoredRootV1>> {
        uris.iter()
            .map(|uri| Arc::new(StoredRootV1::by_hand(uri, None)))
            .collect()
    }

    fn uris(roots: &[Arc<StoredRootV1>]) -> Vec<&str> {
        roots.iter().map(|r| &*r.uri).collect()
    }

    #[test]
    fn unshared_leaves_what_lies_between_the_shared_ends() {
        let before = roots(&["file:///a", "file:///b", "file:///c", "file:///d"]);
        let mut renamed = before.clone();
        Arc::make_mut(&mut renamed[1]).name = Some("b".into());
        let (old, new) = unshared(&before, &renamed);
        assert_eq!(
            (uris(old), uris(new)),
            (vec!["file:///b"], vec!["file:///b"])
        );

        let mut added = before.clone();
        added.extend(roots(&["file:///e"]));
        let (old, new) = unshared(&before, &added);
        assert_eq!((uris(old), uris(new)), (vec![], vec!["file:///e"]));

        let (old, new) = unshared(&before, &before);
        assert!(old.is_empty() && new.is_empty());

        // A copy with the same texts is not shared: only the same allocation is.
        let copies = roots(&["file:///a", "file:///b", "file:///c", "file:///d"]);
        let (old, new) = unshared(&before, &copies);
        assert_eq!((old.len(), new.len()), (4, 4));

        let mut removed = before.clone();
        removed.remove(2);
        let (old, new) = unshared(&before, &removed);
        assert_eq!((uris(old), uris(new)), (vec!["file:///c"], vec![]));
    }

    #[test]
    fn the_next_change_is_the_revision_after_the_pending_one_stamped_with_who_and_when() {
        let pending = Contents {
            revision: 41,
            ..Contents::default()
        };
        let workspace: WorkspaceName = "work".parse().expect("a valid name");
        let state = StoredWorkspaceV1 {
            revision: 7,
            roots: roots(&["file:///a"]),
        };
        let origin = Origin::daemon("a test");
        let before = crate::clock::unix_ms();
        let change = Change::next(&pending, workspace.clone(), state.clone(), origin.clone());
        let after = crate::clock::unix_ms();
        assert_eq!(change.revision, 42);
        assert_eq!(change.state.revision, 42, "the state carries its revision");
        assert_eq!(change.state.roots, state.roots);
        assert_eq!(change.workspace, workspace);
        assert_eq!(change.origin, Some(origin));
        assert!((before..=after).contains(&change.time_unix_ms));
    }
}
