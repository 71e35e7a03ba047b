//! `rootsctl proxy --host-roots merge|publish`: a host with roots of its own (an editor's open
//! folders) declares them, answers the proxy's `roots/list` and changes them mid-session, and the
//! real filesystem server sees them, merged with the workspace's or published into it for every
//! session. The 2026-07-28 cases run the scripted fake, since the real server speaks the
//! handshake era only.

use std::path::Path;

use rootsd_tests::{PATIENCE, Sandbox, eventually};
use rustix::process::{Pid, Signal};
use serde_json::{Value, json};

use crate::support::{
    FakeSession, FakeSetup, Proxy, add_wait, assert_exit, caps_with_roots, filesystem_server,
    modern_call, stdout_of, wait_for_session,
};

/// The canonical `file://` URI of a directory.
fn uri(dir: &Path) -> String {
    url::Url::from_directory_path(dir)
        .expect("an absolute path")
        .as_str()
        .trim_end_matches('/')
        .to_owned()
}

/// `{"uri", "name"}` for a directory, as a host names it.
fn root(dir: &Path, name: &str) -> Value {
    json!({"uri": uri(dir), "name": name})
}

/// `rootsctl ARGS`, which must succeed; its stdout.
fn ctl_out(sb: &Sandbox, args: &[&str]) -> String {
    let output = sb.ctl(args);
    assert_exit(&output, 0, &format!("rootsctl {args:?}"));
    stdout_of(&output)
}

/// Waits until the default workspace holds exactly `dirs`, in order.
#[track_caller]
fn wait_for_workspace(sb: &Sandbox, dirs: &[&Path]) {
    let expected: Vec<String> = dirs.iter().map(|d| uri(d)).collect();
    eventually(
        &format!("the workspace to hold {expected:?}"),
        PATIENCE,
        || {
            let roots = sb.roots("default");
            let uris: Vec<String> = roots
                .iter()
                .map(|r| r["uri"].as_str().unwrap_or_default().to_owned())
                .collect();
            if uris == expected {
                Ok(())
            } else {
                Err(format!("{roots:?}"))
            }
        },
    );
}

#[test]
fn merge_shows_the_server_the_workspaces_roots_and_the_hosts_as_they_change() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let ws = sb.mkdir("ws");
    let (one, two, b) = (
        sb.mkdir("editor/one"),
        sb.mkdir("editor/two"),
        sb.mkdir("b"),
    );
    sb.ctl_ok(&["add", "ws"]);

    let mut proxy = Proxy::spawn(&sb, &["--host-roots", "merge"], &filesystem_server());
    proxy.initialize_with_roots();
    // The host names `ws` too, in another spelling: the server sees it once.
    let ws_again = format!("file://localhost{}/", ws.display());
    proxy.answer_roots(json!([root(&one, "one"), {"uri": ws_again, "name": "host's"}]));
    proxy.wait_for_dirs(&[&ws, &one]);
    let session = wait_for_session(&sb, proxy.pid(), "the host's answer", |s| {
        s["host_roots"]["host"] == json!("answered")
    });
    assert_eq!(
        session["host_roots"],
        json!({"mode": "merge", "host": "answered", "roots": 2, "ignored": 0}),
        "{session}"
    );
    assert!(ctl_out(&sb, &["sessions"]).contains("merge 2"));

    // The editor closes one folder and opens another.
    proxy.notify("notifications/roots/list_changed", json!({}));
    proxy.answer_roots(json!([root(&two, "two")]));
    proxy.wait_for_dirs(&[&ws, &two]);
    // Nothing of the host's reached the workspace.
    wait_for_workspace(&sb, &[&ws]);

    // A change of the workspace reaches the server with the host's roots kept.
    let (_, said) = add_wait(&sb, &[b.as_path()], &[]);
    assert!(said.contains("1 of 1"), "add --wait said {said:?}");
    proxy.wait_for_dirs(&[&ws, &two, &b]);
}

#[test]
fn publish_puts_the_hosts_roots_in_the_workspace_for_every_session_until_the_proxy_dies() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mine = sb.mkdir("mine");
    let (one, two) = (sb.mkdir("editor/one"), sb.mkdir("editor/two"));
    sb.ctl_ok(&["add", "mine"]);

    let mut editor = Proxy::spawn(
        &sb,
        &["--host-roots", "publish", "--name", "editor"],
        &filesystem_server(),
    );
    editor.initialize_with_roots();
    editor.answer_roots(json!([root(&one, "one"), root(&mine, "my folder")]));
    editor.wait_for_dirs(&[&mine, &one]);
    wait_for_workspace(&sb, &[&mine, &one]);

    // `list --json` stays exactly MCP's ListRootsResult; --long says who holds each root.
    let exact = ctl_out(&sb, &["list", "--json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&exact).unwrap(),
        json!({"roots": [root(&mine, "mine"), root(&one, "one")]}),
        "{exact}"
    );
    let session = wait_for_session(&sb, editor.pid(), "the publication", |s| {
        s["host_roots"]["roots"] == json!(2)
    });
    let by_editor =
        json!({"by": "session", "session": session["id"], "label": "editor", "pid": editor.pid()});
    let long: Value = serde_json::from_str(&ctl_out(&sb, &["list", "--json", "--long"])).unwrap();
    assert_eq!(
        long,
        json!({"roots": [
            {"uri": uri(&mine), "name": "mine", "origin": [{"by": "hand"}, by_editor]},
            {"uri": uri(&one), "name": "one", "origin": [by_editor]},
        ]}),
    );
    let table = ctl_out(&sb, &["list"]);
    let origin = format!("session {} (editor, pid {})", session["id"], editor.pid());
    assert!(
        table.lines().next().is_some_and(|h| h.contains("ORIGIN"))
            && table.contains(&format!("hand, {origin}"))
            && table.contains(&origin),
        "{table}"
    );

    // Another session, which does nothing with its host's roots, sees them.
    let mut agent = Proxy::spawn(&sb, &["--name", "agent"], &filesystem_server());
    agent.initialize();
    agent.wait_for_dirs(&[&mine, &one]);
    let sessions = ctl_out(&sb, &["sessions"]);
    assert!(
        sessions.contains("HOSTROOTS") && sessions.contains("publish 2"),
        "{sessions}"
    );
    assert!(
        sessions
            .lines()
            .any(|l| l.contains("agent") && l.trim_end().ends_with("replace")),
        "{sessions}"
    );

    // The editor's folders change mid-session: every session follows.
    editor.notify("notifications/roots/list_changed", json!({}));
    editor.answer_roots(json!([root(&mine, "mine"), root(&two, "two")]));
    wait_for_workspace(&sb, &[&mine, &two]);
    agent.wait_for_dirs(&[&mine, &two]);
    editor.wait_for_dirs(&[&mine, &two]);

    // The editor's proxy dies without a word: its roots go, the one added by hand stays.
    rustix::process::kill_process(
        Pid::from_raw(editor.pid() as i32).expect("a real pid"),
        Signal::KILL,
    )
    .expect("kill the proxy");
    wait_for_workspace(&sb, &[&mine]);
    agent.wait_for_dirs(&[&mine]);
    let long: Value = serde_json::from_str(&ctl_out(&sb, &["list", "--json", "--long"])).unwrap();
    assert_eq!(
        long["roots"][0]["origin"],
        json!([{"by": "hand"}]),
        "{long}"
    );
    assert!(!ctl_out(&sb, &["list"]).contains("ORIGIN"));
}

#[test]
fn a_restarted_daemon_withdraws_what_was_published_and_the_live_session_publishes_it_again() {
    let sb = Sandbox::new();
    let mut daemon = sb.start_daemon();
    let ws = sb.mkdir("ws");
    let one = sb.mkdir("editor/one");
    sb.ctl_ok(&["add", "ws"]);
    let mut editor = Proxy::spawn(&sb, &["--host-roots", "publish"], &filesystem_server());
    editor.initialize_with_roots();
    editor.answer_roots(json!([root(&one, "one")]));
    wait_for_workspace(&sb, &[&ws, &one]);
    editor.wait_for_dirs(&[&ws, &one]);

    daemon.signal(Signal::KILL);
    daemon.wait();
    daemon = sb.start_daemon();
    // The proxy reconnects, registers as a new session and publishes again.
    wait_for_workspace(&sb, &[&ws, &one]);
    let session = wait_for_session(&sb, editor.pid(), "the session again", |_| true);
    let long: Value = serde_json::from_str(&ctl_out(&sb, &["list", "--json", "--long"])).unwrap();
    assert_eq!(
        long["roots"][1]["origin"][0]["session"], session["id"],
        "{long}"
    );
    // Its server was never shown the list without the host's root: it holds revision 4 (added,
    // published, withdrawn at start-up, published again) without having been told of a change.
    let caught_up = wait_for_session(&sb, editor.pid(), "revision 4", |s| {
        s["fetched_revision"] == json!(4)
    });
    assert_eq!(caught_up["notifications_sent"], json!(0), "{caught_up}");
    assert_eq!(editor.allowed_dirs(), [ws.clone(), one.clone()].into());
    drop(editor);
    wait_for_workspace(&sb, &[&ws]);
    drop(daemon);
}

#[test]
fn a_host_that_declares_roots_but_never_answers_holds_the_server_up_only_briefly() {
    let mut fake = FakeSession::start(
        "reference",
        FakeSetup {
            roots: &["a"],
            proxy_options: &["--host-roots", "merge"],
            ..FakeSetup::default()
        },
    );
    fake.proxy.initialize_with_roots();
    let asked = fake.proxy.request_from_proxy("roots/list");
    assert!(
        asked["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("rootsd-roots-")),
        "{asked}"
    );
    // The host says nothing; the server still gets the workspace's list.
    fake.log.wait_for_fetch_of(&fake.roots());
    let session = fake.session("the unanswered request", |s| {
        s["host_roots"]["host"] == json!("no_answer")
    });
    assert_eq!(session["fetched_revision"], json!(1), "{session}");
    assert!(ctl_out(&fake.sb, &["sessions"]).contains("merge 0 (host did not answer)"));
}

#[test]
fn in_2026_the_host_answers_the_servers_roots_round_and_the_server_gets_both_lists() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["a"],
            proxy_options: &["--host-roots", "publish"],
            ..FakeSetup::default()
        },
    );
    fake.registered();
    let h = fake.sb.mkdir("editor/h");
    let a = fake.sb.path().join("a").canonicalize().unwrap();
    let mut call = modern_call(json!("c-1"), "needs_roots", json!({}));
    call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = caps_with_roots();
    fake.proxy.send(&call);
    // The roots round reaches the host whole: it has roots of its own to give.
    let asked = fake.proxy.response(&json!("c-1"));
    assert_eq!(
        asked["result"]["inputRequests"],
        json!({"ws": {"method": "roots/list"}}),
        "{asked}"
    );
    let mut retry = call.clone();
    retry["id"] = json!("c-2");
    retry["params"]["inputResponses"] = json!({"ws": {"roots": [root(&h, "h")]}});
    retry["params"]["requestState"] = asked["result"]["requestState"].clone();
    fake.proxy.send(&retry);
    let done = fake.proxy.response(&json!("c-2"));
    assert_eq!(
        done["result"]["structuredContent"]["inputResponses"]["ws"],
        json!({"roots": [root(&a, "a"), root(&h, "h")]}),
        "{done}"
    );
    // Published: the workspace holds the host's root while the session lasts.
    wait_for_workspace(&fake.sb, &[&a, &h]);
    let session = fake.session("the 2026 publication", |s| {
        s["era"] == json!("stateless") && s["host_roots"]["roots"] == json!(1)
    });
    assert_eq!(session["host_roots"]["mode"], json!("publish"), "{session}");
    fake.proxy.close_stdin();
    fake.proxy.wait_exit();
    wait_for_workspace(&fake.sb, &[&a]);
}
