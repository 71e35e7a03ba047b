//! `rootsctl doctor`: passes against a healthy daemon, and names each problem with its fix.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use rootsd_tests::{Sandbox, output_within, without_privilege};
use serde_json::{Value, json};

use crate::support::{assert_exit, text};

/// `rootsctl doctor ARGS` for the sandbox. Its `systemctl --user` looks for a user manager in
/// the sandbox, where there is none, so that whatever the host has installed and enabled does
/// not change the verdict.
fn doctor_cmd(sb: &Sandbox, args: &[&str]) -> Command {
    let mut cmd = sb.rootsctl();
    cmd.arg("doctor")
        .args(args)
        .env("XDG_RUNTIME_DIR", sb.path().join("no-user-manager"))
        .env("HOME", sb.configured_home())
        .env_remove("DBUS_SESSION_BUS_ADDRESS");
    cmd
}

fn doctor(sb: &Sandbox, args: &[&str]) -> Output {
    output_within(&mut doctor_cmd(sb, args))
}

/// `doctor --json`, parsed, with the check named `name` picked out.
fn doctor_json(sb: &Sandbox) -> (Output, Value) {
    let output = doctor(sb, &["--json"]);
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e}): {output:?}"));
    (output, report)
}

#[track_caller]
fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["name"] == json!(name)))
        .unwrap_or_else(|| panic!("no {name:?} check in {report}"))
}

#[test]
fn doctor_passes_against_a_healthy_daemon() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let output = doctor(&sb, &[]);
    assert_exit(&output, 0, "doctor against a healthy daemon");
    let said = text(&output.stdout);
    assert!(said.contains("No problems found."), "{said}");
    assert!(
        said.contains(&format!("rootsd {} answers", env!("CARGO_PKG_VERSION"))),
        "{said}"
    );

    let (output, report) = doctor_json(&sb);
    assert_exit(&output, 0, "doctor --json against a healthy daemon");
    assert_eq!(report["ok"], json!(true), "{report}");
    assert_eq!(report["socket"], json!(sb.socket.to_str().unwrap()));
    for name in [
        "from a host",
        "socket dir",
        "socket",
        "daemon",
        "state dir",
        "sessions",
        "roots",
    ] {
        assert_eq!(check(&report, name)["outcome"], json!("ok"), "{report}");
    }
    let state = check(&report, "state dir")["summary"].as_str().unwrap();
    assert!(state.contains(sb.state.to_str().unwrap()), "{state}");
    assert!(state.contains("never opens the database"), "{state}");
    // Wherever the tests run, systemd's check may be skipped or noted, never failed.
    assert_ne!(check(&report, "systemd")["outcome"], json!("fail"));
}

#[test]
fn doctor_counts_the_attached_sessions() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut session = sb.connect();
    let registered = session.request(
        "session.register",
        json!({"workspace": "default", "label": "test", "pid": std::process::id(), "list_changed": true}),
    );
    assert!(registered.get("result").is_some(), "{registered}");
    let (_, report) = doctor_json(&sb);
    let sessions = check(&report, "sessions");
    assert!(
        sessions["summary"]
            .as_str()
            .unwrap()
            .starts_with("1 MCP session(s) attached"),
        "{sessions}"
    );
}

#[test]
fn doctor_reports_a_socket_directory_open_to_others_with_the_chmod_fix() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let dir = sb.socket.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();

    let output = doctor(&sb, &[]);
    assert_exit(&output, 1, "doctor with a 0755 socket directory");
    let said = text(&output.stdout);
    assert!(said.contains("FAIL  socket dir"), "{said}");
    assert!(said.contains("mode 0755"), "{said}");
    assert!(
        said.contains(&format!("fix: chmod 700 {}", dir.display())),
        "{said}"
    );
    assert!(text(&output.stderr).contains("doctor found 1 problem(s)"));

    let (output, report) = doctor_json(&sb);
    assert_exit(&output, 1, "doctor --json with a 0755 socket directory");
    assert_eq!(report["ok"], json!(false));
    let socket_dir = check(&report, "socket dir");
    assert_eq!(socket_dir["outcome"], json!("fail"), "{socket_dir}");
    assert_eq!(
        socket_dir["fix"],
        json!(format!("chmod 700 {}", dir.display()))
    );
}

#[test]
fn doctor_notes_a_daemon_that_rootsctl_will_start_on_demand_and_starts_nothing() {
    let sb = Sandbox::new();
    // A fresh machine: autostart on, rootsd findable (ROOTSD_BIN), nothing started yet.
    let output = output_within(doctor_cmd(&sb, &[]).env_remove("ROOTSD_NO_AUTOSTART"));
    assert_exit(&output, 0, "doctor before rootsd's first start");
    let said = text(&output.stdout);
    assert!(said.contains("note  socket"), "{said}");
    assert!(said.contains("rootsd is not running yet"), "{said}");
    let rootsd = rootsd_tests::bin("rootsd");
    assert!(
        said.contains(&format!("starts {} on demand", rootsd.display())),
        "{said}"
    );
    assert!(said.contains("skip  daemon"), "{said}");
    assert!(!said.contains("FAIL"), "{said}");
    assert!(said.contains("No problems found."), "{said}");
    assert!(
        !sb.socket.exists() && !sb.state.exists(),
        "doctor started a daemon"
    );
}

#[test]
fn doctor_fails_a_missing_daemon_that_nothing_will_start() {
    let sb = Sandbox::new();
    // The sandbox's rootsctl has autostart off.
    let output = doctor(&sb, &[]);
    assert_exit(&output, 1, "doctor without a daemon, autostart off");
    let said = text(&output.stdout);
    assert!(said.contains("FAIL  socket"), "{said}");
    assert!(said.contains("autostart is off"), "{said}");
    assert!(said.contains("fix: start it with `rootsd &`"), "{said}");

    let missing = sb.path().join("no-such-rootsd");
    let output = output_within(
        doctor_cmd(&sb, &[])
            .env_remove("ROOTSD_NO_AUTOSTART")
            .env("ROOTSD_BIN", &missing),
    );
    assert_exit(&output, 1, "doctor without a daemon or a rootsd to start");
    let said = text(&output.stdout);
    assert!(said.contains("FAIL  socket"), "{said}");
    assert!(
        said.contains(&format!("{} is not found", missing.display())),
        "{said}"
    );
    assert!(said.contains("set ROOTSD_BIN"), "{said}");
    assert!(!sb.state.exists(), "doctor started a daemon");
}

#[test]
fn doctor_says_a_socket_directory_that_cannot_be_searched_hides_a_running_daemon() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let dir = sb.socket.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o000)).unwrap();

    // Root searches any directory: doctor runs as a user whom the mode stops.
    let output = output_within(&mut without_privilege(doctor_cmd(&sb, &[])));
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_exit(&output, 1, "doctor with a 0000 socket directory");
    let said = text(&output.stdout);
    assert!(said.contains("FAIL  socket dir"), "{said}");
    assert!(
        said.contains(&format!("{} (mode 0000) cannot be searched", dir.display())),
        "{said}"
    );
    assert!(
        said.contains(&format!("fix: chmod 700 {}", dir.display())),
        "{said}"
    );
    for wrong in [
        "yours and private",
        "nothing listens",
        "rootsd is not running",
    ] {
        assert!(!said.contains(wrong), "doctor says {wrong:?}: {said}");
    }
    assert!(
        said.contains("whether rootsd runs there cannot be told"),
        "{said}"
    );
    assert!(text(&output.stderr).contains("doctor found 1 problem(s)"));
}

#[test]
fn doctor_reports_a_stale_socket_left_by_a_killed_daemon() {
    let sb = Sandbox::new();
    let mut daemon = sb.start_daemon();
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();

    let (output, report) = doctor_json(&sb);
    assert_exit(&output, 1, "doctor with a stale socket");
    let daemon_check = check(&report, "daemon");
    assert_eq!(daemon_check["outcome"], json!("fail"), "{daemon_check}");
    assert!(
        daemon_check["summary"]
            .as_str()
            .unwrap()
            .contains("nothing listens"),
        "{daemon_check}"
    );
    assert!(daemon_check["fix"].as_str().is_some(), "{daemon_check}");
}

/// Doctor against a stand-in daemon that answers hello with `answer`; returns what doctor said.
fn doctor_against(sb: &Sandbox, answer: impl FnOnce(&Value) -> Value + Send + 'static) -> String {
    let server = rootsd_tests::fake_daemon(&sb.socket, answer);
    let output = doctor(sb, &[]);
    server.join().expect("the fake daemon answered");
    assert_exit(&output, 1, "doctor against another protocol");
    let said = text(&output.stdout);
    assert!(said.contains("FAIL  daemon"), "{said}");
    said
}

#[test]
fn doctor_reports_a_daemon_speaking_another_protocol_version() {
    // A daemon from a future release: restarting it changes nothing, rootsctl is behind.
    let sb = Sandbox::new();
    let said = doctor_against(&sb, |hello| {
        json!({
            "jsonrpc": "2.0",
            "id": hello["id"],
            "result": {"protocol_version": 99, "daemon_version": "9.9.9", "pid": 1},
        })
    });
    assert!(said.contains("control protocol 99, newer than"), "{said}");
    assert!(
        said.contains("fix: upgrade rootsctl to rootsd 9.9.9's release"),
        "{said}"
    );
    assert!(!said.contains("fix: restart rootsd"), "{said}");
}

#[test]
fn doctor_tells_an_upgraded_rootsctl_to_restart_the_older_daemon() {
    let sb = Sandbox::new();
    let said = doctor_against(&sb, |hello| {
        json!({
            "jsonrpc": "2.0",
            "id": hello["id"],
            "result": {"protocol_version": 0, "daemon_version": "0.0.1", "pid": 1},
        })
    });
    assert!(said.contains("control protocol 0, older than"), "{said}");
    assert!(
        said.contains("fix: restart rootsd, so that the one from rootsctl"),
        "{said}"
    );
    assert!(!said.contains("upgrade rootsctl"), "{said}");
}

#[test]
fn doctor_explains_a_daemon_that_refuses_rootsctl_s_protocol_version() {
    // A real rootsd of another protocol refuses hello with -32000, naming the versions only in
    // words: doctor must still see a version mismatch, not a daemon to debug.
    let sb = Sandbox::new();
    let refusal = "rootsctl 0.1.0 speaks control protocol 1 but this rootsd 0.2.0 (pid 4242) speaks 2: use rootsctl and rootsd from the same release, and restart the daemon after upgrading";
    let said = doctor_against(
        &sb,
        move |hello| json!({"jsonrpc": "2.0", "id": hello["id"], "error": {"code": -32000, "message": refusal}}),
    );
    assert!(said.contains(refusal), "{said}");
    assert!(
        said.contains(
            "fix: use rootsctl and rootsd from the same release: after an upgrade, restart rootsd"
        ),
        "{said}"
    );
    assert!(
        said.contains("if rootsd is the newer one, upgrade rootsctl instead"),
        "{said}"
    );
    assert!(!said.contains("daemon's log"), "{said}");
}
