//! The journal's unit tests: records, replay, damage, compaction.

use super::*;
use crate::store::model::StoredRootV1;

fn ws(name: &str) -> WorkspaceName {
    WorkspaceName::new(name).unwrap()
}

fn change(revision: u64, workspace: &str, uris: &[&str]) -> Change {
    Change::recorded(
        revision,
        ws(workspace),
        StoredWorkspaceV1 {
            revision,
            roots: uris
                .iter()
                .map(|u| {
                    Arc::new(StoredRootV1 {
                        uri: (*u).into(),
                        name: None,
                        by_hand: true,
                        published_by: Vec::new(),
                    })
                })
                .collect(),
        }
        .into(),
        Some(Origin::Peer(crate::store::model::PeerV1 {
            uid: 1000,
            user: Some("ana".into()),
            pid: Some(4242),
            process: Some("rootsctl".into()),
            client: Some("rootsctl 0.1.0".into()),
        })),
        1_796_000_000_000 + revision,
    )
}

#[test]
fn who_made_a_change_and_when_round_trip_and_replay_rebuilds_the_history() {
    let first = change(1, "a", &["file:///x"]);
    let second = change(2, "a", &["file:///y"]);
    let bytes = journal(&[
        base(),
        Entry::Change(first.clone()),
        Entry::Change(second.clone()),
    ]);
    let replay = replay(&bytes);
    assert_eq!(replay.changes(), [first, second]);
    let contents = replay.contents();
    let revisions: Vec<u64> = contents.history.iter().map(|e| e.revision).collect();
    assert_eq!(revisions, [1, 2]);
    assert_eq!(&*contents.history[1].removed[0].uri, "file:///x");
    // A snapshot carries the history, so compaction keeps it.
    let compacted = journal(&[Entry::Snapshot(contents.clone())]);
    assert_eq!(super::replay(&compacted).contents(), contents);
}

#[test]
fn records_written_before_the_history_existed_still_read_and_make_no_entries() {
    // Lines as a rootsd without history wrote them.
    let records = [
        r#"{"kind":"snapshot","revision":0,"workspaces":{}}"#,
        r#"{"kind":"change","revision":1,"workspace":"a","state":{"revision":1,"roots":[{"uri":"file:///x"}]}}"#,
        r#"{"kind":"checkpoint","revision":1}"#,
    ];
    let bytes: Vec<u8> = records
        .iter()
        .flat_map(|json| format!("{:08x} {json}\n", crc32fast::hash(json.as_bytes())).into_bytes())
        .collect();
    let replay = replay(&bytes);
    assert_eq!(replay.damage, None);
    assert_eq!(replay.changes()[0].origin, None);
    let contents = replay.contents();
    assert_eq!(contents.root_count(), 1);
    assert!(contents.history.is_empty());
    assert_eq!(contents.recorded_from(), 2);
    // And what this rootsd writes for a change without an origin is what that one wrote.
    let line = encode(&Entry::Change(replay.changes()[0].clone()));
    assert_eq!(&line[9..line.len() - 1], records[1].as_bytes());
}

#[test]
fn compaction_is_due_when_the_records_after_a_large_snapshot_pass_twice_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let mut contents = Contents::default();
    let long = "z".repeat(8000);
    for revision in 1..=200 {
        contents.apply(&change(
            revision,
            "a",
            &[&format!("file:///{long}/{revision}")],
        ));
    }
    let mut journal = Journal::create(&path, &contents, contents.revision).unwrap();
    assert!(journal.len() > COMPACT_AFTER, "the snapshot alone is large");
    assert!(!journal.wants_compaction());
    let mut revision = contents.revision;
    while !journal.wants_compaction() {
        revision += 1;
        journal
            .append(&Entry::Change(change(
                revision,
                "a",
                &[&format!("file:///{long}")],
            )))
            .unwrap();
    }
    let snapshot = encode(&Entry::Snapshot(contents.clone())).len() as u64;
    let grown = journal.len() - snapshot;
    let threshold = COMPACT_AFTER.max(2 * snapshot);
    assert!(
        threshold > COMPACT_AFTER,
        "twice a large snapshot is the threshold"
    );
    assert!(grown > threshold && grown < threshold + 20_000, "{grown}");
    let mut reopened = Journal::open(&path, &read(&path).unwrap().unwrap()).unwrap();
    assert!(reopened.wants_compaction());

    // Compacting with changes in flight keeps them after the snapshot, not yet counted durable.
    let tail = [change(contents.revision + 1, "a", &["file:///in-flight"])];
    let durable = reopened.compact(&contents, &tail).unwrap();
    assert_eq!(
        reopened.len(),
        durable + encode(&Entry::Change(tail[0].clone())).len() as u64
    );
    let replay = read(&path).unwrap().unwrap();
    assert_eq!(replay.damage, None);
    assert_eq!(replay.base, contents);
    assert_eq!(replay.changes(), tail);
    assert!(!reopened.wants_compaction());
}

fn journal(entries: &[Entry]) -> Vec<u8> {
    entries.iter().flat_map(encode).collect()
}

fn base() -> Entry {
    Entry::Snapshot(Contents::default())
}

#[test]
fn records_round_trip_and_replay_in_order() {
    let bytes = journal(&[
        base(),
        Entry::Change(change(1, "a", &["file:///x"])),
        Entry::Change(change(2, "b", &["file:///y"])),
        Entry::Checkpoint(2),
        Entry::Change(change(3, "a", &[])),
    ]);
    let replay = replay(&bytes);
    assert_eq!(replay.damage, None);
    assert_eq!(replay.revision(), 3);
    assert_eq!(replay.checkpoint, 2);
    assert_eq!(replay.valid_len, bytes.len() as u64);
    assert_eq!(replay.contents().root_count(), 1);
    assert_eq!(replay.at(2).root_count(), 2);
    assert_eq!(replay.at(1).workspaces.len(), 1);
}

#[test]
fn records_from_before_origins_are_roots_added_by_hand_and_origins_round_trip() {
    let old = br#"{"kind":"change","revision":1,"workspace":"a","state":{"revision":1,"roots":[{"uri":"file:///x","name":"x"}]}}"#;
    let mut bytes = encode(&base());
    bytes.extend_from_slice(format!("{:08x} ", crc32fast::hash(old)).as_bytes());
    bytes.extend_from_slice(old);
    bytes.push(b'\n');
    let replay = replay(&bytes);
    assert_eq!(replay.damage, None);
    let change = &replay.changes()[0];
    assert_eq!(
        change.origin, None,
        "no origin: a record of a rootsd that kept no history"
    );
    assert!(change.state.roots[0].by_hand && change.state.roots[0].published_by.is_empty());
    // Such a root is written as it was read: the new fields are left out when they say
    // what an old record meant.
    assert!(encode(&Entry::Change(change.clone())).ends_with(&[old.as_slice(), b"\n"].concat()));

    let mut published = change.clone();
    published.revision = 2;
    let state = Arc::make_mut(&mut published.state);
    let root = Arc::make_mut(&mut state.roots[0]);
    root.by_hand = false;
    root.published_by
        .push(crate::store::model::StoredPublisherV1 {
            session: 3,
            label: "code".into(),
            pid: 42,
        });
    published.origin = Some(crate::store::model::Origin::session(
        3,
        "code",
        crate::store::model::PeerV1 {
            uid: 1000,
            pid: Some(42),
            ..Default::default()
        },
    ));
    bytes.extend_from_slice(&encode(&Entry::Change(published.clone())));
    assert_eq!(super::replay(&bytes).changes()[1], published);
}

#[test]
fn an_unfinished_last_record_is_dropped_not_damage() {
    let whole = journal(&[base(), Entry::Change(change(1, "a", &["file:///x"]))]);
    let mut bytes = whole.clone();
    let next = encode(&Entry::Change(change(2, "a", &["file:///z"])));
    bytes.extend_from_slice(&next[..next.len() - 5]);
    let replay = replay(&bytes);
    assert_eq!(replay.damage, None);
    assert_eq!(replay.revision(), 1);
    assert_eq!(replay.valid_len, whole.len() as u64);
    assert_eq!(replay.torn, (next.len() - 5) as u64);
}

#[test]
fn zeros_or_stray_bytes_after_the_last_whole_record_are_damage_not_a_torn_write() {
    let whole = journal(&[
        base(),
        Entry::Change(change(1, "a", &["file:///x"])),
        Entry::Change(change(2, "a", &["file:///x", "file:///y"])),
    ]);
    let start = line_ends(&whole)[1] + 1;
    // The record of revision 2 zero-filled (a file system's damage over a synced record), or
    // overwritten with bytes that do not start a record, up to the end of the file.
    let mut zeroed = whole.clone();
    zeroed[start..].fill(0);
    let mut stray = whole.clone();
    stray[start..].fill(b'x');
    for (what, bytes) in [("zeros", zeroed), ("stray bytes", stray)] {
        let replay = replay(&bytes);
        let damage = replay.damage.as_ref().expect(what);
        assert_eq!(damage.line, 3, "{what}");
        assert_eq!(damage.offset, start as u64, "{what}");
        let len = whole.len() - start;
        assert!(
            damage.reason.contains(&format!("{len}")),
            "{what}: {damage}"
        );
        assert_eq!(replay.revision(), 1, "{what}");
        assert_eq!(replay.torn, 0, "{what}");
    }
    // The start of a record, however short, is still a torn write.
    for cut in 1..20 {
        let replay = replay(&whole[..start + cut]);
        assert_eq!(replay.damage, None, "cut {cut} bytes into the record");
        assert_eq!(replay.torn, cut as u64);
    }
}

#[test]
fn a_flipped_byte_anywhere_in_a_whole_record_is_damage() {
    let bytes = journal(&[
        base(),
        Entry::Change(change(1, "a", &["file:///x"])),
        Entry::Change(change(2, "a", &["file:///x", "file:///y"])),
    ]);
    let first_line = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    for at in first_line..bytes.len() - 1 {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x01;
        if damaged[at] == b'\n' {
            continue;
        }
        let replay = replay(&damaged);
        assert!(replay.damage.is_some(), "flip at {at} went unnoticed");
        assert!(replay.revision() < 2, "flip at {at}: {replay:?}");
    }
}

#[test]
fn records_that_check_out_after_a_damaged_one_are_kept_for_recovery() {
    let bytes = journal(&[
        base(),
        Entry::Change(change(1, "a", &["file:///x"])),
        Entry::Change(change(2, "a", &["file:///x", "file:///y"])),
        Entry::Change(change(3, "b", &["file:///z"])),
        Entry::Checkpoint(3),
        Entry::Change(change(4, "a", &[])),
    ]);
    let lines = line_ends(&bytes);
    // A bit flipped inside the record of revision 2 (the third line).
    let mut damaged = bytes.clone();
    damaged[lines[1] + 20] ^= 0x04;
    let replay = replay(&damaged);
    assert_eq!(replay.damage.as_ref().map(|d| d.line), Some(3));
    assert_eq!(
        replay.revision(),
        1,
        "the sound prefix ends before the damage"
    );
    let kept: Vec<u64> = replay.after_damage.iter().map(Logged::revision).collect();
    assert_eq!(kept, [3, 4], "every later change that checks out");
    assert!(replay.more_damage.is_empty());
}

#[test]
fn an_empty_journal_or_one_without_a_whole_record_is_damage() {
    assert!(replay(b"").damage.is_some());
    let first = encode(&base());
    assert!(replay(&first[..first.len() - 1]).damage.is_some());
}

#[test]
fn gaps_second_snapshots_and_a_missing_snapshot_are_damage() {
    for entries in [
        vec![base(), Entry::Change(change(2, "a", &[]))],
        vec![base(), base()],
        vec![Entry::Change(change(1, "a", &[]))],
        vec![base(), Entry::Checkpoint(4)],
    ] {
        let replay = replay(&journal(&entries));
        assert!(replay.damage.is_some(), "{entries:?}");
    }
}

#[test]
fn create_then_append_then_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let mut journal = Journal::create(&path, &Contents::default(), 0).unwrap();
    journal
        .append(&Entry::Change(change(1, "a", &["file:///x"])))
        .unwrap();
    journal.sync().unwrap();
    let len = journal.len();
    let replay = read(&path).unwrap().unwrap();
    assert_eq!(replay.revision(), 1);
    assert_eq!(replay.valid_len, len);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    journal.append(&Entry::Checkpoint(1)).unwrap();
    journal.truncate(len).unwrap();
    assert_eq!(read(&path).unwrap().unwrap().valid_len, len);
}

fn root(uri: &str, name: Option<&str>) -> StoredRootV1 {
    StoredRootV1::by_hand(uri, name)
}

/// A run of changes to two workspaces: adds, a rename, a root adopted from a session with
/// awkward characters in its fields, removals, a reorder, a workspace emptied.
fn history_of_changes() -> Vec<Change> {
    let states: Vec<(&str, Vec<StoredRootV1>)> = vec![
        ("a", vec![root("file:///x", Some("x"))]),
        (
            "a",
            vec![root("file:///x", Some("x")), root("file:///y", None)],
        ),
        (
            "b",
            vec![root("file:///z", Some("z \"quoted\" \\ \u{1}\n"))],
        ),
        (
            "a",
            vec![root("file:///x", Some("ex")), root("file:///y", None)],
        ),
        (
            "a",
            vec![
                root("file:///x", Some("ex")),
                StoredRootV1 {
                    by_hand: false,
                    published_by: vec![crate::store::model::StoredPublisherV1 {
                        session: 7,
                        label: "é \t".to_owned(),
                        pid: 99,
                    }],
                    ..root("file:///y", None)
                },
                root("file:///w", Some("w")),
            ],
        ),
        (
            "a",
            vec![root("file:///w", Some("w")), root("file:///x", Some("ex"))],
        ),
        ("b", vec![]),
        (
            "a",
            vec![root("file:///v", None), root("file:///x", Some("ex"))],
        ),
    ];
    states
        .into_iter()
        .enumerate()
        .map(|(k, (workspace, roots))| {
            let mut change = change(k as u64 + 1, workspace, &[]);
            Arc::make_mut(&mut change.state).roots = roots.into_iter().map(Arc::new).collect();
            change
        })
        .collect()
}

/// The journal a rootsd with deltas writes for `changes`, from an empty store.
fn as_deltas(changes: &[Change]) -> Vec<u8> {
    let mut contents = Contents::default();
    let mut bytes = encode(&base());
    for change in changes {
        let delta = Delta::between(
            contents.workspaces.get(&change.workspace).map(Arc::as_ref),
            change,
        )
        .unwrap();
        bytes.extend(encode(&Entry::Delta(delta)));
        contents.apply(change);
    }
    bytes
}

#[test]
fn delta_replay_equals_whole_state_replay() {
    let changes = history_of_changes();
    let whole: Vec<Entry> = std::iter::once(base())
        .chain(changes.iter().cloned().map(Entry::Change))
        .collect();
    let from_whole = replay(&journal(&whole));
    let from_deltas = replay(&as_deltas(&changes));
    assert_eq!(from_deltas.damage, None);
    assert_eq!(from_deltas.contents(), from_whole.contents());
    assert_eq!(from_deltas.changes(), changes);
    for revision in 0..=changes.len() as u64 {
        assert_eq!(
            from_deltas.at(revision),
            from_whole.at(revision),
            "{revision}"
        );
    }
    // A journal that mixes the two, as one a rootsd with deltas appended to an old one.
    let mut mixed = journal(&whole[..4]);
    let mut contents = from_whole.at(3);
    for change in &changes[3..] {
        let delta = Delta::between(
            contents.workspaces.get(&change.workspace).map(Arc::as_ref),
            change,
        )
        .unwrap();
        mixed.extend(encode(&Entry::Delta(delta)));
        contents.apply(change);
    }
    assert_eq!(replay(&mixed).contents(), from_whole.contents());
}

#[test]
fn the_hand_written_encoder_writes_what_serde_reads_back() {
    let changes = history_of_changes();
    let mut contents = Contents::default();
    for change in &changes {
        let delta = Delta::between(
            contents.workspaces.get(&change.workspace).map(Arc::as_ref),
            change,
        )
        .unwrap();
        let line = encode(&Entry::Delta(delta.clone()));
        assert_eq!(decode(&line[..line.len() - 1]), Ok(Entry::Delta(delta)));
        contents.apply(change);
    }
}

#[test]
fn a_delta_costs_bytes_in_proportion_to_the_change_not_the_workspace() {
    let line_at = |size: usize| {
        let roots: Vec<Arc<StoredRootV1>> = (0..size)
            .map(|k| {
                Arc::new(root(
                    &format!("file:///home/ana/src/project-{k:05}"),
                    Some("p"),
                ))
            })
            .collect();
        let before = StoredWorkspaceV1 {
            revision: 41,
            roots: roots.clone(),
        };
        let mut renamed = change(42, "a", &[]);
        let state = Arc::make_mut(&mut renamed.state);
        state.roots = roots;
        Arc::make_mut(&mut state.roots[size / 2]).name = Some("renamed".into());
        let delta = Delta::between(Some(&before), &renamed).unwrap();
        encode(&Entry::Delta(delta)).len()
    };
    let (small, large) = (line_at(10), line_at(10_000));
    assert_eq!(
        small, large,
        "one rename is the same record at 10 roots and at 10,000"
    );
    assert!(small < 400, "{small} bytes");
}

#[test]
fn an_old_journal_of_whole_states_reads_and_takes_deltas_after_it() {
    // Lines exactly as a rootsd before deltas wrote them.
    let old = concat!(
        "{\"kind\":\"snapshot\",\"revision\":0,\"workspaces\":{}}\n",
        "{\"kind\":\"change\",\"revision\":1,\"workspace\":\"a\",\"state\":{\"revision\":1,\"roots\":[{\"uri\":\"file:///x\",\"name\":\"x\"}]}}\n",
    );
    let mut bytes: Vec<u8> = old
        .lines()
        .flat_map(|json| format!("{:08x} {json}\n", crc32fast::hash(json.as_bytes())).into_bytes())
        .collect();
    let read_old = replay(&bytes);
    assert_eq!(read_old.damage, None);
    let mut next = change(2, "a", &[]);
    Arc::make_mut(&mut next.state).roots =
        vec![root("file:///x", Some("x")), root("file:///y", None)]
            .into_iter()
            .map(Arc::new)
            .collect();
    let delta = Delta::between(
        read_old
            .contents()
            .workspaces
            .get(&ws("a"))
            .map(Arc::as_ref),
        &next,
    )
    .unwrap();
    bytes.extend(encode(&Entry::Delta(delta)));
    let read_new = replay(&bytes);
    assert_eq!(read_new.damage, None);
    assert_eq!(read_new.contents().workspaces[&ws("a")], next.state);
}

#[test]
fn damage_in_a_delta_chain_is_reported_and_later_deltas_are_judged_against_their_base() {
    let changes = history_of_changes();
    let bytes = as_deltas(&changes);
    let lines = line_ends(&bytes);
    // A bit flipped inside the delta of revision 4 (a rename in workspace a; line 5).
    let mut damaged = bytes.clone();
    damaged[lines[3] + 20] ^= 0x04;
    let replay = replay(&damaged);
    assert_eq!(replay.damage.as_ref().map(|d| d.line), Some(5));
    assert_eq!(
        replay.revision(),
        3,
        "the sound prefix ends before the damage"
    );
    let kept: Vec<u64> = replay.after_damage.iter().map(Logged::revision).collect();
    assert_eq!(
        kept,
        [5, 6, 7, 8],
        "every later record that checks out is kept"
    );
    // Against the state before the damage, a later delta of workspace a does not apply: it was
    // written against revision 4, which is lost. Workspace b's does.
    let state = replay.contents();
    let refused = replay.after_damage[0].against(&state).unwrap_err();
    assert!(refused.contains("at revision 4"), "{refused}");
    assert!(replay.after_damage[2].against(&state).is_ok(), "b's change");
}

#[test]
fn a_sound_delta_that_does_not_fit_the_state_before_it_is_damage() {
    let changes = history_of_changes();
    let bytes = as_deltas(&changes);
    // A record whose checksum holds but which was written against a workspace revision the
    // journal never reached: it is damage, not applied to the state it finds.
    let mut forged = Delta::between(None, &changes[0]).unwrap();
    forged.revision = 1;
    forged.base = 9;
    let mut journal = encode(&base());
    journal.extend(encode(&Entry::Delta(forged)));
    let replay_forged = replay(&journal);
    let damage = replay_forged.damage.expect("damage");
    assert_eq!(damage.line, 2);
    assert!(damage.reason.contains("revision 9"), "{}", damage.reason);
    assert_eq!(
        replay_forged.after_damage.len(),
        1,
        "kept for recovery to judge"
    );
    assert!(replay(&bytes).damage.is_none());
}

/// Where each line of a journal ends (the offsets of its newlines), to damage a chosen record.
fn line_ends(bytes: &[u8]) -> Vec<usize> {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn deferred_records_are_the_encoded_records_and_the_written_buffer_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let mut journal = Journal::create(&path, &Contents::default(), 0).unwrap();
    let file = journal.sync_handle().unwrap();
    let changes = history_of_changes();
    let mut contents = Contents::default();
    let mut first_buffer = None;
    for (k, change) in changes.iter().enumerate() {
        let previous = contents.workspaces.get(&change.workspace).map(Arc::as_ref);
        journal.append_change_deferred(change, previous);
        let want = encode(&Entry::Delta(Delta::between(previous, change).unwrap()));
        contents.apply(change);
        // One sync per change: the buffer the first wrote fills again at the third.
        if k == 2 {
            assert_eq!(
                Some(journal.unwritten.as_ptr()),
                first_buffer,
                "the third sync's records go into the buffer the first wrote"
            );
        }
        let (bytes, at) = journal.take_unwritten();
        assert_eq!(bytes, want, "the deferred record is the encoded one");
        file.write_all_at(&bytes, at).unwrap();
        if k == 0 {
            first_buffer = Some(bytes.as_ptr());
        }
        journal.recycle(bytes);
    }
    assert_eq!(fs::metadata(&path).unwrap().len(), journal.len());
    let replay = read(&path).unwrap().unwrap();
    assert_eq!(replay.damage, None);
    assert_eq!(replay.contents(), contents);
}
