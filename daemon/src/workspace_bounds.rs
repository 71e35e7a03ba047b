//! What a change may make a workspace: at most [`MAX_WORKSPACE_ROOTS`] roots and
//! [`MAX_WORKSPACE_BYTES`] of listing, in at most [`MAX_WORKSPACES`] workspaces with roots, all
//! of them together at most [`MAX_TOTAL_BYTES`].
//! Checked on every planned change of every source (by hand, a session's publication), in
//! [`crate::registry`]'s one commit path; a change that does not grow a workspace always passes.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use rootsd_proto::wire::{ListedRoot, code};
use rootsd_proto::{Root, WorkspaceName};

use crate::error::RequestError;
use crate::limits::{MAX_TOTAL_BYTES, MAX_WORKSPACE_BYTES, MAX_WORKSPACE_ROOTS, MAX_WORKSPACES};
use crate::provenance;
use crate::store::Plan;
use crate::store::{Contents, StoredRootV1, StoredWorkspaceV1, same_uri, unshared};

/// Each workspace's listing size, their total and how many workspaces hold roots, as of one
/// pending revision, so that a change is checked without looking at any other workspace, and
/// measured by what it changes: the size after a change is the size before it, less the roots
/// it removed or altered, plus the ones it added or altered.
///
/// Every change to the pending state is checked here and, once it passes, written, so the
/// figures stay those of the pending state as long as its revision is the one they were
/// updated to. Any other revision (a failed sync puts the pending state back, and its revisions
/// are then given to the next changes) makes the next check measure every workspace again.
#[derive(Default)]
pub struct Sizes(Mutex<Measured>);

#[derive(Default)]
pub struct Measured {
    /// The pending revision the figures describe; `None` before the first check.
    at: Option<u64>,
    bytes: HashMap<WorkspaceName, usize>,
    total: usize,
    holding: usize,
}

impl Measured {
    fn measure(pending: &Contents) -> Self {
        let bytes: HashMap<WorkspaceName, usize> = pending
            .workspaces
            .iter()
            .map(|(name, workspace)| (name.clone(), listing_bytes(workspace)))
            .collect();
        Self {
            at: Some(pending.revision),
            total: bytes.values().sum(),
            bytes,
            holding: pending
                .workspaces
                .values()
                .filter(|w| !w.roots.is_empty())
                .count(),
        }
    }
}

/// `plan`, unless the change it writes takes its workspace, or all of them together, past a
/// bound.
pub fn check<T>(pending: &Contents, plan: Plan<T>, sizes: &Sizes) -> Result<Plan<T>, RequestError> {
    if let Plan::Write(change, _) = &plan {
        let current = pending.workspaces.get(&change.workspace).map(Arc::as_ref);
        let mut measured = sizes.0.lock().expect("sizes lock");
        if measured.at != Some(pending.revision) {
            *measured = Measured::measure(pending);
        }
        let before = current.map(|_| {
            measured
                .bytes
                .get(&change.workspace)
                .copied()
                .unwrap_or_default()
        });
        let listed_before = before.unwrap_or_else(|| listing_bytes(&StoredWorkspaceV1::default()));
        let next = listing_bytes_after(current, listed_before, &change.state);
        fits_measured(
            &change.workspace,
            current.map(|w| (w.roots.len(), listed_before)),
            &change.state,
            next,
            measured.holding,
        )?;
        let others = measured.total.saturating_sub(before.unwrap_or(0));
        let after = others + next;
        if after > MAX_TOTAL_BYTES && after > others + before.unwrap_or(0) {
            return Err(RequestError::new(
                code::LIMIT,
                format!(
                    "the lists of every workspace together would take {after} bytes, past rootsd's limit (MAX_TOTAL_BYTES = {MAX_TOTAL_BYTES}); nothing was changed: remove roots no workspace needs any more (rootsctl remove), or publish fewer"
                ),
            ));
        }
        let held_before = current.is_some_and(|w| !w.roots.is_empty());
        let held_after = !change.state.roots.is_empty();
        measured.holding =
            (measured.holding + usize::from(held_after)).saturating_sub(usize::from(held_before));
        measured.total = after;
        measured.bytes.insert(change.workspace.clone(), next);
        measured.at = Some(change.revision);
    }
    Ok(plan)
}

/// Whether `next` may replace `current` as `workspace`, with `holding` workspaces holding roots:
/// [`fits_measured`] measuring both listings whole, as the tests state the bounds.
#[cfg(test)]
fn fits(
    workspace: &WorkspaceName,
    current: Option<&StoredWorkspaceV1>,
    next: &StoredWorkspaceV1,
    holding: usize,
) -> Result<(), RequestError> {
    fits_measured(
        workspace,
        current.map(|w| (w.roots.len(), listing_bytes(w))),
        next,
        listing_bytes(next),
        holding,
    )
}

/// [`fits`], given how many roots the workspace holds and how many bytes its listing takes now
/// (`None`: it does not exist), and the bytes `next`'s listing would take.
fn fits_measured(
    workspace: &WorkspaceName,
    current: Option<(usize, usize)>,
    next: &StoredWorkspaceV1,
    bytes: usize,
    holding: usize,
) -> Result<(), RequestError> {
    let current_roots = current.map_or(0, |(roots, _)| roots);
    let refuse = |what: String| {
        Err(RequestError::new(
            code::LIMIT,
            format!(
                "{what}; nothing was changed: remove roots workspace {workspace} no longer needs (rootsctl remove), publish fewer, or use another workspace (--workspace)"
            ),
        ))
    };
    if current_roots == 0 && !next.roots.is_empty() && holding >= MAX_WORKSPACES {
        return refuse(format!(
            "{holding} workspaces hold roots already, rootsd's limit (MAX_WORKSPACES = {MAX_WORKSPACES}), so workspace {workspace} cannot be given any"
        ));
    }
    if next.roots.len() > MAX_WORKSPACE_ROOTS && next.roots.len() > current_roots {
        return refuse(format!(
            "workspace {workspace} would hold {} roots, past its limit (MAX_WORKSPACE_ROOTS = {MAX_WORKSPACE_ROOTS})",
            next.roots.len()
        ));
    }
    if bytes > MAX_WORKSPACE_BYTES && bytes > current.map_or(0, |(_, bytes)| bytes) {
        return refuse(format!(
            "workspace {workspace}'s list would take {bytes} bytes, past its limit (MAX_WORKSPACE_BYTES = {MAX_WORKSPACE_BYTES}, so that the whole list fits one line of the control protocol)"
        ));
    }
    Ok(())
}

/// The bytes `workspace`'s roots take in a `roots.list` answer, as serde_json writes them: the
/// brackets, a comma between roots, and each root.
pub fn listing_bytes(workspace: &StoredWorkspaceV1) -> usize {
    let roots: usize = workspace.roots.iter().map(|r| root_bytes(r)).sum();
    2 + roots + workspace.roots.len().saturating_sub(1)
}

/// One root's bytes in a `roots.list` answer.
fn root_bytes(stored: &StoredRootV1) -> usize {
    let listed = ListedRoot {
        root: Root::from(stored),
        origin: provenance::origins(stored),
    };
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, &listed).expect("counting never fails");
    counter.0
}

/// [`listing_bytes`] of `next`, from the `bytes` its workspace's listing takes now (`current`),
/// measuring only the roots that differ: one walk over both lists compares URIs, and the roots
/// both hold alike are not measured again. A change that reorders roots measures more of them,
/// never wrongly.
fn listing_bytes_after(
    current: Option<&StoredWorkspaceV1>,
    bytes: usize,
    next: &StoredWorkspaceV1,
) -> usize {
    let before: &[Arc<StoredRootV1>] = current.map_or(&[], |w| &w.roots);
    // The roots' own bytes, without brackets and commas.
    // Saturating, so that a size recorded wrongly can make a bound misjudge, never panic.
    let mut roots = bytes.saturating_sub(2 + before.len().saturating_sub(1));
    let count = next.roots.len();
    // The roots both states share at their ends add the same bytes to both.
    let (before, after) = unshared(before, &next.roots);
    let (mut i, mut j) = (0, 0);
    while i < before.len() && j < after.len() {
        if same_uri(&before[i], &after[j]) {
            if before[i] != after[j] {
                roots = roots.saturating_sub(root_bytes(&before[i])) + root_bytes(&after[j]);
            }
            j += 1;
        } else {
            roots = roots.saturating_sub(root_bytes(&before[i]));
        }
        i += 1;
    }
    roots = roots.saturating_sub(before[i..].iter().map(|r| root_bytes(r)).sum::<usize>());
    roots += after[j..].iter().map(|r| root_bytes(r)).sum::<usize>();
    2 + roots + count.saturating_sub(1)
}

/// Counts what is written to it.
struct Counter(usize);

impl Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(roots: usize, name_bytes: usize) -> StoredWorkspaceV1 {
        StoredWorkspaceV1 {
            revision: 1,
            roots: (0..roots)
                .map(|i| {
                    Arc::new(StoredRootV1 {
                        uri: format!("file:///r{i}").into(),
                        name: Some("n".repeat(name_bytes).into()),
                        by_hand: true,
                        published_by: Vec::new(),
                    })
                })
                .collect(),
        }
    }

    #[test]
    fn the_listing_is_measured_exactly_as_roots_list_writes_it() {
        let ws = workspace(3, 5);
        let listed: Vec<ListedRoot> = ws
            .roots
            .iter()
            .map(|r| ListedRoot {
                root: Root::from(&**r),
                origin: provenance::origins(r),
            })
            .collect();
        assert_eq!(
            listing_bytes(&ws),
            serde_json::to_vec(&listed).unwrap().len()
        );
        assert_eq!(listing_bytes(&workspace(0, 0)), 2);
    }

    #[test]
    fn a_change_is_measured_by_what_it_changes_exactly_as_a_whole_listing() {
        let before = workspace(6, 3);
        let cases: Vec<StoredWorkspaceV1> = vec![
            workspace(6, 3),
            workspace(8, 3),
            workspace(2, 3),
            workspace(0, 0),
            {
                let mut renamed = workspace(6, 3);
                Arc::make_mut(&mut renamed.roots[2]).name = Some("a longer name".into());
                Arc::make_mut(&mut renamed.roots[4]).published_by.push(
                    crate::store::StoredPublisherV1 {
                        session: 3,
                        label: "s".to_owned(),
                        pid: 1,
                    },
                );
                renamed
            },
            {
                let mut reordered = workspace(6, 3);
                reordered.roots.swap(0, 5);
                reordered.roots.remove(3);
                reordered
            },
        ];
        for next in &cases {
            assert_eq!(
                listing_bytes_after(Some(&before), listing_bytes(&before), next),
                listing_bytes(next),
                "{next:?}"
            );
            assert_eq!(
                listing_bytes_after(None, listing_bytes(&workspace(0, 0)), next),
                listing_bytes(next)
            );
        }
    }

    #[test]
    fn a_change_past_a_bound_is_refused_naming_it_and_one_that_does_not_grow_passes() {
        let name = WorkspaceName::default();
        let roots = fits(&name, None, &workspace(MAX_WORKSPACE_ROOTS + 1, 0), 0).unwrap_err();
        assert_eq!(roots.code, code::LIMIT);
        assert!(
            roots.message.contains("MAX_WORKSPACE_ROOTS = 4096"),
            "{}",
            roots.message
        );
        let bytes = fits(&name, None, &workspace(100, 6000), 0).unwrap_err();
        assert!(
            bytes.message.contains("MAX_WORKSPACE_BYTES = 524288"),
            "{}",
            bytes.message
        );
        assert!(
            bytes.message.contains("nothing was changed"),
            "{}",
            bytes.message
        );
        let many = fits(&name, None, &workspace(1, 0), MAX_WORKSPACES).unwrap_err();
        assert!(
            many.message.contains("MAX_WORKSPACES = 256"),
            "{}",
            many.message
        );
        // Already past (a store from before the limits): a change that does not grow it passes.
        let big = workspace(100, 6000);
        assert!(fits(&name, Some(&big), &workspace(99, 6000), MAX_WORKSPACES).is_ok());
        assert!(fits(&name, None, &workspace(MAX_WORKSPACE_ROOTS, 0), 0).is_ok());
    }

    #[test]
    fn all_workspaces_together_stop_at_the_total_and_a_change_that_does_not_grow_passes() {
        use crate::store::Change;
        let mut pending = Contents::default();
        let sizes = Sizes::default();
        let write = |pending: &Contents, name: &str, state: StoredWorkspaceV1| {
            let change = Change {
                revision: pending.revision + 1,
                workspace: name.parse().unwrap(),
                state: state.into(),
                origin: None,
                time_unix_ms: 0,
            };
            check(pending, Plan::Write(change, ()), &sizes)
        };
        // Workspaces of about 500 KB each, until the total refuses one.
        let mut accepted = 0;
        let refusal = loop {
            let mut state = workspace(3000, 100);
            state.revision = pending.revision + 1;
            match write(&pending, &format!("w{accepted}"), state.clone()) {
                Ok(_) => {
                    pending.revision += 1;
                    pending
                        .workspaces
                        .insert(format!("w{accepted}").parse().unwrap(), state.into());
                    accepted += 1;
                }
                Err(refusal) => break refusal,
            }
        };
        assert_eq!(refusal.code, code::LIMIT);
        assert!(
            refusal.message.contains("MAX_TOTAL_BYTES = 16777216"),
            "{}",
            refusal.message
        );
        let total: usize = pending.workspaces.values().map(|w| listing_bytes(w)).sum();
        assert!(
            total <= MAX_TOTAL_BYTES && total + 500_000 > MAX_TOTAL_BYTES,
            "{accepted}: {total}"
        );
        // Shrinking one passes, past the total or not.
        assert!(write(&pending, "w0", workspace(10, 100)).is_ok());
    }
}
