//! The start-up rows.
//!
//! Daemon cold start: from spawning rootsd (on a state directory that already holds roots) until
//! its socket answers `hello`, against `limit-fanout` with no listeners, the cheapest process
//! that binds a socket and answers a line on it. Both are found by the same tight connect loop.
//!
//! Proxy start-up: from spawning until the host has the answer to `initialize`, through
//! `rootsctl proxy` minus straight from `bench-server`, against the same through `limit-relay`.
//! The three take turns.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use rootsd_tests::{Sandbox, bench_wire};

use crate::Mode;
use crate::mcp::{Mcp, Via};
use crate::procs::{PATIENCE, helper, median, rootsd_first, uri_of};
use crate::report::{Row, Target};

pub fn measure(sandbox: &Sandbox, mode: Mode, roots: Arc<String>) -> Result<Vec<Row>> {
    let samples = if mode.quick { 9 } else { 21 };
    eprintln!(
        "  {samples} cold starts of rootsd and of the limit; {samples} session starts each way"
    );
    let cold = Sandbox::new();
    {
        // A state directory with a workspace in it, as a restart finds it.
        let _daemon = cold.start_daemon();
        let mut control = crate::procs::Control::connect(&cold.socket)?;
        control.call(&bench_wire::add(
            1,
            "default",
            &uri_of(&cold.mkdir("project")),
            "project",
        ))?;
    }
    let limit_socket = cold.path().join("limit.sock");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for turn in 0..samples {
        for rootsd in rootsd_first(turn) {
            if rootsd {
                let mut cmd = cold.rootsd();
                cmd.env("RUST_LOG", "warn");
                ours.push(cold_start(cmd, &cold.socket, &bench_wire::hello(0), |l| {
                    bench_wire::is_success(l)
                })?);
            } else {
                let _ = std::fs::remove_file(&limit_socket);
                let mut cmd = helper("limit-fanout");
                cmd.arg(&limit_socket).arg("0");
                theirs.push(cold_start(cmd, &limit_socket, "hello", |l| l == "ok")?);
            }
        }
    }

    let (mut direct, mut proxied, mut relayed) = (Vec::new(), Vec::new(), Vec::new());
    for turn in 0..samples {
        let mut order = [Via::Direct, Via::Proxy, Via::LimitRelay];
        order.rotate_left(turn % 3);
        for via in order {
            let start = Instant::now();
            let mut session = Mcp::spawn(sandbox, via, "bench", roots.clone())?;
            session.initialize()?;
            let ms = start.elapsed().as_secs_f64() * 1e3;
            match via {
                Via::Direct => direct.push(ms),
                Via::Proxy => proxied.push(ms),
                Via::LimitRelay => relayed.push(ms),
                Via::ProxyTemplated | Via::LimitRootsProxy => {
                    unreachable!("not in this row's order")
                }
            }
        }
    }
    let direct = median(&mut direct);
    let added_by_proxy = median(&mut proxied) - direct;
    let added_by_relay = median(&mut relayed) - direct;

    let (ours, theirs) = (median(&mut ours), median(&mut theirs));
    Ok(vec![
        Row {
            id: "daemon_cold_start".into(),
            what: "daemon cold start: spawn → hello answered, median".into(),
            unit: "ms",
            rootsd: ours,
            limit: Some(theirs),
            limit_what: "limit-fanout with no listeners: spawn, bind, answer a line".into(),
            samples,
            target: Target::ratio_at_most(COLD_START_RATIO),
            note: Some(
                "state dir with one workspace; target: keep today's figure (~20 ms in the issue), as a ratio so that machine load cancels out"
                    .into(),
            ),
        },
        Row {
            id: "proxy_start_added".into(),
            what: "proxy's added start-up: initialize answered, median".into(),
            unit: "ms",
            rootsd: added_by_proxy,
            limit: Some(added_by_relay),
            limit_what: "limit-relay's added start-up (both minus the server started directly)"
                .into(),
            samples,
            target: Target::ratio_at_most(PROXY_START_RATIO),
            note: Some(format!(
                "server alone {direct:.2} ms; target: keep today's figure (~6 ms in the issue), as a ratio so that machine load cancels out"
            )),
        },
    ])
}

/// "Keep them", says the issue of today's start-up figures. Absolute milliseconds move with the
/// machine's load (a busy 2-core machine doubles them), so the targets are today's ratios
/// against the limits (cold start 3.7–7, proxy 1.6–2.4 over the runs in docs/BENCHMARKS.md)
/// with room for noise: a regression well beyond that is what they catch.
const COLD_START_RATIO: f64 = 8.0;
const PROXY_START_RATIO: f64 = 3.0;

/// Spawns `cmd` and returns the milliseconds until a connection to `socket` gets an answer to
/// `line` that `answered` accepts. The process is stopped with SIGTERM afterwards (not timed).
fn cold_start(
    mut cmd: Command,
    socket: &Path,
    line: &str,
    answered: impl Fn(&str) -> bool,
) -> Result<f64> {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("spawn a daemon")?;
    let result = (|| {
        let stream = loop {
            match UnixStream::connect(socket) {
                Ok(stream) => break stream,
                Err(_) if start.elapsed() < PATIENCE => {
                    if let Some(status) = child.try_wait()? {
                        bail!("{cmd:?} exited ({status}) before answering");
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err(err) => bail!("{cmd:?} did not answer on {}: {err}", socket.display()),
            }
        };
        stream.set_read_timeout(Some(PATIENCE))?;
        (&stream).write_all(format!("{line}\n").as_bytes())?;
        let mut answer = String::new();
        BufReader::new(&stream).read_line(&mut answer)?;
        let elapsed = start.elapsed().as_secs_f64() * 1e3;
        ensure!(answered(answer.trim_end()), "unexpected answer {answer:?}");
        Ok(elapsed)
    })();
    stop(&mut child)?;
    result
}

fn stop(child: &mut Child) -> Result<()> {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("a real pid");
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let deadline = Instant::now() + PATIENCE;
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("a daemon did not stop after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}
