//! `rootsctl hosts unwrap` after the hosts saved their own files: the real Claude Code, Gemini
//! CLI and Codex rewrite the files rootsctl wrapped, in their own layout, between wrap and
//! unwrap; unwrap gives back the original command and keeps what the host changed. Also what a
//! host's half-done save, a key written twice and a versioned install do to unwrap and wrap.

use std::path::{Path, PathBuf};
use std::process::Output;

use rootsd_tests::Sandbox;
use serde_json::{Value, json};

use crate::host_clis::{run, tool};
use crate::support::{assert_exit, filesystem_server, stderr_of, stdout_of};

/// The real rootsctl, as a user's shell with only `HOME` and `PATH` runs it from `dir`.
fn rootsctl(home: &Path, dir: &Path, args: &[&str]) -> Output {
    run(&rootsd_tests::bin("rootsctl"), home, dir, args)
}

fn node_and_entry() -> (String, String) {
    let server = filesystem_server();
    let [node, entry] = [&server[0], &server[1]].map(|s| s.to_str().unwrap().to_owned());
    (node, entry)
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json_of(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `value` with the server at `pointer` running `command` again.
fn with_command(mut value: Value, pointer: &str, command: &str, args: Value) -> Value {
    let shown = value.to_string();
    let server = value
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{pointer} in {shown}"));
    server["command"] = command.into();
    server["args"] = args;
    value
}

#[test]
fn claude_code_saving_its_files_between_wrap_and_unwrap_keeps_its_changes_and_the_original_comes_back()
 {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let home = sb.configured_home();
    let project = sb.mkdir("home/project");
    let (node, entry) = node_and_entry();
    let user = home.join(".claude.json");
    let shared = project.join(".mcp.json");
    write(
        &user,
        &format!(
            "{{\"numStartups\": 1, \"mcpServers\": {{\"fs\": {{\"type\": \"stdio\", \"command\": \"{node}\", \"args\": [\"{entry}\"], \"env\": {{}}}}}}}}\n"
        ),
    );
    write(
        &shared,
        &format!(
            "{{\"mcpServers\": {{\"pfs\": {{\"command\": \"{node}\", \"args\": [\"{entry}\"]}}}}}}\n"
        ),
    );
    let project_arg = project.to_str().unwrap();
    let wrapped = rootsctl(
        &home,
        &home,
        &["hosts", "wrap", "claude-code", "--project", project_arg],
    );
    assert_exit(&wrapped, 0, "rootsctl hosts wrap claude-code --project");
    let wrapped_user = read(&user);
    let wrapped_shared = read(&shared);

    // Claude Code saves ~/.claude.json on every run, and .mcp.json when a server is added to it.
    let listed = run(&tool("claude"), &home, &project, &["mcp", "list"]);
    assert_exit(&listed, 0, "claude mcp list");
    let added = run(
        &tool("claude"),
        &home,
        &project,
        &[
            "mcp", "add", "-s", "project", "other", "--", &node, "other.js",
        ],
    );
    assert_exit(&added, 0, "claude mcp add -s project");
    let saved_user = json_of(&user);
    let saved_shared = json_of(&shared);
    assert_ne!(
        read(&user),
        wrapped_user,
        "claude mcp list saved ~/.claude.json"
    );
    assert_ne!(
        read(&shared),
        wrapped_shared,
        "claude mcp add saved .mcp.json"
    );
    assert!(
        saved_shared["mcpServers"]["other"].is_object(),
        "{saved_shared}"
    );

    let unwrapped = rootsctl(&home, &home, &["hosts", "unwrap"]);
    assert_exit(&unwrapped, 0, "rootsctl hosts unwrap");
    assert_eq!(
        json_of(&user),
        with_command(saved_user, "/mcpServers/fs", &node, json!([entry])),
        "{}",
        read(&user)
    );
    assert_eq!(
        json_of(&shared),
        with_command(saved_shared, "/mcpServers/pfs", &node, json!([entry])),
        "{}",
        read(&shared)
    );
    let record = home.join(".local/state/rootsctl/hosts/wrapped.json");
    assert_eq!(json_of(&record)["files"], json!([]));
}

#[test]
fn gemini_and_codex_adding_a_server_between_wrap_and_unwrap_keep_it_and_the_original_comes_back() {
    let sb = Sandbox::new();
    let home = sb.configured_home();
    let (node, entry) = node_and_entry();
    let settings = home.join(".gemini/settings.json");
    let config = home.join(".codex/config.toml");
    write(
        &settings,
        &format!(
            "{{\"theme\": \"Default\", \"mcpServers\": {{\"fs\": {{\"command\": \"{node}\", \"args\": [\"{entry}\"], \"timeout\": 30000}}}}}}\n"
        ),
    );
    write(
        &config,
        &format!(
            "model = \"gpt-5\"\n\n[mcp_servers.fs]\ncommand = \"{node}\"\nargs = [\"{entry}\"]\n"
        ),
    );
    let wrapped = rootsctl(&home, &home, &["hosts", "wrap", "gemini", "codex"]);
    assert_exit(&wrapped, 0, "rootsctl hosts wrap gemini codex");
    let wrapped_settings = read(&settings);
    let wrapped_config = read(&config);

    let gemini = run(
        &tool("gemini"),
        &home,
        &home,
        &["mcp", "add", "-s", "user", "other", &node, "other.js"],
    );
    assert_exit(&gemini, 0, "gemini mcp add -s user");
    let codex = run(
        &tool("codex"),
        &home,
        &home,
        &["mcp", "add", "other", "--", &node, "other.js"],
    );
    assert_exit(&codex, 0, "codex mcp add");
    assert_ne!(read(&settings), wrapped_settings, "gemini mcp add saved it");
    assert_ne!(read(&config), wrapped_config, "codex mcp add saved it");
    let saved_settings = json_of(&settings);

    let unwrapped = rootsctl(&home, &home, &["hosts", "unwrap"]);
    assert_exit(&unwrapped, 0, "rootsctl hosts unwrap");
    assert_eq!(
        json_of(&settings),
        with_command(saved_settings, "/mcpServers/fs", &node, json!([entry])),
        "{}",
        read(&settings)
    );
    let listed = run(&tool("codex"), &home, &home, &["mcp", "list", "--json"]);
    assert_exit(&listed, 0, "codex mcp list --json");
    let listed: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let server = |name: &str| {
        listed
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {listed:?}"))["transport"]
            .clone()
    };
    assert_eq!(server("fs")["command"], node.as_str());
    assert_eq!(server("fs")["args"], json!([entry]));
    assert_eq!(server("other")["args"], json!(["other.js"]));
    assert!(read(&config).contains("model = \"gpt-5\""));
}

#[test]
fn an_entry_gemini_stored_without_dashes_runs_behind_rootsd_as_hosts_lists_it() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let home = sb.configured_home();
    let project = sb.mkdir("home/project");
    let (node, entry) = node_and_entry();
    write(
        &home.join(".gemini/trustedFolders.json"),
        &format!("{{\"{}\": \"TRUST_FOLDER\"}}\n", project.display()),
    );
    let bin = rootsd_tests::bin("rootsctl");
    let added = run(
        &tool("gemini"),
        &home,
        &project,
        &[
            "mcp",
            "add",
            "-s",
            "user",
            "fs",
            bin.to_str().unwrap(),
            "proxy",
            "--",
            &node,
            &entry,
        ],
    );
    assert_exit(&added, 0, "gemini mcp add fs rootsctl proxy -- …");
    let stored = json_of(&home.join(".gemini/settings.json"));
    assert_eq!(
        stored["mcpServers"]["fs"]["args"],
        json!(["proxy", node, entry]),
        "Gemini CLI stores the entry without its --"
    );
    let hosts = rootsctl(&home, &home, &["hosts", "--json"]);
    assert_exit(&hosts, 0, "rootsctl hosts --json");
    let hosts: Value = serde_json::from_slice(&hosts.stdout).unwrap();
    assert_eq!(
        hosts[0]["servers"][0]["transport"]["wrapped"], true,
        "{hosts}"
    );
    let listed = run(&tool("gemini"), &home, &project, &["mcp", "list"]);
    assert_exit(&listed, 0, "gemini mcp list");
    let printed = stdout_of(&listed) + &stderr_of(&listed);
    assert!(
        printed.contains("fs: ") && printed.contains("(stdio) - Connected"),
        "the entry listed as behind rootsd runs: {printed}"
    );
}

/// `~/.claude.json` and `config.toml`, wrapped; returns (file, original text, wrapped text).
fn wrap_two(home: &Path) -> Vec<(PathBuf, String, String)> {
    let (node, entry) = node_and_entry();
    let files = [
        (
            home.join(".claude.json"),
            format!(
                "{{\"mcpServers\": {{\"fs\": {{\"command\": \"{node}\", \"args\": [\"{entry}\"]}}}}}}\n"
            ),
        ),
        (
            home.join(".codex/config.toml"),
            format!("[mcp_servers.fs]\ncommand = \"{node}\"\nargs = [\"{entry}\"]\n"),
        ),
    ];
    for (path, text) in &files {
        write(path, text);
    }
    let wrapped = rootsctl(home, home, &["hosts", "wrap", "claude-code", "codex"]);
    assert_exit(&wrapped, 0, "rootsctl hosts wrap claude-code codex");
    files
        .into_iter()
        .map(|(path, text)| {
            let wrapped = read(&path);
            assert_ne!(wrapped, text);
            (path, text, wrapped)
        })
        .collect()
}

#[test]
fn a_file_emptied_or_gone_while_its_host_saves_stays_recorded_and_unwrap_says_so() {
    let sb = Sandbox::new();
    let home = sb.configured_home();
    let files = wrap_two(&home);
    let record = home.join(".local/state/rootsctl/hosts/wrapped.json");
    let recorded = read(&record);
    // Mid-save: one host has truncated its file, the other has removed it.
    std::fs::write(&files[0].0, "").unwrap();
    std::fs::remove_file(&files[1].0).unwrap();
    let unwrapped = rootsctl(&home, &home, &["hosts", "unwrap"]);
    assert_exit(
        &unwrapped,
        1,
        "rootsctl hosts unwrap of a file emptied and one gone",
    );
    let said = stderr_of(&unwrapped);
    assert!(
        said.contains("fs is not in the file, so it stays recorded")
            && said.contains("the file is not there"),
        "{said}"
    );
    assert_eq!(read(&record), recorded, "the record is kept as it was");

    // The saves finish: the next unwrap restores both, and its dry run says which side is which.
    for (path, _, wrapped) in &files {
        write(path, wrapped);
    }
    let dry = rootsctl(&home, &home, &["hosts", "unwrap", "--dry-run"]);
    assert_exit(&dry, 0, "rootsctl hosts unwrap --dry-run");
    let claude = files[0].0.to_str().unwrap();
    assert!(
        stdout_of(&dry).contains(&format!("+++ {claude} (unwrapped)\n")),
        "{}",
        stdout_of(&dry)
    );
    let unwrapped = rootsctl(&home, &home, &["hosts", "unwrap"]);
    assert_exit(&unwrapped, 0, "rootsctl hosts unwrap");
    for (path, original, _) in &files {
        assert_eq!(&read(path), original, "{}", path.display());
    }
}

#[test]
fn a_key_written_twice_is_refused_by_name_and_the_other_files_are_still_done() {
    let sb = Sandbox::new();
    let home = sb.configured_home();
    let files = wrap_two(&home);
    let (claude, _, wrapped) = &files[0];
    let twice = wrapped.replacen("{\"fs\"", "{\"fs\": {\"command\": \"x\"}, \"fs\"", 1);
    write(claude, &twice);

    let unwrapped = rootsctl(&home, &home, &["hosts", "unwrap"]);
    assert_exit(&unwrapped, 1, "rootsctl hosts unwrap with a key twice");
    let said = stderr_of(&unwrapped);
    assert!(said.contains("\"fs\" is there twice"), "{said}");
    assert_eq!(read(claude), twice, "left untouched");
    let (codex, original, _) = &files[1];
    assert_eq!(&read(codex), original, "the other file is unwrapped");

    let wrap = rootsctl(&home, &home, &["hosts", "wrap", "claude-code"]);
    assert_exit(&wrap, 1, "rootsctl hosts wrap with a key twice");
    assert!(stderr_of(&wrap).contains("\"fs\" is there twice"));
    let list = rootsctl(&home, &home, &["hosts"]);
    assert_exit(&list, 0, "rootsctl hosts");
    assert!(
        stdout_of(&list).contains("\"fs\" is there twice"),
        "{}",
        stdout_of(&list)
    );
}

#[test]
fn wrap_writes_the_rootsctl_path_the_user_installed_not_the_versioned_one_behind_it() {
    let sb = Sandbox::new();
    let home = sb.configured_home();
    // Homebrew-style: a stable link in PATH to the versioned file an upgrade removes.
    let versioned = sb.mkdir("opt/Cellar/rootsd/1.0/bin").join("rootsctl");
    std::os::unix::fs::symlink(rootsd_tests::bin("rootsctl"), &versioned).unwrap();
    let stable = sb.mkdir("opt/bin").join("rootsctl");
    std::os::unix::fs::symlink(&versioned, &stable).unwrap();
    let (node, entry) = node_and_entry();
    let file = home.join(".claude.json");
    let original = format!(
        "{{\"mcpServers\": {{\"fs\": {{\"command\": \"{node}\", \"args\": [\"{entry}\"]}}}}}}\n"
    );
    for how in ["by its path", "from PATH"] {
        write(&file, &original);
        let mut command = match how {
            "by its path" => std::process::Command::new(&stable),
            _ => std::process::Command::new("rootsctl"),
        };
        let path =
            std::env::join_paths(std::iter::once(stable.parent().unwrap().to_owned()).chain(
                std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
            ))
            .unwrap();
        let wrapped = rootsd_tests::output_within(
            command
                .args(["hosts", "wrap", "claude-code"])
                .env_clear()
                .env("HOME", &home)
                .env("PATH", path)
                .current_dir(&home),
        );
        assert_exit(&wrapped, 0, &format!("rootsctl hosts wrap, run {how}"));
        assert_eq!(
            json_of(&file)["mcpServers"]["fs"]["command"],
            stable.to_str().unwrap(),
            "run {how}"
        );
        let unwrapped = rootsctl(&home, &home, &["hosts", "unwrap"]);
        assert_exit(&unwrapped, 0, "rootsctl hosts unwrap");
        assert_eq!(read(&file), original);
    }
}
