//! `rootsctl proxy --map HOST_DIR=SERVER_DIR`: the server sees roots at the paths it mounts them
//! under, roots outside every map are withheld and reported, and only changes the server can see
//! wake it. No container is needed: a host directory is mapped to another real directory that
//! the reference filesystem server checks, as it would inside a container.

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use rootsd_tests::Sandbox;
use serde_json::{Value, json};

use crate::support::{
    FakeSession, FakeSetup, Proxy, add_wait, assert_exit, filesystem_server, modern_call,
    roots_answers, stderr_of, stdout_of, wait_for_session,
};

/// The daemon's root named `name` in the default workspace.
fn daemon_root(sb: &Sandbox, name: &str) -> Value {
    sb.roots("default")
        .into_iter()
        .find(|r| r["name"] == json!(name))
        .unwrap_or_else(|| panic!("no root named {name}"))
}

/// `rootsctl sessions`, the table.
fn sessions_table(sb: &Sandbox) -> String {
    let output = sb.ctl(&["sessions"]);
    assert_exit(&output, 0, "rootsctl sessions");
    stdout_of(&output)
}

#[test]
fn the_filesystem_server_sees_mapped_roots_and_never_the_withheld() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    // The user's directories, and where "the container" sees them: another real directory with
    // the same tree, which the server checks (it skips roots that do not exist).
    for dir in [
        "host/src/app",
        "host/src/a b#1",
        "host/src/lib",
        "elsewhere",
        "notes",
    ] {
        sb.mkdir(dir);
    }
    let server_src = sb.mkdir("server/src");
    let (app, odd, lib) = (
        sb.mkdir("server/src/app"),
        sb.mkdir("server/src/a b#1"),
        sb.mkdir("server/src/lib"),
    );
    sb.ctl_ok(&["add", "host/src/app", "host/src/a b#1", "elsewhere"]);

    // A relative HOST_DIR is the proxy's working directory's, like `rootsctl add`'s paths.
    let map = format!("host/src={}", server_src.display());
    let mut proxy = Proxy::spawn(&sb, &["--map", &map], &filesystem_server());
    proxy.initialize();
    proxy.wait_for_dirs(&[&app, &odd]);

    let elsewhere = daemon_root(&sb, "elsewhere");
    let session = wait_for_session(&sb, proxy.pid(), "one withheld root", |s| {
        s["withheld"]["outside_map"] == json!(1)
    });
    assert_eq!(
        session["withheld"]["roots"],
        json!([{"uri": elsewhere["uri"], "name": "elsewhere", "reason": "outside_map"}]),
        "{session}"
    );
    assert!(
        sessions_table(&sb).contains("1 outside --map"),
        "{}",
        sessions_table(&sb)
    );

    // A change the server cannot see: no list_changed, and add --wait does not wait for it.
    let started = Instant::now();
    let (change, said) = add_wait(&sb, &[Path::new("notes")], &["--timeout", "60"]);
    // Waiting for the session would take the whole 60 s timeout (the harness gives up on a
    // command after 20 s); a command that does not wait takes milliseconds, and 15 s leaves
    // slack for a loaded machine where a bound just under the timeout did not.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "add --wait took {:?} for a change outside the maps",
        started.elapsed()
    );
    assert!(
        said.contains("fetched revision"),
        "add --wait said {said:?}"
    );
    let session = wait_for_session(&sb, proxy.pid(), "the unseen revision", |s| {
        s["fetched_revision"] == change["revision"]
    });
    assert_eq!(session["notifications_sent"], json!(0), "{session}");
    assert_eq!(session["withheld"]["outside_map"], json!(2), "{session}");
    assert_eq!(proxy.allowed_dirs(), [app.clone(), odd.clone()].into());

    // A change it can see reaches it, mapped.
    let (change, said) = add_wait(&sb, &[Path::new("host/src/lib")], &[]);
    assert!(said.contains("1 of 1"), "add --wait said {said:?}");
    proxy.wait_for_dirs(&[&app, &odd, &lib]);
    let session = wait_for_session(&sb, proxy.pid(), "the fetch of lib", |s| {
        s["fetched_revision"] == change["revision"]
    });
    assert_eq!(session["notifications_sent"], json!(1), "{session}");
}

#[test]
fn the_longest_map_wins_and_names_that_are_not_utf8_survive() {
    let mut fake = FakeSession::start(
        "reference",
        FakeSetup {
            roots: &["host/a", "host/deep/b", "other"],
            proxy_options: &["--map", "host=/srv", "--map", "host/deep/=/mnt/deep"],
            ..FakeSetup::default()
        },
    );
    fake.proxy.initialize();
    fake.log.wait_for_fetch_of(&json!([
        {"uri": "file:///srv/a", "name": "a"},
        {"uri": "file:///mnt/deep/b", "name": "b"},
    ]));

    // A directory whose name is not UTF-8, added by its URI.
    let raw = fake
        .sb
        .path()
        .join("host")
        .join(std::ffi::OsStr::from_bytes(b"x\xff y"));
    std::fs::create_dir(&raw).unwrap();
    let uri = format!(
        "file://{}/host/x%FF%20y",
        fake.sb.path().canonicalize().unwrap().display()
    );
    add_wait(&fake.sb, &[Path::new(&uri)], &[]);
    let answers = roots_answers(
        &fake
            .log
            .wait_for("the fetch of x%FF%20y", |m| roots_answers(m).len() >= 2),
    );
    assert_eq!(
        answers[1]["result"]["roots"][2]["uri"],
        json!("file:///srv/x%FF%20y"),
        "{}",
        answers[1]
    );
    let session = fake.session("the withheld root", |s| {
        s["withheld"]["outside_map"] == json!(1)
    });
    assert_eq!(
        session["withheld"]["roots"][0]["name"],
        json!("other"),
        "{session}"
    );
}

#[test]
fn input_required_is_answered_with_mapped_roots_in_2026() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["host/app", "other"],
            proxy_options: &["--map", "host=/srv"],
            ..FakeSetup::default()
        },
    );
    fake.registered();
    let id = json!("m-1");
    fake.proxy
        .send(&modern_call(id.clone(), "needs_roots", json!({})));
    let response = fake.proxy.response(&id);
    assert_eq!(
        response["result"]["structuredContent"]["inputResponses"]["ws"],
        json!({"roots": [{"uri": "file:///srv/app", "name": "app"}]}),
        "{response}"
    );
    let session = fake.session("the 2026 session with a withheld root", |s| {
        s["era"] == json!("stateless") && s["withheld"]["outside_map"] == json!(1)
    });
    assert_eq!(
        session["withheld"]["roots"][0]["uri"],
        daemon_root(&fake.sb, "other")["uri"],
        "{session}"
    );
}

#[test]
fn a_bad_map_is_a_usage_error_before_the_server_starts() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let marker = sb.path().join("server-ran");
    let start = format!("touch '{}'", marker.display());
    for (map, says) in [
        ("host/src", "is not HOST_DIR=SERVER_DIR"),
        ("host=relative", "is not HOST_DIR=SERVER_DIR"),
        ("~/src=/src", "starts with `~`"),
    ] {
        let output = sb.ctl(&["proxy", "--map", map, "--", "sh", "-c", &start]);
        assert_exit(&output, 2, &format!("proxy --map {map}"));
        let err = stderr_of(&output);
        assert!(err.contains(says) && err.contains(map), "{map}: {err}");
        assert!(stdout_of(&output).is_empty(), "stdout is for MCP only");
    }
    let output = sb.ctl(&[
        "proxy", "--map", "a=/x", "--map", "./a/=/y", "--", "sh", "-c", &start,
    ]);
    assert_exit(&output, 2, "proxy with the same HOST_DIR twice");
    assert!(
        stderr_of(&output).contains("both map"),
        "{}",
        stderr_of(&output)
    );
    assert!(!marker.exists(), "the server started despite a bad --map");
}
