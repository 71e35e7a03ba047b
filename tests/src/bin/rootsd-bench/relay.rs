//! The relay rows: a request relayed server → host → server (p50, p99), 1 MiB results from
//! server to host, and the proxy's memory after such a session. `rootsctl proxy` against
//! `limit-relay` (a poll() loop copying bytes), with the same `bench-server` behind both and
//! the same host (this process) in front. Both sessions stay open for the whole phase and take
//! turns, so that noise from other work on the machine falls on both alike.

use std::sync::Arc;

use anyhow::Result;
use rootsd_tests::Sandbox;

use crate::Mode;
use crate::mcp::{IN_FLIGHT, Mcp, Via};
use crate::procs::{median, memory, quantile, rootsd_first};
use crate::report::{Row, Target};

const LIMIT_WHAT: &str = "limit-relay: a poll() loop copying bytes between the same pipes";

pub fn measure(sandbox: &Sandbox, mode: Mode, roots: Arc<String>) -> Result<Vec<Row>> {
    let mut proxy = Mcp::spawn(sandbox, Via::Proxy, "bench", roots.clone())?;
    let mut limit = Mcp::spawn(sandbox, Via::LimitRelay, "bench", roots)?;
    proxy.initialize()?;
    limit.initialize()?;
    for session in [&mut proxy, &mut limit] {
        session.server_round_trips("bench/echo-run", 200)?;
    }

    let (batches, per_batch) = if mode.quick { (12, 500) } else { (40, 500) };
    eprintln!("  relayed requests: {batches} turns of {per_batch} through each relay");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for turn in 0..batches {
        for rootsd in rootsd_first(turn) {
            let (session, samples) = if rootsd {
                (&mut proxy, &mut ours)
            } else {
                (&mut limit, &mut theirs)
            };
            samples.extend(session.server_round_trips("bench/echo-run", per_batch)?);
        }
    }

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
            note: None,
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
