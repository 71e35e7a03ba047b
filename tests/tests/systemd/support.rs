//! Helpers shared by the systemd tests: finding systemd's tools, copying the unit files with
//! `ExecStart=` pointed at the built binary, running `systemd-analyze verify` strictly, and
//! listening on a `NOTIFY_SOCKET` as systemd would.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use rootsd_tests::{Daemon, PATIENCE, Sandbox, answers, bin, eventually, output_within};
use rustix::process::Signal;

/// The path of one of systemd's tools; fails the test, saying how to install it, if missing.
pub fn systemd_tool(name: &str) -> PathBuf {
    for dir in ["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"] {
        let path = Path::new(dir).join(name);
        if path.is_file() {
            return path;
        }
    }
    panic!("{name} is missing: install it with `apt-get install systemd`");
}

/// The repository's `systemd/` directory.
pub fn units_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .join("systemd")
}

/// Copies the socket and service units of `flavour` (`user` or `system`) into `dest`, with
/// `ExecStart=/usr/bin/rootsd` pointed at the built binary, because `systemd-analyze verify`
/// rejects a unit whose executable does not exist. Returns the copies' paths.
pub fn copy_units(flavour: &str, dest: &Path) -> Vec<PathBuf> {
    // verify also checks that ExecReload='s executable exists.
    assert!(
        Path::new("/bin/kill").is_file(),
        "/bin/kill (the units' ExecReload=) is missing: install it with `apt-get install procps`"
    );
    let rootsd = bin("rootsd");
    let mut copies = Vec::new();
    for unit in ["rootsd.socket", "rootsd.service"] {
        let source = units_dir().join(flavour).join(unit);
        let text = fs::read_to_string(&source)
            .unwrap_or_else(|e| panic!("read {}: {e}", source.display()));
        let substituted = text.replace(
            "ExecStart=/usr/bin/rootsd",
            &format!("ExecStart={}", rootsd.display()),
        );
        if unit.ends_with(".service") {
            assert_ne!(
                substituted,
                text,
                "{} has no ExecStart=/usr/bin/rootsd line to point at the built binary",
                source.display()
            );
        }
        let copy = dest.join(unit);
        fs::write(&copy, substituted).expect("write a unit copy");
        copies.push(copy);
    }
    copies
}

/// Runs `systemd-analyze [--user] verify` on `units`. Succeeds only if it exits 0 *and* prints
/// nothing at all: verify reports unknown keys and bad values as warnings and still exits 0.
pub fn verify(units: &[PathBuf], user: bool) -> Result<(), String> {
    // A user manager's paths need XDG_RUNTIME_DIR; a private one keeps the host's out of it.
    let runtime = tempfile::tempdir().expect("create a runtime dir");
    let mut cmd = Command::new(systemd_tool("systemd-analyze"));
    if user {
        cmd.arg("--user");
    }
    // The units' Documentation= names man pages, which only an installed package provides;
    // tests/tests/packaging/ verifies the installed units with this check on.
    cmd.args(["verify", "--man=no"])
        .args(units)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env_remove("SYSTEMD_LOG_LEVEL");
    let output = output_within(&mut cmd);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() && stdout.trim().is_empty() && stderr.trim().is_empty() {
        Ok(())
    } else {
        Err(format!(
            "systemd-analyze{} verify exited with {}\nstdout: {stdout}\nstderr: {stderr}",
            if user { " --user" } else { "" },
            output.status
        ))
    }
}

/// A datagram socket standing in for systemd's notification socket.
pub struct NotifySocket {
    socket: UnixDatagram,
    pub path: PathBuf,
    /// Every datagram received so far, for failure messages.
    seen: Vec<String>,
}

impl NotifySocket {
    pub fn bind(sandbox: &Sandbox) -> Self {
        let path = sandbox.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind the notify socket");
        Self {
            socket,
            path,
            seen: Vec::new(),
        }
    }

    /// Reads datagrams until one has the line `line` (such as `READY=1`) and returns it; fails
    /// the test after [`PATIENCE`], listing what did arrive.
    #[track_caller]
    pub fn wait_for_line(&mut self, line: &str) -> String {
        self.wait_for(line, |datagram| datagram.lines().any(|l| l == line))
    }

    /// Reads datagrams until one satisfies `matches` and returns it.
    #[track_caller]
    pub fn wait_for(&mut self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        let mut buf = vec![0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no notification with {what} within {PATIENCE:?}; received {:?}",
                self.seen
            );
            self.socket
                .set_read_timeout(Some(left))
                .expect("set a read timeout");
            match self.socket.recv(&mut buf) {
                Ok(len) => {
                    let datagram = String::from_utf8_lossy(&buf[..len]).into_owned();
                    self.seen.push(datagram.clone());
                    if matches(&datagram) {
                        return datagram;
                    }
                }
                Err(err)
                    if matches!(
                        err.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(err) => panic!("reading the notify socket failed: {err}"),
            }
        }
    }
}

/// The status line of a notification, if it has one.
pub fn status_of(datagram: &str) -> Option<&str> {
    datagram.lines().find_map(|l| l.strip_prefix("STATUS="))
}

/// `systemd-socket-activate -l SOCKET -E RUST_LOG=info rootsd --socket SOCKET --state-dir STATE
/// [ARGS]`. systemd-socket-activate passes on no environment of its own: everything rootsd
/// should see goes through `-E`.
pub fn socket_activate(sandbox: &Sandbox, args: &[&str]) -> Command {
    let mut cmd = Command::new(systemd_tool("systemd-socket-activate"));
    cmd.arg("-l")
        .arg(&sandbox.socket)
        .args(["-E", "RUST_LOG=info"]);
    cmd.arg(bin("rootsd"))
        .arg("--socket")
        .arg(&sandbox.socket)
        .arg("--state-dir")
        .arg(&sandbox.state)
        .args(args);
    cmd
}

/// A running daemon whose log (stderr) the test reads as it is written.
pub struct Watched {
    pub daemon: Daemon,
    log: mpsc::Receiver<String>,
    /// Every line read so far.
    seen: Vec<String>,
}

impl Watched {
    /// Spawns `cmd` with its stderr collected line by line.
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the daemon");
        let pipe = child.stderr.take().expect("stderr is piped");
        let (sender, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            daemon: Daemon::new(child),
            log,
            seen: Vec::new(),
        }
    }

    /// Waits until `ready` holds, failing if the process exits first or after [`PATIENCE`].
    #[track_caller]
    pub fn poll(&mut self, what: &str, mut ready: impl FnMut() -> bool) {
        eventually(what, PATIENCE, || {
            if ready() {
                return Ok(());
            }
            if let Some(status) = self.daemon.child.try_wait().expect("poll the child") {
                panic!(
                    "exited with {status} while waiting for {what}: {}",
                    self.rest_of_log()
                );
            }
            Err("not yet, and the process still runs")
        });
    }

    /// Waits for a log line containing `needle` and returns it; fails after [`PATIENCE`].
    #[track_caller]
    pub fn wait_for_log(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(err) => panic!(
                    "no log line with {needle:?} ({err}); the log said: {:#?}",
                    self.seen
                ),
            }
        }
    }

    /// Sends SIGTERM, expects exit status 0, and returns the whole log.
    #[track_caller]
    pub fn stop(mut self) -> String {
        self.daemon.signal(Signal::TERM);
        let exit = self.daemon.wait();
        let log = self.rest_of_log();
        assert_eq!(exit.code(), Some(0), "{exit}: {log}");
        log
    }

    /// The whole log; waits for the writer to close its end, so call it once the process is
    /// gone.
    pub fn rest_of_log(&mut self) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => return self.seen.join("\n"),
            }
        }
    }
}

/// Starts `cmd`, which runs a daemon serving the sandbox's socket, and waits until it answers.
pub fn start(sandbox: &Sandbox, cmd: Command) -> Watched {
    let mut watched = Watched::spawn(cmd);
    watched.poll("rootsd to answer", || answers(&sandbox.socket));
    watched
}

/// Starts `cmd` (systemd-socket-activate, or a shell or tracer that execs it) and waits until it
/// listens, which is later than its socket file appears: it binds the socket (creating the file)
/// and calls `listen()` only after, so a connection made in between is refused (ECONNREFUSED).
/// It logs `Listening on PATH as FD.` once `listen()` has returned, so the test waits for that
/// line instead. rootsd has not run yet, since nothing has connected.
pub fn listening(sandbox: &Sandbox, cmd: Command) -> Watched {
    fs::create_dir_all(sandbox.socket.parent().expect("the socket has a directory"))
        .expect("create the socket directory");
    let mut watched = Watched::spawn(cmd);
    watched.wait_for_log(&format!("Listening on {}", sandbox.socket.display()));
    assert!(
        sandbox.socket.exists(),
        "systemd-socket-activate said it listens, but {} does not exist",
        sandbox.socket.display()
    );
    assert!(
        !sandbox.state.exists(),
        "rootsd ran before anything connected to the socket"
    );
    watched
}

/// [`listening`], then connects, which starts rootsd, and waits until it answers.
pub fn activate(sandbox: &Sandbox, cmd: Command) -> Watched {
    let mut watched = listening(sandbox, cmd);
    watched.poll("rootsd to answer on the inherited socket", || {
        answers(&sandbox.socket)
    });
    watched
}

/// `cmd` run under strace with every `listen()` held back by `delay`, which widens the moment
/// between systemd-socket-activate creating its socket file and listening on it from
/// microseconds to `delay`, as a loaded machine may. What strace runs is killed when strace is
/// (`setpriv --pdeathsig KILL`, kept across the activator's exec of rootsd), since strace 6.1
/// has no `--kill-on-exit` and would otherwise leave it running when the test kills strace.
pub fn with_late_listen(cmd: &Command, delay: std::time::Duration) -> Command {
    assert!(
        Command::new("strace")
            .arg("-V")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success()),
        "strace is not installed; this test needs it (apt-get install strace)"
    );
    let mut traced = Command::new("strace");
    traced
        .args(["-qq", "-o", "/dev/null", "-e", "trace=listen", "-e"])
        .arg(format!("inject=listen:delay_enter={}", delay.as_micros()))
        .args(["setpriv", "--pdeathsig", "KILL", "--"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    traced
}

/// Output as text, for assertions.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub use rootsd_tests::assert_exit;
