//! Hosts start MCP servers with a stripped environment: the TypeScript and Python SDKs pass only
//! `HOME LOGNAME PATH SHELL TERM USER` unless told otherwise. A proxy started that way must reach
//! the same rootsd as the user's shell, which has `XDG_RUNTIME_DIR`, whichever of the two starts
//! the daemon. These tests run both kinds of client with exactly those environments (`env -i`),
//! in both orders, through the proxy (with the real filesystem server) and the CLI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rootsd_tests::{AutostartGuard, PATIENCE, Sandbox, bin, output_within};
use serde_json::Value;

use crate::support::{Proxy, assert_exit, filesystem_server, stderr_of, stdout_of};

/// A user's desktop in a sandbox: a home, and a runtime directory that only the user's shell
/// knows about.
struct Desktop {
    sb: Sandbox,
    home: PathBuf,
    runtime: PathBuf,
}

impl Desktop {
    fn new() -> Self {
        let uid = rustix::process::getuid().as_raw();
        let real_unit_socket = PathBuf::from(format!("/run/user/{uid}/rootsd/rootsd.sock"));
        assert!(
            !real_unit_socket.exists(),
            "{} exists: this user runs a rootsd of their own, which a client without \
             XDG_RUNTIME_DIR would find; run these tests as a user without one",
            real_unit_socket.display()
        );
        let sb = Sandbox::new();
        let home = sb.mkdir("home");
        let runtime = sb.mkdir("xdg");
        std::fs::set_permissions(
            &runtime,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("make the runtime directory private");
        Self { sb, home, runtime }
    }

    /// Where a rootsctl computes the state directory from `HOME` alone.
    fn state_dir(&self) -> PathBuf {
        self.home.join(".local/state/rootsd")
    }

    /// `program` with exactly the environment MCP SDKs give a stdio server.
    fn bare(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("HOME", &self.home)
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            )
            .env("USER", "tester")
            .env("LOGNAME", "tester")
            .env("SHELL", "/bin/sh")
            .env("TERM", "dumb")
            .current_dir(self.sb.path());
        cmd
    }

    /// `program` as the user's shell runs it: the same, plus `XDG_RUNTIME_DIR`.
    fn shell(&self, program: &Path) -> Command {
        let mut cmd = self.bare(program);
        cmd.env("XDG_RUNTIME_DIR", &self.runtime);
        cmd
    }

    fn rootsctl_bare(&self, args: &[&str]) -> std::process::Output {
        output_within(self.bare(&bin("rootsctl")).args(args))
    }

    fn rootsctl_shell(&self, args: &[&str]) -> std::process::Output {
        output_within(self.shell(&bin("rootsctl")).args(args))
    }

    fn status(&self, from_shell: bool) -> Value {
        let output = if from_shell {
            self.rootsctl_shell(&["status", "--json"])
        } else {
            self.rootsctl_bare(&["status", "--json"])
        };
        assert_exit(&output, 0, "rootsctl status --json");
        serde_json::from_slice(&output.stdout).expect("status --json is JSON")
    }

    /// A proxy as a host with a stripped environment starts it, running the real filesystem
    /// server.
    fn bare_proxy(&self) -> Proxy {
        let mut cmd = self.bare(&bin("rootsctl"));
        cmd.arg("proxy").arg("--").args(filesystem_server());
        Proxy::spawn_command(cmd)
    }
}

#[test]
fn a_proxy_started_without_xdg_runtime_dir_finds_the_daemon_the_shell_started() {
    let desktop = Desktop::new();
    let _guard = AutostartGuard::for_state_dir(desktop.state_dir());
    let a = desktop.sb.mkdir("work/a");

    let added = desktop.rootsctl_shell(&["add", a.to_str().unwrap()]);
    assert_exit(&added, 0, "rootsctl add from the shell (starts rootsd)");
    let shell_status = desktop.status(true);
    assert_eq!(
        shell_status["socket"],
        serde_json::json!(desktop.runtime.join("rootsd/rootsd.sock")),
        "the shell's rootsd listens in its runtime directory"
    );

    // The CLI without XDG_RUNTIME_DIR reaches the same daemon, and starts no other.
    let listed = desktop.rootsctl_bare(&["list", "--json"]);
    assert_exit(&listed, 0, "rootsctl list without XDG_RUNTIME_DIR");
    let roots: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(roots["roots"].as_array().map(Vec::len), Some(1), "{roots}");
    assert_eq!(desktop.status(false)["pid"], shell_status["pid"]);

    // So does a proxy, and its server gets the shell's roots.
    let mut proxy = desktop.bare_proxy();
    proxy.initialize();
    proxy.wait_for_dirs(&[&a]);
    assert!(
        !proxy.stderr().contains("not running"),
        "the proxy found rootsd at once: {}",
        proxy.stderr()
    );
}

#[test]
fn the_shell_finds_the_daemon_a_proxy_started_without_xdg_runtime_dir() {
    let desktop = Desktop::new();
    let _guard = AutostartGuard::for_state_dir(desktop.state_dir());
    let a = desktop.sb.mkdir("work/a");

    // The host starts the proxy first; the proxy starts rootsd.
    let mut proxy = desktop.bare_proxy();
    proxy.initialize();
    let started = rootsd_tests::eventually("the proxy's autostarted rootsd", PATIENCE, || {
        rootsd_tests::daemon_pid(&desktop.state_dir())
            .ok_or("no rootsd holds the state directory yet")
    });

    // The user's shell, which has XDG_RUNTIME_DIR, adds a root: it must reach that daemon at
    // once rather than start a second one and wait for it in vain.
    let began = Instant::now();
    let added = desktop.rootsctl_shell(&["add", a.to_str().unwrap(), "--wait"]);
    assert_exit(&added, 0, "rootsctl add --wait from the shell");
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "the shell took {:?} to reach the proxy's rootsd: {}",
        began.elapsed(),
        stderr_of(&added)
    );
    proxy.wait_for_dirs(&[&a]);
    let status = desktop.status(true);
    assert_eq!(
        status["pid"],
        serde_json::json!(started),
        "one daemon serves both"
    );
    assert_eq!(
        status["socket"],
        serde_json::json!(desktop.state_dir().join("rootsd.sock")),
        "the proxy's rootsd listens in the state directory, which needs only HOME"
    );

    // doctor from the shell explains why it uses that socket, and finds nothing wrong with it.
    let doctor = desktop.rootsctl_shell(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&doctor.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}: {}", stdout_of(&doctor)));
    let which = report["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["name"] == "which socket"))
        .unwrap_or_else(|| panic!("no 'which socket' check: {report}"))
        .clone();
    assert_eq!(which["outcome"], "ok", "{which}");
    let summary = which["summary"].as_str().unwrap();
    assert!(
        summary.contains("recorded by the running rootsd"),
        "{summary}"
    );
    assert!(
        summary.contains(
            &desktop
                .runtime
                .join("rootsd/rootsd.sock")
                .display()
                .to_string()
        ),
        "doctor names the path this environment alone would use: {summary}"
    );
    for check in report["checks"].as_array().unwrap() {
        assert!(
            check["name"] == "systemd" || check["outcome"] != "fail",
            "{check}"
        );
    }
}
