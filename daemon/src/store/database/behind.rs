//! The durable changes the database has not taken yet, kept as the database needs them.
//!
//! The database writes each workspace as its last change left it, and the history entries of
//! every revision in between (which the committed contents hold). So that is all that is kept:
//! the revisions behind, and each workspace's last change. A burst of changes then holds memory
//! in proportion to the workspaces it touched (states the committed contents share anyway), not
//! to its length, and the database writes each workspace once for the whole burst: the commit
//! thread can leave it to the next pause in writes instead of stopping between two syncs to
//! catch the database up.

use std::collections::HashMap;

use rootsd_proto::WorkspaceName;

use crate::store::model::Change;

#[derive(Debug, Default)]
pub struct Behind {
    /// The first and last revision behind; `None` when nothing is.
    span: Option<(u64, u64)>,
    /// Each workspace's last change, in the order the workspaces first fell behind.
    latest: Vec<Change>,
    /// Where each workspace's change is in `latest`.
    at: HashMap<WorkspaceName, usize>,
}

impl Behind {
    /// Takes in the next durable change, and returns the change to its workspace it replaces.
    /// Changes come in revision order.
    pub fn push(&mut self, change: Change) -> Option<Change> {
        self.span = Some(match self.span {
            Some((first, _)) => (first, change.revision),
            None => (change.revision, change.revision),
        });
        match self.at.get(&change.workspace) {
            Some(&index) => Some(std::mem::replace(&mut self.latest[index], change)),
            None => {
                self.at.insert(change.workspace.clone(), self.latest.len());
                self.latest.push(change);
                None
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.span.is_none()
    }

    /// The first and last revision behind.
    pub fn span(&self) -> Option<(u64, u64)> {
        self.span
    }

    /// Each workspace's last change behind.
    pub fn latest(&self) -> &[Change] {
        &self.latest
    }
}

impl FromIterator<Change> for Behind {
    fn from_iter<I: IntoIterator<Item = Change>>(changes: I) -> Self {
        let mut behind = Self::default();
        for change in changes {
            let _replaced = behind.push(change);
        }
        behind
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::model::StoredWorkspaceV1;

    fn change(revision: u64, workspace: &str) -> Change {
        Change::recorded(
            revision,
            WorkspaceName::new(workspace).unwrap(),
            Arc::new(StoredWorkspaceV1 {
                revision,
                ..StoredWorkspaceV1::default()
            }),
            None,
            revision,
        )
    }

    #[test]
    fn a_workspace_keeps_only_its_last_change_and_the_span_every_revision() {
        let behind: Behind = [
            change(4, "a"),
            change(5, "b"),
            change(6, "a"),
            change(7, "a"),
        ]
        .into_iter()
        .collect();
        assert_eq!(behind.span(), Some((4, 7)));
        let kept: Vec<(String, u64)> = behind
            .latest()
            .iter()
            .map(|c| (c.workspace.to_string(), c.revision))
            .collect();
        assert_eq!(kept, [("a".to_owned(), 7), ("b".to_owned(), 5)]);
        assert_eq!(behind.latest()[0].state.revision, 7);
    }

    #[test]
    fn nothing_behind_has_no_span() {
        let behind = Behind::default();
        assert!(behind.is_empty());
        assert_eq!(behind.span(), None);
        assert!(behind.latest().is_empty());
    }
}
