//! The scan against the whole-line reader, and the relay's decisions for streamed lines.

use std::time::Instant;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::scan::{Kept, Scan};
use super::*;
use crate::{Config, Output};

/// What the relay reads of a message: its id, method, whether it is a response, and a success.
type Read = Option<(Option<Vec<u8>>, Option<String>, bool, bool)>;

/// What the relay reads of `line` whole: (id, method, response, success), `None` if it does
/// not read it as a message.
fn whole(line: &[u8]) -> Read {
    let msg = Msg::read(line)?;
    Some((
        msg.id().map(<[u8]>::to_vec),
        msg.method().map(|m| m.into_owned()),
        msg.is_response(),
        msg.is_success(),
    ))
}

/// The same, through the scan fed in pieces cut at `cuts`.
fn scanned(line: &[u8], cuts: &[usize]) -> Read {
    let mut scan = Scan::new();
    let mut at = 0;
    for &cut in cuts {
        let cut = cut.clamp(at, line.len());
        scan.feed(&line[at..cut]);
        at = cut;
    }
    scan.feed(&line[at..]);
    let seen = scan.finish()?;
    let skeleton = skeleton(&seen);
    whole(&skeleton)
}

const LINES: &[&str] = &[
    r#"{"result":{"content":[{"type":"text","text":"a \"quoted\" {[ text"}]},"jsonrpc":"2.0","id":7}"#,
    r#"{"error":{"code":-1,"message":"no"},"id":"x\"y"}"#,
    r#" { "result" : [1, {"a": "}"}] , "id" : "\u0061" } "#,
    r#"{"result":1,"id":1,"id":2}"#,
    r#"{"result":1,"\u0069d":3}"#,
    r#"{"result":1,"id":null}"#,
    r#"{"result":1,"id":{"n":[1,2]}}"#,
    r#"{"result":1,"id":1x"y}"#,
    r#"{"result":1,"method":"roots/list","id":4}"#,
    r#"{"result":{"a":1]}"#,
    r#"{"result":{"a":1},"id":5} x"#,
    r#"{"result":{"a":1},"id":5"#,
    r#"{"result":{"a":1},,"id":5}"#,
    r#"{"result":{"a":1},"id":}"#,
    r#"{"result":"\\","id":6}"#,
    r#"{"result":"\\\"","id":6}"#,
    r#"{"result":"a\\\\\\\"b\\\\\\\\","id":9}"#,
    r#"{"result":{"t":"\\\\\"}\\"},"id":10}"#,
    r#"{"result" 1}"#,
    r#"{}"#,
    r#"{"result":1,}"#,
    "{\"result\":\"caf\u{e9}\",\"id\":8}\r",
];

#[test]
fn the_scan_reads_every_line_as_the_whole_line_reader_does_however_it_is_cut() {
    for line in LINES {
        let line = line.as_bytes();
        for cut in 0..=line.len() {
            assert_eq!(
                scanned(line, &[cut]),
                whole(line),
                "{} cut at {cut}",
                String::from_utf8_lossy(line)
            );
        }
        let every_byte: Vec<usize> = (0..line.len()).collect();
        assert_eq!(scanned(line, &every_byte), whole(line));
    }
}

proptest! {
    /// Lines made of JSON's pieces, well-formed or not, read the same in pieces as whole.
    #[test]
    fn the_scan_agrees_with_the_whole_line_reader_on_any_line(
        pieces in proptest::collection::vec(prop::sample::select(vec![
            "{", "}", "[", "]", ",", ":", " ", "\"", "\\", "\"id\"", "\"result\"", "\"error\"",
            "\"method\"", "1", "null", "\"a\"", "x", "\r",
        ]), 0..40),
        cuts in proptest::collection::vec(0usize..200, 0..6),
    ) {
        let mut line = b"{\"result\":".to_vec();
        for piece in pieces {
            line.extend_from_slice(piece.as_bytes());
        }
        let mut cuts = cuts;
        cuts.sort_unstable();
        prop_assert_eq!(scanned(&line, &cuts), whole(&line));
    }
}

#[test]
fn a_long_id_is_noted_but_not_kept() {
    let mut line = br#"{"result":1,"id":""#.to_vec();
    line.extend(std::iter::repeat_n(b'a', scan::VALUE_KEPT + 1));
    line.extend_from_slice(br#""}"#);
    let mut scan = Scan::new();
    scan.feed(&line);
    assert_eq!(scan.finish().unwrap().id, Some(Kept::TooLong));
}

#[test]
fn a_line_whose_result_or_error_comes_before_any_method_starts_a_response() {
    for yes in [
        r#"{"result":"#,
        r#"  {  "error""#,
        r#"{"\u0072esult":"#,
        r#"{"jsonrpc":"2.0","id":{"a":[1]},"result":"#,
        r#"{ "id" : 7 , "error""#,
    ] {
        assert!(starts_a_response(yes.as_bytes()), "{yes}");
    }
    for no in [
        r#"{"id":1,"method":"x","result":"#,
        r#"{"method":"x""#,
        r#"{"id":12"#,
        r#"{"id":1 "result":"#,
        r#"[{"result":"#,
        r#"{"resu"#,
        r#"{"results":"#,
        "",
    ] {
        assert!(!starts_a_response(no.as_bytes()), "{no}");
    }
}

fn t0() -> Instant {
    static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *T0.get_or_init(Instant::now)
}

fn line(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap()
}

/// A handshake-era session, set up, with the host's request `id` 7 in flight.
fn settled() -> Relay {
    let mut relay = Relay::new(Config::new(true), t0());
    relay.from_host(
        line(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h","version":"1"}}})),
        t0(),
    );
    relay.from_server(
        line(
            &json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18",
            "capabilities":{},"serverInfo":{"name":"s","version":"1"}}}),
        ),
        t0(),
    );
    relay.from_host(
        line(&json!({"jsonrpc":"2.0","method":"notifications/initialized"})),
        t0(),
    );
    relay.from_host(
        line(&json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"big"}})),
        t0(),
    );
    relay.take_output();
    relay
}

/// A result for `id`, written as the TypeScript SDK writes it: `result` first, `id` last.
fn result_id_last(id: &str, text_len: usize) -> Vec<u8> {
    format!(
        r#"{{"result":{{"content":[{{"type":"text","text":"{}"}}]}},"jsonrpc":"2.0","id":{id}}}"#,
        "r".repeat(text_len)
    )
    .into_bytes()
}

/// Streams `text` through `relay` in pieces of `piece` bytes; what the host gets, newline
/// included, and the relay's own output after it.
fn stream(relay: &mut Relay, text: &[u8], piece: usize, limit: usize) -> (Vec<u8>, Vec<Output>) {
    let mut streamed = relay
        .stream_from_server(&text[..piece.min(text.len())], limit)
        .expect("the line streams");
    let mut host = Vec::new();
    for chunk in text.chunks(piece) {
        let forward = streamed.part(chunk);
        host.extend_from_slice(&chunk[..forward.bytes]);
        if forward.cut {
            host.push(b'\n');
        }
    }
    if !streamed.is_over() {
        host.push(b'\n');
    }
    relay.stream_end(streamed, t0());
    (host, relay.take_output())
}

#[test]
fn a_result_streams_byte_for_byte_and_its_request_is_retired_by_the_id_at_its_end() {
    let mut relay = settled();
    assert_eq!(relay.in_flight(), 1);
    let text = result_id_last("7", 300_000);
    let (host, output) = stream(&mut relay, &text, 65_536, 16 << 20);
    assert_eq!(&host[..host.len() - 1], &text[..]);
    assert_eq!(host.last(), Some(&b'\n'));
    assert!(output.is_empty(), "{output:?}");
    assert_eq!(relay.in_flight(), 0);
}

#[test]
fn a_line_not_settled_by_its_start_is_held_whole() {
    let fresh = Relay::new(Config::new(true), t0());
    // Before the handshake, a response may be the initialize's, whose version is learnt.
    assert!(
        fresh
            .stream_from_server(br#"{"result":{"#, 1 << 20)
            .is_none()
    );
    let relay = settled();
    // A request, or a batch: not a response known from its start.
    for prefix in [
        &br#"{"id":7,"method":"x","#[..],
        br#"{"method":"x","params":"#,
        br#"[{"result":"#,
    ] {
        assert!(relay.stream_from_server(prefix, 1 << 20).is_none());
    }
    assert!(
        relay
            .stream_from_server(br#"{"error":{"#, 1 << 20)
            .is_some()
    );
    assert!(
        relay
            .stream_from_server(br#"{"jsonrpc":"2.0","id":7,"result":{"#, 1 << 20)
            .is_some()
    );
}

#[test]
fn a_streamed_line_past_the_limit_ends_the_hosts_line_and_earns_the_error_for_its_id() {
    let mut relay = settled();
    let text = result_id_last("7", 5_000);
    let (host, output) = stream(&mut relay, &text, 1_000, 4_096);
    assert_eq!(host.len(), 4_096 + 1);
    assert_eq!(&host[..4_096], &text[..4_096]);
    let [Output::ToHost(error)] = &output[..] else {
        panic!("{output:?}")
    };
    let error: Value = serde_json::from_slice(error).unwrap();
    assert_eq!(error["id"], 7);
    assert_eq!(error["error"]["code"], -32603);
    assert_eq!(relay.in_flight(), 0);
}

#[test]
fn a_streamed_line_cut_short_retires_nothing() {
    let mut relay = settled();
    let text = result_id_last("7", 5_000);
    let cut = &text[..text.len() - 3];
    let (host, output) = stream(&mut relay, cut, 1_000, 16 << 20);
    assert_eq!(&host[..host.len() - 1], cut);
    assert!(output.is_empty());
    // Still awaited: a restart answers it with an error.
    assert_eq!(relay.in_flight(), 1);
}
