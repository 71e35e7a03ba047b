//! The relay rows: a request relayed server → host → server (p50, p99), 1 MiB results from
//! server to host, and the proxy's memory after such a session. `rootsctl proxy` against
//! `limit-relay` (a poll() loop copying bytes), with the same `bench-server` behind both and
//! the same host (this process) in front. Every row runs through a new pair of sessions for each
//! placement of server, relay and host on the cores (`PLACEMENTS`), the two sessions of
//! a pair taking turns so that noise from other work on the machine falls on both alike, first
//! with small messages, then with large results.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use rootsd_tests::Sandbox;
use rustix::process::Pid;
use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

use crate::Mode;
use crate::mcp::{IN_FLIGHT, Mcp, Via};
use crate::procs::{memory, quantile, rootsd_first};
use crate::report::{Row, Target};
use rootsd_tests::Memory;

const LIMIT_WHAT: &str = "limit-relay: a poll() loop copying bytes between the same pipes";

pub fn measure(sandbox: &Sandbox, mode: Mode, roots: Arc<String>) -> Result<Vec<Row>> {
    let cpus = Cpus::of_this_process()?;
    let plan = if mode.quick {
        Plan {
            turns: 2,
            per_turn: 250,
            large_turns: 1,
            large_count: 32,
        }
    } else {
        Plan {
            turns: 5,
            per_turn: 500,
            large_turns: 6,
            large_count: 100,
        }
    };
    eprintln!(
        "  {} placements of server, relay and host on the cores, each: {} turns of {} relayed requests through each relay, then {} of {} × 1 MiB results, {IN_FLIGHT} in flight",
        PLACEMENTS.len(),
        plan.turns,
        plan.per_turn,
        plan.large_turns,
        plan.large_count
    );
    let mut placed = Vec::new();
    for placement in PLACEMENTS {
        placed.push(measure_placement(sandbox, &cpus, placement, &plan, &roots)?);
    }
    let placements_note = per_placement(&placed);
    let all = |pick: fn(&Placed) -> &Vec<f64>| -> Vec<f64> {
        placed
            .iter()
            .flat_map(|p| pick(p).iter().copied())
            .collect()
    };
    let (mut ours, mut theirs) = (all(|p| &p.ours), all(|p| &p.theirs));
    // Every placement moves the same results through each relay: the rate over all of them is
    // the results over the time they took together, which a placement's slow or fast runs cannot
    // tip the way they tip a median of rates that differ by placement.
    let rate = |pick: fn(&Placed) -> &Vec<f64>| {
        let seconds: f64 = placed.iter().flat_map(|p| pick(p).iter()).sum();
        let results = (placed.len() * plan.large_turns * plan.large_count) as f64;
        results / seconds
    };
    let (ours_mibs, theirs_mibs) = (rate(|p| &p.ours_secs), rate(|p| &p.theirs_secs));
    let rates_note = rates_by_placement(&placed, plan.large_count);
    // The memory rows take the placement where the proxy used most.
    let most =
        |pick: fn(&Placed) -> u64| placed.iter().map(pick).max().unwrap_or(0) as f64 / 1024.0;
    let (proxy_small, limit_small) = (
        most(|p| p.proxy_small.rss_kib),
        most(|p| p.limit_small.rss_kib),
    );
    let (proxy_hwm, limit_hwm) = (
        most(|p| p.proxy_large.hwm_kib),
        most(|p| p.limit_large.hwm_kib),
    );
    let proxy_end = most(|p| p.proxy_large.rss_kib);
    let samples = ours.len();
    let runs = PLACEMENTS.len() * plan.large_turns;
    let count = plan.large_count;
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
            rootsd: ours_mibs,
            limit: Some(theirs_mibs),
            limit_what: LIMIT_WHAT.into(),
            samples: runs,
            target: Target::ratio_at_least(0.95),
            note: Some(format!(
                "{runs} runs of {count} results ({} per placement), {IN_FLIGHT} requested at a time; by placement (MiB/s, proxy/limit): {rates_note}",
                plan.large_turns
            )),
        },
        Row {
            id: "proxy_rss".into(),
            what: "proxy RSS (VmRSS) after a session of small messages".into(),
            unit: "MiB",
            rootsd: proxy_small,
            limit: Some(limit_small),
            limit_what: "limit-relay's VmRSS after the same session".into(),
            samples: PLACEMENTS.len(),
            target: Target::rootsd_at_most(6.0),
            note: Some(
                "initialize, then the relayed requests above; the largest of the placements' sessions"
                    .into(),
            ),
        },
        Row {
            id: "proxy_hwm".into(),
            what: "proxy peak RSS (VmHWM) with 1 MiB results".into(),
            unit: "MiB",
            rootsd: proxy_hwm,
            limit: Some(limit_hwm),
            limit_what: "limit-relay's VmHWM over the same session".into(),
            samples: PLACEMENTS.len(),
            target: Target::rootsd_at_most(6.0),
            note: Some(format!(
                "the whole session, large results included ({IN_FLIGHT} in flight), the largest of the placements' sessions; VmRSS at its end at most {proxy_end:.1} MiB"
            )),
        },
    ])
}

/// How much each placement runs.
struct Plan {
    turns: usize,
    per_turn: usize,
    large_turns: usize,
    large_count: usize,
}

/// What one placement measured, for each relay.
struct Placed {
    placement: [usize; 3],
    ours: Vec<f64>,
    theirs: Vec<f64>,
    /// How long each run of large results took, in seconds.
    ours_secs: Vec<f64>,
    theirs_secs: Vec<f64>,
    proxy_small: Memory,
    limit_small: Memory,
    proxy_large: Memory,
    limit_large: Memory,
}

/// A new session through each relay, pinned to `placement`, taking turns: small messages, the
/// memory after them, then large results and the memory after those.
fn measure_placement(
    sandbox: &Sandbox,
    cpus: &Cpus,
    placement: [usize; 3],
    plan: &Plan,
    roots: &Arc<String>,
) -> Result<Placed> {
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
    let (ours, theirs) = in_turns(plan.turns, &mut proxy, &mut limit, |session| {
        session.server_round_trips("bench/echo-run", plan.per_turn)
    })?;
    // The proxy's memory after a session of small messages, before large results grow it.
    let (proxy_small, limit_small) = (memory(proxy.pid())?, memory(limit.pid())?);
    let (ours_secs, theirs_secs) = in_turns(plan.large_turns, &mut proxy, &mut limit, |session| {
        Ok(vec![
            session
                .large_results(plan.large_count, 1 << 20)?
                .as_secs_f64(),
        ])
    })?;
    let (proxy_large, limit_large) = (memory(proxy.pid())?, memory(limit.pid())?);
    // This thread is the host of every session: it runs anywhere again once they end.
    cpus.release_host()?;
    Ok(Placed {
        placement,
        ours,
        theirs,
        ours_secs,
        theirs_secs,
        proxy_small,
        limit_small,
        proxy_large,
        limit_large,
    })
}

/// Runs `each` `turns` times on each of the two sessions, taking turns (which goes first
/// alternating), and returns what each gave: the proxy's, then the limit's.
fn in_turns(
    turns: usize,
    proxy: &mut Mcp,
    limit: &mut Mcp,
    mut each: impl FnMut(&mut Mcp) -> Result<Vec<f64>>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for turn in 0..turns {
        for rootsd in rootsd_first(turn) {
            let (session, figures) = if rootsd {
                (&mut *proxy, &mut ours)
            } else {
                (&mut *limit, &mut theirs)
            };
            figures.extend(each(session)?);
        }
    }
    Ok((ours, theirs))
}

/// Where the three processes of a relayed request run, as indices into the two CPUs used:
/// the server, the relay and the host. A request crosses between cores 0, 2 or 4 times per
/// round trip, depending on which processes share a core; on a virtual machine each crossing
/// wakes a halted core, which costs more than the relay's own work. Left to the scheduler, each
/// session keeps whichever of these it was first given for its whole life (one draw per
/// session, medians 17, 47 or 77 µs per round trip on the development machine), so that a run's
/// ratio said more about the draw than about the proxy. Large results move at rates that differ
/// as much by placement (all three on one core, every write waits for the host to read; spread
/// over two, they overlap). Both relays now run in every placement, the same number of times.
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

    /// Lets the host (this thread) run anywhere again.
    fn release_host(&self) -> Result<()> {
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

/// Each placement's medians of small messages, for the row's note: `s0 r0 h1 a/b, …`.
fn per_placement(placed: &[Placed]) -> String {
    let medians: Vec<String> = placed
        .iter()
        .map(|p| {
            let [server, relay, host] = p.placement;
            let (mut ours, mut theirs) = (p.ours.clone(), p.theirs.clone());
            format!(
                "s{server} r{relay} h{host} {:.1}/{:.1}",
                quantile(&mut ours, 0.5),
                quantile(&mut theirs, 0.5)
            )
        })
        .collect();
    medians.join(", ")
}

/// Each placement's rate of large results, for the row's note: `s0 r0 h1 a/b, …`.
fn rates_by_placement(placed: &[Placed], count: usize) -> String {
    let rate = |secs: &[f64]| (secs.len() * count) as f64 / secs.iter().sum::<f64>();
    let rates: Vec<String> = placed
        .iter()
        .map(|p| {
            let [server, relay, host] = p.placement;
            format!(
                "s{server} r{relay} h{host} {:.0}/{:.0}",
                rate(&p.ours_secs),
                rate(&p.theirs_secs)
            )
        })
        .collect();
    rates.join(", ")
}
