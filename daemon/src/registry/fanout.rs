//! How a change reaches every session of its workspace: one thread writes the shared,
//! already-serialised `roots.changed` line straight to each session's socket.
//!
//! A change to a workspace with thousands of sessions used to wake thousands of tokio tasks,
//! each of which polled its whole `select!`, wrote the line and registered its wakers again: most
//! of the cost of a change was the runtime, not the writes. Here, the commit thread hands the
//! newest state of each changed workspace to the fan-out thread (coalesced per workspace, so the
//! hand-over holds at most one state per workspace), and that thread does what the cheapest
//! server would do: one non-blocking `write` per session, in the order they registered, off the
//! path of the durable acknowledgement.
//!
//! Each session's connection keeps its task, and its [`Outbox`] decides who writes: the fan-out
//! thread only while the task is idle (not answering a request, not finishing a line), so lines
//! are never interleaved and a push never overtakes the answer to a request that was being
//! served when it came. Whatever the thread cannot write at once (the connection is busy, the
//! socket is full, or it failed) it leaves to the task, which writes it within the connection's
//! own bounds ([`crate::limits::WRITE_TIMEOUT`]). What is left is at most one state (the newest:
//! pushes coalesce) and the rest of one line, so a session that stops reading holds nothing but
//! itself back, and costs the thread one failed `write` per change.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;

use rootsd_proto::WorkspaceName;

use super::Published;

/// A session's socket as the fan-out thread writes it: shared with the connection's task, so
/// that the descriptor stays open (and is never another's) while either holds it.
pub type Socket = Arc<dyn AsFd + Send + Sync>;

/// Where one session's pushes go: the socket, and who may write it now.
pub struct Outbox {
    socket: OnceLock<Socket>,
    state: Mutex<OutboxState>,
    /// Wakes the connection's task when the fan-out thread left it something to write.
    wake: tokio::sync::Notify,
}

struct OutboxState {
    /// The connection's task is writing, or will write before it is idle again: nobody else
    /// writes to the socket. A new outbox is busy until its task has answered the registration.
    busy: bool,
    /// The sequence number ([`Published::sequence`]) of the newest state this session has been
    /// sent, or was shown in the answer to its registration.
    sent: u64,
    /// The rest of a line the fan-out thread began to write: written before anything else.
    rest: Option<(Arc<str>, usize)>,
    /// A newer state than `sent`, for the task to push.
    pending: Option<Arc<Published>>,
    /// The session ended: nothing is written any more.
    closed: bool,
}

/// What an outbox hands the connection's task to write next.
pub enum Next {
    /// The end of a line that was begun: these bytes first.
    Rest(Arc<str>, usize),
    /// A whole `roots.changed` line, newline included.
    Push(Arc<str>),
}

impl Outbox {
    /// The outbox of a session just registered, shown the state numbered `sent`: busy, so that
    /// nothing is pushed before the registration is answered.
    pub(super) fn new(sent: u64) -> Self {
        Self {
            socket: OnceLock::new(),
            state: Mutex::new(OutboxState {
                busy: true,
                sent,
                rest: None,
                pending: None,
                closed: false,
            }),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// Lets the fan-out thread write to `socket` directly whenever the task is idle. Until then
    /// every push is left to the task.
    pub fn attach(&self, socket: Socket) {
        let _ = self.socket.set(socket);
    }

    /// Resolves when the fan-out thread left something for the task; then call [`Outbox::next`].
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// The task is about to write a line of its own (an answer): from now on only it writes,
    /// until [`Outbox::next`] returns `None`. Returns what must be written before that line.
    pub fn claim(&self) -> Option<Next> {
        let mut state = self.lock();
        state.busy = true;
        state.rest.take().map(|(line, from)| Next::Rest(line, from))
    }

    /// What the task is to write next, in order: the rest of a begun line, then the newest state
    /// not yet sent. `None` means nothing: the task is idle again, and the fan-out thread writes.
    pub fn next(&self) -> Option<Next> {
        let mut state = self.lock();
        if let Some((line, from)) = state.rest.take() {
            return Some(Next::Rest(line, from));
        }
        if let Some(published) = state.pending.take()
            && published.sequence > state.sent
        {
            state.sent = published.sequence;
            return Some(Next::Push(published.line()));
        }
        state.busy = false;
        None
    }

    /// Delivers `published` (its line is `line`) unless the session has it already: written at
    /// once when the task is idle and the socket takes it, otherwise left to the task.
    fn offer(&self, published: &Arc<Published>, line: &Arc<str>) {
        let mut state = self.lock();
        if state.closed || published.sequence <= state.sent {
            return;
        }
        let socket = self.socket.get();
        let (true, Some(socket)) = (!state.busy, socket) else {
            // The task writes it once it is done with what it is writing: coalesced, so a busy
            // or slow session holds one state, the newest.
            state.pending = Some(published.clone());
            return;
        };
        state.sent = published.sequence;
        // The socket is non-blocking (tokio made it so): this never waits on the peer.
        let written = rustix::io::write(socket.as_fd(), line.as_bytes()).unwrap_or(0);
        if written == line.len() {
            return;
        }
        // A full socket, a signal, a peer gone: the task finishes the line, or meets the error
        // itself and closes the connection, within its own bounds.
        state.busy = true;
        state.rest = Some((line.clone(), written));
        drop(state);
        self.wake.notify_one();
    }

    /// The session ended: nothing more is written.
    pub(super) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.pending = None;
        state.rest = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OutboxState> {
        // Nothing panics while holding it; a poisoned lock still holds a consistent state.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The fan-out thread and what is handed to it.
pub(super) struct FanOut {
    work: Mutex<Work>,
    ready: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct Work {
    /// The newest state of each workspace published since the thread last looked: one per
    /// workspace, however many changes came, so this is bounded by the number of workspaces.
    newest: HashMap<WorkspaceName, Arc<Published>>,
    stop: bool,
}

impl FanOut {
    /// Starts the thread; `outboxes` says, for a workspace, the outboxes of its sessions in the
    /// order they registered.
    pub(super) fn start(
        outboxes: impl Fn(&WorkspaceName) -> Vec<Arc<Outbox>> + Send + 'static,
    ) -> std::io::Result<Arc<Self>> {
        let fanout = Arc::new(Self {
            work: Mutex::new(Work::default()),
            ready: Condvar::new(),
            thread: Mutex::new(None),
        });
        let worker = fanout.clone();
        let thread = std::thread::Builder::new()
            .name("rootsd-fanout".into())
            .spawn(move || worker.run(outboxes))?;
        *fanout.thread.lock().expect("fan-out thread handle") = Some(thread);
        Ok(fanout)
    }

    /// Hands `published` to the thread, replacing an older state of its workspace not yet sent.
    pub(super) fn hand_over(&self, published: Arc<Published>) {
        let mut work = self.work.lock().expect("fan-out work");
        work.newest.insert(published.workspace.clone(), published);
        drop(work);
        self.ready.notify_one();
    }

    /// Stops the thread after the states it holds and waits for it.
    pub(super) fn stop(&self) {
        self.work.lock().expect("fan-out work").stop = true;
        self.ready.notify_one();
        let thread = self.thread.lock().expect("fan-out thread handle").take();
        if let Some(thread) = thread
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }

    fn run(&self, outboxes: impl Fn(&WorkspaceName) -> Vec<Arc<Outbox>>) {
        loop {
            let newest = {
                let mut work = self.work.lock().expect("fan-out work");
                while work.newest.is_empty() && !work.stop {
                    work = self.ready.wait(work).expect("fan-out work");
                }
                if work.newest.is_empty() {
                    return;
                }
                std::mem::take(&mut work.newest)
            };
            for (workspace, published) in newest {
                let outboxes = outboxes(&workspace);
                // A workspace nobody is connected to is not serialised at all: its line is made
                // when a connection first needs it.
                if outboxes.is_empty() {
                    continue;
                }
                // Serialised here, once, for every session: not on the commit thread, which
                // acknowledges the change meanwhile.
                let line = published.line();
                for outbox in outboxes {
                    outbox.offer(&published, &line);
                }
            }
        }
    }
}
