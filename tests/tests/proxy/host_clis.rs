//! The hosts' own command-line tools, installed pinned from npm (tests/interop), read the files
//! `rootsctl hosts wrap` wrote: `codex mcp list` (which reads config.toml without connecting),
//! and `claude mcp list` and `gemini mcp list`, which connect to each server, so the filesystem
//! server behind the proxy answers them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rootsd_tests::{Sandbox, output_within};
use serde_json::Value;

use crate::support::{assert_exit, filesystem_server, stderr_of, stdout_of};

pub(crate) fn tool(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("interop/node_modules/.bin")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run `npm ci --prefix tests/interop` (scripts/test does)",
        path.display()
    );
    path
}

/// `program ARGS` with only `HOME` and `PATH`, in `dir`, as the user would run it.
pub(crate) fn run(program: &Path, home: &Path, dir: &Path, args: &[&str]) -> Output {
    output_within(
        Command::new(program)
            .args(args)
            .env_clear()
            .env("HOME", home)
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            )
            // Nothing but the servers is reached: no update checks, no telemetry.
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("GEMINI_CLI_DISABLE_AUTO_UPDATE", "1")
            // Gemini CLI otherwise starts itself again with a larger heap and exits at once,
            // leaving the copy to print the list after the test has looked.
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .current_dir(dir),
    )
}

#[test]
fn codex_claude_and_gemini_read_the_wrapped_files_and_reach_the_server_behind_the_proxy() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let home = sb.configured_home();
    let project = sb.mkdir("home/project");
    let server = filesystem_server();
    let (node, entry) = (server[0].to_str().unwrap(), server[1].to_str().unwrap());
    for (file, text) in [
        (
            ".codex/config.toml",
            format!("[mcp_servers.fs]\ncommand = \"{node}\"\nargs = [\"{entry}\"]\n"),
        ),
        (
            ".claude.json",
            format!(
                "{{\"mcpServers\": {{\"fs\": {{\"type\": \"stdio\", \"command\": \"{node}\", \"args\": [\"{entry}\"]}}}}}}\n"
            ),
        ),
        (
            ".gemini/settings.json",
            format!(
                "{{\n  \"mcpServers\": {{\"fs\": {{\"command\": \"{node}\", \"args\": [\"{entry}\"]}}}}\n}}\n"
            ),
        ),
        // Gemini CLI starts no server in a folder the user has not trusted.
        (
            ".gemini/trustedFolders.json",
            format!("{{\"{}\": \"TRUST_FOLDER\"}}\n", project.display()),
        ),
    ] {
        let path = home.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let rootsctl = std::fs::canonicalize(rootsd_tests::bin("rootsctl")).unwrap();
    let wrapped = run(
        &rootsctl,
        &home,
        &home,
        &["hosts", "wrap", "codex", "claude-code", "gemini"],
    );
    assert_exit(&wrapped, 0, "rootsctl hosts wrap codex claude-code gemini");
    let rootsctl = rootsctl.to_str().unwrap();

    let codex = run(&tool("codex"), &home, &project, &["mcp", "list", "--json"]);
    assert_exit(&codex, 0, "codex mcp list --json");
    let listed: Vec<Value> = serde_json::from_slice(&codex.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", stdout_of(&codex)));
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["transport"]["type"], "stdio");
    assert_eq!(listed[0]["transport"]["command"], rootsctl);
    assert_eq!(
        listed[0]["transport"]["args"],
        serde_json::json!(["proxy", "--", node, entry])
    );

    let claude = run(&tool("claude"), &home, &project, &["mcp", "list"]);
    assert_exit(&claude, 0, "claude mcp list");
    let expected =
        format!("fs: {rootsctl} proxy --host-roots merge -- {node} {entry} - ✔ Connected");
    assert!(
        stdout_of(&claude).contains(&expected),
        "{expected:?} in {}",
        stdout_of(&claude)
    );

    let gemini = run(&tool("gemini"), &home, &project, &["mcp", "list"]);
    assert_exit(&gemini, 0, "gemini mcp list");
    // Gemini CLI prints its list on stderr.
    let printed = stdout_of(&gemini) + &stderr_of(&gemini);
    let expected = format!("fs: {rootsctl} proxy -- {node} {entry} (stdio) - Connected");
    assert!(printed.contains(&expected), "{expected:?} in {printed}");
}

/// Processes whose command line holds `marker`, with their command lines.
fn processes_naming(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            found.push(format!("{pid} ({})", cmdline.trim()));
        }
    }
    found
}

#[test]
fn gemini_mcp_list_leaves_no_process_of_a_wrapped_npx_launched_server_running() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let home = sb.configured_home();
    let project = sb.mkdir("home/project");
    // The filesystem server's directory names this test's processes apart from any other's.
    let marker = format!("leftover-marker-{}", std::process::id());
    let allowed = sb.mkdir(&marker);
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop");
    let settings = serde_json::json!({"mcpServers": {"fs": {
        "command": "npx",
        "args": ["--prefix", prefix, "--no-install", "mcp-server-filesystem", allowed],
    }}});
    let trusted = serde_json::json!({project.to_str().unwrap(): "TRUST_FOLDER"});
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(home.join(".gemini/settings.json"), settings.to_string()).unwrap();
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        trusted.to_string(),
    )
    .unwrap();
    let rootsctl = std::fs::canonicalize(rootsd_tests::bin("rootsctl")).unwrap();
    let wrapped = run(&rootsctl, &home, &home, &["hosts", "wrap", "gemini"]);
    assert_exit(&wrapped, 0, "rootsctl hosts wrap gemini");
    let gemini = run(&tool("gemini"), &home, &project, &["mcp", "list"]);
    assert_exit(&gemini, 0, "gemini mcp list");
    let printed = stdout_of(&gemini) + &stderr_of(&gemini);
    assert!(
        printed.contains("Connected"),
        "the server was not reached: {printed}"
    );
    // Within the keeper's grace (3 s) and leeway, nothing of the session is left.
    let left = rootsd_tests::poll_until(std::time::Duration::from_secs(10), || {
        let left = processes_naming(&marker);
        if left.is_empty() { Ok(()) } else { Err(left) }
    });
    if let Err(survivors) = left {
        for line in &survivors {
            if let Some(pid) = line.split_whitespace().next().and_then(|p| p.parse().ok()) {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_raw(pid).expect("a pid"),
                    rustix::process::Signal::KILL,
                );
            }
        }
        panic!(
            "gemini mcp list left these running: {}",
            survivors.join(", ")
        );
    }
}
