//! Real servers that take the workspace as arguments, behind `rootsctl proxy -- server {roots}`:
//! the reference filesystem server (which also asks for roots, and gets both, consistently) and
//! `mcp-server-git` from PyPI (`--repository {root}`, which never asks), each following a change
//! of the workspace within one host session.

use std::path::{Path, PathBuf};
use std::process::Command;

use rootsd_tests::Sandbox;
use serde_json::json;

use crate::support::{
    Proxy, add_wait, filesystem_server, git_server, remove_wait, wait_for_session,
};

#[test]
fn the_filesystem_server_started_with_roots_follows_a_change_for_a_host_without_roots() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let one = sb.mkdir("one");
    sb.ctl_ok(&["add", "one"]);
    let mut command = filesystem_server();
    command.push("{roots}".into());
    let mut proxy = Proxy::spawn(&sb, &[], &command);
    // The host declares no roots of its own; the server gets the workspace on its command line
    // and, as the proxy declares roots to it, as roots too.
    proxy.initialize();
    proxy.wait_for_dirs(&[&one]);
    let first = wait_for_session(&sb, proxy.pid(), "both ways", |s| {
        s["workspace_via"] == json!("both")
    });
    assert_eq!(first["restarts"], json!(0));

    let two = sb.mkdir("two");
    add_wait(&sb, &[&two], &[]);
    proxy.wait_for_dirs(&[&one, &two]);
    let after = wait_for_session(&sb, proxy.pid(), "one restart", |s| {
        s["restarts"] == json!(1)
    });
    assert_eq!(after["workspace_via"], json!("both"), "{after}");
    assert!(
        after.get("launch_failure").is_none(),
        "{after}\nstderr:\n{}",
        proxy.stderr()
    );
}

/// A Git repository at `dir` with one commit whose message is `message`.
fn repository(dir: &Path, message: &str) {
    let git = |args: &[&str]| {
        let output = Command::new("git")
            .args([
                "-c",
                "user.name=rootsd tests",
                "-c",
                "user.email=tests@rootsd.invalid",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?}: {output:?}");
    };
    git(&["init", "--quiet"]);
    std::fs::write(dir.join("README"), message).expect("write a file");
    git(&["add", "README"]);
    git(&["commit", "--quiet", "-m", message]);
}

/// The text of `git_log` for `repo_path`, or the error it gave.
fn git_log(proxy: &mut Proxy, repo_path: &str) -> Result<String, String> {
    proxy.tool_text("git_log", json!({"repo_path": repo_path}))
}

#[test]
fn mcp_server_git_follows_the_first_root_across_a_change_in_one_session() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let first = sb.mkdir("first");
    let second = sb.mkdir("second");
    repository(&first, "the first repository");
    repository(&second, "the second repository");
    sb.ctl_ok(&["add", "first"]);
    let command = vec![git_server(), "--repository".into(), "{root}".into()];
    let mut proxy = Proxy::spawn(&sb, &["--cwd", "{root}"], &command);
    let init = proxy.initialize();
    assert!(init.pointer("/result/serverInfo/name").is_some(), "{init}");
    // `.` is the server's working directory, the first root.
    let log = git_log(&mut proxy, ".").unwrap_or_else(|e| panic!("git_log failed: {e}"));
    assert!(log.contains("the first repository"), "{log}");

    // "second" becomes the first root: the server is restarted behind the host's back, and
    // `--wait` returns once it answered the replayed initialize.
    add_wait(&sb, &[&second], &[]);
    remove_wait(&sb, &[&first], &[]);
    // No polling: the host's next request is read only once the new server is set up.
    let log = git_log(&mut proxy, ".").unwrap_or_else(|e| panic!("git_log failed: {e}"));
    assert!(log.contains("the second repository"), "{log}");
    let session = wait_for_session(&sb, proxy.pid(), "the restart", |s| {
        s["restarts"] == json!(1)
    });
    assert_eq!(session["workspace_via"], json!("arguments"), "{session}");
    assert!(!log.contains("the first repository"), "{log}");
    // It is confined to the new repository: the old one is outside it now.
    let first_path: PathBuf = std::fs::canonicalize(&first).expect("exists");
    let refused = git_log(&mut proxy, first_path.to_str().expect("UTF-8"));
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("outside the allowed repository")),
        "{refused:?}"
    );
}
