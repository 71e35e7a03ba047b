//! `rootsctl hosts`: real-shaped host files in a home, wrapped and unwrapped by the real binary;
//! each wrapped entry, run as its host would with nothing but `HOME` and `PATH`, starts the proxy
//! and the real filesystem server, which gets the workspace's roots.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use rootsd_tests::{Reaped, Sandbox, output_within};
use serde_json::Value;

use crate::host::Proxy;
use crate::support::{as_user, assert_exit, filesystem_server, stderr_of, stdout_of};

/// `rootsctl ARGS` as a user's shell with only `HOME` and `PATH` runs it.
fn hosts(home: &Path, args: &[&str]) -> Output {
    output_within(
        as_user(&rootsd_tests::bin("rootsctl"), home)
            .arg("hosts")
            .args(args),
    )
}

/// One file per format and entry shape, each with a filesystem server among other things.
fn files(home: &Path) -> Vec<(PathBuf, String)> {
    let server = filesystem_server();
    let node = server[0].to_str().unwrap();
    let entry = server[1].to_str().unwrap();
    vec![
        (
            home.join(".claude.json"),
            format!(
                "{{\n  \"numStartups\": 3,\n  \"mcpServers\": {{\n    \"fs\": {{\"type\": \"stdio\", \"command\": \"{node}\", \"args\": [\"{entry}\"], \"env\": {{}}}},\n    \"web\": {{\"type\": \"http\", \"url\": \"https://mcp.example/mcp\"}}\n  }},\n  \"projects\": {{\"/src/app\": {{\"allowedTools\": []}}}}\n}}\n"
            ),
        ),
        (
            home.join(".codex/config.toml"),
            format!(
                "# Codex\nmodel = \"gpt-5\"\n\n[mcp_servers.fs]\ncommand = \"{node}\" # node\nargs = [\"{entry}\"]\n\n[mcp_servers.fs.env]\nA = \"b\"\n"
            ),
        ),
        (
            home.join(".config/goose/config.yaml"),
            format!(
                "# Goose\nextensions:\n  developer:\n    type: builtin\n  fs:\n    type: stdio\n    cmd: {node}  # node\n    args:\n      - {entry}\n    envs: {{}}\n"
            ),
        ),
        (
            home.join(".config/Code/User/mcp.json"),
            format!(
                "{{\n  // VS Code\n  \"servers\": {{\n    \"fs\": {{\"type\": \"stdio\", \"command\": \"{node}\", \"args\": [\"{entry}\",],}},\n  }},\n}}\n"
            ),
        ),
        (
            home.join(".config/opencode/opencode.json"),
            format!(
                "{{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"mcp\": {{\"fs\": {{\"type\": \"local\", \"command\": [\"{node}\", \"{entry}\"]}}}}\n}}\n"
            ),
        ),
    ]
}

fn write_all(files: &[(PathBuf, String)]) {
    for (path, text) in files {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

fn listed(home: &Path) -> Vec<Value> {
    let output = hosts(home, &["--json"]);
    assert_exit(&output, 0, "rootsctl hosts --json");
    serde_json::from_slice::<Vec<Value>>(&output.stdout).unwrap()
}

#[test]
fn every_wrapped_entry_runs_its_server_behind_rootsd_with_a_bare_environment_and_unwraps_exactly() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    // The user's configuration file names the daemon: a bare environment finds it from HOME.
    let home = sb.configured_home();
    let work = sb.mkdir("work/a");
    sb.ctl_ok(&["add", work.to_str().unwrap()]);
    let files = files(&home);
    write_all(&files);
    let codex = &files[1].0;
    std::fs::set_permissions(codex, std::fs::Permissions::from_mode(0o640)).unwrap();

    let dry = hosts(&home, &["wrap", "--dry-run"]);
    assert_exit(&dry, 0, "rootsctl hosts wrap --dry-run");
    assert!(
        stdout_of(&dry).contains(&format!("--- {}\n", codex.display())),
        "{}",
        stdout_of(&dry)
    );
    for (path, text) in &files {
        assert_eq!(
            &std::fs::read_to_string(path).unwrap(),
            text,
            "--dry-run changes nothing"
        );
    }
    assert!(
        !home.join(".local/state/rootsctl").exists(),
        "--dry-run backs nothing up"
    );

    let wrapped = hosts(&home, &["wrap"]);
    assert_exit(&wrapped, 0, "rootsctl hosts wrap");
    for (path, _) in &files {
        assert!(
            stdout_of(&wrapped).contains(&format!("{}: wrapped 1 (fs); backup: ", path.display())),
            "{}",
            stdout_of(&wrapped)
        );
    }
    assert_eq!(
        std::fs::metadata(codex).unwrap().permissions().mode() & 0o777,
        0o640
    );

    let mut started = 0;
    for file in listed(&home) {
        for server in file["servers"].as_array().unwrap() {
            if server["transport"]["kind"] != "stdio" {
                continue;
            }
            assert_eq!(server["transport"]["wrapped"], true, "{file}");
            let command: Vec<&str> = server["transport"]["command"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            assert!(
                Path::new(command[0]).is_absolute() && command[1] == "proxy",
                "{command:?}"
            );
            let merge = command.windows(2).any(|w| w == ["--host-roots", "merge"]);
            let gives_roots =
                ["claude-code", "vscode", "opencode"].contains(&file["host"].as_str().unwrap());
            assert_eq!(merge, gives_roots, "{file}");
            let mut cmd = as_user(Path::new(command[0]), &home);
            cmd.args(&command[1..]);
            let mut proxy = Proxy::spawn_command(cmd);
            proxy.initialize();
            proxy.wait_for_dirs(&[&work]);
            started += 1;
        }
    }
    assert_eq!(started, files.len(), "every wrapped entry was started");

    let again = hosts(&home, &["wrap"]);
    assert_exit(&again, 0, "a second rootsctl hosts wrap");
    assert!(
        stdout_of(&again)
            .lines()
            .all(|l| l.ends_with("nothing to wrap")),
        "{}",
        stdout_of(&again)
    );

    let unwrapped = hosts(&home, &["unwrap"]);
    assert_exit(&unwrapped, 0, "rootsctl hosts unwrap");
    for (path, text) in &files {
        assert_eq!(
            &std::fs::read_to_string(path).unwrap(),
            text,
            "{} is back byte for byte",
            path.display()
        );
    }
    assert_eq!(
        std::fs::metadata(codex).unwrap().permissions().mode() & 0o777,
        0o640
    );
    let backups = std::fs::read_dir(home.join(".local/state/rootsctl/hosts/backups"))
        .unwrap()
        .count();
    assert_eq!(backups, 2 * files.len(), "a backup before each change");
}

#[test]
fn unparsable_files_running_hosts_and_entries_edited_since_are_left_as_they_were() {
    let sb = Sandbox::new();
    let home = sb.mkdir("home");
    let files = files(&home);
    write_all(&files);
    let goose = home.join(".config/goose/config.yaml");
    let broken = "extensions:\n  fs:\n    cmd: [node\n";
    std::fs::write(&goose, broken).unwrap();

    // Claude Code runs for this home: its ~/.claude.json is not touched.
    let claude = sb.path().join("claude");
    std::fs::copy("/bin/sleep", &claude).unwrap();
    let session = Reaped(as_user(&claude, &home).arg("60").spawn().unwrap());
    let pid = session.0.id();

    let output = hosts(&home, &["wrap"]);
    assert_exit(
        &output,
        1,
        "rootsctl hosts wrap with a broken file and Claude Code running",
    );
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains(&format!("{}: does not parse: line 4", goose.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("Claude Code is running (pid {pid})")),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&goose).unwrap(), broken);
    assert_eq!(std::fs::read_to_string(&files[0].0).unwrap(), files[0].1);
    assert!(
        stdout_of(&output).contains("codex: "),
        "the other files are wrapped: {}",
        stdout_of(&output)
    );
    drop(session);

    // An entry edited since it was wrapped is not unwrapped; the others are.
    let codex = &files[1].0;
    let text = std::fs::read_to_string(codex).unwrap();
    std::fs::write(
        codex,
        text.replace(
            "\"proxy\", \"--\"",
            "\"proxy\", \"--workspace\", \"mine\", \"--\"",
        ),
    )
    .unwrap();
    let output = hosts(&home, &["unwrap"]);
    assert_exit(
        &output,
        1,
        "rootsctl hosts unwrap with an entry edited since",
    );
    assert!(
        stderr_of(&output).contains(&format!(
            "{}: fs was edited since rootsctl wrapped it",
            codex.display()
        )),
        "{}",
        stderr_of(&output)
    );
    assert!(std::fs::read_to_string(codex).unwrap().contains("\"mine\""));
    assert_eq!(
        std::fs::read_to_string(&files[3].0).unwrap(),
        files[3].1,
        "VS Code's file is restored"
    );
}

#[test]
fn a_socket_a_workspace_and_a_project_reach_the_entries_and_an_unknown_host_is_a_usage_error() {
    let sb = Sandbox::new();
    let home = sb.mkdir("home");
    let project = sb.mkdir("project");
    let mcp = project.join(".mcp.json");
    std::fs::write(&mcp, "{\"mcpServers\": {\"s\": {\"command\": \"srv\"}}}\n").unwrap();
    std::fs::create_dir_all(project.join(".vscode")).unwrap();
    std::fs::write(
        project.join(".vscode/mcp.json"),
        "{\"servers\": {\"v\": {\"type\": \"stdio\", \"command\": \"srv\"}}}\n",
    )
    .unwrap();

    // Without --socket nothing names a socket: the proxy finds the daemon as every rootsctl does.
    let plain = hosts(
        &home,
        &["wrap", "--dry-run", "--project", project.to_str().unwrap()],
    );
    assert_exit(&plain, 0, "rootsctl hosts wrap --dry-run --project");
    assert!(
        !stdout_of(&plain).contains("--socket"),
        "{}",
        stdout_of(&plain)
    );
    assert!(stdout_of(&plain).contains(&format!(
        "--- {}\n",
        project.join(".vscode/mcp.json").display()
    )));

    // A socket given to this rootsctl reaches no host's server unless it is written down.
    let mut cmd = as_user(&rootsd_tests::bin("rootsctl"), &home);
    cmd.env("ROOTSD_SOCKET", "/run/rootsd/rootsd.sock").args([
        "hosts",
        "wrap",
        "-w",
        "work",
        "--project",
        project.to_str().unwrap(),
        "claude-code",
    ]);
    let wrapped = output_within(&mut cmd);
    assert_exit(
        &wrapped,
        0,
        "ROOTSD_SOCKET=… rootsctl hosts wrap -w work --project DIR claude-code",
    );
    let text = std::fs::read_to_string(&mcp).unwrap();
    assert!(
        text.contains("\"args\": [\"proxy\", \"--workspace\", \"work\", \"--socket\", \"/run/rootsd/rootsd.sock\", \"--host-roots\", \"merge\", \"--\", \"srv\"]"),
        "{text}"
    );
    assert!(
        !std::fs::read_to_string(project.join(".vscode/mcp.json"))
            .unwrap()
            .contains("proxy"),
        "only the named host"
    );

    let unknown = hosts(&home, &["wrap", "vscodium"]);
    assert_exit(&unknown, 2, "rootsctl hosts wrap vscodium");
    assert!(
        stderr_of(&unknown)
            .contains("unknown host \"vscodium\"; the hosts are claude-desktop, claude-code"),
        "{}",
        stderr_of(&unknown)
    );
}
