//! The store's unit tests: the ring of history slots, the workspaces' headers and buckets (every
//! way they are written, what a change writes, damage), the migration from schema 1, reopening,
//! rebuilding.

use std::sync::Arc;

use super::*;
use crate::store::model::{StoredPublisherV1, StoredRootV1};

const PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

fn ws(name: &str) -> WorkspaceName {
    WorkspaceName::new(name).unwrap()
}

/// A change of workspace `w` to one root, `file:///r<revision>`, made by uid 1000.
fn change(revision: u64) -> Change {
    Change::recorded(
        revision,
        ws("w"),
        StoredWorkspaceV1 {
            revision,
            roots: vec![Arc::new(crate::store::model::StoredRootV1 {
                uri: format!("file:///r{revision}").into(),
                name: None,
                by_hand: true,
                published_by: Vec::new(),
            })],
        }
        .into(),
        Some(crate::store::model::Origin::Peer(
            crate::store::model::PeerV1 {
                uid: 1000,
                ..Default::default()
            },
        )),
        revision,
    )
}

/// The history keys in the database, as slots.
fn history_slots(store: &Store) -> Vec<u32> {
    store
        .tree()
        .scan_prefix(HISTORY_PREFIX)
        .map(|item| {
            let (key, _) = item.unwrap();
            u32::from_be_bytes(key[HISTORY_PREFIX.len()..].try_into().unwrap())
        })
        .collect()
}

#[test]
fn history_entries_are_stored_with_their_changes_in_a_ring_of_slots() {
    let dir = tempfile::tempdir().unwrap();
    let limit = crate::limits::HISTORY_ENTRIES as u64;
    let mut contents = Contents::default();
    {
        let store = Store::open(dir.path()).unwrap();
        // In batches of seven, as the commit thread hands them over.
        let all: Vec<Change> = (1..=limit + 10).map(change).collect();
        for batch in all.chunks(7) {
            for c in batch {
                contents.apply(c);
            }
            store.apply(batch, &contents).unwrap();
        }
        // Every slot is taken once; the newest ten overwrote the oldest ten.
        assert_eq!(history_slots(&store), (0..limit as u32).collect::<Vec<_>>());
        store.checkpoint().unwrap();
    }
    let store = Store::reopen(dir.path(), PATIENCE).unwrap();
    assert_eq!(store.load().unwrap(), contents);
    let mut fewer = contents.clone();
    fewer.history.truncate(3);
    store.replace_all(&fewer).unwrap();
    assert_eq!(history_slots(&store), [11, 12, 13]);
    assert_eq!(store.load().unwrap(), fewer);
}

#[test]
fn a_damaged_history_entry_is_refused_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut contents = Contents::default();
    contents.apply(&change(1));
    store.apply(&[change(1)], &contents).unwrap();
    store
        .tree()
        .insert(history_key(1), b"{not json".as_slice())
        .unwrap();
    let error = store.load().unwrap_err().to_string();
    assert!(error.contains("corrupt record"), "{error}");
    // An entry filed in another revision's slot is damage too.
    let moved = serde_json::to_vec(&contents.history[0]).unwrap();
    store
        .tree()
        .insert(history_key(1), moved.as_slice())
        .unwrap();
    assert!(store.load().is_ok());
    store.tree().remove(history_key(1)).unwrap();
    store.tree().insert(history_key(2), moved).unwrap();
    let error = store.load().unwrap_err().to_string();
    assert!(error.contains("belongs in another slot"), "{error}");
}

#[test]
fn checkpointed_changes_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let contents = StoredWorkspaceV1 {
        revision: 3,
        roots: vec![Arc::new(crate::store::model::StoredRootV1 {
            uri: "file:///a".into(),
            name: Some("a".into()),
            by_hand: true,
            published_by: Vec::new(),
        })],
    };
    {
        let store = Store::open(dir.path()).unwrap();
        assert!(store.was_fresh());
        let change = Change::recorded(3, ws("work"), contents.clone().into(), None, 0);
        let mut after = Contents::default();
        after.apply(&change);
        store.apply(&[change], &after).unwrap();
        store.checkpoint().unwrap();
    }
    let store = Store::reopen(dir.path(), PATIENCE).unwrap();
    assert!(!store.was_fresh());
    let loaded = store.load().unwrap();
    assert_eq!(loaded.revision, 3);
    assert_eq!(*loaded.workspaces[&ws("work")], contents);
}

#[test]
fn replace_all_leaves_exactly_the_given_contents() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let one = |revision| StoredWorkspaceV1 {
        revision,
        roots: Vec::new(),
    };
    let mut before = Contents::default();
    before.apply(&change(1));
    store.apply(&[change(1)], &before).unwrap();
    let mut contents = Contents {
        revision: 5,
        ..Contents::default()
    };
    contents.workspaces.insert(ws("new"), one(5).into());
    store.replace_all(&contents).unwrap();
    assert_eq!(store.load().unwrap(), contents);
}

#[test]
fn a_rebuilt_database_holds_the_same_and_takes_less_room() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let store = Store::open(&db).unwrap();
    let mut contents = Contents::default();
    // A workspace of 100 roots of 1 kB, rewritten whole by every change, as the journal's
    // records and the database's values are.
    let long = "r".repeat(1000);
    for revision in 1..=300 {
        let mut one = change(revision);
        let state = Arc::make_mut(&mut one.state);
        let root = state.roots[0].clone();
        state.roots = (0..100)
            .map(|n| {
                Arc::new(crate::store::model::StoredRootV1 {
                    uri: format!("file:///{long}/{n}").into(),
                    ..crate::store::model::StoredRootV1::clone(&root)
                })
            })
            .collect();
        Arc::make_mut(&mut state.roots[0]).name = Some(format!("{}", revision % 2).into());
        contents.apply(&one);
        store.apply(&[one], &contents).unwrap();
        if revision % 50 == 0 {
            store.checkpoint().unwrap();
        }
    }
    store.checkpoint().unwrap();
    let grown = store.disk_bytes();
    let store = store.rebuild(&contents).unwrap();
    assert_eq!(store.load().unwrap(), contents);
    assert!(
        store.disk_bytes() < grown,
        "{} < {grown}",
        store.disk_bytes()
    );
    assert!(!compacting_dir(&db).exists());
}

#[test]
fn a_second_open_of_the_same_directory_fails() {
    let dir = tempfile::tempdir().unwrap();
    let _first = Store::open(dir.path()).unwrap();
    assert!(matches!(
        Store::open(dir.path()),
        Err(StoreError::Open { .. })
    ));
}

#[test]
fn the_lock_probe_sees_an_open_store_and_leaves_it_working() {
    let dir = tempfile::tempdir().unwrap();
    assert!(!is_locked(dir.path()), "no database yet, so no lock");
    let store = Store::open(dir.path()).unwrap();
    assert!(is_locked(dir.path()));
    assert!(
        is_locked(dir.path()),
        "the first probe let go of its own lock"
    );
    store.tree().insert(b"k", b"v").unwrap();
    store.tree().flush().unwrap();
}

#[test]
fn an_unknown_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        store
            .tree()
            .insert(SCHEMA_KEY, &9u32.to_be_bytes())
            .unwrap();
        store.tree().flush().unwrap();
    }
    let reopened = Store::reopen(dir.path(), PATIENCE);
    assert!(
        matches!(reopened, Err(StoreError::UnknownSchema { found: 9 })),
        "{:?}",
        reopened.err()
    );
}

#[test]
fn a_panic_inside_sled_is_an_error() {
    let result: Result<(), StoreError> = guarded("reading the test", || {
        panic!("tried to serialize Uninitialized");
    });
    match result {
        Err(StoreError::Panicked { during, message }) => {
            assert_eq!(during, "reading the test");
            assert_eq!(message, "tried to serialize Uninitialized");
        }
        other => panic!("a panic must become StoreError::Panicked, got {other:?}"),
    }
    let owned: Result<(), StoreError> = guarded("reading", || panic!("{}", String::from("owned")));
    assert!(matches!(owned, Err(StoreError::Panicked { message, .. }) if message == "owned"));
    assert!(guarded("reading", || Ok(7)).is_ok_and(|n| n == 7));
}

/// A deterministic stream of numbers for the tests' changes (xorshift64): the same every run.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// The next state of `previous` after one random edit: adds, renames, removals, moves, inserts
/// mid-list, publishing, and emptying, as the registry's changes make them.
fn edited(previous: &StoredWorkspaceV1, revision: u64, dice: &mut Dice) -> StoredWorkspaceV1 {
    let mut roots = previous.roots.clone();
    let fresh = |n: u64| Arc::new(StoredRootV1::by_hand(&format!("file:///e/{n}"), None));
    match dice.below(10) {
        0..=2 => roots.push(fresh(revision)),
        3 | 4 if !roots.is_empty() => {
            let k = dice.below(roots.len());
            Arc::make_mut(&mut roots[k]).name = Some(format!("n{revision}").into());
        }
        5 if !roots.is_empty() => {
            roots.remove(dice.below(roots.len()));
        }
        6 if !roots.is_empty() => {
            let moved = roots.remove(dice.below(roots.len()));
            roots.push(moved);
        }
        7 => {
            let at = dice.below(roots.len() + 1);
            roots.insert(at, fresh(revision));
        }
        8 if !roots.is_empty() => {
            let k = dice.below(roots.len());
            Arc::make_mut(&mut roots[k])
                .published_by
                .push(StoredPublisherV1 {
                    session: revision,
                    label: "s".into(),
                    pid: 7,
                });
            let root = Arc::make_mut(&mut roots[k]);
            root.by_hand = !root.by_hand;
        }
        9 if dice.below(8) == 0 => roots.clear(),
        _ => roots.push(fresh(revision)),
    }
    StoredWorkspaceV1 { revision, roots }
}

/// A change of workspace `workspace` to `state`, made by uid 1000.
fn change_to(workspace: &str, state: StoredWorkspaceV1) -> Change {
    Change::recorded(
        state.revision,
        ws(workspace),
        state.into(),
        Some(crate::store::model::Origin::Peer(
            crate::store::model::PeerV1 {
                uid: 1000,
                ..Default::default()
            },
        )),
        1,
    )
}

/// `count` random changes to three workspaces, applied to `contents` and to `store` in bursts
/// of one to five, as the commit thread hands them over.
fn random_bursts(store: &Store, contents: &mut Contents, count: u64, dice: &mut Dice) {
    let mut burst = Vec::new();
    for _ in 0..count {
        let name = ["a", "b", "c"][dice.below(3)];
        let revision = contents.revision + 1;
        let previous = contents
            .workspaces
            .get(&ws(name))
            .cloned()
            .unwrap_or_default();
        let change = change_to(name, edited(&previous, revision, dice));
        contents.apply(&change);
        burst.push(change);
        if dice.below(3) == 0 {
            store.apply(&burst, contents).unwrap();
            burst.clear();
        }
    }
    store.apply(&burst, contents).unwrap();
}

/// The keys `apply` would write for `changes`, leaving the store as it was: the seam for
/// asserting what a change writes.
fn planned(store: &Store, changes: &[Change], after: &Contents) -> Writes {
    let mut mirror = store.mirror();
    let behind = changes.iter().cloned().collect();
    let writes = store.writes_of(&mut mirror, &behind, after).unwrap();
    store.write_batch(&mut mirror, writes.clone()).unwrap();
    writes
}

fn keys_under<'a>(writes: &'a Writes, prefix: &[u8]) -> Vec<&'a (Vec<u8>, Vec<u8>)> {
    writes
        .iter()
        .filter(|(key, _)| key.starts_with(prefix))
        .collect()
}

#[test]
fn bursts_of_adds_renames_removals_and_moves_load_back_exactly_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
    let mut contents = Contents::default();
    {
        let store = Store::open(dir.path()).unwrap();
        for _ in 0..6 {
            random_bursts(&store, &mut contents, 100, &mut dice);
            // A load rebuilds the mirror from the database; the next bursts go on from it.
            assert_eq!(store.load().unwrap(), contents);
        }
        store.checkpoint().unwrap();
    }
    let store = Store::reopen(dir.path(), PATIENCE).unwrap();
    // No load since opening: the first apply reads the mirror from the database itself.
    random_bursts(&store, &mut contents, 100, &mut dice);
    assert_eq!(store.load().unwrap(), contents);
    assert!(contents.root_count() > 20, "{}", contents.describe());
    // A rewrite numbers the roots afresh and leaves no bucket behind.
    store.replace_all(&contents).unwrap();
    assert_eq!(store.load().unwrap(), contents);
    random_bursts(&store, &mut contents, 100, &mut dice);
    assert_eq!(store.load().unwrap(), contents);
    let store = store.rebuild(&contents).unwrap();
    random_bursts(&store, &mut contents, 100, &mut dice);
    assert_eq!(store.load().unwrap(), contents);
}

#[test]
fn replace_all_removes_the_buckets_of_roots_it_does_not_hold() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut contents = Contents::default();
    let roots = (0..50)
        .map(|n| Arc::new(StoredRootV1::by_hand(&format!("file:///r/{n}"), None)))
        .collect();
    let change = change_to("w", StoredWorkspaceV1 { revision: 1, roots });
    contents.apply(&change);
    store.apply(&[change], &contents).unwrap();
    let mut fewer = contents.clone();
    Arc::make_mut(fewer.workspaces.get_mut(&ws("w")).unwrap())
        .roots
        .truncate(1);
    store.replace_all(&fewer).unwrap();
    assert_eq!(store.tree().scan_prefix(BUCKET_PREFIX).count(), 1);
    assert_eq!(store.load().unwrap(), fewer);
}

#[test]
fn a_rename_writes_one_bucket_and_the_header_whatever_the_workspaces_size() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut contents = Contents::default();
    let mut bucket_bytes = Vec::new();
    for (name, size) in [("small", 10), ("large", 2_000)] {
        let roots = (0..size)
            .map(|n| {
                Arc::new(StoredRootV1::by_hand(
                    &format!("file:///home/u/{name}/{n:05}"),
                    None,
                ))
            })
            .collect();
        let filled = change_to(
            name,
            StoredWorkspaceV1 {
                revision: contents.revision + 1,
                roots,
            },
        );
        contents.apply(&filled);
        store.apply(&[filled], &contents).unwrap();
        // A burst of three renames of the first root writes its bucket once.
        let mut burst = Vec::new();
        for k in 0..3 {
            let mut state = StoredWorkspaceV1::clone(&contents.workspaces[&ws(name)]);
            state.revision = contents.revision + 1;
            Arc::make_mut(&mut state.roots[0]).name = Some(format!("renamed {k}").into());
            let rename = change_to(name, state);
            contents.apply(&rename);
            burst.push(rename);
        }
        let writes = planned(&store, &burst, &contents);
        let buckets = keys_under(&writes, BUCKET_PREFIX);
        let headers = keys_under(&writes, WORKSPACE_PREFIX);
        assert_eq!(buckets.len(), 1, "{name}: {:?}", buckets);
        assert_eq!(headers.len(), 1, "{name}");
        let first = &contents.workspaces[&ws(name)].roots[0];
        assert_eq!(
            buckets[0].0,
            layout::bucket_key(&ws(name), layout::bucket_of(&first.uri))
        );
        bucket_bytes.push(buckets[0].1.len() + headers[0].1.len());
        // The rest is the revision and the three history entries.
        assert_eq!(writes.len(), 2 + 1 + 3, "{name}");
    }
    assert_eq!(store.load().unwrap(), contents);
    // At 2,000 roots the bucket holds a few roots, not the workspace's 2,000.
    assert!(
        bucket_bytes[1] < 4 * bucket_bytes[0],
        "bytes at 10 roots and at 2,000: {bucket_bytes:?}"
    );
    // Removing the last root of a bucket writes it as an empty array, leaving its key.
    let keys = store.tree().scan_prefix(BUCKET_PREFIX).count();
    let mut state = StoredWorkspaceV1::clone(&contents.workspaces[&ws("small")]);
    state.revision = contents.revision + 1;
    state.roots.clear();
    let emptied = change_to("small", state);
    contents.apply(&emptied);
    let writes = planned(&store, &[emptied], &contents);
    assert!(
        keys_under(&writes, BUCKET_PREFIX)
            .iter()
            .all(|(_, v)| v == b"[]")
    );
    assert_eq!(store.tree().scan_prefix(BUCKET_PREFIX).count(), keys);
    assert_eq!(store.load().unwrap(), contents);
}

#[test]
fn a_bucket_lands_where_the_hash_says_in_every_build() {
    // FNV-1a 64 of the bytes, modulo 4,096: fixed numbers, so that a change of hash (which
    // would misfile every stored root) fails here rather than as damage at a user's start.
    assert_eq!(layout::BUCKETS, 4096);
    assert_eq!(
        layout::bucket_of(""),
        (0xcbf2_9ce4_8422_2325u64 % 4096) as u16
    );
    assert_eq!(
        layout::bucket_of("a"),
        (0xaf63_dc4c_8601_ec8cu64 % 4096) as u16
    );
    assert_eq!(
        layout::bucket_of("foobar"),
        (0x8594_4171_f739_67e8u64 % 4096) as u16
    );
    let key = layout::bucket_key(&ws("w-1"), 0x0102);
    assert_eq!(key, b"r/w-1/\x01\x02");
    assert_eq!(layout::parse_bucket_key(&key), Some(("w-1", 0x0102)));
    assert_eq!(
        layout::parse_bucket_key(b"r/w/\x10\x00"),
        None,
        "past the last bucket"
    );
    assert_eq!(layout::parse_bucket_key(b"r/w\x01\x02"), None);
}

/// A store of one workspace `w` of three roots, checkpointed.
fn three_roots(dir: &Path) -> (Store, Contents) {
    let store = Store::open(dir).unwrap();
    let mut contents = Contents::default();
    let roots = ["file:///a", "file:///b", "file:///c"]
        .iter()
        .map(|uri| Arc::new(StoredRootV1::by_hand(uri, None)))
        .collect();
    let change = change_to("w", StoredWorkspaceV1 { revision: 1, roots });
    contents.apply(&change);
    store.apply(&[change], &contents).unwrap();
    (store, contents)
}

/// The bucket key of root `uri` of workspace `w`.
fn bucket_of_w(uri: &str) -> Vec<u8> {
    layout::bucket_key(&ws("w"), layout::bucket_of(uri))
}

/// Loads, expecting damage named at `key` with `reason` in the message.
fn refused(store: &Store, key: &str, reason: &str) {
    match store.load() {
        Err(StoreError::Corrupt {
            key: found,
            reason: why,
        }) => {
            assert_eq!(found, key, "{why}");
            assert!(why.contains(reason), "{why:?} should say {reason:?}");
        }
        other => panic!("expected damage at {key}, got {other:?}"),
    }
}

#[test]
fn a_damaged_header_or_bucket_is_refused_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let (store, contents) = three_roots(dir.path());
    let tree = store.tree();
    let a_key = bucket_of_w("file:///a");
    let others = [bucket_of_w("file:///b"), bucket_of_w("file:///c")];
    assert!(
        !others.contains(&a_key),
        "the tests below need file:///a alone in its bucket"
    );
    let a_name = layout::describe_key(&a_key);
    let a_bucket = tree.get(&a_key).unwrap().unwrap();
    let header = tree.get(b"w/w").unwrap().unwrap();
    let restore = || {
        tree.insert(&a_key, a_bucket.clone()).unwrap();
        tree.insert(b"w/w", header.clone()).unwrap();
        assert_eq!(store.load().unwrap(), contents);
    };

    tree.insert(&a_key, b"[[0,{\"uri\"".as_slice()).unwrap();
    refused(&store, &a_name, "does not parse");
    restore();
    tree.insert(b"w/w", b"{\"revision\":1}".as_slice()).unwrap();
    refused(&store, "w/w", "header does not parse");
    restore();
    // A root lost: its bucket emptied.
    tree.insert(&a_key, b"[]".as_slice()).unwrap();
    refused(
        &store,
        "w/w",
        "counts 3 roots, but the workspace's buckets hold 2",
    );
    restore();
    // A root misfiled in another bucket (and so one bucket short).
    let elsewhere = layout::bucket_key(
        &ws("w"),
        (layout::bucket_of("file:///a") + 1) % layout::BUCKETS,
    );
    tree.insert(&elsewhere, a_bucket.clone()).unwrap();
    refused(
        &store,
        &layout::describe_key(&elsewhere),
        "belongs in bucket",
    );
    tree.insert(&elsewhere, b"[]".as_slice()).unwrap();
    restore();
    // One root twice, and two roots with one number.
    tree.insert(
        &a_key,
        b"[[0,{\"uri\":\"file:///a\"}],[3,{\"uri\":\"file:///a\"}]]".as_slice(),
    )
    .unwrap();
    tree.insert(
        b"w/w",
        b"{\"revision\":1,\"roots\":4,\"next\":4}".as_slice(),
    )
    .unwrap();
    refused(&store, "w/w", "root file:///a is stored twice");
    restore();
    let b_bucket = tree.get(bucket_of_w("file:///b")).unwrap().unwrap();
    let b_seq = String::from_utf8_lossy(&b_bucket);
    assert!(b_seq.starts_with("[[1,"), "{b_seq}");
    tree.insert(&a_key, b"[[1,{\"uri\":\"file:///a\"}]]".as_slice())
        .unwrap();
    refused(&store, "w/w", "the same sequence number 1");
    restore();
    // A number the header never gave out.
    tree.insert(&a_key, b"[[3,{\"uri\":\"file:///a\"}]]".as_slice())
        .unwrap();
    refused(
        &store,
        &a_name,
        "sequence number 3, but the header gave out only the numbers below 3",
    );
    restore();
    // A bucket of a workspace without a header, and a key no bucket has.
    let stray = layout::bucket_key(&ws("gone"), layout::bucket_of("file:///a"));
    tree.insert(&stray, a_bucket.clone()).unwrap();
    refused(
        &store,
        &layout::describe_key(&stray),
        "which has no header w/gone",
    );
    tree.remove(&stray).unwrap();
    tree.insert(b"r/w/x", b"[]".as_slice()).unwrap();
    refused(&store, "r/w/x", "a bucket's key is");
    tree.remove(b"r/w/x").unwrap();
    restore();
    // A store whose load was refused is not applied to from a guess either.
    tree.insert(&a_key, b"[]".as_slice()).unwrap();
    drop(store);
    let store = Store::reopen(dir.path(), PATIENCE).unwrap();
    let mut after = contents.clone();
    let change = change_to(
        "w",
        StoredWorkspaceV1 {
            revision: 2,
            roots: Vec::new(),
        },
    );
    after.apply(&change);
    let error = store.apply(&[change], &after).unwrap_err();
    assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
}

/// Writes a schema-1 database into `dir` holding `contents`, byte for byte as the rootsd of
/// schema 1 wrote it: each workspace one JSON `StoredWorkspaceV1` under `w/<workspace>`.
fn write_schema_1(dir: &Path, contents: &Contents, extra: &[(&[u8], &[u8])]) {
    with_raw_tree(dir, |tree| {
        tree.insert(SCHEMA_KEY, &1u32.to_be_bytes()).unwrap();
        tree.insert(REVISION_KEY, &contents.revision.to_be_bytes())
            .unwrap();
        tree.insert(JOURNALED_KEY, b"".as_slice()).unwrap();
        for (name, workspace) in &contents.workspaces {
            let key = [b"w/".as_slice(), name.as_str().as_bytes()].concat();
            tree.insert(key, serde_json::to_vec(workspace).unwrap())
                .unwrap();
        }
        for entry in &contents.history {
            tree.insert(
                history_key(entry.revision),
                serde_json::to_vec(entry).unwrap(),
            )
            .unwrap();
        }
        for (key, value) in extra {
            tree.insert(key, *value).unwrap();
        }
    });
}

fn schema_of(store: &Store) -> u32 {
    let bytes = store.tree().get(SCHEMA_KEY).unwrap().unwrap();
    u32::from_be_bytes(bytes.as_ref().try_into().unwrap())
}

#[test]
fn a_schema_1_database_is_migrated_on_open_and_loads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let mut dice = Dice(7);
    let mut contents = Contents::default();
    for _ in 0..300 {
        let name = ["a", "b", "c"][dice.below(3)];
        let previous = contents
            .workspaces
            .get(&ws(name))
            .cloned()
            .unwrap_or_default();
        let change = change_to(name, edited(&previous, contents.revision + 1, &mut dice));
        contents.apply(&change);
    }
    contents.workspaces.insert(
        ws("empty"),
        StoredWorkspaceV1 {
            revision: 3,
            roots: Vec::new(),
        }
        .into(),
    );
    write_schema_1(dir.path(), &contents, &[]);
    {
        let store = Store::open(dir.path()).unwrap();
        assert!(!store.was_fresh());
        assert_eq!(schema_of(&store), 2);
        assert_eq!(store.load().unwrap(), contents);
        assert!(store.journaled().unwrap());
        // Every `w/` value is a header now.
        for item in store.tree().scan_prefix(WORKSPACE_PREFIX) {
            let (_, value) = item.unwrap();
            serde_json::from_slice::<HeaderV2>(&value).unwrap();
        }
        // And the migrated store takes changes like any other.
        random_bursts(&store, &mut contents, 50, &mut dice);
        store.checkpoint().unwrap();
    }
    // The migration was checkpointed with the rest: reopening finds schema 2 and migrates
    // nothing again.
    let store = Store::reopen(dir.path(), PATIENCE).unwrap();
    assert_eq!(schema_of(&store), 2);
    assert_eq!(store.load().unwrap(), contents);
}

#[test]
fn a_damaged_schema_1_record_is_refused_and_the_database_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let mut contents = Contents::default();
    contents.apply(&change(1));
    write_schema_1(dir.path(), &contents, &[(b"w/broken", b"{not json")]);
    match Store::open(dir.path()) {
        Err(StoreError::Corrupt { key, .. }) => assert_eq!(key, "w/broken"),
        other => panic!("expected damage at w/broken, got {:?}", other.err()),
    }
    wait_until_released(dir.path());
    with_raw_tree(dir.path(), |tree| {
        assert_eq!(
            tree.get(SCHEMA_KEY).unwrap().unwrap().as_ref(),
            1u32.to_be_bytes()
        );
        assert!(tree.scan_prefix(BUCKET_PREFIX).next().is_none());
        // A workspace of schema 1 holding one URI twice cannot be split into buckets faithfully.
        let twice = br#"{"revision":1,"roots":[{"uri":"file:///a"},{"uri":"file:///a"}]}"#;
        tree.insert(b"w/broken", twice.as_slice()).unwrap();
    });
    match Store::open(dir.path()) {
        Err(StoreError::Corrupt { key, reason }) => {
            assert_eq!(key, "w/broken");
            assert!(reason.contains("stored twice"), "{reason}");
        }
        other => panic!("expected damage at w/broken, got {:?}", other.err()),
    }
}

#[test]
fn a_panic_while_the_mirror_is_held_drops_it_and_the_next_apply_reads_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut contents) = three_roots(dir.path());
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        let _held = store.mirror();
        panic!("a bug while the mirror is moved on");
    }));
    assert!(panicked.is_err());
    assert!(store.mirror.is_poisoned());
    assert!(
        store.mirror().is_none(),
        "a mirror a panic may have cut short is not trusted"
    );
    assert!(!store.mirror.is_poisoned());
    let mut state = StoredWorkspaceV1::clone(&contents.workspaces[&ws("w")]);
    state.revision = 2;
    Arc::make_mut(&mut state.roots[1]).name = Some("renamed".into());
    let rename = change_to("w", state);
    contents.apply(&rename);
    store.apply(&[rename], &contents).unwrap();
    assert_eq!(store.load().unwrap(), contents);
}
