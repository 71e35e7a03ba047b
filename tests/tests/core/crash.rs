//! Crashes at random moments: a writer changes roots through the real daemon, which is killed
//! with SIGKILL mid-stream, again and again. Whatever the daemon acknowledged must be there after
//! each restart, and in the history (`log`) under the revision it was acknowledged with; whatever
//! it did not may or may not be; nothing else may appear. A short version of the rounds
//! docs/RELIABILITY.md describes.

use std::collections::BTreeSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rootsd_tests::{PATIENCE, RawClient, Sandbox, eventually};
use serde_json::{Value, json};

use crate::support::uris;

const ROUNDS: usize = 5;

/// A random number below `bound`, different on every run (the test prints what it drew).
fn random_below(bound: u64) -> u64 {
    RandomState::new().hash_one(std::time::Instant::now()) % bound
}

/// One change the writer asked for.
#[derive(Clone, Debug)]
enum Change {
    Add(String),
    Remove(String),
}

impl Change {
    fn apply(&self, roots: &mut BTreeSet<String>) {
        match self {
            Self::Add(uri) => roots.insert(uri.clone()),
            Self::Remove(uri) => roots.remove(uri),
        };
    }

    /// Whether a history entry records this change.
    fn logged_in(&self, entry: &Value) -> bool {
        let (list, uri) = match self {
            Self::Add(uri) => ("added", uri),
            Self::Remove(uri) => ("removed", uri),
        };
        entry[list] == json!([{"uri": uri, "name": uri.rsplit('/').next().unwrap()}])
    }
}

/// What a writer got done before its daemon died: the changes acknowledged, in order, with the
/// revision each was acknowledged at, and the one in flight, whose fate is unknown.
struct Written {
    acknowledged: Vec<(Change, u64)>,
    in_flight: Option<Change>,
}

/// Adds roots one request at a time (and removes every fourth one it added), until the
/// connection dies; counts acknowledgements in `acks` as they come.
fn write_until_killed(mut client: RawClient, round: usize, acks: Arc<AtomicUsize>) -> Written {
    let mut written = Written {
        acknowledged: Vec::new(),
        in_flight: None,
    };
    for n in 0.. {
        let change = if n % 4 == 3 {
            Change::Remove(format!("file:///crash/r{round}/{}", n - 2))
        } else {
            Change::Add(format!("file:///crash/r{round}/{n}"))
        };
        let (method, params) = match &change {
            Change::Add(uri) => ("roots.add", json!({"roots": [{"uri": uri}]})),
            Change::Remove(uri) => (
                "roots.remove",
                json!({"targets": [{"input": uri, "uri": uri}]}),
            ),
        };
        let request = json!({"jsonrpc": "2.0", "id": n, "method": method, "params": params});
        client.send_line(&request.to_string());
        written.in_flight = Some(change.clone());
        let Some(line) = client.read_line() else {
            return written;
        };
        let response: Value = serde_json::from_str(&line).expect("the daemon answers JSON");
        assert!(
            response.get("result").is_some(),
            "{change:?} failed: {response}"
        );
        written.in_flight = None;
        let revision = response["result"]["revision"]
            .as_u64()
            .expect("a change result has a revision");
        written.acknowledged.push((change, revision));
        acks.fetch_add(1, Ordering::SeqCst);
    }
    unreachable!("the loop ends when the daemon dies")
}

/// The history as the restarted daemon holds it, oldest first.
fn history(sb: &Sandbox) -> Vec<Value> {
    let log = sb.connect().request("log", json!({}));
    assert_eq!(log["result"]["more"], json!(false), "{log}");
    let mut entries = log["result"]["entries"]
        .as_array()
        .expect("entries")
        .clone();
    entries.reverse();
    entries
}

/// Every acknowledged change has its entry, at its revision; the only other entries are those
/// of changes in flight at a crash that turned out to be made (`extra`).
#[track_caller]
fn assert_logged(sb: &Sandbox, acknowledged: &[(Change, u64)], extra: usize, round: usize) {
    let entries = history(sb);
    assert_eq!(
        entries.len(),
        acknowledged.len() + extra,
        "round {round}: one entry per change made"
    );
    for (change, revision) in acknowledged {
        let entry = entries
            .iter()
            .find(|e| e["revision"] == json!(revision))
            .unwrap_or_else(|| panic!("round {round}: no entry for {change:?} at {revision}"));
        assert!(
            change.logged_in(entry),
            "round {round}: {change:?} at {revision} is logged as {entry}"
        );
    }
}

#[test]
fn acknowledged_changes_survive_kill_9_at_random_moments() {
    let sb = Sandbox::new();
    let mut expected: BTreeSet<String> = BTreeSet::new();
    let mut acknowledged: Vec<(Change, u64)> = Vec::new();
    let mut made_in_flight = 0;
    for round in 0..ROUNDS {
        let mut daemon = sb.start_daemon();
        let listed: BTreeSet<String> = uris(&sb.roots("default")).into_iter().collect();
        assert_eq!(
            listed, expected,
            "round {round}: the roots after the restart are exactly the acknowledged ones"
        );
        assert_logged(&sb, &acknowledged, made_in_flight, round);

        // Kill once the writer is under way: after a drawn number of acknowledgements, then a
        // drawn delay, so that the kill lands at any point of a request, its write included.
        let target_acks = 3 + random_below(25) as usize;
        let delay = Duration::from_micros(random_below(3000));
        eprintln!("round {round}: SIGKILL after {target_acks} acknowledgements and {delay:?}");
        let acks = Arc::new(AtomicUsize::new(0));
        let writer = {
            let client = sb.connect();
            let acks = Arc::clone(&acks);
            std::thread::spawn(move || write_until_killed(client, round, acks))
        };
        eventually("the writer to be under way", PATIENCE, || {
            let done = acks.load(Ordering::SeqCst);
            if done >= target_acks {
                Ok(())
            } else {
                Err(format!("{done} acknowledged"))
            }
        });
        // Not a wait for anything: the drawn delay is the moment of the crash.
        std::thread::sleep(delay);
        daemon.child.kill().expect("kill -9 rootsd");
        daemon.child.wait().expect("reap rootsd");
        let written = writer.join().expect("the writer ends with its connection");
        eprintln!(
            "round {round}: {} acknowledged, in flight: {:?}",
            written.acknowledged.len(),
            written.in_flight
        );

        for (change, _) in &written.acknowledged {
            change.apply(&mut expected);
        }
        acknowledged.extend(written.acknowledged);
        // The change in flight may have been written before the kill: learn its fate from the
        // restarted daemon, but accept nothing else.
        if let Some(change) = written.in_flight {
            let _restarted = sb.start_daemon();
            let listed: BTreeSet<String> = uris(&sb.roots("default")).into_iter().collect();
            let mut with_it = expected.clone();
            change.apply(&mut with_it);
            assert!(
                listed == expected || listed == with_it,
                "round {round}: after the crash, the roots are neither the acknowledged ones nor those plus {change:?}:\n listed:   {listed:?}\n expected: {expected:?}"
            );
            if listed != expected {
                made_in_flight += 1;
            }
            expected = listed;
        }
    }
    let _daemon = sb.start_daemon();
    let listed: BTreeSet<String> = uris(&sb.roots("default")).into_iter().collect();
    assert_eq!(listed, expected);
    assert!(!expected.is_empty());
    assert_logged(&sb, &acknowledged, made_in_flight, ROUNDS);
}
