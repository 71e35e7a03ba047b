//! The `roots/list` rows: 64 sessions at once, each server asking `roots/list` back to back.
//! rootsd's side: 64 `rootsctl proxy` processes answering from the list they hold. The limit:
//! the same 64 servers answered directly by a host that keeps the list in memory (one thread of
//! this process per server, answering from a string it already has). The two sides take turns.

use std::sync::{Arc, Barrier, mpsc};
use std::thread::JoinHandle;

use anyhow::{Result, anyhow};
use rootsd_tests::Sandbox;

use crate::Mode;
use crate::mcp::{Mcp, Via, samples_of};
use crate::procs::{quantile, rootsd_first};
use crate::report::{Row, Target};

const SESSIONS: usize = 64;
const LIMIT_WHAT: &str = "the same servers answered directly by a host thread holding the list";

pub fn measure(sandbox: &Sandbox, mode: Mode, roots: Arc<String>) -> Result<Vec<Row>> {
    let (turns, per_session) = if mode.quick { (2, 200) } else { (4, 300) };
    eprintln!(
        "  {SESSIONS} sessions × {per_session} roots/list, {turns} turns each for the proxy and for direct hosts"
    );
    let mut proxies = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        proxies.push(Mcp::spawn(sandbox, Via::Proxy, "bench", roots.clone())?);
    }
    for proxy in &mut proxies {
        proxy.initialize()?;
        // The first roots/list may wait for the proxy's registration with rootsd.
        proxy.server_round_trips("bench/roots-run", 5)?;
    }
    let hosts = DirectHosts::start(sandbox, roots)?;

    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for turn in 0..turns {
        for rootsd in rootsd_first(turn) {
            if rootsd {
                // All 64 runs start before any result is read, so they overlap.
                let ids = proxies
                    .iter_mut()
                    .map(|p| p.start("bench/roots-run", serde_json::json!({"n": per_session})))
                    .collect::<Result<Vec<_>>>()?;
                for (proxy, id) in proxies.iter_mut().zip(ids) {
                    let result = proxy.finish(id)?;
                    ours.extend(samples_of(&result, per_session)?);
                }
            } else {
                theirs.extend(hosts.run(per_session)?);
            }
        }
    }
    drop(proxies);
    hosts.stop()?;

    let samples = ours.len();
    let row = |id: &str, what: &str, q: f64, ours: &mut Vec<f64>, theirs: &mut Vec<f64>| Row {
        id: id.into(),
        what: what.into(),
        unit: "µs",
        rootsd: quantile(ours, q),
        limit: Some(quantile(theirs, q)),
        limit_what: LIMIT_WHAT.into(),
        samples,
        target: Target::ratio_at_most(1.0),
        note: Some(format!(
            "{SESSIONS} sessions busy at once, {per_session} requests each per turn, {turns} turns"
        )),
    };
    Ok(vec![
        row(
            "roots_list_p50",
            "roots/list answered by the proxy, 64 busy sessions, p50",
            0.5,
            &mut ours,
            &mut theirs,
        ),
        row(
            "roots_list_p99",
            "roots/list answered by the proxy, 64 busy sessions, p99",
            0.99,
            &mut ours,
            &mut theirs,
        ),
    ])
}

/// The limit's side: one thread per server, each the server's whole host.
struct DirectHosts {
    commands: Vec<mpsc::Sender<usize>>,
    results: mpsc::Receiver<Result<Vec<f64>>>,
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
                    let outcome = session.server_round_trips("bench/roots-run", n);
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

    /// One turn: every server runs `n` requests at once; all their samples.
    fn run(&self, n: usize) -> Result<Vec<f64>> {
        for command in &self.commands {
            command
                .send(n)
                .map_err(|_| anyhow!("a direct host thread ended early"))?;
        }
        let mut all = Vec::with_capacity(n * SESSIONS);
        for _ in 0..SESSIONS {
            all.extend(
                self.results
                    .recv()
                    .map_err(|_| anyhow!("a direct host thread ended early"))??,
            );
        }
        Ok(all)
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
