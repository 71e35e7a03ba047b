//! The proxy as a process: signals it forwards, MCP's stdio shutdown when a server lingers or
//! leaves early, a server's own children, and a proxy that dies without a word.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use rootsd_tests::{PATIENCE, Sandbox, eventually};
use rustix::process::Signal;
use serde_json::json;

use crate::support::{FakeSession, FakeSetup, Proxy, wait_for_no_sessions};

#[test]
fn a_signal_to_the_proxy_reaches_the_server() {
    let mut fake = FakeSession::start("quiet", FakeSetup::default());
    let proxy = &mut fake.proxy;
    proxy.initialize();
    let pid = rustix::process::Pid::from_raw(proxy.pid() as i32).expect("a real pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("signal the proxy");
    let status = proxy.wait_exit();
    // The fake does not handle SIGTERM, so it dies of it, and the proxy reports that as shells
    // do: 128 + 15. Had the proxy died of the signal itself, there would be no exit code.
    assert_eq!(
        status.code(),
        Some(143),
        "stderr:\n{}",
        proxy.final_stderr()
    );
}

#[test]
fn a_server_that_ignores_its_closed_stdin_gets_sigterm() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    // `sleep` never reads stdin, so only the proxy's escalation can end it.
    let server: Vec<OsString> = vec!["sleep".into(), "60".into()];
    let mut proxy = Proxy::spawn(&sb, &[], &server);
    let started = Instant::now();
    proxy.close_stdin();
    let status = proxy.wait_exit();
    assert_eq!(
        status.code(),
        Some(143),
        "stderr:\n{}",
        proxy.final_stderr()
    );
    assert!(
        proxy.final_stderr().contains("sending SIGTERM"),
        "the proxy says why it signalled:\n{}",
        proxy.final_stderr()
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "escalation took {:?}",
        started.elapsed()
    );
}

/// How long the proxy waits for a server's stdout to close after the server exited
/// (`OUTPUT_GRACE` in proxy/src/running.rs): a proxy that took this long waited for it.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);
/// After the server's stdin closed, how long before SIGTERM (`EXIT_GRACE`).
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// After SIGTERM, how long before SIGKILL (`TERM_GRACE`).
const TERM_GRACE: Duration = Duration::from_secs(3);
/// Leeway for a loaded machine on top of a grace the proxy must respect.
const LEEWAY: Duration = Duration::from_secs(3);

/// A handshake-era session with the fake in `quiet`, initialized and registered, started with
/// `server_args`.
fn quiet_session(server_args: &'static [&'static str]) -> FakeSession {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            server_args,
            ..FakeSetup::default()
        },
    );
    fake.proxy.initialize();
    fake.registered();
    fake
}

/// The pid the fake reported on stderr as `fake-mcp: WHAT N`.
#[track_caller]
fn reported_pid(proxy: &Proxy, what: &str) -> i32 {
    let prefix = format!("fake-mcp: {what} ");
    eventually(&format!("the fake to report its {what}"), PATIENCE, || {
        let stderr = proxy.stderr();
        stderr
            .lines()
            .find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
            .ok_or(stderr)
    })
}

/// Whether process `pid` is still running (a zombie has ended).
fn running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold anything.
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
    !matches!(state.and_then(|s| s.chars().next()), Some('Z' | 'X') | None)
}

fn signal(pid: i32, signal: Signal) {
    let pid = rustix::process::Pid::from_raw(pid).expect("a real pid");
    rustix::process::kill_process(pid, signal).expect("send a signal");
}

/// Kills a process the fake started, however the test ends.
struct Stray(i32);

impl Drop for Stray {
    fn drop(&mut self) {
        if running(self.0) {
            let _ = rustix::process::Pid::from_raw(self.0)
                .map(|pid| rustix::process::kill_process(pid, Signal::KILL));
        }
    }
}

#[test]
fn a_server_that_exits_under_a_connected_host_ends_the_proxy_with_its_status_at_once() {
    let mut fake = quiet_session(&[]);
    let (sb, proxy) = (&fake.sb, &mut fake.proxy);
    // The host keeps its end open: the server alone ends the session.
    let started = Instant::now();
    proxy.notify("test/exit", json!({"code": 3}));
    let status = proxy.wait_exit();
    let took = started.elapsed();
    let stderr = proxy.final_stderr();
    assert_eq!(status.code(), Some(3), "stderr:\n{stderr}");
    assert!(
        took < OUTPUT_GRACE,
        "took {took:?}: the server's stdout closed with it, nothing to wait for\n{stderr}"
    );
    assert!(!stderr.contains("still holds its stdout"), "{stderr}");
    wait_for_no_sessions(sb);
}

#[test]
fn a_server_that_closes_stdout_but_keeps_running_gets_its_stdin_closed_then_sigterm_then_sigkill() {
    let mut fake = quiet_session(&[]);
    let (sb, proxy) = (&fake.sb, &mut fake.proxy);
    let server = reported_pid(proxy, "pid");
    let started = Instant::now();
    // From now on the fake ignores SIGTERM and, past the end of its stdin, sleeps.
    proxy.notify("test/close_stdout", json!({}));
    let status = proxy.wait_exit();
    let took = started.elapsed();
    let stderr = proxy.final_stderr();
    assert_eq!(status.code(), Some(128 + 9), "stderr:\n{stderr}");
    for said in [
        "fake-mcp: closed stdout",
        "fake-mcp: stdin closed",
        "sending SIGTERM",
        "fake-mcp: ignoring SIGTERM",
        "sending SIGKILL",
    ] {
        assert!(stderr.contains(said), "no {said:?} in:\n{stderr}");
    }
    assert!(
        took >= EXIT_GRACE + TERM_GRACE - Duration::from_millis(500),
        "took {took:?}: the server had less than its graces\n{stderr}"
    );
    assert!(
        took < EXIT_GRACE + TERM_GRACE + LEEWAY,
        "took {took:?}\n{stderr}"
    );
    assert!(!running(server), "the server {server} still runs");
    wait_for_no_sessions(sb);
}

#[test]
fn a_server_that_ignores_the_sigterm_passed_on_is_killed_after_its_grace() {
    let mut fake = quiet_session(&["--ignore-term"]);
    let proxy = &mut fake.proxy;
    let server = reported_pid(proxy, "pid");
    let started = Instant::now();
    signal(proxy.pid() as i32, Signal::TERM);
    let status = proxy.wait_exit();
    let took = started.elapsed();
    let stderr = proxy.final_stderr();
    assert_eq!(status.code(), Some(128 + 9), "stderr:\n{stderr}");
    assert!(stderr.contains("fake-mcp: ignoring SIGTERM"), "{stderr}");
    assert!(stderr.contains("sending SIGKILL"), "{stderr}");
    assert!(
        took >= TERM_GRACE - Duration::from_millis(500),
        "took {took:?}: killed before its grace\n{stderr}"
    );
    assert!(took < TERM_GRACE + LEEWAY, "took {took:?}\n{stderr}");
    assert!(!running(server), "the server {server} still runs");
}

#[test]
fn a_grandchild_holding_the_servers_stdout_ends_with_the_server_and_does_not_keep_the_proxy_running()
 {
    let mut fake = quiet_session(&[]);
    let (sb, proxy) = (&fake.sb, &mut fake.proxy);
    let started = Instant::now();
    proxy.notify("test/spawn_grandchild", json!({"code": 5}));
    let grandchild = Stray(reported_pid(proxy, "grandchild pid"));
    let status = proxy.wait_exit();
    let took = started.elapsed();
    let stderr = proxy.final_stderr();
    assert_eq!(status.code(), Some(5), "stderr:\n{stderr}");
    assert!(took < OUTPUT_GRACE + LEEWAY, "took {took:?}\n{stderr}");
    // The server's keeper ends what the server left running as the server exits, and with it
    // goes the grandchild's hold on the pipe.
    eventually("the grandchild to be gone", LEEWAY, || {
        if running(grandchild.0) {
            Err(format!("{} still runs", grandchild.0))
        } else {
            Ok(())
        }
    });
    wait_for_no_sessions(sb);
}

#[test]
fn a_proxy_killed_with_sigkill_takes_its_server_with_it() {
    // Without the death signal this server would live on: it outlives the end of its stdin.
    let mut fake = quiet_session(&["--linger"]);
    let (sb, proxy) = (&fake.sb, &mut fake.proxy);
    let server = reported_pid(proxy, "pid");
    let cmdline = std::fs::read(format!("/proc/{server}/cmdline")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("fake_mcp_server.py"),
        "pid {server} is not the fake: {cmdline:?}"
    );
    let _stray = Stray(server);
    signal(proxy.pid() as i32, Signal::KILL);
    proxy.wait_exit();
    eventually(
        "the server to die with its proxy",
        Duration::from_secs(5),
        || {
            if running(server) {
                Err(format!("{server} still runs"))
            } else {
                Ok(())
            }
        },
    );
    wait_for_no_sessions(sb);
}
