//! The rows that say whether a change costs in proportion to what it changes rather than to the
//! workspace it changes: `roots.add` acknowledged at 2,000 roots against the same rename at 10
//! roots, and the journal and database bytes one such change writes at either size.
//!
//! Both workspaces live in the same daemon and take turns, round by round, so that both sides
//! see the same disk, the same neighbours and the same store (revision, history, journal
//! length). Every change renames the workspace's first root, so the workspaces keep their sizes
//! and each change is the same small edit whatever the size.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use rootsd_tests::{Sandbox, bench_wire};

use crate::Mode;
use crate::procs::{Control, median, quantile, uri_of};
use crate::report::{Row, Target};

const SMALL: usize = 10;
/// The large workspace: the 2,000 roots; 500 in a quick run, which only checks that the
/// phase works (filling a workspace root by root is most of this phase's time on debug builds).
fn large(mode: Mode) -> usize {
    if mode.quick { 500 } else { 2_000 }
}
/// How long to leave the daemon idle so that sled has taken every change and checkpointed
/// (the store checkpoints after 250 ms without writes).
const SETTLE: Duration = Duration::from_millis(600);

struct Side {
    control: Control,
    workspace: String,
    first: String,
    samples: Vec<f64>,
    journal: Vec<f64>,
}

pub fn measure(sandbox: &Sandbox, daemon: i32, mode: Mode) -> Result<Vec<Row>> {
    let rounds: usize = if mode.quick { 60 } else { 300 };
    let large_roots = large(mode);
    // The bytes rows sample a run of changes to one workspace at a time, long enough for sled's
    // own batching to average out and short enough that no rebuild of the database falls in it.
    let byte_changes: usize = if mode.quick { 20 } else { 50 };
    eprintln!(
        "  {rounds} renames at {SMALL} and at {large_roots} roots, taking turns; {byte_changes} more of each for the bytes"
    );
    let mut sides = Vec::new();
    for size in [SMALL, large_roots] {
        let workspace = format!("size-{size}");
        let mut control = Control::connect(&sandbox.socket)?;
        let mut first = None;
        for k in 0..size {
            let uri = uri_of(&sandbox.mkdir(&format!("by-size/{size}/{k:05}")));
            control.call(&bench_wire::add(1, &workspace, &uri, &format!("r{k}")))?;
            first.get_or_insert(uri);
        }
        sides.push(Side {
            control,
            workspace,
            first: first.expect("a workspace of at least one root"),
            samples: Vec::with_capacity(rounds),
            journal: Vec::with_capacity(rounds),
        });
    }
    let journal = sandbox.state.join("roots.journal");
    std::thread::sleep(SETTLE);
    for round in 0..rounds {
        // Even rounds: the small workspace first, odd: the large one, so that neither always
        // inherits the machine from the other.
        let order = if round.is_multiple_of(2) {
            [0, 1]
        } else {
            [1, 0]
        };
        for index in order {
            let side = &mut sides[index];
            let before = file_len(&journal)?;
            let start = Instant::now();
            side.control.call(&bench_wire::add(
                2,
                &side.workspace,
                &side.first,
                &format!("round-{round:05}"),
            ))?;
            side.samples.push(start.elapsed().as_secs_f64() * 1e6);
            let after = file_len(&journal)?;
            // A compaction rewrites the journal shorter; such a change's growth says nothing.
            if after > before {
                side.journal.push((after - before) as f64);
            }
        }
    }

    // What sled wrote: every byte the daemon wrote (its `wchar`, which counts `write` and
    // `pwrite` alike) less the journal's growth and the replies this connection read. db/'s
    // growth said nothing once sled reused the room of segments it had cleaned (it then grew by
    // 0 bytes at both sizes).
    let mut database = Vec::new();
    for side in &mut sides {
        std::thread::sleep(SETTLE);
        let (written, journaled, replied) = (
            written_by(daemon)?,
            file_len(&journal)?,
            side.control.received,
        );
        for change in 0..byte_changes {
            side.control.call(&bench_wire::add(
                3,
                &side.workspace,
                &side.first,
                &format!("bytes-{change:05}"),
            ))?;
        }
        std::thread::sleep(SETTLE);
        let journal_growth = file_len(&journal)?;
        ensure!(
            journal_growth >= journaled,
            "the journal was compacted while the database's bytes were counted; run the phase again"
        );
        let sled = (written_by(daemon)? - written)
            .saturating_sub(journal_growth - journaled)
            .saturating_sub(side.control.received - replied);
        database.push(sled as f64 / byte_changes as f64);
    }

    let [small, large] = &mut sides[..] else {
        unreachable!("two sides")
    };
    let small_p50 = median(&mut small.samples);
    let large_p50 = median(&mut large.samples);
    let small_p99 = quantile(&mut small.samples, 0.99);
    let large_p99 = quantile(&mut large.samples, 0.99);
    let small_journal = median(&mut small.journal);
    let large_journal = median(&mut large.journal);
    Ok(vec![
        Row {
            id: "ack_by_size".into(),
            what: format!("roots.add acknowledged at {large_roots} roots vs at {SMALL}, p50"),
            unit: "µs",
            rootsd: large_p50,
            limit: Some(small_p50),
            limit_what: format!(
                "the same rename in a workspace of {SMALL} roots (rootsd, same run, taking turns)"
            ),
            samples: rounds,
            target: Target::ratio_at_most(1.25),
            note: Some(format!(
                "each change renames the workspace's first root; p99 {large_p99:.0} µs at {large_roots}, {small_p99:.0} µs at {SMALL}"
            )),
        },
        Row {
            id: "journal_bytes_by_size".into(),
            what: format!("journal bytes written per change at {large_roots} roots vs at {SMALL}"),
            unit: "B",
            rootsd: large_journal,
            limit: Some(small_journal),
            limit_what: format!("the same rename at {SMALL} roots (rootsd, same run)"),
            samples: large.journal.len(),
            target: Target::ratio_at_most(1.25),
            note: Some(format!(
                "median growth of roots.journal across one acknowledged change; database (what the daemon wrote besides the journal and its replies, per change over {byte_changes} changes, after sled settled): {:.0} B at {large_roots}, {:.0} B at {SMALL}",
                database[1], database[0]
            )),
        },
        Row {
            id: "db_bytes_by_size".into(),
            what: format!("database bytes written per change at {large_roots} roots vs at {SMALL}"),
            unit: "B",
            rootsd: database[1].max(1.0),
            limit: Some(database[0].max(1.0)),
            limit_what: format!("the same rename at {SMALL} roots (rootsd, same run)"),
            samples: byte_changes,
            target: Target::ratio_at_most(1.25),
            note: Some(format!(
                "bytes the daemon wrote (/proc/PID/io wchar) over {byte_changes} changes to one workspace, less the journal's growth and the replies, divided by {byte_changes}, with the daemon left idle before and after so that sled took and checkpointed them all"
            )),
        },
    ])
}

fn file_len(path: &Path) -> Result<u64> {
    Ok(std::fs::metadata(path)
        .with_context(|| format!("stat {}", path.display()))?
        .len())
}

/// Bytes process `pid` has passed to `write` and its kin so far (`wchar` in `/proc/PID/io`).
fn written_by(pid: i32) -> Result<u64> {
    let path = format!("/proc/{pid}/io");
    let io = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    io.lines()
        .find_map(|line| line.strip_prefix("wchar: "))
        .and_then(|n| n.trim().parse().ok())
        .with_context(|| format!("{path} has no wchar line"))
}
