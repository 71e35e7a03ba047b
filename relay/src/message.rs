//! One JSON-RPC message of a line, read through [`super::json`] without being rebuilt, and the
//! few messages the proxy writes itself.

use rootsd_proto::session::ServerInfo;
use serde::Deserialize;

use super::json::{self, Span};

/// A message: one JSON object, with the members its fate turns on found.
pub(super) struct Msg<'a> {
    /// The message's own bytes (a whole line, or one element of a batch).
    pub text: &'a [u8],
    span: Span,
    /// The members the relay reads, found as the object is read: it asks for them several times
    /// per message, and it reads no others at the top level.
    known: Known,
}

/// The values of `id`, `method`, `result`, `error` and `params`: the last of each, as serde_json's
/// maps keep the last of a repeated key.
#[derive(Default)]
struct Known {
    id: Option<Span>,
    method: Option<Span>,
    result: Option<Span>,
    error: Option<Span>,
    params: Option<Span>,
}

impl Known {
    fn slot(&mut self, key: &[u8]) -> Option<&mut Option<Span>> {
        Some(match key {
            b"id" => &mut self.id,
            b"method" => &mut self.method,
            b"result" => &mut self.result,
            b"error" => &mut self.error,
            b"params" => &mut self.params,
            _ => return None,
        })
    }

    fn note(&mut self, text: &[u8], member: &json::Member) {
        let slot = match member.plain_key(text) {
            Some(key) => self.slot(key),
            // A key with escapes (rare) is compared by its decoded text.
            None => self.slot(member.key(text).as_bytes()),
        };
        if let Some(slot) = slot {
            *slot = Some(member.value);
        }
    }
}

impl<'a> Msg<'a> {
    /// Reads `text` as one JSON-RPC message; `None` unless it is a well-formed object
    /// (surrounding whitespace aside).
    pub fn read(text: &'a [u8]) -> Option<Self> {
        let span = json::trimmed(text);
        let mut known = Known::default();
        json::each_member(text, span, |member| known.note(text, &member))?;
        Some(Self { text, span, known })
    }

    /// The whole message, as an object span.
    pub fn span(&self) -> Span {
        self.span
    }

    /// The value of the top-level member `key`. The five the relay reads were found as the
    /// message was read; any other key costs a scan of the whole message.
    pub fn get(&self, key: &str) -> Option<Span> {
        match key {
            "id" => self.known.id,
            "method" => self.known.method,
            "result" => self.known.result,
            "error" => self.known.error,
            "params" => self.known.params,
            _ => json::get(self.text, self.span, key),
        }
    }

    /// The value at `path` below this message.
    pub fn at(&self, path: &[&str]) -> Option<Span> {
        let (first, rest) = path.split_first()?;
        json::at(self.text, self.get(first)?, rest)
    }

    /// The string at `path`, if it is one.
    pub fn string_at(&self, path: &[&str]) -> Option<String> {
        json::string(self.text, self.at(path)?)
    }

    pub fn method(&self) -> Option<std::borrow::Cow<'a, str>> {
        json::str_at(self.text, self.known.method?)
    }

    /// The raw bytes of `id`; absent for notifications. JSON `null` counts as absent: it is no
    /// request's id.
    pub fn id(&self) -> Option<&'a [u8]> {
        self.known
            .id
            .map(|span| span.of(self.text))
            .filter(|raw| *raw != b"null")
    }

    /// Whether this is a response that carries a result (not an error).
    pub fn is_success(&self) -> bool {
        self.known.result.is_some()
    }

    pub fn is_response(&self) -> bool {
        (self.known.result.is_some() || self.known.error.is_some()) && self.method().is_none()
    }
}

/// A server's identity from an `Implementation` object; missing fields are empty.
pub(super) fn server_info(text: &[u8], span: Span) -> Option<ServerInfo> {
    #[derive(Deserialize)]
    struct Implementation {
        #[serde(default)]
        name: String,
        #[serde(default)]
        version: String,
    }
    let found: Implementation = json::parse(text, span)?;
    Some(ServerInfo {
        name: found.name,
        version: found.version,
    })
}

/// A JSON-RPC error response with code -32603 (internal error) to the request `id` (raw JSON).
pub(super) fn internal_error(id: &[u8], message: &str) -> Vec<u8> {
    error_response(id, -32603, message)
}

/// A JSON-RPC error response to the request `id` (raw JSON; `null` when it is not known).
pub(super) fn error_response(id: &[u8], code: i64, message: &str) -> Vec<u8> {
    let mut line = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    line.extend_from_slice(id);
    line.extend_from_slice(format!(r#","error":{{"code":{code},"message":"#).as_bytes());
    line.extend_from_slice(&serde_json::to_vec(message).expect("strings always serialise"));
    line.extend_from_slice(b"}}");
    line
}

/// The answer to `roots/list` made ready once per list, so that answering a request costs one
/// allocation (the line itself) and two copies: `{"jsonrpc":"2.0","id":` + the id as it came +
/// `,"result":LIST}`, byte for byte what [`success_response`] writes.
#[derive(Default)]
pub(super) struct ReadyAnswer {
    /// `,"result":` + the result + `}`: everything after the id.
    tail: Vec<u8>,
}

/// What every response the proxy writes starts with, up to its id.
const RESPONSE_HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;

impl ReadyAnswer {
    /// The answer for `result` (raw JSON).
    pub fn new(result: &[u8]) -> Self {
        let mut tail = Vec::with_capacity(result.len() + 11);
        tail.extend_from_slice(br#","result":"#);
        tail.extend_from_slice(result);
        tail.push(b'}');
        Self { tail }
    }

    /// The response to the request `id` (raw JSON), in a buffer with room for one byte more:
    /// the newline the proxy writes after it.
    pub fn to(&self, id: &[u8]) -> Vec<u8> {
        let mut line = Vec::with_capacity(RESPONSE_HEAD.len() + id.len() + self.tail.len() + 1);
        line.extend_from_slice(RESPONSE_HEAD);
        line.extend_from_slice(id);
        line.extend_from_slice(&self.tail);
        line
    }
}

/// A JSON-RPC success response to the request `id` with `result` (both raw JSON), written
/// plainly: the form [`ReadyAnswer`] must match, which its tests check it against.
#[cfg(test)]
pub(super) fn success_response(id: &[u8], result: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(40 + id.len() + result.len());
    line.extend_from_slice(RESPONSE_HEAD);
    line.extend_from_slice(id);
    line.extend_from_slice(br#","result":"#);
    line.extend_from_slice(result);
    line.push(b'}');
    line
}

/// Joins messages into one batch line.
pub(super) fn batch(messages: &[Vec<u8>]) -> Vec<u8> {
    let mut line = vec![b'['];
    for (i, message) in messages.iter().enumerate() {
        if i > 0 {
            line.push(b',');
        }
        line.extend_from_slice(message);
    }
    line.push(b']');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_the_proxy_writes_are_json_rpc() {
        let error: serde_json::Value =
            serde_json::from_slice(&internal_error(br#""x""#, "no \"roots\"")).unwrap();
        assert_eq!(
            error,
            serde_json::json!({"jsonrpc":"2.0","id":"x","error":{"code":-32603,"message":"no \"roots\""}})
        );
        assert_eq!(
            success_response(b"7", br#"{"roots":[]}"#),
            br#"{"jsonrpc":"2.0","id":7,"result":{"roots":[]}}"#
        );
        assert_eq!(batch(&[b"1".to_vec(), b"2".to_vec()]), b"[1,2]");
    }

    /// The ready-made answer is the very line `success_response` builds, whatever the id's form.
    #[test]
    fn the_ready_answer_is_byte_identical_for_every_id_form() {
        let results: [&[u8]; 3] = [
            br#"{"roots":[]}"#,
            br#"{"roots":[{"uri":"file:///a%20b","name":"a \"b\""}]}"#,
            &[b'x'; 100_000],
        ];
        let ids: [&[u8]; 9] = [
            b"0",
            b"7",
            b"-3",
            b"1.5e3",
            b"12345678901234567890123456789012345678901234567890",
            br#""""#,
            br#""a\"b\\c\u0041\n""#,
            "\"\u{e9}t\u{e9} \u{1F600}\"".as_bytes(),
            &[b'9'; 4096],
        ];
        for result in results {
            let ready = ReadyAnswer::new(result);
            for id in ids {
                let line = ready.to(id);
                assert_eq!(line, success_response(id, result), "id {id:?}");
                assert_eq!(
                    line.capacity(),
                    line.len() + 1,
                    "room for the newline alone"
                );
            }
        }
        let parsed: serde_json::Value =
            serde_json::from_slice(&ReadyAnswer::new(br#"{"roots":[]}"#).to(br#""a\"b""#)).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!({"jsonrpc":"2.0","id":"a\"b","result":{"roots":[]}})
        );
    }

    #[test]
    fn a_message_knows_its_method_id_and_kind() {
        let msg =
            Msg::read(br#"{"jsonrpc":"2.0","id":12345678901234567890123,"result":{}}"#).unwrap();
        assert_eq!(msg.id(), Some(&b"12345678901234567890123"[..]));
        assert!(msg.is_response() && msg.is_success());
        let note = Msg::read(br#"{"method":"notifications/initialized","id":null}"#).unwrap();
        assert_eq!(note.method().as_deref(), Some("notifications/initialized"));
        assert_eq!(note.id(), None);
        assert!(Msg::read(b"[1]").is_none());
    }

    /// The members found as the message is read are the ones a search finds: the last of a
    /// repeated key, and keys spelled with escapes.
    #[test]
    fn known_members_are_the_last_of_their_key_however_spelled() {
        let msg = Msg::read(
            br#"{"id":1,"method":"a","\u0069d":2,"result":{},"me\u0074hod":"b","error":{},"id":3}"#,
        )
        .unwrap();
        assert_eq!(msg.id(), Some(&b"3"[..]));
        assert_eq!(msg.method().as_deref(), Some("b"));
        assert!(msg.is_success() && !msg.is_response());
        let escaped = Msg::read(br#"{"\u0069d":"x","r\u0065sult":null,"id":null}"#).unwrap();
        assert_eq!(escaped.id(), None, "the last id is null");
        assert!(escaped.is_response());
        let odd = Msg::read(br#"{"method":5,"error":{},"id":"q"}"#).unwrap();
        assert!(odd.is_response(), "a method that is no string is no method");
        assert_eq!(odd.id(), Some(&br#""q""#[..]));
        let with_params =
            Msg::read(br#"{"params":1,"x":{"y":2},"p\u0061rams":[3],"x":4}"#).unwrap();
        assert_eq!(
            with_params.get("params").map(|s| s.of(with_params.text)),
            Some(&b"[3]"[..])
        );
        assert_eq!(
            with_params.get("x").map(|s| s.of(with_params.text)),
            Some(&b"4"[..])
        );
        for key in ["id", "method", "result", "error"] {
            assert_eq!(
                msg.get(key).map(|s| s.of(msg.text)),
                match key {
                    "id" => Some(&b"3"[..]),
                    "method" => Some(&br#""b""#[..]),
                    _ => Some(&b"{}"[..]),
                },
                "{key}"
            );
        }
    }
}
