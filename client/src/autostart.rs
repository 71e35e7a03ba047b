//! Starting rootsd on demand, as gpg-agent and sccache do: when nothing answers on the socket,
//! spawn the daemon in the background, wait until it answers, and carry on.
//!
//! Many rootsctl processes may race to start it. That is safe: rootsd holds one lock per state
//! directory, so every extra daemon exits at once, and every racer waits until the daemon that
//! won answers, at the socket it recorded in the state directory ([`crate::locate`]).

use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rootsd_proto::paths::Environment;

use crate::client::{Client, ClientError};
use crate::config::{ConfigError, UserConfig};
use crate::locate::{self, Source};

/// How long to wait for a freshly started daemon to answer.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how to reach the daemon.
#[derive(Clone, Debug)]
pub struct Target {
    pub socket: PathBuf,
    /// Why that socket ([`crate::locate`]).
    pub source: Source,
    /// The state directory of this user's daemon, when one can be named: where a running daemon
    /// records its socket, and where an autostarted one keeps its store.
    pub state_dir: Option<PathBuf>,
    /// `state_dir` came from the pointer in `~/.local/state/rootsd`: an autostarted daemon is
    /// given it, since it would not compute it from this environment.
    pub pointed: bool,
    pub autostart: bool,
    /// The user's configuration file, as read.
    pub config: UserConfig,
    /// Names the caller in the daemon's logs.
    pub client_name: String,
    /// How long to wait for the daemon to accept, and then for each answer.
    pub timeout: Duration,
}

impl Target {
    /// Where this process's environment and the user's configuration file lead.
    pub fn new(
        socket: Option<PathBuf>,
        no_autostart: bool,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        let env = Environment::capture(rustix::process::getuid().as_raw());
        let config = UserConfig::load(&env)?;
        Ok(Self::within(&env, config, socket, no_autostart, timeout))
    }

    /// Where `env` and `config` lead: [`Target::new`] without reading anything but the record,
    /// for `doctor` to ask what another environment would get.
    pub fn within(
        env: &Environment,
        config: UserConfig,
        socket: Option<PathBuf>,
        no_autostart: bool,
        timeout: Duration,
    ) -> Self {
        let located = locate::locate(env, socket, &config);
        Self {
            socket: located.socket,
            source: located.source,
            state_dir: located.state_dir,
            pointed: located.pointed,
            autostart: !no_autostart && config.allows_autostart(),
            config,
            client_name: format!("rootsctl {}", env!("CARGO_PKG_VERSION")),
            timeout,
        }
    }

    /// Why autostart is off, in words, for messages.
    pub fn autostart_off_because(&self) -> String {
        match (
            &self.config.file,
            self.config.autostart,
            &self.config.socket,
        ) {
            (Some(file), Some(false), _) => format!("{} says `autostart = no`", file.display()),
            (Some(file), None, Some(_)) => format!(
                "{} names the socket of a daemon started elsewhere; add `autostart = yes` there to let rootsctl start it",
                file.display()
            ),
            _ => "--no-autostart or ROOTSD_NO_AUTOSTART".to_owned(),
        }
    }

    /// Connects, starting the daemon first if it is not running and autostart is on.
    pub async fn connect(&self) -> Result<Client, ClientError> {
        match Client::connect(&self.socket, &self.client_name, self.timeout).await {
            Err(err) if err.is_absent() && self.autostart => self.start_and_connect().await,
            Err(ClientError::NotRunning { socket, .. }) => Err(ClientError::NotRunning {
                socket,
                hint: format!(
                    ", and autostart is off ({}): start it with `rootsd &`, or `systemctl --user start rootsd.socket` where the units are installed",
                    self.autostart_off_because()
                ),
            }),
            other => other,
        }
    }

    /// The socket a daemon of this user has recorded since this target was made, if it differs
    /// from the one in use: another rootsctl may have started one meanwhile.
    fn recorded_elsewhere(&self) -> Option<PathBuf> {
        if matches!(self.source, Source::Explicit | Source::Configured { .. }) {
            return None;
        }
        let state_dir = self.state_dir.as_deref()?;
        locate::recorded(state_dir)
            .map(|found| found.socket)
            .filter(|socket| *socket != self.socket)
    }

    async fn start_and_connect(&self) -> Result<Client, ClientError> {
        // A daemon that holds the state directory but does not answer yet is starting: wait for
        // it rather than start another that would only find the lock taken.
        let starting = self
            .state_dir
            .as_deref()
            .and_then(locate::live_record)
            .is_some();
        let (mut child, log_from) = if starting {
            (None, 0)
        } else {
            let (child, log_from) = spawn_daemon(
                &self.socket,
                self.pointed.then_some(()).and(self.state_dir.as_deref()),
                &self.log_path(),
            )?;
            (Some(child), log_from)
        };
        let started = Instant::now();
        let mut delay = Duration::from_millis(5);
        // Polls in a row that found the running daemon's socket file gone: two, so that a
        // daemon caught between removing its socket and exiting is not taken for one.
        let mut unreachable_polls = 0;
        loop {
            let socket = self
                .recorded_elsewhere()
                .unwrap_or_else(|| self.socket.clone());
            match Client::connect(&socket, &self.client_name, self.timeout).await {
                Ok(client) => {
                    if let Some(child) = child {
                        reap_in_background(child);
                    }
                    return Ok(client);
                }
                Err(err) if !err.is_absent() => return Err(err),
                Err(_) => {}
            }
            // A daemon that exited may have lost a start-up race to another one, which is fine;
            // keep waiting for the winner until the deadline. But with nobody holding the state
            // directory it failed, and with a daemon holding it whose socket is gone, nothing
            // will answer: say so now, with the reason.
            let exited = child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            let holder = self.state_dir.as_deref().and_then(locate::live_record);
            let log = self.log_path();
            let reason = || exited.map(|status| exit_reason(status, &log, log_from));
            match holder.as_ref().and_then(unreachable) {
                Some(problem) => {
                    unreachable_polls += 1;
                    if unreachable_polls >= 2 {
                        let ours = reason()
                            .map(|r| format!("; the rootsd started for it {r}"))
                            .unwrap_or_default();
                        return Err(ClientError::Autostart(format!("{problem}{ours}")));
                    }
                }
                None => unreachable_polls = 0,
            }
            if holder.is_none()
                && let Some(reason) = reason()
            {
                return Err(ClientError::Autostart(format!(
                    "started rootsd for {}, but it {reason}; its log is {}",
                    self.socket.display(),
                    log.display()
                )));
            }
            if started.elapsed() > START_TIMEOUT {
                if let Some(child) = child.as_mut() {
                    let _ = child.kill();
                }
                let status = exited.map_or("still starting".to_owned(), |s| s.to_string());
                return Err(ClientError::Autostart(format!(
                    "started rootsd for {} but it did not answer within {}s ({status}); see its log at {}",
                    self.socket.display(),
                    START_TIMEOUT.as_secs(),
                    self.log_path().display()
                )));
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(100));
        }
    }
}

impl Target {
    /// The daemon's log when rootsctl starts it: `<state dir>/rootsd.log`.
    pub fn log_path(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join("rootsd.log")
    }
}

/// Why nobody can reach the daemon `holder` that holds the state directory, if its recorded
/// socket file is gone (removed while it ran).
fn unreachable(holder: &rootsd_proto::rendezvous::Record) -> Option<String> {
    let socket = holder.socket.as_ref()?;
    if fs::symlink_metadata(socket).is_ok() {
        return None;
    }
    Some(format!(
        "rootsd (pid {pid}) already runs for this state directory, but its socket {} is gone, so nothing can reach it: `kill -HUP {pid}` makes it bind the socket anew (or stop it, and rootsctl starts a new one)",
        socket.display(),
        pid = holder.pid
    ))
}

/// How the daemon rootsctl started ended: its exit status, and the last error it wrote to its
/// log `log` (from byte `log_from`, where its own lines begin).
fn exit_reason(status: std::process::ExitStatus, log: &Path, log_from: u64) -> String {
    use std::io::{Read as _, Seek as _};
    let mut said = String::new();
    if let Ok(mut log) = fs::File::open(log)
        && log.seek(std::io::SeekFrom::Start(log_from)).is_ok()
    {
        // Its last words are short; a bounded read keeps a huge log from costing anything.
        let _ = log.take(64 * 1024).read_to_string(&mut said);
    }
    let last = said
        .lines()
        .rev()
        .find(|line| line.starts_with("rootsd: error:"))
        .or_else(|| said.lines().rev().find(|line| !line.trim().is_empty()));
    match last {
        Some(line) => format!(
            "exited ({status}): {}",
            rootsd_proto::text::escape_controls(line.trim_start_matches("rootsd: error: "))
        ),
        None => format!("exited ({status}) without saying why"),
    }
}

/// Finds the rootsd binary: `ROOTSD_BIN`, else next to this rootsctl, else on `PATH`.
pub fn daemon_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("ROOTSD_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("rootsd")))
        .filter(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from("rootsd"))
}

/// Starts rootsd at `socket`, with `state_dir` when this environment would not lead it there,
/// its stderr appended to `log`; also returns where in the log its lines begin.
fn spawn_daemon(
    socket: &Path,
    state_dir: Option<&Path>,
    log: &Path,
) -> Result<(std::process::Child, u64), ClientError> {
    if let Some(dir) = log.parent() {
        let _ = fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    let stderr = fs::OpenOptions::new()
        .create(true)
        .append(true)
        // The log names the user's directories: nobody else reads it.
        .mode(0o600)
        .open(log)
        .ok();
    let log_from = stderr
        .as_ref()
        .and_then(|file| file.metadata().ok())
        .map_or(0, |meta| meta.len());
    let stderr = stderr.map_or_else(Stdio::null, Stdio::from);
    let binary = daemon_binary();
    let mut command = Command::new(&binary);
    command.arg("--socket").arg(socket);
    if let Some(state_dir) = state_dir {
        command.arg("--state-dir").arg(state_dir);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        // Its own process group, so that Ctrl-C in the terminal that ran rootsctl does not
        // reach the daemon.
        .process_group(0)
        .spawn()
        .map(|child| (child, log_from))
        .map_err(|e| {
            ClientError::Autostart(format!(
                "rootsd is not running at {} and starting {} failed: {e}; install rootsd on PATH or set ROOTSD_BIN",
                socket.display(),
                binary.display()
            ))
        })
}

/// Waits for the daemon in a thread so it never lingers as a zombie of a long-lived rootsctl
/// (such as a proxy).
fn reap_in_background(mut child: std::process::Child) {
    std::thread::spawn(move || {
        let _ = child.wait();
    });
}
