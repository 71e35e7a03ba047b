//! The control protocol's decoder as a connection runs it on each line: the envelope
//! ([`parse_request`]), then the params of the method it names ([`parse`]), and the rules every
//! answer keeps. Shared by the property tests (`daemon/tests/decoder.rs`) and the fuzz target
//! `control_request` (fuzz/), which includes this file.

use rootsd::connection::{parse, parse_request};
use rootsd::error::RequestError;
use rootsd_proto::wire::{
    AddRoots, Hello, ListRoots, ListSessions, ListWorkspaces, Log, Method, RegisterSession,
    RemoveRoots, Response, Status, UpdateSession, WaitForSessions, Watch, code,
};
use serde_json::Value;

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
            if !id.is_null() {
                let sent: Value = serde_json::from_str(line).expect("an id was read, so JSON");
                assert_eq!(sent.get("id"), Some(&id), "the id echoed is the one sent");
            }
            let code = error.code;
            answer(id, error);
            return Decoded::Refused(code);
        }
    };
    assert_eq!(request.jsonrpc, "2.0");
    assert!(
        matches!(request.id, None | Some(Value::String(_) | Value::Number(_))),
        "a request's id is absent, a string or a number: {:?}",
        request.id
    );
    let Some((name, outcome)) = typed(&request.method, request.params.clone()) else {
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
            answer(request.id.unwrap_or(Value::Null), error);
            Decoded::BadParams(name)
        }
    }
}

/// The params of `method` read as its type, as the daemon's dispatch reads them; `None` for a
/// method it does not know.
fn typed(method: &str, params: Value) -> Option<(&'static str, Result<(), RequestError>)> {
    fn read<M: Method>(params: Value) -> Option<(&'static str, Result<(), RequestError>)> {
        Some((M::NAME, parse::<M>(params).map(drop)))
    }
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
        ListSessions::NAME => read::<ListSessions>(params),
        WaitForSessions::NAME => read::<WaitForSessions>(params),
        Log::NAME => read::<Log>(params),
        _ => None,
    }
}

/// The error response the daemon would send: one line of JSON-RPC.
fn answer(id: Value, error: RequestError) {
    let line = serde_json::to_string(&Response::failure(id, error.into_object()))
        .expect("responses serialise");
    assert!(!line.contains('\n'), "a response holds a newline: {line}");
    let back: Value = serde_json::from_str(&line).expect("a response is JSON");
    assert_eq!(back["jsonrpc"], "2.0");
    assert!(back["error"]["code"].is_i64() && back["error"]["message"].is_string());
}
