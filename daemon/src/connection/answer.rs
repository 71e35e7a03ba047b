//! The answer to a change, written by the commit thread straight to the connection's socket
//! once the change is durable, as the fan-out thread writes pushes: in a burst of changes, no
//! task is woken to write its answer. Each of fifty tasks woken in turn on one worker, to
//! serialise and write its answer, took longer than the sync they had waited for.
//!
//! The task makes the answer's line as soon as the change is planned, all but the count of the
//! sessions told of it, which only the commit thread knows, and goes back to its socket. Whatever
//! the commit thread cannot write at once (the socket is full, a signal, a peer gone) it leaves to
//! the task, which writes it within the connection's own bounds, as it does every line. Until the
//! answer is written the task writes nothing else and serves no other request (it may read them
//! meanwhile): every path that writes, or serves another line, first calls [`Pending::finish`],
//! so answers keep the order of their requests and a push never overtakes the answer to the
//! change that caused it.

use std::os::fd::AsFd as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::value::RawValue;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::peer_socket::PeerSocket;
use super::{WriteFailed, write_line};
use rootsd_proto::wire::ChangeResult;

use crate::envelope::{failure_line, success_line_written};
use crate::error::RequestError;
use crate::json_text;
use crate::registry::{Answer, Socket};
use crate::store::StoreError;

/// How a change's answer ends, before the count of sessions told is known: its result's last
/// member, `notified_sessions`, then the result's and the response's closing braces. The task
/// makes the line with the count left out (the 0 and what follows), and the commit thread adds
/// it.
const UNCOUNTED_END: &str = ",\"notified_sessions\":0}}\n";

/// Room for the result of a small change (one root), so that making its answer takes one
/// allocation.
const RESULT_ROOM: usize = 280;

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

    /// Hands over the answer's `result`, the change's result with its `notified_sessions` still
    /// 0, to be replaced.
    pub(super) fn fill(&self, result: &ChangeResult) {
        let mut line = success_line_written(&self.0.id, RESULT_ROOM, |line| {
            json_text::change_result(line, result);
        });
        debug_assert!(
            line.ends_with(UNCOUNTED_END),
            "a change's result ends with notified_sessions 0: {line}"
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
                json_text::number(&mut line, notified as u64);
                line.push_str("}}\n");
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

#[cfg(test)]
mod tests {
    use std::io::{BufRead as _, BufReader};
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    use super::*;

    /// A change's result as the task has it, `notified_sessions` still 0: one root renamed.
    fn result() -> ChangeResult {
        ChangeResult {
            workspace: rootsd_proto::WorkspaceName::new("w").expect("a valid name"),
            revision: 7,
            added: Vec::new(),
            renamed: vec![rootsd_proto::Root {
                uri: "file:///a".to_owned(),
                name: Some("a \"b\"".to_owned()),
            }],
            unchanged: Vec::new(),
            removed: Vec::new(),
            adopted: Vec::new(),
            total: 1,
            notified_sessions: 0,
        }
    }

    /// The answer's line to request `id`, with `notified` sessions told.
    fn expected(id: &str, notified: usize) -> String {
        let result = ChangeResult {
            notified_sessions: notified,
            ..result()
        };
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{}}}\n",
            serde_json::to_string(&result).expect("a result serialises")
        )
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    /// The daemon's end of a connection, and the client's.
    fn connection() -> (Arc<PeerSocket>, BufReader<UnixStream>) {
        let (ours, theirs) = UnixStream::pair().expect("a socket pair");
        let ours = Arc::new(PeerSocket::from_std(ours).expect("register the socket"));
        (ours, BufReader::new(theirs))
    }

    fn answer_to(socket: &Arc<PeerSocket>, id: &str) -> (Pending, Answer) {
        let id = RawValue::from_string(id.to_owned()).expect("raw JSON");
        Pending::new(socket.clone(), &id)
    }

    /// Until the commit thread left the answer to the task; a test that waits longer fails.
    async fn left(pending: &Pending) {
        tokio::time::timeout(Duration::from_secs(10), pending.left())
            .await
            .expect("the answer is left to the task");
    }

    fn read_line(client: &mut BufReader<UnixStream>) -> String {
        let mut line = String::new();
        client.read_line(&mut line).expect("read an answer");
        line
    }

    #[test]
    fn an_answer_the_commit_thread_writes_whole_carries_the_count_and_finishes_at_once() {
        runtime().block_on(async {
            let (socket, mut client) = connection();
            let (pending, answer) = answer_to(&socket, "\"a\"");
            pending.fill(&result());
            answer(Ok(2));
            assert_eq!(read_line(&mut client), expected("\"a\"", 2));
            pending
                .finish(&socket, &CancellationToken::new())
                .await
                .expect("nothing left to write");
        });
    }

    #[test]
    fn an_answer_told_before_its_line_is_made_is_left_to_the_task() {
        runtime().block_on(async {
            let (socket, mut client) = connection();
            let (pending, answer) = answer_to(&socket, "12");
            // The sync ended between the plan and the line: the commit thread could not write.
            answer(Ok(1));
            pending.fill(&result());
            left(&pending).await;
            pending
                .finish(&socket, &CancellationToken::new())
                .await
                .expect("the task writes it");
            assert_eq!(read_line(&mut client), expected("12", 1));
        });
    }

    #[test]
    fn a_change_that_failed_is_answered_with_the_store_error() {
        runtime().block_on(async {
            let (socket, mut client) = connection();
            let (pending, answer) = answer_to(&socket, "3");
            pending.fill(&result());
            answer(Err(StoreError::Damaged("the disk said no".to_owned())));
            let line = read_line(&mut client);
            let answer: serde_json::Value = serde_json::from_str(&line).expect("JSON");
            assert_eq!(answer["id"], 3, "{line}");
            assert_eq!(
                answer["error"]["code"],
                rootsd_proto::wire::code::STORAGE,
                "{line}"
            );
            assert!(
                answer["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("the disk said no")),
                "{line}"
            );
            assert!(answer.get("result").is_none(), "{line}");
            drop(pending);
        });
    }

    #[test]
    fn an_answer_a_full_socket_does_not_take_is_finished_by_the_task_once_the_client_reads() {
        runtime().block_on(async {
            let (socket, client) = connection();
            // Fill the socket until it takes nothing more, as a client that stopped reading.
            let mut filled = 0;
            while let Ok(n) = rustix::io::write(socket.as_fd(), &[b'x'; 4096]) {
                filled += n;
            }
            assert!(filled > 0);
            let (pending, answer) = answer_to(&socket, "9");
            pending.fill(&result());
            answer(Ok(0));
            left(&pending).await;
            // The client reads again: everything it was sent, then the answer, whole.
            let reader = std::thread::spawn(move || {
                let mut client = client;
                let mut junk = vec![0; filled];
                std::io::Read::read_exact(&mut client, &mut junk).expect("the filler");
                read_line(&mut client)
            });
            pending
                .finish(&socket, &CancellationToken::new())
                .await
                .expect("the task writes the rest");
            assert_eq!(reader.join().expect("the reader"), expected("9", 0));
        });
    }
}
