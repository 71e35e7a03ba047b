//! The keeper: a small process between the proxy and its server that ends everything the server
//! started, however the session ends.
//!
//! A server's death signal (`PR_SET_PDEATHSIG`) reaches only the server: what it forks lives on,
//! and a grandchild that daemonises (`setsid` and a double fork) leaves every process group.
//! Nothing can clean up after a process killed with SIGKILL from inside it, so the cleaning is
//! done below the proxy. The keeper makes itself a child subreaper, so that every orphan of the
//! server's tree becomes its child rather than init's; it starts the server in a process group of
//! its own, and ends the whole tree when
//! - the server exits (what it left running gets SIGTERM, then SIGKILL after [`GRACE`]);
//! - the proxy asks ([`KILL_REQUEST`] on the control pipe: SIGKILL at once);
//! - the proxy is gone, however it ended: end-of-file on the control pipe, whose write end only
//!   the proxy holds (close-on-exec), then SIGTERM and SIGKILL as above.
//!
//! The proxy's signals to the keeper (SIGTERM, SIGINT, SIGHUP) are passed on to the server's
//! group. Once no child is left (`waitpid` says `ECHILD`, which for a subreaper means no
//! descendant is left either), it exits as the server did, so that the proxy's handling of a
//! server's exit is unchanged. The proxy never kills the keeper, which would orphan the tree.
//!
//! The keeper is `rootsctl` itself, started again through `/proc/self/exe` with a hidden first
//! argument, rather than a fork of the proxy that goes on without an exec: the proxy has threads,
//! so such a child could make only async-signal-safe calls for its whole life (no allocation, no
//! `/proc` reading through std), and a fork copies the proxy's page tables, which this project
//! measured at 0.25–0.45 ms per start. The keeper costs a restart 1.2–2 ms on this project's
//! machine (an exec and start of `rootsctl`, and one more process to start and reap;
//! docs/BENCHMARKS.md), against a real server's start of a second or more: a keeper that is an
//! ordinary single-threaded program is worth it. `/proc/self/exe` is the running binary even once
//! a newer one replaced it on disk.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io::{self, Read as _};
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};
use signal_hook::consts::signal::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};

use super::process::{self, KILL_REQUEST, Options};

/// The hidden first argument that makes `rootsctl` a keeper. Followed by the server's program
/// path, then its whole argv (its name first).
pub const KEEPER_ARG: &str = "__rootsctl-proxy-keeper";

/// How long what is left of the tree gets between SIGTERM and SIGKILL: the proxy's own grace
/// after SIGTERM (`running::TERM_GRACE`).
pub const GRACE: Duration = Duration::from_secs(3);

/// After SIGKILL, how long the keeper waits for the last of the tree before it gives up and
/// exits (a process stuck in the kernel, on a hung mount, cannot be reaped until it returns).
const KILL_PATIENCE: Duration = Duration::from_secs(10);

/// How much of the server's stderr the keeper keeps, to report to the proxy as it exits: a server
/// that fails to start says why there, and the proxy names it to the host.
pub const STDERR_TAIL: usize = 2048;

/// How often the tree is looked at again while it is being ended: new orphans reparent to the
/// keeper, and a process that forked since the last look is found on the next.
const SCAN_INTERVAL: Duration = Duration::from_millis(20);

/// The keeper's command line for a server: `program` started with `argv` (its name first).
pub fn command_line(program: &Path, argv: &[OsString]) -> (std::path::PathBuf, Vec<OsString>) {
    let mut line = vec![OsString::from("rootsctl"), OsString::from(KEEPER_ARG)];
    line.push(program.as_os_str().to_owned());
    line.extend(argv.iter().cloned());
    (std::path::PathBuf::from("/proc/self/exe"), line)
}

/// How the proxy starts a keeper: with the control pipe, in a group of its own (a signal to the
/// proxy's group, such as a host's SIGKILL of it, must not take the keeper with it), and with no
/// death signal (it must outlive the proxy to clean up after it).
pub fn options() -> Options {
    Options {
        death_signal: false,
        own_group: true,
        control: true,
    }
}

/// Whether `args` (the process's own, its name first) ask for a keeper.
pub fn requested(args: &[OsString]) -> bool {
    args.get(1).is_some_and(|arg| arg == KEEPER_ARG)
}

/// Runs the keeper with `args` (the process's own) and exits as its server did.
pub fn main(args: &[OsString]) -> ! {
    match keep(args) {
        Ok(status) => exit_as(status),
        Err(error) => {
            eprintln!("rootsctl proxy: the server's keeper failed: {error:#}");
            std::process::exit(126)
        }
    }
}

/// What ends the tree, and how far that has got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Serving,
    /// SIGTERM was sent; SIGKILL follows at the deadline.
    Terminating {
        kill_at: Instant,
    },
    /// SIGKILL was sent; the keeper gives up waiting at the deadline.
    Killing {
        give_up_at: Instant,
    },
}

/// The signals the keeper acts on, noted by their handlers and told of by a socket's byte.
struct Signals {
    flags: Vec<(i32, Arc<AtomicBool>)>,
    heard: UnixStream,
}

impl Signals {
    fn register() -> io::Result<Self> {
        let (heard, rung) = UnixStream::pair()?;
        heard.set_nonblocking(true)?;
        rung.set_nonblocking(true)?;
        let mut flags = Vec::new();
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGCHLD] {
            let flag = Arc::new(AtomicBool::new(false));
            signal_hook::flag::register(signal, flag.clone())?;
            signal_hook::low_level::pipe::register(signal, rung.try_clone()?)?;
            flags.push((signal, flag));
        }
        Ok(Self { flags, heard })
    }

    /// The signals that came since the last call (SIGCHLD is not among them: the keeper reaps
    /// on every turn anyway).
    fn taken(&self) -> Vec<i32> {
        let mut sink = [0u8; 64];
        while matches!((&self.heard).read(&mut sink), Ok(n) if n > 0) {}
        self.flags
            .iter()
            .filter(|(signal, flag)| flag.swap(false, Ordering::AcqRel) && *signal != SIGCHLD)
            .map(|(signal, _)| *signal)
            .collect()
    }
}

fn keep(args: &[OsString]) -> anyhow::Result<Option<WaitStatus>> {
    use anyhow::Context as _;
    let (program, argv) = match args.get(2..) {
        Some([program, argv @ ..]) if !argv.is_empty() => (Path::new(program), argv),
        _ => anyhow::bail!("started without a server to keep (this is for rootsctl proxy only)"),
    };
    let control = process::inherited_control().context("no control pipe from the proxy")?;
    let report = process::inherited_report().context("no report pipe from the proxy")?;
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .context("cannot become the subreaper of the server's processes")?;
    // Mirroring a server that crashed means dying of its signal: that leaves no core of the
    // keeper.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    // Before the server starts, so that no SIGCHLD or passed-on signal is lost.
    let signals = Signals::register().context("cannot handle signals")?;
    let (server, stderr) = start_with_stderr(program, argv)?;
    // The server has the pipes now: the keeper holding them would keep the proxy from seeing
    // the server's stdout close.
    let null = std::fs::File::open("/dev/null").context("cannot open /dev/null")?;
    rustix::stdio::dup2_stdin(&null).context("cannot let go of the server's stdin")?;
    rustix::stdio::dup2_stdout(&null).context("cannot let go of the server's stdout")?;
    let mut keeper = Keeper {
        server,
        status: None,
        control: Some(control),
        phase: Phase::Serving,
        termed: HashSet::new(),
        stderr: Some(stderr),
        tail: Vec::new(),
    };
    let status = keeper.run(&signals);
    // Every writer of the server's stderr is gone: what is left in the pipe is its last words.
    keeper.pass_stderr_on();
    let _ = rustix::io::write(&report, &keeper.tail);
    Ok(status)
}

/// Starts the server with a pipe for its stderr, which the keeper passes on to its own (the
/// proxy's) and keeps the tail of; returns the server's pid and the pipe's read end.
fn start_with_stderr(program: &Path, argv: &[OsString]) -> anyhow::Result<(Pid, OwnedFd)> {
    use anyhow::Context as _;
    let own = rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stderr(), 5)
        .context("cannot keep the proxy's stderr")?;
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .context("cannot make the server's stderr pipe")?;
    rustix::stdio::dup2_stderr(&write).context("cannot give the server its stderr")?;
    let started = start(program, argv);
    rustix::stdio::dup2_stderr(&own).context("cannot take the proxy's stderr back")?;
    rustix::fs::fcntl_setfl(&read, rustix::fs::OFlags::NONBLOCK)
        .context("cannot read the server's stderr")?;
    Ok((started?, read))
}

/// Starts the server in a process group of its own, with the keeper's stdio, and with the
/// request to die with the keeper (should the keeper itself be killed).
fn start(program: &Path, argv: &[OsString]) -> anyhow::Result<Pid> {
    let fail = |error: io::Error| anyhow::anyhow!("cannot start {}: {error}", program.display());
    let (pid, process) = process::Command::new(program, argv, &[], None)
        .map_err(fail)?
        .with(Options {
            death_signal: true,
            own_group: true,
            control: false,
        })
        .spawn_inheriting()
        .map_err(fail)?;
    // The keeper reaps by pid, as the parent of every process it ends; the pidfd's drop would
    // kill it.
    std::mem::forget(process);
    Pid::from_raw(pid as i32).ok_or_else(|| anyhow::anyhow!("the server got pid {pid}"))
}

struct Keeper {
    server: Pid,
    status: Option<WaitStatus>,
    control: Option<OwnedFd>,
    phase: Phase,
    /// Processes already sent SIGTERM, which get it once.
    termed: HashSet<i32>,
    /// The server's stderr, until it ends.
    stderr: Option<OwnedFd>,
    /// The last [`STDERR_TAIL`] bytes of it.
    tail: Vec<u8>,
}

impl Keeper {
    /// Keeps the tree until none of it is left; returns how the server ended.
    fn run(&mut self, signals: &Signals) -> Option<WaitStatus> {
        loop {
            if !self.reap() {
                // No child left means no descendant either: an orphan becomes the keeper's
                // child before its parent can be reaped. The server, a child, was reaped.
                return self.status;
            }
            if self.status.is_some() && self.phase == Phase::Serving {
                self.terminate();
            }
            let now = Instant::now();
            match self.phase {
                Phase::Serving => {}
                Phase::Terminating { kill_at } if now >= kill_at => self.kill(),
                Phase::Terminating { .. } => self.signal_tree(Signal::TERM),
                Phase::Killing { give_up_at } if now >= give_up_at => {
                    eprintln!(
                        "rootsctl proxy: processes the server started did not die of SIGKILL within {KILL_PATIENCE:?}; leaving them"
                    );
                    return self.status;
                }
                Phase::Killing { .. } => self.signal_tree(Signal::KILL),
            }
            self.wait(signals);
        }
    }

    /// Reaps every child that exited, noting the server's status; returns whether any child
    /// is left.
    fn reap(&mut self) -> bool {
        loop {
            // Any child: `waitpid(None)` would ask for those of the keeper's group only.
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    if pid == self.server {
                        self.status = Some(status);
                    }
                }
                Ok(None) => return true,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return false,
            }
        }
    }

    /// Waits for a signal, the control pipe, or the next look at the tree.
    fn wait(&mut self, signals: &Signals) {
        let timeout = match self.phase {
            Phase::Serving => None,
            _ => Some(Timespec {
                tv_sec: 0,
                tv_nsec: SCAN_INTERVAL.as_nanos() as i64,
            }),
        };
        let mut fds = vec![PollFd::new(&signals.heard, PollFlags::IN)];
        if let Some(stderr) = &self.stderr {
            fds.push(PollFd::new(stderr, PollFlags::IN));
        }
        if let Some(control) = &self.control {
            fds.push(PollFd::new(control, PollFlags::IN));
        }
        let _ = rustix::event::poll(&mut fds, timeout.as_ref());
        let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        drop(fds);
        let stderr_ready = self.stderr.is_some() && ready.get(1) == Some(&true);
        let control_ready = self.control.is_some() && ready.last() == Some(&true);
        for signal in signals.taken() {
            self.pass_on(signal);
        }
        if stderr_ready {
            self.pass_stderr_on();
        }
        if control_ready {
            self.read_control();
        }
    }

    /// Passes on what the server's stderr holds now, keeping its tail; lets go of the pipe at
    /// its end.
    fn pass_stderr_on(&mut self) {
        let Some(stderr) = &self.stderr else {
            return;
        };
        let mut bytes = [0u8; 16 * 1024];
        loop {
            match rustix::io::read(stderr, &mut bytes) {
                Ok(0) => {
                    self.stderr = None;
                    return;
                }
                Ok(n) => {
                    let read = &bytes[..n];
                    // The proxy's stderr may be a pipe its host reads slowly: a blocked write
                    // blocks the server's next one, as it would have without the keeper.
                    let _ = std::io::Write::write_all(&mut std::io::stderr(), read);
                    self.tail.extend_from_slice(read);
                    let excess = self.tail.len().saturating_sub(STDERR_TAIL);
                    self.tail.drain(..excess);
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return,
            }
        }
    }

    /// A signal for the server (from the proxy, or to the keeper's group) goes to its group,
    /// while it runs.
    fn pass_on(&self, signal: i32) {
        if self.status.is_none()
            && let Some(signal) = Signal::from_named_raw(signal)
        {
            let _ = rustix::process::kill_process_group(self.server, signal);
        }
    }

    fn read_control(&mut self) {
        let Some(control) = &self.control else {
            return;
        };
        let mut bytes = [0u8; 16];
        match rustix::io::read(control, &mut bytes) {
            Ok(0) => {
                // The proxy is gone: nobody reads what the server writes any more.
                self.control = None;
                if self.phase == Phase::Serving {
                    self.terminate();
                }
            }
            Ok(n) if bytes[..n].contains(&KILL_REQUEST) => self.kill(),
            Ok(_) | Err(_) => {}
        }
    }

    /// SIGTERM to the server's group and every descendant, with SIGKILL due after the grace.
    fn terminate(&mut self) {
        self.phase = Phase::Terminating {
            kill_at: Instant::now() + GRACE,
        };
        if self.status.is_none() {
            let _ = rustix::process::kill_process_group(self.server, Signal::TERM);
            self.termed.insert(self.server.as_raw_nonzero().get());
        }
        self.signal_tree(Signal::TERM);
    }

    /// SIGKILL to everything left, now and on every later look.
    fn kill(&mut self) {
        if !matches!(self.phase, Phase::Killing { .. }) {
            self.phase = Phase::Killing {
                give_up_at: Instant::now() + KILL_PATIENCE,
            };
        }
        if self.status.is_none() {
            let _ = rustix::process::kill_process_group(self.server, Signal::KILL);
        }
        self.signal_tree(Signal::KILL);
    }

    /// Sends `signal` to every live descendant (SIGTERM only once to each).
    fn signal_tree(&mut self, signal: Signal) {
        for (pid, parent) in descendants(rustix::process::getpid()) {
            if signal == Signal::TERM && !self.termed.insert(pid) {
                continue;
            }
            send_checked(pid, parent, signal);
        }
    }
}

/// Signals `pid` through a pidfd, once `/proc` confirms it is still the child of `parent`: a pid
/// read from `/proc` may have been reaped and taken by another process since.
fn send_checked(pid: i32, parent: i32, signal: Signal) {
    let Some(id) = Pid::from_raw(pid) else {
        return;
    };
    let Ok(pidfd) = rustix::process::pidfd_open(id, rustix::process::PidfdFlags::empty()) else {
        return;
    };
    if stat_of(pid).is_some_and(|stat| stat.parent == parent) {
        let _ = rustix::process::pidfd_send_signal(pidfd.as_fd(), signal);
    }
}

/// What the keeper reads of a process in `/proc/PID/stat`.
struct Stat {
    parent: i32,
    /// It has exited and waits to be reaped.
    zombie: bool,
}

fn stat_of(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// The state and parent from a `stat` line: they follow the command's name, which is in
/// parentheses and may hold anything, parentheses included.
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let parent = fields.next()?.parse().ok()?;
    Some(Stat {
        parent,
        zombie: matches!(state, "Z" | "X"),
    })
}

/// Every live descendant of `root`, with its parent, from one pass over `/proc`.
fn descendants(root: Pid) -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(stat) = stat_of(pid)
            && !stat.zombie
        {
            children.entry(stat.parent).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![root.as_raw_nonzero().get()];
    while let Some(parent) = queue.pop() {
        for &child in children.get(&parent).map_or(&[][..], Vec::as_slice) {
            found.push((child, parent));
            queue.push(child);
        }
    }
    found
}

/// Exits as the server did: with its code, or of its signal. (Without a status, which only a
/// server that was never reaped could leave, it counts as a failure.)
fn exit_as(status: Option<WaitStatus>) -> ! {
    let Some(status) = status else {
        std::process::exit(1)
    };
    if let Some(code) = status.exit_status() {
        std::process::exit(code);
    }
    if let Some(signal) = status.terminating_signal() {
        let _ = signal_hook::low_level::emulate_default_handler(signal);
        std::process::exit(128 + signal);
    }
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_parent_and_state_whatever_the_name() {
        let stat = parse_stat("42 (a) b) (c) S 7 42 42 0 -1").unwrap();
        assert_eq!(stat.parent, 7);
        assert!(!stat.zombie);
        assert!(parse_stat("43 (x) Z 1 43").unwrap().zombie);
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn the_keeper_is_asked_for_by_its_hidden_argument_only() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(requested(&args(&["rootsctl", KEEPER_ARG, "/bin/sh", "sh"])));
        assert!(!requested(&args(&["rootsctl", "proxy", KEEPER_ARG])));
        let (path, line) = command_line(Path::new("/bin/sh"), &args(&["server", "-c", "x"]));
        assert_eq!(path, Path::new("/proc/self/exe"));
        assert!(requested(&line));
        assert_eq!(&line[2..], &args(&["/bin/sh", "server", "-c", "x"])[..]);
    }
}
