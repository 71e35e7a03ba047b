//! What the reference filesystem server does with roots whose directory is gone. rootsd gives
//! servers every root of the workspace (they check for themselves); these tests prove what
//! README.md says this server then does: it skips a root that is missing, not a directory, or
//! unreachable, keeps one it cannot list, and looks again only when it next fetches roots.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use rootsd_tests::{PATIENCE, Sandbox, eventually, without_privilege};
use serde_json::{Value, json};

use crate::support::{Proxy, add_wait, filesystem_server, remove_wait};

/// Waits until the server has said on stderr each of `lines`: why it skipped a root.
#[track_caller]
fn wait_for_said(proxy: &Proxy, lines: &[String]) {
    eventually("the server to say why it skipped roots", PATIENCE, || {
        let said = proxy.stderr();
        if lines.iter().all(|line| said.lines().any(|l| l == line)) {
            Ok(())
        } else {
            Err(said)
        }
    });
}

fn dirs(list: &[&PathBuf]) -> std::collections::BTreeSet<PathBuf> {
    list.iter().map(|p| p.to_path_buf()).collect()
}

#[test]
fn the_reference_server_skips_gone_roots_and_sees_changes_only_when_it_next_fetches() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let present = sb.mkdir("present");
    let deleted = sb.mkdir("deleted");
    let now_a_file = sb.mkdir("now-a-file");
    sb.ctl_ok(&["add", "present", "deleted", "now-a-file"]);
    fs::remove_dir(&deleted).unwrap();
    fs::remove_dir(&now_a_file).unwrap();
    fs::write(&now_a_file, "x").unwrap();

    let mut proxy = Proxy::spawn(&sb, &[], &filesystem_server());
    proxy.initialize();
    proxy.wait_for_dirs(&[&present]);
    // It was given every root, and skipped the two that are gone, saying why.
    wait_for_said(
        &proxy,
        &[
            format!(
                "Skipping invalid path or inaccessible: file://{}",
                deleted.display()
            ),
            format!("Skipping non-directory root: {}", now_a_file.display()),
        ],
    );

    // A directory that comes back is not seen until the server fetches roots again, which it
    // does when the workspace changes.
    fs::create_dir(&deleted).unwrap();
    assert_eq!(proxy.allowed_dirs(), dirs(&[&present]));
    let new = sb.mkdir("new");
    add_wait(&sb, &[&new], &[]);
    proxy.wait_for_dirs(&[&present, &deleted, &new]);

    // Nor does it notice a directory deleted after it took it: it keeps it until its next fetch,
    // and then leaves it out.
    fs::remove_dir(&new).unwrap();
    assert_eq!(proxy.allowed_dirs(), dirs(&[&present, &deleted, &new]));
    remove_wait(&sb, &[&now_a_file], &[]);
    proxy.wait_for_dirs(&[&present, &deleted]);
}

#[test]
fn when_every_root_is_gone_the_reference_server_keeps_its_previous_directories() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let a = sb.mkdir("a");
    let b = sb.mkdir("b");
    sb.ctl_ok(&["add", "a", "b"]);
    let mut proxy = Proxy::spawn(&sb, &[], &filesystem_server());
    proxy.initialize();
    proxy.wait_for_dirs(&[&a, &b]);

    fs::remove_dir(&a).unwrap();
    fs::remove_dir(&b).unwrap();
    // A change whose list holds only gone roots.
    let never = sb.path().join("never-created");
    add_wait(&sb, &[&never], &["--allow-missing"]);
    wait_for_said(
        &proxy,
        &["No valid root directories provided by client".to_owned()],
    );
    assert_eq!(proxy.allowed_dirs(), dirs(&[&a, &b]));
}

/// Opens `dirs` again when dropped, so that the sandbox can be removed whoever runs the tests.
struct Reopen(Vec<PathBuf>);

impl Drop for Reopen {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o755));
        }
    }
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn the_reference_server_keeps_a_directory_it_cannot_list_and_skips_one_it_cannot_reach() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let present = sb.mkdir("present");
    let closed = sb.mkdir("closed");
    let locked_in = sb.mkdir("locked/in");
    sb.ctl_ok(&["add", "present", "closed", "locked/in"]);
    let locked = locked_in.parent().unwrap().to_owned();
    let _reopen = Reopen(vec![closed.clone(), locked.clone()]);
    chmod(&closed, 0o000);
    chmod(&locked, 0o000);

    // The proxy, and the server it starts, as a process that permission bits stop.
    let mut cmd = sb.rootsctl();
    cmd.arg("proxy").arg("--").args(filesystem_server());
    let mut proxy = Proxy::spawn_command(without_privilege(cmd));
    proxy.initialize();
    proxy.wait_for_dirs(&[&present, &closed]);
    wait_for_said(
        &proxy,
        &[format!(
            "Skipping invalid path or inaccessible: file://{}",
            locked_in.display()
        )],
    );
    // The one it kept fails in its tools.
    let response = proxy.call_tool("list_directory", json!({"path": closed}));
    assert_eq!(response["result"]["isError"], json!(true), "{response}");
    let text = response
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default();
    assert!(text.contains("EACCES"), "{response}");
}
