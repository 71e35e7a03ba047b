//! rootsd under (emulated) systemd: socket activation, `Type=notify`, the watchdog, SIGHUP.

use std::os::unix::fs::FileTypeExt;
use std::process::Command;
use std::time::{Duration, Instant};

use rootsd_tests::{Sandbox, answers, bin};
use rustix::process::Signal;
use serde_json::{Value, json};

use crate::support::{
    NotifySocket, activate, listening, socket_activate, start, status_of, systemd_tool,
    with_late_listen,
};

fn status_json(sb: &Sandbox) -> Value {
    let text = sb.ctl_ok(&["status", "--json"]);
    serde_json::from_str(&text).expect("status --json prints JSON")
}

/// systemd-socket-activate creates its socket file (bind) before it listens, and a connection in
/// between is refused: a test that connected as soon as the file existed failed so under load.
/// Holding its `listen()` back for a second makes that moment certain; the shared helper still
/// returns only once a single connection, made without retrying, is accepted.
#[test]
fn the_tests_connect_once_the_activator_listens_not_once_its_socket_file_exists() {
    let sb = Sandbox::new();
    let late = with_late_listen(&socket_activate(&sb, &[]), Duration::from_secs(1));
    let mut rootsd = listening(&sb, late);
    let first = std::os::unix::net::UnixStream::connect(&sb.socket);
    assert!(
        first.is_ok(),
        "the first connection after the helper returned failed: {first:?}"
    );
    rootsd.poll("rootsd to answer on the inherited socket", || {
        answers(&sb.socket)
    });
}

#[test]
fn a_first_connection_starts_rootsd_which_serves_the_inherited_socket_and_leaves_it_on_exit() {
    let sb = Sandbox::new();
    let rootsd = activate(&sb, socket_activate(&sb, &[]));

    let status = status_json(&sb);
    assert_eq!(status["socket_activated"], json!(true), "{status}");
    // systemd-socket-activate execs rootsd, so the pid it was started as is rootsd's.
    assert_eq!(status["pid"], json!(rootsd.daemon.pid()), "{status}");
    assert_eq!(
        status["socket"],
        json!(sb.socket.to_str().unwrap()),
        "{status}"
    );
    sb.mkdir("project");
    sb.ctl_ok(&["add", "project"]);
    assert_eq!(sb.roots("default").len(), 1);

    rootsd.stop();
    let meta = std::fs::symlink_metadata(&sb.socket)
        .expect("the socket file systemd created is left in place");
    assert!(meta.file_type().is_socket());
    assert!(!answers(&sb.socket), "nothing listens once rootsd is gone");
}

#[test]
fn notify_socket_hears_ready_then_status_as_counts_change_then_stopping() {
    let sb = Sandbox::new();
    let mut notify = NotifySocket::bind(&sb);
    let mut cmd = sb.rootsd();
    cmd.env("NOTIFY_SOCKET", &notify.path);
    let rootsd = start(&sb, cmd);

    notify.wait_for_line("READY=1");
    notify.wait_for("the initial counts", |d| {
        status_of(d).is_some_and(|s| s.starts_with("serving 0 roots in 0 workspaces to 0 sessions"))
    });

    // A change shows up at once, not at the next tick of some timer.
    sb.mkdir("one");
    let changed = Instant::now();
    sb.ctl_ok(&["add", "one"]);
    notify.wait_for("one root", |d| {
        status_of(d).is_some_and(|s| s.starts_with("serving 1 roots in 1 workspaces"))
    });
    let took = changed.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "the status line took {took:?} to follow a change"
    );

    // Sessions come and go.
    let mut session = sb.connect();
    let registered = session.request(
        "session.register",
        json!({"workspace": "default", "label": "test", "pid": std::process::id(), "list_changed": true}),
    );
    assert!(registered.get("result").is_some(), "{registered}");
    notify.wait_for("one session", |d| {
        status_of(d).is_some_and(|s| s.contains("to 1 sessions"))
    });
    drop(session);
    notify.wait_for("no session", |d| {
        status_of(d).is_some_and(|s| s.contains("to 0 sessions"))
    });

    let log = rootsd.stop();
    notify.wait_for_line("STOPPING=1");
    assert!(log.contains("rootsd stopped"), "{log}");
}

#[test]
fn under_socket_activation_notify_and_the_watchdog_reach_systemd() {
    let sb = Sandbox::new();
    let mut notify = NotifySocket::bind(&sb);
    // WATCHDOG_PID must be rootsd's pid. The shell execs systemd-socket-activate, which execs
    // rootsd, so the shell's own pid ($$) is the one.
    let mut shell = Command::new("/bin/sh");
    shell
        .arg("-c")
        .arg(
            r#"exec "$0" -l "$1" -E RUST_LOG=info -E NOTIFY_SOCKET="$2" -E WATCHDOG_USEC=200000 -E WATCHDOG_PID=$$ "$3" --socket "$1" --state-dir "$4""#,
        )
        .arg(systemd_tool("systemd-socket-activate"))
        .arg(&sb.socket)
        .arg(&notify.path)
        .arg(bin("rootsd"))
        .arg(&sb.state);
    let rootsd = activate(&sb, shell);

    notify.wait_for_line("READY=1");
    // Two pings at least: the watchdog is fed repeatedly, not once.
    notify.wait_for_line("WATCHDOG=1");
    notify.wait_for_line("WATCHDOG=1");
    assert_eq!(status_json(&sb)["socket_activated"], json!(true));

    let log = rootsd.stop();
    notify.wait_for_line("STOPPING=1");
    assert!(log.contains("systemd's watchdog is on"), "{log}");
}

#[test]
fn sighup_rechecks_the_socket_and_leaves_the_daemon_serving() {
    let sb = Sandbox::new();
    let mut rootsd = start(&sb, sb.rootsd());

    rootsd.daemon.signal(Signal::HUP);
    rootsd.wait_for_log("SIGHUP: reloaded; the socket file is in place");
    sb.mkdir("after-hup");
    sb.ctl_ok(&["add", "after-hup"]);
    assert_eq!(status_json(&sb)["pid"], json!(rootsd.daemon.pid()));

    // The one thing a reload can find wrong: the socket file went away under the daemon, which
    // clients then cannot reach; SIGHUP binds it anew.
    std::fs::remove_file(&sb.socket).unwrap();
    assert!(
        !sb.ctl(&["status"]).status.success(),
        "reachable without its socket file"
    );
    rootsd.daemon.signal(Signal::HUP);
    let said = rootsd.wait_for_log("SIGHUP: reloaded;");
    assert!(said.contains("bound it anew"), "{said}");
    assert!(
        rootsd.daemon.child.try_wait().unwrap().is_none(),
        "SIGHUP stopped rootsd"
    );
    sb.mkdir("after-rebind");
    sb.ctl_ok(&["add", "after-rebind"]);
    assert_eq!(status_json(&sb)["pid"], json!(rootsd.daemon.pid()));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&sb.socket).unwrap().permissions(),
    );
    assert_eq!(
        mode & 0o777,
        0o600,
        "the socket bound anew is private like the first"
    );
    // Its clean-up follows the new file: at exit it is removed.
    rootsd.stop();
    assert!(!sb.socket.exists(), "the socket bound anew was left behind");
}

#[test]
fn sighup_under_socket_activation_keeps_serving_and_sigterm_exits_0() {
    let sb = Sandbox::new();
    let mut rootsd = activate(&sb, socket_activate(&sb, &[]));

    rootsd.daemon.signal(Signal::HUP);
    rootsd.wait_for_log("SIGHUP: reloaded; the socket file is in place");
    assert_eq!(status_json(&sb)["socket_activated"], json!(true));

    rootsd.stop();
    assert!(sb.socket.exists(), "the socket file systemd owns is kept");
}

#[test]
fn a_wrong_listen_pid_is_not_adopted() {
    // systemd sets LISTEN_PID to the service's pid; fds meant for another process must be left
    // alone, and rootsd binds its own socket instead.
    let sb = Sandbox::new();
    let mut cmd = sb.rootsd();
    cmd.env("LISTEN_FDS", "1").env("LISTEN_PID", "1");
    let rootsd = start(&sb, cmd);
    let status = status_json(&sb);
    assert_eq!(status["socket_activated"], json!(false), "{status}");
    rootsd.stop();
}
