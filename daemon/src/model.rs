//! The roots as stored: the types the database and the journal hold, separate from the wire
//! types on purpose (the wire may grow without forcing a migration, and a migration never
//! changes the wire).
//!
//! Nothing here does I/O; [`crate::store`] keeps these in sled and [`crate::journal`] in its
//! file.

use std::collections::BTreeMap;

use rootsd_proto::{Root, WorkspaceName};
use serde::{Deserialize, Serialize};

/// One workspace as stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredWorkspaceV1 {
    /// The store revision of the last change to this workspace.
    pub revision: u64,
    pub roots: Vec<StoredRootV1>,
}

/// One root as stored, with who holds it: the user, sessions that publish their host's roots
/// (`rootsctl proxy --host-roots publish`), or both. A root nobody holds is not stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRootV1 {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
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
}

/// Everything stored: every workspace, at one store revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contents {
    pub revision: u64,
    pub workspaces: BTreeMap<WorkspaceName, StoredWorkspaceV1>,
}

/// One acknowledged change: the new state of one workspace, which is the store's `revision`, and
/// who made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub revision: u64,
    pub workspace: WorkspaceName,
    pub state: StoredWorkspaceV1,
    pub origin: ChangeOrigin,
}

/// Who made a change; the journal records it with the change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChangeOrigin {
    /// A user, through `roots.add` or `roots.remove` (`rootsctl add`, `rootsctl remove`).
    #[default]
    Hand,
    /// A session: it published its host's roots, or it ended and what it published was
    /// withdrawn.
    Session(StoredPublisherV1),
    /// rootsd at start-up, withdrawing what sessions of its previous run published.
    Startup,
}

impl ChangeOrigin {
    pub fn is_hand(&self) -> bool {
        *self == Self::Hand
    }
}

impl Contents {
    /// Applies `change`, which must be the next revision.
    pub fn apply(&mut self, change: &Change) {
        debug_assert!(change.revision > self.revision, "changes apply in order");
        self.revision = change.revision;
        self.workspaces
            .insert(change.workspace.clone(), change.state.clone());
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
                let mut state = ws.clone();
                for root in &mut state.roots {
                    root.published_by.clear();
                }
                state.roots.retain(StoredRootV1::is_held);
                (name.clone(), state)
            })
            .collect()
    }

    /// `revision 7, 12 roots in 3 workspaces`, for messages about damage.
    pub fn describe(&self) -> String {
        format!(
            "revision {}, {} roots in {} workspaces",
            self.revision,
            self.root_count(),
            self.workspaces.len()
        )
    }
}

impl From<&Root> for StoredRootV1 {
    /// A root added by hand.
    fn from(root: &Root) -> Self {
        Self {
            uri: root.uri.clone(),
            name: root.name.clone(),
            by_hand: true,
            published_by: Vec::new(),
        }
    }
}

impl From<&StoredRootV1> for Root {
    fn from(root: &StoredRootV1) -> Self {
        Self {
            uri: root.uri.clone(),
            name: root.name.clone(),
        }
    }
}
