//! The journal's unit tests: records, replay, damage, compaction.

use super::*;
use crate::store::model::StoredRootV1;

fn ws(name: &str) -> WorkspaceName {
    WorkspaceName::new(name).unwrap()
}

fn change(revision: u64, workspace: &str, uris: &[&str]) -> Change {
    Change {
        revision,
        workspace: ws(workspace),
        state: StoredWorkspaceV1 {
            revision,
            roots: uris
                .iter()
                .map(|u| StoredRootV1 {
                    uri: (*u).to_owned(),
                    name: None,
                    by_hand: true,
                    published_by: Vec::new(),
                })
                .collect(),
        },
        origin: Some(Origin::Peer(crate::store::model::PeerV1 {
            uid: 1000,
            user: Some("ana".to_owned()),
            pid: Some(4242),
            process: Some("rootsctl".to_owned()),
            client: Some("rootsctl 0.1.0".to_owned()),
        })),
        time_unix_ms: 1_796_000_000_000 + revision,
    }
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
    assert_eq!(replay.changes, [first, second]);
    let contents = replay.contents();
    let revisions: Vec<u64> = contents.history.iter().map(|e| e.revision).collect();
    assert_eq!(revisions, [1, 2]);
    assert_eq!(contents.history[1].removed[0].uri, "file:///x");
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
    assert_eq!(replay.changes[0].origin, None);
    let contents = replay.contents();
    assert_eq!(contents.root_count(), 1);
    assert!(contents.history.is_empty());
    assert_eq!(contents.recorded_from(), 2);
    // And what this rootsd writes for a change without an origin is what that one wrote.
    let line = encode(&Entry::Change(replay.changes[0].clone()));
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
    assert_eq!(replay.changes, tail);
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
    let change = &replay.changes[0];
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
    published.state.roots[0].by_hand = false;
    published.state.roots[0]
        .published_by
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
    assert_eq!(super::replay(&bytes).changes[1], published);
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
    let lines: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i)
        .collect();
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
    let kept: Vec<u64> = replay.after_damage.iter().map(|c| c.revision).collect();
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
