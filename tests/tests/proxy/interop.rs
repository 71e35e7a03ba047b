//! The proxy in front of the real reference filesystem server
//! (`@modelcontextprotocol/server-filesystem`, pinned in tests/interop/package-lock.json).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rootsd_tests::{Daemon, PATIENCE, Sandbox};
use rustix::process::Signal;
use serde_json::{Value, json};

use crate::support::{
    Proxy, add_wait, assert_exit, filesystem_server, remove_wait, sessions, stderr_of, stdout_of,
    wait_for_no_sessions, wait_for_session,
};

/// A proxied filesystem server with the handshake done.
fn session(sb: &Sandbox, options: &[&str]) -> Proxy {
    let mut proxy = Proxy::spawn(sb, options, &filesystem_server());
    proxy.initialize();
    proxy
}

/// The setup several tests share: a daemon whose default workspace holds directory `a`, and a
/// proxied filesystem server that has done its handshake and shows `a`. Fields drop in order:
/// the proxy before the daemon, both before the sandbox.
struct ServingA {
    proxy: Proxy,
    daemon: Daemon,
    a: PathBuf,
    sb: Sandbox,
}

impl ServingA {
    fn start() -> Self {
        let sb = Sandbox::new();
        let daemon = sb.start_daemon();
        let a = sb.mkdir("a");
        sb.ctl_ok(&["add", "a"]);
        let mut proxy = session(&sb, &[]);
        proxy.wait_for_dirs(&[&a]);
        Self {
            proxy,
            daemon,
            a,
            sb,
        }
    }
}

#[test]
fn the_server_gets_the_daemons_roots_after_the_handshake() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let a = sb.mkdir("work/a");
    let b = sb.mkdir("work/b b");
    sb.ctl_ok(&["add", a.to_str().unwrap(), b.to_str().unwrap()]);

    let mut proxy = Proxy::spawn(&sb, &[], &filesystem_server());
    let init = proxy.initialize();
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        json!("secure-filesystem-server"),
        "{init}"
    );
    proxy.wait_for_dirs(&[&a, &b]);
    // The server's roots/list was answered by the proxy, never shown to the host.
    assert!(
        proxy.received.iter().all(|m| m.get("method").is_none()),
        "the host saw a server request: {:?}",
        proxy.received
    );
}

#[test]
fn add_and_remove_wait_reach_the_server() {
    let mut serving = ServingA::start();
    let (sb, a, proxy) = (&serving.sb, &serving.a, &mut serving.proxy);
    let b = sb.mkdir("b");

    let (change, said) = add_wait(sb, &[&b], &[]);
    assert_eq!(change["notified_sessions"], json!(1), "{change}");
    assert!(said.contains("1 of 1"), "add --wait said {said:?}");
    proxy.wait_for_dirs(&[a, &b]);

    let (change, said) = remove_wait(sb, &[a], &[]);
    assert_eq!(change["notified_sessions"], json!(1), "{change}");
    assert!(said.contains("1 of 1"), "remove --wait said {said:?}");
    proxy.wait_for_dirs(&[&b]);

    let session = wait_for_session(sb, proxy.pid(), "the fetch of the removal", |s| {
        s["fetched_revision"] == change["revision"]
    });
    assert_eq!(session["notifications_sent"], json!(2), "{session}");
}

#[test]
fn a_no_list_changed_session_is_never_notified() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let a = sb.mkdir("a");
    let b = sb.mkdir("b");
    sb.ctl_ok(&["add", "a"]);
    let mut told = session(&sb, &["--name", "told"]);
    let mut untold = session(&sb, &["--name", "untold", "--no-list-changed"]);
    told.wait_for_dirs(&[&a]);
    untold.wait_for_dirs(&[&a]);
    // Both are registered before the change (each got its list from the daemon).

    let started = Instant::now();
    let (change, said) = add_wait(&sb, &[&b], &["--timeout", "60"]);
    // Waiting for the session would take the whole 60 s timeout (the harness gives up on a
    // command after 20 s); a command that does not wait takes milliseconds, and 15 s leaves
    // slack for a loaded machine where a bound just under the timeout did not.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "add --wait took {:?}: it must not wait for a session that is never notified",
        started.elapsed()
    );
    assert_eq!(change["notified_sessions"], json!(1), "{change}");
    assert!(said.contains("1 of 1"), "add --wait said {said:?}");

    told.wait_for_dirs(&[&a, &b]);
    assert_eq!(
        untold.allowed_dirs(),
        [a.clone()].into_iter().collect(),
        "the --no-list-changed session's server was told about the change"
    );

    let listed = sessions(&sb);
    let find = |label: &str| -> Value {
        listed
            .iter()
            .find(|s| s["label"] == json!(label))
            .unwrap_or_else(|| panic!("no session {label} in {listed:?}"))
            .clone()
    };
    let (t, u) = (find("told"), find("untold"));
    assert_eq!(u["list_changed"], json!(false), "{u}");
    assert_eq!(u["notifications_sent"], json!(0), "{u}");
    assert_eq!(t["list_changed"], json!(true), "{t}");
    assert_eq!(t["notifications_sent"], json!(1), "{t}");
}

#[test]
fn workspaces_stay_apart() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let a = sb.mkdir("a");
    let b = sb.mkdir("b");
    let c = sb.mkdir("c");
    sb.ctl_ok(&["add", "a", "--workspace", "wa"]);
    sb.ctl_ok(&["add", "b", "--workspace", "wb"]);
    let mut in_a = session(&sb, &["--workspace", "wa"]);
    let mut in_b = session(&sb, &["--workspace", "wb"]);
    in_a.wait_for_dirs(&[&a]);
    in_b.wait_for_dirs(&[&b]);

    let (change, _) = add_wait(&sb, &[&c], &["--workspace", "wa"]);
    assert_eq!(change["notified_sessions"], json!(1), "{change}");
    in_a.wait_for_dirs(&[&a, &c]);
    assert_eq!(in_b.allowed_dirs(), [b.clone()].into_iter().collect());

    let b_session = wait_for_session(&sb, in_b.pid(), "workspace wb", |s| {
        s["workspace"] == json!("wb")
    });
    assert_eq!(b_session["notifications_sent"], json!(0), "{b_session}");
    let a_session = wait_for_session(&sb, in_a.pid(), "workspace wa", |s| {
        s["workspace"] == json!("wa")
    });
    assert_eq!(
        a_session["fetched_revision"], change["revision"],
        "{a_session}"
    );
}

#[test]
fn twenty_concurrent_sessions_converge_after_one_change() {
    const N: usize = 20;
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let a = sb.mkdir("a");
    let b = sb.mkdir("b");
    sb.ctl_ok(&["add", "a"]);

    // Start every server first, so that node's start-up runs in parallel.
    let mut proxies: Vec<Proxy> = (0..N)
        .map(|i| Proxy::spawn(&sb, &["--name", &format!("fs{i}")], &filesystem_server()))
        .collect();
    let ids: Vec<Value> = proxies
        .iter_mut()
        .map(|p| p.send_initialize(json!({})))
        .collect();
    for (proxy, id) in proxies.iter_mut().zip(&ids) {
        let response = proxy.response(id);
        proxy.finish_initialize(&response);
    }
    for proxy in &mut proxies {
        proxy.wait_for_dirs(&[&a]);
    }

    let (change, said) = add_wait(&sb, &[&b], &[]);
    assert_eq!(change["notified_sessions"], json!(N), "{change}");
    assert!(
        said.contains(&format!("{N} of {N}")),
        "add --wait said {said:?}"
    );
    for proxy in &mut proxies {
        proxy.wait_for_dirs(&[&a, &b]);
    }
    let all = sessions(&sb);
    assert_eq!(all.len(), N, "{all:?}");
    for s in &all {
        assert_eq!(s["fetched_revision"], change["revision"], "{s}");
    }
}

#[test]
fn the_session_survives_a_daemon_crash_and_catches_up() {
    let mut serving = ServingA::start();
    let (sb, a, proxy) = (&serving.sb, &serving.a, &mut serving.proxy);
    let daemon = &mut serving.daemon;
    let b = sb.mkdir("b");
    let before = wait_for_session(sb, proxy.pid(), "the first fetch", |s| {
        s["fetched_revision"] == json!(1)
    });

    daemon.signal(Signal::KILL);
    daemon.wait();

    // While the daemon is away, tool calls keep flowing, every one answered, in order.
    let mut sent = Vec::new();
    for _ in 0..6 {
        sent.push(proxy.send_request(
            "tools/call",
            json!({"name": "list_allowed_directories", "arguments": {}}),
        ));
    }
    let mut answered = Vec::new();
    while answered.len() < sent.len() {
        let message = proxy.next_message();
        assert!(
            message
                .pointer("/result/content/0/text")
                .and_then(Value::as_str)
                == Some(&format!("Allowed directories:\n{}", a.display())),
            "{message}"
        );
        answered.push(message["id"].clone());
    }
    assert_eq!(answered, sent, "responses were lost or reordered");
    let output = sb.ctl(&["sessions"]);
    assert_exit(&output, 3, "sessions while the daemon is down");

    *daemon = sb.start_daemon();
    // More calls while the proxy reconnects.
    let mut sent = Vec::new();
    for _ in 0..6 {
        sent.push(proxy.send_request(
            "tools/call",
            json!({"name": "list_allowed_directories", "arguments": {}}),
        ));
    }
    let again = wait_for_session(sb, proxy.pid(), "the session again", |_| true);
    assert_eq!(again["era"], json!("handshake"), "{again}");
    assert_eq!(again["fetched_revision"], json!(1), "{again}");
    assert_eq!(again["server"], before["server"], "{again}");
    assert_eq!(again["label"], before["label"], "{again}");

    let (change, said) = add_wait(sb, &[&b], &[]);
    assert!(said.contains("1 of 1"), "add --wait said {said:?}");
    let mut answered = Vec::new();
    while answered.len() < sent.len() {
        let message = proxy.next_message();
        assert!(message.pointer("/result/content").is_some(), "{message}");
        answered.push(message["id"].clone());
    }
    assert_eq!(answered, sent, "responses were lost or reordered");
    proxy.wait_for_dirs(&[a, &b]);
    let after = wait_for_session(sb, proxy.pid(), "the new fetch", |s| {
        s["fetched_revision"] == change["revision"]
    });
    assert_eq!(after["notifications_sent"], json!(1), "{after}");

    // Nothing unexpected reached the host: only responses, each to a request it sent, once.
    let ids: Vec<&Value> = proxy.received.iter().map(|m| &m["id"]).collect();
    let unique: std::collections::BTreeSet<String> = ids.iter().map(|i| i.to_string()).collect();
    assert_eq!(unique.len(), ids.len(), "a response arrived twice: {ids:?}");
    assert!(
        proxy.received.iter().all(|m| m.get("method").is_none()),
        "{:?}",
        proxy.received
    );
}

#[test]
fn sessions_json_describes_the_real_server() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let a = sb.mkdir("a");
    let change: Value =
        serde_json::from_str(&sb.ctl_ok(&["add", "a", "--json"])).expect("add --json");
    let mut proxy = Proxy::spawn(&sb, &["--name", "fs-under-test"], &filesystem_server());
    let init = proxy.initialize();
    proxy.wait_for_dirs(&[&a]);

    let session = wait_for_session(&sb, proxy.pid(), "the fetch", |s| {
        s["fetched_revision"] == change["revision"]
    });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(session["server"]["name"], json!("secure-filesystem-server"));
    assert_eq!(
        session["server"]["version"],
        init["result"]["serverInfo"]["version"]
    );
    assert_eq!(session["server"]["version"], json!("0.2.0"), "{session}");
    assert_eq!(
        session["protocol_version"],
        json!("2025-11-25"),
        "{session}"
    );
    assert_eq!(session["era"], json!("handshake"), "{session}");
    assert_eq!(session["label"], json!("fs-under-test"), "{session}");
    assert_eq!(session["workspace"], json!("default"), "{session}");
    assert_eq!(session["list_changed"], json!(true), "{session}");
    assert_eq!(session["notifications_sent"], json!(0), "{session}");
    let fetched = session["last_fetch_unix"].as_u64().expect("a fetch time");
    assert!(now.abs_diff(fetched) <= 60, "{session} at {now}");
    assert!(
        session["connected_secs"].as_u64().is_some_and(|s| s < 60),
        "{session}"
    );
    assert!(session["id"].as_u64().is_some(), "{session}");
}

#[test]
fn closing_stdin_ends_the_proxy_with_the_servers_status() {
    let mut serving = ServingA::start();
    let (sb, proxy) = (&serving.sb, &mut serving.proxy);
    wait_for_session(sb, proxy.pid(), "the session", |_| true);

    let started = Instant::now();
    proxy.close_stdin();
    let status = proxy.wait_exit();
    let took = started.elapsed();
    let stderr = proxy.final_stderr();
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
    assert!(
        !stderr.contains("SIGTERM") && !stderr.contains("SIGKILL"),
        "the server exits on stdin EOF by itself; the proxy escalated:\n{stderr}"
    );
    assert!(took < PATIENCE / 4, "took {took:?}");
    // Its session is gone with it.
    wait_for_no_sessions(sb);
}

#[test]
fn a_missing_or_unrunnable_command_exits_127_or_126_with_a_message() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let missing = sb.path().join("no-such-server");
    let output = sb.ctl(&["proxy", "--", missing.to_str().unwrap(), "--flag"]);
    assert_exit(&output, 127, "proxy of a missing command");
    let err = stderr_of(&output);
    assert!(err.contains("no-such-server"), "names the command: {err}");
    assert!(
        err.to_lowercase().contains("not found") || err.contains("No such file"),
        "{err}"
    );
    assert!(stdout_of(&output).is_empty(), "stdout is for MCP only");

    let not_executable = sb.path().join("server.txt");
    std::fs::write(&not_executable, "#!/bin/sh\nexit 0\n").unwrap();
    let output = sb.ctl(&["proxy", "--", not_executable.to_str().unwrap()]);
    assert_exit(&output, 126, "proxy of a non-executable file");
    assert!(
        stderr_of(&output).contains("server.txt"),
        "{}",
        stderr_of(&output)
    );

    assert!(sessions(&sb).is_empty(), "no session is left behind");
}
