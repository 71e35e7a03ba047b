//! The restart row: a server started from the workspace (`rootsctl proxy -- bench-server
//! {root}`) whose first root changes. Timed from the change's acknowledgement until `wait` says
//! the session caught up, which is when the restarted server has answered the `initialize` the
//! proxy replayed to it; against the least any restart costs: the host itself stopping the same
//! server (stdin closed, exit reaped) and starting and initializing it again, with nothing in
//! between, measured in turns with it.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use rootsd_tests::{Sandbox, bench_wire};
use serde_json::Value;

use crate::Mode;
use crate::mcp::{Mcp, Via};
use crate::procs::{Control, median, uri_of};
use crate::report::{Row, Target};

/// The target: a restart costs at most 1.2 times the server's own stop and start.
const RESTART_RATIO: f64 = 1.2;

pub fn measure(sandbox: &Sandbox, mode: Mode, roots: Arc<String>) -> Result<Row> {
    let samples = if mode.quick { 5 } else { 61 };
    eprintln!(
        "  {samples} restarts, and {samples} of the server alone, stopped and started by the host"
    );
    let ws = "restart";
    let dirs = [
        uri_of(&sandbox.mkdir("restart/one")),
        uri_of(&sandbox.mkdir("restart/two")),
    ];
    let mut control = Control::connect(&sandbox.socket)?;
    control.call(&bench_wire::add(1, ws, &dirs[0], "one"))?;
    let mut session = Mcp::spawn(sandbox, Via::ProxyTemplated, ws, roots.clone())?;
    session.initialize()?;
    let (mut restarts, mut colds) = (Vec::new(), Vec::new());
    let mut alone = Mcp::spawn(sandbox, Via::Direct, ws, roots.clone())?;
    alone.initialize()?;
    let mut id = 10;
    for turn in 0..samples {
        let (old, new) = (&dirs[turn % 2], &dirs[(turn + 1) % 2]);
        // The new root joins second, which leaves {root} alone; removing the old one makes it
        // the first, which restarts the server.
        control.call(&bench_wire::add(id, ws, new, "next"))?;
        control.send(&bench_wire::remove(id + 1, ws, old))?;
        let removed = control.read()?.to_owned();
        let acknowledged = Instant::now();
        let revision = revision_of(&removed)?;
        control.send(&bench_wire::wait(id + 2, ws, revision, 20_000))?;
        let waited: Value = serde_json::from_str(control.read()?).context("wait's answer")?;
        restarts.push(acknowledged.elapsed().as_secs_f64() * 1e3);
        ensure!(
            waited["result"]["caught_up"]
                .as_array()
                .is_some_and(|c| c.len() == 1),
            "the restarted session did not catch up: {waited}"
        );
        id += 3;
        // The session still answers, through the new server.
        session.call("tools/call", serde_json::json!({"arguments": {"bytes": 8}}))?;

        let started = Instant::now();
        let status = alone.stop()?;
        ensure!(status.success(), "bench-server ended with {status}");
        alone = Mcp::spawn(sandbox, Via::Direct, ws, roots.clone())?;
        alone.initialize()?;
        colds.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let (restart, cold) = (median(&mut restarts), median(&mut colds));
    Ok(Row {
        id: "restart".into(),
        what: "restart: change acknowledged → restarted server answered the replayed initialize, median"
            .into(),
        unit: "ms",
        rootsd: restart,
        limit: Some(cold),
        limit_what: "the host stopping the same server (stdin closed, exit reaped) and starting and initializing it again".into(),
        samples,
        target: Target::ratio_at_most(RESTART_RATIO),
        note: Some(
            "bench-server stops and starts in about a millisecond, so the steps only a restart behind rootsd takes (the push to the proxy, the replayed initialize, the report that wait hears) weigh most here; for a real server (mcp-server-git: 1.3-1.6 s cold) they are a small share"
                .into(),
        ),
    })
}

fn revision_of(line: &str) -> Result<u64> {
    let value: Value = serde_json::from_str(line).context("roots.remove's answer")?;
    value["result"]["revision"]
        .as_u64()
        .with_context(|| format!("no revision in {line}"))
}
