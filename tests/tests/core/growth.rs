//! The store stays within a small multiple of its live data whatever the write pattern: here,
//! one connection that sends each change as soon as the last is acknowledged, which never leaves
//! the commit thread a moment with nothing in flight.

use rootsd_tests::Sandbox;
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
