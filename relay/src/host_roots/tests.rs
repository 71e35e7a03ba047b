//! The relay with `--host-roots merge|publish`, as transcripts (see [`crate::transcript`]): the
//! host is asked for its own roots in both eras, a host that does not answer holds nothing up
//! for long, and the server sees the union (merge) or the workspace the host's roots joined
//! (publish).

use std::ffi::OsStr;
use std::path::Path;

use rootsd_proto::host_roots::HostRootsMode;
use rootsd_proto::mapping::{Mapping, PathMap};

use crate::Config;
use crate::transcript::check;

fn mode(host_roots: HostRootsMode) -> Config {
    Config {
        host_roots,
        ..Config::new(true)
    }
}

#[test]
fn merge_asks_the_host_after_initialized_and_the_server_sees_each_root_once() {
    check(
        mode(HostRootsMode::Merge),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          to server: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake host=merge:not-asked
        from server: {"jsonrpc":"2.0","id":0,"result":{"serverInfo":{"name":"s","version":"1"}}}
          to host: {"jsonrpc":"2.0","id":0,"result":{"serverInfo":{"name":"s","version":"1"}}}
          state: list_changed era=handshake server=s/1 host=merge:not-asked
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-1","method":"roots/list"}
          state: list_changed era=handshake server=s/1 initialized host=merge:asking
        from server: {"jsonrpc":"2.0","id":7,"method":"roots/list"}
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-1","result":{"roots":[{"uri":"file:///h","name":"h"},{"uri":"FILE://localhost/a/","name":"host's a"},{"uri":"https://x.example"}]}}
          to server: {"jsonrpc":"2.0","id":7,"result":{"roots":[{"uri":"file:///a","name":"a"},{"uri":"file:///h","name":"h"}]}}
          state: list_changed era=handshake server=s/1 initialized fetched=1 fetches=1 host=merge:answered:2:ignored=1
        from host: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-2","method":"roots/list"}
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-2","result":{"roots":[{"uri":"file:///g"}]}}
          to server: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
          state: list_changed era=handshake server=s/1 initialized fetched=1 fetches=1 outstanding sent=1 host=merge:answered:1
        from server: {"jsonrpc":"2.0","id":8,"method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":8,"result":{"roots":[{"uri":"file:///a","name":"a"},{"uri":"file:///g","name":"g"}]}}
          state: list_changed era=handshake server=s/1 initialized fetched=1 fetches=2 sent=1 fetches-after-notification host=merge:answered:1
        from daemon: revision 2: a g
          state: list_changed era=handshake server=s/1 initialized fetched=2 fetches=2 sent=1 fetches-after-notification host=merge:answered:1
        "#,
    );
}

#[test]
fn a_host_that_does_not_answer_holds_the_server_up_only_for_its_patience() {
    check(
        mode(HostRootsMode::Merge),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{}}}}
          to server: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake host=merge:not-asked
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-1","method":"roots/list"}
          state: list_changed era=handshake initialized host=merge:asking
        from server: {"jsonrpc":"2.0","id":1,"method":"roots/list"}
        from host: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
        after 2s
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-2","method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///a","name":"a"}]}}
          state: list_changed era=handshake initialized fetched=1 fetches=1 host=merge:asking
        after 2s
          state: list_changed era=handshake initialized fetched=1 fetches=1 host=merge:no-answer:0
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-2","result":{"roots":[{"uri":"file:///late"}]}}
          to server: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
          state: list_changed era=handshake initialized fetched=1 fetches=1 outstanding sent=1 host=merge:answered:1
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-1","result":{"roots":[]}}
        "#,
    );
}

#[test]
fn a_host_without_roots_of_its_own_is_never_asked() {
    check(
        mode(HostRootsMode::Merge),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{}}}
          to server: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake host=merge:not-declared
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          state: list_changed era=handshake initialized host=merge:not-declared
        from server: {"jsonrpc":"2.0","id":1,"method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///a","name":"a"}]}}
          state: list_changed era=handshake initialized fetched=1 fetches=1 host=merge:not-declared
        from host: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
        "#,
    );
}

#[test]
fn a_host_that_refuses_keeps_the_list_it_gave_last() {
    check(
        mode(HostRootsMode::Merge),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{}}}}
          to server: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake host=merge:not-asked
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-1","method":"roots/list"}
          state: list_changed era=handshake initialized host=merge:asking
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-1","result":{"roots":[{"uri":"file:///h"}]}}
          state: list_changed era=handshake initialized host=merge:answered:1
        from host: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-2","method":"roots/list"}
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-2","error":{"code":-32603,"message":"busy"}}
          state: list_changed era=handshake initialized host=merge:refused:1
        from server: {"jsonrpc":"2.0","id":1,"method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///a","name":"a"},{"uri":"file:///h","name":"h"}]}}
          state: list_changed era=handshake initialized fetched=1 fetches=1 host=merge:refused:1
        "#,
    );
}

#[test]
fn publish_sends_the_hosts_list_to_the_daemon_and_answers_once_it_is_back() {
    check(
        mode(HostRootsMode::Publish),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          to server: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake host=publish:not-asked
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-1","method":"roots/list"}
          state: list_changed era=handshake initialized host=publish:asking
        from server: {"jsonrpc":"2.0","id":1,"method":"roots/list"}
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-1","result":{"roots":[{"uri":"file:///h","name":"h"},{"uri":"file:///a"}]}}
          publish #1: h a
          state: list_changed era=handshake initialized host=publish:answered:2
        ack #1 revision 2
        from daemon: revision 2: a h
          to server: {"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///a","name":"a"},{"uri":"file:///h","name":"h"}]}}
          state: list_changed era=handshake initialized fetched=2 fetches=1 host=publish:answered:2
        from host: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-2","method":"roots/list"}
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-2","result":{"roots":[{"uri":"file:///a"},{"uri":"file:///h"}]}}
        from host: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-3","method":"roots/list"}
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-3","result":{"roots":[{"uri":"file:///g","name":"g"}]}}
          publish #2: g
          state: list_changed era=handshake initialized fetched=2 fetches=1 host=publish:answered:1
        from daemon: revision 3: a g
          to server: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
          state: list_changed era=handshake initialized fetched=2 fetches=1 outstanding sent=1 host=publish:answered:1
        "#,
    );
}

#[test]
fn a_publication_that_fails_or_does_not_come_back_holds_nothing_up_for_long() {
    check(
        mode(HostRootsMode::Publish),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{}}}}
          to server: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake host=publish:not-asked
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-1","method":"roots/list"}
          state: list_changed era=handshake initialized host=publish:asking
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-1","result":{"roots":[{"uri":"file:///h"}]}}
          publish #1: h
          state: list_changed era=handshake initialized host=publish:answered:1
        from server: {"jsonrpc":"2.0","id":1,"method":"roots/list"}
        ack #1 failed
          to server: {"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///a","name":"a"}]}}
          state: list_changed era=handshake initialized fetched=1 fetches=1 host=publish:answered:1
        from host: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-2","method":"roots/list"}
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-2","result":{"roots":[{"uri":"file:///h"}]}}
          publish #2: h
        from server: {"jsonrpc":"2.0","id":2,"method":"roots/list"}
        after 2s
          to server: {"jsonrpc":"2.0","id":2,"result":{"roots":[{"uri":"file:///a","name":"a"}]}}
          fetched again
        "#,
    );
}

#[test]
fn in_2026_the_host_answers_the_roots_round_and_the_server_gets_the_union() {
    check(
        mode(HostRootsMode::Merge),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          to server: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          state: version=2026-07-28 host=merge:not-asked
        from server: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}},"requestState":"s1"}}
          to server: {"jsonrpc":"2.0","id":"rootsd-discover-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          to host: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}},"requestState":"s1"}}
          state: era=stateless version=2026-07-28 host=merge:asking
        from host: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","inputResponses":{"ws":{"roots":[{"uri":"file:///h","name":"h"},{"uri":"file:///a","name":"mine"}]}},"requestState":"s1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          to server: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","inputResponses":{"ws":{"roots":[{"uri":"file:///a","name":"a"},{"uri":"file:///h","name":"h"}]}},"requestState":"s1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          state: era=stateless version=2026-07-28 fetched=1 fetches=1 host=merge:answered:2
        "#,
    );
}

#[test]
fn in_2026_a_request_that_does_not_declare_the_hosts_roots_is_answered_by_the_proxy() {
    check(
        mode(HostRootsMode::Merge),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          state: version=2026-07-28 host=merge:not-asked
        from server: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}},"requestState":"s1"}}
          to server: {"jsonrpc":"2.0","id":"rootsd-discover-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":"rootsd-retry-2","method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}},"inputResponses":{"ws":{"roots":[{"uri":"file:///a","name":"a"}]}},"requestState":"s1"}}
          state: era=stateless version=2026-07-28 fetched=1 fetches=1 host=merge:not-declared
        "#,
    );
}

#[test]
fn in_2026_a_publication_comes_back_before_the_server_is_answered() {
    check(
        mode(HostRootsMode::Publish),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          to server: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          state: version=2026-07-28 host=publish:not-asked
        from server: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}},"requestState":"s1"}}
          to server: {"jsonrpc":"2.0","id":"rootsd-discover-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          to host: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}},"requestState":"s1"}}
          state: era=stateless version=2026-07-28 host=publish:asking
        from host: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","inputResponses":{"ws":{"roots":[{"uri":"file:///h"}]}},"requestState":"s1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          publish #1: h
          state: era=stateless version=2026-07-28 host=publish:answered:1
        ack #1 revision 2
        from daemon: revision 2: a h
          to server: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","inputResponses":{"ws":{"roots":[{"uri":"file:///a","name":"a"},{"uri":"file:///h","name":"h"}]}},"requestState":"s1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          state: era=stateless version=2026-07-28 fetched=2 fetches=1 host=publish:answered:1
        "#,
    );
}

#[test]
fn with_a_map_the_hosts_roots_are_mapped_or_withheld_like_the_workspaces() {
    let map = PathMap::parse(OsStr::new("/home=/srv"), Path::new("/")).unwrap();
    let config = Config {
        mapping: Some(Mapping::new(vec![(map, "/home=/srv".to_owned())]).unwrap()),
        ..mode(HostRootsMode::Merge)
    };
    check(
        config,
        r#"
        from daemon: revision 1: home
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{}}}}
          to server: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake host=merge:not-asked
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-1","method":"roots/list"}
          state: list_changed era=handshake initialized host=merge:asking
        from host: {"jsonrpc":"2.0","id":"rootsd-roots-1","result":{"roots":[{"uri":"file:///home/x"},{"uri":"file:///etc"}]}}
          state: list_changed era=handshake initialized withheld=1 host=merge:answered:2
        from server: {"jsonrpc":"2.0","id":1,"method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///srv","name":"home"},{"uri":"file:///srv/x","name":"x"}]}}
          state: list_changed era=handshake initialized fetched=1 fetches=1 withheld=1 host=merge:answered:2
        "#,
    );
}

#[test]
fn a_host_answer_too_long_to_relay_is_a_refusal_and_never_reaches_the_server() {
    check(
        mode(HostRootsMode::Merge),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{}}}}
          to server: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake host=merge:not-asked
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to host: {"jsonrpc":"2.0","id":"rootsd-roots-1","method":"roots/list"}
          state: list_changed era=handshake initialized host=merge:asking
        too long from host: {"jsonrpc":"2.0","id":"rootsd-roots-1","result":{"roots":[{"uri":"file:///
          state: list_changed era=handshake initialized host=merge:refused:0
        from server: {"jsonrpc":"2.0","id":1,"method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///a","name":"a"}]}}
          state: list_changed era=handshake initialized fetched=1 fetches=1 host=merge:refused:0
        "#,
    );
}
