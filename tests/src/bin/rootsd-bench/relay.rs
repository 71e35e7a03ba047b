//! The relay rows: a request relayed server → host → server (p50, p99), 1 MiB results from
//! server to host, and the proxy's memory after such a session. `rootsctl proxy` against
//! `limit-relay` (a poll() loop copying bytes), with the same `bench-server` behind both and
//! the same host (this process) in front. The small messages run through a new pair of sessions
//! for each placement of server, relay and host on the cores (`PLACEMENTS`), the two sessions of
//! a pair taking turns so that noise from other work on the machine falls on both alike; the last
//! pair, unpinned, then carries the large results.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use rootsd_tests::Sandbox;
use rustix::process::Pid;
use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

use crate::Mode;
use crate::mcp::{IN_FLIGHT, Mcp, Via};
use crate::procs::{median, memory, quantile, rootsd_first};
use crate::report::{Row, Target};

const LIMIT_WHAT: &str = "limit-relay: a poll() loop copying bytes between the same pipes";

pub fn measure(sandbox: &Sandbox, mode: Mode, roots: Arc<String>) -> Result<Vec<Row>> {
    let cpus = Cpus::of_this_process()?;
    let (turns, per_turn) = if mode.quick { (2, 250) } else { (5, 500) };
    eprintln!(
        "  relayed requests: {} placements of server, relay and host on the cores, each {turns} turns of {per_turn} through each relay",
        PLACEMENTS.len()
    );
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut placed = Vec::new();
    let mut sessions = None;
    for placement in PLACEMENTS {
        drop(sessions.take());
        let mut proxy = Mcp::spawn(sandbox, Via::Proxy, "bench", roots.clone())?;
        let mut limit = Mcp::spawn(sandbox, Via::LimitRelay, "bench", roots.clone())?;
        proxy.initialize()?;
        limit.initialize()?;
        for session in [&proxy, &limit] {
            cpus.place(session.pid(), placement)?;
        }
        for session in [&mut proxy, &mut limit] {
            session.server_round_trips("bench/echo-run", 200)?;
        }
        let (mut here_ours, mut here_theirs) = (Vec::new(), Vec::new());
        for turn in 0..turns {
            for rootsd in rootsd_first(turn) {
                let (session, samples) = if rootsd {
                    (&mut proxy, &mut here_ours)
                } else {
                    (&mut limit, &mut here_theirs)
                };
                samples.extend(session.server_round_trips("bench/echo-run", per_turn)?);
            }
        }
        ours.extend_from_slice(&here_ours);
        theirs.extend_from_slice(&here_theirs);
        placed.push((
            placement,
            quantile(&mut here_ours, 0.5),
            quantile(&mut here_theirs, 0.5),
        ));
        sessions = Some((proxy, limit));
    }
    let (mut proxy, mut limit) = sessions.context("no relay sessions")?;
    // The large results and the memory rows run as users run: wherever the scheduler puts them.
    cpus.release(&[proxy.pid(), limit.pid()])?;
    let placements_note = per_placement(&placed);

    // The proxy's memory after a session of small messages, before large results grow it.
    let proxy_small = memory(proxy.pid())?;
    let limit_small = memory(limit.pid())?;

    let (runs, count) = if mode.quick { (3, 64) } else { (5, 200) };
    let bytes = 1 << 20;
    eprintln!(
        "  large results: {runs} turns of {count} × 1 MiB through each relay, {IN_FLIGHT} in flight"
    );
    let (mut ours_mibs, mut theirs_mibs) = (Vec::new(), Vec::new());
    for turn in 0..runs {
        for rootsd in rootsd_first(turn) {
            let (session, rates) = if rootsd {
                (&mut proxy, &mut ours_mibs)
            } else {
                (&mut limit, &mut theirs_mibs)
            };
            let elapsed = session.large_results(count, bytes)?;
            rates.push(count as f64 / elapsed.as_secs_f64());
        }
    }

    let proxy_large = memory(proxy.pid())?;
    let limit_large = memory(limit.pid())?;
    let samples = ours.len();
    Ok(vec![
        Row {
            id: "relay_p50".into(),
            what: "request relayed server → host → server, p50".into(),
            unit: "µs",
            rootsd: quantile(&mut ours, 0.5),
            limit: Some(quantile(&mut theirs, 0.5)),
            limit_what: LIMIT_WHAT.into(),
            samples,
            target: Target::ratio_at_most(1.2),
            note: Some(format!(
                "medians by placement (µs, proxy/limit): {placements_note}"
            )),
        },
        Row {
            id: "relay_p99".into(),
            what: "request relayed server → host → server, p99".into(),
            unit: "µs",
            rootsd: quantile(&mut ours, 0.99),
            limit: Some(quantile(&mut theirs, 0.99)),
            limit_what: LIMIT_WHAT.into(),
            samples,
            target: Target::ratio_at_most(1.5),
            note: None,
        },
        Row {
            id: "relay_large_results".into(),
            what: "1 MiB results, server → host throughput".into(),
            unit: "MiB/s",
            rootsd: median(&mut ours_mibs),
            limit: Some(median(&mut theirs_mibs)),
            limit_what: LIMIT_WHAT.into(),
            samples: runs,
            target: Target::ratio_at_least(0.95),
            note: Some(format!(
                "median of {runs} runs of {count} results, {IN_FLIGHT} requested at a time"
            )),
        },
        Row {
            id: "proxy_rss".into(),
            what: "proxy RSS (VmRSS) after a session of small messages".into(),
            unit: "MiB",
            rootsd: proxy_small.rss_kib as f64 / 1024.0,
            limit: Some(limit_small.rss_kib as f64 / 1024.0),
            limit_what: "limit-relay's VmRSS after the same session".into(),
            samples: 1,
            target: Target::rootsd_at_most(6.0),
            note: Some("initialize, then the relayed requests above".into()),
        },
        Row {
            id: "proxy_hwm".into(),
            what: "proxy peak RSS (VmHWM) with 1 MiB results".into(),
            unit: "MiB",
            rootsd: proxy_large.hwm_kib as f64 / 1024.0,
            limit: Some(limit_large.hwm_kib as f64 / 1024.0),
            limit_what: "limit-relay's VmHWM over the same session".into(),
            samples: 1,
            target: Target::rootsd_at_most(6.0),
            note: Some(format!(
                "the whole session, large results included ({IN_FLIGHT} in flight); VmRSS at its end {:.1} MiB",
                proxy_large.rss_kib as f64 / 1024.0
            )),
        },
    ])
}

/// Where the three processes of a relayed request run, as indices into the two CPUs used:
/// the server, the relay and the host. A request crosses between cores 0, 2 or 4 times per
/// round trip, depending on which processes share a core; on a virtual machine each crossing
/// wakes a halted core, which costs more than the relay's own work. Left to the scheduler, each
/// session keeps whichever of these it was first given for its whole life (one draw per
/// session, medians 17, 47 or 77 µs per round trip on the development machine), so that a run's
/// ratio said more about the draw than about the proxy. Both relays now run in every placement,
/// the same number of times.
const PLACEMENTS: [[usize; 3]; 4] = [[0, 0, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]];

/// The CPUs this benchmark may use, and how to pin a relay session's processes to some of them.
struct Cpus {
    all: CpuSet,
    two: [usize; 2],
}

impl Cpus {
    fn of_this_process() -> Result<Self> {
        let all = sched_getaffinity(None).context("sched_getaffinity")?;
        let mut usable = (0..CpuSet::MAX_CPU).filter(|&cpu| all.is_set(cpu));
        let first = usable
            .next()
            .context("no CPU in this process's affinity mask")?;
        // On one CPU every placement is the same one.
        let second = usable.next().unwrap_or(first);
        Ok(Self {
            all,
            two: [first, second],
        })
    }

    /// Pins the host (this thread), the relay `relay` (every thread) and its server (its one
    /// child) as `placement` says.
    fn place(&self, relay: u32, placement: [usize; 3]) -> Result<()> {
        let [server_cpu, relay_cpu, host_cpu] = placement.map(|index| self.one(index));
        set_process(server_of(relay)?, &server_cpu)?;
        set_process(relay, &relay_cpu)?;
        sched_setaffinity(None, &host_cpu).context("pin the host thread")
    }

    /// Lets the relays, their servers and the host run anywhere again.
    fn release(&self, relays: &[u32]) -> Result<()> {
        for &relay in relays {
            set_process(server_of(relay)?, &self.all)?;
            set_process(relay, &self.all)?;
        }
        sched_setaffinity(None, &self.all).context("unpin the host thread")
    }

    fn one(&self, index: usize) -> CpuSet {
        let mut set = CpuSet::new();
        set.set(self.two[index]);
        set
    }
}

/// Sets the affinity of every thread of `pid`.
fn set_process(pid: u32, cpus: &CpuSet) -> Result<()> {
    for tid in tasks(pid)? {
        let tid = Pid::from_raw(tid as i32).context("a thread id of 0")?;
        sched_setaffinity(Some(tid), cpus)
            .with_context(|| format!("sched_setaffinity of thread {tid:?} of {pid}"))?;
    }
    Ok(())
}

/// The thread ids of `pid`.
fn tasks(pid: u32) -> Result<Vec<u32>> {
    let dir = format!("/proc/{pid}/task");
    let mut tids = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("read {dir}"))? {
        let name = entry?.file_name();
        if let Some(tid) = name.to_str().and_then(|n| n.parse().ok()) {
            tids.push(tid);
        }
    }
    Ok(tids)
}

/// The one child of a relay: its server.
fn server_of(relay: u32) -> Result<u32> {
    let mut children = Vec::new();
    for tid in tasks(relay)? {
        let path = format!("/proc/{relay}/task/{tid}/children");
        let text = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
        children.extend(
            text.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    match children[..] {
        [server] => Ok(server),
        _ => bail!("relay {relay} should have one child, its server, and has {children:?}"),
    }
}

/// Each placement's medians, for the row's note: `s0 r0 h1: a/b, …`.
fn per_placement(placed: &[([usize; 3], f64, f64)]) -> String {
    let medians: Vec<String> = placed
        .iter()
        .map(|([server, relay, host], ours, theirs)| {
            format!("s{server} r{relay} h{host} {ours:.1}/{theirs:.1}")
        })
        .collect();
    medians.join(", ")
}
