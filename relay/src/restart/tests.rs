//! A server restarted behind the host's back, as transcripts: what the host set up is replayed
//! under the proxy's own ids, the answers are swallowed, the host hears `list_changed` only for
//! what the new server declares, and while no server runs the host's requests get errors.

use crate::Config;
use crate::transcript::check;

fn templated() -> Config {
    Config {
        templated: true,
        ..Config::new(true)
    }
}

#[test]
fn a_restart_replays_the_hosts_set_up_and_swallows_the_answers() {
    check(
        templated(),
        r#"
        from daemon: revision 1: a
        server started at revision 1
          state: launch=1
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}
          to server: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake version=2025-11-25 launch=1
        from server: {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":false},"prompts":{"listChanged":true}},"serverInfo":{"name":"git","version":"1"}}}
          to host: {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":false},"prompts":{"listChanged":true}},"serverInfo":{"name":"git","version":"1"}}}
          state: list_changed era=handshake version=2025-11-25 server=git/1 launch=1
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          state: list_changed era=handshake version=2025-11-25 server=git/1 initialized launch=1
        from host: {"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///a/x"}}
          to server: {"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///a/x"}}
        from server: {"jsonrpc":"2.0","id":1,"result":{}}
          to host: {"jsonrpc":"2.0","id":1,"result":{}}
        from host: {"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}
          to server: {"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}
        from server: {"jsonrpc":"2.0","id":2,"result":{}}
          to host: {"jsonrpc":"2.0","id":2,"result":{}}
        from host: {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"git_log"}}
          to server: {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"git_log"}}
        from daemon: revision 2: b
        abort in flight: restarted
          to host: {"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"restarted"}}
        server restarted at revision 2
          to server: {"jsonrpc":"2.0","id":"rootsd-replay-1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake version=2025-11-25 server=git/1 launch=1 restarts=1
        from server: {"jsonrpc":"2.0","id":"rootsd-replay-1","result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":false},"prompts":{"listChanged":true}},"serverInfo":{"name":"git","version":"2"}}}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","id":"rootsd-replay-2","method":"resources/subscribe","params":{"uri":"file:///a/x"}}
          to server: {"jsonrpc":"2.0","id":"rootsd-replay-3","method":"logging/setLevel","params":{"level":"debug"}}
          to host: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}
          to host: {"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}
          state: list_changed era=handshake version=2025-11-25 server=git/2 initialized launch=2 restarts=1
        from server: {"jsonrpc":"2.0","id":"rootsd-replay-2","result":{}}
        from server: {"jsonrpc":"2.0","id":"rootsd-replay-3","result":{}}
        from host: {"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"git_log"}}
          to server: {"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"git_log"}}
        "#,
    );
}

#[test]
fn while_no_server_runs_the_hosts_requests_get_the_reason_and_notifications_go_nowhere() {
    check(
        templated(),
        r#"
        from daemon: revision 1:
        server down: workspace default has no root
          state: launch=- down="workspace default has no root"
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{}}}
          to host: {"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"workspace default has no root"}}
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
        from host: [{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"x","method":"tools/list"}]
          to host: [{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"workspace default has no root"}},{"jsonrpc":"2.0","id":"x","error":{"code":-32603,"message":"workspace default has no root"}}]
        from daemon: revision 2: a
        server started at revision 2
          state: launch=2
        from host: {"jsonrpc":"2.0","id":2,"method":"initialize","params":{"capabilities":{}}}
          to server: {"jsonrpc":"2.0","id":2,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake launch=2
        "#,
    );
}

#[test]
fn an_unsubscribed_resource_is_not_replayed_and_an_unanswered_replay_gives_up() {
    check(
        templated(),
        r#"
        from daemon: revision 1: a
        server started at revision 1
          state: launch=1
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{}}}
          to server: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake launch=1
        from server: {"jsonrpc":"2.0","id":0,"result":{"capabilities":{}}}
          to host: {"jsonrpc":"2.0","id":0,"result":{"capabilities":{}}}
        from host: {"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///a/x"}}
          to server: {"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///a/x"}}
        from host: {"jsonrpc":"2.0","id":2,"method":"resources/unsubscribe","params":{"uri":"file:///a/x"}}
          to server: {"jsonrpc":"2.0","id":2,"method":"resources/unsubscribe","params":{"uri":"file:///a/x"}}
        from daemon: revision 2: b
        abort in flight: restarted
          to host: {"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"restarted"}}
          to host: {"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"restarted"}}
        server restarted at revision 2
          to server: {"jsonrpc":"2.0","id":"rootsd-replay-1","method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake launch=1 restarts=1
        after 10s
          state: list_changed era=handshake launch=1 restarts=1 down="the restarted server did not answer the replayed initialize within 10 s"
        "#,
    );
}

#[test]
fn a_2026_session_has_no_handshake_to_replay() {
    check(
        templated(),
        r#"
        from daemon: revision 1: a
        server started at revision 1
          state: launch=1
        from host: {"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
          to server: {"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
          state: version=2026-07-28 launch=1
        from server: {"jsonrpc":"2.0","id":7,"result":{"tools":[],"resultType":"complete"}}
          to server: {"jsonrpc":"2.0","id":"rootsd-discover-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
          to host: {"jsonrpc":"2.0","id":7,"result":{"tools":[],"resultType":"complete"}}
          state: era=stateless version=2026-07-28 launch=1
        from daemon: revision 2: b
        server restarted at revision 2
          state: era=stateless version=2026-07-28 launch=2 restarts=1
        "#,
    );
}

#[test]
fn the_hosts_late_answer_to_a_restarted_servers_request_reaches_nobody() {
    check(
        templated(),
        r#"
        from daemon: revision 1: a
        server started at revision 1
          state: launch=1
        from server: {"jsonrpc":"2.0","id":5,"method":"elicitation/create","params":{}}
          to host: {"jsonrpc":"2.0","id":5,"method":"elicitation/create","params":{}}
        from server: {"jsonrpc":"2.0","id":6,"method":"sampling/createMessage","params":{}}
          to host: {"jsonrpc":"2.0","id":6,"method":"sampling/createMessage","params":{}}
        from daemon: revision 2: b
        server restarted at revision 2
          state: launch=2 restarts=1
        from host: {"jsonrpc":"2.0","id":5,"result":{"action":"accept"}}
        from server: {"jsonrpc":"2.0","id":6,"method":"elicitation/create","params":{}}
          to host: {"jsonrpc":"2.0","id":6,"method":"elicitation/create","params":{}}
        from host: {"jsonrpc":"2.0","id":6,"result":{"action":"decline"}}
          to server: {"jsonrpc":"2.0","id":6,"result":{"action":"decline"}}
        "#,
    );
}
