//! Property tests of the control protocol's decoder (`connection::parse_request` and the params
//! of each method): whatever a client sends, the daemon answers with the right error code and
//! one line, and never panics. The fuzz target `control_request` (fuzz/) runs the same checks
//! ([`check::decode`]) for minutes.

mod check;

use check::{Decoded, decode};
use std::collections::BTreeSet;

use proptest::prelude::*;
use rootsd_proto::wire::{self, Method as _};
use serde_json::{Value, json};

/// Method names: every one of the table ([`wire::METHODS`]), and others.
fn method() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(wire::METHODS.iter().map(|m| m.name).collect::<Vec<_>>())
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

/// The names of [`wire::METHODS`], the one list of methods, which every other list is checked
/// against.
fn table() -> BTreeSet<String> {
    wire::METHODS.iter().map(|m| m.name.to_owned()).collect()
}

fn differences(list: &str, found: &BTreeSet<String>) -> Option<String> {
    let table = table();
    let missing: Vec<&String> = table.difference(found).collect();
    let extra: Vec<&String> = found.difference(&table).collect();
    (!missing.is_empty() || !extra.is_empty()).then(|| {
        format!("{list}: lacks {missing:?} of wire::METHODS, and names {extra:?}, which it lacks")
    })
}

fn workspace_file(path: &str) -> String {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()))
}

/// The methods `docs/PROTOCOL.md` gives a section: the names in backticks of its `##` and `###`
/// headings, less the notification the daemon sends (`roots.changed`), which is no method of the
/// table.
fn documented(markdown: &str) -> BTreeSet<String> {
    markdown
        .lines()
        .filter(|l| l.starts_with("## ") || l.starts_with("### "))
        .flat_map(|l| l.split('`').skip(1).step_by(2).map(str::to_owned))
        .filter(|name| name != wire::RootsChanged::NAME)
        .collect()
}

/// The methods section of the fuzz dictionary: the entries between its `# Methods` comment and
/// the next comment.
fn in_dictionary(dict: &str) -> BTreeSet<String> {
    dict.lines()
        .skip_while(|l| !l.starts_with("# Methods"))
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .filter_map(|l| {
            l.split_once('=')
                // `k5="\"hello\""`: a quoted string whose content is the JSON string.
                .map(|(_, v)| {
                    let quoted = v.trim();
                    let inner = quoted
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .unwrap_or(quoted);
                    inner.replace("\\\"", "\"").trim_matches('"').to_owned()
                })
        })
        .collect()
}

#[test]
fn every_list_of_methods_is_the_table() {
    let mut problems = Vec::new();
    // The decoder's dispatch (`check.rs`) reads the params of every method of the table.
    let decoded: BTreeSet<String> = table()
        .into_iter()
        .filter(|name| {
            let line = json!({"jsonrpc": "2.0", "id": 1, "method": name}).to_string();
            matches!(decode(&line), Decoded::Typed(n) | Decoded::BadParams(n) if n == name)
        })
        .collect();
    problems.extend(differences("daemon/tests/decoder/check.rs", &decoded));
    problems.extend(differences(
        "fuzz/control_request.dict",
        &in_dictionary(&workspace_file("fuzz/control_request.dict")),
    ));
    problems.extend(differences(
        "docs/PROTOCOL.md",
        &documented(&workspace_file("docs/PROTOCOL.md")),
    ));
    assert!(
        problems.is_empty(),
        "a method is declared in one place only:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_method_lists_check_would_see_a_method_in_one_place_only() {
    let mut found = table();
    assert_eq!(differences("list", &found), None);
    found.insert("roots.frobnicate".to_owned());
    found.remove("log");
    let problem = differences("list", &found).expect("a difference");
    assert!(
        problem.contains("\"log\"") && problem.contains("roots.frobnicate"),
        "{problem}"
    );
    let markdown = "# P\n## History: `log`\n### `hello`\n## Watching: `watch` and `roots.changed`\nText `status`.\n";
    assert_eq!(
        documented(markdown),
        ["hello", "log", "watch"].map(str::to_owned).into()
    );
    let dict = "# Methods: x\nk1=\"\\\"hello\\\"\"\n# Else\nk2=\"\\\"uri\\\"\"\n";
    assert_eq!(in_dictionary(dict), ["hello"].map(str::to_owned).into());
}
