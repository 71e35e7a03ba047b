//! When the server starts, and when it is restarted, for a server started with the workspace in
//! its command line, environment or working directory (`rootsctl proxy -- server {roots}`).
//!
//! [`Launcher::step`] runs after every turn of the proxy's loop. It expands the template whenever
//! the list the server is shown moves ([`Relay::served_paths`]), and compares the result with what
//! the running server was started with. Only a difference restarts it, in phases:
//! - draining: the host's lines stay unread (in their pipe, which bounds them) while the requests
//!   in flight finish, for at most [`DRAIN_GRACE`]; those still open then get an error naming the
//!   restart;
//! - stopping: the old server's stdin is closed, then SIGTERM, then SIGKILL, as when the host
//!   leaves; what it still writes is dropped, and its exit ends nothing;
//! - starting: the new server starts and the relay replays the host's set-up to it; the host's
//!   lines are read again once it answered the replayed `initialize`.
//!
//! A server that cannot be started, or ends before it answers `initialize` (at its first start as
//! after a restart), or a `{root}` with no root to name, leaves the session down: the host's
//! requests get an error saying why, and the next change tries again.
//!
//! This is the one place a server is started again: the loop in `mod.rs` hands [`Launcher`] the
//! slot the server runs in after every turn and asks it whether to read the host, and
//! [`super::running`] knows only how one server ends. A restart for another reason belongs here,
//! as another way into the draining phase.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use rootsd_proto::WorkspaceName;
use rootsd_proto::session::Era;
use rootsd_relay::Relay;
use rootsd_relay::template::{Launch, LaunchTemplate, NeedsARoot};

use super::running::Running;

/// How long the host's requests in flight may take to finish before a restart goes ahead
/// without their answers.
pub const DRAIN_GRACE: Duration = Duration::from_secs(3);

/// Where a templated session's server stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No list from the daemon yet; it is waited for until then.
    AwaitingList {
        until: Instant,
    },
    Running,
    /// A restart waits for the requests in flight, until then.
    Draining {
        until: Instant,
    },
    /// A restart waits for the old server to end.
    Stopping,
    /// No server runs; the next change tries again.
    Down,
}

/// The launch template and what became of it.
pub(super) struct Launcher {
    template: LaunchTemplate,
    workspace: WorkspaceName,
    templated: bool,
    phase: Phase,
    /// The expansion of the newest list, with its revision (none when the first list never
    /// came).
    desired: Option<(Option<u64>, Result<Launch, NeedsARoot>)>,
    /// The [`ServedPaths::generation`](rootsd_relay::ServedPaths) expanded last.
    seen: Option<u64>,
    /// The generation a failed start was made from: the next one tries again.
    failed_at: Option<Option<u64>>,
    /// What the server that runs (or is being stopped) was started with.
    running: Option<Launch>,
    started_once: bool,
    /// The server that runs (or last ran) replaced one the host talked to.
    restarted: bool,
}

impl Launcher {
    /// `first_list_until`: how long the daemon's first list is waited for.
    pub fn new(
        template: LaunchTemplate,
        workspace: WorkspaceName,
        first_list_until: Instant,
    ) -> Self {
        let templated = template.uses_workspace();
        Self {
            template,
            workspace,
            templated,
            phase: if templated {
                Phase::AwaitingList {
                    until: first_list_until,
                }
            } else {
                Phase::Running
            },
            desired: None,
            seen: None,
            failed_at: None,
            running: None,
            started_once: false,
            restarted: false,
        }
    }

    pub fn templated(&self) -> bool {
        self.templated
    }

    /// The command as written, for a server that does not take the workspace.
    pub fn plain(&self) -> Launch {
        self.template
            .expand(&[])
            .expect("a template without placeholders needs no root")
    }

    /// Whether the host's lines are read now: not while the first list is awaited, nor during a
    /// restart.
    pub fn reads_host(&self) -> bool {
        matches!(self.phase, Phase::Running | Phase::Down)
    }

    /// Whether the server's end is expected (a restart stops it) rather than the session's.
    pub fn stopping(&self) -> bool {
        self.phase == Phase::Stopping
    }

    pub fn deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::AwaitingList { until } | Phase::Draining { until } => Some(until),
            Phase::Running | Phase::Stopping | Phase::Down => None,
        }
    }

    /// Runs after every turn of the proxy's loop, before [`Self::step`]: a server that ended
    /// before it answered `initialize` (the replayed one after a restart, the host's own at the
    /// first start) failed to start, and the session goes on without it (down, until the next
    /// change): the host's requests, the one in flight included, get an error naming its exit.
    pub fn reap_failed_start(
        &mut self,
        relay: &mut Relay,
        slot: &mut Option<Running>,
        host_open: bool,
    ) {
        if let Some(running) = slot
            && running.ended()
            && !self.stopping()
            && self.templated
            && host_open
            && (relay.replaying() || !Self::answered(relay))
        {
            let tail = running.server.stderr_tail();
            self.failed_to_start(relay, running.exited, &tail);
            *slot = None;
        }
    }

    /// Whether the session's server has answered an `initialize` (or the host speaks the
    /// stateless era, which has none).
    fn answered(relay: &Relay) -> bool {
        relay.negotiated() || relay.state().era == Era::Stateless
    }

    /// The server ended before answering `initialize`: it failed to start.
    fn failed_to_start(&mut self, relay: &mut Relay, status: Option<ExitStatus>, tail: &str) {
        let mut status = status.map_or_else(|| "ended".to_owned(), |s| format!("exited ({s})"));
        if !tail.is_empty() {
            status.push_str(&format!(" (its stderr ended: {tail})"));
        }
        let started = if self.restarted {
            format!("restarted for a change of workspace {}", self.workspace)
        } else {
            format!("started for workspace {}", self.workspace)
        };
        let why = format!(
            "the MCP server, {started}, {status} before answering initialize; it is tried again at the next change"
        );
        relay.abort_in_flight(&format!("rootsctl proxy: {why}"));
        self.down(relay, why);
    }

    /// Moves the session on after a turn of the loop: expands the newest list, and starts,
    /// drains, stops or restarts the server in `slot` as the phase and the expansion say.
    pub fn step(
        &mut self,
        relay: &mut Relay,
        slot: &mut Option<Running>,
        host_open: bool,
        now: Instant,
    ) {
        if !self.templated {
            return;
        }
        if let Some(served) = relay.served_paths()
            && self.seen != Some(served.generation)
        {
            self.seen = Some(served.generation);
            self.desired = Some((Some(served.revision), self.template.expand(served.paths)));
        }
        if !host_open {
            // Nothing starts for a host that left; the server there is stopping already.
            return;
        }
        let current = self
            .desired
            .as_ref()
            .is_some_and(|(_, want)| want.as_ref().ok() == self.running.as_ref());
        match self.phase {
            Phase::AwaitingList { until } => {
                if self.desired.is_none() && now >= until {
                    self.desired = Some((None, self.template.expand(&[])));
                }
                if self.desired.is_some() {
                    self.start(relay, slot, now);
                }
            }
            Phase::Running => match &self.desired {
                Some((Some(revision), _)) if current => relay.launch_current(*revision),
                Some((None, _)) if current => {}
                Some(_) => {
                    self.phase = Phase::Draining {
                        until: now + DRAIN_GRACE,
                    };
                    self.step(relay, slot, host_open, now);
                }
                None => {}
            },
            Phase::Draining { until } => {
                if current {
                    // The change was undone before the server was stopped.
                    self.phase = Phase::Running;
                } else if relay.in_flight() == 0 || now >= until {
                    relay.abort_in_flight(&format!(
                        "rootsctl proxy restarted the MCP server before it answered, because a change of workspace {} changed its command line; send the request again",
                        self.workspace
                    ));
                    if let Some(running) = slot {
                        running.retiring = true;
                        running.stop(now);
                    }
                    self.phase = Phase::Stopping;
                    self.step(relay, slot, host_open, now);
                }
            }
            Phase::Stopping => {
                if slot.as_ref().is_none_or(Running::ended) {
                    *slot = None;
                    self.running = None;
                    self.start(relay, slot, now);
                }
            }
            Phase::Down => {
                if self.failed_at != Some(self.seen) {
                    self.start(relay, slot, now);
                }
            }
        }
    }

    /// Starts the server the newest list expands to, or leaves the session down saying why.
    fn start(&mut self, relay: &mut Relay, slot: &mut Option<Running>, now: Instant) {
        let Some((revision, want)) = self.desired.clone() else {
            return;
        };
        let ws = &self.workspace;
        let launch = match want {
            Ok(launch) => launch,
            Err(NeedsARoot) => {
                let why = if revision.is_some() {
                    format!(
                        "workspace {ws} has no root, and the MCP server is started with one ({{root}}): run `rootsctl add -w {ws} PATH`, and it starts"
                    )
                } else {
                    format!(
                        "rootsctl proxy has not received workspace {ws}'s roots from rootsd (see `rootsctl doctor`), and the MCP server is started with one ({{root}}); it starts once they arrive"
                    )
                };
                return self.down(relay, why);
            }
        };
        match Running::start(&launch) {
            Ok(running) => {
                *slot = Some(running);
                relay.server_started(revision.unwrap_or(0), self.started_once, now);
                self.restarted = self.started_once;
                self.running = Some(launch);
                self.started_once = true;
                self.failed_at = None;
                self.phase = Phase::Running;
            }
            Err(error) => {
                let dir = launch
                    .cwd
                    .as_ref()
                    .map(|d| format!(" in {d:?}"))
                    .unwrap_or_default();
                self.down(
                    relay,
                    format!("{error}{dir}; it is tried again at the next change of workspace {ws}"),
                );
            }
        }
    }

    fn down(&mut self, relay: &mut Relay, why: String) {
        eprintln!("rootsctl proxy: {why}");
        relay.server_down(why);
        self.running = None;
        self.failed_at = Some(self.seen);
        self.phase = Phase::Down;
    }
}
