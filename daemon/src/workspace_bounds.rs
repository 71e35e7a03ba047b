//! What a change may make a workspace: at most [`MAX_WORKSPACE_ROOTS`] roots and
//! [`MAX_WORKSPACE_BYTES`] of listing, in at most [`MAX_WORKSPACES`] workspaces with roots, all
//! of them together at most [`MAX_TOTAL_BYTES`].
//! Checked on every planned change of every source (by hand, a session's publication), in
//! [`crate::registry`]'s one commit path; a change that does not grow a workspace always passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rootsd_proto::WorkspaceName;
use rootsd_proto::wire::code;

use crate::error::RequestError;
use crate::limits::{MAX_TOTAL_BYTES, MAX_WORKSPACE_BYTES, MAX_WORKSPACE_ROOTS, MAX_WORKSPACES};
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
        // Its name is copied only the first time its size is recorded.
        match measured.bytes.get_mut(&change.workspace) {
            Some(bytes) => *bytes = next,
            None => {
                measured.bytes.insert(change.workspace.clone(), next);
            }
        }
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

/// One root's bytes in a `roots.list` answer, `{"uri":…,"name":…,"origin":[…]}` as serde_json
/// writes the root's [`ListedRoot`], counted without making it: building the listed root and
/// serialising it into a counter took about 1,700 instructions and five allocations per root,
/// twice for every renamed root, on the path of every change. The tests check the count
/// against serde_json's output.
fn root_bytes(stored: &StoredRootV1) -> usize {
    let mut bytes = r#"{"uri":}"#.len() + string_bytes(&stored.uri);
    if let Some(name) = &stored.name {
        bytes += r#","name":"#.len() + string_bytes(name);
    }
    let origins = usize::from(stored.by_hand) + stored.published_by.len();
    if origins > 0 {
        // The brackets and a comma between origins.
        bytes += r#","origin":[]"#.len() + origins - 1;
        if stored.by_hand {
            bytes += r#"{"by":"hand"}"#.len();
        }
        for publisher in &stored.published_by {
            bytes += r#"{"by":"session","session":,"label":,"pid":}"#.len()
                + digits(publisher.session)
                + string_bytes(&publisher.label)
                + digits(u64::from(publisher.pid));
        }
    }
    bytes
}

/// A string's bytes in JSON as serde_json writes it: quoted, with `"`, `\\` and the control
/// characters escaped (two bytes for those with a short escape, six for the rest), everything
/// else as it is.
fn string_bytes(text: &str) -> usize {
    let escapes: usize = text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0x00..=0x1f => 5,
            _ => 0,
        })
        .sum();
    2 + text.len() + escapes
}

/// The digits of `number` in decimal.
fn digits(number: u64) -> usize {
    number.checked_ilog10().map_or(1, |log| log as usize + 1)
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

#[cfg(test)]
mod tests {
    use rootsd_proto::Root;
    use rootsd_proto::wire::ListedRoot;

    use super::*;
    use crate::provenance;

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

    /// serde_json's bytes for `root` as `roots.list` writes it.
    fn listed_bytes(root: &StoredRootV1) -> usize {
        let listed = ListedRoot {
            root: Root::from(root),
            origin: provenance::origins(root),
        };
        serde_json::to_vec(&listed).unwrap().len()
    }

    #[test]
    fn a_root_is_counted_exactly_as_serde_json_writes_it_whatever_its_text() {
        // Every byte that serde_json escapes, one that it does not (DEL), and text beyond ASCII.
        let mut texts: Vec<String> = (0u8..0x20).map(|b| format!("a{}b", b as char)).collect();
        texts.extend(
            [
                "",
                "plain",
                "quote\"",
                "back\\slash",
                "\u{7f}",
                "é日本🦀",
                "a\"b\\c\n\u{1}",
            ]
            .map(str::to_owned),
        );
        let publishers = |count: u64| -> Vec<crate::store::StoredPublisherV1> {
            (0..count)
                .map(|k| crate::store::StoredPublisherV1 {
                    session: [0, 7, 10, 99, 12_345, u64::MAX][k as usize % 6],
                    label: texts[k as usize % texts.len()].clone(),
                    pid: [0, 9, 10, u32::MAX][k as usize % 4],
                })
                .collect()
        };
        let mut checked = 0;
        for (i, text) in texts.iter().enumerate() {
            for name in [None, Some(text.as_str()), Some("n")] {
                for by_hand in [true, false] {
                    for count in 0..4 {
                        let root = StoredRootV1 {
                            uri: format!("file:///{text}/{i}").into(),
                            name: name.map(Into::into),
                            by_hand,
                            published_by: publishers(count + i as u64),
                        };
                        assert_eq!(root_bytes(&root), listed_bytes(&root), "{root:?}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 400, "{checked} roots checked");
        for number in [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(digits(number), number.to_string().len(), "{number}");
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
            let change = Change::recorded(
                pending.revision + 1,
                name.parse().unwrap(),
                state.into(),
                None,
                0,
            );
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
