//! Bounded everything: no peer can make the daemon hold memory past its documented limits, or
//! keep it from shutting down; and rootsctl never waits on a daemon without a deadline.

use std::io::Write as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use rootsd_tests::{PATIENCE, RawClient, Sandbox, eventually, output_within};
use rustix::process::Signal;
use serde_json::{Value, json};

use crate::support::{assert_exit, stderr_of};

/// A process's resident memory now, in MiB.
fn rss_mib(pid: i32) -> u64 {
    memory_of(pid).rss_kib / 1024
}

fn memory_of(pid: i32) -> rootsd_tests::Memory {
    rootsd_tests::memory(pid as u32).expect("read the daemon's memory")
}

#[test]
fn stalled_half_lines_hold_a_bounded_amount_and_it_returns_when_their_peers_go() {
    const PEERS: usize = 1000;
    const HALF: usize = 512 * 1024;
    rootsd_tests::raise_fd_limit(PEERS as u64 + 256).expect("raise the open-file limit");
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    let baseline = rss_mib(daemon.pid());
    let half_line = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"status","params":{{}},"pad":"{}"#,
        "x".repeat(HALF)
    );
    let mut peers = Vec::with_capacity(PEERS);
    for _ in 0..PEERS {
        let mut stream = UnixStream::connect(&sb.socket).expect("connect");
        let mut greeted = RawClient::from_stream(stream.try_clone().unwrap());
        greeted.send_line(&rootsd_tests::hello_line(1));
        greeted.read_line().expect("hello answered");
        // Half a line, without its end. The write returns once the daemon has read all but
        // what the kernel buffers, or has refused the line and closed the connection.
        let _ = stream.write_all(half_line.as_bytes());
        peers.push(stream);
    }
    // 1,000 peers sent 500 MiB between them; the daemon holds what its budget allows (64 MiB
    // beyond 4 KiB each) and turns the rest away. The peak counts, not just the moment.
    let stalled = memory_of(daemon.pid()).hwm_kib / 1024;
    assert!(
        stalled <= baseline + 160,
        "{PEERS} stalled half lines took the daemon from {baseline} MiB to {stalled} MiB"
    );
    let mut busy = 0;
    for peer in &peers {
        let mut client = RawClient::from_stream(peer.try_clone().unwrap());
        peer.set_read_timeout(Some(Duration::from_millis(1)))
            .unwrap();
        if let Some(line) = client.read_line() {
            // Over budget (-32009); or, on a machine slow enough that connecting them all took
            // longer than a line may, unfinished (-32600).
            let refusal: Value = serde_json::from_str(&line).unwrap();
            let code = refusal["error"]["code"].clone();
            assert!(code == json!(-32009) || code == json!(-32600), "{refusal}");
            busy += usize::from(code == json!(-32009));
        }
    }
    assert!(busy > 0, "no peer was told the daemon was at its limit");
    drop(peers);
    let after = eventually("the stalled peers' memory to return", PATIENCE, || {
        let now = rss_mib(daemon.pid());
        if now <= baseline + 16 {
            Ok(now)
        } else {
            Err(format!(
                "{now} MiB, from {baseline} MiB before the peers came"
            ))
        }
    });
    eprintln!(
        "baseline {baseline} MiB, {PEERS} stalled peers {stalled} MiB ({busy} told busy), after they left {after} MiB"
    );
    // And the daemon still serves.
    sb.ctl_ok(&["status"]);
}

#[test]
fn a_watcher_that_stops_reading_gets_the_newest_state_not_every_change_it_missed() {
    const CHANGES: usize = 100;
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut watcher = sb.connect();
    let watching = watcher.request("watch", json!({}));
    assert!(watching.get("result").is_some(), "{watching}");
    let mut control = sb.connect();
    // Every push is about 100 kB, so the watcher's socket is full after a couple, and the
    // daemon has to hold back the rest.
    let added = add_long_roots(&mut control);
    assert!(added.get("result").is_some(), "{added}");
    let mut revision = 0;
    for i in 0..CHANGES {
        revision = rename_first_root(&mut control, i);
    }
    // Now the watcher reads: what was written before its socket filled, then the newest state.
    let mut pushes = 0;
    loop {
        let pushed = watcher.read_json();
        assert_eq!(pushed["method"], json!("roots.changed"), "{pushed}");
        pushes += 1;
        if pushed["params"]["revision"].as_u64() == Some(revision) {
            let roots = pushed["params"]["roots"].as_array().unwrap();
            assert_eq!(roots.len(), 100);
            assert_eq!(roots[0]["name"], json!(format!("renamed {}", CHANGES - 1)));
            break;
        }
    }
    eprintln!(
        "a watcher that did not read for {} changes was sent {pushes} pushes",
        CHANGES + 1
    );
    assert!(
        pushes <= 10,
        "a watcher that did not read for {} changes was sent {pushes} of them: the daemon kept every one for it",
        CHANGES + 1
    );
}

#[test]
fn a_session_that_stops_reading_holds_up_no_other_and_gets_the_newest_state() {
    // Enough to fill the stuck session's socket many times over, few enough to finish well
    // within the daemon's patience with it (30 s) on a loaded machine.
    const CHANGES: usize = 30;
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let register = |client: &mut RawClient, label: &str| {
        let registered = client.request(
            "session.register",
            json!({"workspace": "default", "label": label, "pid": 1, "state": {"list_changed": true}}),
        );
        assert!(registered.get("result").is_some(), "{registered}");
    };
    let mut stuck = sb.connect();
    register(&mut stuck, "stuck");
    let mut reading = sb.connect();
    register(&mut reading, "reading");
    let mut control = sb.connect();
    // Pushes of about 100 kB: the stuck session's socket is full after a couple.
    let added = add_long_roots(&mut control);
    let mut revision = added["result"]["revision"].as_u64().expect("the add");
    let expect_push = |client: &mut RawClient, revision: u64| {
        let pushed = client.read_json();
        assert_eq!(pushed["method"], json!("roots.changed"), "{pushed}");
        assert_eq!(pushed["params"]["revision"].as_u64(), Some(revision));
        pushed
    };
    expect_push(&mut reading, revision);
    for i in 0..CHANGES {
        revision = rename_first_root(&mut control, i);
        // Every change reaches the session that reads, whole, in order, while the other is
        // stuck.
        let pushed = expect_push(&mut reading, revision);
        assert_eq!(
            pushed["params"]["roots"][0]["name"],
            json!(format!("renamed {i}"))
        );
    }
    // The stuck session reads now: what fitted in its socket, then the newest state, each line
    // whole.
    let mut pushes = 0;
    loop {
        let pushed = stuck.read_json();
        assert_eq!(pushed["method"], json!("roots.changed"), "{pushed}");
        pushes += 1;
        if pushed["params"]["revision"].as_u64() == Some(revision) {
            let roots = pushed["params"]["roots"].as_array().unwrap();
            assert_eq!(roots[0]["name"], json!(format!("renamed {}", CHANGES - 1)));
            break;
        }
    }
    assert!(
        pushes <= 10,
        "a session that did not read for {} changes was sent {pushes} of them: the daemon kept every one for it",
        CHANGES + 1
    );
    // And it is still served: its next request is answered, followed by nothing it had.
    let listed = stuck.request("roots.list", json!({"workspace": "default"}));
    assert!(listed.get("result").is_some(), "{listed}");
}

/// Fills `watcher`'s socket with pushes it never reads: each change carries the whole list.
fn queue_pushes_it_never_reads(sb: &Sandbox) {
    let mut control = sb.connect();
    let long_name = "n".repeat(4000);
    for i in 0..80 {
        let reply = control.request(
            "roots.add",
            json!({"roots": [{"uri": format!("file:///stuck/d{i}"), "name": long_name}]}),
        );
        assert!(reply.get("result").is_some(), "add {i} failed: {reply}");
    }
}

#[test]
fn a_client_that_never_reads_does_not_hold_up_shutdown() {
    let sb = Sandbox::new();
    let mut daemon = sb.start_daemon();
    let mut watcher = sb.connect();
    let watching = watcher.request("watch", json!({}));
    assert!(watching.get("result").is_some(), "{watching}");
    queue_pushes_it_never_reads(&sb);

    let asked = Instant::now();
    daemon.signal(Signal::TERM);
    let exit = daemon.wait();
    let took = asked.elapsed();
    assert_eq!(exit.code(), Some(0), "{exit}: {}", daemon.stderr());
    // The grace for a peer that does not read is 2 s; the rest is generous slack for a loaded
    // machine, and far less than the forever it took before.
    assert!(
        took < Duration::from_secs(10),
        "shutdown took {took:?} with a client that never reads"
    );
    eprintln!("shutdown with a client that never reads took {took:?}");
    assert!(
        std::fs::symlink_metadata(&sb.socket).is_err(),
        "the socket is removed"
    );
    drop(watcher);
}

#[test]
fn rootsctl_gives_up_on_a_daemon_that_does_not_answer() {
    // A real daemon, stopped: the kernel still accepts connections for it.
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    daemon.signal(Signal::STOP);
    let started = Instant::now();
    let output = output_within(sb.rootsctl().args(["status"]).env("ROOTSD_TIMEOUT", "1"));
    let took = started.elapsed();
    daemon.signal(Signal::CONT);
    assert_exit(&output, 3, "status against a stopped daemon");
    let err = stderr_of(&output);
    assert!(
        err.contains(&format!(
            "rootsd at {} did not answer hello within 1s",
            sb.socket.display()
        )) && err.contains("ROOTSD_TIMEOUT"),
        "{err}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");

    // Something that listens and never accepts, with the default timeout given as a flag.
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.socket.parent().unwrap()).unwrap();
    let _listener = UnixListener::bind(&sb.socket).unwrap();
    let output = output_within(sb.rootsctl().args(["list", "--daemon-timeout", "0.5"]));
    assert_exit(&output, 3, "list against a listener that never answers");
    let err = stderr_of(&output);
    assert!(err.contains("did not answer hello within 0.5s"), "{err}");

    let output = output_within(sb.rootsctl().args(["status"]).env("ROOTSD_TIMEOUT", "soon"));
    assert_exit(&output, 2, "a timeout that is not a number");
    assert!(stderr_of(&output).contains("\"soon\" is not a number of seconds"));
}

/// Renames `file:///w/d0` to `renamed I`, a change that keeps every push the same length;
/// returns the change's revision.
/// Adds 100 roots with names of 1,000 bytes, so that every push of the workspace is about
/// 100 kB; returns the answer.
fn add_long_roots(control: &mut RawClient) -> Value {
    let long_name = "n".repeat(1000);
    let roots: Vec<Value> = (0..100)
        .map(|i| json!({"uri": format!("file:///w/d{i}"), "name": format!("{long_name}{i}")}))
        .collect();
    control.request("roots.add", json!({ "roots": roots }))
}

fn rename_first_root(control: &mut RawClient, i: usize) -> u64 {
    let renamed = control.request(
        "roots.add",
        json!({"roots": [{"uri": "file:///w/d0", "name": format!("renamed {i}")}]}),
    );
    renamed["result"]["revision"]
        .as_u64()
        .unwrap_or_else(|| panic!("rename {i} failed: {renamed}"))
}
