//! The 2026-07-28 rules as transcripts (see [`super`] for the form): roots rounds
//! answered and retried by the proxy, rounds that go to the host, the era a session negotiated,
//! cancellations and ids.

use super::{check, handshake};

#[test]
fn a_2026_request_for_roots_only_is_answered_and_retried_by_the_proxy() {
    check(
        handshake(),
        r#"
        from daemon: revision 3: a
        from host: {"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"scan","arguments":{"n":1.0},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"scan","arguments":{"n":1.0},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          state: version=2026-07-28
        from server: {"jsonrpc":"2.0","id":41,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}},"requestState":"s\"1","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"4"}}}}
          to server: {"jsonrpc":"2.0","id":"rootsd-retry-1","method":"tools/call","params":{"name":"scan","arguments":{"n":1.0},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}},"inputResponses":{"ws":{"roots":[{"uri":"file:///a","name":"a"}]}},"requestState":"s\"1"}}
          state: era=stateless version=2026-07-28 server=m/4 fetched=3 fetches=1
        from server: {"jsonrpc":"2.0","id":"rootsd-retry-1","result":{"resultType":"complete","content":[]}}
          to host: {"jsonrpc":"2.0","id":41,"result":{"resultType":"complete","content":[]}}
        from daemon: revision 4: b
        "#,
    );
}

#[test]
fn roots_are_declared_only_on_requests_the_proxy_answers_them_for() {
    check(
        handshake(),
        r#"
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          state: version=2026-07-28
        from host: {"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"p","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{"x":1}}}}}
          to server: {"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"p","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{"x":1}}}}}
        from host: {"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
          to server: {"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
        "#,
    );
}

#[test]
fn a_2026_session_without_a_name_is_asked_for_one_by_the_proxy() {
    check(
        handshake(),
        r#"
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          state: version=2026-07-28
        from server: {"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":[]}}
          to server: {"jsonrpc":"2.0","id":"rootsd-discover-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to host: {"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":[]}}
          state: era=stateless version=2026-07-28
        from server: {"jsonrpc":"2.0","id":"rootsd-discover-1","result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"pinned","version":"9"}}}}
          state: era=stateless version=2026-07-28 server=pinned/9
        from server: {"jsonrpc":"2.0","id":2,"result":{}}
          to host: {"jsonrpc":"2.0","id":2,"result":{}}
        "#,
    );
}

#[test]
fn the_era_is_what_was_negotiated_not_the_shape_of_a_request() {
    check(
        handshake(),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          state: version=2026-07-28
        from server: {"jsonrpc":"2.0","id":"d","error":{"code":-32601,"message":"Method not found"}}
          to host: {"jsonrpc":"2.0","id":"d","error":{"code":-32601,"message":"Method not found"}}
        from host: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}
          to server: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake version=2025-11-25
        from server: {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","serverInfo":{"name":"s","version":"1"}}}
          to host: {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","serverInfo":{"name":"s","version":"1"}}}
          state: list_changed era=handshake version=2025-11-25 server=s/1
        from host: {"jsonrpc":"2.0","method":"notifications/initialized"}
          to server: {"jsonrpc":"2.0","method":"notifications/initialized"}
          state: list_changed era=handshake version=2025-11-25 server=s/1 initialized
        from server: {"jsonrpc":"2.0","id":0,"method":"roots/list"}
          to server: {"jsonrpc":"2.0","id":0,"result":{"roots":[{"uri":"file:///a","name":"a"}]}}
          state: list_changed era=handshake version=2025-11-25 server=s/1 initialized fetched=1 fetches=1
        from host: {"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
          to server: {"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
        from server: {"jsonrpc":"2.0","id":5,"result":{"content":[]}}
          to host: {"jsonrpc":"2.0","id":5,"result":{"content":[]}}
        from daemon: revision 2: b
          to server: {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}
          state: list_changed era=handshake version=2025-11-25 server=s/1 initialized fetched=1 fetches=1 outstanding sent=1
        "#,
    );
}

#[test]
fn a_refused_late_initialize_leaves_a_2026_session_as_it_was_negotiated() {
    // A host that probes with `initialize` after speaking 2026-07-28, refused by a server that
    // only speaks 2026-07-28: the connection stays 2026-07-28, and so does what is reported.
    check(
        handshake(),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          state: version=2026-07-28
        from server: {"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"4"}}}}
          to host: {"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"4"}}}}
          state: era=stateless version=2026-07-28 server=m/4
        from host: {"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}
          to server: {"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}}}}
          state: list_changed era=handshake version=2025-11-25 server=m/4
        from server: {"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"initialize is not part of 2026-07-28"}}
          to host: {"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"initialize is not part of 2026-07-28"}}
          state: era=stateless version=2026-07-28 server=m/4
        from daemon: revision 2: b
        "#,
    );
}

#[test]
fn a_2026_request_mixing_roots_and_elicitation_goes_to_the_host_and_roots_join_its_retry() {
    check(
        handshake(),
        r#"
        from daemon: revision 3: a
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}
          to server: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"roots":{}}}}}
          state: version=2026-07-28
        from server: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"},"ask":{"method":"elicitation/create","params":{}}},"requestState":"s2","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"4"}}}}
          to host: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ask":{"method":"elicitation/create","params":{}}},"requestState":"s2","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"4"}}}}
          state: era=stateless version=2026-07-28 server=m/4
        from host: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","requestState":"s2","inputResponses":{"ask":{"action":"accept"}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}
          to server: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","requestState":"s2","inputResponses":{"ask":{"action":"accept"},"ws":{"roots":[{"uri":"file:///a","name":"a"}]}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"roots":{}}}}}
          state: era=stateless version=2026-07-28 server=m/4 fetched=3 fetches=1
        "#,
    );
}

#[test]
fn several_roots_requests_mixed_in_are_all_taken_out_and_all_answered_in_the_retry() {
    // Found by the property tests: removing two neighbouring members once left a dangling comma,
    // and a retry without inputResponses got one inputResponses member per answer.
    check(
        handshake(),
        r#"
        from daemon: revision 3: a
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
          to server: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          state: version=2026-07-28
        from server: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ask":{"method":"elicitation/create"},"ws":{"method":"roots/list"},"more":{"method":"roots/list"}},"requestState":"s2"}}
          to server: {"jsonrpc":"2.0","id":"rootsd-discover-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
          to host: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ask":{"method":"elicitation/create"}},"requestState":"s2"}}
          state: era=stateless version=2026-07-28
        from host: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","requestState":"s2","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
          to server: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","requestState":"s2","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}},"inputResponses":{"ws":{"roots":[{"uri":"file:///a","name":"a"}]},"more":{"roots":[{"uri":"file:///a","name":"a"}]}}}}
          state: era=stateless version=2026-07-28 fetched=3 fetches=1
        "#,
    );
}

#[test]
fn without_a_list_a_2026_request_for_roots_waits_then_fails_and_never_gets_an_empty_list() {
    check(
        handshake(),
        r#"
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          state: version=2026-07-28
        from server: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"4"}}}}
          state: era=stateless version=2026-07-28 server=m/4
        after 5s
          to host: {"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"the server asked for roots, but rootsd is not reachable and rootsctl proxy has no list to give; retry once rootsd is back"}}
        from host: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
        from server: {"jsonrpc":"2.0","id":2,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}}}}
          to host: {"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"the server asked for roots, but rootsd is not reachable and rootsctl proxy has no list to give; retry once rootsd is back"}}
        "#,
    );
}

#[test]
fn a_mixed_retry_without_a_list_waits_for_one() {
    check(
        handshake(),
        r#"
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}
          to server: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"roots":{}}}}}
          state: version=2026-07-28
        from server: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"},"ask":{"method":"elicitation/create"}},"requestState":"m","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"4"}}}}
          to host: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ask":{"method":"elicitation/create"}},"requestState":"m","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"4"}}}}
          state: era=stateless version=2026-07-28 server=m/4
        from host: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","requestState":"m","inputResponses":{"ask":{"action":"accept"}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}
        from daemon: revision 2: a
          to server: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","requestState":"m","inputResponses":{"ask":{"action":"accept"},"ws":{"roots":[{"uri":"file:///a","name":"a"}]}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"roots":{}}}}}
          state: era=stateless version=2026-07-28 server=m/4 fetched=2 fetches=1
        "#,
    );
}

#[test]
fn a_host_cancel_stops_a_request_that_waits_for_the_list_or_crosses_a_round() {
    check(
        handshake(),
        r#"
        from host: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          state: version=2026-07-28
        from server: {"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"4"}}}}
          state: era=stateless version=2026-07-28 server=m/4
        from host: {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}
        from daemon: revision 1: a
        after 5s
        from host: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"y","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"y","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
        from server: {"jsonrpc":"2.0","id":2,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}}}}
          to server: {"jsonrpc":"2.0","id":"rootsd-retry-1","method":"tools/call","params":{"name":"y","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}},"inputResponses":{"ws":{"roots":[{"uri":"file:///a","name":"a"}]}}}}
          state: era=stateless version=2026-07-28 server=m/4 fetched=1 fetches=1
        from host: {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"user"}}
          to server: {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"rootsd-retry-1","reason":"user"}}
        from server: {"jsonrpc":"2.0","id":"rootsd-retry-1","result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}}}}
        "#,
    );
}

#[test]
fn a_host_id_equal_to_a_proxy_retry_id_is_relayed_under_another() {
    check(
        handshake(),
        r#"
        from daemon: revision 1: a
        from host: {"jsonrpc":"2.0","id":"rootsd-retry-1","method":"tools/list","params":{}}
          to server: {"jsonrpc":"2.0","id":"rootsd-retry-1","method":"tools/list","params":{}}
        from host: {"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
          to server: {"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}}
          state: version=2026-07-28
        from server: {"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required","inputRequests":{"ws":{"method":"roots/list"}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"4"}}}}
          to server: {"jsonrpc":"2.0","id":"rootsd-retry-2","method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}},"inputResponses":{"ws":{"roots":[{"uri":"file:///a","name":"a"}]}}}}
          state: era=stateless version=2026-07-28 server=m/4 fetched=1 fetches=1
        from host: {"jsonrpc":"2.0","id":"rootsd-retry-2","method":"tools/list","params":{}}
          to server: {"jsonrpc":"2.0","id":"rootsd-relay-3","method":"tools/list","params":{}}
        from server: {"jsonrpc":"2.0","id":"rootsd-relay-3","result":{"tools":[]}}
          to host: {"jsonrpc":"2.0","id":"rootsd-retry-2","result":{"tools":[]}}
        from server: {"jsonrpc":"2.0","id":"rootsd-retry-2","result":{"resultType":"complete","content":[]}}
          to host: {"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","content":[]}}
        from server: {"jsonrpc":"2.0","id":"rootsd-retry-1","result":{"tools":[]}}
          to host: {"jsonrpc":"2.0","id":"rootsd-retry-1","result":{"tools":[]}}
        "#,
    );
}
