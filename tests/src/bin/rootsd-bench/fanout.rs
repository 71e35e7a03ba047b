//! The fan-out rows and the per-session memory row.
//!
//! rootsd's side: N sessions registered on a fresh daemon, held by a `bench-reader`; a change is
//! a raw `roots.add`, and the time runs from its acknowledgement until every session has read
//! its `roots.changed` line. The limit: `limit-fanout` with N connections held by a second
//! `bench-reader` (the same code), writing the very line rootsd pushed in the round before to
//! each of them when triggered. Rounds alternate between the two, each after a short pause.
//!
//! The whole-path rows time what users feel: from the request written until the acknowledgement
//! and every session's line are read, by the cheapest reader (blocking reads in order, the same
//! for both). Their limit is the same `limit-fanout`, which before answering also appends a
//! record the size of rootsd's journal record for the change (measured in this run) and calls
//! `fdatasync`. A whole-path round of each side follows every ack→read round of each side.
//!
//! The daemon is fresh so that its memory per session is not flattered by memory that earlier
//! phases freed and the allocator kept.

use std::os::unix::fs::MetadataExt as _;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use rootsd_tests::{Sandbox, bench_wire};

use crate::procs::{LineChild, helper, median, memory, record_of, rootsd_first, uri_of};
use crate::report::{Row, Target};

/// Idle time before each round.
const PAUSE: Duration = Duration::from_millis(100);

const LIMIT_WHAT: &str =
    "limit-fanout: accepts N connections, writes the same line to each; same reader";
const WHOLE_LIMIT_WHAT: &str = "limit-fanout: write + fdatasync of a journal-sized record, `ok`, \
     then one blocking write of the line per connection; same reader (blocking reads in order)";

pub struct FanOut {
    pub sessions: usize,
    pub rounds: usize,
    /// Median time from acknowledgement until all N have read the line, ms.
    pub rootsd_ms: f64,
    pub limit_ms: f64,
    /// Median time from the request written until all N have read the line, ms.
    pub whole_rootsd_ms: f64,
    pub whole_limit_ms: f64,
    /// Bytes rootsd's journal grew by for one change: what the limit writes and syncs.
    pub record_bytes: u64,
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

    let mut change = 0;
    let mut rootsd_round = |ours: &mut LineChild, kind: &str| -> Result<(f64, String)> {
        change += 1;
        let add = bench_wire::add(2, &workspace, &uris[0], &format!("round-{change:05}"));
        ours.send(&format!("{kind} {add}"))?;
        parse_round(&ours.read_line()?)
    };

    // A first round, not counted: it warms rootsd's paths, gives the line for the limit, and
    // says how much rootsd's journal grows per change, which the limit then writes and syncs.
    let mut line = String::new();
    let mut record_bytes = 0;
    if rounds > 0 {
        (line, record_bytes) = record_of(&sandbox, || Ok(rootsd_round(&mut ours, "round")?.1))?;
    }

    let limit_socket = sandbox.path().join("limit-fanout.sock");
    let limit_journal = sandbox.path().join("limit-fanout.journal");
    ensure!(
        std::fs::metadata(sandbox.path())?.dev() == std::fs::metadata(&sandbox.state)?.dev(),
        "the fan-out limit's journal must be on the state directory's filesystem"
    );
    let mut server = helper("limit-fanout");
    server.arg(&limit_socket).arg(sessions.to_string());
    if rounds > 0 {
        server.arg(&limit_journal).arg(record_bytes.to_string());
    }
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

    let limit_round = |theirs: &mut LineChild, kind: &str, line: &str| -> Result<f64> {
        theirs.send(&format!("{kind} {line}"))?;
        let (ms, echoed) = parse_round(&theirs.read_line()?)?;
        ensure!(echoed == line, "limit-fanout delivered a different line");
        Ok(ms)
    };

    let (mut rootsd_ms, mut limit_ms) = (Vec::new(), Vec::new());
    let (mut whole_rootsd_ms, mut whole_limit_ms) = (Vec::new(), Vec::new());
    let mut line_bytes = 0;
    if rounds > 0 {
        // The limit's first rounds, not counted either: warm paths, as rootsd's had.
        limit_round(&mut theirs, "round", &line)?;
        limit_round(&mut theirs, "whole", &line)?;
        for turn in 0..rounds {
            // Changes reach an idle daemon in real use, so each round starts after a pause,
            // and each side's round follows the other's: both start equally cold.
            std::thread::sleep(PAUSE);
            let (ms, pushed) = rootsd_round(&mut ours, "round")?;
            rootsd_ms.push(ms);
            line = pushed;
            std::thread::sleep(PAUSE);
            limit_ms.push(limit_round(&mut theirs, "round", &line)?);
            for rootsd in rootsd_first(turn) {
                std::thread::sleep(PAUSE);
                if rootsd {
                    let (ms, pushed) = rootsd_round(&mut ours, "whole")?;
                    line = pushed;
                    whole_rootsd_ms.push(ms);
                } else {
                    whole_limit_ms.push(limit_round(&mut theirs, "whole", &line)?);
                }
            }
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
        whole_rootsd_ms: median_or_zero(&mut whole_rootsd_ms),
        whole_limit_ms: median_or_zero(&mut whole_limit_ms),
        record_bytes,
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

    pub fn whole_row(&self) -> Row {
        Row {
            id: format!("whole_fanout_{}", self.sessions),
            what: format!(
                "one change reaching {} sessions (request → ack and all read), median",
                thousands(self.sessions)
            ),
            unit: "ms",
            rootsd: self.whole_rootsd_ms,
            limit: Some(self.whole_limit_ms),
            limit_what: WHOLE_LIMIT_WHAT.into(),
            samples: self.rounds,
            target: Target::ratio_at_most(2.0),
            note: Some(format!(
                "{} rounds each, taking turns, each after a {} ms pause; a push of {} bytes; the limit syncs {} bytes, rootsd's journal growth per change",
                self.rounds,
                PAUSE.as_millis(),
                self.line_bytes,
                self.record_bytes
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
