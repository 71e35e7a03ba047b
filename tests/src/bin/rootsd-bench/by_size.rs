//! The rows that say whether a change costs in proportion to what it changes rather than to the
//! workspace it changes: `roots.add` acknowledged at 2,000 roots against the same rename at 10
//! roots, and the journal and database bytes one such change writes at either size.
//!
//! Both workspaces live in the same daemon and take turns, round by round, so that both sides
//! see the same disk, the same neighbours and the same store (revision, history, journal
//! length). Every change renames the workspace's first root, so the workspaces keep their sizes
//! and each change is the same small edit whatever the size.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use rootsd_tests::{Sandbox, bench_wire};

use crate::Mode;
use crate::procs::{Control, journal_len, median, quantile, uri_of};
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
    // The database's bytes are sampled in windows: runs of changes to one workspace at a time,
    // each short enough that a compaction of the journal seldom falls in it (one that does is
    // left out), in turns at the two sizes.
    let byte_changes: usize = if mode.quick { 20 } else { 50 };
    let windows: usize = if mode.quick { 2 } else { 6 };
    eprintln!(
        "  {rounds} renames at {SMALL} and at {large_roots} roots, taking turns; {windows} windows of {byte_changes} more of each for the bytes"
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
    std::thread::sleep(SETTLE);
    for round in 0..rounds {
        for index in in_turn(round) {
            let side = &mut sides[index];
            let before = journal_len(sandbox)?;
            let start = Instant::now();
            side.control.call(&bench_wire::add(
                2,
                &side.workspace,
                &side.first,
                &format!("round-{round:05}"),
            ))?;
            side.samples.push(start.elapsed().as_secs_f64() * 1e6);
            let after = journal_len(sandbox)?;
            // A compaction rewrites the journal shorter; such a change's growth says nothing.
            if after > before {
                side.journal.push((after - before) as f64);
            }
        }
    }

    // What sled wrote: every byte the daemon wrote (its `wchar`, which counts `write` and
    // `pwrite` alike) less the journal's growth and the replies this connection read. db/'s
    // growth said nothing once sled reused the room of segments it had cleaned (it then grew by
    // 0 bytes at both sizes). sled writes a window's changes at the checkpoint after it, and
    // from time to time more (its segments' headers, pages it moves out of a segment it
    // cleans), so one window of 50 changes read anywhere from 490 to 740 B per change at the
    // same size: the sides take turns over several windows, and each side's bytes are its
    // windows' total over their changes.
    let mut database = [Bytes::default(), Bytes::default()];
    std::thread::sleep(SETTLE);
    for window in 0..windows {
        for index in in_turn(window) {
            let side = &mut sides[index];
            let (written, journaled, replied) = (
                written_by(daemon)?,
                journal_len(sandbox)?,
                side.control.received,
            );
            for change in 0..byte_changes {
                side.control.call(&bench_wire::add(
                    3,
                    &side.workspace,
                    &side.first,
                    &format!("bytes-{window:02}-{change:05}"),
                ))?;
            }
            std::thread::sleep(SETTLE);
            let journal_now = journal_len(sandbox)?;
            if journal_now < journaled {
                // A compaction rewrote the journal meanwhile: its bytes are not this window's.
                database[index].skipped += 1;
                continue;
            }
            let sled = (written_by(daemon)? - written)
                .saturating_sub(journal_now - journaled)
                .saturating_sub(side.control.received - replied);
            database[index].bytes += sled;
            database[index].changes += byte_changes as u64;
        }
    }
    let (small_db, large_db) = (database[0].per_change()?, database[1].per_change()?);
    let windows_note =
        format!("{windows} windows of {byte_changes} changes at each size, taking turns");

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
                "median growth of roots.journal across one acknowledged change; database (what the daemon wrote besides the journal and its replies, per change over {windows_note}, after sled settled): {large_db:.0} B at {large_roots}, {small_db:.0} B at {SMALL}"
            )),
        },
        Row {
            id: "db_bytes_by_size".into(),
            what: format!("database bytes written per change at {large_roots} roots vs at {SMALL}"),
            unit: "B",
            rootsd: large_db.max(1.0),
            limit: Some(small_db.max(1.0)),
            limit_what: format!("the same rename at {SMALL} roots (rootsd, same run)"),
            samples: windows * byte_changes,
            target: Target::ratio_at_most(1.25),
            note: Some(format!(
                "bytes the daemon wrote (/proc/PID/io wchar) over {windows_note}, less the journal's growth and the replies, divided by the changes, with the daemon left idle before and after each window so that sled took and checkpointed them all"
            )),
        },
    ])
}

/// The sides' order in round (or window) `k`: the small workspace first in even ones, the large
/// one in odd ones, so that neither always inherits the machine from the other.
fn in_turn(k: usize) -> [usize; 2] {
    if k.is_multiple_of(2) { [0, 1] } else { [1, 0] }
}

/// One side's database bytes over its windows.
#[derive(Default)]
struct Bytes {
    bytes: u64,
    changes: u64,
    /// Windows a compaction of the journal fell in, which say nothing.
    skipped: usize,
}

impl Bytes {
    fn per_change(&self) -> Result<f64> {
        ensure!(
            self.changes > 0,
            "the journal was compacted in every window ({}) while the database's bytes were counted; run the phase again",
            self.skipped
        );
        Ok(self.bytes as f64 / self.changes as f64)
    }
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
