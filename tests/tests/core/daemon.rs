//! The daemon's life: persistence, one instance per state directory, signals, and the socket.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Command, Stdio};

use rootsd_tests::{PATIENCE, RawClient, Sandbox, answers, bin, eventually, output_within};
use rustix::process::Signal;
use serde_json::{Value, json};

use crate::support::{Reaped, assert_exit, ctl_json, lines_of, plain_uri, status, stderr_of, uris};

#[test]
fn roots_survive_a_restart() {
    let sb = Sandbox::new();
    let mut daemon = sb.start_daemon();
    let one = sb.mkdir("one");
    let two = sb.mkdir("two");
    let three = sb.mkdir("three");
    sb.ctl_ok(&["add", "one", "two"]);
    sb.ctl_ok(&["add", "two", "--name", "second"]);
    sb.ctl_ok(&["add", "three", "--workspace", "other"]);
    let default_before = sb.roots("default");
    let other_before = sb.roots("other");
    let revision = status(&sb)["revision"].clone();
    assert_eq!(revision, json!(3));

    daemon.signal(Signal::TERM);
    assert_eq!(daemon.wait().code(), Some(0), "{}", daemon.stderr());
    drop(daemon);
    let restarted = sb.start_daemon();

    assert_eq!(
        sb.roots("default"),
        vec![
            json!({"uri": plain_uri(&one), "name": "one"}),
            json!({"uri": plain_uri(&two), "name": "second"}),
        ]
    );
    assert_eq!(sb.roots("default"), default_before);
    assert_eq!(sb.roots("other"), other_before);
    assert_eq!(uris(&other_before), vec![plain_uri(&three)]);
    let status = status(&sb);
    assert_eq!(status["pid"], json!(restarted.pid()), "{status}");
    assert_eq!(status["revision"], revision, "{status}");
}

#[test]
fn acknowledged_roots_survive_kill_9_and_the_stale_socket_is_reclaimed() {
    const N: usize = 25;
    let sb = Sandbox::new();
    let mut daemon = sb.start_daemon();
    let dirs: Vec<_> = (0..N)
        .map(|i| sb.mkdir(&format!("durable/d{i:02}")))
        .collect();
    // Some through rootsctl, the rest one request each on a raw connection, killing the daemon
    // the moment the last one is acknowledged.
    for dir in &dirs[..5] {
        sb.ctl_ok(&["add", dir.to_str().unwrap()]);
    }
    let mut client = sb.connect();
    for dir in &dirs[5..] {
        let response = client.request(
            "roots.add",
            json!({"workspace": "default", "roots": [{"uri": plain_uri(dir)}]}),
        );
        assert_eq!(
            response["result"]["added"].as_array().map(Vec::len),
            Some(1),
            "{response}"
        );
    }
    daemon.child.kill().expect("kill -9 rootsd");
    daemon.child.wait().expect("reap rootsd");
    drop(daemon);

    let meta = std::fs::symlink_metadata(&sb.socket).expect("the stale socket file remains");
    assert!(meta.file_type().is_socket());
    assert!(!answers(&sb.socket), "nothing answers on the stale socket");

    let restarted = sb.start_daemon();
    let listed = uris(&sb.roots("default"));
    let expected: Vec<String> = dirs.iter().map(|d| plain_uri(d)).collect();
    assert_eq!(listed, expected, "every acknowledged root survived");
    let status = status(&sb);
    assert_eq!(status["revision"], json!(N), "{status}");
    assert_eq!(status["pid"], json!(restarted.pid()), "{status}");
    // The reclaimed socket is a new one, and it is still private.
    let meta = std::fs::symlink_metadata(&sb.socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
}

#[test]
fn a_second_instance_is_refused_without_disturbing_the_first() {
    let sb = Sandbox::new();
    let first = sb.start_daemon();
    let dir = sb.mkdir("kept");
    sb.ctl_ok(&["add", "kept"]);
    let socket_inode = std::fs::metadata(&sb.socket).unwrap().ino();

    // Same socket and state directory.
    let output = output_within(&mut sb.rootsd());
    assert!(!output.status.success(), "a second rootsd started");
    let err = stderr_of(&output);
    assert!(err.contains("already running"), "{err}");
    assert!(
        err.contains(&format!("pid {}", first.pid())),
        "names the first pid: {err}"
    );
    assert!(
        err.contains(&sb.socket.display().to_string()),
        "names the first one's socket: {err}"
    );

    // Same state directory, another socket: refused too, and binds nothing.
    let elsewhere = sb.path().join("elsewhere").join("other.sock");
    let output = output_within(
        Command::new(bin("rootsd"))
            .arg("--socket")
            .arg(&elsewhere)
            .arg("--state-dir")
            .arg(&sb.state)
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .env_remove("NOTIFY_SOCKET"),
    );
    assert!(!output.status.success(), "a second rootsd started");
    let err = stderr_of(&output);
    assert!(err.contains("already running"), "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "{err}");
    assert!(err.contains(&sb.socket.display().to_string()), "{err}");
    assert!(
        !elsewhere.exists(),
        "the refused instance created {}",
        elsewhere.display()
    );

    // The first is untouched: same socket file, same pid, same roots, still serving.
    assert_eq!(std::fs::metadata(&sb.socket).unwrap().ino(), socket_inode);
    assert_eq!(status(&sb)["pid"], json!(first.pid()));
    assert_eq!(uris(&sb.roots("default")), vec![plain_uri(&dir)]);
    let another = sb.mkdir("another");
    sb.ctl_ok(&["add", "another"]);
    assert_eq!(
        uris(&sb.roots("default")),
        vec![plain_uri(&dir), plain_uri(&another)]
    );
}

#[test]
fn sigterm_and_sigint_exit_0_and_remove_the_socket() {
    for signal in [Signal::TERM, Signal::INT] {
        let sb = Sandbox::new();
        let mut daemon = sb.start_daemon();
        // An idle connection and a watcher must not hold the daemon up.
        let _idle = sb.connect();
        let mut watcher = sb.connect();
        let watching = watcher.request("watch", json!({}));
        assert!(watching.get("result").is_some(), "{watching}");
        sb.ctl_ok(&["add", sb.mkdir("x").to_str().unwrap()]);

        daemon.signal(signal);
        let exit = daemon.wait();
        assert_eq!(
            exit.code(),
            Some(0),
            "{signal:?}: {exit}: {}",
            daemon.stderr()
        );
        assert!(
            std::fs::symlink_metadata(&sb.socket).is_err(),
            "{signal:?} left the socket file behind"
        );
        // The lock is released: a new daemon starts on the same state directory.
        let _again = sb.start_daemon();
        assert_eq!(sb.roots("default").len(), 1);
    }
}

#[test]
fn the_socket_is_0600_in_a_0700_directory_whatever_the_umask() {
    let sb = Sandbox::new();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"umask 000 && exec "$0" "$@""#)
        .arg(bin("rootsd"))
        .arg("--socket")
        .arg(&sb.socket)
        .arg("--state-dir")
        .arg(&sb.state)
        .env_remove("ROOTSD_SOCKET")
        .env_remove("ROOTSD_STATE_DIR")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .env_remove("NOTIFY_SOCKET");
    let _daemon = sb.start_daemon_with(cmd);
    let socket = std::fs::symlink_metadata(&sb.socket).unwrap();
    assert!(socket.file_type().is_socket());
    // 0600, plus the sticky bit that keeps runtime-directory clean-ups away from it.
    assert_eq!(
        socket.permissions().mode() & 0o7777,
        0o1600,
        "socket mode {:o}",
        socket.permissions().mode()
    );
    let dir = std::fs::metadata(sb.socket.parent().unwrap()).unwrap();
    assert_eq!(
        dir.permissions().mode() & 0o7777,
        0o700,
        "directory mode {:o}",
        dir.permissions().mode()
    );
}

#[test]
fn socket_and_state_dir_can_come_from_the_environment() {
    let sb = Sandbox::new();
    let mut cmd = Command::new(bin("rootsd"));
    cmd.env("ROOTSD_SOCKET", &sb.socket)
        .env("ROOTSD_STATE_DIR", &sb.state)
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .env_remove("NOTIFY_SOCKET");
    let daemon = sb.start_daemon_with(cmd);
    let status = status(&sb);
    assert_eq!(status["pid"], json!(daemon.pid()), "{status}");
    assert_eq!(
        status["socket"],
        json!(sb.socket.to_str().unwrap()),
        "{status}"
    );
    assert_eq!(
        status["state_dir"],
        json!(sb.state.to_str().unwrap()),
        "{status}"
    );
    assert!(sb.state.join("rootsd.lock").is_file());
}

/// Asserts that rootsd refuses to start on `sb`'s socket path, saying which path, and leaves the
/// file there alone. Fails as soon as the file is replaced rather than waiting for a daemon that
/// took it over to exit.
fn assert_refuses_foreign_socket(sb: &Sandbox) {
    let identity = |what: &str| {
        let meta = std::fs::symlink_metadata(&sb.socket)
            .unwrap_or_else(|e| panic!("{what}: the foreign file at the socket path is gone: {e}"));
        (
            meta.dev(),
            meta.ino(),
            meta.mode(),
            meta.ctime(),
            meta.ctime_nsec(),
        )
    };
    let before = identity("before");
    let mut child = sb
        .rootsd()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rootsd");
    let stderr = lines_of(child.stderr.take().unwrap());
    let mut child = Reaped(child);
    let status = eventually(
        "rootsd to give up on the foreign socket file",
        PATIENCE,
        || {
            assert_eq!(
                identity("while rootsd starts"),
                before,
                "rootsd replaced the foreign file with its own socket"
            );
            child.0.try_wait().unwrap().ok_or("rootsd still runs")
        },
    );
    let err = stderr.iter().collect::<Vec<_>>().join("\n");
    assert!(
        !status.success(),
        "rootsd started on a foreign socket file: {err}"
    );
    assert!(
        err.contains(&sb.socket.display().to_string()),
        "the message names the socket path: {err}"
    );
    assert_eq!(identity("after"), before, "the foreign file was replaced");
}

fn make_socket_dir(sb: &Sandbox) {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(sb.socket.parent().unwrap())
        .unwrap();
}

#[test]
fn a_regular_file_at_the_socket_path_is_not_unlinked() {
    let sb = Sandbox::new();
    make_socket_dir(&sb);
    std::fs::write(&sb.socket, "precious").unwrap();
    assert_refuses_foreign_socket(&sb);
    assert_eq!(std::fs::read_to_string(&sb.socket).unwrap(), "precious");
}

#[test]
fn a_closed_foreign_socket_is_not_unlinked() {
    let sb = Sandbox::new();
    make_socket_dir(&sb);
    drop(UnixListener::bind(&sb.socket).unwrap());
    assert_refuses_foreign_socket(&sb);
    assert!(
        std::fs::symlink_metadata(&sb.socket)
            .unwrap()
            .file_type()
            .is_socket()
    );
}

#[test]
fn a_live_foreign_socket_is_not_unlinked() {
    let sb = Sandbox::new();
    make_socket_dir(&sb);
    let listener = UnixListener::bind(&sb.socket).unwrap();
    assert_refuses_foreign_socket(&sb);
    // The foreign listener still works.
    let _client = UnixStream::connect(&sb.socket).unwrap();
    listener
        .accept()
        .expect("the foreign listener still accepts");
}

#[test]
fn a_foreign_socket_is_not_unlinked_after_rootsd_served_that_path_before() {
    let sb = Sandbox::new();
    // A new socket file often gets the inode number its predecessor just freed, which is
    // exactly when a daemon that recognises "its" socket by inode is fooled; a few rounds make
    // that likely.
    for round in 0..8 {
        if round > 0 {
            std::fs::remove_file(&sb.socket).unwrap();
        }
        let mut daemon = sb.start_daemon();
        daemon.signal(Signal::TERM);
        assert_eq!(daemon.wait().code(), Some(0));
        drop(daemon);
        assert!(std::fs::symlink_metadata(&sb.socket).is_err());
        // Another program binds the same path, then goes away without removing its socket.
        drop(UnixListener::bind(&sb.socket).unwrap());
        assert_refuses_foreign_socket(&sb);
    }
}

#[test]
fn status_json_reports_the_daemon_and_its_counts() {
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    let fresh = status(&sb);
    assert_eq!(fresh["pid"], json!(daemon.pid()), "{fresh}");
    assert_eq!(fresh["revision"], json!(0), "{fresh}");
    assert_eq!(fresh["roots"], json!(0), "{fresh}");
    assert_eq!(fresh["workspaces"], json!(0), "{fresh}");

    sb.mkdir("a");
    sb.mkdir("b");
    sb.mkdir("c");
    sb.ctl_ok(&["add", "a", "b"]);
    sb.ctl_ok(&["add", "c", "-w", "other"]);
    let _extra = sb.connect();
    let s = status(&sb);
    assert_eq!(s["pid"], json!(daemon.pid()), "{s}");
    assert_eq!(s["revision"], json!(2), "{s}");
    assert_eq!(s["roots"], json!(3), "{s}");
    assert_eq!(s["workspaces"], json!(2), "{s}");
    assert_eq!(s["sessions"], json!(0), "{s}");
    assert_eq!(
        s["protocol_version"],
        json!(rootsd_tests::PROTOCOL_VERSION),
        "{s}"
    );
    assert_eq!(s["socket"], json!(sb.socket.to_str().unwrap()), "{s}");
    assert_eq!(s["state_dir"], json!(sb.state.to_str().unwrap()), "{s}");
    assert_eq!(s["socket_activated"], json!(false), "{s}");
    // This rootsctl and the extra connection.
    assert!(s["clients"].as_u64().unwrap() >= 2, "{s}");
    assert!(
        s["daemon_version"].as_str().is_some_and(|v| !v.is_empty()),
        "{s}"
    );
    assert!(s["uptime_secs"].is_u64(), "{s}");

    // The table form says the same.
    let table = sb.ctl_ok(&["status"]);
    assert!(table.contains(&daemon.pid().to_string()), "{table}");
    assert!(table.contains(&sb.socket.display().to_string()), "{table}");
    assert_eq!(
        ctl_json(&sb, &["sessions", "--json"]),
        json!({"sessions": []})
    );
}

#[test]
fn the_daemon_keeps_serving_after_a_client_vanishes_mid_request() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    {
        let mut client = RawClient::connect(&sb.socket);
        client.send_line(&rootsd_tests::hello_line(1));
        client.send_line(r#"{"jsonrpc":"2.0","id":2,"method":"status","params":{}}"#);
        // Dropped without reading either response.
    }
    let value: Value = status(&sb);
    assert_eq!(value["roots"], json!(0));
    assert_exit(&sb.ctl(&["list"]), 0, "list");
}

#[test]
fn a_start_that_fails_after_binding_removes_its_socket_so_the_next_start_succeeds() {
    let sb = Sandbox::new();
    // A directory where rootsd records its socket's identity makes the start fail right after
    // the socket is bound.
    let record = sb.state.join("socket.id");
    std::fs::create_dir_all(&record).unwrap();
    let output = output_within(&mut sb.rootsd());
    assert_exit(&output, 1, "rootsd whose socket record cannot be written");
    let err = stderr_of(&output);
    assert!(err.contains("record the socket identity"), "{err}");
    assert!(
        std::fs::symlink_metadata(&sb.socket).is_err(),
        "the failed start left its socket behind: {err}"
    );

    std::fs::remove_dir(&record).unwrap();
    let daemon = sb.start_daemon();
    assert_eq!(status(&sb)["pid"], json!(daemon.pid()));
}

#[test]
fn refusing_a_shared_socket_directory_says_so_once_advises_a_private_one_and_creates_no_store() {
    let sb = Sandbox::new();
    // `/tmp` itself: root's (or, for a user, another user's), sticky and open to everyone, as a
    // newcomer's `rootsd --socket /tmp/rootsd.sock` meets it.
    let socket = std::path::Path::new("/tmp").join(format!(
        "{}.sock",
        sb.path().file_name().unwrap().to_str().unwrap()
    ));
    let mut cmd = Command::new(bin("rootsd"));
    cmd.arg("--socket")
        .arg(&socket)
        .arg("--state-dir")
        .arg(&sb.state)
        .env("RUST_LOG", "info")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .env_remove("NOTIFY_SOCKET");
    let output = output_within(&mut cmd);
    assert_exit(&output, 1, "rootsd with its socket in /tmp");
    let err = stderr_of(&output);
    assert_eq!(
        err.matches("can be written by other users").count(),
        1,
        "the error is said once: {err}"
    );
    assert!(
        err.starts_with("rootsd: error: the socket directory /tmp "),
        "{err}"
    );
    assert!(
        !err.contains("chmod"),
        "no advice to open or close /tmp: {err}"
    );
    for advice in [
        "--socket",
        "$XDG_RUNTIME_DIR/rootsd/rootsd.sock",
        "/run/rootsd/rootsd.sock",
    ] {
        assert!(err.contains(advice), "advises {advice}: {err}");
    }
    assert!(
        !sb.state.exists(),
        "rootsd created its state directory before refusing the socket"
    );
    assert!(!socket.exists(), "rootsd bound {} anyway", socket.display());

    // A directory of one's own that is not shared may be closed instead.
    let sb = Sandbox::new();
    let own = sb.socket.parent().unwrap();
    std::fs::create_dir(own).unwrap();
    std::fs::set_permissions(own, std::fs::Permissions::from_mode(0o770)).unwrap();
    let output = output_within(&mut sb.rootsd());
    assert_exit(&output, 1, "rootsd with its socket in a 0770 directory");
    let err = stderr_of(&output);
    assert!(
        err.contains(&format!("(chmod go-w {})", own.display())),
        "{err}"
    );
    assert!(!sb.state.exists(), "{err}");
}

#[test]
fn a_socket_directory_open_to_others_is_warned_about_once() {
    let sb = Sandbox::new();
    let dir = sb.socket.parent().unwrap();
    std::fs::create_dir(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut daemon = sb.start_daemon();
    daemon.signal(Signal::TERM);
    let status = daemon.wait();
    let err = daemon.stderr();
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(
        err.matches("the socket directory is open to other users")
            .count(),
        1,
        "{err}"
    );
}
