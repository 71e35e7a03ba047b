//! The relay's rules as transcripts: lines in from the host, the server and the daemon, and the
//! exact lines (and state changes) the relay sends in response, checked as one block of text.
//!
//! A transcript is a list of events, one per line, each followed by what the relay did, indented:
//!
//! ```text
//! from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{}}}
//!   to server: {"id":0,"jsonrpc":"2.0","method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
//!   state: list_changed era=handshake
//! from daemon: revision 2: a b
//! from daemon: gone
//! ```
//!
//! `from daemon: revision N: a b` hands the relay revision N with roots `file:///a` (named `a`)
//! and `file:///b`; `from daemon: gone` is the first-list patience running out. `check` replays the
//! events, renders what happened in the same form, and compares the whole text, so a failure
//! shows the transcript the relay actually produced.

use rootsd_proto::session::{Era, SessionState};
use rootsd_proto::wire::RootsSnapshot;
use rootsd_proto::{Root, WorkspaceName};

use super::{Output, Relay};

const FROM_HOST: &str = "from host: ";
const FROM_SERVER: &str = "from server: ";
const FROM_DAEMON: &str = "from daemon: ";

/// Replays the events in `transcript` against `relay` and asserts that the relay's output
/// matches the indented lines of `transcript` exactly.
#[track_caller]
fn check(mut relay: Relay, transcript: &str) {
    let expected = normalise(transcript);
    let mut actual = String::new();
    for line in expected.lines().filter(|l| !l.starts_with(' ')) {
        actual.push_str(line);
        actual.push('\n');
        if let Some(text) = line.strip_prefix(FROM_HOST) {
            relay.from_host(text.as_bytes());
        } else if let Some(text) = line.strip_prefix(FROM_SERVER) {
            relay.from_server(text.as_bytes());
        } else if let Some(event) = line.strip_prefix(FROM_DAEMON) {
            daemon_event(&mut relay, event);
        } else {
            panic!("not an event: {line:?}");
        }
        for output in relay.take_output() {
            actual.push_str(&render(&output));
            actual.push('\n');
        }
    }
    assert!(
        actual == expected,
        "the relay's transcript differs.\n--- expected\n{expected}--- actual\n{actual}"
    );
}

fn daemon_event(relay: &mut Relay, event: &str) {
    if event == "gone" {
        return relay.give_up_waiting();
    }
    let (revision, dirs) = event
        .strip_prefix("revision ")
        .and_then(|rest| rest.split_once(':'))
        .unwrap_or_else(|| panic!("not a daemon event: {event:?}"));
    relay.roots_changed(RootsSnapshot {
        workspace: WorkspaceName::default(),
        revision: revision.parse().expect("a revision number"),
        roots: dirs
            .split_whitespace()
            .map(|d| Root {
                uri: format!("file:///{d}"),
                name: Some(d.to_owned()),
            })
            .collect(),
    });
}

fn render(output: &Output) -> String {
    match output {
        Output::ToServer(line) => format!("  to server: {}", String::from_utf8_lossy(line)),
        Output::ToHost(line) => format!("  to host: {}", String::from_utf8_lossy(line)),
        Output::State(state) => format!("  state: {}", summary(state)),
    }
}

/// The fields of `state` that differ from the default, in a fixed order.
fn summary(state: &SessionState) -> String {
    let mut parts = Vec::new();
    if state.list_changed {
        parts.push("list_changed".to_owned());
    }
    match state.era {
        Era::Unknown => {}
        Era::Handshake => parts.push("era=handshake".to_owned()),
        Era::Stateless => parts.push("era=stateless".to_owned()),
    }
    if let Some(version) = &state.protocol_version {
        parts.push(format!("version={version}"));
    }
    if let Some(server) = &state.server {
        parts.push(format!("server={}/{}", server.name, server.version));
    }
    if state.initialized {
        parts.push("initialized".to_owned());
    }
    if let Some(revision) = state.fetched_revision {
        parts.push(format!("fetched={revision}"));
    }
    if state.fetches > 0 {
        parts.push(format!("fetches={}", state.fetches));
    }
    if state.notification_outstanding {
        parts.push("outstanding".to_owned());
    }
    if state.owes_notification {
        parts.push("owes".to_owned());
    }
    if state.notifications_sent > 0 {
        parts.push(format!("sent={}", state.notifications_sent));
    }
    parts.join(" ")
}

/// Drops the indentation the transcript has in the test's source and blank lines.
fn normalise(transcript: &str) -> String {
    let lines: Vec<&str> = transcript
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let margin = lines
        .iter()
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| format!("{}\n", l[margin..].trim_end()))
        .collect()
}

#[test]
fn a_handshake_session_from_initialize_to_the_first_notification() {
    check(
        Relay::new(true),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}}}}
          to server: {"id":0,"jsonrpc":"2.0","method":"initialize","params":{"capabilities":{"roots":{"listChanged":true},"sampling":{}},"protocolVersion":"2025-11-25"}}
          state: list_changed era=handshake version=2025-11-25
        from server: {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"fs","version":"0.2"}}}
          to host: {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"fs","version":"0.2"}}}
          state: list_changed era=handshake version=2025-06-18 server=fs/0.2
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          state: list_changed era=handshake version=2025-06-18 server=fs/0.2 initialized
        from server: {"jsonrpc":"2.0","id":0,"method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":0,"result":{"roots":[{"uri":"file:///a","name":"a"}]}}
          state: list_changed era=handshake version=2025-06-18 server=fs/0.2 initialized fetched=1 fetches=1
        from daemon: revision 2: a b
          to server: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
          state: list_changed era=handshake version=2025-06-18 server=fs/0.2 initialized fetched=1 fetches=1 outstanding sent=1
        from daemon: revision 3: b
        from server: {"jsonrpc":"2.0","id":1,"method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///b","name":"b"}]}}
          state: list_changed era=handshake version=2025-06-18 server=fs/0.2 initialized fetched=3 fetches=2 sent=1
        "#,
    );
}

#[test]
fn without_list_changed_the_server_is_declared_roots_but_never_notified() {
    check(
        Relay::new(false),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":"i","method":"initialize","params":{"capabilities":{}}}
          to server: {"id":"i","jsonrpc":"2.0","method":"initialize","params":{"capabilities":{"roots":{}}}}
          state: era=handshake
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          state: era=handshake initialized
        from server: {"jsonrpc":"2.0","id":5,"method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":5,"result":{"roots":[{"uri":"file:///a","name":"a"}]}}
          state: era=handshake initialized fetched=1 fetches=1
        from daemon: revision 2: b
        from host: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
        "#,
    );
}

#[test]
fn a_roots_list_before_the_first_list_waits_then_is_refused_and_owed_a_notification() {
    check(
        Relay::new(true),
        r#"
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{}}}
          to server: {"id":0,"jsonrpc":"2.0","method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          state: list_changed era=handshake initialized
        from server: {"jsonrpc":"2.0","id":1,"method":"roots/list"}
        from daemon: gone
          to server: {"error":{"code":-32603,"message":"rootsd is not reachable, so no roots are available yet; a list_changed notification follows when it is"},"id":1,"jsonrpc":"2.0"}
          state: list_changed era=handshake initialized owes
        from daemon: revision 4: a
          to server: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
          state: list_changed era=handshake initialized outstanding sent=1
        from server: {"jsonrpc":"2.0","id":2,"method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":2,"result":{"roots":[{"uri":"file:///a","name":"a"}]}}
          state: list_changed era=handshake initialized fetched=4 fetches=1 sent=1
        "#,
    );
}

#[test]
fn cancellations_of_the_proxys_own_requests_stay_with_the_proxy() {
    check(
        Relay::new(true),
        r#"
        from server: {"jsonrpc":"2.0","id":7,"method":"roots/list"}
        from server: {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}
        from daemon: revision 1: a
        from server: {"jsonrpc":"2.0","id":8,"method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":8,"result":{"roots":[{"uri":"file:///a","name":"a"}]}}
          state: list_changed fetched=1 fetches=1
        from server: {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":8}}
        from server: {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s9"}}
          to host: {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s9"}}
        "#,
    );
}

#[test]
fn everything_else_passes_byte_for_byte_in_both_directions() {
    check(
        Relay::new(true),
        r#"
        from host: {"id":5,  "jsonrpc":"2.0","method":"tools/list"}
          to server: {"id":5,  "jsonrpc":"2.0","method":"tools/list"}
        from server: {"jsonrpc":"2.0","id":5,"result":{"tools":[],"n":1.50}}
          to host: {"jsonrpc":"2.0","id":5,"result":{"tools":[],"n":1.50}}
        from server: not json at all
          to host: not json at all
        from host: {"jsonrpc":"2.0","id":6,"method":"ping"}
          to server: {"jsonrpc":"2.0","id":6,"method":"ping"}
        from server: {"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}
          to host: {"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}
        "#,
    );
}

#[test]
fn a_server_batch_is_split_between_the_proxy_and_the_host() {
    check(
        Relay::new(true),
        r#"
        from daemon: revision 1: a
        from server: [{"jsonrpc":"2.0","id":1,"method":"roots/list"},{"jsonrpc":"2.0","method":"notifications/message","params":{}}]
          to server: {"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///a","name":"a"}]}}
          to host: [{"jsonrpc":"2.0","method":"notifications/message","params":{}}]
          state: list_changed fetched=1 fetches=1
        "#,
    );
}

#[test]
fn a_2026_request_for_roots_only_is_answered_and_retried_by_the_proxy() {
    check(
        Relay::new(true),
        r#"
        from daemon: revision 3: a
        from host: {"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"scan","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"id":41,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"scan"}}
          state: list_changed era=stateless version=2026-07-28
        from server: {"jsonrpc":"2.0","id":41,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}},"requestState":"s1"}}
          to server: {"id":"rootsd-retry-1","jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"inputResponses":{"ws":{"roots":[{"name":"a","uri":"file:///a"}]}},"name":"scan","requestState":"s1"}}
          state: list_changed era=stateless version=2026-07-28 fetched=3 fetches=1
        from server: {"jsonrpc":"2.0","id":"rootsd-retry-1","result":{"resultType":"complete","content":[]}}
          to host: {"id":41,"jsonrpc":"2.0","result":{"content":[],"resultType":"complete"}}
        from daemon: revision 4: b
        "#,
    );
}

#[test]
fn a_2026_request_mixing_roots_and_elicitation_goes_to_the_host_and_roots_join_its_retry() {
    check(
        Relay::new(true),
        r#"
        from daemon: revision 3: a
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}
          to server: {"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"roots":{}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"x"}}
          state: list_changed era=stateless version=2026-07-28
        from server: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"},"ask":{"method":"elicitation/create","params":{}}},"requestState":"s2"}}
          to host: {"id":1,"jsonrpc":"2.0","result":{"inputRequests":{"ask":{"method":"elicitation/create","params":{}}},"requestState":"s2","resultType":"input_required"}}
        from host: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","requestState":"s2","inputResponses":{"ask":{"action":"accept"}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}
          to server: {"id":2,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"roots":{}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"inputResponses":{"ask":{"action":"accept"},"ws":{"roots":[{"name":"a","uri":"file:///a"}]}},"name":"x","requestState":"s2"}}
          state: list_changed era=stateless version=2026-07-28 fetched=3 fetches=1
        "#,
    );
}
