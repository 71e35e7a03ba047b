//! The change history: what each change did to its workspace (roots added, renamed, removed),
//! computed the same way for every kind of change, and the `log` query over it.
//!
//! An entry is a pure function of the change (which carries who made it and when) and the
//! workspace before it. That is what makes an entry exactly as durable as its change: the
//! journal record of the change is synced before it is acknowledged, and replaying the journal
//! computes the same entry again, so a crash can lose neither. It is also why start-up can
//! compare the database's history with the journal's ([`crate::store::start::reconcile`]); a change to what an
//! entry holds, or to [`HISTORY_ENTRIES`], is therefore a change to the stored schema.
//!
//! Nothing here does I/O or reads the clock.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, RwLock};

use rootsd_proto::wire::{self, LogEntry, Who};
use rootsd_proto::{Root, WorkspaceName};

use crate::limits::{HISTORY_ENTRIES, HISTORY_ENTRY_ROOT_BYTES, LOG_PAGE_BYTES};
use crate::store::model::{
    Change, Contents, HistoryEntryV1, OmittedV1, Origin, PeerV1, RenamedV1, StoredRootV1,
    StoredWorkspaceV1, same_name, same_uri, unshared,
};

/// What `change` did to its workspace, which held `previous` before it; `None` for a change
/// journaled by a rootsd that kept no history. Roots are listed in the order of the lists they
/// come from (added and renamed in the new list's order, removed in the old one's) until
/// [`HISTORY_ENTRY_ROOT_BYTES`] are listed; the rest are counted in `omitted`.
pub fn entry(previous: Option<&StoredWorkspaceV1>, change: &Change) -> Option<HistoryEntryV1> {
    let origin = change.origin.clone()?;
    let before: &[Arc<StoredRootV1>] = previous.map_or(&[], |w| &w.roots);
    let (before, after) = unshared(before, &change.state.roots);
    // One walk over both lists pairs the roots they hold in the same order (`kept`: which old
    // roots found their new one), without hashing every URI of a large workspace on every
    // change; only the roots the walk could not pair (removed, added, or moved) are hashed.
    let mut kept = vec![false; before.len()];
    let mut paired = 0;
    {
        let mut i = 0;
        while i < before.len() && paired < after.len() {
            if same_uri(&before[i], &after[paired]) {
                kept[i] = true;
                paired += 1;
            }
            i += 1;
        }
    }
    let unpaired: HashMap<&str, &Option<Arc<str>>> = before
        .iter()
        .zip(&kept)
        .filter(|(_, kept)| !**kept)
        .map(|(root, _)| (&*root.uri, &root.name))
        .collect();
    let mut paired_old = before.iter().zip(&kept).filter(|(_, kept)| **kept);
    let mut entry = HistoryEntryV1 {
        revision: change.revision,
        time_unix_ms: change.time_unix_ms,
        workspace: change.workspace.clone(),
        added: Vec::new(),
        renamed: Vec::new(),
        removed: Vec::new(),
        omitted: OmittedV1::default(),
        origin,
    };
    let mut room = HISTORY_ENTRY_ROOT_BYTES;
    let mut fits = |bytes: usize| match room.checked_sub(bytes) {
        Some(left) => {
            room = left;
            true
        }
        None => false,
    };
    let text_len = |name: &Option<Arc<str>>| name.as_deref().map_or(0, str::len);
    for (j, root) in after.iter().enumerate() {
        let old_name = if j < paired {
            match paired_old.next() {
                // The same root: nothing about it changed.
                Some((old, _)) if Arc::ptr_eq(old, root) => continue,
                old => old.map(|(old, _)| &old.name),
            }
        } else {
            unpaired.get(&*root.uri).copied()
        };
        match old_name {
            None if fits(root.uri.len() + text_len(&root.name)) => {
                entry.added.push(StoredRootV1::clone(root));
            }
            None => entry.omitted.added += 1,
            Some(previous_name) if !same_name(previous_name, &root.name) => {
                let bytes = root.uri.len() + text_len(&root.name) + text_len(previous_name);
                if fits(bytes) {
                    entry.renamed.push(RenamedV1 {
                        uri: String::from(&*root.uri),
                        name: root.name.as_deref().map(str::to_owned),
                        previous_name: previous_name.as_deref().map(str::to_owned),
                    });
                } else {
                    entry.omitted.renamed += 1;
                }
            }
            Some(_) => {}
        }
    }
    let moved: HashSet<&str> = after[paired..].iter().map(|root| &*root.uri).collect();
    let gone = before
        .iter()
        .zip(&kept)
        .filter(|(root, kept)| !**kept && !moved.contains(&*root.uri))
        .map(|(root, _)| root);
    for root in gone {
        if fits(root.uri.len() + text_len(&root.name)) {
            entry.removed.push(StoredRootV1::clone(root));
        } else {
            entry.omitted.removed += 1;
        }
    }
    Some(entry)
}

// Applying a change lives here, beside `entry`, so that the stored types (`model.rs`) need
// nothing of the history and no other place computes an entry.
impl Contents {
    /// Applies `change`, which must be the next revision, and records it in the history, which
    /// keeps the changes of the last [`crate::limits::HISTORY_ENTRIES`] revisions (every change
    /// has an entry, so that many entries), dropping the oldest first.
    pub fn apply(&mut self, change: &Change) {
        let previous = self.workspaces.get(&change.workspace).map(Arc::as_ref);
        let entry = entry(previous, change);
        self.apply_recorded(change, entry);
    }

    /// [`Contents::apply`] with the change's history entry already computed (by [`entry`],
    /// against the state of its workspace this applies it to), so that the commit thread does
    /// not walk a large workspace again for the entry the writer's planning computed. Returns
    /// the workspace's state it replaced, for the caller to let go of when it suits it.
    pub fn apply_recorded(
        &mut self,
        change: &Change,
        entry: Option<HistoryEntryV1>,
    ) -> Option<Arc<StoredWorkspaceV1>> {
        debug_assert!(change.revision > self.revision, "changes apply in order");
        let window = crate::limits::HISTORY_ENTRIES as u64;
        while let Some(oldest) = self.history.front()
            && oldest.revision + window <= change.revision
        {
            self.history.pop_front();
        }
        if let Some(entry) = entry {
            self.history.push_back(entry);
        }
        self.revision = change.revision;
        match self.workspaces.get_mut(&change.workspace) {
            Some(workspace) => Some(std::mem::replace(workspace, change.state.clone())),
            None => self
                .workspaces
                .insert(change.workspace.clone(), change.state.clone()),
        }
    }
}

/// The entries of `history` (oldest first) that a `log` request asks for, newest first: of
/// `workspace` if given, older than revision `before` if given, at most `limit`, and no more
/// than one page can carry. Also whether more such entries remain beyond them.
///
/// Only what one page can carry is copied: entries are taken until their text alone
/// ([`least_json_bytes`], never more than their JSON) passes [`LOG_PAGE_BYTES`], so that [`page`]
/// cuts the page at the same entry as if every entry had been taken. Copying every entry asked
/// for (the whole history of 1,000 entries of up to 16 KiB each, for a request without a limit)
/// made each concurrent `log` request hold tens of MiB for an answer of 256 KiB, which the
/// allocator kept after the clients left.
pub fn select(
    history: &VecDeque<HistoryEntryV1>,
    workspace: Option<&WorkspaceName>,
    before: Option<u64>,
    limit: usize,
) -> (Vec<HistoryEntryV1>, bool) {
    let mut matching = history
        .iter()
        .rev()
        .filter(|e| before.is_none_or(|b| e.revision < b))
        .filter(|e| workspace.is_none_or(|w| &e.workspace == w));
    let mut selected = Vec::new();
    let mut least_bytes = 0;
    for entry in matching.by_ref().take(limit) {
        if least_bytes > LOG_PAGE_BYTES {
            // The page is full with what is taken: this entry is for a later page.
            return (selected, true);
        }
        least_bytes += least_json_bytes(entry);
        selected.push(entry.clone());
    }
    let more = matching.next().is_some();
    (selected, more)
}

/// A lower bound of the bytes of `entry`'s JSON: its texts, each written at least whole.
fn least_json_bytes(entry: &HistoryEntryV1) -> usize {
    let text = |text: &Option<String>| text.as_deref().map_or(0, str::len);
    let root = |root: &StoredRootV1| root.uri.len() + root.name.as_deref().map_or(0, str::len);
    let renamed = |renamed: &RenamedV1| {
        renamed.uri.len() + text(&renamed.name) + text(&renamed.previous_name)
    };
    entry.workspace.as_str().len()
        + entry
            .added
            .iter()
            .chain(&entry.removed)
            .map(root)
            .sum::<usize>()
        + entry.renamed.iter().map(renamed).sum::<usize>()
}

/// The recorded changes `params` asks for, newest first ([`select`], then [`page`]), from the
/// committed state: only durable changes, like every read.
pub(crate) fn log(committed: &RwLock<Contents>, params: &wire::LogParams) -> wire::LogResult {
    let (selected, more, recorded_from) = {
        let model = committed.read().expect("committed");
        let limit = params.limit.unwrap_or(usize::MAX);
        let (selected, more) = select(
            &model.history,
            params.workspace.as_ref(),
            params.before,
            limit,
        );
        (selected, more, model.recorded_from())
    };
    // Converted and measured outside the lock, which the commit thread needs.
    let (entries, more) = page(selected, more);
    wire::LogResult {
        entries,
        more,
        recorded_from,
        capacity: capacity(),
    }
}

/// `selected` as the wire's entries, as many as fit in one response ([`LOG_PAGE_BYTES`] of JSON
/// after the first); `more` becomes true if some were left for the next page.
pub fn page(selected: Vec<HistoryEntryV1>, more: bool) -> (Vec<LogEntry>, bool) {
    let total = selected.len();
    let mut entries = Vec::with_capacity(total);
    let mut bytes = 0;
    for stored in selected {
        let entry = to_wire(stored);
        let size = serde_json::to_vec(&entry).map_or(0, |json| json.len());
        if !entries.is_empty() && bytes + size > LOG_PAGE_BYTES {
            return (entries, true);
        }
        bytes += size;
        entries.push(entry);
    }
    (entries, more)
}

/// How many entries the history keeps, for `log`'s result.
pub const fn capacity() -> usize {
    HISTORY_ENTRIES
}

fn to_wire(entry: HistoryEntryV1) -> LogEntry {
    let root = |stored: StoredRootV1| Root::from(&stored);
    LogEntry {
        revision: entry.revision,
        time_unix_ms: entry.time_unix_ms,
        workspace: entry.workspace,
        added: entry.added.into_iter().map(root).collect(),
        renamed: entry
            .renamed
            .into_iter()
            .map(|r| wire::Renamed {
                uri: r.uri,
                name: r.name,
                previous_name: r.previous_name,
            })
            .collect(),
        removed: entry.removed.into_iter().map(root).collect(),
        omitted: wire::Omitted {
            added: entry.omitted.added,
            renamed: entry.omitted.renamed,
            removed: entry.omitted.removed,
        },
        who: match entry.origin {
            Origin::Peer(peer) => Who::Peer(peer_to_wire(peer)),
            Origin::Session { id, label, peer } => Who::Session {
                id,
                label,
                peer: peer_to_wire(peer),
            },
            Origin::Daemon { reason } => Who::Daemon { reason },
        },
    }
}

fn peer_to_wire(peer: PeerV1) -> wire::LoggedPeer {
    wire::LoggedPeer {
        uid: peer.uid,
        user: peer.user.as_deref().map(str::to_owned),
        pid: peer.pid,
        process: peer.process.as_deref().map(str::to_owned),
        client: peer.client.as_deref().map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::HISTORY_TEXT_BYTES;
    use crate::store::model::Contents;
    use crate::store::model::bounded_text;

    fn ws(name: &str) -> WorkspaceName {
        WorkspaceName::new(name).unwrap()
    }

    fn root(uri: &str, name: Option<&str>) -> StoredRootV1 {
        StoredRootV1::by_hand(uri, name)
    }

    fn by(uid: u32) -> Option<Origin> {
        Some(Origin::Peer(PeerV1 {
            uid,
            user: Some(format!("user{uid}").into()),
            pid: Some(4242),
            process: Some("rootsctl".into()),
            client: Some("rootsctl 0.1.0".into()),
        }))
    }

    fn shared(roots: Vec<StoredRootV1>) -> Vec<Arc<StoredRootV1>> {
        roots.into_iter().map(Arc::new).collect()
    }

    fn change(revision: u64, workspace: &str, roots: Vec<StoredRootV1>) -> Change {
        Change::recorded(
            revision,
            ws(workspace),
            StoredWorkspaceV1 {
                revision,
                roots: shared(roots),
            }
            .into(),
            by(1000),
            1_796_000_000_000 + revision,
        )
    }

    #[test]
    fn an_entry_lists_what_was_added_renamed_and_removed_in_order() {
        let before = StoredWorkspaceV1 {
            revision: 3,
            roots: shared(vec![
                root("file:///a", Some("a")),
                root("file:///b", Some("b")),
                root("file:///c", None),
                root("file:///d", Some("d")),
            ]),
        };
        let next = change(
            4,
            "w",
            vec![
                root("file:///e", Some("e")),
                root("file:///b", Some("bee")),
                root("file:///d", Some("d")),
                root("file:///c", Some("c")),
                root("file:///f", None),
            ],
        );
        let entry = entry(Some(&before), &next).unwrap();
        assert_eq!(entry.revision, 4);
        assert_eq!(entry.time_unix_ms, 1_796_000_000_004);
        assert_eq!(entry.workspace, ws("w"));
        assert_eq!(
            entry.added,
            [root("file:///e", Some("e")), root("file:///f", None)]
        );
        let renamed: Vec<_> = entry
            .renamed
            .iter()
            .map(|r| {
                (
                    r.uri.as_str(),
                    r.previous_name.as_deref(),
                    r.name.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            renamed,
            [
                ("file:///b", Some("b"), Some("bee")),
                ("file:///c", None, Some("c"))
            ]
        );
        assert_eq!(entry.removed, [root("file:///a", Some("a"))]);
        assert!(entry.omitted.is_empty());
        assert_eq!(entry.origin, by(1000).unwrap());
    }

    #[test]
    fn a_first_change_adds_everything_and_a_change_without_origin_has_no_entry() {
        let first = change(1, "w", vec![root("file:///a", None)]);
        let added: Vec<StoredRootV1> = first.state.roots.iter().map(|r| (**r).clone()).collect();
        assert_eq!(entry(None, &first).unwrap().added, added);
        let mut old = first;
        old.origin = None;
        assert_eq!(entry(None, &old), None);
    }

    #[test]
    fn a_huge_change_lists_roots_up_to_the_byte_bound_and_counts_the_rest() {
        let long = "x".repeat(1000);
        let roots: Vec<_> = (0..40)
            .map(|i| root(&format!("file:///{long}/{i:02}"), None))
            .collect();
        let added = entry(None, &change(1, "w", roots.clone())).unwrap();
        let per_root = roots[0].uri.len();
        let listed = HISTORY_ENTRY_ROOT_BYTES / per_root;
        assert_eq!(added.added.len(), listed);
        assert_eq!(added.added[..], roots[..listed]);
        assert_eq!(added.omitted.added, 40 - listed);
        let before = StoredWorkspaceV1 {
            revision: 1,
            roots: shared(roots),
        };
        let removed = entry(Some(&before), &change(2, "w", Vec::new())).unwrap();
        assert_eq!(
            (removed.removed.len(), removed.omitted.removed),
            (listed, 40 - listed)
        );
        let json = serde_json::to_vec(&removed).unwrap();
        assert!(
            json.len() < HISTORY_ENTRY_ROOT_BYTES + 1024,
            "{}",
            json.len()
        );
    }

    #[test]
    fn the_history_keeps_the_newest_entries_and_drops_the_oldest_first() {
        let mut contents = Contents::default();
        assert_eq!(contents.recorded_from(), 1);
        let total = HISTORY_ENTRIES as u64 + 25;
        for revision in 1..=total {
            let roots = vec![root(&format!("file:///r{revision}"), None)];
            contents.apply(&change(revision, "w", roots));
        }
        assert_eq!(contents.history.len(), HISTORY_ENTRIES);
        assert_eq!(contents.history.front().unwrap().revision, 26);
        assert_eq!(contents.history.back().unwrap().revision, total);
        assert_eq!(contents.recorded_from(), 26);
        let last = contents.history.back().unwrap();
        assert_eq!(last.added, [root(&format!("file:///r{total}"), None)]);
        assert_eq!(
            last.removed,
            [root(&format!("file:///r{}", total - 1), None)]
        );
    }

    #[test]
    fn changes_journaled_without_history_leave_it_starting_after_them() {
        let mut contents = Contents::default();
        for revision in 1..=3 {
            let mut old = change(revision, "w", Vec::new());
            old.origin = None;
            contents.apply(&old);
        }
        assert!(contents.history.is_empty());
        assert_eq!(contents.recorded_from(), 4);
        contents.apply(&change(4, "w", vec![root("file:///a", None)]));
        assert_eq!(contents.recorded_from(), 4);
    }

    #[test]
    fn select_filters_by_workspace_and_revision_newest_first_and_says_whether_more_remain() {
        let mut contents = Contents::default();
        for revision in 1..=10 {
            let workspace = if revision % 2 == 0 { "even" } else { "odd" };
            let roots = vec![root(&format!("file:///r{revision}"), None)];
            contents.apply(&change(revision, workspace, roots));
        }
        let revisions = |(entries, more): (Vec<HistoryEntryV1>, bool)| {
            (entries.iter().map(|e| e.revision).collect::<Vec<_>>(), more)
        };
        let history = &contents.history;
        assert_eq!(
            revisions(select(history, None, None, 3)),
            (vec![10, 9, 8], true)
        );
        assert_eq!(
            revisions(select(history, Some(&ws("odd")), None, 3)),
            (vec![9, 7, 5], true)
        );
        assert_eq!(
            revisions(select(history, Some(&ws("odd")), Some(5), 3)),
            (vec![3, 1], false)
        );
        assert_eq!(
            revisions(select(history, Some(&ws("none")), None, 3)),
            (vec![], false)
        );
    }

    #[test]
    fn a_page_stops_at_its_byte_bound_but_always_carries_one_entry() {
        let long = "y".repeat(4000);
        let mut contents = Contents::default();
        for revision in 1..=200 {
            let roots = vec![root(&format!("file:///{long}/{revision}"), None)];
            contents.apply(&change(revision, "w", roots));
        }
        let (selected, more) = select(&contents.history, None, None, usize::MAX);
        assert!(more, "select takes no more than a page can carry");
        let (entries, more) = page(selected, more);
        assert!(more, "200 entries of 8 KB do not fit in one page");
        let bytes = serde_json::to_vec(&entries).unwrap().len();
        assert!(
            bytes <= LOG_PAGE_BYTES + entries.len() + 1,
            "{bytes} bytes in {} entries",
            entries.len()
        );
        assert_eq!(entries[0].revision, 200);
        let huge = "z".repeat(HISTORY_ENTRY_ROOT_BYTES - 16);
        contents.apply(&change(
            201,
            "w",
            vec![root(&format!("file:///{huge}"), None)],
        ));
        let (one, _) = select(&contents.history, None, None, 1);
        let (entries, _) = page(one, false);
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn a_log_request_copies_about_one_page_of_the_history_not_all_of_it() {
        // The largest history: 1,000 entries listing 16 KiB of roots each.
        let pad = "q".repeat(200);
        let mut contents = Contents::default();
        for revision in 1..=1000 {
            let roots = (0..(HISTORY_ENTRY_ROOT_BYTES / 230) as u64)
                .map(|k| root(&format!("file:///{pad}/{revision}/{k}"), None))
                .collect();
            contents.apply(&change(revision, &format!("w{revision}"), roots));
        }
        let (selected, more) = select(&contents.history, None, None, usize::MAX);
        assert!(more);
        let copied: usize = selected.iter().map(least_json_bytes).sum();
        assert!(
            copied <= LOG_PAGE_BYTES + HISTORY_ENTRY_ROOT_BYTES + 64,
            "a page's answer copied {} entries, {copied} bytes of text",
            selected.len()
        );
        // The page is the one every entry would have made.
        let every: Vec<HistoryEntryV1> = contents.history.iter().rev().cloned().collect();
        assert_eq!(page(selected, true), page(every, false));
    }

    #[test]
    fn sessions_and_the_daemon_are_authors_too_and_reach_the_wire_as_such() {
        let proxy = PeerV1 {
            uid: 1000,
            pid: Some(5150),
            ..PeerV1::default()
        };
        let label = "x".repeat(1000);
        let mut published = change(1, "w", vec![root("file:///host", None)]);
        published.origin = Some(Origin::session(12, &label, proxy.clone()));
        let mut withdrawn = change(2, "w", Vec::new());
        withdrawn.origin = Some(Origin::daemon("session 12 ended"));
        let mut contents = Contents::default();
        contents.apply(&published);
        contents.apply(&withdrawn);
        let (selected, _) = select(&contents.history, None, None, 10);
        let (entries, _) = page(selected, false);
        assert_eq!(
            entries[0].who,
            Who::Daemon {
                reason: "session 12 ended".to_owned()
            }
        );
        assert_eq!(entries[0].removed.len(), 1);
        match &entries[1].who {
            Who::Session { id, label, peer } => {
                assert_eq!(
                    (*id, label.len(), peer.pid),
                    (12, HISTORY_TEXT_BYTES, Some(5150))
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn texts_about_the_author_are_cut_at_a_character_boundary() {
        assert_eq!(bounded_text("rootsctl 0.1.0"), "rootsctl 0.1.0");
        let long = "é".repeat(HISTORY_TEXT_BYTES);
        let cut = bounded_text(&long);
        assert!(cut.len() <= HISTORY_TEXT_BYTES && cut.len() >= HISTORY_TEXT_BYTES - 1);
        assert!(long.starts_with(&cut));
    }
}
