//! Roots whose directory is gone: deleted, replaced by a file, or locked away. They stay in the
//! workspace; `rootsctl list` marks them, `list --long --json` says why, and `rootsctl doctor`
//! names them with the command that removes them.
//!
//! The rootsctl under test runs [`without_privilege`], so that permission bits stop it even
//! where the suite runs as root.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rootsd_tests::{Sandbox, bin, output_within, without_privilege};
use serde_json::{Value, json};

use crate::support::{assert_exit, plain_uri, stderr_of, stdout_of};

/// The roots of [`Scene`], by what happens to each directory after it is added.
struct Scene {
    sb: Sandbox,
    present: PathBuf,
    deleted: PathBuf,
    /// Under a directory that is deleted with it, as when a drive is unmounted.
    unmounted: PathBuf,
    now_a_file: PathBuf,
    /// Mode 000: it can be reached but neither listed nor entered.
    closed: PathBuf,
    /// Inside a directory of mode 000: it cannot be reached.
    locked_in: PathBuf,
}

impl Scene {
    /// Adds six directories to the default workspace, then takes five of them away.
    fn set_up(sb: Sandbox) -> Self {
        let scene = Self {
            present: sb.mkdir("present"),
            deleted: sb.mkdir("deleted"),
            unmounted: sb.mkdir("usb/photos"),
            now_a_file: sb.mkdir("now-a-file"),
            closed: sb.mkdir("closed"),
            locked_in: sb.mkdir("locked/in"),
            sb,
        };
        let mut add = vec!["add"];
        let paths: Vec<&str> = scene.all().iter().map(|p| p.to_str().unwrap()).collect();
        add.extend(paths);
        scene.sb.ctl_ok(&add);
        fs::remove_dir(&scene.deleted).unwrap();
        fs::remove_dir_all(scene.sb.path().join("usb")).unwrap();
        fs::remove_dir(&scene.now_a_file).unwrap();
        fs::write(&scene.now_a_file, "not a directory any more").unwrap();
        chmod(&scene.closed, 0o000);
        chmod(scene.locked_in.parent().unwrap(), 0o000);
        scene
    }

    fn all(&self) -> [&PathBuf; 6] {
        [
            &self.present,
            &self.deleted,
            &self.unmounted,
            &self.now_a_file,
            &self.closed,
            &self.locked_in,
        ]
    }

    /// `rootsctl ARGS` as a process that permission bits stop.
    fn ctl(&self, args: &[&str]) -> Output {
        let mut cmd = self.sb.rootsctl();
        cmd.args(args);
        output_within(&mut without_privilege(cmd))
    }
}

impl Drop for Scene {
    /// Opens the locked directories again, so that the sandbox can be removed whoever runs
    /// the tests.
    fn drop(&mut self) {
        let _ = fs::set_permissions(&self.closed, fs::Permissions::from_mode(0o755));
        if let Some(locked) = self.locked_in.parent() {
            let _ = fs::set_permissions(locked, fs::Permissions::from_mode(0o755));
        }
    }
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// `{"reason": …, "detail": …}`
fn gone(reason: &str, detail: &str) -> Value {
    json!({"reason": reason, "detail": detail})
}

/// The cells of a table row: columns are separated by at least two spaces, and no cell here
/// holds two in a row.
fn cells(line: &str) -> Vec<&str> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn list_marks_gone_roots_and_long_json_says_why_while_the_workspace_keeps_them() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let scene = Scene::set_up(sb);

    let output = scene.ctl(&["list"]);
    assert_exit(&output, 0, "list");
    let table = stdout_of(&output);
    let rows: Vec<Vec<&str>> = table.lines().map(cells).collect();
    let expected = [
        vec!["NAME", "PATH", "STATUS"],
        vec!["present", path(&scene.present), "ok"],
        vec![
            "deleted",
            path(&scene.deleted),
            "missing: no such file or directory",
        ],
        vec![
            "photos",
            path(&scene.unmounted),
            "missing: no such file or directory",
        ],
        vec![
            "now-a-file",
            path(&scene.now_a_file),
            "not a directory: it is a regular file",
        ],
        vec![
            "closed",
            path(&scene.closed),
            "unreadable: cannot list or enter it: permission denied",
        ],
        vec![
            "in",
            path(&scene.locked_in),
            "unreadable: cannot reach it: permission denied on a directory above it",
        ],
    ];
    assert_eq!(rows, expected, "{table}");

    let output = scene.ctl(&["list", "--long", "--json"]);
    assert_exit(&output, 0, "list --long --json");
    let text = stdout_of(&output);
    // A ListRootsResult whose roots say more: MCP's fields first, in MCP's order.
    assert!(text.starts_with(r#"{"roots":[{"uri":"file://"#), "{text}");
    let root = |dir: &Path, name: &str| json!({"uri": plain_uri(dir), "name": name});
    // With --long every root also says who holds it: here, all were added by hand.
    let by_hand = |dir: &Path, name: &str| {
        let mut root = root(dir, name);
        root["origin"] = json!([{"by": "hand"}]);
        root
    };
    let with_gone = |mut root: Value, gone: Value| {
        root["gone"] = gone;
        root
    };
    let long = json!({"roots": [
        by_hand(&scene.present, "present"),
        with_gone(by_hand(&scene.deleted, "deleted"), gone("missing", "no such file or directory")),
        with_gone(by_hand(&scene.unmounted, "photos"), gone("missing", "no such file or directory")),
        with_gone(by_hand(&scene.now_a_file, "now-a-file"), gone("not_a_directory", "it is a regular file")),
        with_gone(by_hand(&scene.closed, "closed"), gone("unreadable", "cannot list or enter it: permission denied")),
        with_gone(by_hand(&scene.locked_in, "in"), gone("unreadable", "cannot reach it: permission denied on a directory above it")),
    ]});
    assert_eq!(parse(&text), long);

    // -l is --long; with --all each workspace carries its name and revision, as without it.
    let output = scene.ctl(&["list", "--all", "-l", "--json"]);
    assert_exit(&output, 0, "list --all -l --json");
    let all = parse(&stdout_of(&output));
    assert_eq!(all["workspaces"][0]["name"], json!("default"), "{all}");
    assert_eq!(all["workspaces"][0]["revision"], json!(1), "{all}");
    assert_eq!(all["workspaces"][0]["roots"], long["roots"], "{all}");

    // Without --long, --json stays exactly MCP's ListRootsResult, and the workspace still holds
    // every root: servers are given them all and check for themselves.
    let plain: Vec<Value> = scene
        .all()
        .iter()
        .zip(["present", "deleted", "photos", "now-a-file", "closed", "in"])
        .map(|(dir, name)| root(dir, name))
        .collect();
    let output = scene.ctl(&["list", "--json"]);
    assert_exit(&output, 0, "list --json");
    assert_eq!(parse(&stdout_of(&output)), json!({"roots": plain}));

    // A directory that comes back is present again: nothing was changed meanwhile.
    fs::create_dir(&scene.deleted).unwrap();
    let output = scene.ctl(&["list"]);
    let table = stdout_of(&output);
    let row = table
        .lines()
        .map(cells)
        .find(|r| r[0] == "deleted")
        .unwrap_or_else(|| panic!("no row for deleted in {table}"));
    assert_eq!(row[2], "ok", "{table}");
}

/// `rootsctl doctor ARGS` as a process that permission bits stop, with no systemd user manager
/// to find (whatever the host has installed must not change the verdict).
fn doctor(sb: &Sandbox, args: &[&str]) -> Output {
    let mut cmd = sb.rootsctl();
    cmd.arg("doctor")
        .args(args)
        .env("XDG_RUNTIME_DIR", sb.path().join("no-user-manager"))
        .env("HOME", sb.configured_home())
        .env_remove("DBUS_SESSION_BUS_ADDRESS");
    output_within(&mut without_privilege(cmd))
}

/// The checks of `doctor --json` named `name`.
fn checks_named(report: &Value, name: &str) -> Vec<Value> {
    report["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("no checks in {report}"))
        .iter()
        .filter(|c| c["name"] == json!(name))
        .cloned()
        .collect()
}

#[test]
fn doctor_names_every_gone_root_per_workspace_as_a_note_and_its_fix_removes_them() {
    let sb = Sandbox::new();
    let mut daemon = sb.start_daemon();
    let scene = Scene::set_up(sb);
    let sb = &scene.sb;
    let other = sb.mkdir("other");
    sb.ctl_ok(&["add", "-w", "elsewhere", other.to_str().unwrap()]);
    sb.ctl_ok(&["add", "-w", "fine", scene.present.to_str().unwrap()]);
    fs::remove_dir(&other).unwrap();

    let output = doctor(sb, &[]);
    assert_exit(&output, 0, "doctor: a gone root is a note, not a failure");
    let text = stdout_of(&output);
    assert!(text.ends_with("No problems found.\n"), "{text}");
    assert_eq!(
        text.lines()
            .filter(|l| l.trim_start().starts_with("note  roots"))
            .count(),
        2,
        "{text}"
    );

    let output = doctor(sb, &["--json"]);
    assert_exit(&output, 0, "doctor --json");
    let report = parse(&stdout_of(&output));
    assert_eq!(report["ok"], json!(true), "{report}");
    let notes = checks_named(&report, "roots");
    let summaries: Vec<&str> = notes
        .iter()
        .map(|n| n["summary"].as_str().unwrap())
        .collect();
    assert_eq!(
        summaries,
        [
            format!(
                "workspace default: 5 of 6 roots are gone: {} (missing: no such file or directory); {} (missing: no such file or directory); {} (not a directory: it is a regular file); {} (unreadable: cannot list or enter it: permission denied); {} (unreadable: cannot reach it: permission denied on a directory above it)",
                path(&scene.deleted),
                path(&scene.unmounted),
                path(&scene.now_a_file),
                path(&scene.closed),
                path(&scene.locked_in),
            ),
            format!(
                "workspace elsewhere: 1 of 1 roots is gone: {} (missing: no such file or directory)",
                path(&other)
            ),
        ],
        "one note per workspace with gone roots, none for the others: {report}"
    );
    assert!(
        notes.iter().all(|n| n["outcome"] == json!("note")),
        "{report}"
    );

    // Each fix ends with a command that works as it is printed.
    for note in &notes {
        let fix = note["fix"].as_str().unwrap();
        let command = fix
            .rsplit_once("remove it: `")
            .and_then(|(_, rest)| rest.strip_suffix('`'))
            .unwrap_or_else(|| panic!("no command in the fix {fix:?}"));
        assert!(command.starts_with("rootsctl remove -w "), "{command}");
        assert_exit(&run_printed(sb, command), 0, command);
    }
    let left = parse(&sb.ctl_ok(&["list", "--all", "--json"]));
    let roots_of = |workspace: &str| {
        left["workspaces"]
            .as_array()
            .and_then(|all| all.iter().find(|w| w["name"] == json!(workspace)))
            .map(|w| w["roots"].clone())
            .unwrap_or_else(|| panic!("no workspace {workspace} in {left}"))
    };
    let present = json!([{"uri": plain_uri(&scene.present), "name": "present"}]);
    assert_eq!(roots_of("default"), present, "{left}");
    assert_eq!(roots_of("elsewhere"), json!([]), "{left}");
    assert_eq!(roots_of("fine"), present, "{left}");

    let report = parse(&stdout_of(&doctor(sb, &["--json"])));
    let roots = checks_named(&report, "roots");
    assert_eq!(
        roots,
        vec![
            json!({"name": "roots", "outcome": "ok", "summary": "the directories of all 2 roots are there (2 workspace(s))"})
        ]
    );

    // Without a daemon, doctor does not start one to learn the roots.
    daemon.signal(rustix::process::Signal::TERM);
    daemon.wait();
    let report = parse(&stdout_of(&doctor(sb, &["--json"])));
    assert_eq!(
        checks_named(&report, "roots"),
        vec![
            json!({"name": "roots", "outcome": "skip", "summary": "not checked: the daemon did not answer"})
        ]
    );
}

/// Runs `command`, a line rootsctl printed for people to paste, in `sh`, with this build's
/// rootsctl first on `PATH` and the sandbox's settings.
fn run_printed(sb: &Sandbox, command: &str) -> Output {
    let mut search = std::ffi::OsString::from(bin("rootsctl").parent().unwrap());
    search.push(":");
    search.push(std::env::var_os("PATH").unwrap_or_default());
    let mut sh = Command::new("sh");
    sh.arg("-c").arg(command).current_dir(sb.path());
    for (name, value) in sb.rootsctl().get_envs() {
        if let Some(value) = value {
            sh.env(name, value);
        }
    }
    sh.env("PATH", search);
    output_within(&mut without_privilege(sh))
}

fn path(dir: &Path) -> &str {
    dir.to_str().expect("sandbox paths are UTF-8")
}

#[track_caller]
fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn a_root_whose_directory_is_gone_is_renamed_without_allow_missing_and_a_new_missing_path_is_refused_as_new()
 {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let scene = Scene::set_up(sb);

    // The README's way to make running servers look again: rename a root. Deleted, replaced by
    // a file, or out of reach, a root already in the workspace is renamed all the same.
    for (dir, name) in [
        (&scene.deleted, "deleted-2"),
        (&scene.now_a_file, "file-2"),
        (&scene.locked_in, "in-2"),
    ] {
        let output = scene.ctl(&["add", path(dir), "--name", name]);
        assert_exit(&output, 0, &format!("add {} --name {name}", path(dir)));
        let said = stdout_of(&output);
        assert!(
            said.starts_with("renamed ") && said.contains(&format!("({name}) in default")),
            "add {dir:?} --name {name} said: {said}"
        );
    }
    let names: Vec<Value> = scene
        .sb
        .roots("default")
        .iter()
        .map(|r| r["name"].clone())
        .collect();
    assert_eq!(
        names,
        ["present", "deleted-2", "photos", "file-2", "closed", "in-2"].map(Value::from)
    );
    // Without --name it is simply there already.
    let output = scene.ctl(&["add", path(&scene.unmounted)]);
    assert_exit(&output, 0, "add of a gone root without --name");
    assert!(
        stdout_of(&output).contains("is already in default"),
        "{}",
        stdout_of(&output)
    );

    // A path that is not a root yet must exist, and the refusal says so as a new root's.
    let never = scene.sb.path().join("never-made");
    let output = scene.ctl(&["add", path(&never), "--name", "n"]);
    assert_exit(&output, 1, "add of a new missing path");
    let said = stderr_of(&output);
    assert!(
        said.contains("does not exist and is not a root of workspace default")
            && said.contains("--allow-missing"),
        "{said}"
    );
    assert_eq!(scene.sb.roots("default").len(), 6, "nothing was added");
    // In another workspace the same gone path is new, and refused as such.
    let output = scene.ctl(&["add", "-w", "other", path(&scene.deleted)]);
    assert_exit(&output, 1, "add of a gone root's path to another workspace");
    assert!(
        stderr_of(&output).contains("is not a root of workspace other"),
        "{}",
        stderr_of(&output)
    );
}
