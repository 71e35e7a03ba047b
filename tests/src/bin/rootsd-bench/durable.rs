//! The durable-change rows. One writer: a raw `roots.add` round trip (acknowledged only once on
//! disk) against the limit, appending 100 bytes to a file on the state directory's filesystem
//! and calling fdatasync. Many writers: 50 connections sending one `roots.add` each at once,
//! until the last is acknowledged, against one `roots.add` alone. Turns alternate so that both
//! sides see the same disk and the same neighbours.
//!
//! Beside the many writers, the same two measures of the cheapest program doing a group commit's
//! I/O (`limit-group-commit`: one poll loop, one write and `fdatasync` per group of lines, then an
//! answer each), whose own ratio the row's note reports: how close to the target any server
//! gets on this machine.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::MetadataExt as _;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use rootsd_tests::{Sandbox, bench_wire};

use crate::Mode;
use crate::procs::{Control, LineChild, helper, quantile, record_of, uri_of};
use crate::report::{Row, Target};

const WRITERS: usize = 50;
/// What the limit appends per change: about the size of one small workspace's record.
const RECORD: &[u8; 100] = &[b'r'; 100];

pub fn measure(sandbox: &Sandbox, mode: Mode) -> Result<Vec<Row>> {
    let rounds: usize = if mode.quick { 100 } else { 300 };
    // Every fifth round also times the 50 concurrent writers.
    let concurrent_every = 5;
    eprintln!(
        "  {rounds} single roots.add and fdatasync, {} rounds of {WRITERS} concurrent roots.add",
        rounds / concurrent_every
    );

    // One workspace and one root per writer, so that every change is the same small record.
    let mut writers = Vec::with_capacity(WRITERS);
    for k in 0..WRITERS {
        let dir = sandbox.mkdir(&format!("durable/{k}"));
        let workspace = format!("durable-{k}");
        let uri = uri_of(&dir);
        let mut control = Control::connect(&sandbox.socket)?;
        control.call(&bench_wire::add(1, &workspace, &uri, "start"))?;
        writers.push((control, workspace, uri));
    }

    let limit_dir = sandbox.path().join("limit-fsync");
    std::fs::create_dir_all(&limit_dir)?;
    ensure!(
        std::fs::metadata(&limit_dir)?.dev() == std::fs::metadata(&sandbox.state)?.dev(),
        "the fdatasync limit must run on the state directory's filesystem"
    );
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(limit_dir.join("log"))
        .context("open the fdatasync limit's file")?;

    let mut cheapest = CheapestGroupCommit::start(sandbox, &limit_dir, &mut writers[0])?;

    let (mut single, mut fsync, mut concurrent) = (Vec::new(), Vec::new(), Vec::new());
    let (mut cheapest_single, mut cheapest_concurrent) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let name = format!("round-{round:05}");
        let (control, workspace, uri) = &mut writers[0];
        // Each request is made before the clock starts: what is timed is rootsd's work and the
        // writes and reads any client does, not this benchmark's formatting of the requests
        // (about 3 µs each, with serde_json's `json!`), which fifty concurrent requests paid
        // fifty times against the single add's once.
        let line = bench_wire::add(2, workspace, uri, &name);
        let start = Instant::now();
        control.call(&line)?;
        single.push(start.elapsed().as_secs_f64() * 1e6);

        let start = Instant::now();
        cheapest.writers[0].call(&line)?;
        cheapest_single.push(start.elapsed().as_secs_f64() * 1e6);

        let start = Instant::now();
        log.write_all(RECORD)?;
        log.sync_data().context("fdatasync")?;
        fsync.push(start.elapsed().as_secs_f64() * 1e6);

        if round.is_multiple_of(concurrent_every) {
            let renamed = format!("{name}-c");
            let lines: Vec<String> = writers
                .iter()
                .map(|(_, workspace, uri)| bench_wire::add(3, workspace, uri, &renamed))
                .collect();
            // rootsd first in even bursts, the cheapest program first in odd ones.
            let rootsd_first = (round / concurrent_every).is_multiple_of(2);
            for turn in 0..2 {
                if (turn == 0) == rootsd_first {
                    let ours = writers.iter_mut().map(|(control, _, _)| control);
                    concurrent.push(burst(ours, &lines)?);
                } else {
                    cheapest_concurrent.push(burst(&mut cheapest.writers, &lines)?);
                }
            }
        }
    }

    let single_p50 = quantile(&mut single, 0.5);
    let single_p99 = quantile(&mut single, 0.99);
    let fsync_p99 = quantile(&mut fsync, 0.99);
    let concurrent_p99 = quantile(&mut concurrent, 0.99);
    let cheapest_single_p50 = quantile(&mut cheapest_single, 0.5);
    let cheapest_concurrent_p50 = quantile(&mut cheapest_concurrent, 0.5);
    Ok(vec![
        Row {
            id: "durable_add_p50".into(),
            what: "roots.add acknowledged (durable), one writer, p50".into(),
            unit: "µs",
            rootsd: single_p50,
            limit: Some(quantile(&mut fsync, 0.5)),
            limit_what: "append 100 bytes + fdatasync, same filesystem as the state dir".into(),
            samples: rounds,
            target: Target::ratio_at_most(2.0),
            note: Some(format!(
                "p99: rootsd {single_p99:.0} µs, limit {fsync_p99:.0} µs"
            )),
        },
        Row {
            id: "durable_add_concurrent".into(),
            what: format!("{WRITERS} concurrent roots.add, all acknowledged, p50"),
            unit: "µs",
            rootsd: quantile(&mut concurrent, 0.5),
            limit: Some(single_p50),
            limit_what: "one roots.add alone (rootsd, same run): the target is group commit".into(),
            samples: concurrent.len(),
            target: Target::ratio_at_most(3.0),
            note: Some(format!(
                "{WRITERS} connections, each renaming a root of its own workspace; p99 {concurrent_p99:.0} µs; \
                 the cheapest program doing a group commit's I/O (limit-group-commit: one poll loop, \
                 one write and fdatasync of {} B a line per group, a {} B answer each): {cheapest_concurrent_p50:.0} µs \
                 for {WRITERS} against {cheapest_single_p50:.0} µs for one, {:.2}",
                cheapest.record_bytes,
                cheapest.answer_bytes,
                cheapest_concurrent_p50 / cheapest_single_p50
            )),
        },
    ])
}

/// Sends every line at once, one per connection, and times until every connection has its
/// answer.
fn burst<'a>(writers: impl IntoIterator<Item = &'a mut Control>, lines: &[String]) -> Result<f64> {
    let mut writers: Vec<&mut Control> = writers.into_iter().collect();
    let start = Instant::now();
    for (control, line) in writers.iter_mut().zip(lines) {
        control.send(line)?;
    }
    for control in &mut writers {
        control.expect_success()?;
    }
    Ok(start.elapsed().as_secs_f64() * 1e6)
}

/// `limit-group-commit`, running, with as many connections as rootsd's writers, writing and
/// answering what rootsd writes and answers for the same change.
struct CheapestGroupCommit {
    _server: LineChild,
    writers: Vec<Control>,
    record_bytes: u64,
    answer_bytes: u64,
}

impl CheapestGroupCommit {
    /// Measures what one change makes rootsd write (its journal's growth) and answer, with a
    /// change of `writer`'s that is not timed, and starts the program with those sizes.
    fn start(
        sandbox: &Sandbox,
        dir: &std::path::Path,
        (writer, workspace, uri): &mut (Control, String, String),
    ) -> Result<Self> {
        let received = writer.received;
        let ((), record_bytes) = record_of(sandbox, || {
            writer.call(&bench_wire::add(2, workspace, uri, "measured"))
        })?;
        let answer_bytes = writer.received - received;
        let socket = sandbox.path().join("group-commit.sock");
        let mut cmd = helper("limit-group-commit");
        cmd.arg(&socket)
            .arg(dir.join("group"))
            .arg(record_bytes.to_string())
            .arg(answer_bytes.to_string());
        let mut server = LineChild::spawn(cmd, "limit-group-commit")?;
        server.expect_line("ready")?;
        let writers = (0..WRITERS)
            .map(|_| Control::connect(&socket))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            _server: server,
            writers,
            record_bytes,
            answer_bytes,
        })
    }
}
