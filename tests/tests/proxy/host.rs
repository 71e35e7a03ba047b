//! The host's end of `rootsctl proxy`: a test writes MCP lines to the proxy's stdin and reads
//! what it writes to stdout, as an MCP host does, and sees its stderr.

use std::collections::{BTreeSet, VecDeque};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rootsd_tests::{PATIENCE, Sandbox, eventually};
use serde_json::{Value, json};

use crate::messages::{HANDSHAKE_VERSION, is_method, is_response_to, show};

/// How many lines the host's reader takes from the proxy ahead of the test: enough that no test
/// waits on it, few enough that a host that stops reading stops soon.
const LINES_AHEAD: usize = 16;

/// The host's side of one `rootsctl proxy`: writes MCP lines to its stdin, reads its stdout.
pub struct Proxy {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    /// Held while the host does not read the proxy's stdout at all; dropping it starts the
    /// reader.
    paused: Option<mpsc::Sender<()>>,
    stderr: Arc<Mutex<String>>,
    stderr_done: Receiver<()>,
    /// Messages read but not yet taken by [`Proxy::response`] or [`Proxy::next_message`], each
    /// with its line as received.
    unread: VecDeque<(Value, String)>,
    /// Every message the host received, in order.
    pub received: Vec<Value>,
    /// Every line the host received, byte for byte, in order (`received`, unparsed).
    pub received_raw: Vec<String>,
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
    pub fn spawn_command(cmd: Command) -> Self {
        let mut proxy = Self::spawn_paused(cmd);
        proxy.resume_reading();
        proxy
    }

    /// Like [`Proxy::spawn_command`], but the host reads nothing from the proxy's stdout until
    /// [`Proxy::resume_reading`]: a host that does not keep up.
    pub fn spawn_paused(mut cmd: Command) -> Self {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn rootsctl proxy");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let (paused, start) = mpsc::channel::<()>();
        let (sender, lines) = mpsc::sync_channel(LINES_AHEAD);
        std::thread::spawn(move || {
            // Returns once the sender is dropped: reading resumed, or the Proxy is gone.
            let _ = start.recv();
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                if !matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                    break;
                }
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
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
            let mut line = Vec::new();
            while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&line));
                line.clear();
            }
            let _ = done.send(());
        });
        Self {
            child,
            stdin,
            lines,
            paused: Some(paused),
            stderr,
            stderr_done,
            unread: VecDeque::new(),
            received: Vec::new(),
            received_raw: Vec::new(),
            next_id: 1,
        }
    }

    /// The host starts reading the proxy's stdout.
    pub fn resume_reading(&mut self) {
        self.paused = None;
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
        self.send_bytes(text.as_bytes());
    }

    /// Writes `bytes` and a newline, as they are (they need not be UTF-8).
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is still open");
        let mut line = bytes.to_vec();
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

    /// The next line from the proxy, waiting until `deadline`.
    fn recv_line(&mut self, deadline: Instant, what: &str) -> Vec<u8> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => line,
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

    /// Reads one more line from the proxy into `unread`, waiting until `deadline`.
    fn read_one(&mut self, deadline: Instant, what: &str) {
        let bytes = self.recv_line(deadline, what);
        let line = String::from_utf8(bytes).unwrap_or_else(|e| {
            panic!(
                "the proxy wrote a line that is not UTF-8: {:?}",
                String::from_utf8_lossy(e.as_bytes())
            )
        });
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the proxy wrote a non-JSON line {line:?}: {e}"));
        self.received.push(message.clone());
        self.received_raw.push(line.clone());
        self.unread.push_back((message, line));
    }

    /// The next line from the proxy as it came, neither parsed nor kept: for output too large to
    /// keep, read after everything else was taken.
    #[track_caller]
    pub fn next_raw_line(&mut self) -> Vec<u8> {
        assert!(self.unread.is_empty(), "messages were left unread");
        self.recv_line(Instant::now() + PATIENCE, "line")
    }

    /// The response to `id`, with its line as received; other messages stay unread.
    #[track_caller]
    pub fn response_with_line(&mut self, id: &Value) -> (Value, String) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(index) = self.unread.iter().position(|(m, _)| is_response_to(m, id)) {
                return self.unread.remove(index).expect("index is in range");
            }
            self.read_one(deadline, &format!("response to {id}"));
        }
    }

    /// The response to `id`; other messages stay unread.
    #[track_caller]
    pub fn response(&mut self, id: &Value) -> Value {
        self.response_with_line(id).0
    }

    /// The next message not yet taken, with its line as received.
    #[track_caller]
    pub fn next_message_with_line(&mut self) -> (Value, String) {
        if let Some(taken) = self.unread.pop_front() {
            return taken;
        }
        self.read_one(Instant::now() + PATIENCE, "message");
        self.unread.pop_front().expect("one was just read")
    }

    /// The next message not yet taken.
    #[track_caller]
    pub fn next_message(&mut self) -> Value {
        self.next_message_with_line().0
    }

    /// The next request the proxy sends the host for `method` (its own `roots/list`, say); other
    /// messages stay unread.
    #[track_caller]
    pub fn request_from_proxy(&mut self, method: &str) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(index) = self
                .unread
                .iter()
                .position(|(m, _)| is_method(m, method) && m.get("id").is_some())
            {
                return self.unread.remove(index).expect("index is in range").0;
            }
            self.read_one(deadline, &format!("a {method} request"));
        }
    }

    /// Answers the proxy's next `roots/list` with `roots`, as a host that has roots of its own
    /// does.
    #[track_caller]
    pub fn answer_roots(&mut self, roots: Value) {
        let request = self.request_from_proxy("roots/list");
        self.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": roots}}));
    }

    /// The handshake of a host that declares roots of its own (with `listChanged`), through
    /// `notifications/initialized`.
    #[track_caller]
    pub fn initialize_with_roots(&mut self) {
        let id = self.send_initialize(json!({"roots": {"listChanged": true}}));
        let response = self.response(&id);
        self.finish_initialize(&response);
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

    /// The text a tool call answered with, or the error it gave (a tool error's text, or the
    /// whole response when it has no text).
    pub fn tool_text(&mut self, name: &str, arguments: Value) -> Result<String, String> {
        let response = self.call_tool(name, arguments);
        let text = response
            .pointer("/result/content/0/text")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match (text, response.pointer("/result/isError")) {
            (Some(text), Some(Value::Bool(true))) => Err(text),
            (Some(text), _) => Ok(text),
            (None, _) => Err(response.to_string()),
        }
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
