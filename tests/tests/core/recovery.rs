//! `rootsd --recover` as a user meets it: killed halfway, run twice in a second, on a database
//! sled panics on, after a crash plus a damaged journal, after a journal's tail was zero-filled,
//! and after a journal was deleted. In
//! every case a start either refuses naming `--recover` or serves every acknowledged root, and
//! recovery keeps every change whose record checks out and says what it could not keep.

use std::process::Command;

use rootsd_tests::{PATIENCE, Sandbox, eventually, output_within};
use rustix::process::Signal;
use serde_json::json;

use crate::store::{listed, recover, refused_start, state_files, stop, under_strace};
use crate::support::{assert_exit, stderr_of};

/// Adds `count` roots named after `prefix`, one acknowledged request each.
fn add(sb: &Sandbox, prefix: &str, count: usize) -> Vec<String> {
    let mut client = sb.connect();
    (0..count)
        .map(|i| {
            let uri = format!("file:///{prefix}/{i:03}");
            let reply = client.request("roots.add", json!({"roots": [{"uri": uri}]}));
            assert!(reply.get("result").is_some(), "add {i}: {reply}");
            uri
        })
        .collect()
}

/// Starts rootsd and returns what it serves, or `None` if it refused (naming `--recover`).
fn served_or_refused(sb: &Sandbox) -> Option<Vec<String>> {
    let mut cmd = sb.rootsd();
    let mut probe = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn rootsd");
    let answered = eventually("rootsd to answer or exit", PATIENCE, || {
        if let Some(status) = probe.try_wait().unwrap() {
            return Ok(Some(status));
        }
        if rootsd_tests::answers(&sb.socket) {
            Ok(None)
        } else {
            Err("starting")
        }
    });
    let mut daemon = rootsd_tests::Daemon::new(probe);
    match answered {
        Some(status) => {
            let said = daemon.stderr();
            assert_ne!(status.code(), Some(0), "exited 0 without serving: {said}");
            assert!(
                said.contains("rootsd --recover"),
                "names the way out: {said}"
            );
            None
        }
        None => {
            let roots = listed(sb);
            stop(daemon);
            Some(roots)
        }
    }
}

#[test]
fn kill_9_at_any_step_of_recover_never_leaves_a_store_served_short() {
    // Each round kills `rootsd --recover` at its k-th rename, or its k-th sync: the moments it
    // switches files, and those in which it builds them.
    for (calls, k) in (1..=4)
        .map(|k| ("rename,renameat,renameat2", k))
        .chain((1..=4).map(|k| ("fsync,fdatasync", k)))
    {
        let sb = Sandbox::new();
        let daemon = sb.start_daemon();
        let added = add(&sb, "recover-kill", 30);
        stop(daemon);
        // Both damaged: the journal at its 25th change, the database emptied.
        let journal = sb.state.join("roots.journal");
        let mut bytes = std::fs::read(&journal).unwrap();
        let record = String::from_utf8_lossy(&bytes)
            .find("\"revision\":25,")
            .expect("the record of revision 25");
        bytes[record + 4] ^= 0x01;
        std::fs::write(&journal, &bytes).unwrap();
        std::fs::File::options()
            .write(true)
            .open(sb.state.join("db/db"))
            .unwrap()
            .set_len(0)
            .unwrap();
        refused_start(&sb);

        let inject = format!("inject={calls}:signal=SIGKILL:when={k}");
        let mut recover_cmd = sb.rootsd();
        recover_cmd.arg("--recover");
        let mut killed = under_strace(
            &recover_cmd,
            &["-f", "-qq", "-o", "/dev/null", "-e", &inject],
        );
        // Changes are journaled as deltas, each meaning something only against the state it
        // was written against. With revision 25's record damaged and no database to stand in
        // for it, the sound deltas after it (revisions 26 to 30, the same workspace) cannot be
        // applied: recovery keeps revisions 1 to 24 and names the rest (docs/RELIABILITY.md,
        // "Bytes per change").
        let kept = &added[..24];
        let said = stderr_of(&output_within(&mut killed));
        if let Some(roots) = served_or_refused(&sb) {
            assert_eq!(roots, kept, "killed at {calls} {k}, then served: {said}");
        }
        let report = recover(&sb);
        let recovered = served_or_refused(&sb).expect("served after --recover");
        assert_eq!(recovered, kept, "every root recovery could keep: {report}");
    }
}

#[test]
fn a_second_recover_in_the_same_second_keeps_both_damaged_copies() {
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    let added = add(&sb, "recover-twice", 20);
    stop(daemon);
    for round in 1..=2 {
        std::fs::File::options()
            .write(true)
            .open(sb.state.join("db/db"))
            .unwrap()
            .set_len(0)
            .unwrap();
        refused_start(&sb);
        recover(&sb);
        assert_eq!(
            state_files(&sb, "db.damaged-").len(),
            round,
            "each recovery keeps its own copy"
        );
    }
    let _daemon = sb.start_daemon();
    assert_eq!(listed(&sb), added);
}

#[test]
fn a_truncated_database_that_makes_sled_panic_is_refused_and_rebuilt_from_the_journal() {
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    // An older store: sled has written, rewritten and compacted its segments.
    let mut client = sb.connect();
    let long = "x".repeat(200);
    let mut kept = Vec::new();
    for i in 0..400 {
        let uri = format!("file:///old/{long}/{i:03}");
        let reply = client.request("roots.add", json!({"roots": [{"uri": uri}]}));
        assert!(reply.get("result").is_some(), "{reply}");
        if i % 3 == 0 {
            let reply = client.request(
                "roots.remove",
                json!({"targets": [{"input": uri, "uri": uri}]}),
            );
            assert!(reply.get("result").is_some(), "{reply}");
        } else {
            kept.push(uri);
        }
    }
    drop(client);
    stop(daemon);
    let pristine = sb.path().join("pristine");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(&sb.state)
        .arg(&pristine)
        .status();
    assert!(copied.is_ok_and(|s| s.success()));
    let mut panics = 0;
    for percent in [40, 45, 50, 55, 60, 65, 70, 75] {
        let _ = std::fs::remove_dir_all(&sb.state);
        let copied = Command::new("cp")
            .arg("-a")
            .arg(&pristine)
            .arg(&sb.state)
            .status();
        assert!(copied.is_ok_and(|s| s.success()));
        let db = sb.state.join("db/db");
        let len = std::fs::metadata(&db).unwrap().len();
        std::fs::File::options()
            .write(true)
            .open(&db)
            .unwrap()
            .set_len(len * percent / 100)
            .unwrap();
        // sled may panic on such a file, or report an error: either way rootsd must refuse
        // (exit 1, naming the way out), and recovery rebuild every root from the journal.
        let output = output_within(&mut sb.rootsd());
        assert_exit(&output, 1, &format!("rootsd on db/db cut at {percent}%"));
        if stderr_of(&output).contains("sled panicked") {
            panics += 1;
            refused_start(&sb);
        }
        let recovered = recover(&sb);
        assert!(recovered.contains("from the journal"), "{recovered}");
        let daemon = sb.start_daemon();
        assert_eq!(listed(&sb).len(), kept.len(), "cut at {percent}%");
        stop(daemon);
    }
    // Whether a given cut makes sled panic depends on where sled's background flushes put its
    // segments, which differs from run to run; the guard that turns a panic into a refusal is
    // tested deterministically beside it (`database::tests::a_panic_inside_sled_is_an_error`).
    eprintln!("{panics} of 8 cuts made sled panic");
}

/// Waits until the journal records a checkpoint at `revision`: the database holds it.
fn await_checkpoint(sb: &Sandbox, revision: usize) {
    let wanted = format!("\"kind\":\"checkpoint\",\"revision\":{revision}}}");
    eventually("the idle checkpoint", PATIENCE, || {
        let journal = std::fs::read_to_string(sb.state.join("roots.journal")).unwrap_or_default();
        if journal.contains(&wanted) {
            Ok(())
        } else {
            Err(format!("no {wanted} yet"))
        }
    });
}

/// A store whose database was checkpointed at revision `checkpointed`, then one more change
/// acknowledged and rootsd killed before the next checkpoint.
fn crashed_one_change_after_a_checkpoint(sb: &Sandbox, checkpointed: usize) -> Vec<String> {
    let mut daemon = sb.start_daemon();
    let mut added = add(sb, "crash-then-damage", checkpointed);
    await_checkpoint(sb, checkpointed);
    added.extend(add(sb, "crash-then-damage-last", 1));
    daemon.signal(Signal::KILL);
    daemon.wait();
    added
}

#[test]
fn a_crash_then_a_damaged_journal_record_loses_no_acknowledged_change() {
    let sb = Sandbox::new();
    let added = crashed_one_change_after_a_checkpoint(&sb, 139);
    // A bit flipped in the record of revision 100, which the database holds.
    let journal = sb.state.join("roots.journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    let record = String::from_utf8_lossy(&bytes)
        .find("\"revision\":100,")
        .expect("the record of revision 100");
    bytes[record + 4] ^= 0x01;
    std::fs::write(&journal, &bytes).unwrap();

    refused_start(&sb);
    let said = recover(&sb);
    assert!(said.contains("revision 140"), "{said}");
    assert!(
        said.contains("every acknowledged change found was kept"),
        "{said}"
    );
    let _daemon = sb.start_daemon();
    let mut listed = listed(&sb);
    let mut expected = added;
    listed.sort();
    expected.sort();
    assert_eq!(listed, expected);
}

#[test]
fn a_journal_deleted_after_a_crash_is_refused_not_served_short() {
    let sb = Sandbox::new();
    let added = crashed_one_change_after_a_checkpoint(&sb, 29);
    std::fs::remove_file(sb.state.join("roots.journal")).unwrap();
    let said = refused_start(&sb);
    assert!(
        said.contains("journal") && said.contains("missing"),
        "{said}"
    );
    let output = output_within(
        Command::new(sb.rootsd().get_program()).args(
            sb.rootsd()
                .get_args()
                .chain([std::ffi::OsStr::new("--recover")]),
        ),
    );
    assert_exit(&output, 0, "rootsd --recover");
    let said = stderr_of(&output);
    assert!(
        said.contains("COULD NOT KEEP") && said.contains("journal is missing"),
        "{said}"
    );
    let _daemon = sb.start_daemon();
    assert_eq!(listed(&sb).len(), added.len() - 1, "what the database held");
}

/// The byte at which the journal's record of `revision` starts.
fn record_start(journal: &[u8], revision: usize) -> usize {
    let text = String::from_utf8_lossy(journal);
    let at = text
        .find(&format!("\"revision\":{revision},"))
        .unwrap_or_else(|| panic!("the record of revision {revision}"));
    text[..at].rfind('\n').map_or(0, |newline| newline + 1)
}

#[test]
fn a_journal_tail_zero_filled_over_synced_records_is_refused_and_recover_names_what_it_lost() {
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    let mut added = add(&sb, "zeroed", 121);
    stop(daemon);
    // The database as a crash before sled took the last changes leaves it: at revision 121.
    let behind = sb.path().join("db-at-121");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(sb.state.join("db"))
        .arg(&behind)
        .status();
    assert!(copied.is_ok_and(|s| s.success()), "cp -a the database");
    let daemon = sb.start_daemon();
    added.extend(add(&sb, "zeroed-late", 9));
    stop(daemon);
    std::fs::remove_dir_all(sb.state.join("db")).unwrap();
    std::fs::rename(&behind, sb.state.join("db")).unwrap();
    // The records of revisions 122 to 130, each synced before it was acknowledged, zero-filled
    // to the end of the file, as a disk or file system may leave them.
    let journal = sb.state.join("roots.journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    let start = record_start(&bytes, 122);
    let zeroed = bytes.len() - start;
    bytes[start..].fill(0);
    std::fs::write(&journal, &bytes).unwrap();

    let said = refused_start(&sb);
    assert!(
        said.contains(&format!("byte {start}"))
            && said.contains(&format!("{zeroed} zero bytes"))
            && said.contains("revision 121"),
        "names where, how much and the last sound revision: {said}"
    );
    let report = recover(&sb);
    assert!(
        report.contains("COULD NOT KEEP") && report.contains("after revision 121"),
        "names the revisions it could not keep: {report}"
    );
    let _daemon = sb.start_daemon();
    assert_eq!(listed(&sb), added[..121], "every root a source still held");
}
