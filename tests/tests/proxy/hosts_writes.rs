//! `rootsctl hosts` writing hosts' files: a host's write landing while rootsctl replaces the file
//! survives, concurrent commands keep every record, only regular files of a bounded size are
//! read, a read-only file and a home owned by someone else are refused, `--project` works before
//! the subcommand, and a running Claude Code (the real one) holds its file back.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rootsd_tests::{PATIENCE, Reaped, eventually, output_within};
use serde_json::Value;

use crate::support::{as_user, assert_exit, stderr_of};

/// `rootsctl hosts ARGS` as a user's shell with only `HOME` and `PATH` runs it.
fn hosts_command(program: &[&Path], home: &Path, args: &[&str]) -> Command {
    let mut cmd = as_user(program[0], home);
    cmd.args(&program[1..])
        .arg(rootsd_tests::bin("rootsctl"))
        .arg("hosts")
        .args(args);
    cmd
}

fn hosts(home: &Path, args: &[&str]) -> Output {
    let env = Path::new("/usr/bin/env");
    output_within(&mut hosts_command(&[env], home, args))
}

fn codex_file(home: &Path) -> PathBuf {
    home.join(".codex/config.toml")
}

fn goose_file(home: &Path) -> PathBuf {
    home.join(".config/goose/config.yaml")
}

const CODEX: &str = "[mcp_servers.fs]\ncommand = \"/usr/bin/mcp-fs\"\nargs = [\"/srv\"]\n";
const GOOSE: &str = "extensions:\n  developer:\n    type: builtin\n  fs:\n    type: stdio\n    cmd: /usr/bin/mcp-fs\n    args:\n      - /srv\n";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The files of rootsctl's record of what it wrapped.
fn recorded(home: &Path) -> Vec<String> {
    let path = home.join(".local/state/rootsctl/hosts/wrapped.json");
    let Ok(bytes) = std::fs::read(&path) else {
        return Vec::new();
    };
    let record: Value = serde_json::from_slice(&bytes).unwrap();
    let mut files: Vec<String> = record["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap().to_owned())
        .collect();
    files.sort();
    files
}

/// The output of `child` once it has exited on its own, within the tests' patience.
fn finished(mut child: Reaped) -> Output {
    use std::io::Read as _;
    let status = eventually("rootsctl to exit", PATIENCE, || {
        child.0.try_wait().unwrap().ok_or("running")
    });
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    if let Some(mut out) = child.0.stdout.take() {
        out.read_to_end(&mut stdout).unwrap();
    }
    if let Some(mut err) = child.0.stderr.take() {
        err.read_to_end(&mut stderr).unwrap();
    }
    Output {
        status,
        stdout,
        stderr,
    }
}

#[test]
fn two_wraps_and_two_unwraps_of_different_hosts_at_once_keep_both_records() {
    for trial in 0..25 {
        let home = tempfile::tempdir().unwrap();
        let home = home.path();
        write(&codex_file(home), CODEX);
        write(&goose_file(home), GOOSE);
        for action in ["wrap", "unwrap"] {
            let env = Path::new("/usr/bin/env");
            let mut both: Vec<Reaped> = ["codex", "goose"]
                .map(|host| {
                    Reaped(
                        hosts_command(&[env], home, &[action, host])
                            .stdout(Stdio::null())
                            .stderr(Stdio::piped())
                            .spawn()
                            .unwrap(),
                    )
                })
                .into();
            for (child, host) in both.iter_mut().zip(["codex", "goose"]) {
                let status = eventually(&format!("{action} {host} to exit"), PATIENCE, || {
                    child.0.try_wait().unwrap().ok_or("running")
                });
                assert!(status.success(), "trial {trial}: {action} {host}: {status}");
            }
            let expected = match action {
                "wrap" => {
                    let mut files = [codex_file(home), goose_file(home)]
                        .map(|f| f.to_string_lossy().into_owned())
                        .to_vec();
                    files.sort();
                    files
                }
                _ => Vec::new(),
            };
            assert_eq!(recorded(home), expected, "trial {trial}, after {action}");
        }
        assert_eq!(std::fs::read_to_string(codex_file(home)).unwrap(), CODEX);
        assert_eq!(std::fs::read_to_string(goose_file(home)).unwrap(), GOOSE);
    }
}

/// `rootsctl hosts wrap HOST` whose every fsync waits half a second before it runs (strace's
/// fault injection): the replacement's included, the window in which a test acts.
fn slowed_wrap(home: &Path, host: &str) -> Reaped {
    slowed_by(home, host, "500000")
}

/// [`slowed_wrap`] with every fsync delayed by `micros`.
fn slowed_by(home: &Path, host: &str, micros: &str) -> Reaped {
    let strace = Path::new("/usr/bin/strace");
    assert!(
        strace.exists(),
        "strace is missing: install it (apt-get install strace)"
    );
    let delay = format!("inject=fsync:delay_enter={micros}");
    let inject: Vec<&Path> = [
        "-f",
        "-qq",
        "-o",
        "/dev/null",
        "-e",
        "trace=fsync",
        "-e",
        &delay,
        "/usr/bin/env",
    ]
    .into_iter()
    .map(Path::new)
    .collect();
    let program: Vec<&Path> = std::iter::once(strace).chain(inject).collect();
    Reaped(
        hosts_command(&program, home, &["wrap", host])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// The name of rootsctl's temporary file in `dir`, once it is there.
fn temp_file_of(child: &mut Reaped, dir: &Path) -> String {
    eventually(
        "rootsctl's temporary file beside the host's",
        PATIENCE,
        || {
            let temp = std::fs::read_dir(dir)
                .unwrap()
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|name| name.ends_with(".tmp"));
            if let Some(status) = child.0.try_wait().unwrap() {
                panic!("rootsctl exited ({status}) before it wrote its temporary file");
            }
            temp.ok_or("none yet")
        },
    )
}

#[test]
fn a_temporary_file_left_by_a_killed_rootsctl_is_removed_by_the_next() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let file = codex_file(home);
    write(&file, CODEX);
    let dir = file.parent().unwrap();
    let mut child = slowed_wrap(home, "codex");
    let temp = temp_file_of(&mut child, dir);
    let pid: i32 = temp
        .strip_prefix(".config.toml.rootsctl-")
        .and_then(|t| t.strip_suffix(".tmp"))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("{temp} names rootsctl's pid"));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let killed = finished(child);
    assert!(!killed.status.success(), "rootsctl was killed");
    assert!(dir.join(&temp).exists(), "the killed rootsctl left {temp}");
    let output = hosts(home, &["wrap", "codex"]);
    assert_exit(&output, 0, "the next wrap");
    assert!(std::fs::read_to_string(&file).unwrap().contains("proxy"));
    assert_only_the_config_in(dir);
}

#[test]
fn a_second_command_waits_ten_seconds_for_the_first_and_names_it() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    write(&codex_file(home), CODEX);
    write(&goose_file(home), GOOSE);
    // Four fsyncs of four seconds each: the first command holds the lock for sixteen.
    let first = slowed_by(home, "codex", "4000000");
    let lock = home.join(".local/state/rootsctl/hosts/lock");
    let holder = eventually("the first command to hold the lock", PATIENCE, || {
        let text = std::fs::read_to_string(&lock).unwrap_or_default();
        text.trim().parse::<i32>().map_err(|_| text)
    });
    let started = std::time::Instant::now();
    let output = hosts(home, &["wrap", "goose"]);
    let waited = started.elapsed();
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(holder).unwrap(),
        rustix::process::Signal::KILL,
    );
    drop(first);
    assert_exit(&output, 1, "the second command");
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains(&format!(
            "another rootsctl hosts command (pid {holder}) is changing the hosts' files"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("waited 10s"), "{stderr}");
    assert!(waited >= std::time::Duration::from_secs(10), "{waited:?}");
    assert_eq!(std::fs::read_to_string(goose_file(home)).unwrap(), GOOSE);
}

#[test]
fn a_hosts_write_while_rootsctl_syncs_its_replacement_is_kept() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let file = codex_file(home);
    write(&file, CODEX);
    let mut child = slowed_wrap(home, "codex");
    let dir = file.parent().unwrap();
    temp_file_of(&mut child, dir);
    let host = "[mcp_servers.fs]\ncommand = \"/usr/bin/mcp-fs\"\nargs = [\"/srv\", \"/home\"]\n";
    std::fs::write(&file, host).unwrap();
    let output = finished(child);
    assert_exit(
        &output,
        1,
        "rootsctl hosts wrap codex, its file written meanwhile",
    );
    assert!(
        stderr_of(&output).contains("changed while rootsctl was replacing it"),
        "{}",
        stderr_of(&output)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), host);
    assert_eq!(recorded(home), Vec::<String>::new());
    assert_only_the_config_in(dir);
}

#[test]
fn special_and_oversized_files_are_refused_at_once_and_a_linked_file_is_written_through() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let zero = home.join("zero");
    let fifo = home.join("fifo");
    let big = home.join("big");
    let linked = home.join("linked");
    for dir in [&zero, &fifo, &big, &linked] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::os::unix::fs::symlink("/dev/zero", zero.join(".mcp.json")).unwrap();
    let made = Command::new("mkfifo")
        .arg(fifo.join(".mcp.json"))
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo");
    // Larger than the 16 MiB rootsctl edits, yet a valid file with one server.
    let padding = "x".repeat(17 << 20);
    write(
        &big.join(".mcp.json"),
        &format!(
            "{{\"mcpServers\": {{\"fs\": {{\"command\": \"/usr/bin/mcp-fs\", \"args\": [\"{padding}\"]}}}}}}\n"
        ),
    );
    let dotfiles = home.join("dotfiles/mcp.json");
    write(
        &dotfiles,
        "{\"mcpServers\": {\"fs\": {\"command\": \"/usr/bin/mcp-fs\", \"args\": []}}}\n",
    );
    std::os::unix::fs::symlink(&dotfiles, linked.join(".mcp.json")).unwrap();

    for (dir, why) in [
        (&zero, "a character device, not a regular file"),
        (&fifo, "a FIFO, not a regular file"),
        (&big, "larger than 16 MiB"),
    ] {
        let project = dir.to_str().unwrap();
        let output = hosts(home, &["wrap", "claude-code", "--project", project]);
        assert_exit(&output, 1, &format!("wrap --project {project}"));
        let stderr = stderr_of(&output);
        assert!(stderr.contains(why), "{stderr}");
        assert!(!stderr.contains("does not parse"), "{stderr}");
        let listed = hosts(home, &["--project", project]);
        assert_exit(&listed, 0, &format!("hosts --project {project}"));
    }
    assert_eq!(recorded(home), Vec::<String>::new());
    let later = hosts(home, &["unwrap"]);
    assert_exit(&later, 0, "a later unwrap");

    let project = linked.to_str().unwrap();
    let output = hosts(home, &["wrap", "claude-code", "--project", project]);
    assert_exit(&output, 0, "wrap through a symbolic link");
    let link = linked.join(".mcp.json");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(&dotfiles)
            .unwrap()
            .contains("proxy")
    );
}

#[test]
fn a_read_only_file_is_refused_naming_its_mode() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let file = codex_file(home);
    write(&file, CODEX);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    let output = hosts(home, &["wrap", "codex"]);
    assert_exit(&output, 1, "wrap of a read-only file");
    let stderr = stderr_of(&output);
    assert!(stderr.contains("read-only (mode 0444)"), "{stderr}");
    assert!(stderr.contains("chmod u+w"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), CODEX);
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o444);
    assert_eq!(recorded(home), Vec::<String>::new());
}

#[test]
fn root_refuses_to_write_state_into_another_users_home() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test runs as root, as `sudo -E rootsctl hosts wrap` does: run the suite as root"
    );
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    write(&codex_file(home), CODEX);
    for dir in [home, &home.join(".codex"), &codex_file(home)] {
        std::os::unix::fs::chown(dir, Some(65534), Some(65534)).unwrap();
    }
    let output = hosts(home, &["wrap", "codex"]);
    assert_exit(&output, 2, "root's wrap in user 65534's home");
    let stderr = stderr_of(&output);
    assert!(stderr.contains("belongs to user 65534"), "{stderr}");
    assert!(stderr.contains("without sudo"), "{stderr}");
    assert!(!home.join(".local").exists(), "no state was created");
    assert_eq!(std::fs::read_to_string(codex_file(home)).unwrap(), CODEX);
}

#[test]
fn a_project_given_before_the_subcommand_is_wrapped() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let project = home.join("app");
    write(
        &project.join(".mcp.json"),
        "{\"mcpServers\": {\"fs\": {\"command\": \"/usr/bin/mcp-fs\", \"args\": []}}}\n",
    );
    let output = hosts(
        home,
        &[
            "--project",
            project.to_str().unwrap(),
            "wrap",
            "claude-code",
        ],
    );
    assert_exit(&output, 0, "hosts --project DIR wrap");
    assert_eq!(
        recorded(home),
        vec![project.join(".mcp.json").to_string_lossy().into_owned()]
    );
    let output = hosts(home, &["--project", project.to_str().unwrap(), "unwrap"]);
    assert_exit(&output, 2, "hosts --project DIR unwrap");
    assert!(
        stderr_of(&output).contains("takes no --project"),
        "{}",
        stderr_of(&output)
    );
}

#[test]
fn goose_builtin_extensions_are_listed_as_builtin() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    write(&goose_file(home), GOOSE);
    let output = hosts(home, &["--json"]);
    assert_exit(&output, 0, "hosts --json");
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let servers = &listed[0]["servers"];
    assert_eq!(servers[0]["name"], "developer");
    assert_eq!(servers[0]["transport"]["kind"], "builtin", "{servers}");
    let output = hosts(home, &[]);
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    let row = table.lines().find(|l| l.contains("developer")).unwrap();
    assert!(row.contains("builtin"), "{table}");
}

#[test]
fn the_real_claude_code_running_with_home_spelled_with_a_slash_holds_its_file_back() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let file = home.join(".claude.json");
    let text = "{\"mcpServers\": {\"fs\": {\"command\": \"/usr/bin/mcp-fs\", \"args\": []}}}\n";
    write(&file, text);
    let claude = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("interop/node_modules/@anthropic-ai/claude-code/bin/claude.exe");
    assert!(
        claude.exists(),
        "{} is missing: run `npm ci --prefix tests/interop` (scripts/test does)",
        claude.display()
    );
    // `claude mcp serve` runs until its input ends; its process is named `claude.exe`.
    let running = Reaped(
        Command::new(&claude)
            .args(["mcp", "serve"])
            .env_clear()
            .env("HOME", format!("{}/", home.display()))
            .env("PATH", "/usr/bin:/bin")
            .current_dir(home)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = running.0.id();
    eventually("claude.exe to have started", PATIENCE, || {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        (comm.trim() == "claude.exe").then_some(()).ok_or(comm)
    });
    let output = hosts(home, &["wrap", "claude-code"]);
    assert_exit(&output, 1, "wrap while Claude Code runs");
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains(&format!("Claude Code is running (pid {pid})")),
        "{stderr}"
    );
    // Claude Code writes the file itself as it starts: what matters is that rootsctl did not.
    assert!(!std::fs::read_to_string(&file).unwrap().contains("proxy"));
    drop(running);
}

/// Codex's directory holds its file and nothing rootsctl left beside it.
fn assert_only_the_config_in(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("config.toml")]);
}
