//! rootsctl's own behaviour: autostart, exit statuses, watch, pipes and completions.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use rootsd_tests::{PATIENCE, Sandbox, answers, eventually, output_within};
use serde_json::{Value, json};

use crate::support::{
    AutostartGuard, Reaped, assert_exit, ctl_json, lines_of, plain_uri, run_into_closed_pipe,
    spawn_watch, status, stderr_of, stdout_of, uris,
};

#[test]
fn autostart_starts_the_daemon_on_demand() {
    let sb = Sandbox::new();
    let _guard = AutostartGuard::new(&sb);
    let dir = sb.mkdir("auto");
    assert!(!answers(&sb.socket));

    let output = output_within(
        sb.rootsctl()
            .env_remove("ROOTSD_NO_AUTOSTART")
            .args(["add", "auto"]),
    );
    assert_exit(&output, 0, "add with autostart");
    assert!(
        answers(&sb.socket),
        "the daemon stays up after rootsctl exits"
    );

    let first = status(&sb);
    assert!(first["pid"].as_u64().is_some_and(|p| p > 0), "{first}");
    assert_eq!(
        first["socket"],
        json!(sb.socket.to_str().unwrap()),
        "{first}"
    );
    // The daemon took its state directory from rootsctl's environment.
    assert_eq!(
        first["state_dir"],
        json!(sb.state.to_str().unwrap()),
        "{first}"
    );
    assert!(
        sb.state.join("rootsd.log").is_file(),
        "it logs to the state directory"
    );
    assert_eq!(uris(&sb.roots("default")), vec![plain_uri(&dir)]);

    // Once it runs, autostarting commands use it rather than starting another.
    let output = output_within(
        sb.rootsctl()
            .env_remove("ROOTSD_NO_AUTOSTART")
            .args(["list", "--json"]),
    );
    assert_exit(&output, 0, "list with autostart");
    assert_eq!(status(&sb)["pid"], first["pid"]);
}

#[test]
fn an_autostart_finding_the_running_daemons_socket_gone_says_so_at_once_and_how_to_fix_it() {
    let sb = Sandbox::new();
    let _guard = AutostartGuard::new(&sb);
    let daemon = sb.start_daemon();
    std::fs::remove_file(&sb.socket).unwrap();
    let started = std::time::Instant::now();
    let output = output_within(
        sb.rootsctl()
            .env_remove("ROOTSD_NO_AUTOSTART")
            .args(["status"]),
    );
    let took = started.elapsed();
    assert_exit(&output, 3, "status with the daemon's socket gone");
    let said = stderr_of(&output);
    assert!(
        said.contains(&format!("rootsd (pid {}) already runs", daemon.pid()))
            && said.contains("is gone")
            && said.contains(&format!("kill -HUP {}", daemon.pid())),
        "{said}"
    );
    assert!(!said.contains("still starting"), "{said}");
    // Before, it waited out the whole start timeout (10 s).
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // And what it says works.
    daemon.signal(rustix::process::Signal::HUP);
    eventually("the daemon to bind its socket anew", PATIENCE, || {
        if answers(&sb.socket) {
            Ok(())
        } else {
            Err("no answer")
        }
    });
    assert_eq!(status(&sb)["pid"], json!(daemon.pid()));
}

#[test]
fn an_autostarted_daemon_that_cannot_start_is_reported_at_once_with_its_reason() {
    use std::os::unix::fs::PermissionsExt as _;
    let sb = Sandbox::new();
    let _guard = AutostartGuard::new(&sb);
    let open = sb.mkdir("open");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let socket = open.join("rootsd.sock");
    let started = std::time::Instant::now();
    let output = output_within(
        sb.rootsctl()
            .env_remove("ROOTSD_NO_AUTOSTART")
            .env("ROOTSD_SOCKET", &socket)
            .args(["status"]),
    );
    let took = started.elapsed();
    assert_exit(&output, 3, "status with a socket directory rootsd refuses");
    let said = stderr_of(&output);
    assert!(
        said.contains("started rootsd for")
            && said.contains("exited (exit status: 1)")
            && said.contains("can be written by other users"),
        "{said}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn concurrent_autostarts_share_one_daemon() {
    const N: usize = 4;
    let sb = Sandbox::new();
    let _guard = AutostartGuard::new(&sb);
    let dirs: Vec<PathBuf> = (0..N).map(|i| sb.mkdir(&format!("race/{i}"))).collect();
    let runs: Vec<_> = dirs
        .iter()
        .map(|dir| {
            let mut cmd = sb.rootsctl();
            cmd.env_remove("ROOTSD_NO_AUTOSTART").arg("add").arg(dir);
            std::thread::spawn(move || output_within(&mut cmd))
        })
        .collect();
    for run in runs {
        assert_exit(&run.join().unwrap(), 0, "a racing autostart");
    }
    let listed: BTreeSet<String> = uris(&sb.roots("default")).into_iter().collect();
    let expected: BTreeSet<String> = dirs.iter().map(|d| plain_uri(d)).collect();
    assert_eq!(listed, expected);
    // The lock records the one daemon that serves, and where: what clients find it by.
    let lock: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sb.state.join("rootsd.lock")).unwrap())
            .expect("the lock file holds the daemon's record");
    assert_eq!(lock["pid"], status(&sb)["pid"], "{lock}");
    assert_eq!(lock["socket"], serde_json::json!(sb.socket), "{lock}");
}

#[test]
fn no_autostart_flag_exits_3_saying_rootsd_is_not_running_at_the_socket() {
    let sb = Sandbox::new();
    let dir = sb.mkdir("d");
    let expected = format!("rootsd is not running at {}", sb.socket.display());
    for args in [
        vec!["--no-autostart", "list"],
        vec!["status", "--no-autostart"],
        vec!["--no-autostart", "add", dir.to_str().unwrap()],
        vec!["--no-autostart", "remove", "d"],
        vec!["--no-autostart", "watch"],
    ] {
        let output = output_within(sb.rootsctl().env_remove("ROOTSD_NO_AUTOSTART").args(&args));
        assert_exit(&output, 3, &format!("{args:?}"));
        let err = stderr_of(&output);
        assert!(err.contains(&expected), "{args:?}: {err}");
    }
    assert!(
        !sb.socket.exists() && !sb.state.exists(),
        "no daemon was started"
    );

    // A stale socket file left by a dead daemon is no daemon either.
    std::fs::create_dir_all(sb.socket.parent().unwrap()).unwrap();
    drop(std::os::unix::net::UnixListener::bind(&sb.socket).unwrap());
    let output = output_within(
        sb.rootsctl()
            .env_remove("ROOTSD_NO_AUTOSTART")
            .args(["--no-autostart", "list"]),
    );
    assert_exit(&output, 3, "list with a stale socket");
    assert!(
        stderr_of(&output).contains(&expected),
        "{}",
        stderr_of(&output)
    );
}

#[test]
fn no_autostart_env_set_to_1_exits_3() {
    let sb = Sandbox::new();
    // Sandbox::rootsctl sets ROOTSD_NO_AUTOSTART=1, as the help text documents.
    let output = sb.ctl(&["list"]);
    assert_exit(&output, 3, "ROOTSD_NO_AUTOSTART=1 rootsctl list");
    let err = stderr_of(&output);
    assert!(
        err.contains(&format!("rootsd is not running at {}", sb.socket.display())),
        "{err}"
    );
    assert!(
        !sb.socket.exists() && !sb.state.exists(),
        "no daemon was started"
    );
}

#[test]
fn usage_errors_exit_2() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    sb.mkdir("a");
    sb.mkdir("b");
    for (args, says) in [
        (vec!["frobnicate"], "frobnicate"),
        (vec!["add"], "<PATH|URI>"),
        (vec!["add", "a", "b", "--name", "x"], "--name"),
        (vec!["list", "--workspace", "a b"], "may only contain"),
        (vec!["list", "--all", "--workspace", "default"], "--all"),
        (vec!["completions", "tcsh"], "tcsh"),
    ] {
        let output = sb.ctl(&args);
        assert_exit(&output, 2, &format!("{args:?}"));
        let err = stderr_of(&output);
        assert!(err.contains(says), "{args:?} explains itself: {err}");
    }
    assert_eq!(status(&sb)["revision"], json!(0), "nothing was changed");
}

/// Waits for the next line within PATIENCE.
#[track_caller]
fn next_line(lines: &Receiver<String>, what: &str) -> String {
    match lines.recv_timeout(PATIENCE) {
        Ok(line) => line,
        Err(RecvTimeoutError::Timeout) => panic!("no line for {what} in time"),
        Err(RecvTimeoutError::Disconnected) => panic!("watch exited before {what}"),
    }
}

/// Makes changes to `workspace` (adding `watched/<workspace>/<n>`) until the watcher prints a
/// line, as it subscribes asynchronously; returns that line and the roots added so far.
fn first_change(sb: &Sandbox, lines: &Receiver<String>, workspace: &str) -> (String, Vec<Value>) {
    let mut added = Vec::new();
    let line = eventually("watch to print a change", PATIENCE, || {
        let name = added.len().to_string();
        let dir = sb.mkdir(&format!("watched/{workspace}/{name}"));
        sb.ctl_ok(&["add", dir.to_str().unwrap(), "-w", workspace]);
        added.push(json!({"uri": plain_uri(&dir), "name": name}));
        match lines.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => Err(format!("nothing after {} changes", added.len())),
            Err(RecvTimeoutError::Disconnected) => panic!("watch exited"),
        }
    });
    (line, added)
}

#[track_caller]
fn parse_change(line: &str) -> Value {
    let value: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("watch printed {line:?}: {e}"));
    let keys: BTreeSet<&str> = value
        .as_object()
        .expect("an object per line")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["workspace", "revision", "roots"]),
        "{line}"
    );
    value
}

#[test]
fn watch_json_prints_a_line_for_each_change() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut child = sb
        .rootsctl()
        .args(["watch", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rootsctl watch");
    let lines = lines_of(child.stdout.take().unwrap());
    let _watch = Reaped(child);

    let (line, added) = first_change(&sb, &lines, "default");
    let mut change = parse_change(&line);
    // Changes made after the watcher subscribed come in order, each with the whole list.
    let mut revision = change["revision"].as_u64().unwrap() as usize;
    assert!((1..=added.len()).contains(&revision), "{line}");
    loop {
        assert_eq!(change["workspace"], json!("default"), "{change}");
        assert_eq!(change["roots"], json!(added[..revision]), "{change}");
        if revision == added.len() {
            break;
        }
        change = parse_change(&next_line(&lines, "a queued change"));
        revision += 1;
        assert_eq!(change["revision"], json!(revision), "{change}");
    }

    // A removal is a change too.
    let gone = added[0]["uri"].as_str().unwrap();
    sb.ctl_ok(&["remove", gone]);
    let change = parse_change(&next_line(&lines, "a removal"));
    assert_eq!(change["revision"], json!(revision + 1), "{change}");
    assert_eq!(change["roots"], json!(added[1..]), "{change}");
}

#[test]
fn watch_workspace_reports_only_that_workspace() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut child = sb
        .rootsctl()
        .args(["watch", "--json", "--workspace", "alpha"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rootsctl watch");
    let lines = lines_of(child.stdout.take().unwrap());
    let _watch = Reaped(child);

    let (line, added) = first_change(&sb, &lines, "alpha");
    // Drain what the bootstrap queued: one line per add after the subscription.
    let mut seen = parse_change(&line)["revision"].as_u64().unwrap();
    while seen < added.len() as u64 {
        seen = parse_change(&next_line(&lines, "a queued change"))["revision"]
            .as_u64()
            .unwrap();
    }
    sb.mkdir("beta-dir");
    sb.mkdir("alpha-dir");
    sb.ctl_ok(&["add", "beta-dir", "-w", "beta"]);
    let alpha = ctl_json(&sb, &["add", "alpha-dir", "-w", "alpha", "--json"]);
    let change = parse_change(&next_line(&lines, "alpha's change"));
    assert_eq!(
        change["workspace"],
        json!("alpha"),
        "beta's change leaked: {change}"
    );
    assert_eq!(change["revision"], alpha["revision"], "{change}");
}

#[test]
fn watch_prints_a_readable_line_per_change() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let (lines, notes, _watch) = spawn_watch(&sb);
    // Without --json it says on stderr once it is subscribed.
    let note = next_line(&notes, "the watching note");
    assert!(
        note.contains("watching every workspace from revision 0"),
        "{note}"
    );

    let dir = sb.mkdir("seen");
    sb.ctl_ok(&["add", "seen"]);
    let line = next_line(&lines, "the add");
    assert!(line.contains("revision 1"), "{line}");
    assert!(line.contains("default"), "{line}");
    assert!(line.contains(&format!("+{}", dir.display())), "{line}");
    // A rename is spelled out: `~/tmp/…` would read as a directory in someone's home.
    sb.ctl_ok(&["add", "seen", "--name", "main app"]);
    let line = next_line(&lines, "the rename");
    assert!(
        line.ends_with(&format!("  renamed {} (seen → main app)", dir.display())),
        "{line}"
    );
    assert!(!line.contains('~'), "{line}");
    sb.ctl_ok(&["remove", "seen"]);
    let line = next_line(&lines, "the removal");
    assert!(line.contains("revision 3"), "{line}");
    assert!(line.contains(&format!("-{}", dir.display())), "{line}");
}

#[test]
fn a_closed_stdout_exits_0_quietly() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    for i in 0..3 {
        sb.mkdir(&format!("p{i}"));
        sb.ctl_ok(&["add", &format!("p{i}")]);
    }
    for args in [
        vec!["list"],
        vec!["list", "--all"],
        vec!["status"],
        vec!["status", "--json"],
        vec!["workspaces"],
        vec!["sessions"],
        vec!["add", "p0"],
    ] {
        let output = run_into_closed_pipe(sb.rootsctl().args(&args));
        assert_exit(&output, 0, &format!("rootsctl {args:?} | (closed)"));
        assert_eq!(stderr_of(&output), "", "{args:?} complained");
    }
}

#[test]
fn a_long_json_list_into_a_closed_stdout_exits_0_quietly() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    // Enough output that it cannot sit in a buffer until exit.
    let dirs: Vec<String> = (0..60)
        .map(|i| {
            let name = format!("a-directory-with-a-rather-long-name-{i:03}");
            sb.mkdir(&name);
            name
        })
        .collect();
    let mut args = vec!["add"];
    args.extend(dirs.iter().map(String::as_str));
    sb.ctl_ok(&args);
    let full = sb.ctl_ok(&["list", "--json"]);
    assert!(full.len() > 4096, "{} bytes", full.len());
    for args in [vec!["list", "--json"], vec!["list", "--all", "--json"]] {
        let output = run_into_closed_pipe(sb.rootsctl().args(&args));
        assert_exit(&output, 0, &format!("rootsctl {args:?} | (closed)"));
        assert_eq!(stderr_of(&output), "", "{args:?} complained");
    }
}

#[test]
fn completions_into_a_closed_stdout_exit_0_quietly() {
    let sb = Sandbox::new();
    let output = run_into_closed_pipe(sb.rootsctl().args(["completions", "bash"]));
    assert_exit(&output, 0, "rootsctl completions bash | (closed)");
    assert_eq!(stderr_of(&output), "");
}

#[test]
fn completions_bash_prints_a_script() {
    let sb = Sandbox::new();
    let output = sb.ctl(&["completions", "bash"]);
    assert_exit(&output, 0, "completions bash");
    let script = stdout_of(&output);
    assert!(script.contains("complete "), "{script}");
    assert!(script.contains("rootsctl"), "{script}");
    for word in [
        "add",
        "remove",
        "list",
        "workspaces",
        "status",
        "watch",
        "--workspace",
    ] {
        assert!(script.contains(word), "the script completes {word}");
    }
    // It is valid bash, and it registers a completion for rootsctl.
    let file = sb.path().join("rootsctl.bash");
    std::fs::write(&file, &script).unwrap();
    let check = output_within(
        std::process::Command::new("bash")
            .arg("-c")
            .arg(r#"source "$1" && complete -p rootsctl"#)
            .arg("bash")
            .arg(&file),
    );
    assert_exit(&check, 0, "sourcing the completion script");
    assert!(
        stdout_of(&check).contains("rootsctl"),
        "{}",
        stdout_of(&check)
    );

    for shell in ["zsh", "fish"] {
        let output = sb.ctl(&["completions", shell]);
        assert_exit(&output, 0, &format!("completions {shell}"));
        assert!(stdout_of(&output).contains("rootsctl"), "{shell}");
    }
}
