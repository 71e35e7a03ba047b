//! The relay with `--map`: every answer of roots, in both eras, carries the mapped list, and only
//! a change the server can see wakes it.

use std::ffi::OsStr;
use std::path::Path;

use rootsd_proto::mapping::{Mapping, PathMap, WithheldReason, WithheldRoot};
use rootsd_proto::session::{self, Notice};
use serde_json::{Value, json};

use super::t0;
use crate::*;

/// A relay whose server sees `/home/u/src` as `/src`, and `/home/u/src/big` as `/mnt/big`.
fn mapped_relay() -> Relay {
    let maps = ["/home/u/src=/src", "/home/u/src/big=/mnt/big"]
        .iter()
        .map(|arg| {
            let map = PathMap::parse(OsStr::new(arg), Path::new("/")).unwrap();
            (map, (*arg).to_owned())
        })
        .collect();
    let config = Config {
        mapping: Some(Mapping::new(maps).unwrap()),
        ..Config::new(true)
    };
    Relay::new(config, t0())
}

/// The daemon's list at `revision`: `paths` under `/home/u`, named after their last component.
fn snapshot(revision: u64, paths: &[&str]) -> RootsSnapshot {
    let paths: Vec<String> = paths.iter().map(|p| format!("home/u/{p}")).collect();
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    crate::scenario::daemon_list(revision, &paths)
}

fn send(relay: &mut Relay, side: Side, message: Value) -> Vec<Output> {
    let line = serde_json::to_vec(&message).unwrap();
    match side {
        Side::Host => relay.from_host(line, t0()),
        Side::Server => relay.from_server(line, t0()),
    }
    relay.take_output()
}

fn to_server(outputs: &[Output]) -> Vec<Value> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::ToServer(line) => Some(serde_json::from_slice(line).unwrap()),
            _ => None,
        })
        .collect()
}

fn list_changed_count(outputs: &[Output]) -> usize {
    to_server(outputs)
        .iter()
        .filter(|m| m["method"] == "notifications/roots/list_changed")
        .count()
}

/// The handshake through `notifications/initialized`, then the server's first `roots/list`;
/// returns the roots it was given.
fn handshake(relay: &mut Relay) -> Value {
    send(
        relay,
        Side::Host,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}),
    );
    send(
        relay,
        Side::Server,
        json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}),
    );
    send(
        relay,
        Side::Host,
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    );
    fetch(relay, "r0")
}

/// The server's `roots/list` with `id`; returns the roots it was given.
fn fetch(relay: &mut Relay, id: &str) -> Value {
    let out = send(
        relay,
        Side::Server,
        json!({"jsonrpc":"2.0","id":id,"method":"roots/list"}),
    );
    to_server(&out)[0]["result"]["roots"].clone()
}

#[test]
fn roots_list_is_answered_with_mapped_paths_and_the_rest_withheld() {
    let mut relay = mapped_relay();
    relay.roots_changed(
        snapshot(
            1,
            &["src/app", "src/big/data", "notes", "src2", "src/a%20b%FF"],
        ),
        t0(),
    );
    assert_eq!(
        handshake(&mut relay),
        json!([
            {"uri":"file:///src/app","name":"app"},
            {"uri":"file:///mnt/big/data","name":"data"},
            {"uri":"file:///src/a%20b%FF","name":"a%20b%FF"},
        ])
    );
    let withheld = &relay.state().withheld;
    assert_eq!((withheld.outside_map, withheld.count()), (2, 2));
    assert_eq!(
        withheld.roots,
        vec![
            WithheldRoot {
                uri: "file:///home/u/notes".into(),
                name: Some("notes".into()),
                reason: WithheldReason::OutsideMap,
            },
            WithheldRoot {
                uri: "file:///home/u/src2".into(),
                name: Some("src2".into()),
                reason: WithheldReason::OutsideMap,
            },
        ]
    );
}

#[test]
fn a_change_outside_the_maps_does_not_wake_the_server_and_counts_as_fetched() {
    let mut relay = mapped_relay();
    relay.roots_changed(snapshot(1, &["src/app"]), t0());
    handshake(&mut relay);
    assert_eq!(relay.state().fetched_revision, Some(1));

    relay.roots_changed(snapshot(2, &["src/app", "notes"]), t0());
    let out = relay.take_output();
    assert_eq!(list_changed_count(&out), 0, "{out:?}");
    let state = relay.state().clone();
    assert_eq!(
        state.fetched_revision,
        Some(2),
        "it holds revision 2's list"
    );
    assert_eq!(state.fetches, 1, "but it did not fetch again");
    assert_eq!(state.withheld.outside_map, 1);
    assert_eq!(session::notice(&state, 2), Notice::UpToDate);
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::State(s) if s == &state)),
        "the daemon hears of it at once, so that add --wait completes: {out:?}"
    );

    relay.roots_changed(snapshot(3, &["src/app", "notes", "src/lib"]), t0());
    assert_eq!(list_changed_count(&relay.take_output()), 1);
    assert_eq!(relay.state().fetched_revision, Some(2));
    assert_eq!(
        fetch(&mut relay, "r1"),
        json!([{"uri":"file:///src/app","name":"app"},{"uri":"file:///src/lib","name":"lib"}])
    );
}

#[test]
fn a_change_the_server_cannot_see_leaves_an_outdated_server_outdated() {
    let mut relay = mapped_relay();
    relay.roots_changed(snapshot(1, &["src/app"]), t0());
    handshake(&mut relay);
    // Revision 2 is news to the server; while that notification is outstanding, revision 3
    // changes only what it cannot see: it still needs revision 3's list, and gets it.
    relay.roots_changed(snapshot(2, &["src/lib"]), t0());
    assert_eq!(list_changed_count(&relay.take_output()), 1);
    relay.roots_changed(snapshot(3, &["src/lib", "notes"]), t0());
    assert_eq!(relay.state().fetched_revision, Some(1));
    assert_eq!(
        session::notice(relay.state(), 3),
        Notice::Pending,
        "the outstanding notification covers it"
    );
    fetch(&mut relay, "r1");
    assert_eq!(relay.state().fetched_revision, Some(3));
}

#[test]
fn a_list_entirely_outside_the_maps_is_an_empty_list_not_an_error() {
    let mut relay = mapped_relay();
    relay.roots_changed(snapshot(1, &["notes", "docs"]), t0());
    assert_eq!(handshake(&mut relay), json!([]));
    assert_eq!(relay.state().withheld.summary(), "2 outside --map");
}

#[test]
fn input_required_is_answered_with_mapped_paths() {
    let mut relay = mapped_relay();
    relay.roots_changed(snapshot(5, &["src/app", "notes"]), t0());
    send(
        &mut relay,
        Side::Host,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"scan","arguments":{},
            "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                     "io.modelcontextprotocol/clientCapabilities":{}}}}),
    );
    let out = send(
        &mut relay,
        Side::Server,
        json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required",
            "inputRequests":{"ws":{"method":"roots/list"}},"requestState":"s"}}),
    );
    // (The proxy may also ask the nameless server `server/discover`; beside the point here.)
    let retries: Vec<Value> = to_server(&out)
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    let retry = &retries[0];
    assert_eq!(
        retry["params"]["inputResponses"]["ws"],
        json!({"roots":[{"uri":"file:///src/app","name":"app"}]})
    );
    assert_eq!(relay.state().withheld.outside_map, 1);
    assert_eq!(relay.state().fetched_revision, Some(5));
}

#[test]
fn without_a_map_the_daemons_list_passes_as_it_is() {
    let mut relay = Relay::new(Config::new(true), t0());
    relay.roots_changed(snapshot(1, &["notes", "src%20x"]), t0());
    assert_eq!(
        handshake(&mut relay),
        json!([
            {"uri":"file:///home/u/notes","name":"notes"},
            {"uri":"file:///home/u/src%20x","name":"src%20x"},
        ])
    );
    assert!(relay.state().withheld.is_empty());
}

#[test]
fn a_launch_template_is_expanded_from_the_mapped_paths_and_only_a_visible_change_moves_them() {
    let mut relay = mapped_relay();
    assert!(relay.served_paths().is_none(), "no list yet");
    relay.roots_changed(snapshot(1, &["src/app", "src/big/data", "notes"]), t0());
    let served = relay.served_paths().expect("a list");
    // Mapped, the longest HOST_DIR winning, and `notes` (outside every map) withheld.
    assert_eq!(served.revision, 1);
    assert_eq!(
        served.paths,
        [Path::new("/src/app"), Path::new("/mnt/big/data")]
    );
    let generation = served.generation;
    // A change outside the maps moves the revision (and the count) but not the paths.
    relay.roots_changed(snapshot(2, &["src/app", "src/big/data", "other"]), t0());
    let served = relay.served_paths().expect("a list");
    assert_eq!(served.revision, 2);
    assert_ne!(served.generation, generation);
    assert_eq!(
        served.paths,
        [Path::new("/src/app"), Path::new("/mnt/big/data")]
    );
}
