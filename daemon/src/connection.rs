//! One client connection: framing, the hello gate, request dispatch, and pushed notifications.
//!
//! Nothing a client sends can panic or stall the daemon: a malformed message gets a JSON-RPC
//! error and the connection goes on; a framing violation (an over-long line, invalid UTF-8) gets
//! one last error and closes this connection only. Each connection runs in its own task, so a
//! slow reader delays nobody but itself.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use interprocess::local_socket::tokio::Stream;
use rootsd_proto::WorkspaceName;
use rootsd_proto::wire::{
    self, AddRoots, ErrorObject, Hello, HelloResult, ListRoots, ListSessions, ListWorkspaces,
    Method, Notification, PublishRoots, RegisterResult, RegisterSession, RemoveRoots, Request,
    Response, RootsChanged, RootsSnapshot, SessionsResult, Status, StatusResult, StoreHealth,
    StoreState, UpdateSession, WaitForSessions, WaitResult, Watch, WatchResult, WorkspacesResult,
    code,
};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::codec::{Framed, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;

use crate::committer::Health;
use crate::error::RequestError;
use crate::info::DaemonInfo;
use crate::registry::{Registry, Session};

/// Initial read buffer per connection, in bytes.
const READ_BUFFER_START: usize = 512;

/// How long a new connection may take to say hello before it is closed.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves one connection until the client leaves, breaks framing, or the daemon shuts down.
pub async fn serve(
    stream: Stream,
    registry: Arc<Registry>,
    info: Arc<DaemonInfo>,
    shutdown: CancellationToken,
) {
    let _client = registry.client_connected();
    // Most connections are idle sessions that receive a few lines an hour, so the read buffer
    // starts small (the codec's default is 8 KiB) and grows only for the lines that need it.
    let mut framed = Framed::with_capacity(
        stream,
        LinesCodec::new_with_max_length(wire::MAX_LINE_BYTES),
        READ_BUFFER_START,
    );
    let mut state = ConnectionState {
        registry: &registry,
        info: &info,
        shutdown: &shutdown,
        greeted: false,
        session: None,
        feed: None,
    };
    let hello_deadline = tokio::time::Instant::now() + HELLO_TIMEOUT;
    loop {
        let event = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep_until(hello_deadline), if !state.greeted => {
                tracing::debug!("closing a connection that did not say hello in time");
                break;
            }
            line = framed.next() => Event::Line(line),
            snapshot = next_snapshot(&mut state.session) => Event::Push(snapshot),
            item = next_feed(&mut state.feed) => match item {
                Some(snapshot) => Event::Push(snapshot),
                None => continue,
            },
        };
        let outgoing = match event {
            Event::Push(snapshot) => Some(to_line(&Notification::new::<RootsChanged>(&snapshot))),
            Event::Line(None) => break,
            Event::Line(Some(Err(err))) => {
                let Some(message) = framing_error_message(&err) else {
                    break;
                };
                tracing::warn!(error = %err, "closing a connection after a framing violation");
                let response = Response::failure(
                    Value::Null,
                    ErrorObject::new(code::INVALID_REQUEST, message),
                );
                let _ = framed.send(to_line(&response)).await;
                break;
            }
            Event::Line(Some(Ok(line))) => state.handle_line(&line).await.map(|r| to_line(&r)),
        };
        if let Some(line) = outgoing
            && framed.send(line).await.is_err()
        {
            break;
        }
    }
}

enum Event {
    Line(Option<Result<String, LinesCodecError>>),
    Push(Arc<RootsSnapshot>),
}

/// The next snapshot of a registered session's workspace; never resolves without a session.
async fn next_snapshot(session: &mut Option<Session<'_>>) -> Arc<RootsSnapshot> {
    match session {
        Some(session) => {
            if session.receiver.changed().await.is_err() {
                // The registry keeps every sender for its whole life, so this cannot happen
                // while the daemon runs; waiting forever is the harmless answer.
                std::future::pending::<()>().await;
            }
            session.receiver.borrow_and_update().clone()
        }
        None => std::future::pending().await,
    }
}

/// The next change a `watch` subscriber should see; `None` when it should be skipped.
async fn next_feed(feed: &mut Option<Feed>) -> Option<Arc<RootsSnapshot>> {
    let Some(feed) = feed else {
        return std::future::pending().await;
    };
    match feed.receiver.recv().await {
        Ok(snapshot) => feed
            .workspace
            .as_ref()
            .is_none_or(|w| *w == snapshot.workspace)
            .then_some(snapshot),
        Err(broadcast::error::RecvError::Lagged(missed)) => {
            // Every notification carries a workspace's whole list, so a watcher that fell behind
            // only misses intermediate states; the next change brings it up to date.
            tracing::debug!(missed, "a watch subscriber fell behind");
            None
        }
        Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
    }
}

struct Feed {
    workspace: Option<WorkspaceName>,
    receiver: broadcast::Receiver<Arc<RootsSnapshot>>,
}

struct ConnectionState<'a> {
    registry: &'a Registry,
    info: &'a DaemonInfo,
    shutdown: &'a CancellationToken,
    greeted: bool,
    session: Option<Session<'a>>,
    feed: Option<Feed>,
}

impl<'a> ConnectionState<'a> {
    /// Handles one line; returns the response to send, if any (notifications get none).
    async fn handle_line(&mut self, line: &str) -> Option<Response> {
        if line.trim().is_empty() {
            return None;
        }
        let request = match parse_request(line) {
            Ok(request) => request,
            Err((id, error)) => return Some(Response::failure(id, error.into_object())),
        };
        let id = request.id.clone();
        let method = request.method.clone();
        let outcome = self.dispatch(request).await;
        match (id, outcome) {
            (Some(id), Ok(result)) => Some(Response::success(id, result)),
            (Some(id), Err(error)) => Some(Response::failure(id, error.into_object())),
            (None, Err(error)) => {
                tracing::debug!(%method, %error, "a notification from a client failed");
                None
            }
            (None, Ok(_)) => None,
        }
    }

    async fn dispatch(&mut self, request: Request) -> Result<Value, RequestError> {
        let Request { method, params, .. } = request;
        if !self.greeted && method != Hello::NAME {
            return Err(RequestError::new(
                code::HELLO_REQUIRED,
                format!(
                    "{method:?} sent before \"hello\": open every connection with hello (see docs/PROTOCOL.md)"
                ),
            ));
        }
        match method.as_str() {
            Hello::NAME => self.hello(parse::<Hello>(params)?),
            ListRoots::NAME => {
                let params = parse::<ListRoots>(params)?;
                reply::<ListRoots>(self.registry.listing(&params.workspace).await)
            }
            AddRoots::NAME => {
                let params = parse::<AddRoots>(params)?;
                reply::<AddRoots>(self.registry.add(&params.workspace, params.roots).await?)
            }
            RemoveRoots::NAME => {
                let params = parse::<RemoveRoots>(params)?;
                reply::<RemoveRoots>(
                    self.registry
                        .remove(&params.workspace, params.targets)
                        .await?,
                )
            }
            ListWorkspaces::NAME => {
                parse::<ListWorkspaces>(params)?;
                reply::<ListWorkspaces>(WorkspacesResult {
                    workspaces: self.registry.workspaces().await,
                })
            }
            Status::NAME => {
                parse::<Status>(params)?;
                reply::<Status>(self.status().await)
            }
            Watch::NAME => {
                let params = parse::<Watch>(params)?;
                let (revision, receiver) = self.registry.subscribe_feed().await;
                self.feed = Some(Feed {
                    workspace: params.workspace,
                    receiver,
                });
                reply::<Watch>(WatchResult { revision })
            }
            RegisterSession::NAME => {
                let params = parse::<RegisterSession>(params)?;
                if self.session.is_some() {
                    return Err(RequestError::new(
                        code::INVALID_STATE,
                        "this connection already registered a session: open a new connection for another",
                    ));
                }
                let mut session = self.registry.register_session(params).await;
                let snapshot = RootsSnapshot::clone(&session.receiver.borrow_and_update());
                tracing::debug!(session = session.id, workspace = %snapshot.workspace, "session registered");
                let result = RegisterResult {
                    session_id: session.id,
                    snapshot,
                };
                self.session = Some(session);
                reply::<RegisterSession>(result)
            }
            UpdateSession::NAME => {
                let state = parse::<UpdateSession>(params)?;
                self.registered()?.update(state);
                reply::<UpdateSession>(Default::default())
            }
            PublishRoots::NAME => {
                let params = parse::<PublishRoots>(params)?;
                reply::<PublishRoots>(self.registered()?.publish(params.roots).await?)
            }
            ListSessions::NAME => {
                parse::<ListSessions>(params)?;
                reply::<ListSessions>(SessionsResult {
                    sessions: self.registry.sessions(),
                })
            }
            WaitForSessions::NAME => {
                let params = parse::<WaitForSessions>(params)?;
                reply::<WaitForSessions>(self.wait(params).await)
            }
            other => Err(RequestError::new(
                code::METHOD_NOT_FOUND,
                format!(
                    "unknown method {other:?}: this rootsd ({}) knows hello, roots.list, roots.add, roots.remove, workspaces.list, status, watch, session.register, session.update, session.publish, sessions.list and wait",
                    env!("CARGO_PKG_VERSION")
                ),
            )),
        }
    }

    fn hello(&mut self, params: wire::HelloParams) -> Result<Value, RequestError> {
        if params.protocol_version != wire::PROTOCOL_VERSION {
            return Err(RequestError::new(
                code::VERSION_MISMATCH,
                format!(
                    "{} speaks control protocol {} but this rootsd {} (pid {}) speaks {}: use rootsctl and rootsd from the same release, and restart the daemon after upgrading",
                    if params.client.is_empty() {
                        "the client"
                    } else {
                        &params.client
                    },
                    params.protocol_version,
                    env!("CARGO_PKG_VERSION"),
                    std::process::id(),
                    wire::PROTOCOL_VERSION
                ),
            ));
        }
        self.greeted = true;
        tracing::debug!(client = %params.client, "hello");
        reply::<Hello>(HelloResult {
            protocol_version: wire::PROTOCOL_VERSION,
            daemon_version: env!("CARGO_PKG_VERSION").to_owned(),
            pid: std::process::id(),
        })
    }

    async fn status(&self) -> StatusResult {
        let (revision, roots, workspaces) = self.registry.totals().await;
        StatusResult {
            daemon_version: env!("CARGO_PKG_VERSION").to_owned(),
            protocol_version: wire::PROTOCOL_VERSION,
            pid: std::process::id(),
            uptime_secs: self.registry.uptime_secs(),
            socket: self.info.socket.display().to_string(),
            socket_activated: self.info.socket_activated,
            state_dir: self.info.state_dir.display().to_string(),
            revision,
            roots,
            workspaces,
            clients: self.registry.clients(),
            sessions: self.registry.session_count(),
            store: match self.registry.store_health() {
                Health::Ok => StoreHealth::default(),
                Health::Degraded {
                    problem,
                    since_unix,
                } => StoreHealth {
                    state: StoreState::Degraded,
                    problem: Some(problem),
                    since_unix: Some(since_unix),
                },
            },
        }
    }

    async fn wait(&self, params: wire::WaitParams) -> WaitResult {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(params.timeout_ms.min(86_400_000));
        loop {
            let progress = self.registry.progress().notified();
            tokio::pin!(progress);
            // Enabling before checking means a fetch between the check and the await still wakes
            // us.
            progress.as_mut().enable();
            let progress_now = self
                .registry
                .fetch_progress(&params.workspace, params.revision);
            let done = progress_now.lagging.is_empty();
            let result = WaitResult {
                caught_up: progress_now.caught_up,
                lagging: progress_now.lagging,
                on_use: progress_now.on_use,
            };
            if done {
                return result;
            }
            tokio::select! {
                () = progress => {}
                () = tokio::time::sleep_until(deadline) => return result,
                () = self.shutdown.cancelled() => return result,
            }
        }
    }

    fn registered(&self) -> Result<&Session<'a>, RequestError> {
        self.session.as_ref().ok_or_else(|| {
            RequestError::new(
                code::INVALID_STATE,
                "this connection has no session: send session.register first",
            )
        })
    }
}

/// Checks the JSON-RPC envelope. On failure returns the id to answer with (`null` when the id
/// itself could not be read) and the error. Public, with [`parse`], for the fuzz target and the
/// property tests of the decoder.
pub fn parse_request(line: &str) -> Result<Request, (Value, RequestError)> {
    let value: Value = serde_json::from_str(line).map_err(|e| {
        (
            Value::Null,
            RequestError::new(
                code::PARSE_ERROR,
                format!("the line is not valid JSON ({e}): send one JSON-RPC request per line"),
            ),
        )
    })?;
    let Value::Object(object) = value else {
        return Err((
            Value::Null,
            RequestError::new(
                code::INVALID_REQUEST,
                "expected a JSON-RPC request object; batches and bare values are not supported",
            ),
        ));
    };
    let id = object.get("id").cloned();
    let reply_id = match &id {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        None => Value::Null,
        Some(_) => {
            return Err((
                Value::Null,
                RequestError::new(code::INVALID_REQUEST, "\"id\" must be a string or a number"),
            ));
        }
    };
    let invalid = |message: &str| {
        (
            reply_id.clone(),
            RequestError::new(code::INVALID_REQUEST, message),
        )
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("\"jsonrpc\" must be \"2.0\""));
    }
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        return Err(invalid(
            "\"method\" must be a string naming the method to call",
        ));
    };
    Ok(Request {
        jsonrpc: "2.0".to_owned(),
        id,
        method: method.to_owned(),
        params: object.get("params").cloned().unwrap_or(Value::Null),
    })
}

/// A request's params read as method `M`'s; an absent or `null` params is an empty object.
pub fn parse<M: Method>(params: Value) -> Result<M::Params, RequestError> {
    let params = if params.is_null() {
        Value::Object(Default::default())
    } else {
        params
    };
    serde_json::from_value(params).map_err(|e| {
        RequestError::new(
            code::INVALID_PARAMS,
            format!("invalid params for {}: {e} (see docs/PROTOCOL.md)", M::NAME),
        )
    })
}

fn reply<M: Method>(result: M::Result) -> Result<Value, RequestError> {
    Ok(serde_json::to_value(result).expect("wire results always serialise"))
}

fn framing_error_message(err: &LinesCodecError) -> Option<String> {
    match err {
        LinesCodecError::MaxLineLengthExceeded => Some(format!(
            "line longer than {} bytes: the connection is closed; keep each request under the limit",
            wire::MAX_LINE_BYTES
        )),
        LinesCodecError::Io(e) if e.kind() == std::io::ErrorKind::InvalidData => Some(
            "the line is not valid UTF-8: the connection is closed; send UTF-8 JSON".to_owned(),
        ),
        LinesCodecError::Io(_) => None,
    }
}

fn to_line<T: serde::Serialize>(message: &T) -> String {
    serde_json::to_string(message).expect("wire messages always serialise")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(line: &str) -> (Value, i64) {
        let (id, err) = parse_request(line).unwrap_err();
        (id, err.code)
    }

    #[test]
    fn envelope_errors_name_what_is_wrong() {
        assert_eq!(error_of("{"), (Value::Null, code::PARSE_ERROR));
        assert_eq!(error_of("[1]"), (Value::Null, code::INVALID_REQUEST));
        assert_eq!(
            error_of(r#"{"id":{}}"#),
            (Value::Null, code::INVALID_REQUEST)
        );
        assert_eq!(
            error_of(r#"{"jsonrpc":"1.0","id":4,"method":"x"}"#),
            (Value::from(4), code::INVALID_REQUEST)
        );
        assert_eq!(
            error_of(r#"{"jsonrpc":"2.0","id":"a","method":5}"#),
            (Value::from("a"), code::INVALID_REQUEST)
        );
    }

    #[test]
    fn well_formed_requests_parse() {
        let r = parse_request(r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#).unwrap();
        assert_eq!(r.method, "status");
        assert!(r.params.is_null());
    }

    #[test]
    fn wrong_param_types_are_invalid_params() {
        let err = parse::<AddRoots>(serde_json::json!({"roots": 5})).unwrap_err();
        assert_eq!(err.code, code::INVALID_PARAMS);
        assert!(err.message.contains("roots.add"), "{}", err.message);
    }
}
