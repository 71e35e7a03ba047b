//! Property tests of the relay and its span JSON reader: generated inputs, checked against
//! serde_json as the oracle and against the rules of [`super::scenario`]. They run in the normal
//! suite with a few hundred cases each; the fuzz targets in fuzz/ run the same scenarios for
//! minutes.

use std::time::Instant;

use arbitrary::{Arbitrary, Unstructured};
use proptest::prelude::*;
use serde_json::Value;

use super::json::{self, Editor};
use super::scenario::{self, Scenario};
use super::{Config, Output, Relay};

/// Arbitrary JSON values, a few levels deep, with the strings and numbers that trip readers:
/// escapes, quotes, brackets and non-ASCII inside strings, big and negative numbers.
fn json_value() -> impl Strategy<Value = Value> {
    let text = prop_oneof![
        "[a-z]{0,6}",
        Just("\"}]{[,:\\".to_owned()),
        Just("é\u{1b}\n\u{2028}".to_owned()),
        "\\PC{0,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        // Binary fractions, which serde_json reads back exactly.
        any::<i32>().prop_map(|i| Value::from(f64::from(i) / 64.0)),
        text.clone().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{0,4}|\\PC{0,3}", inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// `value` written compactly or with the spacing a pretty printer uses, minus its newlines
/// (which no line holds) replaced by other whitespace.
fn spelt(value: &Value, pretty: bool) -> Vec<u8> {
    if pretty {
        serde_json::to_string_pretty(value)
            .unwrap()
            .replace('\n', " \t")
            .into_bytes()
    } else {
        serde_json::to_vec(value).unwrap()
    }
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The span reader finds exactly the members and elements serde_json finds, with spans
    /// that hold exactly their values.
    #[test]
    fn spans_agree_with_serde_json(value in json_value(), pretty in any::<bool>()) {
        let text = spelt(&value, pretty);
        let root = json::root(&text).expect("one value");
        prop_assert_eq!(parse(root.of(&text)), value.clone());
        match &value {
            Value::Object(map) => {
                let members = json::members(&text, root).expect("an object");
                prop_assert_eq!(members.len(), map.len());
                for member in &members {
                    let key = member.key(&text).into_owned();
                    prop_assert!(member.is(&text, &key));
                    prop_assert_eq!(Some(&parse(member.value.of(&text))), map.get(&key));
                    let whole = parse(&[b"{", member.whole.of(&text), b"}"].concat());
                    prop_assert_eq!(&whole[&key], &map[&key]);
                    let got = json::get(&text, root, &key).map(|s| parse(s.of(&text)));
                    prop_assert_eq!(got.as_ref(), map.get(&key));
                }
            }
            Value::Array(items) => {
                let elements = json::elements(&text, root).expect("an array");
                let read: Vec<Value> = elements.iter().map(|s| parse(s.of(&text))).collect();
                prop_assert_eq!(&read, items);
            }
            _ => {
                prop_assert!(json::members(&text, root).is_none());
                prop_assert!(json::elements(&text, root).is_none());
            }
        }
    }

    /// A proper prefix of an object or array is never read as a value, so the relay forwards
    /// it unchanged.
    #[test]
    fn a_value_cut_short_is_no_value(value in json_value(), pretty in any::<bool>(), cut in any::<prop::sample::Index>()) {
        let text = spelt(&value, pretty);
        prop_assume!(matches!(value, Value::Object(_) | Value::Array(_)));
        let prefix = &text[..cut.index(text.len())];
        prop_assert!(json::root(prefix).is_none(), "{}", String::from_utf8_lossy(prefix));
    }

    /// Setting a member and removing others edits only their spans: the result parses to the
    /// expected value, and every byte outside the edited spans is unchanged.
    #[test]
    fn edits_change_what_they_name_and_nothing_else(
        value in json_value(),
        pretty in any::<bool>(),
        set_key in "[a-z_]{0,4}",
        set_value in json_value(),
        remove in any::<prop::sample::Index>(),
    ) {
        let Value::Object(map) = &value else { return Ok(()) };
        let text = spelt(&value, pretty);
        let root = json::root(&text).unwrap();
        let members = json::members(&text, root).unwrap();
        let removed = (!members.is_empty())
            .then(|| members[remove.index(members.len())].key(&text).into_owned())
            .filter(|k| *k != set_key);

        let mut editor = Editor::new(&text);
        let new = serde_json::to_vec(&set_value).unwrap();
        editor.set(root, &set_key, &new).unwrap();
        if let Some(key) = &removed {
            editor.remove(root, key).unwrap();
        }
        let edited = editor.finish();

        let mut expected = map.clone();
        expected.insert(set_key.clone(), set_value.clone());
        if let Some(key) = &removed {
            expected.remove(key);
        }
        prop_assert_eq!(parse(&edited), Value::Object(expected));
        // The members neither set nor removed keep their bytes.
        for member in members.iter() {
            let key = member.key(&text);
            if *key == *set_key || Some(key.as_ref()) == removed.as_deref() {
                continue;
            }
            let needle = member.whole.of(&text);
            prop_assert!(
                edited.windows(needle.len()).any(|w| w == needle),
                "{} lost its bytes", key
            );
        }
    }

    /// `ensure` makes a path of objects lead to the key, keeping what is there.
    #[test]
    fn ensure_creates_the_path_and_keeps_the_rest(value in json_value(), path in prop::collection::vec("[a-c]", 0..3), keep in any::<bool>()) {
        let Value::Object(_) = &value else { return Ok(()) };
        let text = serde_json::to_vec(&value).unwrap();
        let root = json::root(&text).unwrap();
        let steps: Vec<&str> = path.iter().map(String::as_str).collect();
        let mut editor = Editor::new(&text);
        let outcome = editor.ensure(root, &steps, "roots", b"{\"x\":1}", keep);
        let edited = editor.finish();
        let pointer: String = steps.iter().map(|s| format!("/{s}")).collect();
        match outcome {
            Some(()) => {
                let edited = parse(&edited);
                let target = edited.pointer(&pointer).expect("the path exists");
                let had = value.pointer(&format!("{pointer}/roots"));
                let expected = match (keep, had) {
                    (true, Some(old)) => old.clone(),
                    _ => serde_json::json!({"x": 1}),
                };
                prop_assert_eq!(&target["roots"], &expected);
            }
            None => prop_assert_eq!(edited, text, "nothing changes when the path is blocked"),
        }
    }

    /// Generated scenarios keep every rule of `scenario::check`.
    #[test]
    fn relay_scenarios_keep_every_rule(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let mut input = Unstructured::new(&bytes);
        if let Ok(generated) = Scenario::arbitrary(&mut input) {
            scenario::run(&generated, Instant::now());
        }
    }

    /// The members a message's fate turns on, found as it is read, are the ones serde_json
    /// finds: the last of a repeated key, keys spelt with escapes included, and a `method` that
    /// is no string is no method.
    #[test]
    fn a_messages_known_members_agree_with_serde_json(
        members in prop::collection::vec(
            (
                prop::sample::select(vec!["id", "method", "result", "error", "params", "jsonrpc", "other"]),
                any::<bool>(),
                json_value(),
            ),
            0..8,
        ),
        pretty in any::<bool>(),
    ) {
        let spelt_members: Vec<Vec<u8>> = members
            .iter()
            .map(|(key, escaped, value)| {
                // An escaped key spells its first letter as a \u escape.
                let key = if *escaped {
                    format!("\"\\u{:04x}{}\"", u32::from(key.as_bytes()[0]), &key[1..])
                } else {
                    format!("\"{key}\"")
                };
                [key.as_bytes(), b":", &spelt(value, pretty)].concat()
            })
            .collect();
        let text = [b"{".to_vec(), spelt_members.join(&b","[..]), b"}".to_vec()].concat();
        let oracle: serde_json::Map<String, Value> = serde_json::from_slice(&text).unwrap();
        let msg = super::message::Msg::read(&text).expect("an object");
        for key in ["id", "method", "result", "error", "params", "jsonrpc", "other"] {
            let got = msg.get(key).map(|span| parse(span.of(&text)));
            prop_assert_eq!(got.as_ref(), oracle.get(key), "{}", key);
        }
        let id = oracle.get("id").filter(|id| !id.is_null());
        prop_assert_eq!(msg.id().map(parse), id.cloned());
        let method = oracle.get("method").and_then(Value::as_str);
        let read_method = msg.method();
        prop_assert_eq!(read_method.as_deref(), method);
        prop_assert_eq!(msg.is_success(), oracle.contains_key("result"));
        prop_assert_eq!(
            msg.is_response(),
            method.is_none() && (oracle.contains_key("result") || oracle.contains_key("error"))
        );
    }

    /// A message no rule is about passes byte for byte, whichever side sends it and however it
    /// is spelt, at any point of a session.
    #[test]
    fn unknown_messages_pass_byte_for_byte(
        value in json_value(),
        pretty in any::<bool>(),
        method in "[a-z]{1,8}/[a-z]{1,8}",
        id in prop::option::of(0u32..1000),
        from_host in any::<bool>(),
        initialized in any::<bool>(),
    ) {
        prop_assume!(!["roots/list", "tools/call", "prompts/get", "resources/read"].contains(&method.as_str()));
        let mut message = serde_json::json!({"jsonrpc": "2.0", "method": method, "params": value});
        if let Some(id) = id {
            message["id"] = id.into();
        }
        let line = spelt(&message, pretty);
        let now = Instant::now();
        let mut relay = Relay::new(Config::new(true), now);
        if initialized {
            relay.from_host(br#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#, now);
            relay.from_server(br#"{"jsonrpc":"2.0","id":"init","result":{"protocolVersion":"2025-11-25","capabilities":{}}}"#, now);
            relay.from_host(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, now);
            let _ = relay.take_output();
        }
        if from_host {
            relay.from_host(line.clone(), now);
        } else {
            relay.from_server(line.clone(), now);
        }
        let out: Vec<Output> = relay
            .take_output()
            .into_iter()
            .filter(|o| !matches!(o, Output::State(_) | Output::Fetched))
            .collect();
        let expected = if from_host { Output::ToServer(line) } else { Output::ToHost(line) };
        prop_assert_eq!(out, vec![expected]);
    }
}
