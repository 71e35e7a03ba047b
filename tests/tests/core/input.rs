//! What rootsctl accepts on its command line and in its environment, and how it shows what came
//! from outside: empty arguments and settings are refused by name, names that are not UTF-8
//! work, and no name, label or server identity can forge a row or send a terminal sequence.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc::Receiver;

use rootsd_tests::{PATIENCE, Sandbox, bin, output_within};
use serde_json::json;

use crate::support::{Reaped, assert_exit, spawn_watch, status, stderr_of, stdout_of};

/// Asserts that `text` holds no control character but the newlines ending its lines.
#[track_caller]
fn assert_no_controls(text: &str, what: &str) {
    assert!(
        !text
            .chars()
            .any(|c| c != '\n' && (c.is_control() || c == '\u{202e}')),
        "{what} printed a raw control character: {text:?}"
    );
}

/// Creates a directory with an arbitrary byte name inside the sandbox; returns its real path.
fn mkdir_bytes(sb: &Sandbox, name: &[u8]) -> PathBuf {
    let path = sb.path().join(OsStr::from_bytes(name));
    std::fs::create_dir(&path).expect("create a directory with an awkward name");
    path.canonicalize().expect("canonicalize it")
}

#[test]
fn empty_and_blank_arguments_are_usage_errors_naming_their_position() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    sb.mkdir("a");
    for (args, says) in [
        (vec!["add", ""], "PATH|URI argument 1 is empty"),
        (vec!["add", "a", ""], "PATH|URI argument 2 is empty"),
        (
            vec!["add", "a", "  "],
            "PATH|URI argument 2 is only whitespace",
        ),
        (vec!["add", "a", "--name", ""], "--name is empty"),
        (vec!["remove", ""], "PATH|URI|NAME argument 1 is empty"),
        (
            vec!["rm", "a", "\t"],
            "PATH|URI|NAME argument 2 is only whitespace",
        ),
    ] {
        let output = sb.ctl(&args);
        assert_exit(&output, 2, &format!("{args:?}"));
        let err = stderr_of(&output);
        assert!(err.contains(says), "{args:?} explains itself: {err}");
    }
    assert_eq!(status(&sb)["revision"], json!(0), "nothing was changed");
    // A directory whose name is blank can still be named.
    sb.mkdir(" ");
    sb.ctl_ok(&["add", "./ "]);
    assert_eq!(sb.roots("default").len(), 1);
}

#[test]
fn an_empty_rootsd_socket_or_state_dir_is_refused_naming_the_variable() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    for (variable, args) in [
        ("ROOTSD_SOCKET", vec!["list"]),
        ("ROOTSD_SOCKET", vec!["status", "--json"]),
        ("ROOTSD_STATE_DIR", vec!["list"]),
        ("ROOTSD_BIN", vec!["list"]),
    ] {
        let output = output_within(sb.rootsctl().env(variable, "").args(&args));
        assert_exit(&output, 2, &format!("{variable}= rootsctl {args:?}"));
        let err = stderr_of(&output);
        assert!(
            err.contains(&format!("{variable} is set but empty: unset it")),
            "{variable}: {err}"
        );
        assert!(stdout_of(&output).is_empty(), "{}", stdout_of(&output));
    }
    let output = output_within(sb.rootsctl().args(["--socket", "", "list"]));
    assert_exit(&output, 2, "--socket ''");
    assert!(
        stderr_of(&output).contains("--socket is empty"),
        "{}",
        stderr_of(&output)
    );
    // A --socket given on the command line makes an empty ROOTSD_SOCKET irrelevant.
    let output = output_within(
        sb.rootsctl()
            .env("ROOTSD_SOCKET", "")
            .arg("--socket")
            .arg(&sb.socket)
            .arg("list"),
    );
    assert_exit(&output, 0, "--socket with ROOTSD_SOCKET=''");
}

#[test]
fn a_directory_whose_name_is_not_utf8_is_added_listed_and_removed() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let dir = mkdir_bytes(&sb, b"caf\xe9-\xff");
    let parent = dir
        .parent()
        .unwrap()
        .to_str()
        .expect("the sandbox is UTF-8");

    let added = output_within(sb.rootsctl().arg("add").arg(dir.file_name().unwrap()));
    assert_exit(&added, 0, "add a non-UTF-8 name");
    assert_eq!(
        stdout_of(&added),
        format!("added {parent}/caf\\xe9-\\xff to default\n"),
        "the name is shown with its bytes escaped"
    );
    assert_eq!(
        sb.roots("default"),
        vec![json!({"uri": format!("file://{parent}/caf%E9-%FF"), "name": "caf\u{fffd}-\u{fffd}"})],
        "the URI percent-encodes the bytes; the name is the nearest UTF-8"
    );
    let listed = sb.ctl_ok(&["list"]);
    let shown = format!("{parent}/caf\\xe9-\\xff");
    assert_eq!(
        listed,
        format!(
            "NAME    {:<width$}  STATUS\ncaf\u{fffd}-\u{fffd}  {shown}  ok\n",
            "PATH",
            width = shown.len()
        )
    );

    let removed = output_within(sb.rootsctl().arg("remove").arg(&dir));
    assert_exit(&removed, 0, "remove a non-UTF-8 path");
    assert!(sb.roots("default").is_empty());
}

/// Directory names that try to forge a row or drive the terminal.
const HOSTILE: [&[u8]; 3] = [
    b"x\nevil  etc",
    b"red\x1b[31mtext\x07",
    b"back\\slash\rover\x7f\xc2\x85\xe2\x80\xae",
];

/// How each of [`HOSTILE`] must be shown.
const SHOWN: [&str; 3] = [
    "x\\nevil  etc",
    "red\\x1b[31mtext\\x07",
    "back\\\\slash\\rover\\x7f\\u{85}\\u{202e}",
];

#[test]
fn control_characters_in_names_are_escaped_in_every_human_readable_output() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let (watch_lines, _watch) = watch(&sb);
    let dirs: Vec<PathBuf> = HOSTILE.iter().map(|name| mkdir_bytes(&sb, name)).collect();
    let parent = dirs[0].parent().unwrap().to_str().unwrap().to_owned();

    for (dir, shown) in dirs.iter().zip(SHOWN) {
        let added = output_within(sb.rootsctl().arg("add").arg(dir));
        assert_exit(&added, 0, "add a hostile name");
        let text = stdout_of(&added);
        assert_no_controls(&text, "add");
        assert_eq!(text, format!("added {parent}/{shown} to default\n"));
        let line = watch_lines
            .recv_timeout(PATIENCE)
            .expect("watch prints the change");
        assert_no_controls(&line, "watch");
        assert!(line.contains(&format!("+{parent}/{shown}")), "{line}");
    }

    let listed = sb.ctl_ok(&["list"]);
    assert_no_controls(&listed, "list");
    assert_eq!(listed.lines().count(), 1 + HOSTILE.len(), "{listed}");
    for (line, shown) in listed.lines().skip(1).zip(SHOWN) {
        assert!(line.contains(&format!("  {parent}/{shown}  ")), "{line:?}");
        assert!(line.ends_with("  ok"), "the STATUS column: {line:?}");
        assert!(line.starts_with(shown), "the NAME column too: {line:?}");
    }
    let listed = sb.ctl_ok(&["list", "--all"]);
    assert_no_controls(&listed, "list --all");

    // --json stays exactly JSON, which escapes control characters itself.
    let json = sb.ctl_ok(&["list", "--json"]);
    assert_eq!(json.lines().count(), 1, "{json}");
    assert!(!json.contains('\x1b'), "{json}");

    // Labels, server names and protocol versions come from outside too.
    let mut session = sb.connect();
    let reply = session.request(
        "session.register",
        json!({"workspace": "default", "label": "lab\nel\x1b]0;owned\x07", "pid": 1, "state": {
            "list_changed": true, "era": "handshake", "protocol_version": "2025\r\n-11-25",
            "server": {"name": "srv\n2  x  y", "version": "\u{9b}31m"}
        }}),
    );
    assert!(reply.get("result").is_some(), "{reply}");
    let sessions = sb.ctl_ok(&["sessions"]);
    assert_no_controls(&sessions, "sessions");
    assert_eq!(sessions.lines().count(), 2, "{sessions}");
    for shown in [
        "lab\\nel\\x1b]0;owned\\x07",
        "srv\\n2  x  y \\u{9b}31m",
        "2025\\r\\n-11-25",
    ] {
        assert!(sessions.contains(shown), "{shown:?} in {sessions}");
    }

    // Removing reports what it removed the same way.
    let removed = output_within(sb.rootsctl().arg("remove").arg(&dirs[1]));
    assert_exit(&removed, 0, "remove a hostile name");
    assert_eq!(
        stdout_of(&removed),
        format!("removed {parent}/{} from default\n", SHOWN[1])
    );

    // The log shows every change, one row each, as watch shows them.
    let log = sb.ctl_ok(&["log"]);
    assert_no_controls(&log, "log");
    assert_eq!(log.lines().count(), 1 + HOSTILE.len() + 1, "{log}");
    assert!(
        log.lines()
            .nth(1)
            .is_some_and(|newest| newest.ends_with(&format!("  -{parent}/{}", SHOWN[1]))),
        "{log}"
    );
    for shown in SHOWN {
        assert!(
            log.contains(&format!("  +{parent}/{shown}")),
            "{shown:?} in {log}"
        );
    }

    // An error that quotes what was typed quotes it escaped.
    let missing = output_within(sb.rootsctl().arg("add").arg("gone\x1b[2J\nx"));
    assert_exit(&missing, 1, "add a missing hostile path");
    let err = stderr_of(&missing);
    assert_no_controls(&err, "the error");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn status_and_doctor_escape_the_paths_they_show() {
    let sb = Sandbox::new();
    let run = sb.path().join("r\nun");
    let socket = run.join("rootsd.sock");
    let state = sb.path().join("st\x1b[1mate");
    let mut daemon = std::process::Command::new(bin("rootsd"));
    daemon
        .arg("--socket")
        .arg(&socket)
        .arg("--state-dir")
        .arg(&state)
        .env_remove("ROOTSD_SOCKET")
        .env_remove("ROOTSD_STATE_DIR")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("LISTEN_FDS");
    let _daemon = started(daemon, &socket);
    let ctl_at = |args: &[&str]| {
        output_within(
            sb.rootsctl()
                .env("ROOTSD_SOCKET", &socket)
                .env("ROOTSD_STATE_DIR", &state)
                .args(args),
        )
    };
    let shown = |path: &Path| {
        path.to_str()
            .unwrap()
            .replace('\n', "\\n")
            .replace('\x1b', "\\x1b")
    };

    let status = ctl_at(&["status"]);
    assert_exit(&status, 0, "status");
    let text = stdout_of(&status);
    assert_no_controls(&text, "status");
    let row = |label: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label} row in {text}"))
            .trim_start()
            .to_owned()
    };
    assert_eq!(row("socket:"), shown(&socket), "{text}");
    assert_eq!(row("state dir:"), shown(&state), "{text}");

    let doctor = ctl_at(&["doctor"]);
    let text = stdout_of(&doctor);
    assert_no_controls(&text, "doctor");
    assert!(
        text.starts_with(&format!("rootsctl doctor: socket {}\n", shown(&socket))),
        "{text}"
    );
}

/// Starts `cmd`, a rootsd listening on `socket`, and waits until it answers.
fn started(mut cmd: std::process::Command, socket: &Path) -> Reaped {
    let mut child = Reaped(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn rootsd"),
    );
    rootsd_tests::eventually("rootsd to answer", PATIENCE, || {
        if let Some(status) = child.0.try_wait().expect("poll rootsd") {
            panic!("rootsd exited with {status}");
        }
        if rootsd_tests::answers(socket) {
            Ok(())
        } else {
            Err("not yet")
        }
    });
    child
}

/// `rootsctl watch` (human-readable), once it has subscribed: its stdout's lines.
fn watch(sb: &Sandbox) -> (Receiver<String>, Reaped) {
    let (lines, notes, child) = spawn_watch(sb);
    let note = notes
        .recv_timeout(PATIENCE)
        .expect("watch says it is watching");
    assert!(note.contains("watching"), "{note}");
    (lines, child)
}
