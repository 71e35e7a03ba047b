//! Who may connect: rootsd's own user only, unless `--allow-group` (the system-wide units)
//! also admits members of the socket file's group.
//!
//! Connecting as another user takes root (the test runs clients through `setpriv`); without
//! root, the cross-user test checks what one user can and says what it left out.

use std::fs;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rootsd_tests::{Sandbox, bin, output_within, setpriv};
use serde_json::json;

use crate::support::{activate, assert_exit, socket_activate, text};

/// Ids no real account is likely to use.
const GROUP: u32 = 42_420;
const OTHER_GROUP: u32 = 42_421;
const AGENT: u32 = 42_422;

#[test]
fn allow_group_needs_the_socket_from_systemd() {
    let sb = Sandbox::new();
    let output = output_within(sb.rootsd().arg("--allow-group"));
    assert_exit(&output, 1, "rootsd --allow-group binding its own socket");
    let said = text(&output.stderr);
    assert!(
        said.contains("--allow-group needs the socket from systemd"),
        "{said}"
    );
    assert!(!sb.socket.exists(), "it bound a socket anyway");
}

#[test]
fn allow_group_still_serves_rootsd_s_own_user() {
    let sb = Sandbox::new();
    let rootsd = activate(&sb, socket_activate(&sb, &["--allow-group"]));
    let status: serde_json::Value =
        serde_json::from_str(&sb.ctl_ok(&["status", "--json"])).unwrap();
    assert_eq!(status["socket_activated"], json!(true));
    let log = rootsd.stop();
    assert!(log.contains("allow_group=true"), "{log}");
}

/// Runs `rootsctl status --json` against `socket` as uid [`AGENT`] with the given groups.
fn status_as_agent(rootsctl: &Path, socket: &Path, gid: u32, groups: &[u32]) -> Output {
    let groups = if groups.is_empty() {
        "--clear-groups".to_owned()
    } else {
        format!(
            "--groups={}",
            groups
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    output_within(
        Command::new(setpriv())
            .arg(format!("--reuid={AGENT}"))
            .arg(format!("--regid={gid}"))
            .arg(groups)
            .arg(rootsctl)
            .args(["--no-autostart", "status", "--json", "--socket"])
            .arg(socket)
            .env_clear(),
    )
}

/// Prepares the sandbox as the system units would: a directory others may enter, and a socket
/// of group [`GROUP`] with `mode`. Returns a copy of rootsctl that other users may run.
fn share(sb: &Sandbox, mode: u32) -> PathBuf {
    let mode_of = |m| fs::Permissions::from_mode(m);
    fs::set_permissions(sb.path(), mode_of(0o711)).unwrap();
    let run = sb.socket.parent().unwrap();
    fs::set_permissions(run, mode_of(0o755)).unwrap();
    chown(&sb.socket, Some(0), Some(GROUP)).unwrap();
    fs::set_permissions(&sb.socket, mode_of(mode)).unwrap();
    // The built binary may sit under a directory only its owner can enter.
    let rootsctl = sb.path().join("rootsctl");
    fs::copy(bin("rootsctl"), &rootsctl).unwrap();
    fs::set_permissions(&rootsctl, mode_of(0o755)).unwrap();
    rootsctl
}

#[test]
fn allow_group_admits_the_socket_group_and_the_default_admits_only_rootsd_s_user() {
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "not root: only rootsd's own user was checked (allow_group_still_serves_rootsd_s_own_user); connecting as other users needs root"
        );
        return;
    }

    // --allow-group: members get in by primary or supplementary group.
    let sb = Sandbox::new();
    let daemon = activate(&sb, socket_activate(&sb, &["--allow-group"]));
    let rootsctl = share(&sb, 0o660);
    let primary = status_as_agent(&rootsctl, &sb.socket, GROUP, &[]);
    assert_exit(&primary, 0, "a member by primary group");
    let supplementary = status_as_agent(&rootsctl, &sb.socket, OTHER_GROUP, &[GROUP]);
    assert_exit(&supplementary, 0, "a member by supplementary group");

    // With the socket opened to everyone, the kernel lets a stranger connect: rootsd itself must
    // still refuse.
    fs::set_permissions(&sb.socket, fs::Permissions::from_mode(0o666)).unwrap();
    let stranger = status_as_agent(&rootsctl, &sb.socket, OTHER_GROUP, &[]);
    assert_exit(&stranger, 3, "a stranger on an open socket");
    let log = daemon.stop();
    assert!(
        log.contains("refused a connection from a user who is not in the socket's group"),
        "{log}"
    );

    // Without the flag, the group grants nothing.
    let sb = Sandbox::new();
    let daemon = activate(&sb, socket_activate(&sb, &[]));
    let rootsctl = share(&sb, 0o660);
    let member = status_as_agent(&rootsctl, &sb.socket, GROUP, &[]);
    assert_exit(&member, 3, "a group member of a strict daemon");
    let log = daemon.stop();
    assert!(
        log.contains("refused a connection from another user"),
        "{log}"
    );
}
