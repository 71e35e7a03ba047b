//! Who is on the other end: rootsctl talks only to a daemon of its own user, root, or a system
//! service, and rootsd listens only in a directory no other user can write to. The attacker is a
//! real second user (`rootsd-test-mallory`), so these tests need root.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::mpsc;

use rootsd_tests::accounts::{Account, account, dir_of, require_root, share_binary};
use rootsd_tests::{PATIENCE, Sandbox, output_within};
use serde_json::{Value, json};

use crate::support::{Reaped, assert_exit, lines_of, stderr_of, stdout_of};

/// An impostor `mallory` runs on `socket`: it would answer `roots.list` with a planted root.
struct Impostor {
    _process: Reaped,
    lines: mpsc::Receiver<String>,
}

impl Impostor {
    #[track_caller]
    fn start(sb: &Sandbox, mallory: &Account, socket: &Path) -> Self {
        let impostor = share_binary(sb, "rootsd-impostor");
        let mut child = mallory
            .command(impostor)
            .arg(socket)
            .arg("file:///planted/by/mallory")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the impostor");
        let lines = lines_of(child.stdout.take().unwrap());
        let first = lines.recv_timeout(PATIENCE);
        assert_eq!(
            first.as_deref(),
            Ok("listening"),
            "the impostor did not start"
        );
        Self {
            _process: Reaped(child),
            lines,
        }
    }

    /// Every line a client managed to send it so far.
    fn received(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }
}

/// A directory `mode`, root's, standing in for `/tmp`.
fn shared_tmp(sb: &Sandbox) -> PathBuf {
    let tmp = sb.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    tmp
}

#[test]
fn rootsctl_refuses_a_socket_another_user_created_in_its_place() {
    require_root("playing an attacker");
    let victim = account("rootsd-test-victim", &[]);
    let mallory = account("rootsd-test-mallory", &[]);
    let sb = Sandbox::new();
    let rootsctl = share_binary(&sb, "rootsctl");
    let tmp = shared_tmp(&sb);
    // The victim's home is so deep that its state directory cannot hold a socket, so, without
    // XDG_RUNTIME_DIR, rootsctl falls back to ${TMPDIR:-/tmp}/rootsd-$UID: a directory anyone
    // could create first.
    let home = sb.path().join("home").join("v".repeat(90));
    std::fs::create_dir_all(home.parent().unwrap()).unwrap();
    dir_of(&victim, &home, 0o700);
    let project = sb.mkdir("project");
    let victim_ctl = |args: &[&str]| -> Output {
        output_within(
            victim
                .command(&rootsctl)
                .args(args)
                .env("HOME", &home)
                .env("TMPDIR", &tmp)
                .env("ROOTSD_NO_AUTOSTART", "1"),
        )
    };
    let fallback = tmp
        .join(format!("rootsd-{}", victim.uid))
        .join("rootsd.sock");
    // Mallory's directory at the victim's fallback path, writable by all as the issue found it,
    // then sticky too, then no directory at all: mallory's socket straight in the shared /tmp.
    for (setup, socket) in [
        ("a 0777 directory", Some(0o777)),
        ("a 1777 directory", Some(0o1777)),
        ("the shared 1777 directory itself", None),
    ]
    .map(|(setup, mode)| match mode {
        Some(mode) => {
            let dir = fallback.parent().unwrap();
            let _ = std::fs::remove_dir_all(dir);
            dir_of(&mallory, dir, mode);
            (setup, fallback.clone())
        }
        None => (setup, tmp.join("rootsd.sock")),
    }) {
        let impostor = Impostor::start(&sb, &mallory, &socket);
        let explicit: Vec<String> = if socket == fallback {
            Vec::new()
        } else {
            vec!["--socket".into(), socket.display().to_string()]
        };
        let with = |args: &[&str]| -> Vec<String> {
            explicit
                .iter()
                .cloned()
                .chain(args.iter().map(|a| a.to_string()))
                .collect()
        };
        for args in [with(&["add", project.to_str().unwrap()]), with(&["list"])] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let output = victim_ctl(&args);
            assert_exit(&output, 3, &format!("{setup}: rootsctl {args:?}"));
            let err = stderr_of(&output);
            assert!(
                err.contains(&format!("refusing to talk to {}", socket.display()))
                    && err.contains(&format!("uid {}", mallory.uid))
                    && err.contains(&format!("(uid {})", victim.uid)),
                "{setup}: {err}"
            );
            assert!(!stdout_of(&output).contains("planted"), "{setup}");
        }
        assert_eq!(
            impostor.received(),
            Vec::<String>::new(),
            "{setup}: the victim's rootsctl sent the impostor something"
        );

        // Doctor says the same, check by check, and does not ask the impostor either.
        let output = output_within(
            victim
                .command(&rootsctl)
                .args(["doctor", "--json", "--socket"])
                .arg(&socket)
                .env("HOME", &home)
                .env("XDG_RUNTIME_DIR", sb.path().join("no-user-manager")),
        );
        assert_exit(&output, 1, &format!("{setup}: doctor"));
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        let check = |name: &str| {
            report["checks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == json!(name))
                .cloned()
                .unwrap_or_else(|| panic!("no {name} check: {report}"))
        };
        let dir = check("socket dir");
        assert_eq!(dir["outcome"], json!("fail"), "{setup}: {dir}");
        assert!(
            dir["summary"]
                .as_str()
                .unwrap()
                .contains("can be written by other users"),
            "{setup}: {dir}"
        );
        let file = check("socket");
        assert_eq!(file["outcome"], json!("fail"), "{setup}: {file}");
        assert!(
            file["summary"].as_str().unwrap().contains(&format!(
                "belongs to uid {}, neither you (uid {}) nor root",
                mallory.uid, victim.uid
            )),
            "{setup}: {file}"
        );
        let daemon = check("daemon");
        assert_eq!(daemon["outcome"], json!("fail"), "{setup}: {daemon}");
        assert!(
            daemon["summary"].as_str().unwrap().starts_with("not asked"),
            "{setup}: {daemon}"
        );
        assert_eq!(impostor.received(), Vec::<String>::new(), "{setup}");
        drop(impostor);
        let _ = std::fs::remove_file(&socket);
    }
}

#[test]
fn rootsd_refuses_to_listen_in_a_directory_others_can_write_to_or_own() {
    let me = rustix::process::geteuid().as_raw();
    let someone = 4242;
    for (owner, mode, says) in [
        (0, 0o1777, "can be written by other users"),
        (0, 0o777, "can be written by other users"),
        (me, 0o770, "can be written by other users"),
        (me, 0o1733, "can be written by other users"),
        (someone, 0o1777, "can be written by other users"),
        (
            someone,
            0o755,
            &format!("belongs to uid {someone}, not to you") as &str,
        ),
    ] {
        let sb = Sandbox::new();
        let dir = sb.socket.parent().unwrap();
        std::fs::create_dir(dir).unwrap();
        if owner != me {
            require_root("a directory of another user");
            std::os::unix::fs::chown(dir, Some(owner), None).unwrap();
        }
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
        let output = output_within(&mut sb.rootsd());
        let what = format!("rootsd in a directory of uid {owner}, mode {mode:o}");
        assert_exit(&output, 1, &what);
        let err = stderr_of(&output);
        assert!(err.contains(says), "{what}: {err}");
        assert!(
            err.contains(&dir.display().to_string()),
            "{what}: names the directory: {err}"
        );
        assert!(!sb.socket.exists(), "{what}: it bound a socket anyway");
    }
}
