//! Who may connect: rootsd's own user only, unless `--allow-group` (the system-wide units)
//! also admits members of the socket file's group.
//!
//! Connecting as another user takes root (the tests run clients through `setpriv`), as does
//! creating the real users and groups the role tests need; without root those tests fail and say
//! so.

use std::fs;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rootsd_tests::accounts::{Account, account, dir_of, require_root, share_binary};
use rootsd_tests::{Reaped, Sandbox, answers, bin, eventually, output_within, setpriv};
use serde_json::json;

use crate::support::{
    Watched, activate, assert_exit, listening, socket_activate, systemd_tool, text,
};

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
    require_root("connecting as other users");

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
    let told = text(&stranger.stderr);
    assert!(
        told.contains("does not admit you") && told.contains(&format!("uid {AGENT}")),
        "{told}"
    );
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
    let told = text(&member.stderr);
    assert!(told.contains("serves only its own user"), "{told}");
    let log = daemon.stop();
    assert!(
        log.contains("refused a connection from another user"),
        "{log}"
    );
}

pub(crate) const MEMBERS: &str = "rootsd-test-members";
pub(crate) const ADMINS: &str = "rootsd-test-admins";

/// The shared service as the system units run it: systemd (here systemd-socket-activate, as
/// root) listens on a socket of group [`MEMBERS`], mode 0660, in a root directory, and starts
/// rootsd as its own user with `--allow-group --admin-group ADMINS`.
pub(crate) fn shared_service(sb: &Sandbox) -> Watched {
    let service = account("rootsd-test-service", &[]);
    let home = sb.path().join("service");
    dir_of(&service, &home, 0o700);
    let rootsd = share_binary(sb, "rootsd");
    let run = sb.socket.parent().unwrap();
    fs::create_dir_all(run).unwrap();
    fs::set_permissions(run, fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = Command::new(systemd_tool("systemd-socket-activate"));
    cmd.arg("-l")
        .arg(&sb.socket)
        .args(["-E", "RUST_LOG=info"])
        .arg(setpriv())
        .arg(format!("--reuid={}", service.uid))
        .arg(format!("--regid={}", service.gid))
        .arg("--init-groups")
        .arg(rootsd)
        .args(["--allow-group", "--admin-group", ADMINS, "--socket"])
        .arg(&sb.socket)
        .arg("--state-dir")
        .arg(home.join("state"));
    let mut daemon = listening(sb, cmd);
    let members = rootsd_tests::accounts::group(MEMBERS);
    chown(&sb.socket, Some(0), Some(members)).unwrap();
    fs::set_permissions(&sb.socket, fs::Permissions::from_mode(0o660)).unwrap();
    daemon.poll("rootsd to answer root", || answers(&sb.socket));
    daemon
}

/// `rootsctl --socket SOCKET ARGS` as `user`.
pub(crate) fn rootsctl_as(
    user: &Account,
    rootsctl: &Path,
    socket: &Path,
    args: &[&str],
) -> Command {
    let mut cmd = user.command(rootsctl);
    cmd.arg("--socket")
        .arg(socket)
        .args(args)
        .env("ROOTSD_NO_AUTOSTART", "1");
    cmd
}

#[test]
fn members_read_watch_and_attach_admins_change_and_strangers_are_told_why() {
    require_root("real users and groups");
    let member = account("rootsd-test-member", &[MEMBERS]);
    let admin = account("rootsd-test-admin", &[MEMBERS, ADMINS]);
    let stranger = account("rootsd-test-stranger", &[]);
    let sb = Sandbox::new();
    let daemon = shared_service(&sb);
    let rootsctl = share_binary(&sb, "rootsctl");
    let socket = sb.socket.clone();
    let run = |user: &Account, args: &[&str]| {
        output_within(&mut rootsctl_as(user, &rootsctl, &socket, args))
    };
    let project = sb.mkdir("project");
    let third = sb.mkdir("third");

    // An admin changes roots.
    assert_exit(
        &run(&admin, &["add", project.to_str().unwrap()]),
        0,
        "an admin adds",
    );

    // A member lists them, and watches the next change.
    let listed = run(&member, &["list", "--json"]);
    assert_exit(&listed, 0, "a member lists");
    assert!(
        text(&listed.stdout).contains(project.to_str().unwrap()),
        "{listed:?}"
    );
    let mut watch = rootsctl_as(&member, &rootsctl, &socket, &["watch", "--json"]);
    let mut watch = watch
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the member's watch");
    let (lines, watched) = std::sync::mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let watch = Reaped(watch);
    // The watch subscribes at some point after it starts; each admin change until it reports
    // one is a new root.
    let mut changes = 0;
    let seen = eventually(
        "the member's watch to see a change",
        rootsd_tests::PATIENCE,
        || {
            changes += 1;
            let dir = sb.mkdir(&format!("watched{changes}"));
            assert_exit(
                &run(&admin, &["add", dir.to_str().unwrap()]),
                0,
                "an admin adds",
            );
            match watched.recv_timeout(std::time::Duration::from_millis(200)) {
                Ok(line) => Ok(line),
                Err(err) => Err(err.to_string()),
            }
        },
    );
    assert!(seen.contains("watched"), "{seen}");
    drop(watch);

    // A member attaches an MCP session through the proxy.
    let mut proxy = rootsctl_as(
        &member,
        &rootsctl,
        &socket,
        &["proxy", "--name", "member-session", "--", "cat"],
    );
    let proxy = Reaped(
        proxy
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start the member's proxy"),
    );
    eventually(
        "the member's session to register",
        rootsd_tests::PATIENCE,
        || {
            let sessions = sb.ctl_ok(&["sessions", "--json"]);
            if sessions.contains("member-session") {
                Ok(())
            } else {
                Err(sessions)
            }
        },
    );
    drop(proxy);

    // But a member may not change roots, and is told who may.
    for args in [
        vec!["add", third.to_str().unwrap()],
        vec!["remove", project.to_str().unwrap()],
    ] {
        let refused = run(&member, &args);
        assert_exit(&refused, 1, &format!("a member runs {args:?}"));
        let said = text(&refused.stderr);
        assert!(
            said.contains(&format!(
                "uid {} may list, watch and attach sessions",
                member.uid
            )) && said.contains(ADMINS)
                && said.contains("usermod -aG")
                && said.contains("nothing was changed"),
            "{said}"
        );
    }
    let roots = sb.ctl_ok(&["list", "--json"]);
    assert!(
        roots.contains(project.to_str().unwrap()) && !roots.contains(third.to_str().unwrap()),
        "{roots}"
    );

    // A stranger (the socket opened to everyone, so that the kernel lets them connect) is told
    // who they are, whom rootsd admits, and what to do, before the connection closes.
    fs::set_permissions(&sb.socket, fs::Permissions::from_mode(0o666)).unwrap();
    let refused = run(&stranger, &["list"]);
    assert_exit(&refused, 3, "a stranger lists");
    let said = text(&refused.stderr);
    assert!(
        said.contains("does not admit you")
            && said.contains(&format!("uid {}", stranger.uid))
            && said.contains(MEMBERS)
            && said.contains(ADMINS)
            && said.contains("usermod -aG"),
        "{said}"
    );
    assert!(!said.contains("reset by peer"), "{said}");
    let log = daemon.stop();
    assert!(
        log.contains("refused a connection from a user who is not in the socket's group"),
        "{log}"
    );
}

#[test]
fn admin_group_needs_allow_group_and_a_group_that_exists() {
    let sb = Sandbox::new();
    let output = output_within(sb.rootsd().args(["--admin-group", "wheel"]));
    assert_exit(&output, 2, "--admin-group without --allow-group");
    assert!(text(&output.stderr).contains("--allow-group"), "{output:?}");

    let mut daemon = listening(
        &sb,
        socket_activate(
            &sb,
            &[
                "--allow-group",
                "--admin-group",
                "rootsd-test-no-such-group",
            ],
        ),
    );
    // The first connection starts rootsd, which gives up before serving it.
    let _first = std::os::unix::net::UnixStream::connect(&sb.socket).unwrap();
    daemon.wait_for_log("there is no group \"rootsd-test-no-such-group\" in /etc/group");
    let exit = daemon.daemon.wait();
    assert_eq!(exit.code(), Some(1), "{exit}");
}

#[test]
fn the_log_names_the_real_user_who_changed_the_shared_roots_and_every_member_may_read_it() {
    require_root("real users and groups");
    let member = account("rootsd-test-member", &[MEMBERS]);
    let admin = account("rootsd-test-admin", &[MEMBERS, ADMINS]);
    let sb = Sandbox::new();
    let daemon = shared_service(&sb);
    let rootsctl = share_binary(&sb, "rootsctl");
    let run = |user: &Account, args: &[&str]| {
        let output = output_within(&mut rootsctl_as(user, &rootsctl, &sb.socket, args));
        assert_exit(&output, 0, &format!("{} runs {args:?}", user.name));
        text(&output.stdout)
    };
    let shared = sb.mkdir("shared-by-the-admin");
    run(&admin, &["add", shared.to_str().unwrap()]);
    // Root changes them too, through the same socket.
    let by_root = sb.mkdir("shared-by-root");
    sb.ctl_ok(&["add", by_root.to_str().unwrap()]);

    // A member, who may not change roots, reads who did.
    let log: serde_json::Value = serde_json::from_str(&run(&member, &["log", "--json"])).unwrap();
    let entries = log["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{log}");
    let (newest, oldest) = (&entries[0]["who"], &entries[1]["who"]);
    assert_eq!(newest["uid"], json!(0), "{log}");
    assert_eq!(newest["user"], json!("root"), "{log}");
    assert_eq!(oldest["kind"], json!("peer"), "{log}");
    assert_eq!(oldest["uid"], json!(admin.uid), "{log}");
    assert_eq!(oldest["user"], json!(admin.name), "{log}");
    assert_eq!(oldest["process"], json!("rootsctl"), "{log}");
    assert!(oldest["pid"].as_u64().is_some_and(|p| p > 1), "{log}");
    let added = entries[1]["added"][0]["uri"].as_str().unwrap();
    assert!(added.ends_with("/shared-by-the-admin"), "{log}");

    let table = run(&member, &["log"]);
    let row = table
        .lines()
        .find(|l| l.ends_with("/shared-by-the-admin"))
        .unwrap_or_else(|| panic!("no row for the admin's change: {table}"));
    assert!(
        row.contains(&format!("{} (uid {}), rootsctl[", admin.name, admin.uid)),
        "{row}"
    );
    drop(daemon);
}
