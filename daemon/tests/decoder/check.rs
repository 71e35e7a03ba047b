//! The control protocol's decoder as a connection runs it on each line: the envelope
//! ([`parse_request`]), then the params of the method it names ([`params`]), and the rules every
//! answer keeps. Shared by the property tests (`daemon/tests/decoder/main.rs`) and the fuzz target
//! `control_request` (fuzz/), which includes this file.

use rootsd::envelope::{failure_line, params, parse_request};
use rootsd::error::RequestError;
use rootsd_proto::wire::{
    AddRoots, Hello, ListRoots, ListSessions, ListWorkspaces, Log, Method, PublishRoots,
    RegisterSession, RemoveRoots, Status, UpdateSession, WaitForSessions, Watch, code,
};
use serde_json::Value;
use serde_json::value::RawValue;

/// What the daemon makes of one line.
#[derive(Debug, PartialEq)]
pub enum Decoded {
    /// Blank: ignored.
    Blank,
    /// The envelope was refused, with this error code.
    Refused(i64),
    /// A request for a method the daemon does not know.
    Unknown,
    /// A request the daemon would act on: its params read as the method's.
    Typed(&'static str),
    /// A request for a known method whose params are of the wrong shape.
    BadParams(&'static str),
}

/// Decodes `line` as the daemon does and checks what it would answer; panics, naming the rule,
/// on a broken one.
pub fn decode(line: &str) -> Decoded {
    if line.trim().is_empty() {
        return Decoded::Blank;
    }
    let request = match parse_request(line) {
        Ok(request) => request,
        Err((id, error)) => {
            assert!(
                [code::PARSE_ERROR, code::INVALID_REQUEST].contains(&error.code),
                "an envelope error has code {}: {line:?}",
                error.code
            );
            if let Some(id) = id {
                echoed_exactly(line, id);
            }
            let code = error.code;
            answer(id, error);
            return Decoded::Refused(code);
        }
    };
    if let Some(id) = request.id {
        let value: Value = serde_json::from_str(id.get()).expect("an id is JSON");
        assert!(
            value.is_string() || value.is_number(),
            "a request's id is absent, a string or a number: {id}"
        );
        echoed_exactly(line, id);
    }
    let Some((name, outcome)) = typed(&request.method, request.params) else {
        assert!(
            rootsd_proto::wire::method_named(&request.method).is_none(),
            "{} is in wire::METHODS, but `typed` (daemon/tests/decoder/check.rs) does not read it",
            request.method
        );
        return Decoded::Unknown;
    };
    match outcome {
        Ok(()) => Decoded::Typed(name),
        Err(error) => {
            assert_eq!(
                error.code,
                code::INVALID_PARAMS,
                "params of the wrong shape are INVALID_PARAMS: {}",
                error.message
            );
            assert!(error.message.contains(name), "{}", error.message);
            answer(request.id, error);
            Decoded::BadParams(name)
        }
    }
}

/// The params of `method` read as its type, as the daemon's dispatch reads them; `None` for a
/// method it does not know.
fn typed(method: &str, raw: Option<&RawValue>) -> Option<(&'static str, Result<(), RequestError>)> {
    fn read<M: Method>(raw: Option<&RawValue>) -> Option<(&'static str, Result<(), RequestError>)> {
        Some((M::NAME, params::<M>(raw).map(drop)))
    }
    let params = raw;
    match method {
        Hello::NAME => read::<Hello>(params),
        ListRoots::NAME => read::<ListRoots>(params),
        AddRoots::NAME => read::<AddRoots>(params),
        RemoveRoots::NAME => read::<RemoveRoots>(params),
        ListWorkspaces::NAME => read::<ListWorkspaces>(params),
        Status::NAME => read::<Status>(params),
        Watch::NAME => read::<Watch>(params),
        RegisterSession::NAME => read::<RegisterSession>(params),
        UpdateSession::NAME => read::<UpdateSession>(params),
        PublishRoots::NAME => read::<PublishRoots>(params),
        ListSessions::NAME => read::<ListSessions>(params),
        WaitForSessions::NAME => read::<WaitForSessions>(params),
        Log::NAME => read::<Log>(params),
        _ => None,
    }
}

/// The id echoed is the one sent, byte for byte: the text of the line's `id` member.
fn echoed_exactly(line: &str, id: &RawValue) {
    let sent: Value = serde_json::from_str(line).expect("an id was read, so JSON");
    let spelt: Value = serde_json::from_str(id.get()).expect("an id is JSON");
    assert_eq!(
        sent.get("id"),
        Some(&spelt),
        "the id echoed is the one sent"
    );
    assert!(
        line.contains(id.get()),
        "the id is a piece of the line: {id}"
    );
}

/// The error response the daemon would send: one line of JSON-RPC.
fn answer(id: Option<&RawValue>, error: RequestError) {
    let line = failure_line(id, &error.into_object());
    let line = line.strip_suffix('\n').expect("a response ends its line");
    assert!(!line.contains('\n'), "a response holds a newline: {line}");
    let back: Value = serde_json::from_str(line).expect("a response is JSON");
    assert_eq!(back["jsonrpc"], "2.0");
    assert!(back["error"]["code"].is_i64() && back["error"]["message"].is_string());
}
