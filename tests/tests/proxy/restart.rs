//! A server started with the workspace in its command line, environment or working directory
//! (`rootsctl proxy -- server {roots}`), restarted behind the host's back when a change alters
//! them: the scripted fake covers what real servers do not produce on demand (a request in flight
//! during the restart, a server that fails to start again, one that ignores SIGTERM, an empty
//! workspace where `{root}` needs a root).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rootsd_tests::{PATIENCE, eventually};
use serde_json::{Value, json};

use crate::support::{
    FakeSession, FakeSetup, add_wait, is_method, remove_wait, sessions, stderr_of,
};

/// What the fake says about how it was started (its `launch` tool).
fn launch_of(fake: &mut FakeSession) -> Value {
    let response = fake.proxy.call_tool("launch", json!({"var": "FAKE_DIRS"}));
    response
        .pointer("/result/structuredContent")
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "launch failed: {response}\nstderr:\n{}",
                fake.proxy.stderr()
            )
        })
}

fn dirs_of(launch: &Value) -> Vec<PathBuf> {
    launch["dirs"]
        .as_array()
        .unwrap_or_else(|| panic!("no dirs in {launch}"))
        .iter()
        .map(|d| PathBuf::from(d.as_str().expect("a path")))
        .collect()
}

fn real(sb_path: &Path, name: &str) -> PathBuf {
    std::fs::canonicalize(sb_path.join(name)).expect("the directory exists")
}

/// The session's entry in `rootsctl sessions --json`.
fn session_of(fake: &FakeSession) -> Value {
    let pid = fake.proxy.pid();
    sessions(&fake.sb)
        .into_iter()
        .find(|s| s["pid"] == json!(pid))
        .unwrap_or_else(|| panic!("no session for pid {pid}"))
}

#[test]
fn a_change_of_the_first_root_restarts_the_server_and_the_host_keeps_its_session() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["one"],
            server_args: &["--list-changed", "--dir", "{root}"],
            ..FakeSetup::default()
        },
    );
    let sb_path = fake.sb.path().to_owned();
    fake.proxy.initialize();
    let subscribed = fake
        .proxy
        .request("resources/subscribe", json!({"uri": "file:///watched"}));
    assert!(subscribed.get("result").is_some(), "{subscribed}");
    let level = fake
        .proxy
        .request("logging/setLevel", json!({"level": "debug"}));
    assert!(level.get("result").is_some(), "{level}");
    let first = launch_of(&mut fake);
    assert_eq!(dirs_of(&first), [real(&sb_path, "one")]);

    // A second root leaves {root} alone: nothing restarts.
    fake.sb.mkdir("two");
    add_wait(&fake.sb, &[Path::new("two")], &[]);
    let same = launch_of(&mut fake);
    assert_eq!(
        same["pid"], first["pid"],
        "a change that leaves the expansion alone restarted the server"
    );

    // Without "one", {root} is "two": the server is restarted, and `--wait` returns once the new
    // one answered the replayed initialize.
    remove_wait(&fake.sb, &[Path::new("one")], &[]);
    let replayed_before_wait_returned = fake.log.messages();
    assert!(
        replayed_before_wait_returned
            .iter()
            .any(|m| m["id"] == json!("rootsd-replay-1")),
        "--wait returned before the new server was given the replayed initialize"
    );
    let second = launch_of(&mut fake);
    assert_ne!(second["pid"], first["pid"], "the server was not restarted");
    assert_eq!(dirs_of(&second), [real(&sb_path, "two")]);

    // The new server was set up as the host set up the old one, under the proxy's own ids.
    let log = fake.log.messages();
    let count = |method: &str| log.iter().filter(|m| is_method(m, method)).count();
    assert_eq!(count("initialize"), 2, "{log:?}");
    assert_eq!(count("notifications/initialized"), 2, "{log:?}");
    assert_eq!(count("resources/subscribe"), 2, "{log:?}");
    assert_eq!(count("logging/setLevel"), 2, "{log:?}");
    let replayed: Vec<&Value> = log
        .iter()
        .filter(|m| {
            m["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("rootsd-replay-"))
        })
        .collect();
    assert_eq!(replayed.len(), 3, "{log:?}");
    assert_eq!(
        replayed[0]["params"]["capabilities"]["roots"],
        json!({"listChanged": true})
    );
    // The host saw none of the replayed answers, and heard that tools and prompts may differ
    // (the fake declares listChanged for those two only).
    let received = &fake.proxy.received;
    assert!(
        !received
            .iter()
            .any(|m| m["id"].as_str().is_some_and(|id| id.starts_with("rootsd-"))),
        "{received:?}"
    );
    let notified: Vec<&str> = received
        .iter()
        .filter_map(|m| m["method"].as_str())
        .filter(|m| m.ends_with("/list_changed"))
        .collect();
    assert_eq!(
        notified,
        [
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed"
        ]
    );
    let session = session_of(&fake);
    assert_eq!(session["restarts"], json!(1), "{session}");
    assert_eq!(session["workspace_via"], json!("arguments"), "{session}");
    let table = fake.sb.ctl(&["sessions"]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("VIA") && table.contains("arguments"),
        "{table}"
    );
}

#[test]
fn a_request_in_flight_finishes_first_and_one_that_never_does_gets_an_error_naming_the_restart() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["one"],
            server_args: &["{roots}"],
            ..FakeSetup::default()
        },
    );
    let sb_path = fake.sb.path().to_owned();
    fake.proxy.initialize();
    let first = launch_of(&mut fake);
    let stalled = fake
        .proxy
        .send_request("tools/call", json!({"name": "stall", "arguments": {}}));
    let slow = fake.proxy.send_request(
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 1500}}),
    );
    fake.log.wait_for("the slow call", |m| {
        m.iter().any(|m| m["params"]["name"] == json!("slow"))
    });
    fake.sb.mkdir("two");
    let asked = Instant::now();
    fake.sb.ctl_ok(&["add", "two"]);
    // The old server answers the slow call after the change: it reaches the host.
    let answered = fake.proxy.response(&slow);
    assert_eq!(
        answered.pointer("/result/structuredContent/pid"),
        Some(&first["pid"]),
        "{answered}"
    );
    // The stalled one is given up on after the grace, with an error saying why.
    let given_up = fake.proxy.response(&stalled);
    let message = given_up
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("not an error: {given_up}"));
    assert!(message.contains("restarted the MCP server"), "{message}");
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "the restart took {:?}",
        asked.elapsed()
    );
    let second = launch_of(&mut fake);
    assert_ne!(second["pid"], first["pid"]);
    assert_eq!(
        dirs_of(&second),
        [real(&sb_path, "one"), real(&sb_path, "two")]
    );
}

#[test]
fn a_server_that_fails_to_restart_gets_the_host_errors_until_the_next_change_starts_it() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["one"],
            server_args: &["--refuse-dir-named", "broken", "{roots}"],
            ..FakeSetup::default()
        },
    );
    let sb_path = fake.sb.path().to_owned();
    fake.proxy.initialize();
    fake.sb.mkdir("broken");
    fake.sb.ctl_ok(&["add", "broken"]);
    let session = eventually("the failed restart in rootsctl sessions", PATIENCE, || {
        let session = session_of(&fake);
        if session["launch_failure"].is_string() {
            Ok(session)
        } else {
            Err(format!(
                "{session}\nthe proxy's stderr:\n{}",
                fake.proxy.stderr()
            ))
        }
    });
    let failure = session["launch_failure"].as_str().expect("a string");
    assert!(failure.contains("before answering initialize"), "{failure}");
    let table = fake.sb.ctl(&["sessions"]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("down:"),
        "{}",
        String::from_utf8_lossy(&table.stdout)
    );
    // The host keeps its session, and its requests are answered with the reason.
    let refused = fake.proxy.call_tool("launch", json!({}));
    let message = refused
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("not an error: {refused}"));
    assert!(
        message.contains("tried again at the next change"),
        "{message}"
    );
    // The next change starts it again.
    fake.sb.ctl_ok(&["remove", "broken"]);
    let back =
        crate::support::wait_for_session(&fake.sb, fake.proxy.pid(), "a server again", |s| {
            s["launch_failure"].is_null() && s["restarts"] == json!(2)
        });
    assert_eq!(back["workspace_via"], json!("arguments"));
    let launch = launch_of(&mut fake);
    assert_eq!(dirs_of(&launch), [real(&sb_path, "one")]);
}

#[test]
fn a_server_that_ignores_sigterm_is_killed_and_replaced() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["one"],
            server_args: &["--ignore-term", "--linger", "{roots}"],
            ..FakeSetup::default()
        },
    );
    let sb_path = fake.sb.path().to_owned();
    fake.proxy.initialize();
    let first = launch_of(&mut fake);
    fake.sb.mkdir("two");
    add_wait(&fake.sb, &[Path::new("two")], &["--timeout", "20"]);
    let second = launch_of(&mut fake);
    assert_ne!(second["pid"], first["pid"]);
    assert_eq!(
        dirs_of(&second),
        [real(&sb_path, "one"), real(&sb_path, "two")]
    );
    let stderr = fake.proxy.stderr();
    assert!(stderr.contains("ignoring SIGTERM"), "{stderr}");
    assert!(stderr.contains("sending SIGKILL"), "{stderr}");
    // The old one is gone for good.
    let old = rustix::process::Pid::from_raw(first["pid"].as_i64().expect("a pid") as i32)
        .expect("a real pid");
    eventually(
        "the old server to be gone",
        PATIENCE,
        || match rustix::process::test_kill_process(old) {
            Err(_) => Ok(()),
            Ok(()) => Err("it still runs".to_owned()),
        },
    );
}

#[test]
fn an_empty_workspace_refuses_initialize_naming_the_add_and_a_root_starts_the_server() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            server_args: &["--dir", "{root}"],
            proxy_options: &["--env", "FAKE_DIRS={roots}", "--cwd", "{root}"],
            ..FakeSetup::default()
        },
    );
    let sb_path = fake.sb.path().to_owned();
    let id = fake.proxy.send_initialize(json!({}));
    let refused = fake.proxy.response(&id);
    let message = refused
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("not an error: {refused}"));
    assert!(
        message.contains("workspace default has no root")
            && message.contains("rootsctl add -w default PATH"),
        "{message}"
    );
    fake.sb.mkdir("a");
    fake.sb.mkdir("b");
    fake.sb.ctl_ok(&["add", "a", "b"]);
    fake.session("a server", |s| s["launch_failure"].is_null());
    fake.proxy.initialize();
    let launch = launch_of(&mut fake);
    let (a, b) = (real(&sb_path, "a"), real(&sb_path, "b"));
    assert_eq!(dirs_of(&launch), std::slice::from_ref(&a));
    assert_eq!(launch["cwd"], json!(a.to_str().expect("UTF-8")));
    assert_eq!(
        launch["env"],
        json!(format!("{}:{}", a.display(), b.display()))
    );
}

#[test]
fn a_template_that_cannot_be_used_is_a_usage_error_before_anything_starts() {
    let sb = rootsd_tests::Sandbox::new();
    let output = sb.ctl(&["proxy", "--env", "NOEQUALS", "--", "true", "{roots}"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    assert!(
        stderr_of(&output).contains("is not NAME=TEMPLATE"),
        "{}",
        stderr_of(&output)
    );
    let output = sb.ctl(&["proxy", "--", "{roots}"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
}

#[test]
fn a_server_whose_directory_is_gone_is_not_started_and_the_next_change_starts_it() {
    let sb = rootsd_tests::Sandbox::new();
    let _daemon = sb.start_daemon();
    sb.ctl_ok(&["add", "--allow-missing", "gone"]);
    let log = crate::support::FakeLog::new(&sb, "fake");
    let mut command = crate::support::fake_server("quiet", &log);
    command.push("{root}".into());
    let mut proxy = crate::support::Proxy::spawn(&sb, &["--cwd", "{root}"], &command);
    let id = proxy.send_initialize(json!({}));
    let refused = proxy.response(&id);
    let message = refused
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("not an error: {refused}"));
    assert!(
        message.contains("cannot start the MCP server") && message.contains("gone"),
        "{message}"
    );
    let here = sb.mkdir("here");
    sb.ctl_ok(&["remove", "gone"]);
    sb.ctl_ok(&["add", "here"]);
    crate::support::wait_for_session(&sb, proxy.pid(), "a server", |s| {
        s["launch_failure"].is_null() && s["server"].is_null()
    });
    proxy.initialize();
    let launch = proxy.call_tool("launch", json!({}));
    let cwd = launch
        .pointer("/result/structuredContent/cwd")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("launch failed: {launch}"));
    assert_eq!(
        Path::new(cwd),
        std::fs::canonicalize(&here).expect("exists")
    );
}

#[test]
fn a_proxy_told_to_end_during_a_restart_ends_with_the_old_server() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["one"],
            server_args: &["--ignore-term", "--linger", "{roots}"],
            ..FakeSetup::default()
        },
    );
    fake.proxy.initialize();
    // The old server is being stopped: its stdin is closed, and it lingers.
    restart_until_the_old_server_is_stopping(&mut fake);
    let pid = rustix::process::Pid::from_raw(fake.proxy.pid() as i32).expect("a real pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("signal the proxy");
    let status = fake.proxy.wait_exit();
    // The old server ignored SIGTERM and was killed; no new one was started.
    assert_eq!(
        status.code(),
        Some(137),
        "stderr:\n{}",
        fake.proxy.final_stderr()
    );
    assert_eq!(
        fake.proxy.final_stderr().matches("fake-mcp: pid").count(),
        1,
        "{}",
        fake.proxy.final_stderr()
    );
}

#[test]
fn a_host_that_closes_stdin_during_a_restart_ends_the_session_without_a_new_server() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["one"],
            server_args: &["--linger", "{roots}"],
            ..FakeSetup::default()
        },
    );
    fake.proxy.initialize();
    // The old server is being stopped: its stdin is closed, and it lingers until SIGTERM.
    restart_until_the_old_server_is_stopping(&mut fake);
    let left = Instant::now();
    fake.proxy.close_stdin();
    fake.proxy.wait_exit();
    let took = left.elapsed();
    let stderr = fake.proxy.final_stderr();
    // No server was started for a host that had left: one start, one initialize.
    assert_eq!(stderr.matches("fake-mcp: pid").count(), 1, "{stderr}");
    let initializes = fake
        .log
        .messages()
        .iter()
        .filter(|m| m["method"] == json!("initialize"))
        .count();
    assert_eq!(initializes, 1, "{stderr}");
    // It ended with the old server, at the SIGTERM its closed stdin earns it.
    assert!(took < Duration::from_secs(5), "took {took:?}\n{stderr}");
}

#[test]
fn a_server_that_exits_at_its_first_start_gets_the_host_an_error_naming_its_exit_and_the_session_stays()
 {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["broken"],
            server_args: &["--refuse-dir-named", "broken", "{roots}"],
            ..FakeSetup::default()
        },
    );
    let id = fake.proxy.send_initialize(json!({}));
    let answer = fake.proxy.response(&id);
    let message = answer
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("not an error: {answer}\n{}", fake.proxy.stderr()));
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.contains("before answering initialize"), "{message}");
    // The tail of its stderr says why.
    assert!(
        message.contains("fake-mcp: refusing") && message.contains("broken"),
        "{message}"
    );
    // Its stderr still reached the proxy's own.
    assert!(
        fake.proxy.stderr().contains("fake-mcp: refusing"),
        "{}",
        fake.proxy.stderr()
    );
    // The session stays, down until the next change.
    let session = eventually("the failed start in rootsctl sessions", PATIENCE, || {
        let session = session_of(&fake);
        if session["launch_failure"].is_string() {
            Ok(session)
        } else {
            Err(session.to_string())
        }
    });
    let failure = session["launch_failure"].as_str().expect("a string");
    assert!(failure.contains("started for workspace"), "{failure}");
    let refused = fake.proxy.request("ping", json!({}));
    assert!(refused.get("error").is_some(), "{refused}");
}

/// Adds a root, which restarts the server of `{roots}`, and waits until the old server's stdin
/// was closed: the restart is under way and the old server, which lingers, has not yet ended.
fn restart_until_the_old_server_is_stopping(fake: &mut FakeSession) {
    fake.sb.mkdir("two");
    fake.sb.ctl_ok(&["add", "two"]);
    eventually("the old server's stdin to close", PATIENCE, || {
        let stderr = fake.proxy.stderr();
        if stderr.contains("stdin closed") {
            Ok(())
        } else {
            Err(stderr)
        }
    });
}
