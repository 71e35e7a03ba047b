//! The store on disk: what is acknowledged is on stable storage (the journal is synced before the
//! reply, checked under strace), a damaged store is refused and `rootsd --recover` restores every
//! acknowledged root, a crash before a checkpoint loses nothing, a full disk degrades the store
//! until writes succeed again, and everything is private to its user.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rootsd_tests::{Daemon, PATIENCE, RawClient, Sandbox, eventually, output_within};
use rustix::process::Signal;
use serde_json::{Value, json};

use crate::support::{assert_exit, ctl_json, stderr_of, stdout_of};

/// Adds `count` roots, one acknowledged request each, on a raw connection; returns their URIs.
pub(crate) fn add_roots(sb: &Sandbox, count: usize) -> Vec<String> {
    let mut client = sb.connect();
    (0..count)
        .map(|i| {
            let uri = format!("file:///store-test/root-{i:03}");
            let reply = client.request("roots.add", json!({"roots": [{"uri": uri}]}));
            assert!(reply.get("result").is_some(), "add {i}: {reply}");
            uri
        })
        .collect()
}

pub(crate) fn listed(sb: &Sandbox) -> Vec<String> {
    sb.roots("default")
        .iter()
        .map(|r| r["uri"].as_str().unwrap().to_owned())
        .collect()
}

pub(crate) fn stop(mut daemon: Daemon) {
    daemon.signal(Signal::TERM);
    let status = daemon.wait();
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr());
}

/// Stops a rootsd running under strace: the signal goes to rootsd itself (strace would only
/// detach), and strace exits with it. Returns rootsd's exit status and log.
fn stop_traced(sb: &Sandbox, mut tracer: Daemon) -> (Option<i32>, String) {
    let pid = rootsd_tests::daemon_pid(&sb.state).expect("the traced rootsd holds its state dir");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).expect("a pid"),
        Signal::TERM,
    )
    .expect("signal rootsd");
    let status = tracer.wait();
    (status.code(), tracer.stderr())
}

/// `cmd` (a rootsd command) run under `strace` with `strace_args`.
pub(crate) fn under_strace(cmd: &Command, strace_args: &[&str]) -> Command {
    assert!(
        Command::new("strace")
            .arg("-V")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success()),
        "strace is not installed; the durability tests need it (apt-get install strace)"
    );
    let mut traced = Command::new("strace");
    traced
        .args(strace_args)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => traced.env(key, value),
            None => traced.env_remove(key),
        };
    }
    traced
}

/// Starts rootsd on the sandbox expecting it to refuse; returns what it said.
pub(crate) fn refused_start(sb: &Sandbox) -> String {
    let output = output_within(&mut sb.rootsd());
    assert_ne!(
        output.status.code(),
        Some(0),
        "rootsd started on a damaged store: {}",
        stderr_of(&output)
    );
    let said = stderr_of(&output);
    assert!(said.contains("damaged"), "names the damage: {said}");
    assert!(
        said.contains("rootsd --recover"),
        "names the way out: {said}"
    );
    said
}

pub(crate) fn recover(sb: &Sandbox) -> String {
    let output = output_within(sb.rootsd().arg("--recover"));
    assert_exit(&output, 0, "rootsd --recover");
    stderr_of(&output)
}

pub(crate) fn state_files(sb: &Sandbox, prefix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(&sb.state)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect()
}

#[test]
fn a_byte_flipped_in_the_database_is_refused_and_recover_restores_every_root() {
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    let added = add_roots(&sb, 100);
    stop(daemon);

    let db = sb.state.join("db/db");
    let mut bytes = std::fs::read(&db).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&db, &bytes).unwrap();

    refused_start(&sb);
    let said = recover(&sb);
    assert!(said.contains("100 roots"), "{said}");
    assert!(
        !state_files(&sb, "db.damaged-").is_empty(),
        "the damaged database is kept"
    );
    let _daemon = sb.start_daemon();
    assert_eq!(listed(&sb), added);
}

#[test]
fn an_emptied_database_is_refused_and_recover_restores_every_root() {
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    let added = add_roots(&sb, 30);
    stop(daemon);
    std::fs::File::options()
        .write(true)
        .open(sb.state.join("db/db"))
        .unwrap()
        .set_len(0)
        .unwrap();

    refused_start(&sb);
    recover(&sb);
    let _daemon = sb.start_daemon();
    assert_eq!(listed(&sb), added);
}

#[test]
fn a_damaged_journal_is_refused_and_recover_rebuilds_it_from_the_database() {
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    let added = add_roots(&sb, 20);
    stop(daemon);
    let journal = sb.state.join("roots.journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&journal, &bytes).unwrap();

    let said = refused_start(&sb);
    assert!(said.contains("journal"), "{said}");
    recover(&sb);
    assert!(!state_files(&sb, "roots.journal.damaged-").is_empty());
    let _daemon = sb.start_daemon();
    assert_eq!(listed(&sb), added);
}

#[test]
fn a_journal_emptied_or_cut_short_is_refused_and_recover_keeps_the_newer_database() {
    for cut in ["empty", "last records"] {
        let sb = Sandbox::new();
        let daemon = sb.start_daemon();
        let added = add_roots(&sb, 20);
        stop(daemon);
        let journal = sb.state.join("roots.journal");
        let bytes = std::fs::read(&journal).unwrap();
        let keep = match cut {
            "empty" => 0,
            // Whole records only: what survives looks like a sound, shorter journal.
            _ => {
                let ends: Vec<usize> = bytes
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'\n')
                    .map(|(i, _)| i + 1)
                    .collect();
                ends[ends.len() / 2]
            }
        };
        std::fs::write(&journal, &bytes[..keep]).unwrap();
        let said = refused_start(&sb);
        let report = recover(&sb);
        if cut == "last records" {
            // The database, written after each sync, holds what the journal lost: both say so,
            // and recovery that nothing after the database's revision survived anywhere.
            assert!(
                said.contains("to 20, which were acknowledged"),
                "names the revisions the journal lost: {said}"
            );
            assert!(
                report.contains("COULD NOT KEEP: any change acknowledged after revision 20"),
                "{report}"
            );
        }
        let _daemon = sb.start_daemon();
        assert_eq!(listed(&sb), added, "journal cut: {cut}");
    }
}

#[test]
fn a_crash_before_the_database_is_checkpointed_loses_no_acknowledged_root() {
    for round in 0..3 {
        let sb = Sandbox::new();
        let mut daemon = sb.start_daemon();
        let added = add_roots(&sb, 40 + round * 10);
        // At once, before the commit thread's idle checkpoint: only the journal is durable.
        daemon.signal(Signal::KILL);
        daemon.wait();
        drop(daemon);
        let mut restarted = sb.start_daemon();
        assert_eq!(listed(&sb), added, "round {round}");
        restarted.signal(Signal::TERM);
        restarted.wait();
        let log = restarted.stderr();
        assert!(!log.contains("damaged"), "round {round}: {log}");
    }
}

/// The syscalls of one line of `strace -f` output: `[pid N] name(args) = result`, with
/// `<unfinished ...>` and `<... name resumed>` pairs joined at their completion.
fn completed_calls(trace: &str) -> Vec<String> {
    let mut started: std::collections::HashMap<String, String> = Default::default();
    let mut done = Vec::new();
    for line in trace.lines() {
        // strace pads the pid column: `749   rename(…)`.
        let (pid, call) = match line.split_once(' ') {
            Some((pid, rest)) if pid.chars().all(|c| c.is_ascii_digit()) => {
                (pid.to_owned(), rest.trim_start())
            }
            _ => (String::new(), line),
        };
        if let Some(head) = call.strip_suffix(" <unfinished ...>") {
            started.insert(pid, head.to_owned());
        } else if call.starts_with("<... ") {
            let tail = call.split_once("resumed>").map_or("", |(_, t)| t);
            let head = started.remove(&pid).unwrap_or_default();
            done.push(format!("{head}{tail}"));
        } else {
            done.push(call.to_owned());
        }
    }
    done
}

#[test]
fn an_acknowledgement_follows_the_journal_write_and_its_fdatasync() {
    let sb = Sandbox::new();
    let trace_path = sb.path().join("trace.txt");
    let trace_arg = trace_path.to_str().unwrap().to_owned();
    let traced = under_strace(
        &sb.rootsd(),
        &[
            "-f",
            "-y",
            "-s",
            "300",
            "-o",
            &trace_arg,
            "-e",
            "trace=pwrite64,write,writev,sendto,sendmsg,fdatasync,fsync,rename,renameat,renameat2",
        ],
    );
    let daemon = sb.start_daemon_with(traced);
    let uri = "file:///durable/order-check";
    let mut client = sb.connect();
    let reply = client.request("roots.add", json!({"roots": [{"uri": uri}]}));
    assert_eq!(reply["result"]["revision"], json!(1), "{reply}");
    stop_traced(&sb, daemon);

    let trace = std::fs::read_to_string(&trace_path).unwrap();
    let calls = completed_calls(&trace);
    let position = |what: &dyn Fn(&str) -> bool, after: usize, name: &str| {
        calls
            .iter()
            .enumerate()
            .skip(after)
            .find(|(_, c)| what(c))
            .map(|(i, _)| i)
            .unwrap_or_else(|| {
                panic!(
                    "no {name} after call {after} in the trace:\n{}\n--- as strace wrote it:\n{trace}",
                    calls.join("\n")
                )
            })
    };
    let journal = "roots.journal>";
    let created = position(
        &|c| c.starts_with("rename") && c.contains("roots.journal.new") && c.ends_with("= 0"),
        0,
        "rename of the new journal into place",
    );
    position(
        &|c| c.starts_with("fsync(") && c.contains(&format!("{}>", sb.state.display())),
        created,
        "fsync of the state directory after the journal was created",
    );
    let written = position(
        &|c| c.starts_with("pwrite64(") && c.contains(journal) && c.contains("order-check"),
        created,
        "write of the change to the journal",
    );
    let synced = position(
        &|c| c.starts_with("fdatasync(") && c.contains(journal) && c.ends_with("= 0"),
        written,
        "fdatasync of the journal",
    );
    let replied = position(
        &|c| c.contains("\\\"result\\\"") && c.contains("\\\"revision\\\":1"),
        0,
        "reply to roots.add",
    );
    assert!(
        written < synced && synced < replied,
        "the reply (call {replied}) must follow the journal write ({written}) and its fdatasync ({synced}):\n{}",
        calls.join("\n")
    );
}

/// A small filesystem of its own for the state directory, unmounted when dropped.
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size},mode=0700"))
            .arg("tmpfs")
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(
            output.status.success(),
            "the full-disk test mounts a small tmpfs and needs root (CI runs the suite as root): {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Self {
            dir: dir.to_owned(),
        }
    }

    /// Fills the filesystem; returns the file doing it.
    fn fill(&self) -> PathBuf {
        let filler = self.dir.join("filler");
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=64k"])
            .arg(format!("of={}", filler.display()))
            .stderr(Stdio::null())
            .status();
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

fn store_state(sb: &Sandbox) -> Value {
    ctl_json(sb, &["status", "--json"])["store"].clone()
}

#[test]
fn a_full_disk_refuses_changes_degrades_the_store_and_heals_once_there_is_room() {
    let sb = Sandbox::new();
    let disk = SmallDisk::mount(&sb.state, "4m");
    let daemon = sb.start_daemon();
    let before = add_roots(&sb, 3);
    let filler = disk.fill();

    // A change larger than a page: tmpfs gives a full disk no new page for it.
    let dir = sb.mkdir("refused");
    let long_name = "n".repeat(16 << 10);
    let refused = sb.ctl(&["add", dir.to_str().unwrap(), "--name", &long_name]);
    assert_exit(&refused, 1, "add on a full disk");
    assert!(
        stderr_of(&refused).contains("nothing was changed"),
        "{}",
        stderr_of(&refused)
    );
    let store = store_state(&sb);
    assert_eq!(store["state"], json!("degraded"), "{store}");
    let doctor = sb.ctl(&["doctor"]);
    assert_exit(&doctor, 1, "doctor with a degraded store");
    assert!(
        stdout_of(&doctor).contains("store"),
        "{}",
        stdout_of(&doctor)
    );
    assert_eq!(listed(&sb), before, "reads are still served, unchanged");

    std::fs::remove_file(filler).unwrap();
    let healed = eventually("an add once there is room", PATIENCE, || {
        let output = sb.ctl(&["add", dir.to_str().unwrap(), "--name", &long_name]);
        if output.status.success() {
            Ok(output)
        } else {
            Err(stderr_of(&output))
        }
    });
    assert!(
        stdout_of(&healed).contains("added"),
        "{}",
        stdout_of(&healed)
    );
    eventually("the store to report itself healthy", PATIENCE, || {
        let store = store_state(&sb);
        if store["state"] == json!("ok") {
            Ok(())
        } else {
            Err(store)
        }
    });
    stop(daemon);
    let _restarted = sb.start_daemon();
    assert_eq!(listed(&sb).len(), 4);
}

#[test]
fn writes_heal_after_the_journal_fails_to_sync_twice() {
    let sb = Sandbox::new();
    // The first two fdatasync calls on the journal fail with EIO, as a flaky disk would.
    let journal = sb.state.join("roots.journal");
    let journal_arg = journal.to_str().unwrap().to_owned();
    let traced = under_strace(
        &sb.rootsd(),
        &[
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-P",
            &journal_arg,
            "-e",
            "trace=fdatasync",
            "-e",
            "inject=fdatasync:error=EIO:when=1..2",
        ],
    );
    let daemon = sb.start_daemon_with(traced);
    let mut client = sb.connect();
    let first = client.request(
        "roots.add",
        json!({"roots": [{"uri": "file:///flaky/one"}]}),
    );
    assert_eq!(first["error"]["code"], json!(-32004), "{first}");
    assert_eq!(store_state(&sb)["state"], json!("degraded"));
    let later = client.request(
        "roots.add",
        json!({"roots": [{"uri": "file:///flaky/two"}]}),
    );
    assert_eq!(later["result"]["revision"], json!(1), "{later}");
    assert_eq!(
        store_state(&sb)["state"],
        json!("ok"),
        "a write that succeeds heals the store"
    );
    assert_eq!(listed(&sb), vec!["file:///flaky/two".to_owned()]);
    stop_traced(&sb, daemon);
    let _restarted = sb.start_daemon();
    assert_eq!(listed(&sb), vec!["file:///flaky/two".to_owned()]);
}

#[test]
fn a_final_checkpoint_that_fails_makes_rootsd_exit_non_zero() {
    let sb = Sandbox::new();
    stop(sb.start_daemon());
    // Every fdatasync of the database file fails: the database cannot be checkpointed, while the
    // journal, which acknowledges changes, works.
    let database = sb.state.join("db/db");
    let database_arg = database.to_str().unwrap().to_owned();
    let traced = under_strace(
        &sb.rootsd(),
        &[
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-P",
            &database_arg,
            "-e",
            "trace=fdatasync",
            "-e",
            "inject=fdatasync:error=EIO",
        ],
    );
    let daemon = sb.start_daemon_with(traced);
    let added = add_roots(&sb, 3);
    let (code, log) = stop_traced(&sb, daemon);
    assert_ne!(code, Some(0), "{log}");
    assert!(log.contains("final checkpoint"), "{log}");
    // The journal held every acknowledged change: the next start catches the database up.
    let _restarted = sb.start_daemon();
    assert_eq!(listed(&sb), added);
}

/// The thread of `pid` named `name`.
fn thread_named(pid: i32, name: &str) -> i32 {
    eventually(&format!("a thread named {name}"), PATIENCE, || {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|e| e.to_string())?;
        for task in tasks.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim() == name {
                return Ok(task.file_name().to_str().unwrap().parse().unwrap());
            }
        }
        Err("none yet".to_owned())
    })
}

#[test]
fn a_database_that_fails_to_sync_for_a_while_wedges_neither_writes_nor_shutdown() {
    let sb = Sandbox::new();
    let mut daemon = sb.start_daemon();
    // Attached to the commit thread alone, once rootsd runs: its first three fdatasyncs of the
    // database fail (so each checkpoint fails and the database is reopened), and so does its
    // first fsync of it, which sled makes as the old handle is dropped, and panicked on: a disk
    // that errs for a moment, then works.
    let commit = thread_named(daemon.pid(), "rootsd-commit");
    let database = sb.state.join("db/db");
    let mut tracer = Command::new("strace");
    tracer
        .args(["-o", "/dev/null", "-p", &commit.to_string(), "-P"])
        .arg(&database)
        .args(["-e", "trace=fdatasync,fsync"])
        .args(["-e", "inject=fdatasync:error=EIO:when=1..3"])
        .args(["-e", "inject=fsync:error=EIO:when=1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut tracer = rootsd_tests::Reaped(tracer.spawn().expect("run strace"));
    let mut attached = std::io::BufReader::new(tracer.0.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut attached, &mut line).unwrap();
    assert!(line.contains("attached"), "strace: {line}");
    let mut added = add_roots(&sb, 2);
    // The idle checkpoint after the adds fails, and so do the next two (each reopening the
    // database first): about a second in which the store says it is degraded.
    eventually(
        "the failed checkpoint to degrade the store",
        PATIENCE,
        || {
            let store = store_state(&sb);
            if store["state"] == json!("degraded") {
                Ok(())
            } else {
                Err(store)
            }
        },
    );
    eventually(
        "the store to heal once the database syncs again",
        PATIENCE,
        || {
            let store = store_state(&sb);
            if store["state"] == json!("ok") {
                Ok(())
            } else {
                Err(store)
            }
        },
    );
    for n in 0..3 {
        let dir = sb.mkdir(&format!("after-fault-{n}"));
        let output = sb.ctl(&["add", dir.to_str().unwrap()]);
        assert_exit(&output, 0, &format!("add {n} after the database erred"));
        added.push(format!("file://{}", dir.display()));
    }
    daemon.signal(Signal::TERM);
    let code = daemon.wait().code();
    let log = daemon.stderr();
    assert_eq!(code, Some(0), "SIGTERM stops rootsd cleanly: {log}");
    assert!(
        log.contains("sled panicked"),
        "the fault made sled panic, and rootsd went on: {log}"
    );
    let _restarted = sb.start_daemon();
    assert_eq!(listed(&sb), added);
}

#[test]
fn everything_in_the_state_directory_is_private_even_under_a_loose_umask() {
    let sb = Sandbox::new();
    let mut loose = Command::new("sh");
    let rootsd = sb.rootsd();
    loose
        .arg("-c")
        .arg("umask 000 && exec \"$0\" \"$@\"")
        .arg(rootsd.get_program())
        .args(rootsd.get_args());
    for (key, value) in rootsd.get_envs() {
        match value {
            Some(value) => loose.env(key, value),
            None => loose.env_remove(key),
        };
    }
    let daemon = sb.start_daemon_with(loose);
    add_roots(&sb, 2);
    stop(daemon);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&sb.state), 0o700);
    for file in ["roots.journal", "rootsd.lock", "db/db", "db/conf"] {
        let path = sb.state.join(file);
        assert_eq!(
            mode(&path) & 0o077,
            0,
            "{} is {:o}",
            path.display(),
            mode(&path)
        );
    }

    // A state directory loosened by hand (or by an earlier rootsd) is made private again.
    for (path, loosened) in [
        (sb.state.clone(), 0o755),
        (sb.state.join("db/db"), 0o644),
        (sb.state.join("roots.journal"), 0o644),
    ] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(loosened)).unwrap();
    }
    let mut daemon = sb.start_daemon();
    assert_eq!(mode(&sb.state), 0o700);
    assert_eq!(mode(&sb.state.join("db/db")), 0o600);
    assert_eq!(mode(&sb.state.join("roots.journal")), 0o600);
    daemon.signal(Signal::TERM);
    daemon.wait();
    assert!(daemon.stderr().contains("made private"));
}

#[test]
fn fifty_concurrent_adds_all_land() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let writers: Vec<_> = (0..50)
        .map(|i| {
            let socket = sb.socket.clone();
            std::thread::spawn(move || {
                let mut client = RawClient::connect(&socket);
                let hello = client.request(
                    "hello",
                    json!({"protocol_version": rootsd_tests::PROTOCOL_VERSION}),
                );
                assert!(hello.get("result").is_some(), "{hello}");
                let reply = client.request(
                    "roots.add",
                    json!({"roots": [{"uri": format!("file:///concurrent/w{i:02}")}]}),
                );
                reply["result"]["revision"]
                    .as_u64()
                    .expect("an acknowledged add")
            })
        })
        .collect();
    let mut revisions: Vec<u64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    revisions.sort_unstable();
    assert_eq!(revisions, (1..=50).collect::<Vec<_>>(), "one revision each");
    assert_eq!(listed(&sb).len(), 50);
}
