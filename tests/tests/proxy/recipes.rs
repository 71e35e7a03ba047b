//! The README's recipes ("Servers that take the workspace as arguments") run as written against
//! their real servers, pinned in tests/interop. The filesystem server's and `mcp-server-git`'s
//! are in workspace_args.rs; the others are tried by hand, with the result in the README.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use rootsd_tests::Sandbox;
use serde_json::json;

use crate::support::{Proxy, add_wait, remove_wait, wait_for_session};

/// The command that runs the pinned `mcp-ripgrep` (tests/interop/package.json) with node, as
/// `npx -y mcp-ripgrep` would. Fails the test, saying what to install, when it or the `rg` it
/// runs is missing.
fn ripgrep_server() -> Vec<OsString> {
    let entry = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("interop/node_modules/mcp-ripgrep/dist/index.js");
    assert!(
        entry.is_file(),
        "{} is missing: run `npm ci --prefix tests/interop` (scripts/test does)",
        entry.display()
    );
    let rg = Command::new("rg").arg("--version").output();
    assert!(
        rg.is_ok_and(|out| out.status.success()),
        "rg is missing, which mcp-ripgrep runs: install it with `apt-get install ripgrep` \
         (scripts/install-test-deps does)"
    );
    vec!["node".into(), entry.into_os_string()]
}

/// The text of mcp-ripgrep's `search` for `pattern` in `path`, or the error it gave.
fn search(proxy: &mut Proxy, pattern: &str, path: &str) -> Result<String, String> {
    proxy.tool_text("search", json!({"pattern": pattern, "path": path}))
}

/// `rootsctl proxy --cwd {root} -- npx -y mcp-ripgrep`: mcp-ripgrep takes no directory on its
/// command line (0.4.0 has no options at all; `{roots:--allow-dir}` was passed and ignored), and
/// searches the `path` of each call, which a relative path resolves against its working
/// directory, the first root.
#[test]
fn mcp_ripgrep_searches_the_first_root_as_its_working_directory_across_a_change() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let first = sb.mkdir("first");
    let second = sb.mkdir("second");
    std::fs::write(first.join("notes.txt"), "rootsd-needle in the first root\n").unwrap();
    std::fs::write(
        second.join("todo.txt"),
        "rootsd-needle in the second root\n",
    )
    .unwrap();
    sb.ctl_ok(&["add", "first"]);
    let mut proxy = Proxy::spawn(&sb, &["--cwd", "{root}"], &ripgrep_server());
    let init = proxy.initialize();
    assert_eq!(
        init.pointer("/result/serverInfo/name"),
        Some(&json!("ripgrep-search")),
        "{init}"
    );
    let found = search(&mut proxy, "rootsd-needle", ".")
        .unwrap_or_else(|e| panic!("search failed: {e}\n{}", proxy.stderr()));
    assert!(found.contains("in the first root"), "{found}");
    assert!(!found.contains("in the second root"), "{found}");

    // "second" becomes the first root: the server is restarted in it.
    add_wait(&sb, &[&second], &[]);
    remove_wait(&sb, &[&first], &[]);
    let found = search(&mut proxy, "rootsd-needle", ".")
        .unwrap_or_else(|e| panic!("search failed: {e}\n{}", proxy.stderr()));
    assert!(found.contains("in the second root"), "{found}");
    assert!(!found.contains("in the first root"), "{found}");
    let session = wait_for_session(&sb, proxy.pid(), "the restart", |s| {
        s["restarts"] == json!(1)
    });
    assert_eq!(session["workspace_via"], json!("arguments"), "{session}");
}

/// The recipe as the README had it, `-- mcp-ripgrep {roots:--allow-dir}`: the flags reach the
/// server, which ignores them, so a relative path is searched wherever the host started it, not
/// in the root. This is why the README's recipe uses `--cwd {root}`.
#[test]
fn mcp_ripgrep_ignores_allow_dir_so_the_old_recipe_searched_outside_the_root() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let project = sb.mkdir("project");
    std::fs::write(project.join("notes.txt"), "rootsd-needle in the root\n").unwrap();
    sb.ctl_ok(&["add", "project"]);
    // The host starts the server in the sandbox's "elsewhere", as Zed starts servers in `/`.
    let elsewhere = sb.mkdir("elsewhere");
    let mut command = ripgrep_server();
    command.push("{roots:--allow-dir}".into());
    let mut cmd = sb.rootsctl();
    cmd.args(["proxy", "--"])
        .args(&command)
        .current_dir(&elsewhere);
    let mut proxy = Proxy::spawn_command(cmd);
    proxy.initialize();
    let found = search(&mut proxy, "rootsd-needle", ".");
    assert!(
        found
            .as_ref()
            .is_ok_and(|text| !text.contains("in the root")),
        "{found:?}"
    );
}
