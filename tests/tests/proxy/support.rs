//! Helpers shared by the proxy tests: a host's end of `rootsctl proxy`, the two MCP servers it
//! runs (the real filesystem server and the scripted fake), and small polling helpers.

use std::collections::{BTreeSet, VecDeque};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use rootsd_tests::{Daemon, PATIENCE, Sandbox, eventually, output_within};
use serde_json::{Value, json};

/// The protocol version the tests' hosts ask for in `initialize`.
pub const HANDSHAKE_VERSION: &str = "2025-11-25";
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
    let checked = CHECKED.get_or_init(|| {
        let entry = package_dir()
            .join("interop/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
        let node = Command::new("node")
            .arg("--version")
            .stdin(Stdio::null())
            .output();
        match node {
            Ok(out) if out.status.success() => {}
            _ => {
                return Err(
                    "node is not installed or does not run; the interop tests need it and the \
                     npm peer: install node, then run `npm ci --prefix tests/interop` \
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
        Ok(entry) => vec!["node".into(), entry.clone().into_os_string()],
        Err(message) => panic!("{message}"),
    }
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

    /// Every complete line received so far, as received.
    pub fn raw_lines(&self) -> Vec<String> {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return Vec::new();
        };
        // A line still being written has no newline yet.
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete
            .lines()
            .filter(|line| !line.is_empty())
            .map(str::to_owned)
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
}

/// Messages, one per line, for failure messages.
pub fn show(messages: &[Value]) -> String {
    messages
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `message` is a request or notification of `method`.
pub fn is_method(message: &Value, method: &str) -> bool {
    message.get("method").and_then(Value::as_str) == Some(method)
}

/// Whether `message` is a response (has an id, no method) to `id`.
pub fn is_response_to(message: &Value, id: &Value) -> bool {
    message.get("method").is_none() && message.get("id") == Some(id)
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
            &[],
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

/// The host's side of one `rootsctl proxy`: writes MCP lines to its stdin, reads its stdout.
pub struct Proxy {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    stderr_done: Receiver<()>,
    /// Messages read but not yet taken by [`Proxy::response`] or [`Proxy::next_message`].
    unread: VecDeque<Value>,
    /// Every message the host received, in order.
    pub received: Vec<Value>,
    next_id: i64,
}

impl Proxy {
    /// Starts `rootsctl proxy OPTIONS -- COMMAND…` for the sandbox (autostart off).
    pub fn spawn(sb: &Sandbox, options: &[&str], command: &[OsString]) -> Self {
        let mut cmd = sb.rootsctl();
        cmd.arg("proxy").args(options).arg("--").args(command);
        Self::spawn_command(cmd)
    }

    /// Starts `cmd`, which must run a `rootsctl proxy` (with whatever environment the test
    /// gives it), as a host would.
    pub fn spawn_command(mut cmd: Command) -> Self {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn rootsctl proxy");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (done, stderr_done) = mpsc::channel();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr_pipe);
            let mut line = String::new();
            while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
            let _ = done.send(());
        });
        Self {
            child,
            stdin,
            lines,
            stderr,
            stderr_done,
            unread: VecDeque::new(),
            received: Vec::new(),
            next_id: 1,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the proxy and its server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// A fresh request id (integers from 1; tests that choose their own use other values).
    pub fn id(&mut self) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        json!(id)
    }

    /// Writes one message as one line.
    pub fn send(&mut self, message: &Value) {
        self.send_raw(&serde_json::to_string(message).expect("serialise"));
    }

    /// Writes `text` and a newline, as they are.
    pub fn send_raw(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is still open");
        let mut line = text.as_bytes().to_vec();
        line.push(b'\n');
        stdin
            .write_all(&line)
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("write to the proxy: {e}\nstderr: {}", self.stderr()));
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request with a fresh id; returns the id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Value {
        let id = self.id();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and waits for its response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(&id)
    }

    /// Reads one more line from the proxy into `unread`, waiting until `deadline`.
    fn read_one(&mut self, deadline: Instant, what: &str) {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => {
                let message: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("the proxy wrote a non-JSON line {line:?}: {e}"));
                self.received.push(message.clone());
                self.unread.push_back(message);
            }
            Err(RecvTimeoutError::Timeout) => panic!(
                "no {what} from the proxy in time; received so far:\n{}\nstderr:\n{}",
                show(&self.received),
                self.stderr()
            ),
            Err(RecvTimeoutError::Disconnected) => panic!(
                "the proxy closed its stdout before {what}; received:\n{}\nstderr:\n{}",
                show(&self.received),
                self.stderr()
            ),
        }
    }

    /// The response to `id`; other messages stay unread.
    #[track_caller]
    pub fn response(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(index) = self.unread.iter().position(|m| is_response_to(m, id)) {
                return self.unread.remove(index).expect("index is in range");
            }
            self.read_one(deadline, &format!("response to {id}"));
        }
    }

    /// The next message not yet taken.
    #[track_caller]
    pub fn next_message(&mut self) -> Value {
        if let Some(message) = self.unread.pop_front() {
            return message;
        }
        self.read_one(Instant::now() + PATIENCE, "message");
        self.unread.pop_front().expect("one was just read")
    }

    /// Sends `initialize` with `capabilities` (the proxy adds roots); does not wait.
    pub fn send_initialize(&mut self, capabilities: Value) -> Value {
        self.send_request(
            "initialize",
            json!({
                "protocolVersion": HANDSHAKE_VERSION,
                "capabilities": capabilities,
                "clientInfo": {"name": "rootsd-tests", "version": "0.0.1"},
            }),
        )
    }

    /// The handshake: `initialize` (the host declares no roots of its own), its result, then
    /// `notifications/initialized`. Returns the result.
    #[track_caller]
    pub fn initialize(&mut self) -> Value {
        let id = self.send_initialize(json!({}));
        let response = self.response(&id);
        self.finish_initialize(&response);
        response
    }

    /// Checks an initialize response and sends `notifications/initialized`.
    #[track_caller]
    pub fn finish_initialize(&mut self, response: &Value) {
        assert!(
            response.pointer("/result/serverInfo").is_some(),
            "initialize failed: {response}\nstderr:\n{}",
            self.stderr()
        );
        self.notify("notifications/initialized", json!({}));
    }

    /// A `tools/call` with no `_meta`, answered.
    pub fn call_tool(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// The real server's `list_allowed_directories`.
    #[track_caller]
    pub fn allowed_dirs(&mut self) -> BTreeSet<PathBuf> {
        let response = self.call_tool("list_allowed_directories", json!({}));
        let text = response
            .pointer("/result/content/0/text")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("list_allowed_directories failed: {response}"));
        let rest = text
            .strip_prefix("Allowed directories:")
            .unwrap_or_else(|| panic!("unexpected tool text {text:?}"));
        rest.lines()
            .filter(|l| !l.trim().is_empty())
            .map(PathBuf::from)
            .collect()
    }

    /// Polls `list_allowed_directories` until it shows exactly `expected`: the server applies a
    /// roots answer a few milliseconds after receiving it.
    #[track_caller]
    pub fn wait_for_dirs(&mut self, expected: &[&Path]) {
        let expected: BTreeSet<PathBuf> = expected.iter().map(|p| p.to_path_buf()).collect();
        eventually(
            &format!("the server to show {expected:?}"),
            PATIENCE,
            || {
                let dirs = self.allowed_dirs();
                if dirs == expected {
                    Ok(())
                } else {
                    Err(format!("{dirs:?}\nstderr:\n{}", self.stderr()))
                }
            },
        );
    }

    /// Closes the proxy's stdin, as a host does to end the session.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for the proxy to exit within [`PATIENCE`].
    #[track_caller]
    pub fn wait_exit(&mut self) -> ExitStatus {
        eventually("the proxy to exit", PATIENCE, || {
            match self.child.try_wait().expect("poll the proxy") {
                Some(status) => Ok(status),
                None => Err(format!("still running; stderr:\n{}", self.stderr())),
            }
        })
    }

    /// Everything on stderr once the proxy and its server have closed it.
    pub fn final_stderr(&self) -> String {
        let _ = self.stderr_done.recv_timeout(PATIENCE);
        self.stderr()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // The server sees its stdin close when the proxy dies, and exits on its own.
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub use rootsd_tests::{assert_exit, ctl, stderr_of, stdout_of};

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
    let output = ctl(sb, &["sessions", "--json"]);
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

/// `_meta` of a 2026-07-28 request that declares no capabilities of its own.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "rootsd-tests", "version": "0.0.1"},
    })
}
