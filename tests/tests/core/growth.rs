//! The store stays within a small multiple of its live data whatever the write pattern: here,
//! one connection that sends each change as soon as the last is acknowledged, which never leaves
//! the commit thread a moment with nothing in flight. And the daemon's memory comes back near
//! where it was after a flood of `log` requests.

use rootsd_tests::{PATIENCE, Sandbox};
use serde_json::json;

use crate::store::{listed, stop};

#[test]
fn back_to_back_writes_on_one_connection_keep_the_journal_bounded() {
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    let mut client = sb.connect();
    // A workspace of 300 roots of about 100 bytes: each change's record holds all of them.
    let pad = "p".repeat(70);
    let roots: Vec<_> = (0..300)
        .map(|i| json!({"uri": format!("file:///growth/{pad}/{i:03}")}))
        .collect();
    let reply = client.request("roots.add", json!({"roots": roots}));
    assert!(reply.get("result").is_some(), "{reply}");
    let journal = sb.state.join("roots.journal");
    let extra = "file:///growth/extra";
    let mut largest = 0;
    // About 9 MiB of records in all, without compaction.
    for n in 0..300 {
        let reply = if n % 2 == 0 {
            client.request("roots.add", json!({"roots": [{"uri": extra}]}))
        } else {
            client.request(
                "roots.remove",
                json!({"targets": [{"input": extra, "uri": extra}]}),
            )
        };
        assert!(reply.get("result").is_some(), "change {n}: {reply}");
        largest = largest.max(std::fs::metadata(&journal).unwrap().len());
    }
    // Compaction comes past 1 MiB of records after the snapshot (or twice the snapshot), plus
    // the records of the batch in flight.
    assert!(
        largest < 3 << 20,
        "the journal reached {largest} bytes for about 30 kB of roots"
    );
    drop(client);
    stop(daemon);
    let _restarted = sb.start_daemon();
    assert_eq!(listed(&sb).len(), 300);
}

/// The daemon's resident memory, in MiB.
fn resident_mib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("rootsd's status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib / 1024
}

#[test]
fn a_flood_of_log_requests_leaves_no_memory_held_once_its_peers_leave() {
    let sb = Sandbox::new();
    // Sixteen workers, as on a machine of sixteen cores, so that the flood's requests are
    // answered side by side here too; each worker's allocations stay in its own arena.
    let mut cmd = sb.rootsd();
    cmd.env("TOKIO_WORKER_THREADS", "16");
    let daemon = sb.start_daemon_with(cmd);
    // The largest history: 1,000 entries listing about 15 KiB of roots each.
    let pad = "p".repeat(230);
    let uris: Vec<String> = (0..60)
        .map(|i| format!("file:///flood/{pad}/{i:03}"))
        .collect();
    let roots: Vec<_> = uris.iter().map(|uri| json!({"uri": uri})).collect();
    let targets: Vec<_> = uris
        .iter()
        .map(|uri| json!({"input": uri, "uri": uri}))
        .collect();
    let mut client = sb.connect();
    for n in 0..1000 {
        let reply = if n % 2 == 0 {
            client.request("roots.add", json!({"roots": roots}))
        } else {
            client.request("roots.remove", json!({"targets": targets}))
        };
        assert!(reply.get("result").is_some(), "change {n}: {reply}");
    }
    drop(client);
    let baseline = resident_mib(daemon.pid());
    // 32 peers, each asking for the whole log 8 times (one page of 256 KiB each), then leaving.
    let peers: Vec<_> = (0..32)
        .map(|_| {
            let mut peer = sb.connect();
            std::thread::spawn(move || {
                for _ in 0..8 {
                    let reply = peer.request("log", json!({}));
                    assert!(reply.get("result").is_some(), "{reply}");
                }
            })
        })
        .collect();
    for peer in peers {
        peer.join().expect("a peer's log requests");
    }
    // Before, each request copied the whole history (about 20 MiB) to answer a page of it, and
    // the allocator kept what sixteen workers had copied: 61 to 86 MiB more once the peers had
    // left, in our runs. Now a request copies about a page: 19 to 30 MiB more (the arenas keep
    // what the pages' answers took).
    let allowed = 45;
    let held = rootsd_tests::eventually("rootsd to give back the flood's memory", PATIENCE, || {
        let now = resident_mib(daemon.pid());
        if now <= baseline + allowed {
            Ok(now)
        } else {
            Err(format!(
                "{now} MiB resident, {baseline} MiB before the flood (at most {allowed} MiB more)"
            ))
        }
    });
    eprintln!("{baseline} MiB before the flood, {held} MiB after its peers left");
    stop(daemon);
}
