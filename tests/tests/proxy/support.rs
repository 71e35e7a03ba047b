//! Helpers shared by the proxy tests: the MCP servers the proxy runs (the real npm peers and the
//! scripted fake), what the fake received, the fake-server fixture, and small polling helpers.
//! The host's end of the proxy is [`crate::host`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

use rootsd_tests::{Daemon, PATIENCE, Sandbox, eventually, output_within};
use serde_json::{Value, json};

pub use crate::messages::{HANDSHAKE_VERSION, is_method, is_response_to, show};

/// `program` as a user's shell runs it: only `HOME` and `PATH` in its environment, in `home`.
pub fn as_user(program: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("HOME", home)
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .current_dir(home);
    cmd
}

/// The stateless revision.
pub const MODERN_VERSION: &str = "2026-07-28";

/// The `tests` package directory.
fn package_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The command that runs the pinned reference filesystem server (no directories on its command
/// line: it gets them only as roots). Fails the test if node or the npm package is missing.
pub fn filesystem_server() -> Vec<OsString> {
    static CHECKED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    npm_peer(&CHECKED, "server-filesystem", &[])
}

/// The command that runs the pinned `@modelcontextprotocol/server-everything` over stdio. Fails
/// the test if node or the npm package is missing.
pub fn everything_server() -> Vec<OsString> {
    static CHECKED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    npm_peer(&CHECKED, "server-everything", &["stdio"])
}

/// `node ENTRY ARGS…` for the `@modelcontextprotocol/PACKAGE` installed in tests/interop, checked
/// once per test process (`checked`).
fn npm_peer(
    checked: &OnceLock<Result<PathBuf, String>>,
    package: &str,
    args: &[&str],
) -> Vec<OsString> {
    let checked = checked.get_or_init(|| {
        let entry = package_dir().join(format!(
            "interop/node_modules/@modelcontextprotocol/{package}/dist/index.js"
        ));
        let node = Command::new("node")
            .arg("--version")
            .stdin(Stdio::null())
            .output();
        match node {
            Ok(out) if out.status.success() => {}
            _ => {
                return Err(
                    "node is not installed or does not run; the interop tests need it and the \
                     npm peers: install node, then run `npm ci --prefix tests/interop` \
                     (scripts/test does)"
                        .to_owned(),
                );
            }
        }
        if !entry.is_file() {
            return Err(format!(
                "{} is missing: run `npm ci --prefix tests/interop` (scripts/test does)",
                entry.display()
            ));
        }
        Ok(entry)
    });
    match checked {
        Ok(entry) => {
            let mut command = vec!["node".into(), entry.clone().into_os_string()];
            command.extend(args.iter().map(OsString::from));
            command
        }
        Err(message) => panic!("{message}"),
    }
}

/// The pinned `mcp-server-git` from PyPI (tests/interop/requirements.txt), installed in
/// tests/interop/venv. Fails the test, saying what to run, when it is missing.
pub fn git_server() -> OsString {
    let server = package_dir().join("interop/venv/bin/mcp-server-git");
    assert!(
        server.is_file(),
        "{} is missing: run `scripts/interop-python` (scripts/test does), which installs the \
         Python MCP servers pinned in tests/interop/requirements.txt",
        server.display()
    );
    server.into_os_string()
}

/// The scripted fake server (`tests/fixtures/fake_mcp_server.py`) in `scenario`, logging what it
/// receives to `log`.
pub fn fake_server(scenario: &str, log: &FakeLog) -> Vec<OsString> {
    fake_server_with(scenario, log, &[])
}

pub fn fake_server_with(scenario: &str, log: &FakeLog, extra: &[&str]) -> Vec<OsString> {
    static PYTHON: OnceLock<bool> = OnceLock::new();
    let runs = *PYTHON.get_or_init(|| {
        Command::new("python3")
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .is_ok_and(|out| out.status.success())
    });
    assert!(
        runs,
        "python3 is not installed or does not run; the fake MCP server needs it"
    );
    let script = package_dir().join("fixtures/fake_mcp_server.py");
    assert!(script.is_file(), "{} is missing", script.display());
    let mut command: Vec<OsString> = vec![
        "python3".into(),
        script.into_os_string(),
        "--scenario".into(),
        scenario.into(),
        "--log".into(),
        log.path.clone().into_os_string(),
    ];
    command.extend(extra.iter().map(OsString::from));
    command
}

/// What the fake server received, one JSON-RPC message per line, in order.
pub struct FakeLog {
    pub path: PathBuf,
}

impl FakeLog {
    /// A log file in the sandbox (created by the fake on start).
    pub fn new(sb: &Sandbox, name: &str) -> Self {
        Self {
            path: sb.path().join(format!("{name}.jsonl")),
        }
    }

    /// Every complete line received so far, byte for byte (a CR before the newline included),
    /// without its newline.
    pub fn byte_lines(&self) -> Vec<Vec<u8>> {
        let Ok(bytes) = std::fs::read(&self.path) else {
            return Vec::new();
        };
        // A line still being written has no newline yet.
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        bytes[..end]
            .split(|&b| b == b'\n')
            .map(<[u8]>::to_vec)
            .collect()
    }

    /// Every complete, non-empty line received so far, as text (lines that are not UTF-8 shown
    /// lossily).
    pub fn raw_lines(&self) -> Vec<String> {
        self.byte_lines()
            .iter()
            .filter(|line| !line.is_empty())
            .map(|line| String::from_utf8_lossy(line).into_owned())
            .collect()
    }

    /// Every complete message received so far.
    pub fn messages(&self) -> Vec<Value> {
        self.raw_lines()
            .iter()
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("the fake received a non-JSON line {line:?}: {e}"))
            })
            .collect()
    }

    /// Polls the log until `done` holds for it; returns the log then.
    #[track_caller]
    pub fn wait_for(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        eventually(&format!("the fake server to see {what}"), PATIENCE, || {
            let messages = self.messages();
            if done(&messages) {
                Ok(messages)
            } else {
                Err(format!("it received:\n{}", show(&messages)))
            }
        })
    }

    /// Waits until the last answer to the fake's `roots/list` carries `roots` (a daemon's list):
    /// `add --wait` returns once the proxy has answered, maybe before the fake read the answer.
    #[track_caller]
    pub fn wait_for_fetch_of(&self, roots: &Value) -> Vec<Value> {
        let result = json!({ "roots": roots });
        self.wait_for(&format!("a fetch of {roots}"), |m| {
            roots_answers(m)
                .last()
                .is_some_and(|a| a["result"] == result)
        })
    }

    /// Polls the log until `done` holds for its lines (as [`FakeLog::byte_lines`] has them);
    /// returns them then.
    #[track_caller]
    pub fn wait_for_lines(&self, what: &str, done: impl Fn(&[Vec<u8>]) -> bool) -> Vec<Vec<u8>> {
        eventually(&format!("the fake server to see {what}"), PATIENCE, || {
            let lines = self.byte_lines();
            if done(&lines) {
                Ok(lines)
            } else {
                Err(format!("it received:\n{}", show_lines(&lines)))
            }
        })
    }

    /// Waits until the fake has received exactly `line` (the proxy forwarded it unchanged).
    #[track_caller]
    pub fn wait_for_line(&self, line: &str) {
        self.wait_for_lines(&format!("the line {line}"), |lines| {
            lines.iter().any(|l| l == line.as_bytes())
        });
    }
}

/// Byte lines, one per line and shown lossily, for failure messages.
pub fn show_lines(lines: &[Vec<u8>]) -> String {
    lines
        .iter()
        .map(|line| {
            let text = String::from_utf8_lossy(line);
            if text.len() > 2000 {
                format!(
                    "{}… ({} bytes)",
                    &text[..text.floor_char_boundary(2000)],
                    line.len()
                )
            } else {
                format!("{text:?}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// How many `notifications/roots/list_changed` are in `messages`.
pub fn list_changed_count(messages: &[Value]) -> usize {
    messages
        .iter()
        .filter(|m| is_method(m, "notifications/roots/list_changed"))
        .count()
}

/// The setup most fake-server tests share: a sandbox whose default workspace holds some roots, a
/// daemon, and the host's end of `rootsctl proxy` in front of the fake in one scenario. Tests
/// state what differs in a [`FakeSetup`] and take it from there: the handshake, if any, is
/// theirs.
///
/// Fields drop in order: the proxy (and with it the fake) before the daemon, and both before the
/// sandbox they live in.
pub struct FakeSession {
    pub proxy: Proxy,
    pub log: FakeLog,
    /// `None` while the daemon is away (see [`FakeSetup::daemon_gone`]); a test brings it back
    /// with `Some(sb.start_daemon())`.
    pub daemon: Option<Daemon>,
    /// When the proxy was spawned, for tests that time what it does from its start.
    pub spawned: Instant,
    pub sb: Sandbox,
}

/// What a [`FakeSession`] is started with besides its scenario; the default is no roots, a
/// running daemon, and the fake with no extra arguments.
#[derive(Default)]
pub struct FakeSetup<'a> {
    /// Directories created in the sandbox and added to the default workspace (in one
    /// `rootsctl add`, so at revision 1) before the proxy starts.
    pub roots: &'a [&'a str],
    /// Stop the daemon once the roots are stored, so that the proxy starts while it is away.
    pub daemon_gone: bool,
    /// More arguments for the fake server, after the scenario and log.
    pub server_args: &'a [&'a str],
    /// Options for `rootsctl proxy`, before `--` (it runs in the sandbox, so relative paths are
    /// the sandbox's).
    pub proxy_options: &'a [&'a str],
}

impl FakeSession {
    /// Sets up as `setup` says and spawns the proxy in front of the fake in `scenario`, logging
    /// to `fake.jsonl`. Waits for nothing: the proxy may not have registered yet.
    pub fn start(scenario: &str, setup: FakeSetup) -> Self {
        let sb = Sandbox::new();
        let mut daemon = Some(sb.start_daemon());
        for root in setup.roots {
            sb.mkdir(root);
        }
        if !setup.roots.is_empty() {
            let mut add = vec!["add"];
            add.extend(setup.roots);
            sb.ctl_ok(&add);
        }
        if setup.daemon_gone {
            daemon = None;
        }
        let log = FakeLog::new(&sb, "fake");
        let spawned = Instant::now();
        let proxy = Proxy::spawn(
            &sb,
            setup.proxy_options,
            &fake_server_with(scenario, &log, setup.server_args),
        );
        Self {
            proxy,
            log,
            daemon,
            spawned,
            sb,
        }
    }

    /// The roots of the default workspace, as the daemon lists them.
    pub fn roots(&self) -> Value {
        daemon_roots(&self.sb, "default")
    }

    /// This proxy's session, once `done` holds for it.
    #[track_caller]
    pub fn session(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        wait_for_session(&self.sb, self.proxy.pid(), what, done)
    }

    /// Waits until the proxy has registered its session with the daemon.
    #[track_caller]
    pub fn registered(&self) -> Value {
        self.session("registration", |_| true)
    }
}

pub use crate::host::Proxy;

pub use rootsd_tests::{assert_exit, stderr_of, stdout_of};

/// `rootsctl add PATH… --wait --json [EXTRA…]`, which must succeed; returns the change (parsed)
/// and what it said on stderr.
#[track_caller]
pub fn add_wait(sb: &Sandbox, paths: &[&Path], extra: &[&str]) -> (Value, String) {
    change_wait(sb, "add", paths, extra)
}

/// `rootsctl remove PATH… --wait --json [EXTRA…]`, which must succeed.
#[track_caller]
pub fn remove_wait(sb: &Sandbox, paths: &[&Path], extra: &[&str]) -> (Value, String) {
    change_wait(sb, "remove", paths, extra)
}

#[track_caller]
fn change_wait(sb: &Sandbox, verb: &str, paths: &[&Path], extra: &[&str]) -> (Value, String) {
    let mut cmd = sb.rootsctl();
    cmd.arg(verb)
        .args(paths)
        .args(["--wait", "--json"])
        .args(extra);
    let output = output_within(&mut cmd);
    assert_exit(
        &output,
        0,
        &format!("rootsctl {verb} {paths:?} --wait {extra:?}"),
    );
    let change = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{verb} --json printed {:?}: {e}", stdout_of(&output)));
    (change, stderr_of(&output))
}

/// `rootsctl sessions --json`'s sessions.
#[track_caller]
pub fn sessions(sb: &Sandbox) -> Vec<Value> {
    let output = sb.ctl(&["sessions", "--json"]);
    assert_exit(&output, 0, "rootsctl sessions --json");
    let value: Value = serde_json::from_slice(&output.stdout).expect("sessions --json is JSON");
    value["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no sessions array in {value}"))
        .clone()
}

/// The session of the proxy with process id `pid`, once `done` holds for it.
#[track_caller]
pub fn wait_for_session(
    sb: &Sandbox,
    pid: u32,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let what = format!("sessions --json to show {what} for pid {pid}");
    eventually(&what, PATIENCE, || {
        let all = sessions(sb);
        match all.iter().find(|s| s["pid"] == json!(pid)) {
            Some(session) if done(session) => Ok(session.clone()),
            _ => Err(format!("sessions:\n{}", show(&all))),
        }
    })
}

/// Waits until the daemon lists no session: every proxy that ended has been unregistered.
#[track_caller]
pub fn wait_for_no_sessions(sb: &Sandbox) {
    eventually("every session to end with its proxy", PATIENCE, || {
        let all = sessions(sb);
        if all.is_empty() {
            Ok(())
        } else {
            Err(format!("sessions:\n{}", show(&all)))
        }
    });
}

/// `{"uri": …, "name": …}` roots of a workspace, as the daemon lists them.
pub fn daemon_roots(sb: &Sandbox, workspace: &str) -> Value {
    Value::Array(sb.roots(workspace))
}

/// The `tools/call` requests the fake received for tool `name`, in order.
pub fn calls_of(messages: &[Value], name: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| is_method(m, "tools/call") && m["params"]["name"] == json!(name))
        .cloned()
        .collect()
}

/// The fake's responses from the proxy to its `roots/list` requests, in order.
pub fn roots_answers(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m.get("method").is_none() && m.get("id").is_some())
        .cloned()
        .collect()
}

/// A 2026-07-28 `tools/call` with a chosen id.
pub fn modern_call(id: Value, tool: &str, arguments: Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": modern_meta()},
    })
}

/// The capabilities the fake must see in a modern request: the host's, plus `roots: {}`.
pub fn caps_with_roots() -> Value {
    let mut caps = modern_meta()["io.modelcontextprotocol/clientCapabilities"].clone();
    caps["roots"] = json!({});
    caps
}

/// Sends `test/emit`: the fake writes `message` to the proxy as it is.
pub fn emit(proxy: &mut Proxy, message: Value) {
    proxy.notify("test/emit", json!({"message": message}));
}

/// A round trip through proxy and fake: everything sent before it has been handled by the fake
/// once this returns.
pub fn round_trip(proxy: &mut Proxy) {
    let response = proxy.call_tool("echo", json!({"sync": true}));
    assert!(response.get("result").is_some(), "{response}");
}

/// Sends `test/emit_raw`: the fake writes `line` to the proxy exactly as it is.
pub fn emit_raw(proxy: &mut Proxy, line: &str) {
    proxy.notify("test/emit_raw", json!({"line": line}));
}

/// The `ListRootsResult` of a workspace exactly as the proxy writes it for `roots/list`:
/// `rootsctl list --json` prints the same bytes.
pub fn roots_result_text(sb: &Sandbox, workspace: &str) -> String {
    sb.ctl_ok(&["list", "--json", "--workspace", workspace])
        .trim_end()
        .to_owned()
}

/// The proxy's answer to the fake's `roots/list` `id` (raw JSON) with `result` (raw JSON).
pub fn roots_answer_line(id: &str, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

/// `_meta` of a 2026-07-28 request that declares no capabilities of its own.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "rootsd-tests", "version": "0.0.1"},
    })
}
