//! The unit files: systemd accepts them without a warning, and they say what rootsd relies on.

use std::fs;
use std::process::Command;

use rootsd_tests::{Sandbox, bin, output_within};
use serde_json::Value;

use crate::support::{assert_exit, copy_units, systemd_tool, text, units_dir, verify};

#[test]
fn the_user_units_pass_systemd_analyze_user_verify_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let units = copy_units("user", dir.path());
    if let Err(report) = verify(&units, true) {
        panic!("{report}");
    }
}

#[test]
fn the_system_units_pass_systemd_analyze_verify_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let units = copy_units("system", dir.path());
    if let Err(report) = verify(&units, false) {
        panic!("{report}");
    }
}

#[test]
fn the_verify_check_fails_on_a_misspelled_key_although_systemd_analyze_exits_0() {
    for (flavour, user) in [("user", true), ("system", false)] {
        let dir = tempfile::tempdir().unwrap();
        let units = copy_units(flavour, dir.path());
        let service = &units[1];
        let text = fs::read_to_string(service).unwrap();
        fs::write(
            service,
            text.replace("NoNewPrivileges=yes", "NoNewPrivilegs=yes"),
        )
        .unwrap();

        // systemd-analyze itself only warns, which is the trap the check exists for.
        let runtime = tempfile::tempdir().unwrap();
        let mut raw = Command::new(systemd_tool("systemd-analyze"));
        if user {
            raw.arg("--user");
        }
        let output = output_within(
            raw.args(["verify", "--man=no"])
                .args(&units)
                .env("XDG_RUNTIME_DIR", runtime.path()),
        );
        assert_exit(&output, 0, "systemd-analyze verify with a misspelled key");

        let report = verify(&units, user).expect_err("the check missed a misspelled key");
        assert!(
            report.contains("NoNewPrivilegs"),
            "{flavour}: the report names the key: {report}"
        );
    }
}

#[test]
fn the_sysusers_file_creates_the_rootsd_user_and_group() {
    let root = tempfile::tempdir().unwrap();
    let output = output_within(
        Command::new(systemd_tool("systemd-sysusers"))
            .arg("--dry-run")
            .arg("--root")
            .arg(root.path())
            .arg(units_dir().join("system/rootsd.sysusers.conf")),
    );
    assert_exit(&output, 0, "systemd-sysusers --dry-run");
    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(said.contains("Creating group 'rootsd'"), "{said}");
    assert!(said.contains("Creating user 'rootsd'"), "{said}");
}

/// The settings rootsd depends on, so that a well-meant edit cannot drop one unnoticed.
#[test]
fn the_units_carry_the_settings_rootsd_relies_on() {
    let read = |path: &str| fs::read_to_string(units_dir().join(path)).unwrap();
    let has = |text: &str, line: &str, file: &str| {
        assert!(
            text.lines().any(|l| l.trim() == line),
            "{file} lacks the line {line:?}"
        );
    };
    let socket = read("user/rootsd.socket");
    for line in [
        "ListenStream=%t/rootsd/rootsd.sock",
        "SocketMode=0600",
        "DirectoryMode=0700",
    ] {
        has(&socket, line, "user/rootsd.socket");
    }
    let system_socket = read("system/rootsd.socket");
    for line in [
        "ListenStream=%t/rootsd/rootsd.sock",
        "SocketGroup=rootsd",
        "SocketMode=0660",
    ] {
        has(&system_socket, line, "system/rootsd.socket");
    }
    for (file, exec) in [
        (
            "user/rootsd.service",
            "ExecStart=/usr/bin/rootsd --socket %t/rootsd/rootsd.sock",
        ),
        (
            "system/rootsd.service",
            "ExecStart=/usr/bin/rootsd --allow-group --admin-group rootsd-admin --socket %t/rootsd/rootsd.sock",
        ),
    ] {
        let service = read(file);
        for line in [
            "Type=notify",
            "Restart=on-failure",
            "StateDirectory=rootsd",
            "ExecReload=/bin/kill -HUP $MAINPID",
            "Requires=rootsd.socket",
            exec,
        ] {
            has(&service, line, file);
        }
        // Stopping the service would delete a RuntimeDirectory= and with it systemd's socket.
        assert!(
            !service.contains("RuntimeDirectory="),
            "{file} must not set RuntimeDirectory="
        );
    }
}

/// rootsctl works the same with or without the units: by default it looks for the socket where
/// the user socket unit listens, `%t/rootsd/rootsd.sock` with `%t` = `$XDG_RUNTIME_DIR`.
#[test]
fn rootsctl_looks_for_the_socket_where_the_user_socket_unit_listens() {
    let sb = Sandbox::new();
    let runtime = sb.mkdir("xdg-runtime");
    let output = output_within(
        Command::new(bin("rootsctl"))
            .args(["doctor", "--json"])
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("ROOTSD_STATE_DIR", &sb.state)
            .env_remove("ROOTSD_SOCKET")
            .env("ROOTSD_NO_AUTOSTART", "1"),
    );
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e}): {output:?}"));
    let unit = fs::read_to_string(units_dir().join("user/rootsd.socket")).unwrap();
    let listen = unit
        .lines()
        .find_map(|l| l.strip_prefix("ListenStream="))
        .expect("the socket unit has ListenStream=");
    let expected = listen.replace("%t", runtime.to_str().unwrap());
    assert_eq!(report["socket"], Value::from(expected), "{report}");
}
