//! The twin's streaming path, taken where a settled session's responses stream.

use super::super::{
    Body, Event, Id, Line, Message, Method, Params, ResultBody, Scenario, Spacing, Version, run,
};
use super::*;
use crate::Config;

fn message(id: Id, method: Option<Method>, body: Body) -> Message {
    Message {
        jsonrpc: true,
        id,
        method,
        body,
    }
}

/// A session set up in the handshake era, then results written `result` first, and one cut
/// short: the lines the twin streams.
fn settled_session() -> Vec<Event> {
    let version = Version::V20250326;
    vec![
        Event::Host(Line::Message(
            message(
                Id::Int(0),
                Some(Method::Initialize),
                Body::Params(Params::Initialize {
                    version,
                    roots: None,
                    capabilities_not_object: false,
                }),
            ),
            Spacing::Compact,
        )),
        Event::Server(Line::Message(
            message(
                Id::Int(0),
                None,
                Body::Result(ResultBody::Initialize {
                    version,
                    info: true,
                }),
            ),
            Spacing::Reversed,
        )),
        Event::Host(Line::Message(
            message(Id::Absent, Some(Method::Initialized), Body::None),
            Spacing::Compact,
        )),
        Event::Host(Line::Message(
            message(
                Id::Int(1),
                Some(Method::ToolsCall),
                Body::Params(Params::Empty),
            ),
            Spacing::Compact,
        )),
        Event::Server(Line::Message(
            message(Id::Int(1), None, Body::Result(ResultBody::Complete)),
            Spacing::Reversed,
        )),
        Event::Server(Line::Message(
            message(Id::Int(2), None, Body::Error),
            Spacing::Compact,
        )),
        Event::Server(Line::Truncated(message(Id::Int(3), None, Body::Error), 30)),
    ]
}

#[test]
fn a_settled_sessions_responses_stream_and_the_twin_agrees_with_the_relay() {
    let events = settled_session();
    // The clock is the tests' own, read once, as the relay's unit tests read it.
    static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let now = *T0.get_or_init(Instant::now);
    let mut relay = Relay::new(Config::new(true), now);
    let mut streamed = 0;
    for event in &events {
        match event {
            Event::Host(line) => relay.from_host(line.bytes(), now),
            Event::Server(line) => {
                streamed += usize::from(server_line(&mut relay, line.bytes(), now).is_some());
            }
            _ => unreachable!("only lines here"),
        }
    }
    assert_eq!(streamed, 3, "the result, the error and the cut line stream");
    assert_eq!(
        relay.in_flight(),
        0,
        "the streamed result retired its request"
    );
    run(
        &Scenario {
            list_changed: true,
            events,
        },
        now,
    );
}
