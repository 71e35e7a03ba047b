//! rootsd's benchmark: every figure against the limit, the cheapest program doing the same job,
//! run by this benchmark in the same run on the same machine. The limits and what each does are
//! in `docs/BENCHMARKS.md`; the programs are `limit-fanout`, `limit-relay`, and (in this
//! process) an fdatasync loop and a host answering `roots/list` from memory.
//!
//! ```text
//! cargo build --release --workspace --bins
//! target/release/rootsd-bench [--quick] [--json] [--check]
//! ```
//!
//! `--quick` uses fewer samples and smaller N (under a minute); `--json` prints the results as
//! JSON on stdout (the table then goes to stderr); `--check` exits with status 1, naming the
//! rows, when a target is missed. Progress goes to stderr.

mod by_size;
mod durable;
mod fanout;
mod hosts;
mod mcp;
mod procs;
mod relay;
mod report;
mod restart;
mod roots_list;
mod startup;
mod steady;

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use rootsd_tests::{Sandbox, bench_wire};

use crate::procs::{Control, uri_of};
use crate::report::Row;

const USAGE: &str = "usage: rootsd-bench [--quick] [--json] [--check] [--only PHASE[,PHASE...]]

  --quick       fewer samples and smaller N: a check that the benchmark works (under a minute)
  --json        print the results as JSON on stdout (the table goes to stderr)
  --check       exit with status 1 when a target is missed
  --only PHASES run only these phases, comma-separated, in the full run's order (fanout,
                relay, roots-list, durable, by-size, steady, startup, restart, hosts),
                e.g. to profile one, or one after the phase that precedes it

Build first: cargo build --release --workspace --bins";

#[derive(Clone, Copy, Debug)]
pub struct Mode {
    pub quick: bool,
}

const PHASES: [&str; 9] = [
    "fanout",
    "relay",
    "roots-list",
    "durable",
    "by-size",
    "steady",
    "startup",
    "restart",
    "hosts",
];

fn main() {
    let mut quick = false;
    let mut json = false;
    let mut check = false;
    let mut only = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--json" => json = true,
            "--check" => check = true,
            "--only" => {
                let phases = args.next().unwrap_or_default();
                let unknown = phases.split(',').find(|p| !PHASES.contains(p));
                if let Some(unknown) = unknown {
                    let what = match unknown {
                        "" => "a phase is missing".to_owned(),
                        _ => format!("no phase {unknown:?}"),
                    };
                    eprintln!(
                        "rootsd-bench: --only: {what}; give one or more of {}, separated by commas\n\n{USAGE}",
                        PHASES.join(", ")
                    );
                    std::process::exit(2);
                }
                only = Some(phases);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => {
                eprintln!("rootsd-bench: unknown argument {other:?}\n\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    let mode = Mode { quick };
    let started = Instant::now();
    let load_before = load_average();
    let rows = match run(mode, only.as_deref()) {
        Ok(rows) => rows,
        Err(err) => {
            eprintln!("rootsd-bench: {err:#}");
            std::process::exit(2);
        }
    };
    let wall = started.elapsed().as_secs_f64();
    let load = [load_before, load_average()];
    let mode_name = if quick { "quick" } else { "full" };
    let build = if cfg!(debug_assertions) {
        "; a debug build, so these figures say nothing about rootsd's speed"
    } else {
        ""
    };
    let table = format!(
        "rootsd-bench ({mode_name}, {} cores, {wall:.0} s, load average {:.1} → {:.1}{build})\n\n{}\n{}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        load[0],
        load[1],
        report::table(&rows),
        report::notes(&rows)
    );
    if json {
        eprintln!("{table}");
        println!(
            "{}",
            serde_json::to_string_pretty(&report::json(&rows, mode_name, wall, load))
                .expect("JSON always serialises")
        );
    } else {
        println!("{table}");
    }
    let missed: Vec<&str> = rows
        .iter()
        .filter(|r| !r.met())
        .map(|r| r.id.as_str())
        .collect();
    if check && !missed.is_empty() {
        eprintln!("rootsd-bench: targets missed: {}", missed.join(", "));
        std::process::exit(1);
    }
}

fn run(mode: Mode, only: Option<&str>) -> Result<Vec<Row>> {
    let phase = |name: &str| only.is_none_or(|o| o.split(',').any(|p| p == name));
    let largest = if mode.quick { 2_000 } else { 10_000 };
    rootsd_tests::raise_fd_limit(largest as u64 + 256)
        .map_err(|why| anyhow::anyhow!("{why}, or use --quick"))?;

    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon();
    // The workspace every proxied session of the relay, roots/list and start-up rows uses:
    // three roots, as a small project might have.
    let mut control = Control::connect(&sandbox.socket)?;
    for name in ["app", "lib", "docs"] {
        let uri = uri_of(&sandbox.mkdir(&format!("bench/{name}")));
        control.call(&bench_wire::add(1, "bench", &uri, name))?;
    }
    drop(control);
    // What a host that keeps the list in memory answers: exactly `rootsctl list --json`.
    let roots = Arc::new(
        sandbox
            .ctl_ok(&["list", "--json", "--workspace", "bench"])
            .trim()
            .to_owned(),
    );

    let mut rows = Vec::new();
    let mut memory_row = None;
    if phase("fanout") {
        eprintln!("fan-out and memory per session");
        let fan_sizes: &[(usize, usize)] = if mode.quick {
            &[(1_000, 20), (2_000, 0)]
        } else {
            &[(1_000, 40), (10_000, 15)]
        };
        for &(sessions, rounds) in fan_sizes {
            let result = fanout::run(sessions, rounds)?;
            if rounds > 0 {
                rows.push(result.row());
                rows.push(result.whole_row());
            }
            if sessions == largest {
                memory_row = Some(result.memory_row());
            }
        }
    }
    if phase("relay") {
        eprintln!("relay");
        rows.extend(relay::measure(&sandbox, mode, roots.clone())?);
    }
    if phase("roots-list") {
        eprintln!("roots/list");
        rows.extend(roots_list::measure(&sandbox, mode, roots.clone())?);
    }
    if phase("durable") {
        eprintln!("durable changes");
        rows.extend(durable::measure(&sandbox, mode)?);
    }
    if phase("by-size") {
        eprintln!("cost of a change by workspace size");
        rows.extend(by_size::measure(&sandbox, daemon.pid(), mode)?);
    }
    rows.extend(memory_row);
    if phase("steady") {
        eprintln!("daemon memory under steady changes");
        rows.push(steady::measure(mode)?);
    }
    if phase("startup") {
        eprintln!("start-up");
        rows.extend(startup::measure(&sandbox, mode, roots.clone())?);
    }
    if phase("restart") {
        eprintln!("restart");
        rows.push(restart::measure(&sandbox, mode, roots)?);
    }
    if phase("hosts") {
        eprintln!("rootsctl hosts wrap");
        rows.push(hosts::measure(&sandbox, mode)?);
    }
    Ok(rows)
}

/// The one-minute load average: how much else the machine was doing, for the reader of the
/// results (ratios hold up under load better than absolute figures, but not entirely).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}
