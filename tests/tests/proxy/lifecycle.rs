//! The proxy as a process: signals it forwards, and MCP's stdio shutdown when a server lingers.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use rootsd_tests::Sandbox;

use crate::support::{FakeSession, FakeSetup, Proxy};

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
