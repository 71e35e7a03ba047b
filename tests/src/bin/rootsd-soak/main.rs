//! rootsd's soak: a bounded run under steady load, checking that nothing drifts.
//!
//! After a warm-up (`--warm-up`, 1,024 changes, see [`Writer::run`]), for `--seconds` (60 by
//! default) it keeps `--sessions` (1,000) registered MCP sessions on raw
//! control-protocol connections, changes the roots `--rate` (20) times a second, and starts and
//! stops real `rootsctl proxy` processes (`--proxies`, 4 at a time, each living 1 to 4 s) whose
//! scripted server is this binary (`rootsd-soak --mcp-server`). Then it checks that every
//! session and every proxy's server converges to the final list, that sessions which left are
//! gone, and that the daemon's memory (RSS) over the last 10 s is within `--tolerance` percent
//! (10) of the first 10 s. It prints a summary and exits 1 if any check failed.
//!
//! Run it from a release build: `cargo build --release --workspace --bins &&
//! target/release/rootsd-soak`. docs/RELIABILITY.md records its figures.

mod proxies;
mod server;
mod sessions;

use std::collections::BTreeSet;
use std::hash::{BuildHasher, RandomState};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rootsd_tests::{RawClient, Sandbox, memory, raise_fd_limit};
use serde_json::{Value, json};

/// The workspace the soak changes and every session follows.
const WORKSPACE: &str = "soak";
/// How many distinct roots the changes toggle, so that the list stays bounded.
const POOL: usize = 50;
/// The windows whose memory is compared.
const WINDOW: Duration = Duration::from_secs(10);
/// How long the sessions and the last proxies get to converge once the changes stop.
const CONVERGE_PATIENCE: Duration = Duration::from_secs(20);

struct Options {
    seconds: u64,
    sessions: usize,
    rate: u32,
    proxies: usize,
    tolerance_percent: f64,
    /// Changes made before the clock starts; by default as many as the daemon's watch feed
    /// keeps (1,024), so that it is full when memory is first measured.
    warm_up: u64,
}

impl Options {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut options = Self {
            seconds: 60,
            sessions: 1000,
            rate: 20,
            proxies: 4,
            tolerance_percent: 10.0,
            warm_up: 1024,
        };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
            match flag.as_str() {
                "--seconds" => options.seconds = value.parse().map_err(|e| bad(&e))?,
                "--sessions" => options.sessions = value.parse().map_err(|e| bad(&e))?,
                "--rate" => options.rate = value.parse().map_err(|e| bad(&e))?,
                "--proxies" => options.proxies = value.parse().map_err(|e| bad(&e))?,
                "--tolerance" => options.tolerance_percent = value.parse().map_err(|e| bad(&e))?,
                "--warm-up" => options.warm_up = value.parse().map_err(|e| bad(&e))?,
                other => {
                    return Err(format!(
                        "unknown option {other}; usage: rootsd-soak [--seconds N] [--sessions N] [--rate N] [--proxies N] [--tolerance PERCENT] [--warm-up CHANGES]"
                    ));
                }
            }
        }
        if options.rate == 0 || options.seconds == 0 {
            return Err("--seconds and --rate must be at least 1".to_owned());
        }
        Ok(options)
    }
}

/// A random number below `bound`.
fn random_below(bound: u64) -> u64 {
    RandomState::new().hash_one(Instant::now()) % bound.max(1)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--mcp-server") {
        return server::run();
    }
    let options = match Options::parse(&args) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("rootsd-soak: {message}");
            return ExitCode::from(2);
        }
    };
    if let Err(why) = raise_fd_limit(options.sessions as u64 + 256) {
        eprintln!("rootsd-soak: {why}");
        return ExitCode::from(2);
    }
    if soak(&options) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What the writer did.
struct Written {
    changes: u64,
    revision: u64,
    roots: BTreeSet<String>,
    /// Changes that started later than their slot by more than one interval.
    late: u64,
}

/// The only writer of the soak's workspace: it toggles roots of the pool, one change a request.
struct Writer {
    client: RawClient,
    written: Written,
    acks: sessions::AckTimes,
}

impl Writer {
    fn new(mut client: RawClient, acks: sessions::AckTimes) -> Self {
        let first: Value = client.request("roots.list", json!({"workspace": WORKSPACE}));
        let roots = first["result"]["roots"]
            .as_array()
            .expect("a roots list")
            .iter()
            .map(|r| r["uri"].as_str().expect("a uri").to_owned())
            .collect();
        Self {
            client,
            written: Written {
                changes: 0,
                revision: first["result"]["revision"].as_u64().expect("a revision"),
                roots,
                late: 0,
            },
            acks,
        }
    }

    /// Change number `n`: a scrambled walk through the pool, so that the list at any time is
    /// any subset of it.
    fn change(&mut self, n: u64) {
        let pick = (n.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize % POOL;
        let uri = pool_uri(pick);
        let (method, params) = if self.written.roots.contains(&uri) {
            (
                "roots.remove",
                json!({"workspace": WORKSPACE, "targets": [{"input": uri, "uri": uri}]}),
            )
        } else {
            (
                "roots.add",
                json!({"workspace": WORKSPACE, "roots": [{"uri": uri}]}),
            )
        };
        // The soak is the only writer, so the change will carry the next store revision.
        self.acks
            .lock()
            .expect("ack times")
            .insert(self.written.revision + 1, Instant::now());
        let reply = self.client.request(method, params);
        let revision = reply["result"]["revision"]
            .as_u64()
            .unwrap_or_else(|| panic!("{method} failed: {reply}"));
        assert_eq!(
            revision,
            self.written.revision + 1,
            "one revision per change"
        );
        self.written.revision = revision;
        if method == "roots.add" {
            self.written.roots.insert(uri);
        } else {
            self.written.roots.remove(&uri);
        }
    }

    /// Warms up, says when the clock starts, then makes `rate` changes a second for `duration`.
    fn run(
        mut self,
        options: (u32, Duration, u64),
        started: std::sync::mpsc::Sender<Instant>,
    ) -> Written {
        let (rate, duration, warm_up) = options;
        // Every bounded buffer at its bound before the clock starts: the whole pool at once
        // (every connection carries the longest list the run can produce), then as many changes
        // as the daemon's watch feed keeps.
        let pool: Vec<Value> = (0..POOL).map(|i| json!({"uri": pool_uri(i)})).collect();
        let reply = self
            .client
            .request("roots.add", json!({"workspace": WORKSPACE, "roots": pool}));
        self.written.revision = reply["result"]["revision"]
            .as_u64()
            .unwrap_or_else(|| panic!("warm-up failed: {reply}"));
        self.written.roots = (0..POOL).map(pool_uri).collect();
        for n in 0..warm_up {
            self.change(n);
        }
        let start = Instant::now();
        started.send(start).expect("the soak waits for the start");
        let interval = Duration::from_secs(1) / rate;
        for n in 0u32.. {
            let slot = start + interval * n;
            if slot >= start + duration {
                break;
            }
            let now = Instant::now();
            if slot > now {
                std::thread::sleep(slot - now);
            } else if now - slot > interval {
                self.written.late += 1;
            }
            self.change(warm_up + u64::from(n));
            self.written.changes += 1;
        }
        self.written
    }
}

fn pool_uri(index: usize) -> String {
    format!("file:///soak/pool/{index}")
}

/// Samples the daemon's RSS once a second until `stop`: (seconds since the start, KiB).
fn sample_memory(pid: i32, stop: Arc<AtomicBool>) -> Vec<(f64, u64)> {
    let start = Instant::now();
    let mut samples = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let Ok(now) = memory(pid as u32) else { break };
        samples.push((start.elapsed().as_secs_f64(), now.rss_kib));
        std::thread::sleep(Duration::from_secs(1));
    }
    samples
}

/// A thread with a name, so that `ps -L` shows where the soak spends its time.
fn named<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(work)
        .expect("start a thread")
}

fn mean(values: &[u64]) -> f64 {
    values.iter().sum::<u64>() as f64 / values.len().max(1) as f64
}

fn quantile_ms(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q) as usize] as f64 / 1000.0
}

/// Runs the soak; prints the summary and returns whether every check held.
fn soak(options: &Options) -> bool {
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon();
    let pid = daemon.pid();
    let duration = Duration::from_secs(options.seconds);
    let mut failures: Vec<String> = Vec::new();

    let registering = Instant::now();
    let streams = sessions::register(&sandbox.socket, options.sessions);
    println!(
        "rootsd soak: {} sessions registered in {:.1} s; {} s at {} changes/s with {} proxies at a time",
        options.sessions,
        registering.elapsed().as_secs_f64(),
        options.seconds,
        options.rate,
        options.proxies
    );

    let mut control = sandbox.connect();
    let stop = Arc::new(AtomicBool::new(false));
    let acks: sessions::AckTimes = Arc::default();
    let (finish, finished) = channel();
    let reader = {
        let (acks, stop) = (Arc::clone(&acks), Arc::clone(&stop));
        named("sessions", move || {
            sessions::read(streams, acks, finished, CONVERGE_PATIENCE, stop)
        })
    };
    let (started, start) = channel();
    let writer = {
        let writer = Writer::new(sandbox.connect(), Arc::clone(&acks));
        let plan = (options.rate, duration, options.warm_up);
        named("writer", move || writer.run(plan, started))
    };
    let warming = Instant::now();
    start
        .recv()
        .expect("the writer warms up and starts the clock");
    println!(
        "warm-up:        the pool of {POOL} roots, then {} changes, in {:.1} s",
        options.warm_up,
        warming.elapsed().as_secs_f64()
    );
    let memory = {
        let stop = Arc::clone(&stop);
        named("memory", move || sample_memory(pid, stop))
    };
    let tally = Arc::new(Mutex::new(proxies::Tally::default()));
    let live = std::thread::scope(|scope| {
        let churn = scope.spawn(|| {
            proxies::churn(
                &sandbox,
                options.proxies,
                Arc::clone(&stop),
                Arc::clone(&tally),
            )
        });
        let written = writer.join().expect("the writer finished");
        stop.store(true, Ordering::SeqCst);
        let live = churn.join().expect("the proxies' manager finished");
        (written, live)
    });
    let (written, mut live) = live;
    let changes_done = Instant::now();
    finish
        .send((written.revision, written.roots.clone(), changes_done))
        .expect("the reader waits for the final list");

    // The proxies still alive converge too: their servers hold the final list.
    for proxy in &mut live {
        let deadline = Instant::now() + CONVERGE_PATIENCE;
        loop {
            match proxy.server_roots() {
                Ok((roots, _)) if roots == written.roots => break,
                Ok((roots, _)) if Instant::now() > deadline => {
                    failures.push(format!(
                        "{}: its server holds {} roots, not the final {}",
                        proxy.label,
                        roots.len(),
                        written.roots.len()
                    ));
                    break;
                }
                Ok(_) => std::thread::sleep(Duration::from_millis(20)),
                Err(reason) => {
                    failures.push(reason);
                    break;
                }
            }
        }
    }
    let proxies_converged_after = changes_done.elapsed();
    let (report, connections) = reader.join().expect("the reader finished");
    let memory = memory.join().expect("the memory sampler finished");

    // Sessions that left are gone from the daemon; the live ones are there.
    let listed = listed_sessions(&mut control);
    if listed != options.sessions + live.len() {
        failures.push(format!(
            "rootsd lists {listed} sessions, not the {} registered plus {} live proxies",
            options.sessions,
            live.len()
        ));
    }
    drop(connections);
    let live_count = live.len();
    for proxy in live {
        if let Err(reason) = proxy.finish() {
            failures.push(reason);
        }
    }

    let tally = tally.lock().expect("the tally");
    failures.extend(tally.failures.iter().cloned());
    if report.converged != report.sessions {
        failures.push(format!(
            "{} of {} sessions did not converge to revision {} within {CONVERGE_PATIENCE:?}",
            report.sessions - report.converged,
            report.sessions,
            written.revision
        ));
    }

    let window = WINDOW.as_secs_f64();
    let total = memory.last().map_or(0.0, |(t, _)| *t);
    let first: Vec<u64> = memory
        .iter()
        .filter(|(t, _)| *t < window)
        .map(|(_, kib)| *kib)
        .collect();
    let last: Vec<u64> = memory
        .iter()
        .filter(|(t, _)| *t > total - window)
        .map(|(_, kib)| *kib)
        .collect();
    let (first_mean, last_mean) = (mean(&first), mean(&last));
    let growth = (last_mean / first_mean.max(1.0) - 1.0) * 100.0;
    if options.seconds >= 2 * WINDOW.as_secs() && growth > options.tolerance_percent {
        failures.push(format!(
            "daemon memory grew {growth:.1}% from the first to the last {window} s (tolerance {}%)",
            options.tolerance_percent
        ));
    }

    let judged = if options.seconds >= 2 * WINDOW.as_secs() {
        ""
    } else {
        " (not judged: the run is shorter than two windows)"
    };
    let mut latencies = report.latencies_us.clone();
    latencies.sort_unstable();
    println!(
        "changes:        {} in {:.1} s ({} late), final revision {}, {} roots",
        written.changes,
        duration.as_secs_f64(),
        written.late,
        written.revision,
        written.roots.len()
    );
    println!(
        "sessions:       {} of {} converged, {:.0} ms after the last change; {} pushes received",
        report.converged,
        report.sessions,
        report
            .converged_after
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3),
        report.pushes
    );
    println!(
        "push latency:   p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (request of the change to the session reading it)",
        quantile_ms(&latencies, 0.5),
        quantile_ms(&latencies, 0.99),
        quantile_ms(&latencies, 1.0)
    );
    println!(
        "proxies:        {} started, {} came and went cleanly, {live_count} live at the end converged within {:.0} ms",
        tally.started,
        tally.finished,
        proxies_converged_after.as_secs_f64() * 1e3
    );
    println!(
        "daemon RSS:     first {window} s mean {:.0} KiB, last {window} s mean {:.0} KiB ({growth:+.1}%), min {} KiB, max {} KiB over {} samples{judged}",
        first_mean,
        last_mean,
        memory.iter().map(|(_, k)| *k).min().unwrap_or(0),
        memory.iter().map(|(_, k)| *k).max().unwrap_or(0),
        memory.len()
    );
    let by_window: Vec<String> = memory
        .chunks(WINDOW.as_secs() as usize)
        .map(|chunk| {
            let kib: Vec<u64> = chunk.iter().map(|(_, k)| *k).collect();
            format!("{:.0}", mean(&kib))
        })
        .collect();
    println!("RSS by {window} s:   {} KiB", by_window.join(", "));
    drop(daemon);
    if failures.is_empty() {
        println!("result:         every check held");
        true
    } else {
        for failure in &failures {
            println!("FAILED:         {failure}");
        }
        false
    }
}

/// How many sessions the daemon lists, page by page: `sessions.list` answers in pages that fit
/// a line (`limits::SESSIONS_PAGE_BYTES`), so 1,000 sessions take more than one.
fn listed_sessions(control: &mut RawClient) -> usize {
    let mut listed = 0;
    let mut params = json!({});
    loop {
        let answer = control.request("sessions.list", params);
        let sessions = answer["result"]["sessions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        listed += sessions.len();
        let next = sessions.last().and_then(|session| session["id"].as_u64());
        match next {
            Some(last) if answer["result"]["more"] == true => params = json!({ "after": last }),
            _ => return listed,
        }
    }
}
