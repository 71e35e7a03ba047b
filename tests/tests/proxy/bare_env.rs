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

/// The state directory a user with `XDG_STATE_HOME` has: not where `HOME` alone leads.
fn xdg_state(desktop: &Desktop) -> (PathBuf, PathBuf) {
    let xdg = desktop.sb.mkdir("xdg-state");
    let state = xdg.join("rootsd");
    (xdg, state)
}

/// The check named `name` of `rootsctl doctor --json`'s report.
fn doctor_check(output: &std::process::Output, name: &str) -> Value {
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}: {}", stdout_of(output)));
    report["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no {name:?} check: {report}"))
        .clone()
}

/// Stops the daemon holding `state` and waits until its lock is free.
fn stop_daemon(state: &Path) {
    let pid = rootsd_tests::daemon_pid(state).expect("a daemon holds the state directory");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::TERM,
    )
    .expect("signal rootsd");
    rootsd_tests::eventually(
        "rootsd to stop",
        PATIENCE,
        || match rootsd_tests::daemon_pid(state) {
            Some(pid) => Err(format!("pid {pid} still holds {}", state.display())),
            None => Ok(()),
        },
    );
}

#[test]
fn a_bare_environment_finds_the_daemon_of_a_user_with_xdg_state_home_and_restarts_it_there() {
    let desktop = Desktop::new();
    let (xdg, state) = xdg_state(&desktop);
    let _guard = AutostartGuard::for_state_dir(state.clone());
    let _home_guard = AutostartGuard::for_state_dir(desktop.state_dir());
    let a = desktop.sb.mkdir("work/a");
    let shell = |args: &[&str]| {
        output_within(
            desktop
                .bare(&bin("rootsctl"))
                .env("XDG_STATE_HOME", &xdg)
                .args(args),
        )
    };

    assert_exit(
        &shell(&["add", a.to_str().unwrap()]),
        0,
        "rootsctl add from the shell, which has XDG_STATE_HOME (starts rootsd)",
    );
    let first = rootsd_tests::daemon_pid(&state).expect("the shell's rootsd holds its state");

    // What a host starts with only HOME and PATH reaches that daemon and no other.
    let listed = desktop.rootsctl_bare(&["list", "--json"]);
    assert_exit(&listed, 0, "rootsctl list with a bare environment");
    let roots: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(roots["roots"].as_array().map(Vec::len), Some(1), "{roots}");
    assert_eq!(desktop.status(false)["pid"], serde_json::json!(first));
    let mut proxy = desktop.bare_proxy();
    proxy.initialize();
    proxy.wait_for_dirs(&[&a]);
    assert_eq!(
        rootsd_tests::daemon_pid(&desktop.state_dir()),
        None,
        "no second rootsd where HOME alone leads"
    );
    let host = doctor_check(&desktop.rootsctl_bare(&["doctor", "--json"]), "from a host");
    assert_eq!(host["outcome"], "ok", "{host}");
    drop(proxy);

    // With that daemon stopped, a bare rootsctl starts the next one on the same store.
    stop_daemon(&state);
    let listed = desktop.rootsctl_bare(&["list", "--json"]);
    assert_exit(
        &listed,
        0,
        "rootsctl list with a bare environment, starting rootsd",
    );
    let roots: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(
        roots["roots"].as_array().map(Vec::len),
        Some(1),
        "the autostarted rootsd serves the user's store, not a new empty one: {roots}"
    );
    assert!(rootsd_tests::daemon_pid(&state).is_some_and(|pid| pid != first));
    assert!(
        !desktop.state_dir().join("roots.journal").exists(),
        "no store was made where HOME alone leads"
    );
}

#[test]
fn the_shared_service_named_in_the_configuration_file_is_used_and_never_replaced() {
    let desktop = Desktop::new();
    let _home_guard = AutostartGuard::for_state_dir(desktop.state_dir());
    // The shared service, as its socket unit serves it, is played by a daemon of the sandbox.
    let service = desktop.sb.start_daemon();
    let socket = desktop.sb.socket.clone();
    let a = desktop.sb.mkdir("work/a");
    // The shell of the README's shared-service recipe before this file existed.
    let shell = |args: &[&str]| {
        output_within(
            desktop
                .bare(&bin("rootsctl"))
                .env("ROOTSD_SOCKET", &socket)
                .env("ROOTSD_NO_AUTOSTART", "1")
                .args(args),
        )
    };
    assert_exit(
        &shell(&["add", a.to_str().unwrap()]),
        0,
        "rootsctl add from the shell",
    );

    let before = doctor_check(&shell(&["doctor", "--json"]), "from a host");
    assert_eq!(before["outcome"], "fail", "{before}");
    let fix = before["fix"].as_str().unwrap_or_default();
    assert!(
        fix.contains(&format!("socket = {}", socket.display()))
            && fix.contains("autostart = no")
            && fix.contains(".config/rootsd/rootsd.conf"),
        "doctor says what to write where: {before}"
    );

    let config = desktop.home.join(".config/rootsd");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("rootsd.conf"),
        format!(
            "# the shared service\nsocket = {}\nautostart = no\n",
            socket.display()
        ),
    )
    .unwrap();
    let after = doctor_check(&shell(&["doctor", "--json"]), "from a host");
    assert_eq!(after["outcome"], "ok", "{after}");

    let listed = desktop.rootsctl_bare(&["list", "--json"]);
    assert_exit(&listed, 0, "rootsctl list with a bare environment");
    let roots: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(roots["roots"].as_array().map(Vec::len), Some(1), "{roots}");
    let mut proxy = desktop.bare_proxy();
    proxy.initialize();
    proxy.wait_for_dirs(&[&a]);
    drop(proxy);

    // With the service down, nothing starts a private daemon in its place.
    drop(service);
    rootsd_tests::eventually("the service to stop answering", PATIENCE, || {
        if rootsd_tests::answers(&socket) {
            Err("still answering")
        } else {
            Ok(())
        }
    });
    let listed = desktop.rootsctl_bare(&["list"]);
    assert_exit(&listed, 3, "rootsctl list with the service down");
    let message = stderr_of(&listed);
    assert!(
        message.contains("autostart = no") && message.contains("rootsd.conf"),
        "the refusal says which setting kept rootsctl from starting rootsd: {message}"
    );
    assert_eq!(rootsd_tests::daemon_pid(&desktop.state_dir()), None);
    assert!(
        !desktop.state_dir().exists(),
        "no private state directory was made"
    );
    let host = doctor_check(&desktop.rootsctl_bare(&["doctor", "--json"]), "from a host");
    assert_eq!(host["outcome"], "note", "{host}");
    assert!(
        host["summary"]
            .as_str()
            .is_some_and(|s| s.contains("autostart is off")),
        "{host}"
    );
}

#[test]
fn a_configuration_file_that_does_not_parse_is_refused_naming_its_line() {
    let desktop = Desktop::new();
    let config = desktop.home.join(".config/rootsd");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("rootsd.conf"), "socket = /s.sock\nsockt = /t\n").unwrap();
    let listed = desktop.rootsctl_bare(&["list"]);
    assert_exit(&listed, 2, "rootsctl list with a broken configuration file");
    let message = stderr_of(&listed);
    assert!(
        message.contains("rootsd.conf line 2") && message.contains("unknown setting \"sockt\""),
        "{message}"
    );
    assert!(!desktop.state_dir().exists(), "nothing was started");
}
