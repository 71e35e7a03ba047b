//! One client connection: framing, the hello gate, request dispatch, and pushed notifications.
//!
//! Nothing a client sends can panic or stall the daemon: a malformed message gets a JSON-RPC
//! error and the connection goes on; a framing violation (an over-long line, invalid UTF-8, a
//! line left unfinished) gets one last error and closes this connection only. Each connection
//! runs in its own task, so a slow reader delays nobody but itself, and every wait on the peer is
//! bounded ([`crate::limits`]): a line it does not finish, a line it does not read, a shutdown.
//!
//! A session's pushes are written by the registry's fan-out thread while this task is idle, and
//! by this task otherwise; the session's [`Outbox`] says which, so lines never interleave
//! ([`crate::registry`]'s `fanout`). On a connection without a session, the answer to a change
//! is written by the commit thread once the change is durable ([`answer`]), and the task writes
//! nothing else until it is.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::Duration;

use rootsd_proto::WorkspaceName;
use rootsd_proto::wire::{
    self, AddRoots, ChangeResult, Effect, ErrorObject, Hello, HelloResult, ListRoots, ListSessions,
    ListWorkspaces, Log, Method, PublishRoots, RegisterResult, RegisterSession, RemoveRoots,
    RootsSnapshot, SessionsResult, Status, StatusResult, StoreHealth, StoreState, UpdateSession,
    WaitForSessions, WaitResult, Watch, WatchResult, WorkspacesResult, code,
};
use tokio::io::AsyncWriteExt as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::author::Author;
use crate::envelope::{self, Incoming, failure_line, success_line};
use crate::error::RequestError;
use crate::framing::{Budget, FramingError, LineReader};
use crate::info::{AdmittedPeer, DaemonInfo};
use crate::limits::{HELLO_TIMEOUT, MAX_WAIT, SHUTDOWN_GRACE, Tuning, WRITE_TIMEOUT};
use crate::registry::{Answer, Next, Outbox, Published, Registry, Session, Socket};
use crate::store::Health;
use answer::Pending;
use peer_socket::PeerSocket;

mod answer;
mod peer_socket;

/// Serves one connection until the client leaves, breaks framing, stops reading, or the daemon
/// shuts down. `peer` is who connected and what it may do; `input` is the budget every
/// connection's long lines share.
pub async fn serve(
    stream: interprocess::local_socket::tokio::Stream,
    peer: AdmittedPeer,
    registry: Arc<Registry>,
    info: Arc<DaemonInfo>,
    input: Arc<Budget>,
    shutdown: CancellationToken,
    tuning: Tuning,
) {
    let Tuning {
        idle_timeout,
        partial_line_timeout,
    } = tuning;
    let counted = registry.client_connected();
    let stream = match PeerSocket::new(stream) {
        Ok(stream) => stream,
        Err(error) => {
            tracing::warn!(%error, "could not take over an accepted connection; it is closed");
            return;
        }
    };
    let socket = Arc::new(Shared(stream));
    let stream = &socket.0;
    let mut lines = LineReader::new(&input, partial_line_timeout);
    let mut state = ConnectionState {
        socket: socket.clone(),
        peer,
        registry: &registry,
        info: &info,
        shutdown: &shutdown,
        author: None,
        session: None,
        feed: None,
        pending: None,
    };
    let hello_deadline = tokio::time::Instant::now() + HELLO_TIMEOUT;
    let mut idle_deadline = tokio::time::Instant::now() + idle_timeout;
    // Made once and polled on every turn: made anew each turn, each registered with the token
    // or the runtime's timers and unregistered again, for every line a client sent.
    let mut cancelled = std::pin::pin!(shutdown.cancelled());
    let mut hello_timer = std::pin::pin!(tokio::time::sleep_until(hello_deadline));
    // Set for the idle deadline as it was when it was last set: a line moves the deadline
    // alone, and a timer that fires before it is set again for it.
    let mut idle_timer = std::pin::pin!(tokio::time::sleep_until(idle_deadline));
    loop {
        // Only a greeted connection that waits for nothing the daemon sends can be idle: a
        // session or a watcher waits for pushes, rightly for hours.
        let may_idle = state.author.is_some() && state.session.is_none() && state.feed.is_none();
        let event = match lines.next_buffered() {
            Some(line) => Event::Line(line),
            None => tokio::select! {
                biased;
                () = &mut cancelled => break,
                () = &mut hello_timer, if state.author.is_none() => {
                    tracing::debug!("closing a connection that did not say hello in time");
                    break;
                }
                () = &mut idle_timer, if may_idle => {
                    if tokio::time::Instant::now() < idle_deadline {
                        idle_timer.as_mut().reset(idle_deadline);
                        continue;
                    }
                    Event::Idle
                }
                () = sleep_until(lines.deadline()) => Event::Line(Err(lines.unfinished())),
                filled = lines.fill(stream) => match filled {
                    Ok(true) => continue,
                    Ok(false) => break,
                    Err(err) => Event::Line(Err(err)),
                },
                () = woken(&state.session) => Event::Outbox,
                published = next_feed(&mut state.feed, &registry) => Event::Push(published),
                () = answer_left(&state.pending) => Event::AnswerLeft,
            },
        };
        // Whatever comes, an answer the commit thread is writing goes first: it answers an
        // earlier request, and may be what a push or the next answer follows.
        if let Some(pending) = state.pending.take()
            && let Err(err) = pending.finish(stream, &shutdown).await
        {
            tracing::debug!(%err, "closing a connection that does not take what is written to it");
            break;
        }
        let outbox = state.session.as_ref().map(|s| s.outbox.clone());
        let outgoing = match event {
            Event::AnswerLeft => continue,
            Event::Idle => {
                tracing::debug!("closing a connection idle with nothing registered or subscribed");
                let line = failure_line(
                    None,
                    &ErrorObject::new(
                        code::BUSY,
                        format!(
                            "closing this connection: idle for {} s with no session registered and no watch: reconnect when you need rootsd again",
                            idle_timeout.as_secs_f64()
                        ),
                    ),
                );
                let _ = write_line(stream, line.as_bytes(), &shutdown).await;
                break;
            }
            Event::Outbox => None,
            Event::Push(published) => Some(Outgoing::Shared(published.line())),
            Event::Line(Err(err)) => {
                let Some(code) = err.code() else { break };
                tracing::warn!(error = %err, "closing a connection whose input cannot be read");
                let line = failure_line(None, &ErrorObject::new(code, err.to_string()));
                let _ = send(
                    stream,
                    outbox.as_deref(),
                    Some(&Outgoing::Owned(line)),
                    &shutdown,
                )
                .await;
                break;
            }
            Event::Line(Ok(line)) => {
                // Nothing is pushed while a request is served: a change it causes, or one that
                // comes meanwhile, follows its answer, as it would if this task wrote them all.
                if let Some(outbox) = &outbox
                    && let Err(err) = send(stream, Some(outbox), None, &shutdown).await
                {
                    tracing::debug!(%err, "closing a connection that does not take what is written to it");
                    break;
                }
                let response = state.handle_line(&line).await;
                idle_deadline = tokio::time::Instant::now() + idle_timeout;
                response.map(Outgoing::Owned)
            }
        };
        // A session registered by this very line has an outbox now, busy until this answer is
        // written.
        let outbox = state.session.as_ref().map(|s| s.outbox.clone());
        if let Err(err) = send(stream, outbox.as_deref(), outgoing.as_ref(), &shutdown).await {
            tracing::debug!(%err, "closing a connection that does not take what is written to it");
            break;
        }
    }
    // A client that stopped sending may still read: the answer to its last change is its due,
    // within the connection's bounds on a write.
    if let Some(pending) = state.pending.take() {
        let _ = pending.finish(stream, &shutdown).await;
    }
    // The client stops being counted before its socket closes: a peer that has seen the close
    // and asks `status` on another connection must not find itself still counted.
    drop(counted);
}

/// The connection's socket, shared with the fan-out thread, which writes pushes to it while
/// this task is idle (through its descriptor, so that it stays open while either holds it).
struct Shared(PeerSocket);

impl AsFd for Shared {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// Writes `line` (if any) with a session's `outbox` (if any) held, so that nothing else writes
/// meanwhile: first the rest of a line the fan-out thread began, then `line`, then whatever the
/// thread left for this task while it was busy; then the outbox is idle again.
async fn send(
    stream: &PeerSocket,
    outbox: Option<&Outbox>,
    line: Option<&Outgoing>,
    shutdown: &CancellationToken,
) -> Result<(), WriteFailed> {
    let Some(outbox) = outbox else {
        return match line {
            Some(line) => write_line(stream, line.as_bytes(), shutdown).await,
            None => Ok(()),
        };
    };
    if let Some(first) = outbox.claim() {
        write_next(stream, &first, shutdown).await?;
    }
    if let Some(line) = line {
        write_line(stream, line.as_bytes(), shutdown).await?;
    }
    while let Some(next) = outbox.next() {
        write_next(stream, &next, shutdown).await?;
    }
    Ok(())
}

async fn write_next(
    stream: &PeerSocket,
    next: &Next,
    shutdown: &CancellationToken,
) -> Result<(), WriteFailed> {
    let bytes = match next {
        Next::Rest(line, from) => &line.as_bytes()[*from..],
        Next::Push(line) => line.as_bytes(),
    };
    write_line(stream, bytes, shutdown).await
}

enum Event {
    Line(Result<String, FramingError>),
    Push(Arc<Published>),
    /// The fan-out thread left this task something to write.
    Outbox,
    /// The commit thread left this task the answer to a change to write.
    AnswerLeft,
    /// A greeted connection waited for nothing and sent nothing for the idle timeout.
    Idle,
}

/// A line to write, newline included: a response of this connection's own, or a push shared by
/// every connection that sends it.
enum Outgoing {
    Owned(String),
    Shared(Arc<str>),
}

impl Outgoing {
    fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Owned(line) => line.as_bytes(),
            Self::Shared(line) => line.as_bytes(),
        }
    }
}

/// Why a line could not be written.
#[derive(Debug, thiserror::Error)]
enum WriteFailed {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the peer took nothing for {}s", WRITE_TIMEOUT.as_secs())]
    TimedOut,
    #[error("the daemon is shutting down and the peer did not take its line within {}s", SHUTDOWN_GRACE.as_secs())]
    ShuttingDown,
}

/// Writes one line, giving up when the peer does not take it within [`WRITE_TIMEOUT`], or
/// within [`SHUTDOWN_GRACE`] of a shutdown.
async fn write_line(
    stream: &PeerSocket,
    line: &[u8],
    shutdown: &CancellationToken,
) -> Result<(), WriteFailed> {
    let mut writer = stream;
    tokio::select! {
        written = tokio::time::timeout(WRITE_TIMEOUT, writer.write_all(line)) => match written {
            Ok(result) => Ok(result?),
            Err(_elapsed) => Err(WriteFailed::TimedOut),
        },
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => Err(WriteFailed::ShuttingDown),
    }
}

/// Sleeps until `deadline`; never resolves without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Resolves when the fan-out thread left a registered session's task something to write;
/// never without a session.
async fn woken(session: &Option<Session<'_>>) {
    match session {
        Some(session) => session.outbox.woken().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the commit thread left the pending answer to the task; never without one.
async fn answer_left(pending: &Option<Pending>) {
    match pending {
        Some(pending) => pending.left().await,
        None => std::future::pending().await,
    }
}

/// The next change a `watch` subscriber should see; never resolves without a subscription.
///
/// A subscriber holds no queue of its own: woken after changes, it asks the registry for the
/// newest state of each workspace that changed since the last one it sent. One that reads slowly
/// misses intermediate states, never the current one, and costs nothing while it lags.
/// Cancel-safe: between being woken and returning, nothing awaits.
async fn next_feed(feed: &mut Option<Feed>, registry: &Registry) -> Arc<Published> {
    let Some(feed) = feed else {
        return std::future::pending().await;
    };
    loop {
        if let Some(published) = feed.pending.pop_front() {
            return published;
        }
        if feed.changes.changed().await.is_err() {
            return std::future::pending().await;
        }
        feed.pending = registry.changed_since(feed.after, feed.workspace.as_ref());
        if let Some(newest) = feed.pending.back() {
            feed.after = newest.revision;
        }
    }
}

/// A `watch` subscription: which workspace, the last revision sent, and what is still to send
/// (at most the newest state of each workspace).
struct Feed {
    workspace: Option<WorkspaceName>,
    after: u64,
    changes: watch::Receiver<u64>,
    pending: VecDeque<Arc<Published>>,
}

struct ConnectionState<'a> {
    /// This connection's socket, for a session's outbox.
    socket: Socket,
    peer: AdmittedPeer,
    registry: &'a Registry,
    info: &'a DaemonInfo,
    shutdown: &'a CancellationToken,
    /// Who this connection is, recorded at hello: `Some` once it is greeted.
    author: Option<Author>,
    session: Option<Session<'a>>,
    feed: Option<Feed>,
    /// The answer to a change, written by the commit thread once the change is durable.
    pending: Option<Pending>,
}

/// What a request comes to: its result as JSON now, or an answer the commit thread writes.
enum Outcome {
    Now(String),
    Later,
}

impl<'a> ConnectionState<'a> {
    /// Handles one line; returns the response line to send, if any (notifications get none).
    async fn handle_line(&mut self, line: &str) -> Option<String> {
        if line.trim().is_empty() {
            return None;
        }
        let request = match envelope::parse_request(line) {
            Ok(request) => request,
            Err((id, error)) => return Some(failure_line(id, &error.into_object())),
        };
        let id = request.id;
        let method = request.method.clone();
        let outcome = self.dispatch(request).await;
        match (id, outcome) {
            (_, Ok(Outcome::Later)) => None,
            (Some(id), Ok(Outcome::Now(result))) => Some(success_line(id, &result)),
            (Some(id), Err(error)) => Some(failure_line(Some(id), &error.into_object())),
            (None, Err(error)) => {
                tracing::debug!(%method, %error, "a notification from a client failed");
                None
            }
            (None, Ok(_)) => None,
        }
    }

    /// Runs one request; the result is its raw JSON, or comes later from the commit thread.
    async fn dispatch(&mut self, request: Incoming<'_>) -> Result<Outcome, RequestError> {
        let Incoming { id, method, params } = request;
        if self.author.is_none() && method != Hello::NAME {
            return Err(RequestError::new(
                code::HELLO_REQUIRED,
                format!(
                    "{method:?} sent before \"hello\": open every connection with hello (see docs/PROTOCOL.md)"
                ),
            ));
        }
        // The one place a method's effect on the roots is checked: whatever the arm below
        // does, a method that changes roots never reaches it for a peer that may not.
        let Some(info) = wire::method_named(&method) else {
            return Err(unknown_method(&method));
        };
        if info.effect == Effect::ChangesRoots {
            self.may_change_roots()?;
        }
        match method.as_ref() {
            Hello::NAME => self.hello(parse::<Hello>(params)?),
            ListRoots::NAME => {
                let params = parse::<ListRoots>(params)?;
                reply::<ListRoots>(self.registry.listing(&params.workspace).await)
            }
            AddRoots::NAME => {
                let params = parse::<AddRoots>(params)?;
                let (origin, registry) = (self.origin(), self.registry);
                self.change(id, |answer| {
                    registry.add_answered(&params.workspace, params.roots, origin, answer)
                })
                .await
            }
            RemoveRoots::NAME => {
                let params = parse::<RemoveRoots>(params)?;
                let (origin, registry) = (self.origin(), self.registry);
                self.change(id, |answer| {
                    registry.remove_answered(&params.workspace, params.targets, origin, answer)
                })
                .await
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
                let (revision, changes) = self.registry.subscribe_feed().await;
                self.feed = Some(Feed {
                    workspace: params.workspace,
                    after: revision,
                    changes,
                    pending: VecDeque::new(),
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
                let peer = self.peer_of_changes();
                let session = self.registry.register_session(params, peer).await?;
                // Busy until the answer is written, then written to directly.
                session.outbox.attach(self.socket.clone());
                let snapshot = RootsSnapshot::clone(&session.snapshot);
                tracing::debug!(session = session.id, workspace = %snapshot.workspace, "session registered");
                let result = RegisterResult {
                    session_id: session.id,
                    unknown_workspace: self.registry.unknown_workspace(&snapshot.workspace),
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
                let params = parse::<ListSessions>(params)?;
                let (sessions, more) = self.registry.sessions(params.after);
                reply::<ListSessions>(SessionsResult { sessions, more })
            }
            WaitForSessions::NAME => {
                let params = parse::<WaitForSessions>(params)?;
                reply::<WaitForSessions>(self.wait(params).await)
            }
            // Every admitted peer may read the log, as it may read the roots: on a shared
            // service, who changed the roots everyone works in is the members' business too.
            Log::NAME => {
                let params = parse::<Log>(params)?;
                check_log(&params)?;
                reply::<Log>(self.registry.log(&params))
            }
            // In the table but without an arm: `connection::tests` fails on it.
            other => Err(unknown_method(other)),
        }
    }

    fn hello(&mut self, params: wire::HelloParams) -> Result<Outcome, RequestError> {
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
        self.author = Some(Author::at_hello(&self.peer, &params.client));
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

    /// `wait`: until every awaited session has fetched the revision and, while the daemon has
    /// just started, every session of its previous run is back ([`crate::reconnect`]).
    async fn wait(&self, params: wire::WaitParams) -> WaitResult {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(params.timeout_ms).min(MAX_WAIT);
        // Only a wait that began while the previous run's sessions were expected hears of them.
        let began_expecting = self.registry.returning(&params.workspace).open;
        loop {
            let progress = self.registry.progress().notified();
            tokio::pin!(progress);
            // Enabling before checking means a fetch between the check and the await still wakes
            // us.
            progress.as_mut().enable();
            let progress_now = self
                .registry
                .fetch_progress(&params.workspace, params.revision);
            let returning = if began_expecting {
                self.registry.returning(&params.workspace)
            } else {
                crate::reconnect::Returning::default()
            };
            let (reconnecting, not_reconnected) = if returning.open {
                (returning.awaited, Vec::new())
            } else {
                (Vec::new(), returning.awaited)
            };
            let done = progress_now.lagging.is_empty() && reconnecting.is_empty();
            let result = WaitResult {
                caught_up: progress_now.caught_up,
                lagging: progress_now.lagging,
                on_use: progress_now.on_use,
                reconnecting,
                not_reconnected,
                previous_unknown: returning.unknown,
            };
            if done {
                return result;
            }
            // While sessions are expected, the window's end is news too: those not back by then
            // are reported as not reconnected instead of waited for.
            let window = returning
                .until
                .filter(|_| returning.open)
                .map(tokio::time::Instant::from_std);
            let wake = window.map_or(deadline, |w| w.min(deadline));
            tokio::select! {
                () = progress => {}
                () = tokio::time::sleep_until(wake) => if wake == deadline { return result },
                () = self.shutdown.cancelled() => return result,
            }
        }
    }

    /// The change `start` asks for, given how it is to be answered. Request `id` (a
    /// notification has no answer) on a connection without a session is answered by the commit
    /// thread: its answer is left pending, or made now if there is nothing to wait for. On a
    /// session's connection the change is awaited here, since the fan-out thread may write the
    /// session's pushes whenever its task is idle, and one would overtake the answer.
    async fn change(
        &mut self,
        id: Option<&serde_json::value::RawValue>,
        start: impl FnOnce(Answer) -> Result<(ChangeResult, bool), RequestError>,
    ) -> Result<Outcome, RequestError> {
        let (Some(id), None) = (id, &self.session) else {
            return Ok(Outcome::Now(change_json(
                &self.registry.awaited(start).await?,
            )));
        };
        let (pending, answer) = Pending::new(self.socket.clone(), id);
        let (result, waits) = start(answer)?;
        if !waits {
            return Ok(Outcome::Now(change_json(&result)));
        }
        pending.fill(&result);
        self.pending = Some(pending);
        Ok(Outcome::Later)
    }

    /// Refuses a change of roots to a peer that is only a member of a shared daemon's group,
    /// saying who may make it.
    fn may_change_roots(&self) -> Result<(), RequestError> {
        if self.peer.role.may_change_roots() {
            return Ok(());
        }
        let members = self
            .info
            .socket_group()
            .map(|gid| format!(" of group {}", crate::groups::by_gid(gid)))
            .unwrap_or_default();
        let admins = match &self.info.admin_group {
            Some(admins) => format!(
                ", or a member of group {admins}: ask an administrator to add you to it (usermod -aG {} YOUR-USER, then log in again)",
                admins.name
            ),
            None => " (this rootsd names no admin group; its administrator can name one with --admin-group)".to_owned(),
        };
        Err(RequestError::new(
            code::FORBIDDEN,
            format!(
                "uid {} may list, watch and attach sessions here as a member{members}, but changing the roots every member's agents work in takes rootsd's own user (uid {}), root{admins}; nothing was changed",
                self.peer.uid,
                rustix::process::geteuid().as_raw()
            ),
        ))
    }

    /// Who makes a change on this connection, for the history. Only a greeted connection
    /// (which has an author) gets to make one; the kernel's uid alone stands in otherwise.
    fn origin(&self) -> crate::store::Origin {
        crate::store::Origin::Peer(self.peer_of_changes())
    }

    /// This connection as the history names it, for changes it makes or that are made on behalf
    /// of its session.
    fn peer_of_changes(&self) -> crate::store::PeerV1 {
        self.author.as_ref().map_or_else(
            || crate::store::PeerV1 {
                uid: self.peer.uid,
                ..Default::default()
            },
            Author::peer,
        )
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

/// The answer to a method the daemon does not serve, naming those it does.
fn unknown_method(method: &str) -> RequestError {
    let known: Vec<&str> = wire::METHODS.iter().map(|info| info.name).collect();
    RequestError::new(
        code::METHOD_NOT_FOUND,
        format!(
            "unknown method {method:?}: this rootsd ({}) knows {}",
            env!("CARGO_PKG_VERSION"),
            known.join(", ")
        ),
    )
}

/// A request's params read as method `M`'s.
fn parse<M: Method>(
    params: Option<&serde_json::value::RawValue>,
) -> Result<M::Params, RequestError> {
    envelope::params::<M>(params)
}

fn reply<M: Method>(result: M::Result) -> Result<Outcome, RequestError> {
    Ok(Outcome::Now(json(&result)))
}

/// A change's result as JSON, written by hand as serde would write it: every change is answered
/// with one.
fn change_json(result: &ChangeResult) -> String {
    let mut json = String::with_capacity(256);
    crate::json_text::change_result(&mut json, result);
    json
}

/// A result as JSON.
fn json(result: &impl serde::Serialize) -> String {
    serde_json::to_string(result).expect("wire results always serialise")
}

/// Refuses `log` params no page can answer: `limit: 0` asks for nothing, and with no entry the
/// answer could not say where a next page would start (`more` pages from the last entry's
/// revision), so a client paging until `more` is false would ask forever.
fn check_log(params: &rootsd_proto::wire::LogParams) -> Result<(), crate::error::RequestError> {
    if params.limit == Some(0) {
        return Err(crate::error::RequestError::new(
            rootsd_proto::wire::code::INVALID_PARAMS,
            "log's limit is 0, which asks for no entries: give a limit of at least 1, or leave it out for as many as fit in one answer",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
