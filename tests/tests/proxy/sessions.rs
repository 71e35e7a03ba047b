//! What the daemon and the proxy tell the user about sessions: a proxy on a workspace that does
//! not exist, `--wait` right after the daemon restarted, while proxies reconnect, and how a
//! server is judged to keep its roots current.

use std::process::{Child, Output, Stdio};

use rootsd_tests::{PATIENCE, Reaped, Sandbox, eventually, output_within};
use rustix::process::{Pid, Signal};
use serde_json::{Value, json};

use crate::support::{
    FakeLog, FakeSession, FakeSetup, Proxy, assert_exit, calls_of, emit, fake_server,
    list_changed_count, stderr_of, stdout_of,
};

/// The proxy's stderr once it holds `needle`.
#[track_caller]
fn stderr_with(proxy: &Proxy, needle: &str) -> String {
    eventually(&format!("the proxy to say {needle:?}"), PATIENCE, || {
        let stderr = proxy.stderr();
        if stderr.contains(needle) {
            Ok(stderr)
        } else {
            Err(format!("stderr:\n{stderr}"))
        }
    })
}

#[test]
fn a_proxy_on_a_workspace_that_does_not_exist_warns_and_sessions_shows_it() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["a"],
            proxy_options: &["--workspace", "wrok"],
            ..FakeSetup::default()
        },
    );
    fake.proxy.initialize();
    let session = fake.session("its workspace missing", |s| {
        s["workspace_missing"] == json!(true)
    });
    assert_eq!(session["workspace"], json!("wrok"), "{session}");
    let said = stderr_with(&fake.proxy, "workspace wrok does not exist");
    assert!(
        said.contains("`rootsctl add -w wrok PATH`") && said.contains("the workspaces are default"),
        "{said}"
    );

    let output = fake.sb.ctl(&["sessions"]);
    assert_exit(&output, 0, "rootsctl sessions");
    let table = stdout_of(&output);
    assert!(table.contains("wrok (no such workspace)"), "{table}");

    // Once the user creates it, the session is an ordinary one again.
    let w = fake.sb.mkdir("w");
    fake.sb.ctl_ok(&["add", "-w", "wrok", w.to_str().unwrap()]);
    fake.session("its workspace, now created", |s| {
        s.get("workspace_missing").is_none()
    });
    let output = fake.sb.ctl(&["sessions"]);
    assert!(
        !stdout_of(&output).contains("no such workspace"),
        "{}",
        stdout_of(&output)
    );

    // A proxy on a workspace that exists says nothing of the kind.
    let log = FakeLog::new(&fake.sb, "second");
    let mut second = Proxy::spawn(&fake.sb, &["-w", "default"], &fake_server("quiet", &log));
    second.initialize();
    crate::support::wait_for_session(&fake.sb, second.pid(), "registration", |_| true);
    let said = second.stderr();
    assert!(!said.contains("does not exist"), "{said}");
}

/// A handshake session of the fake in `reference` (it fetches after `initialized` and after each
/// notification) on a workspace holding `a`, which has fetched revision 1 and which the daemon
/// has recorded among its live sessions.
fn recorded_session() -> FakeSession {
    let mut fake = FakeSession::start(
        "reference",
        FakeSetup {
            roots: &["a"],
            ..FakeSetup::default()
        },
    );
    fake.proxy.initialize();
    fake.session("its first fetch", |s| s["fetched_revision"] == json!(1));
    let record = fake.sb.state.join("sessions.json");
    let pid = fake.proxy.pid();
    eventually("rootsd to record the live session", PATIENCE, || {
        let text = std::fs::read_to_string(&record).unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let recorded = value["sessions"]
            .as_array()
            .is_some_and(|all| all.iter().any(|s| s["pid"] == json!(pid)));
        if recorded {
            Ok(())
        } else {
            Err(format!("{}: {text:?}", record.display()))
        }
    });
    fake
}

fn signal(pid: u32, signal: Signal) {
    let pid = Pid::from_raw(pid as i32).expect("a real pid");
    rustix::process::kill_process(pid, signal).expect("signal the proxy");
}

/// `rootsctl add DIR --wait --timeout 30` in `sb`, running.
fn spawn_add_wait(sb: &Sandbox, dir: &std::path::Path) -> Child {
    let mut cmd = sb.rootsctl();
    cmd.arg("add")
        .arg(dir)
        .args(["--wait", "--timeout", "30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("spawn rootsctl add --wait")
}

/// `rootsctl add DIR --wait --timeout 30` in `sb`, to its end.
fn add_wait(sb: &Sandbox, dir: &std::path::Path) -> Output {
    let mut cmd = sb.rootsctl();
    cmd.arg("add").arg(dir).args(["--wait", "--timeout", "30"]);
    output_within(&mut cmd)
}

#[test]
fn add_wait_right_after_a_restart_waits_for_the_sessions_still_reconnecting() {
    let mut fake = recorded_session();
    let pid = fake.proxy.pid();
    // The proxy is held still while rootsd restarts (as systemctl restart does it, with
    // SIGTERM), as a proxy in the middle of its reconnection backoff is.
    signal(pid, Signal::STOP);
    let daemon = fake.daemon.as_mut().expect("a daemon");
    daemon.signal(Signal::TERM);
    daemon.wait();
    fake.daemon = Some(fake.sb.start_daemon());

    let b = fake.sb.mkdir("b");
    let mut add = Reaped(spawn_add_wait(&fake.sb, &b));
    // Once the add waits (or has returned, as it did at once with `0 of 0` before), the proxy
    // goes on and reconnects.
    eventually("rootsctl add --wait to wait, or end", PATIENCE, || {
        if add.0.try_wait().expect("poll rootsctl").is_some() {
            return Ok(());
        }
        let status = fake.sb.ctl(&["status", "--json"]);
        let value: Value = serde_json::from_slice(&status.stdout).unwrap_or(Value::Null);
        if value["clients"].as_u64().is_some_and(|c| c >= 2) {
            Ok(())
        } else {
            Err(format!("status: {value}"))
        }
    });
    signal(pid, Signal::CONT);
    eventually("rootsctl add --wait to end", PATIENCE, || {
        match add.0.try_wait().expect("poll rootsctl") {
            Some(_) => Ok(()),
            None => Err("still waiting"),
        }
    });
    let child = std::mem::replace(
        &mut add.0,
        std::process::Command::new("true")
            .spawn()
            .expect("spawn true"),
    );
    let output = child.wait_with_output().expect("rootsctl's output");
    assert_exit(&output, 0, "rootsctl add --wait after a restart");
    let said = stderr_of(&output);
    assert!(
        said.contains("1 of 1 notified session(s) fetched revision 2"),
        "add --wait after a restart said: {said}"
    );
    fake.log.wait_for_fetch_of(&fake.roots());
}

#[test]
fn add_wait_after_a_restart_names_the_sessions_of_the_previous_run_that_did_not_come_back() {
    let mut fake = recorded_session();
    let pid = fake.proxy.pid();
    // The proxy stays still past the reconnection window; the daemon dies outright.
    signal(pid, Signal::STOP);
    fake.daemon = None;
    fake.daemon = Some(fake.sb.start_daemon());

    let b = fake.sb.mkdir("b");
    let output = add_wait(&fake.sb, &b);
    signal(pid, Signal::CONT);
    assert_exit(
        &output,
        0,
        "rootsctl add --wait with a session that did not come back",
    );
    let said = stderr_of(&output);
    assert!(
        said.contains("0 of 0 notified session(s) fetched revision 2; 1 session(s) of the previous run did not reconnect after rootsd restarted: ")
            && said.contains(&format!("(pid {pid})")),
        "add --wait said: {said}"
    );
    // It comes back later all the same, and is told.
    fake.log.wait_for_fetch_of(&fake.roots());
}

#[test]
fn add_wait_after_a_restart_without_a_readable_record_says_it_cannot_know() {
    let mut fake = recorded_session();
    fake.daemon = None;
    std::fs::write(
        fake.sb.state.join("sessions.json"),
        br#"{"version":1,"sess"#,
    )
    .unwrap();
    fake.daemon = Some(fake.sb.start_daemon());
    let b = fake.sb.mkdir("b");
    let output = add_wait(&fake.sb, &b);
    assert_exit(
        &output,
        0,
        "rootsctl add --wait after a restart with a damaged record",
    );
    let said = stderr_of(&output);
    assert!(
        said.contains("could not read its record of the previous run's sessions, so it cannot know whether more are still reconnecting"),
        "add --wait said: {said}"
    );
}

#[test]
fn a_server_that_fetches_inside_tool_calls_stays_on_use_when_a_call_lands_just_after_a_notification()
 {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["a"],
            ..FakeSetup::default()
        },
    );
    fake.proxy.initialize();
    fake.registered();
    // It fetches once, then lets a notification go unanswered: it fetches on use.
    emit(
        &mut fake.proxy,
        json!({"jsonrpc": "2.0", "id": "first", "method": "roots/list"}),
    );
    fake.session("its first fetch", |s| s["fetched_revision"] == json!(1));
    let b = fake.sb.mkdir("b");
    fake.sb.ctl_ok(&["add", b.to_str().unwrap()]);
    fake.session("it judged to fetch on use", |s| {
        s["fetch_behaviour"] == json!("on_use")
    });

    // A tool call is before the server (its result held) when the next change comes, and the
    // server fetches inside it at once, within a second of the notification: that is use, not a
    // reaction to the notification (it was judged `when told` for it before).
    let call = fake.proxy.id();
    fake.proxy.send(&json!({
        "jsonrpc": "2.0",
        "id": call,
        "method": "tools/call",
        "params": {
            "name": "needs_roots",
            "arguments": {"hold": "call"},
            "inputResponses": {"ws": {"roots": []}},
        },
    }));
    fake.log
        .wait_for("the tool call", |m| calls_of(m, "needs_roots").len() == 1);
    // Inside it, the server sees the change it was told of.
    emit(
        &mut fake.proxy,
        json!({"jsonrpc": "2.0", "id": "in-call", "method": "roots/list"}),
    );
    fake.session("the fetch of the change it was told of", |s| {
        s["fetched_revision"] == json!(2)
    });
    let c = fake.sb.mkdir("c");
    fake.sb.ctl_ok(&["add", c.to_str().unwrap()]);
    fake.log
        .wait_for("the second notification", |m| list_changed_count(m) == 2);
    emit(
        &mut fake.proxy,
        json!({"jsonrpc": "2.0", "id": "inside", "method": "roots/list"}),
    );
    let session = fake.session("the fetch inside the call", |s| {
        s["fetched_revision"] == json!(3)
    });
    assert_eq!(session["fetch_behaviour"], json!("on_use"), "{session}");
    fake.proxy.notify("test/answer", json!({"tags": ["call"]}));
    let answer = fake.proxy.response(&call);
    assert!(answer.get("result").is_some(), "{answer}");
}
