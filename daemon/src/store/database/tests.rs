//! The store's unit tests: the ring of history slots, damage, reopening, rebuilding.

use std::sync::Arc;

use super::*;

const PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

fn ws(name: &str) -> WorkspaceName {
    WorkspaceName::new(name).unwrap()
}

/// A change of workspace `w` to one root, `file:///r<revision>`, made by uid 1000.
fn change(revision: u64) -> Change {
    Change {
        revision,
        workspace: ws("w"),
        state: StoredWorkspaceV1 {
            revision,
            roots: vec![crate::store::model::StoredRootV1 {
                uri: format!("file:///r{revision}").into(),
                name: None,
                by_hand: true,
                published_by: Vec::new(),
            }],
        }
        .into(),
        origin: Some(crate::store::model::Origin::Peer(
            crate::store::model::PeerV1 {
                uid: 1000,
                ..Default::default()
            },
        )),
        time_unix_ms: revision,
    }
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
        roots: vec![crate::store::model::StoredRootV1 {
            uri: "file:///a".into(),
            name: Some("a".into()),
            by_hand: true,
            published_by: Vec::new(),
        }],
    };
    {
        let store = Store::open(dir.path()).unwrap();
        assert!(store.was_fresh());
        let change = Change {
            revision: 3,
            workspace: ws("work"),
            state: contents.clone().into(),
            origin: None,
            time_unix_ms: 0,
        };
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
            .map(|n| crate::store::model::StoredRootV1 {
                uri: format!("file:///{long}/{n}").into(),
                ..root.clone()
            })
            .collect();
        state.roots[0].name = Some(format!("{}", revision % 2).into());
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
