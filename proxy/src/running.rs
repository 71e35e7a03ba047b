//! One running server process with its pipes, and how it ends.
//!
//! MCP's stdio rules decide the end: the server's stdin is closed, and a server that lingers gets
//! SIGTERM after [`EXIT_GRACE`] and SIGKILL after [`TERM_GRACE`] more. The proxy's own SIGTERM or
//! SIGINT is passed on and escalates to SIGKILL after the same grace. A server counts as ended
//! once it exited and its stdout closed, or once a process it started has held that stdout for
//! [`OUTPUT_GRACE`] after its exit.
//!
//! The same steps end a server for good (the host left, the proxy was told to end) and for a
//! restart ([`super::launch`]); only what its end means differs, which [`Running::retiring`]
//! records.

use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rootsd_relay::template::Launch;
use signal_hook::consts::signal::{SIGHUP, SIGTERM};

use super::server::{Server, ServerStdin, ServerStdout};
use super::stdio::{LineReader, Outbound};
use crate::errors::SpawnError;

/// After the server's stdin closes, how long it gets to exit on its own before SIGTERM.
/// Servers started so far by this proxy, for [`Running::number`].
static STARTED: AtomicU64 = AtomicU64::new(0);

const EXIT_GRACE: Duration = Duration::from_secs(2);
/// After SIGTERM, how long before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(3);
/// After the server exits, how long its stdout may stay open (held by a process it started)
/// before the proxy stops waiting for the rest of its output.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// The next step of ending a server that does not end on its own.
#[derive(Clone, Copy, Debug)]
enum Escalation {
    Term,
    Kill,
}

/// One server process and its pipes.
pub(super) struct Running {
    pub server: Server,
    pub to_server: Outbound<ServerStdin>,
    pub lines: LineReader<ServerStdout>,
    /// Its stdout is open.
    pub open: bool,
    pub exited: Option<ExitStatus>,
    escalation: Option<(Instant, Escalation)>,
    output_deadline: Option<Instant>,
    /// It is being stopped for a restart: what it writes is dropped, and its end ends nothing.
    pub retiring: bool,
    /// Which server of the session this is, counting from 1: the loop's own wait registers a
    /// new one's descriptors by it (a pid may come again).
    pub number: u64,
}

impl Running {
    pub fn start(launch: &Launch) -> Result<Self, SpawnError> {
        let mut server = Server::spawn(launch)?;
        let (stdin, stdout) = server.pipes().expect("stdin and stdout were piped");
        Ok(Self {
            server,
            to_server: Outbound::new(stdin),
            lines: LineReader::new(stdout),
            open: true,
            exited: None,
            escalation: None,
            output_deadline: None,
            retiring: false,
            number: STARTED.fetch_add(1, Ordering::Relaxed) + 1,
        })
    }

    /// It exited and its stdout is closed (or no longer waited for).
    pub fn ended(&self) -> bool {
        !self.open && self.exited.is_some()
    }

    /// MCP's stdio shutdown: close its stdin, then escalate if it lingers.
    pub fn stop(&mut self, now: Instant) {
        self.to_server.close();
        self.escalation
            .get_or_insert((now + EXIT_GRACE, Escalation::Term));
    }

    /// When the next step of ending it is due, while it has not exited.
    pub fn escalation_at(&self) -> Option<Instant> {
        self.escalation
            .filter(|_| self.exited.is_none())
            .map(|(at, _)| at)
    }

    /// When the proxy stops waiting for the rest of its output, while its stdout is open.
    pub fn output_at(&self) -> Option<Instant> {
        self.output_deadline.filter(|_| self.open)
    }

    /// Its stdout closed (or failed): a server that has not exited is stopped.
    pub fn stdout_closed(&mut self, now: Instant) {
        self.open = false;
        if self.exited.is_none() {
            self.stop(now);
        }
    }

    /// It was reaped: its output is waited for only a little longer.
    pub fn reaped(&mut self, status: ExitStatus, now: Instant) {
        self.exited = Some(status);
        self.output_deadline = Some(now + OUTPUT_GRACE);
    }

    /// Passes on the proxy's own `signal`. Anything but SIGHUP ends it like the host's stdin
    /// closing: if the server ignores it, it is killed after the same grace. Returns whether the
    /// signal ends the session.
    pub fn pass_on(&mut self, signal: i32, now: Instant) -> bool {
        self.server.signal(signal);
        if signal == SIGHUP {
            return false;
        }
        self.escalation = Some((now + TERM_GRACE, Escalation::Kill));
        true
    }

    /// Acts on the deadlines the loop's timer found due (`escalate_at` and `output_at`, as
    /// [`Self::escalation_at`] and [`Self::output_at`] said before the wait).
    pub fn deadlines(
        &mut self,
        escalate_at: Option<Instant>,
        output_at: Option<Instant>,
        now: Instant,
    ) {
        self.escalate(escalate_at, now);
        if output_at.is_some_and(|at| at <= now) {
            eprintln!(
                "rootsctl proxy: the server exited, but a process it started still holds its stdout; not waiting for it"
            );
            self.open = false;
        }
    }

    /// SIGTERM, then SIGKILL, for a server that does not end when its stdin closes.
    fn escalate(&mut self, escalate_at: Option<Instant>, now: Instant) {
        let Some((_, step)) = self
            .escalation
            .filter(|_| escalate_at.is_some_and(|at| at <= now))
        else {
            return;
        };
        match step {
            Escalation::Term => {
                eprintln!(
                    "rootsctl proxy: the server did not exit after its stdin closed; sending SIGTERM"
                );
                self.server.signal(SIGTERM);
                self.escalation = Some((now + TERM_GRACE, Escalation::Kill));
            }
            Escalation::Kill => {
                eprintln!("rootsctl proxy: the server ignored SIGTERM; sending SIGKILL");
                self.server.kill();
                self.escalation = None;
            }
        }
    }
}
