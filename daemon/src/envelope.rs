//! The JSON-RPC envelope of the control protocol: reading a request line and writing the
//! response line, with the request's id echoed byte for byte.
//!
//! A request is read in one pass into borrowed pieces of its line: the id and params stay raw
//! JSON text until a method's params type reads them, and the id goes back exactly as the client
//! spelt it. (Read through `serde_json::Value`, an id such as `123456789012345678901234567890`
//! came back as `1.2345678901234568e29`, which no client can match to its request.) Nothing here
//! does I/O or knows the methods.

use std::borrow::Cow;

use rootsd_proto::wire::{ErrorObject, Method, code};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::RequestError;

/// One request as its line spells it.
#[derive(Debug)]
pub struct Incoming<'a> {
    /// Absent for a notification; otherwise a string or a number, as raw JSON text.
    pub id: Option<&'a RawValue>,
    pub method: Cow<'a, str>,
    /// Absent, or any JSON value as raw text; [`params`] reads it as a method's.
    pub params: Option<&'a RawValue>,
}

/// The members of a request, each kept raw so that a member of the wrong type is reported as
/// that rather than as a line that is not JSON. Unknown members are ignored.
#[derive(Deserialize)]
struct Members<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
}

/// A member that is present, `null` included (an `Option` alone would read `null` as absent,
/// and an `"id": null` request would pass for a notification).
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// Reads a request line. On failure returns the id to answer with (`None`, written as `null`,
/// when the id itself could not be read) and the error.
pub fn parse_request(line: &str) -> Result<Incoming<'_>, (Option<&RawValue>, RequestError)> {
    // Only an object is a request. (The derived reader would also take an array, as the
    // members in order.)
    if !line.trim_start().starts_with('{') {
        return Err((None, not_an_object(line)));
    }
    let members: Members<'_> =
        serde_json::from_str(line).map_err(|e| (None, envelope_error(&e)))?;
    let id = match members.id {
        None => None,
        Some(id) if is_string_or_number(id) => Some(id),
        Some(_) => {
            return Err((
                None,
                RequestError::new(code::INVALID_REQUEST, "\"id\" must be a string or a number"),
            ));
        }
    };
    let invalid = |message: &str| (id, RequestError::new(code::INVALID_REQUEST, message));
    let version = members.jsonrpc.and_then(text);
    if version.as_deref() != Some("2.0") {
        return Err(invalid("\"jsonrpc\" must be \"2.0\""));
    }
    let Some(method) = members.method.and_then(text) else {
        return Err(invalid(
            "\"method\" must be a string naming the method to call",
        ));
    };
    Ok(Incoming {
        id,
        method,
        params: members.params,
    })
}

/// Why an object is no request: not JSON at all, or JSON of the wrong shape.
fn envelope_error(error: &serde_json::Error) -> RequestError {
    use serde_json::error::Category;
    match error.classify() {
        Category::Syntax | Category::Eof | Category::Io => not_json(error),
        Category::Data => RequestError::new(
            code::INVALID_REQUEST,
            format!("the request object cannot be read ({error}): send each member once"),
        ),
    }
}

/// Why a line that does not start an object is no request.
fn not_an_object(line: &str) -> RequestError {
    match serde_json::from_str::<&RawValue>(line) {
        Ok(_) => RequestError::new(
            code::INVALID_REQUEST,
            "expected a JSON-RPC request object; batches and bare values are not supported",
        ),
        Err(error) => not_json(&error),
    }
}

fn not_json(error: &serde_json::Error) -> RequestError {
    RequestError::new(
        code::PARSE_ERROR,
        format!("the line is not valid JSON ({error}): send one JSON-RPC request per line"),
    )
}

/// A raw JSON string's text; `None` for any other value.
fn text(raw: &RawValue) -> Option<Cow<'_, str>> {
    // serde reads a `Cow` as an owned `String` whatever it holds: borrowed first, which works
    // for every string without escapes, as `jsonrpc` and method names are.
    let raw = raw.get();
    match serde_json::from_str::<&str>(raw) {
        Ok(text) => Some(Cow::Borrowed(text)),
        Err(_) => serde_json::from_str::<String>(raw).ok().map(Cow::Owned),
    }
}

fn is_string_or_number(raw: &RawValue) -> bool {
    matches!(
        raw.get().as_bytes().first(),
        Some(b'"' | b'-' | b'0'..=b'9')
    )
}

/// A request's params read as method `M`'s; absent or `null` params are an empty object.
pub fn params<M: Method>(raw: Option<&RawValue>) -> Result<M::Params, RequestError> {
    let text = match raw.map(RawValue::get) {
        None | Some("null") => "{}",
        Some(text) => text,
    };
    serde_json::from_str(text).map_err(|e| {
        RequestError::new(
            code::INVALID_PARAMS,
            format!("invalid params for {}: {e} (see docs/PROTOCOL.md)", M::NAME),
        )
    })
}

/// The success response to request `id`, newline included; `result` is raw JSON.
pub fn success_line(id: &RawValue, result: &str) -> String {
    success_line_written(id, result.len(), |line| line.push_str(result))
}

/// The success response to request `id`, newline included, its result written into the line by
/// `result` (about `room` bytes of it): one buffer, where a result made apart is copied in.
pub fn success_line_written(
    id: &RawValue,
    room: usize,
    result: impl FnOnce(&mut String),
) -> String {
    let mut line = String::with_capacity(40 + id.get().len() + room);
    line.push_str(r#"{"jsonrpc":"2.0","id":"#);
    line.push_str(id.get());
    line.push_str(r#","result":"#);
    result(&mut line);
    line.push_str("}\n");
    line
}

/// The error response to request `id` (`null` when it could not be read), newline included.
pub fn failure_line(id: Option<&RawValue>, error: &ErrorObject) -> String {
    let error = serde_json::to_string(error).expect("error objects always serialise");
    let id = id.map_or("null", RawValue::get);
    let mut line = String::with_capacity(40 + id.len() + error.len());
    line.push_str(r#"{"jsonrpc":"2.0","id":"#);
    line.push_str(id);
    line.push_str(r#","error":"#);
    line.push_str(&error);
    line.push_str("}\n");
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use rootsd_proto::wire::{AddRoots, Status};

    fn refused(line: &str) -> (Option<String>, i64) {
        let (id, error) = parse_request(line).expect_err("refused");
        (id.map(|id| id.get().to_owned()), error.code)
    }

    #[test]
    fn ids_are_echoed_exactly_as_sent() {
        for spelt in [
            "123456789012345678901234567890",
            "1e400",
            "-0",
            "1.50",
            r#""caf\u00e9""#,
            r#""a\"b""#,
            "7",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{spelt},"method":"status"}}"#);
            let request = parse_request(&line).expect("a request");
            let id = request.id.expect("an id");
            assert_eq!(id.get(), spelt);
            let answer = success_line(id, "{}");
            assert!(answer.contains(&format!(r#""id":{spelt},"#)), "{answer}");
            // Checked as JSON text: `1e400` is valid JSON, though no f64 holds it.
            let _: Box<RawValue> = serde_json::from_str(&answer).expect("the answer is JSON");
            let failure = failure_line(Some(id), &ErrorObject::new(1, "x"));
            assert!(failure.contains(&format!(r#""id":{spelt},"#)), "{failure}");
        }
    }

    #[test]
    fn envelope_errors_name_what_is_wrong() {
        assert_eq!(refused("{"), (None, code::PARSE_ERROR));
        assert_eq!(refused("[1]"), (None, code::INVALID_REQUEST));
        assert_eq!(refused("5"), (None, code::INVALID_REQUEST));
        assert_eq!(
            refused(r#"[1, "2", "status"]"#),
            (None, code::INVALID_REQUEST)
        );
        assert_eq!(refused("}{"), (None, code::PARSE_ERROR));
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":null,"method":"status"}"#),
            (None, code::INVALID_REQUEST)
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":[1],"method":"status"}"#),
            (None, code::INVALID_REQUEST)
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"1.0","id":4,"method":"status"}"#),
            (Some("4".into()), code::INVALID_REQUEST)
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":"a","method":7}"#),
            (Some(r#""a""#.into()), code::INVALID_REQUEST)
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"status"}"#),
            (None, code::INVALID_REQUEST)
        );
    }

    #[test]
    fn escaped_members_and_unknown_members_are_read() {
        let request =
            parse_request(r#"{"jsonrpc":"2\u002e0","method":"st\u0061tus","extra":[1,{}]}"#)
                .expect("a notification");
        assert!(request.id.is_none());
        assert_eq!(request.method, "status");
        assert!(params::<Status>(request.params).is_ok());
    }

    #[test]
    fn absent_or_null_params_are_an_empty_object() {
        let absent = parse_request(r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#).unwrap();
        assert!(params::<Status>(absent.params).is_ok());
        let null =
            parse_request(r#"{"jsonrpc":"2.0","id":1,"method":"status","params":null}"#).unwrap();
        assert!(params::<Status>(null.params).is_ok());
        let wrong =
            parse_request(r#"{"jsonrpc":"2.0","id":1,"method":"status","params":"x"}"#).unwrap();
        let error = params::<Status>(wrong.params).expect_err("a string is no params object");
        assert_eq!(error.code, code::INVALID_PARAMS);
        assert!(error.message.contains("status"), "{}", error.message);
        let roots = RawValue::from_string(r#"{"roots":5}"#.to_owned()).unwrap();
        let error = params::<AddRoots>(Some(&roots)).expect_err("roots must be a list");
        assert_eq!(error.code, code::INVALID_PARAMS);
        assert!(error.message.contains("roots.add"), "{}", error.message);
    }
}
