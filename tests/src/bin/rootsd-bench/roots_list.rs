//! The `roots/list` rows: 64 sessions at once, each server asking `roots/list` back to back.
//! rootsd's side: 64 `rootsctl proxy` processes answering from the list they hold. The limit:
//! the same 64 servers answered directly by a host that keeps the list in memory (one thread of
//! this process per server, answering from a string it already has). A third side, reported in
//! the rows' notes, is the cheapest process in the proxy's place (`limit-roots-proxy`): what any
//! process between a server and its host costs against a thread of the host itself. The sides
//! take turns.

use std::sync::{Arc, Barrier, mpsc};
use std::thread::JoinHandle;

use anyhow::{Result, anyhow};
use rootsd_tests::Sandbox;

use crate::Mode;
use crate::mcp::{Mcp, Via, samples_of};
use crate::procs::{cpu_ns, quantile, thread_cpu_ns};
use crate::report::{Row, Target};

const SESSIONS: usize = 64;
const LIMIT_WHAT: &str = "the same servers answered directly by a host thread holding the list";

pub fn measure(sandbox: &Sandbox, mode: Mode, roots: Arc<String>) -> Result<Vec<Row>> {
    let (turns, per_session) = if mode.quick { (2, 200) } else { (4, 300) };
    eprintln!(
        "  {SESSIONS} sessions × {per_session} roots/list, {turns} turns each for the proxy, for direct hosts and for the cheapest proxy process"
    );
    let mut proxy = Side::of(sessions(sandbox, Via::Proxy, &roots)?)?;
    let mut cheapest = Side::of(sessions(sandbox, Via::LimitRootsProxy, &roots)?)?;
    let hosts = DirectHosts::start(sandbox, roots)?;
    let (mut theirs, mut host_cpu) = (Vec::new(), 0);
    for turn in 0..turns {
        // Each side goes first in turn, so that the machine's moods fall on all three alike.
        for k in 0..3 {
            match (turn + k) % 3 {
                0 => proxy.run(per_session)?,
                1 => {
                    let (samples, cpu) = hosts.run(per_session)?;
                    theirs.extend(samples);
                    host_cpu += cpu;
                }
                _ => cheapest.run(per_session)?,
            }
        }
    }
    // The CPU each side ran per request, all its threads and the kernel's work for them included:
    // what a machine pays for each answer, whoever gives it.
    let requests = (turns * per_session * SESSIONS) as f64;
    let per_request = |ns: u64| ns as f64 / requests / 1e3;
    let cpu = format!(
        "CPU per request: the proxy {:.1} µs, a host thread {:.1} µs, the cheapest process {:.1} µs",
        per_request(proxy.cpu()?),
        per_request(host_cpu),
        per_request(cheapest.cpu()?),
    );
    hosts.stop()?;
    let (mut ours, mut reference) = (proxy.samples, cheapest.samples);

    let samples = ours.len();
    let mut row = |id: &str, what: &str, q: f64| {
        let limit = quantile(&mut theirs, q);
        let cheapest = quantile(&mut reference, q);
        Row {
            id: id.into(),
            what: what.into(),
            unit: "µs",
            rootsd: quantile(&mut ours, q),
            limit: Some(limit),
            limit_what: LIMIT_WHAT.into(),
            samples,
            target: Target::ratio_at_most(1.0),
            note: Some(format!(
                "{SESSIONS} sessions busy at once, {per_session} requests each per turn, {turns} turns; \
                 the cheapest process in the proxy's place (limit-roots-proxy: a poll loop answering \
                 from a string): {cheapest:.0} µs, {:.2} of the limit; {cpu}",
                cheapest / limit
            )),
        }
    };
    Ok(vec![
        row(
            "roots_list_p50",
            "roots/list answered by the proxy, 64 busy sessions, p50",
            0.5,
        ),
        row(
            "roots_list_p99",
            "roots/list answered by the proxy, 64 busy sessions, p99",
            0.99,
        ),
    ])
}

/// A side whose sessions are processes of their own (the proxies, the cheapest process): the
/// sessions, the samples of their turns, and the CPU their processes had run before the first.
struct Side {
    sessions: Vec<Mcp>,
    samples: Vec<f64>,
    cpu_before: u64,
}

impl Side {
    fn of(sessions: Vec<Mcp>) -> Result<Self> {
        let cpu_before = cpu_of(&sessions)?;
        Ok(Self {
            sessions,
            samples: Vec::new(),
            cpu_before,
        })
    }

    /// One turn: every server asks `n` times, all at once (every run starts before any result is
    /// read, so they overlap).
    fn run(&mut self, n: usize) -> Result<()> {
        let ids = self
            .sessions
            .iter_mut()
            .map(|s| s.start("bench/roots-run", serde_json::json!({ "n": n })))
            .collect::<Result<Vec<_>>>()?;
        for (session, id) in self.sessions.iter_mut().zip(ids) {
            let result = session.finish(id)?;
            self.samples.extend(samples_of(&result, n)?);
        }
        Ok(())
    }

    /// The CPU its processes ran since the first turn, in nanoseconds.
    fn cpu(&self) -> Result<u64> {
        Ok(cpu_of(&self.sessions)?.saturating_sub(self.cpu_before))
    }
}

/// The CPU time the processes of `sessions` ran so far, in nanoseconds.
fn cpu_of(sessions: &[Mcp]) -> Result<u64> {
    sessions.iter().map(|s| cpu_ns(s.pid())).sum()
}

/// `SESSIONS` sessions through `via`, initialized and past their first `roots/list`.
fn sessions(sandbox: &Sandbox, via: Via, roots: &Arc<String>) -> Result<Vec<Mcp>> {
    let mut sessions = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        sessions.push(Mcp::spawn(sandbox, via, "bench", roots.clone())?);
    }
    for session in &mut sessions {
        session.initialize()?;
        // The first roots/list may wait for the proxy's registration with rootsd.
        session.server_round_trips("bench/roots-run", 5)?;
    }
    Ok(sessions)
}

/// The limit's side: one thread per server, each the server's whole host.
struct DirectHosts {
    commands: Vec<mpsc::Sender<usize>>,
    /// Each thread's samples of a turn and the CPU it ran for them, in nanoseconds.
    results: mpsc::Receiver<Result<(Vec<f64>, u64)>>,
    threads: Vec<JoinHandle<()>>,
}

impl DirectHosts {
    fn start(sandbox: &Sandbox, roots: Arc<String>) -> Result<Self> {
        let barrier = Arc::new(Barrier::new(SESSIONS));
        let (results_tx, results) = mpsc::channel();
        let mut commands = Vec::with_capacity(SESSIONS);
        let mut threads = Vec::with_capacity(SESSIONS);
        for _ in 0..SESSIONS {
            let mut session = Mcp::spawn(sandbox, Via::Direct, "bench", roots.clone())?;
            session.initialize()?;
            session.server_round_trips("bench/roots-run", 5)?;
            let (tx, rx) = mpsc::channel::<usize>();
            let barrier = barrier.clone();
            let results = results_tx.clone();
            threads.push(std::thread::spawn(move || {
                for n in rx {
                    // Start together, as the proxies' runs do.
                    barrier.wait();
                    let outcome = thread_cpu_ns().and_then(|before| {
                        let samples = session.server_round_trips("bench/roots-run", n)?;
                        Ok((samples, thread_cpu_ns()?.saturating_sub(before)))
                    });
                    if results.send(outcome).is_err() {
                        return;
                    }
                }
            }));
            commands.push(tx);
        }
        Ok(Self {
            commands,
            results,
            threads,
        })
    }

    /// One turn: every server runs `n` requests at once; all their samples, and the CPU the
    /// host threads ran for them, in nanoseconds.
    fn run(&self, n: usize) -> Result<(Vec<f64>, u64)> {
        for command in &self.commands {
            command
                .send(n)
                .map_err(|_| anyhow!("a direct host thread ended early"))?;
        }
        let (mut all, mut cpu) = (Vec::with_capacity(n * SESSIONS), 0);
        for _ in 0..SESSIONS {
            let (samples, ran) = self
                .results
                .recv()
                .map_err(|_| anyhow!("a direct host thread ended early"))??;
            all.extend(samples);
            cpu += ran;
        }
        Ok((all, cpu))
    }

    fn stop(self) -> Result<()> {
        drop(self.commands);
        for thread in self.threads {
            thread
                .join()
                .map_err(|_| anyhow!("a direct host thread panicked"))?;
        }
        Ok(())
    }
}
