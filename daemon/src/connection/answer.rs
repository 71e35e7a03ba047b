//! The answer to a change, written by the commit thread straight to the connection's socket
//! once the change is durable, as the fan-out thread writes pushes: in a burst of changes, no
//! task is woken to write its answer. Each of fifty tasks woken in turn on one worker, to
//! serialise and write its answer, took longer than the sync they had waited for.
//!
//! The task makes the answer's line as soon as the change is planned, all but the count of the
//! sessions told of it, which only the commit thread knows, and goes back to its socket. Whatever
//! the commit thread cannot write at once (the socket is full, a signal, a peer gone) it leaves to
//! the task, which writes it within the connection's own bounds, as it does every line. Until the
//! answer is written the task writes nothing else, and reads no other request: every path that
//! writes, or serves another line, first calls [`Pending::finish`], so answers keep the order of
//! their requests and a push never overtakes the answer to the change that caused it.

use std::fmt::Write as _;
use std::os::fd::AsFd as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::value::RawValue;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::peer_socket::PeerSocket;
use super::{WriteFailed, write_line};
use crate::envelope::{failure_line, success_line};
use crate::error::RequestError;
use crate::registry::{Answer, Socket};
use crate::store::StoreError;

/// How a change's answer ends, before the count of sessions told is known: its result's last
/// member, `notified_sessions`, then the result's and the response's closing braces. The task
/// makes the line with the count left out (the 0 and what follows), and the commit thread adds
/// it.
const UNCOUNTED_END: &str = ",\"notified_sessions\":0}}\n";

/// An answer the commit thread writes, from the connection's side.
pub(super) struct Pending(Arc<Slot>);

struct Slot {
    socket: Socket,
    /// The request's id, for a failure's answer.
    id: Box<RawValue>,
    state: Mutex<State>,
    /// Wakes the task when the commit thread left it the answer (`left`), and only then: the
    /// task idle on its socket is not woken for an answer written whole.
    left: Notify,
    /// Wakes a task waiting in `finish` for the answer to be written, however it was.
    done: Notify,
}

enum State {
    /// The change is not durable yet; the line, once the task has made it, without the count
    /// and what follows.
    Waiting(Option<String>),
    /// Told before the task had made the line: the outcome, for the task.
    Told(Result<usize, StoreError>),
    /// Left to the task: a line, and how much of it is written.
    Left(String, usize),
    /// Written whole.
    Written,
}

impl Pending {
    /// An answer to the request `id` on `socket`, and the call that writes it once the change
    /// is durable.
    pub(super) fn new(socket: Socket, id: &RawValue) -> (Self, Answer) {
        let id =
            RawValue::from_string(id.get().to_owned()).expect("an id read as raw JSON is raw JSON");
        let slot = Arc::new(Slot {
            socket,
            id,
            state: Mutex::new(State::Waiting(None)),
            left: Notify::new(),
            done: Notify::new(),
        });
        let told = slot.clone();
        (Self(slot), Box::new(move |outcome| told.told(outcome)))
    }

    /// Hands over the answer's `result` (the change's result as JSON, its `notified_sessions`
    /// 0, to be replaced).
    pub(super) fn fill(&self, result: &str) {
        let mut line = success_line(&self.0.id, result);
        debug_assert!(
            line.ends_with(UNCOUNTED_END),
            "a change's result ends with notified_sessions: {line}"
        );
        line.truncate(line.len() - "0}}\n".len());
        let mut state = self.0.lock();
        match std::mem::replace(&mut *state, State::Written) {
            State::Waiting(None) => *state = State::Waiting(Some(line)),
            State::Told(outcome) => {
                *state = State::Left(self.0.line(line, outcome), 0);
            }
            other => *state = other,
        }
    }

    /// Resolves when the commit thread left the answer for the task to write: then call
    /// [`Pending::finish`].
    pub(super) async fn left(&self) {
        loop {
            let notified = self.0.left.notified();
            tokio::pin!(notified);
            // Enabled before the state is read, so that a hand-over in between still wakes it.
            notified.as_mut().enable();
            if matches!(*self.0.lock(), State::Left(..)) {
                return;
            }
            notified.await;
        }
    }

    /// Waits until the answer is written, writing what the commit thread left of it.
    pub(super) async fn finish(
        self,
        stream: &PeerSocket,
        shutdown: &CancellationToken,
    ) -> Result<(), WriteFailed> {
        loop {
            let notified = self.0.done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let left = match &mut *self.0.lock() {
                State::Written => return Ok(()),
                State::Left(line, from) => Some((std::mem::take(line), *from)),
                State::Waiting(_) | State::Told(_) => None,
            };
            match left {
                Some((line, from)) => {
                    return write_line(stream, &line.as_bytes()[from..], shutdown).await;
                }
                // The change is not durable yet: the commit thread tells it, and always does,
                // the change failed or not.
                None => notified.await,
            }
        }
    }
}

impl Slot {
    /// On the commit thread: the change is durable (and this many sessions are told of it), or
    /// failed. Writes the answer if the task has made it and the socket takes it whole.
    fn told(&self, outcome: Result<usize, StoreError>) {
        let mut state = self.lock();
        match std::mem::replace(&mut *state, State::Written) {
            State::Waiting(Some(line)) => {
                let line = self.line(line, outcome);
                // The socket is non-blocking (the task's `PeerSocket` made it so): this never
                // waits on the peer, and the task writes nothing while the answer is pending.
                let written = rustix::io::write(self.socket.as_fd(), line.as_bytes()).unwrap_or(0);
                if written < line.len() {
                    *state = State::Left(line, written);
                    drop(state);
                    self.left.notify_one();
                }
            }
            State::Waiting(None) => {
                *state = State::Told(outcome);
                drop(state);
                self.left.notify_one();
            }
            // Told once only.
            other => *state = other,
        }
        self.done.notify_waiters();
    }

    /// The whole answer: `line` with the count of sessions told, or the failure.
    fn line(&self, mut line: String, outcome: Result<usize, StoreError>) -> String {
        match outcome {
            Ok(notified) => {
                let _ = writeln!(line, "{notified}}}}}");
                line
            }
            Err(error) => failure_line(Some(&self.id), &RequestError::from(error).into_object()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned lock still holds a consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
