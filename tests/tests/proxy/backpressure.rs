//! A host that stops reading while its server streams: the proxy must stop reading the server
//! rather than hold the stream, so the server blocks and the proxy's memory stays bounded; when
//! the host reads again, everything arrives intact and in order.

use std::time::{Duration, Instant};

use rootsd_tests::{PATIENCE, Sandbox, eventually};
use serde_json::json;

use crate::support::{FakeLog, Proxy, fake_server};

/// What the fake streams: 200 lines of 1 MiB.
const LINES: usize = 200;
const LINE_DATA: usize = 1 << 20;
/// The proxy queues at most 4 MiB for the host (`QUEUE_HIGH_WATER`) plus the line it is reading;
/// with a pipe on each side and the line the fake is blocked writing, the fake gets no further
/// than this many lines ahead of a host that reads nothing.
const MOST_AHEAD: usize = 8;
/// Far above what the proxy needs (a debug build idles at a few MiB and streams in well under
/// 32), far below the 200 MiB it would hold if it buffered the stream.
const MOST_RESIDENT_KIB: u64 = 64 << 10;
/// How long the fake must make no progress to count as blocked.
const STILL_FOR: Duration = Duration::from_secs(1);

/// The highest `fake-mcp: flooded N` the fake has said.
fn flooded(proxy: &Proxy) -> usize {
    proxy
        .stderr()
        .lines()
        .filter_map(|l| l.strip_prefix("fake-mcp: flooded ")?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// The peak resident memory of process `pid` (`VmHWM`), in KiB.
fn peak_resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in /proc/{pid}/status:\n{status}"))
}

/// The line the fake writes for chunk `seq` (see the script).
fn chunk(seq: usize) -> Vec<u8> {
    let fill = b'a' + (seq % 26) as u8;
    let mut line =
        format!(r#"{{"jsonrpc":"2.0","method":"test/chunk","params":{{"seq":{seq},"data":""#)
            .into_bytes();
    // `vec!` of a byte is a memset, fast even in a debug build.
    line.extend_from_slice(&vec![fill; LINE_DATA]);
    line.extend_from_slice(b"\"}}");
    line
}

#[test]
fn a_host_that_stops_reading_blocks_the_server_and_the_proxy_stays_small() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let log = FakeLog::new(&sb, "fake");
    let mut cmd = sb.rootsctl();
    cmd.arg("proxy").arg("--").args(fake_server("quiet", &log));
    let mut proxy = Proxy::spawn_paused(cmd);

    proxy.notify("test/flood", json!({"count": LINES, "size": LINE_DATA}));
    let mut last = (0, Instant::now());
    let ahead = eventually(
        "the fake to block on a host that reads nothing",
        PATIENCE,
        || {
            let now = flooded(&proxy);
            if now != last.0 {
                last = (now, Instant::now());
            }
            if now > 0 && last.1.elapsed() >= STILL_FOR {
                Ok(now)
            } else {
                Err(format!("{now} lines written so far"))
            }
        },
    );
    assert!(
        ahead <= MOST_AHEAD,
        "the fake wrote {ahead} lines of 1 MiB to a host that read none: the proxy holds them"
    );
    let peak = peak_resident_kib(proxy.pid());
    assert!(
        peak < MOST_RESIDENT_KIB,
        "the proxy grew to {peak} KiB holding a stream for a host that does not read"
    );

    proxy.resume_reading();
    for seq in 0..LINES {
        let line = proxy.next_raw_line();
        assert!(
            line == chunk(seq),
            "line {seq} is not the fake's chunk {seq}: {} bytes starting {:?}",
            line.len(),
            String::from_utf8_lossy(&line[..line.len().min(80)])
        );
    }
    let end = proxy.next_message();
    assert_eq!(
        end,
        json!({"jsonrpc": "2.0", "method": "test/flooded", "params": {"count": LINES}})
    );
    // The fake's count travels on stderr, another pipe, which may lag its stdout.
    eventually("the fake to count every line", PATIENCE, || {
        match flooded(&proxy) {
            LINES => Ok(()),
            other => Err(other),
        }
    });
    let peak = peak_resident_kib(proxy.pid());
    assert!(
        peak < MOST_RESIDENT_KIB,
        "the proxy grew to {peak} KiB passing the stream on"
    );
}
