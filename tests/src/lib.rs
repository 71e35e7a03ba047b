//! The harness for rootsd's end-to-end tests: real binaries, real sockets, real processes.
//!
//! Tests never sleep to "let the daemon start": [`Sandbox::start_daemon`] returns once the
//! socket answers a hello. Whatever a test must wait for without being told, it waits for with
//! [`eventually`], the one polling loop of the suite, which fails saying what it waited for and
//! what it saw last.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub mod accounts;
pub mod bench_wire;
pub mod limit_relay;
pub mod resources;

pub use resources::{Memory, memory, raise_fd_limit};

/// How long any single wait in a test may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// How long [`eventually`] sleeps between two looks: short, since most waits end within
/// milliseconds, and long enough not to steal a core from the processes under test.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Polls `probe` until it returns `Ok`, and returns that value; fails the test after `patience`,
/// naming `what` it waited for and showing what the probe returned last as `Err`.
///
/// A probe that sees the wait can never succeed (the process it waits for has exited) should
/// panic itself, with what it knows, rather than let the wait run out.
#[track_caller]
pub fn eventually<T, Seen: std::fmt::Display>(
    what: &str,
    patience: Duration,
    probe: impl FnMut() -> Result<T, Seen>,
) -> T {
    match poll_until(patience, probe) {
        Ok(value) => value,
        Err(seen) => panic!("timed out after {patience:?} waiting for {what}; last seen: {seen}"),
    }
}

/// The loop behind [`eventually`]: polls `probe` until it returns `Ok` or `patience` has passed,
/// and then returns what it returned last. Only for a wait that must not fail the test, such as
/// one in `Drop`, where a panic while the test is already failing would abort the whole binary.
pub fn poll_until<T, Seen>(
    patience: Duration,
    mut probe: impl FnMut() -> Result<T, Seen>,
) -> Result<T, Seen> {
    let deadline = Instant::now() + patience;
    loop {
        let seen = match probe() {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            return Err(seen);
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Path of one of the workspace's binaries (`rootsd`, `rootsctl`) beside this test executable.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    // Tests run from target/<profile>/deps/<test>-<hash>, the benchmark from
    // target/<profile>/; either way the binaries are in target/<profile>/.
    let mut dir = exe.parent().expect("an executable lives in a directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("deps lives in target/<profile>");
    }
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the binaries first with `cargo build --workspace --bins` (scripts/test does)",
        path.display()
    );
    path
}

/// The control-protocol version these tests speak, spelt here and not taken from rootsd's own
/// crates, so that the tests see the wire as any client does (docs/PROTOCOL.md). A version change
/// is one edit here, and every test that says hello fails until it is made.
pub const PROTOCOL_VERSION: u32 = 2;

/// A `hello` line of this build's control protocol, with request id `id`, for raw-protocol tests.
pub fn hello_line(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"hello","params":{{"protocol_version":{}}}}}"#,
        crate::PROTOCOL_VERSION
    )
}

/// A private directory holding a socket, a state directory and whatever the test creates.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub state: PathBuf,
}

/// However a test ends, no daemon of its sandbox outlives it: one still holding the state
/// directory's lock (autostarted by a command, or started by the test but dropped after the
/// sandbox) is killed as [`AutostartGuard`] would.
impl Drop for Sandbox {
    fn drop(&mut self) {
        drop(AutostartGuard {
            state: self.state.clone(),
            killed_any: false,
        });
    }
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    /// A new sandbox under `/tmp`, short enough for a Unix socket path.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("rootsd-t")
            .tempdir_in("/tmp")
            .expect("create a temp dir");
        let socket = dir.path().join("run").join("rootsd.sock");
        let state = dir.path().join("state");
        Self { dir, socket, state }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Creates a directory (and its parents) inside the sandbox and returns its real path.
    pub fn mkdir(&self, relative: &str) -> PathBuf {
        let path = self.path().join(relative);
        std::fs::create_dir_all(&path).expect("create a test directory");
        path.canonicalize().expect("canonicalize a test directory")
    }

    /// The `rootsd` command for this sandbox, not started.
    pub fn rootsd(&self) -> Command {
        let mut cmd = Command::new(bin("rootsd"));
        cmd.arg("--socket")
            .arg(&self.socket)
            .arg("--state-dir")
            .arg(&self.state)
            .env("RUST_LOG", "info")
            .env_remove("ROOTSD_SOCKET")
            .env_remove("ROOTSD_STATE_DIR")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID");
        cmd
    }

    /// Starts the daemon and waits until it answers on the socket.
    #[track_caller]
    pub fn start_daemon(&self) -> Daemon {
        self.start_daemon_with(self.rootsd())
    }

    /// Starts `cmd`, which must run a daemon serving this sandbox's socket (a variation of
    /// [`Sandbox::rootsd`]: other flags, environment or a wrapper that `exec`s it), and waits
    /// until it answers on the socket.
    #[track_caller]
    pub fn start_daemon_with(&self, cmd: Command) -> Daemon {
        start_daemon_at(cmd, &self.socket)
    }

    /// The `rootsctl` command for this sandbox, with autostart off unless a test turns it on.
    pub fn rootsctl(&self) -> Command {
        let mut cmd = Command::new(bin("rootsctl"));
        cmd.env("ROOTSD_SOCKET", &self.socket)
            .env("ROOTSD_STATE_DIR", &self.state)
            .env("ROOTSD_BIN", bin("rootsd"))
            .env("ROOTSD_NO_AUTOSTART", "1")
            .current_dir(self.path())
            .stdin(Stdio::null());
        cmd
    }

    /// A home whose configuration file names this socket, autostart on (doctor finds it sound).
    pub fn configured_home(&self) -> PathBuf {
        let home = self.path().join("home");
        let config = home.join(".config").join("rootsd");
        std::fs::create_dir_all(&config).expect("create the configuration directory");
        std::fs::write(
            config.join("rootsd.conf"),
            format!("socket = {}\nautostart = yes\n", self.socket.display()),
        )
        .expect("write the user configuration file");
        home
    }

    /// Runs `rootsctl ARGS` to completion, within the harness's patience.
    pub fn ctl(&self, args: &[&str]) -> Output {
        output_within(self.rootsctl().args(args))
    }

    /// Runs `rootsctl ARGS`, asserts success, and returns stdout.
    pub fn ctl_ok(&self, args: &[&str]) -> String {
        let output = self.ctl(args);
        assert!(
            output.status.success(),
            "rootsctl {args:?} failed with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("rootsctl prints UTF-8")
    }

    /// `rootsctl list --json` for a workspace, parsed.
    pub fn roots(&self, workspace: &str) -> Vec<Value> {
        let text = self.ctl_ok(&["list", "--json", "--workspace", workspace]);
        let value: Value = serde_json::from_str(&text).expect("list --json prints JSON");
        value["roots"].as_array().expect("a roots array").clone()
    }

    /// Opens a raw protocol connection that has already said hello.
    pub fn connect(&self) -> RawClient {
        let mut client = RawClient::connect(&self.socket);
        let hello = client.request(
            "hello",
            json!({"protocol_version": crate::PROTOCOL_VERSION, "client": "test"}),
        );
        assert!(hello.get("result").is_some(), "hello failed: {hello}");
        client
    }
}

/// Starts `cmd`, which must run a daemon serving `socket`, and waits until it answers there: how
/// [`Sandbox::start_daemon_with`] and the packaging tests' installed daemons start.
#[track_caller]
pub fn start_daemon_at(mut cmd: Command, socket: &Path) -> Daemon {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rootsd");
    let mut daemon = Daemon::new(child);
    eventually("rootsd to answer", PATIENCE, || {
        if let Some(status) = daemon.child.try_wait().expect("poll rootsd") {
            panic!(
                "rootsd exited with {status} before answering: {}",
                daemon.stderr()
            );
        }
        if answers(socket) {
            Ok(())
        } else {
            Err(format!(
                "rootsd runs, but {} does not answer",
                socket.display()
            ))
        }
    });
    daemon
}

/// Runs `cmd` to completion with stdin empty, capturing stdout and stderr; fails the test (after
/// killing it) if it runs longer than [`PATIENCE`]. For commands that should exit on their own but
/// might, through a bug, keep running.
#[track_caller]
pub fn output_within(cmd: &mut Command) -> Output {
    run_within(cmd, PATIENCE)
}

/// [`output_within`] with a deadline of `limit` instead: for the slow commands of packaging (a
/// build, dpkg) that may take minutes on a loaded machine.
#[track_caller]
pub fn run_within(cmd: &mut Command, limit: Duration) -> Output {
    use std::io::Read;
    let mut child = Reaped(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the command"),
    );
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let stdout = drain(child.0.stdout.take());
    let stderr = drain(child.0.stderr.take());
    let status = eventually(&format!("{cmd:?} to exit"), limit, || {
        child
            .0
            .try_wait()
            .expect("poll the command")
            .ok_or("still running")
    });
    Output {
        status,
        stdout: stdout.join().expect("read stdout"),
        stderr: stderr.join().expect("read stderr"),
    }
}

pub use accounts::setpriv;

/// `cmd` as a process that permission bits stop, for tests of what a user cannot read.
///
/// The suite may run as root (CI does), whom permission bits stop only without the capabilities
/// that override them. So as root, `cmd` (its program, arguments, environment changes and
/// directory) runs through [`setpriv`] with every capability dropped, for it and everything it
/// starts, while staying uid 0, so that the daemon still admits it. Otherwise it is returned as
/// it is. Set its stdio afterwards: that cannot be copied.
pub fn without_privilege(cmd: Command) -> Command {
    if !rustix::process::geteuid().is_root() {
        return cmd;
    }
    let mut wrapped = Command::new(setpriv());
    wrapped
        .args(["--bounding-set=-all", "--inh-caps=-all", "--"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (name, value) in cmd.get_envs() {
        match value {
            Some(value) => wrapped.env(name, value),
            None => wrapped.env_remove(name),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped
}

/// Everything a process wrote to stdout, as text.
pub fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Everything a process wrote to stderr, as text.
pub fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts that a process exited with `code`, showing its output otherwise.
#[track_caller]
pub fn assert_exit(output: &Output, code: i32, what: &str) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "{what}: expected exit status {code}, got {}\nstdout: {}\nstderr: {}",
        output.status,
        stdout_of(output),
        stderr_of(output)
    );
}

/// Whether something accepts connections at `socket` and answers a hello.
pub fn answers(socket: &Path) -> bool {
    let Ok(stream) = UnixStream::connect(socket) else {
        return false;
    };
    let mut client = RawClient::from_stream(stream);
    client.send_line(&format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"hello","params":{{"protocol_version":{}}}}}"#,
        crate::PROTOCOL_VERSION
    ));
    client.read_line().is_some_and(|l| l.contains("\"result\""))
}

/// A stand-in for a rootsd of another release on `socket` (in a new 0700 directory, mode 0600,
/// as rootsd makes them): it accepts one connection, reads the hello, and answers with
/// `answer(hello)`, a whole JSON-RPC response. Join the handle to know it was asked.
pub fn fake_daemon(
    socket: &Path,
    answer: impl FnOnce(&Value) -> Value + Send + 'static,
) -> std::thread::JoinHandle<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = socket.parent().expect("the socket is in a directory");
    std::fs::create_dir_all(dir).expect("create the socket directory");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .expect("make the socket directory private");
    let listener = std::os::unix::net::UnixListener::bind(socket).expect("bind the fake daemon");
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .expect("make the socket 0600");
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("rootsctl connects");
        let mut client = RawClient::from_stream(stream);
        let hello = client.read_json();
        assert_eq!(hello["method"], json!("hello"), "{hello}");
        client.send_line(&answer(&hello).to_string());
    })
}

/// A running daemon, killed when dropped.
pub struct Daemon {
    pub child: Child,
    /// Collects stderr as it is written: a pipe nobody reads fills up and stalls the daemon's
    /// logging, and with it the daemon.
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Daemon {
    /// Wraps a spawned daemon, draining its stderr if it was piped.
    pub fn new(mut child: Child) -> Self {
        let stderr = child.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                use std::io::Read;
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                text
            })
        });
        Self { child, stderr }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.pid()).expect("a real pid");
        rustix::process::kill_process(pid, signal).expect("signal rootsd");
    }

    /// Waits for the daemon to exit and returns its status.
    #[track_caller]
    pub fn wait(&mut self) -> std::process::ExitStatus {
        eventually("rootsd to exit", PATIENCE, || {
            self.child
                .try_wait()
                .expect("poll rootsd")
                .ok_or("still running")
        })
    }

    /// Everything the daemon wrote to stderr; only after it exited.
    pub fn stderr(&mut self) -> String {
        self.stderr
            .take()
            .map(|reader| reader.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child process that is killed and reaped when it goes out of scope, however the test ends.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A line-level client of the control protocol, for tests that send what rootsctl never would.
pub struct RawClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
}

impl RawClient {
    pub fn connect(socket: &Path) -> Self {
        Self::from_stream(UnixStream::connect(socket).expect("connect to rootsd"))
    }

    pub fn from_stream(stream: UnixStream) -> Self {
        stream
            .set_read_timeout(Some(PATIENCE))
            .expect("set a read timeout");
        Self {
            reader: BufReader::new(stream.try_clone().expect("clone the stream")),
            writer: stream,
            next_id: 1,
        }
    }

    /// Writes `bytes` and a newline; errors (a closed connection) are ignored.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let _ = self.writer.write_all(bytes);
        let _ = self.writer.write_all(b"\n");
        let _ = self.writer.flush();
    }

    pub fn send_line(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    /// The next line, or `None` once the daemon closed the connection.
    pub fn read_line(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    }

    /// The next line, parsed.
    pub fn read_json(&mut self) -> Value {
        let line = self.read_line().expect("the daemon answered");
        serde_json::from_str(&line).expect("the daemon sent JSON")
    }

    /// Sends a request and returns its response, skipping pushed notifications.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&line.to_string());
        loop {
            let message = self.read_json();
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
        }
    }
}

/// Kills, when dropped, whatever rootsd an autostarting rootsctl left running for a state
/// directory.
///
/// Declare it after the [`Sandbox`] so that it runs first. It reads the daemon's pid from the
/// record in the state directory's lock file (see `rootsd_proto::rendezvous`), and only while
/// the lock is held, so that it never signals a recycled pid.
pub struct AutostartGuard {
    state: PathBuf,
    killed_any: bool,
}

/// After killing an autostarted daemon, how long [`AutostartGuard`] watches for another that
/// was still starting.
const STRAGGLER_WATCH: Duration = Duration::from_millis(300);

impl AutostartGuard {
    /// Guards the sandbox's own state directory.
    pub fn new(sandbox: &Sandbox) -> Self {
        Self::for_state_dir(sandbox.state.clone())
    }

    /// Guards any state directory (one a rootsctl computed from `HOME`, say).
    pub fn for_state_dir(state: PathBuf) -> Self {
        Self {
            state,
            killed_any: false,
        }
    }
}

impl Drop for AutostartGuard {
    fn drop(&mut self) {
        // A daemon that an autostart spawned may still be starting when the one holding the
        // lock is killed, and take the lock after it: so once one was killed, the lock is
        // watched a little longer and every later holder is killed too.
        let mut quiet_since: Option<Instant> = None;
        while quiet_since.is_none_or(|since| since.elapsed() < STRAGGLER_WATCH) {
            let Some(pid) = daemon_pid(&self.state) else {
                if quiet_since.is_none() && !self.killed_any {
                    return;
                }
                quiet_since.get_or_insert_with(Instant::now);
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            quiet_since = None;
            self.killed_any = true;
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            // The kernel releases the lock once the daemon is gone. Not `eventually`: a guard
            // that panics while the test is already failing would abort the whole test binary.
            let _ = poll_until(PATIENCE, || {
                if lock_held(&self.state) {
                    Err(())
                } else {
                    Ok(())
                }
            });
        }
    }
}

fn lock_held(state: &Path) -> bool {
    let Ok(file) = std::fs::File::open(state.join("rootsd.lock")) else {
        return false;
    };
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

/// The pid of the rootsd holding `state` (a state directory), read from its lock file's record
/// while the lock is held; `None` when no daemon holds it.
pub fn daemon_pid(state: &Path) -> Option<i32> {
    if !lock_held(state) {
        return None;
    }
    let text = std::fs::read_to_string(state.join("rootsd.lock")).ok()?;
    let record: Value = serde_json::from_str(text.trim()).ok()?;
    record["pid"].as_i64().and_then(|p| i32::try_from(p).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventually_returns_the_first_success() {
        let mut looks = 0;
        let value = eventually("the third look", PATIENCE, || {
            looks += 1;
            if looks == 3 {
                Ok(looks * 10)
            } else {
                Err(looks)
            }
        });
        assert_eq!((value, looks), (30, 3));
    }

    #[test]
    fn eventually_fails_naming_what_it_awaited_and_what_it_saw_last() {
        let mut looks = 0;
        let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            eventually("a miracle", Duration::from_millis(30), || {
                looks += 1;
                Err::<(), _>(format!("look {looks}"))
            })
        }))
        .expect_err("the wait runs out");
        let message = failed
            .downcast_ref::<String>()
            .expect("a formatted panic message");
        assert!(looks > 1, "it looked again before giving up");
        assert_eq!(
            message,
            &format!("timed out after 30ms waiting for a miracle; last seen: look {looks}")
        );
    }
}
