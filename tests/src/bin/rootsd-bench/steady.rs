//! The steady-state memory row: a fresh daemon with 100 registered sessions takes 20 changes a
//! second (each delivered to every session before the next) for 60 s (quick: 10 s), and its
//! RSS is sampled every 100 ms. The row compares the median RSS of the last window (10 s;
//! quick: 2 s) with that of the first: a daemon that keeps nothing per change stays flat.
//!
//! Before the clock starts, the daemon takes [`WARM_UP_CHANGES`] changes as fast as it can:
//! more than its history keeps (1,000 entries, bounded by design), so that the run compares a
//! daemon whose bounded buffers are full with itself, not with the daemon that was filling them.

use std::time::{Duration, Instant};

use anyhow::Result;
use rootsd_tests::{Sandbox, bench_wire};

use crate::Mode;
use crate::procs::{Control, LineChild, helper, median, memory, uri_of};
use crate::report::{Row, Target};

const SESSIONS: usize = 100;
const CHANGES_PER_SECOND: u32 = 20;
/// Changes made before the measured run: more than the daemon's history keeps.
const WARM_UP_CHANGES: u64 = 1_100;
/// How much the last window may exceed the first and still count as flat.
const TOLERANCE: f64 = 1.05;

pub fn measure(mode: Mode) -> Result<Row> {
    let (run, window) = if mode.quick {
        (Duration::from_secs(10), Duration::from_secs(2))
    } else {
        (Duration::from_secs(60), Duration::from_secs(10))
    };
    eprintln!(
        "  {} s at {CHANGES_PER_SECOND} changes/s, {SESSIONS} sessions",
        run.as_secs()
    );
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon();
    let pid = daemon.pid() as u32;
    let workspace = "steady";
    let uris: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| uri_of(&sandbox.mkdir(&format!("steady/{n}"))))
        .collect();
    let mut control = Control::connect(&sandbox.socket)?;
    for (i, uri) in uris.iter().enumerate() {
        control.call(&bench_wire::add(1, workspace, uri, &format!("root-{i}")))?;
    }
    drop(control);
    let mut reader = helper("bench-reader");
    reader
        .arg("rootsd")
        .arg(&sandbox.socket)
        .arg(workspace)
        .arg(SESSIONS.to_string());
    let mut reader = LineChild::spawn(reader, "bench-reader (steady)")?;
    reader.expect_line("ready")?;

    let mut change = 0u64;
    let round = |change: u64, reader: &mut LineChild| -> Result<()> {
        let add = bench_wire::add(
            2,
            workspace,
            &uris[change as usize % 3],
            &format!("c-{change}"),
        );
        reader.send(&format!("round {add}"))?;
        reader.read_line()?;
        Ok(())
    };
    while change < WARM_UP_CHANGES {
        change += 1;
        round(change, &mut reader)?;
    }

    let period = Duration::from_secs(1) / CHANGES_PER_SECOND;
    let sample_every = Duration::from_millis(100);
    let start = Instant::now();
    let mut next_change = start;
    let mut next_sample = start;
    let mut samples: Vec<(Duration, u64)> = Vec::new();
    while start.elapsed() < run {
        let now = Instant::now();
        if now >= next_sample {
            samples.push((now - start, memory(pid)?.rss_kib));
            next_sample += sample_every;
        }
        if now >= next_change {
            change += 1;
            round(change, &mut reader)?;
            next_change += period;
        }
        let wake = next_change.min(next_sample);
        if let Some(wait) = wake.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    drop(reader);
    drop(daemon);

    let mut first: Vec<f64> = samples
        .iter()
        .filter(|(t, _)| *t < window)
        .map(|(_, kib)| *kib as f64 / 1024.0)
        .collect();
    let mut last: Vec<f64> = samples
        .iter()
        .filter(|(t, _)| *t >= run - window)
        .map(|(_, kib)| *kib as f64 / 1024.0)
        .collect();
    let peak = samples.iter().map(|(_, k)| *k).max().unwrap_or(0) as f64 / 1024.0;
    // The course over the run, one figure per window, shows a trend that two windows hide.
    let course: Vec<String> = samples
        .chunks(
            samples
                .len()
                .div_ceil((run.as_secs() / window.as_secs()) as usize)
                .max(1),
        )
        .map(|chunk| {
            let mut kib: Vec<f64> = chunk.iter().map(|(_, k)| *k as f64 / 1024.0).collect();
            format!("{:.2}", median(&mut kib))
        })
        .collect();
    Ok(Row {
        id: "daemon_rss_steady".into(),
        what: format!(
            "daemon RSS, last {} s of {} s at {CHANGES_PER_SECOND} changes/s",
            window.as_secs(),
            run.as_secs()
        ),
        unit: "MiB",
        rootsd: median(&mut last),
        limit: Some(median(&mut first)),
        limit_what: format!(
            "the same daemon's RSS over the first {} s: flat means the ratio stays ≤ {TOLERANCE}",
            window.as_secs()
        ),
        samples: samples.len(),
        target: Target::ratio_at_most(TOLERANCE),
        note: Some(format!(
            "{} changes after a warm-up of {WARM_UP_CHANGES}, {SESSIONS} sessions each reading every change; peak {peak:.2} MiB; median per {} s: {} MiB",
            change - WARM_UP_CHANGES,
            window.as_secs(),
            course.join(", ")
        )),
    })
}
