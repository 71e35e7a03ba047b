//! Property tests of the control protocol's decoder (`connection::parse_request` and the params
//! of each method): whatever a client sends, the daemon answers with the right error code and
//! one line, and never panics. The fuzz target `control_request` (fuzz/) runs the same checks
//! ([`check::decode`]) for minutes.

#[path = "decoder/check.rs"]
mod check;

use check::{Decoded, decode};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Method names: every known one, and others.
fn method() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            "hello",
            "roots.list",
            "roots.add",
            "roots.remove",
            "workspaces.list",
            "status",
            "watch",
            "session.register",
            "session.update",
            "session.publish",
            "sessions.list",
            "wait",
            "log",
        ])
        .prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        Just(json!(5)),
    ]
}

/// Params of the shapes the methods take, right and wrong.
fn params() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        "\\PC{0,10}".prop_map(Value::from),
        Just(json!("default")),
        Just(json!("file:///srv/a")),
        Just(json!("a b")),
    ];
    let key = prop::sample::select(vec![
        "workspace",
        "roots",
        "uri",
        "name",
        "targets",
        "input",
        "protocol_version",
        "client",
        "label",
        "pid",
        "state",
        "list_changed",
        "era",
        "revision",
        "timeout_ms",
        "fetched_revision",
        "server",
        "host_roots",
        "mode",
        "limit",
        "before",
        "x",
    ]);
    scalar.prop_recursive(3, 32, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..5).prop_map(|m| Value::Object(
                m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

/// Whole messages: envelopes right and wrong, around params right and wrong.
fn message() -> impl Strategy<Value = Value> {
    let id = prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        any::<i64>().prop_map(|n| Some(Value::from(n))),
        "\\PC{0,6}".prop_map(|s| Some(Value::from(s))),
        Just(Some(json!([1]))),
        Just(Some(json!({"a": 1}))),
        Just(Some(json!(1.5))),
    ];
    let jsonrpc = prop_oneof![
        4 => Just(Some(json!("2.0"))),
        1 => Just(None),
        1 => Just(Some(json!("1.0"))),
        1 => Just(Some(json!(2))),
    ];
    (
        jsonrpc,
        id,
        prop::option::of(method()),
        prop::option::of(params()),
    )
        .prop_map(|(jsonrpc, id, method, params)| {
            let mut message = serde_json::Map::new();
            for (key, value) in [
                ("jsonrpc", jsonrpc),
                ("id", id),
                ("method", method),
                ("params", params),
            ] {
                if let Some(value) = value {
                    message.insert(key.to_owned(), value);
                }
            }
            Value::Object(message)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any text at all: an answer with the right code, never a panic.
    #[test]
    fn any_line_gets_an_answer(line in "\\PC{0,64}") {
        decode(&line);
    }

    /// Messages of every shape: envelopes and params are judged as documented.
    #[test]
    fn messages_are_judged_by_their_envelope_then_their_params(message in message()) {
        let line = message.to_string();
        let decoded = decode(&line);
        // An id is a string or a number; `null` is refused (docs/PROTOCOL.md).
        let valid_envelope = message["jsonrpc"] == "2.0"
            && message["method"].is_string()
            && matches!(message.get("id"), None | Some(Value::String(_) | Value::Number(_)));
        match decoded {
            Decoded::Refused(code) => {
                prop_assert!(!valid_envelope, "{line} was refused ({code})");
                prop_assert_eq!(code, rootsd_proto::wire::code::INVALID_REQUEST);
            }
            Decoded::Blank => prop_assert!(false, "{} is not blank", line),
            _ => prop_assert!(valid_envelope, "{} was accepted", line),
        }
    }

    /// The same message cut anywhere short is refused as JSON that does not parse, or as a
    /// value that is not a request.
    #[test]
    fn a_message_cut_short_is_refused(message in message(), cut in any::<prop::sample::Index>()) {
        let line = message.to_string();
        let at = cut.index(line.len());
        prop_assume!(line.is_char_boundary(at));
        let cut = &line[..at];
        match decode(cut) {
            Decoded::Refused(_) | Decoded::Blank => {}
            other => prop_assert!(false, "{cut} decoded as {other:?}"),
        }
    }
}

#[test]
fn well_formed_requests_of_every_method_are_typed() {
    // The version is any number here: the decoder reads params, the hello handler judges them.
    for (line, expected) in [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol_version":7}}"#,
            Decoded::Typed("hello"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"x","method":"roots.add","params":{"roots":[{"uri":"file:///a"}]}}"#,
            Decoded::Typed("roots.add"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"status"}"#,
            Decoded::Typed("status"),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"session.update","params":{"list_changed":true}}"#,
            Decoded::Typed("session.update"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"roots.list","params":{"workspace":"a b"}}"#,
            Decoded::BadParams("roots.list"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"frobnicate"}"#,
            Decoded::Unknown,
        ),
        (
            r#"{"jsonrpc":"2.0","id":{},"method":"status"}"#,
            Decoded::Refused(rootsd_proto::wire::code::INVALID_REQUEST),
        ),
        ("{", Decoded::Refused(rootsd_proto::wire::code::PARSE_ERROR)),
        ("  ", Decoded::Blank),
    ] {
        assert_eq!(decode(line), expected, "{line}");
    }
}
