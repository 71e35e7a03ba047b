//! The fan-out rows and the per-session memory row.
//!
//! rootsd's side: N sessions registered on a fresh daemon, held by a `bench-reader`; a change is
//! a raw `roots.add`, and the time runs from its acknowledgement until every session has read
//! its `roots.changed` line. The limit: `limit-fanout` with N connections held by a second
//! `bench-reader` (the same code), writing the very line rootsd pushed in the round before to
//! each of them when triggered. Rounds alternate between the two, each after a short pause.
//!
//! The daemon is fresh so that its memory per session is not flattered by memory that earlier
//! phases freed and the allocator kept.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use rootsd_tests::{Sandbox, bench_wire};

use crate::procs::{LineChild, helper, median, memory, uri_of};
use crate::report::{Row, Target};

/// Idle time before each round.
const PAUSE: Duration = Duration::from_millis(100);

const LIMIT_WHAT: &str =
    "limit-fanout: accepts N connections, writes the same line to each; same reader";

pub struct FanOut {
    pub sessions: usize,
    pub rounds: usize,
    /// Median time from acknowledgement until all N have read the line, ms.
    pub rootsd_ms: f64,
    pub limit_ms: f64,
    /// Daemon memory added per idle registered session, KiB.
    pub daemon_kib_per_session: f64,
    /// limit-fanout's memory added per accepted connection, KiB.
    pub limit_kib_per_connection: f64,
    pub line_bytes: usize,
}

/// Runs `rounds` changes against `sessions` sessions (0 rounds: memory only).
pub fn run(sessions: usize, rounds: usize) -> Result<FanOut> {
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon();
    let workspace = format!("fan-{sessions}");
    // Three roots, as a small project might have; the first is renamed by every change, so
    // every pushed line has the same length.
    let mut uris = Vec::new();
    for name in ["a", "b", "c"] {
        uris.push(uri_of(&sandbox.mkdir(&format!("fan/{name}"))));
    }
    let mut control = crate::procs::Control::connect(&sandbox.socket)?;
    for (i, uri) in uris.iter().enumerate() {
        control.call(&bench_wire::add(1, &workspace, uri, &format!("root-{i}")))?;
    }
    drop(control);

    let daemon_pid = daemon.pid() as u32;
    let before = memory(daemon_pid)?.rss_kib;
    let mut reader = helper("bench-reader");
    reader
        .arg("rootsd")
        .arg(&sandbox.socket)
        .arg(&workspace)
        .arg(sessions.to_string());
    let mut ours = LineChild::spawn(reader, "bench-reader (rootsd)")?;
    ours.expect_line("ready")?;
    // Registration answers are read before "ready", but the daemon may still be finishing
    // bookkeeping after the last answer; let it settle before reading its memory.
    std::thread::sleep(Duration::from_millis(200));
    let after = memory(daemon_pid)?.rss_kib;

    let limit_socket = sandbox.path().join("limit-fanout.sock");
    let mut server = helper("limit-fanout");
    server.arg(&limit_socket).arg(sessions.to_string());
    let mut server = LineChild::spawn(server, "limit-fanout")?;
    server.expect_line("ready")?;
    let limit_before = memory(server.pid())?.rss_kib;
    let mut reader = helper("bench-reader");
    reader
        .arg("limit")
        .arg(&limit_socket)
        .arg(sessions.to_string());
    let mut theirs = LineChild::spawn(reader, "bench-reader (limit)")?;
    theirs.expect_line("ready")?;
    server.expect_line("accepted")?;
    let limit_after = memory(server.pid())?.rss_kib;

    let mut change = 0;
    let mut rootsd_round = |ours: &mut LineChild| -> Result<(f64, String)> {
        change += 1;
        let add = bench_wire::add(2, &workspace, &uris[0], &format!("round-{change:05}"));
        ours.send(&format!("round {add}"))?;
        parse_round(&ours.read_line()?)
    };
    let limit_round = |theirs: &mut LineChild, line: &str| -> Result<f64> {
        theirs.send(&format!("round {line}"))?;
        let (ms, echoed) = parse_round(&theirs.read_line()?)?;
        ensure!(echoed == line, "limit-fanout delivered a different line");
        Ok(ms)
    };

    let (mut rootsd_ms, mut limit_ms) = (Vec::new(), Vec::new());
    let mut line_bytes = 0;
    if rounds > 0 {
        // A first round each, not counted: the line for the limit, and warm paths on both.
        let (_, mut line) = rootsd_round(&mut ours)?;
        limit_round(&mut theirs, &line)?;
        for _ in 0..rounds {
            // Changes reach an idle daemon in real use, so each round starts after a pause,
            // and each side's round follows the other's: both start equally cold.
            std::thread::sleep(PAUSE);
            let (ms, pushed) = rootsd_round(&mut ours)?;
            rootsd_ms.push(ms);
            line = pushed;
            std::thread::sleep(PAUSE);
            limit_ms.push(limit_round(&mut theirs, &line)?);
        }
        line_bytes = line.len() + 1;
    }
    drop(ours);
    drop(theirs);
    drop(server);
    drop(daemon);

    let median_or_zero = |v: &mut Vec<f64>| if v.is_empty() { 0.0 } else { median(v) };
    Ok(FanOut {
        sessions,
        rounds,
        rootsd_ms: median_or_zero(&mut rootsd_ms),
        limit_ms: median_or_zero(&mut limit_ms),
        daemon_kib_per_session: after.saturating_sub(before) as f64 / sessions as f64,
        limit_kib_per_connection: limit_after.saturating_sub(limit_before) as f64 / sessions as f64,
        line_bytes,
    })
}

/// `NANOSECONDS LINE` from a reader: milliseconds and the line.
fn parse_round(answer: &str) -> Result<(f64, String)> {
    let (ns, line) = answer
        .split_once(' ')
        .with_context(|| format!("a reader answered {answer:?}"))?;
    let ns: f64 = ns
        .parse()
        .with_context(|| format!("a reader answered {answer:?}"))?;
    Ok((ns / 1e6, line.to_owned()))
}

impl FanOut {
    pub fn row(&self) -> Row {
        Row {
            id: format!("fanout_{}", self.sessions),
            what: format!(
                "one change reaching {} sessions (ack → all read), median",
                thousands(self.sessions)
            ),
            unit: "ms",
            rootsd: self.rootsd_ms,
            limit: Some(self.limit_ms),
            limit_what: LIMIT_WHAT.into(),
            samples: self.rounds,
            target: Target::ratio_at_most(2.0),
            note: Some(format!(
                "{} rounds each, alternating, each after a {} ms pause; a push of {} bytes",
                self.rounds,
                PAUSE.as_millis(),
                self.line_bytes
            )),
        }
    }

    pub fn memory_row(&self) -> Row {
        Row {
            id: "daemon_kib_per_session".into(),
            what: format!(
                "daemon memory per idle session, {} sessions",
                thousands(self.sessions)
            ),
            unit: "KiB",
            rootsd: self.daemon_kib_per_session,
            limit: Some(self.limit_kib_per_connection),
            limit_what: "limit-fanout's RSS per accepted connection".into(),
            samples: 1,
            target: Target::rootsd_at_most(8.0),
            note: Some(
                "VmRSS of a fresh daemon after registering N sessions, minus before, over N".into(),
            ),
        }
    }
}

/// 10000 → "10,000".
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
