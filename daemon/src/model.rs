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

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRootV1 {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Everything stored: every workspace, at one store revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contents {
    pub revision: u64,
    pub workspaces: BTreeMap<WorkspaceName, StoredWorkspaceV1>,
}

/// One acknowledged change: the new state of one workspace, which is the store's `revision`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub revision: u64,
    pub workspace: WorkspaceName,
    pub state: StoredWorkspaceV1,
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
    fn from(root: &Root) -> Self {
        Self {
            uri: root.uri.clone(),
            name: root.name.clone(),
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
