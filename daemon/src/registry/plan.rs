//! The roots rules: what `roots.add` and `roots.remove` change, decided against the pending
//! state (every change written, durable or not) under the committer's writers' lock, as a
//! [`Plan`] to write and the [`ChangeResult`] to tell the client once it is durable.
//!
//! Pure: no I/O, no locks, no waiting; only `plan_change` reads the clock, to stamp the change
//! for the history. The rules are tested as data in `registry/tests/`.

use std::sync::Arc;

use rootsd_proto::wire::{self, ChangeResult, RemoveTarget};
use rootsd_proto::{Root, WorkspaceName};

use crate::error::RequestError;
use crate::store::Plan;
use crate::store::{Change, Contents, Origin, StoredRootV1, StoredWorkspaceV1};

use super::publish::Decline;
use super::{CanonicalRoot, changed};

/// The change adding `canonical` roots (name, URI) makes to `workspace` in `pending`.
pub(super) fn plan_add(
    pending: &Contents,
    workspace: &WorkspaceName,
    canonical: Vec<CanonicalRoot>,
    origin: Origin,
) -> Result<Plan<ChangeResult>, RequestError> {
    let mut next = pending
        .workspaces
        .get(workspace)
        .map(|w| StoredWorkspaceV1::clone(w))
        .unwrap_or_default();
    let mut result = empty_result(workspace);
    for (name, uri) in canonical {
        match next.roots.iter_mut().find(|r| *r.uri == *uri) {
            Some(existing) => {
                // A root that only sessions publish becomes the user's too: it stays when they
                // end. Only a root this changes is copied out of the state it shares with the
                // pending one.
                let adopted = !existing.by_hand;
                if adopted {
                    Arc::make_mut(existing).by_hand = true;
                }
                if let Some(name) = name.filter(|n| existing.name.as_deref() != Some(n.as_str())) {
                    Arc::make_mut(existing).name = Some(Arc::from(name.as_str()));
                    // The request's own strings, which the stored root now holds.
                    let renamed = Root {
                        uri,
                        name: Some(name),
                    };
                    if adopted {
                        result.adopted.push(renamed.clone());
                    }
                    result.renamed.push(renamed);
                } else if adopted {
                    result.adopted.push(Root::from(&**existing));
                } else {
                    result.unchanged.push(Root::from(&**existing));
                }
            }
            None => {
                // An unnamed root is named after its directory, as MCP clients usually do.
                let name = match name {
                    Some(name) => name,
                    None => rootsd_proto::root::default_name_of(&uri)?,
                };
                let root = Root {
                    uri,
                    name: Some(name),
                };
                next.roots.push(Arc::new(StoredRootV1::from(&root)));
                result.added.push(root);
            }
        }
    }
    Ok(plan_change(pending, workspace, next, result, origin))
}

/// The change removing what `targets` name from `workspace` in `pending`, and the sessions that
/// published them; refused if any target matches nothing or a name matches several roots. A
/// root is removed whoever holds it: the user's word is the last.
pub(super) fn plan_remove(
    pending: &Contents,
    workspace: &WorkspaceName,
    targets: &[RemoveTarget],
    origin: Origin,
) -> Result<Plan<(ChangeResult, Vec<Decline>)>, RequestError> {
    let current = pending
        .workspaces
        .get(workspace)
        .cloned()
        .unwrap_or_default();
    // Every target is matched against the list as it was, so naming one root twice
    // (`rootsctl remove app ./app`) removes it once.
    let mut doomed: Vec<usize> = Vec::with_capacity(targets.len());
    for target in targets {
        let index = find_target(&current.roots, target, workspace)?;
        if !doomed.contains(&index) {
            doomed.push(index);
        }
    }
    let mut result = empty_result(workspace);
    result.removed = doomed
        .iter()
        .map(|&i| Root::from(&*current.roots[i]))
        .collect();
    let declines: Vec<Decline> = doomed
        .iter()
        .flat_map(|&i| {
            let root = &current.roots[i];
            root.published_by
                .iter()
                .map(|p| (p.session, root.uri.to_string()))
        })
        .collect();
    let mut next = StoredWorkspaceV1::clone(&current);
    let mut index = 0;
    next.roots.retain(|_| {
        index += 1;
        !doomed.contains(&(index - 1))
    });
    Ok(
        match plan_change(pending, workspace, next, result, origin) {
            Plan::Write(change, result) => Plan::Write(change, (result, declines)),
            Plan::Unchanged { revision, reply } => Plan::Unchanged {
                revision,
                reply: (reply, declines),
            },
        },
    )
}

/// `next` as the next revision of `workspace` if anything changed, made by `origin` now; else a
/// no-op at the workspace's current revision. Every change by hand is planned here, so it
/// carries who made it and when into the journal, and from there into the history.
fn plan_change(
    pending: &Contents,
    workspace: &WorkspaceName,
    next: StoredWorkspaceV1,
    mut result: ChangeResult,
    origin: Origin,
) -> Plan<ChangeResult> {
    result.total = next.roots.len();
    if !changed(&result) {
        result.revision = pending.workspaces.get(workspace).map_or(0, |w| w.revision);
        return Plan::Unchanged {
            revision: result.revision,
            reply: result,
        };
    }
    let change = Change::next(pending, workspace.clone(), next, origin);
    result.revision = change.revision;
    Plan::Write(change, result)
}

fn empty_result(workspace: &WorkspaceName) -> ChangeResult {
    ChangeResult {
        workspace: workspace.clone(),
        revision: 0,
        added: Vec::new(),
        renamed: Vec::new(),
        unchanged: Vec::new(),
        removed: Vec::new(),
        adopted: Vec::new(),
        total: 0,
        notified_sessions: 0,
    }
}

/// Finds the root a removal target names: by URI first, then by display name.
fn find_target(
    roots: &[Arc<StoredRootV1>],
    target: &RemoveTarget,
    workspace: &WorkspaceName,
) -> Result<usize, RequestError> {
    if let Some(uri) = &target.uri {
        let canonical = rootsd_proto::root::canonical_uri(uri).unwrap_or_else(|_| uri.clone());
        if let Some(index) = roots.iter().position(|r| *r.uri == *canonical) {
            return Ok(index);
        }
    }
    if let Some(name) = &target.name {
        let matches: Vec<usize> = roots
            .iter()
            .enumerate()
            .filter(|(_, r)| r.name.as_deref() == Some(name.as_str()))
            .map(|(i, _)| i)
            .collect();
        match matches.as_slice() {
            [index] => return Ok(*index),
            [] => {}
            _ => {
                let uris: Vec<&str> = matches.iter().map(|&i| &*roots[i].uri).collect();
                return Err(RequestError::new(
                    wire::code::AMBIGUOUS,
                    format!(
                        "{:?} is the name of {} roots in workspace {workspace} ({}): remove them by path or URI instead",
                        target.input,
                        matches.len(),
                        uris.join(", ")
                    ),
                ));
            }
        }
    }
    Err(RequestError::new(
        wire::code::NOT_FOUND,
        format!(
            "{:?} is not a root of workspace {workspace}: nothing was removed (see `rootsctl list --workspace {workspace}`)",
            target.input
        ),
    ))
}
