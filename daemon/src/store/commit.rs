//! Group commit: every change's journal record is queued in memory, and one `pwrite` and one
//! `fdatasync` on a thread of its own make every change queued so far durable at once, so that
//! fifty writers at the same moment cost about one write and one sync, not fifty. Only then is a
//! change applied to the state readers see, published, and acknowledged: a writer's task woken,
//! or its answer written from this thread ([`Call`]). The database takes the
//! changes once writes pause for 10 ms, and at every checkpoint, in one batch that writes each
//! workspace they touched once: applying each change to sled as soon as no sync waited (sled's
//! own work, and its I/O threads woken, per change) was most of a small change's cost, and
//! catching up after every 64 changes still stopped the commit thread between two syncs in the
//! middle of a burst of writers.
//!
//! The writers' view ("pending": every change written, durable or not) and the readers' view
//! ("committed": durable changes only) are kept apart. A sync that fails fails every change it
//! was to cover (and any written after them): the journal is cut back to its durable length,
//! the pending view goes back to the committed one, and the store reports itself degraded until
//! a later write succeeds, which heals it. The database is brought up to date and checkpointed
//! when writes pause, after [`CHECKPOINT_AFTER_CHANGES`] changes, and before the journal is
//! compacted; a database that fails is reopened and rewritten from the committed view, while the
//! journal keeps every acknowledged change safe meanwhile.
//!
//! Nothing that fails in the database may take the commit thread with it: sled's panics are
//! errors by the time they leave [`crate::store::database`], and should anything else panic on the thread,
//! [`supervise`] fails the changes in flight, marks the database for rewriting and runs the loop
//! again. Locks are taken past poisoning for the same reason. Once the thread has stopped (at
//! shutdown), a write is refused at once instead of waiting for a sync that will never come.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::store::activity;
use crate::store::database::{Behind, Store, StoreError};
use crate::store::history;
use crate::store::journal::{Entry, Journal};
use crate::store::model::{Change, Contents, HistoryEntryV1};
use crate::store::reaper::{Reaper, Retired};

/// How long writes must pause before the database is checkpointed.
const CHECKPOINT_AFTER_IDLE: Duration = Duration::from_millis(250);
/// Under sustained writes, the database is checkpointed after this many changes anyway, so that
/// the journal stays short.
const CHECKPOINT_AFTER_CHANGES: usize = 1000;
/// The database takes the changes behind it (without a checkpoint's syncs) once writes pause
/// for this long, and at every checkpoint: so that writers back to back never wait for it
/// between two syncs. What waits for it costs memory per workspace, not per change
/// ([`Behind`]), and the checkpoint after [`CHECKPOINT_AFTER_CHANGES`] bounds how many
/// revisions it spans under writes that never pause.
const CATCH_UP_AFTER_IDLE: Duration = Duration::from_millis(10);
/// How long a queued change may wait for the runtime to finish planning the burst it came in,
/// before it is synced anyway: a runtime busy with other work never holds a change back longer.
/// Planning takes about 10 µs a change, so a burst of fifty is planned well within it.
const BURST_PATIENCE: Duration = Duration::from_millis(1);

/// How the store is doing, for `status` and `doctor`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Health {
    #[default]
    Ok,
    /// Something failed; `problem` says what, and whether acknowledged changes are safe.
    Degraded { problem: String, since_unix: u64 },
}

/// What a writer decided, under the writers' lock, against the pending view.
pub enum Plan<T> {
    /// Write `change`; `T` is what to tell the client once it is durable.
    Write(Change, T),
    /// Nothing to write: the pending view already holds what was asked, as of `revision`.
    Unchanged { revision: u64, reply: T },
}

/// A change (or a no-op's dependency) on its way to stable storage.
pub type Ticket = oneshot::Receiver<Result<(), StoreError>>;

/// What a writer is told once its change is durable, or failed to become so: a task awaiting
/// its [`Ticket`], or a call on the commit thread, made after the batch's publications in the
/// order the changes were written. A call lets a connection write its answer straight to its
/// socket, as the fan-out thread writes pushes, instead of waking its task to do it: in a burst
/// of changes, waking fifty tasks one after another on one worker, each to serialise and write
/// its answer, took longer than the sync they waited for. A call must be quick and must not
/// block: it holds up the next sync. Nor may it ask for a change: a failure is told with the
/// writers' lock held.
pub type Call = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

enum Waiter {
    Ticket(oneshot::Sender<Result<(), StoreError>>),
    Call(Call),
}

impl Waiter {
    fn tell(self, outcome: Result<(), StoreError>) {
        match self {
            Self::Ticket(sender) => {
                let _ = sender.send(outcome);
            }
            Self::Call(call) => call(outcome),
        }
    }
}

/// Told on the commit thread of what became durable.
pub trait Durable: Send + Sync {
    /// Each change, in order, once the committed view holds it.
    fn change(&self, change: &Change, committed: &Contents);
    /// Once a sync's changes are all in the committed view (and before their writers are
    /// answered): `revision` is the newest. What every change would tell alike (the newest
    /// revision, that counts changed) is told here, once per sync rather than once per change.
    fn synced(&self, _revision: u64) {}
}

impl<F: Fn(&Change, &Contents) + Send + Sync> Durable for F {
    fn change(&self, change: &Change, committed: &Contents) {
        self(change, committed);
    }
}

/// What the commit thread tells of durable changes ([`Durable`]).
pub type OnDurable = Box<dyn Durable>;

struct Written {
    change: Change,
    /// Its history entry, computed once against the pending state: the committed state applies
    /// it to the same state of its workspace, in the same order, so it takes the same entry.
    entry: Option<HistoryEntryV1>,
    /// The writer, and any no-op that depends on this change.
    waiters: Vec<Waiter>,
}

struct State {
    journal: Journal,
    /// A second handle on the journal's file, for syncing it without the lock; replaced with
    /// the journal when it is compacted (a handle on the old file would sync the wrong file).
    sync: Arc<File>,
    /// What writers plan against: the committed view's revision and workspaces with every
    /// change written since, durable or not. It keeps no history, which only readers of the
    /// committed view look at ([`writers_view`]).
    pending: Contents,
    /// Written to the journal, not yet durable, in order.
    unsynced: VecDeque<Written>,
    durable_len: u64,
    journal_problem: Option<(String, u64)>,
    database_problem: Option<(String, u64)>,
    /// Changes durable in the journal but not yet checkpointed in the database.
    since_checkpoint: usize,
    /// The database needs rewriting from the committed view (it failed to take a change).
    database_stale: bool,
    /// The revision the journal last recorded a checkpoint at.
    checkpointed: u64,
    /// Durable, acknowledged changes the database has not taken yet. It takes them once writes
    /// pause for [`CATCH_UP_AFTER_IDLE`], and at every checkpoint.
    behind: Behind,
    /// When a writer last wrote, or a checkpoint last failed: the next idle checkpoint comes
    /// [`CHECKPOINT_AFTER_IDLE`] after it, so a database that keeps failing is retried at that
    /// pace rather than in a busy loop.
    last_write: Instant,
    closing: bool,
    /// The commit thread has stopped: nothing written now would ever be synced.
    stopped: bool,
    /// The commit thread is waiting on `wake`, and nobody has woken it yet. Set under this lock
    /// before its wait, cleared by the writer that wakes it or by the thread itself once it
    /// wakes, so a writer that finds it clear knows the thread will look at the queue before it
    /// waits again, and need not wake it: a notification is a system call even when nobody
    /// waits, and in a burst of changes the thread is nearly always busy syncing.
    waiting: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    committed: Arc<RwLock<Contents>>,
    /// `None` while a failed database is being reopened, or after reopening it failed.
    store: Mutex<Option<Store>>,
    /// The database's directory, to reopen it even when no handle is left.
    db_dir: std::path::PathBuf,
    on_durable: OnDurable,
    /// Where the states that changes replaced are let go of.
    reaper: Reaper,
}

/// The commit thread and what writers need to reach it.
pub struct Committer {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<Result<(), StoreError>>>>,
}

impl Committer {
    /// Starts committing into `journal` and `store`, both holding `contents`.
    pub fn start(
        journal: Journal,
        store: Store,
        contents: Contents,
        committed: Arc<RwLock<Contents>>,
        on_durable: OnDurable,
    ) -> Result<Self, StoreError> {
        // A database that kept its room over a restart is rebuilt at the first idle checkpoint.
        let shrink = usize::from(oversized(&store, journal.snapshot_len()));
        let sync = journal.sync_handle().map_err(|error| StoreError::Journal {
            action: "open",
            path: journal.path().display().to_string(),
            error,
        })?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                sync: Arc::new(sync),
                durable_len: journal.len(),
                journal,
                pending: writers_view(&contents),
                unsynced: VecDeque::new(),
                journal_problem: None,
                database_problem: None,
                since_checkpoint: shrink,
                database_stale: false,
                checkpointed: 0,
                behind: Behind::default(),
                last_write: Instant::now(),
                closing: false,
                stopped: false,
                waiting: false,
            }),
            wake: Condvar::new(),
            committed,
            db_dir: store.dir().to_owned(),
            store: Mutex::new(Some(store)),
            on_durable,
            reaper: Reaper::start(),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("rootsd-commit".to_owned())
                .spawn(move || supervise(&shared))
                .map_err(|error| StoreError::Journal {
                    action: "start the commit thread for",
                    path: "the journal".to_owned(),
                    error,
                })?
        };
        Ok(Self {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Decides a change with `plan` against the pending view and, if there is one, writes it to
    /// the journal. Returns the plan's reply and a ticket that resolves once the state the reply
    /// describes is durable (or failed to become so).
    ///
    /// `plan` runs under the writers' lock: it must be quick and must not block.
    pub fn write<T, E>(
        &self,
        plan: impl FnOnce(&Contents) -> Result<Plan<T>, E>,
    ) -> Result<(T, Option<Ticket>), E>
    where
        E: From<StoreError>,
    {
        let mut ticket = None;
        let (reply, _) = self.write_then(plan, |_| {
            let (sender, receiver) = oneshot::channel();
            ticket = Some(receiver);
            Waiter::Ticket(sender)
        })?;
        Ok((reply, ticket))
    }

    /// [`Committer::write`], telling a [`Call`] on the commit thread instead of a ticket.
    /// `call` makes it from the reply, under the writers' lock, only when there is something to
    /// wait for. Returns the reply and whether a call was made: `false` means that nothing was
    /// to be made durable first.
    pub fn write_calling<T, E>(
        &self,
        plan: impl FnOnce(&Contents) -> Result<Plan<T>, E>,
        call: impl FnOnce(&T) -> Call,
    ) -> Result<(T, bool), E>
    where
        E: From<StoreError>,
    {
        self.write_then(plan, |reply| Waiter::Call(call(reply)))
    }

    /// Plans under the writers' lock and queues the change, if any, with the waiter `waiter`
    /// makes from the reply (made only when there is something to wait for).
    fn write_then<T, E>(
        &self,
        plan: impl FnOnce(&Contents) -> Result<Plan<T>, E>,
        waiter: impl FnOnce(&T) -> Waiter,
    ) -> Result<(T, bool), E>
    where
        E: From<StoreError>,
    {
        let mut state = lock(&self.shared.state);
        if state.stopped || state.closing {
            return Err(StoreError::Damaged(
                "rootsd is shutting down and takes no more changes; try again once it has restarted"
                    .to_owned(),
            )
            .into());
        }
        match plan(&state.pending)? {
            Plan::Unchanged { revision, reply } => {
                // The reply describes the pending view; it holds only once that is durable.
                let waits = match state
                    .unsynced
                    .iter_mut()
                    .rev()
                    .find(|w| w.change.revision <= revision)
                {
                    Some(written) => {
                        written.waiters.push(waiter(&reply));
                        true
                    }
                    None => false,
                };
                Ok((reply, waits))
            }
            Plan::Write(change, reply) => {
                debug_assert_eq!(change.revision, state.pending.revision + 1);
                // Queued, not written: the commit thread writes every change queued before its
                // sync with one `pwrite`, and a failure there fails them all, as a failed sync.
                {
                    let state = &mut *state;
                    let previous = state
                        .pending
                        .workspaces
                        .get(&change.workspace)
                        .map(Arc::as_ref);
                    state.journal.append_change_deferred(&change, previous);
                    let entry = history::entry(previous, &change);
                    // The entry goes to the committed view only: the writers plan against the
                    // pending view's workspaces and never read its history.
                    state.pending.apply_recorded(&change, None);
                    state.last_write = Instant::now();
                    state.unsynced.push_back(Written {
                        change,
                        entry,
                        waiters: vec![waiter(&reply)],
                    });
                }
                // Woken while this thread still held the lock, the commit thread would block on
                // it at once: one more switch between threads on every change. Woken once: until
                // it runs and looks at the queue (which, in a burst that keeps both cores busy,
                // may take many changes), waking it again is a system call for nothing.
                let waiting = std::mem::take(&mut state.waiting);
                drop(state);
                if waiting {
                    self.shared.wake.notify_one();
                }
                Ok((reply, true))
            }
        }
    }

    /// How the store is doing.
    pub fn health(&self) -> Health {
        let state = lock(&self.shared.state);
        match state
            .journal_problem
            .as_ref()
            .or(state.database_problem.as_ref())
        {
            None => Health::Ok,
            Some((problem, since)) => Health::Degraded {
                problem: problem.clone(),
                since_unix: *since,
            },
        }
    }

    /// Makes everything durable, checkpoints the database, and stops the commit thread. An
    /// error means the last checkpoint failed (acknowledged changes are still in the journal).
    pub fn close(&self) -> Result<(), StoreError> {
        {
            let mut state = lock(&self.shared.state);
            state.closing = true;
            self.shared.wake.notify_one();
        }
        match lock(&self.thread).take() {
            Some(thread) => thread.join().unwrap_or_else(|_| {
                Err(StoreError::Damaged(
                    "the commit thread panicked; the journal holds every acknowledged change"
                        .to_owned(),
                ))
            }),
            None => Ok(()),
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// The pending view of `committed`: its revision and workspaces (which share their states with
/// it), without the history.
fn writers_view(committed: &Contents) -> Contents {
    Contents {
        revision: committed.revision,
        workspaces: committed.workspaces.clone(),
        history: Default::default(),
    }
}

/// A mutex's guard, even if a thread panicked holding it: every panic on the commit thread is
/// caught and its state made consistent again ([`supervise`]), so poisoning says nothing here.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read(committed: &RwLock<Contents>) -> std::sync::RwLockReadGuard<'_, Contents> {
    committed.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(committed: &RwLock<Contents>) -> std::sync::RwLockWriteGuard<'_, Contents> {
    committed.write().unwrap_or_else(PoisonError::into_inner)
}

/// Runs the commit loop, and runs it again if it panics, until it returns (at shutdown). Then
/// fails whatever was still waiting, so that no writer waits for a thread that is gone.
fn supervise(shared: &Shared) -> Result<(), StoreError> {
    let result = loop {
        match catch_unwind(AssertUnwindSafe(|| run(shared))) {
            Ok(result) => break result,
            Err(panic) => recover_from_panic(shared, &panic_message(&*panic)),
        }
    };
    let mut state = lock(&shared.state);
    state.stopped = true;
    fail_unsynced(
        &mut state,
        "the commit thread stopped before the change was durable",
    );
    result
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

/// After a panic on the commit thread: the changes in flight are refused (their writers are told,
/// and the journal is cut back to what was durable), and the database is rewritten from the
/// committed view at the next checkpoint, since it may have missed a batch.
fn recover_from_panic(shared: &Shared, message: &str) {
    let mut state = lock(&shared.state);
    let problem = format!(
        "the commit thread failed ({message}) and was restarted; the changes in flight were refused, every acknowledged change is safe in the journal, and rootsd rewrites the database"
    );
    tracing::error!("{problem}");
    state
        .database_problem
        .get_or_insert((problem, crate::clock::unix_secs()));
    state.database_stale = true;
    state.behind = Behind::default();
    let durable = state.durable_len;
    if let Err(cut) = state.journal.truncate(durable) {
        tracing::error!(error = %cut, "could not cut the journal back to its durable length");
    }
    fail_unsynced(
        &mut state,
        "the commit thread failed before the change was durable",
    );
    state.pending = writers_view(&read(&shared.committed));
}

/// Tells every writer still waiting that its change was not made.
fn fail_unsynced(state: &mut State, why: &str) {
    for written in state.unsynced.drain(..) {
        for waiter in written.waiters {
            waiter.tell(Err(StoreError::Damaged(format!(
                "{why}; nothing was changed"
            ))));
        }
    }
}

/// The commit thread: syncs what writers wrote, publishes it, and checkpoints when idle.
fn run(shared: &Shared) -> Result<(), StoreError> {
    let mut state = lock(&shared.state);
    loop {
        if state.unsynced.is_empty() {
            if state.closing {
                drop(state);
                return checkpoint(shared, true);
            }
            let idle = state.last_write.elapsed();
            if !state.behind.is_empty() && idle >= CATCH_UP_AFTER_IDLE {
                let behind = std::mem::take(&mut state.behind);
                drop(state);
                catch_up_database(shared, &behind);
                state = lock(&shared.state);
                continue;
            }
            if (state.since_checkpoint > 0 || state.database_stale) && idle >= CHECKPOINT_AFTER_IDLE
            {
                drop(state);
                let _ = checkpoint(shared, false);
                state = lock(&shared.state);
                continue;
            }
            let wait = if !state.behind.is_empty() {
                CATCH_UP_AFTER_IDLE.saturating_sub(idle)
            } else if state.since_checkpoint > 0 || state.database_stale {
                CHECKPOINT_AFTER_IDLE.saturating_sub(idle)
            } else {
                Duration::from_secs(3600)
            };
            state.waiting = true;
            state = shared
                .wake
                .wait_timeout(state, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            state.waiting = false;
            continue;
        }
        // A burst of writers is planned one after another by the runtime: its changes ride on
        // one sync once it is all planned, not on one sync for the first few and more for the
        // rest.
        drop(state);
        activity::wait_until_idle(BURST_PATIENCE);
        state = lock(&shared.state);
        // Everything queued so far rides on this one write and sync; writers keep queueing
        // meanwhile and wait for the next. Only this thread writes the file while it is served
        // (compaction runs here too), so writing outside the lock races with nothing.
        let target = state.journal.len();
        let count = state.unsynced.len();
        let (bytes, at) = state.journal.take_unwritten();
        let sync = state.sync.clone();
        drop(state);
        let synced = sync
            .write_all_at(&bytes, at)
            .and_then(|()| sync.sync_data());
        state = lock(&shared.state);
        state.journal.recycle(bytes);
        match synced {
            Ok(()) => {
                state.durable_len = target;
                state.journal_problem = None;
                let batch: Vec<Written> = state.unsynced.drain(..count).collect();
                state.since_checkpoint += batch.len();
                drop(state);
                let (published, mut retired) = publish(shared, batch);
                state = lock(&shared.state);
                for change in published {
                    if let Some(replaced) = state.behind.push(change) {
                        retired.push(replaced.state);
                    }
                }
                shared.reaper.retire(retired);
                if state.since_checkpoint >= CHECKPOINT_AFTER_CHANGES
                    || state.journal.wants_compaction()
                {
                    drop(state);
                    let _ = checkpoint(shared, false);
                    state = lock(&shared.state);
                }
            }
            Err(error) => {
                let problem = format!(
                    "writing or syncing the journal {} failed: {error}; the changes it held were refused and nothing acknowledged is lost",
                    state.journal.path().display()
                );
                tracing::error!("{problem}");
                state
                    .journal_problem
                    .get_or_insert((problem, crate::clock::unix_secs()));
                let durable = state.durable_len;
                if let Err(cut) = state.journal.truncate(durable) {
                    tracing::error!(error = %cut, "could not cut the journal back to its durable length");
                }
                let failed: Vec<Written> = state.unsynced.drain(..).collect();
                state.pending = writers_view(&read(&shared.committed));
                for written in failed {
                    for waiter in written.waiters {
                        waiter.tell(Err(StoreError::Journal {
                            action: "sync",
                            path: state.journal.path().display().to_string(),
                            error: std::io::Error::new(error.kind(), error.to_string()),
                        }));
                    }
                }
            }
        }
    }
}

/// Applies durable changes to the committed view and publishes them, in order, then acknowledges
/// their writers, in order. Returns the changes, for the database, and the states they replaced,
/// for the reaper.
///
/// The acknowledgements go out together, after the batch's last publication: a ticket wakes its
/// writer's task, a call writes its answer, and done one by one between publications, a burst of
/// changes woke the runtime's sleeping workers once per change instead of once per batch.
fn publish(shared: &Shared, batch: Vec<Written>) -> (Vec<Change>, Retired) {
    let mut changes = Vec::with_capacity(batch.len());
    let mut retired = Vec::with_capacity(batch.len());
    let mut waiters = Vec::with_capacity(batch.len());
    for written in batch {
        // The state the change replaces is let go of by the reaper, once its writers are
        // answered.
        let replaced = write(&shared.committed).apply_recorded(&written.change, written.entry);
        // Publishing reads only the changed workspace, under a read lock: cloning the whole
        // contents per change made a burst of changes quadratic in the number of workspaces.
        // Only this thread writes `committed`, so no change can slip in between.
        let committed = read(&shared.committed);
        shared.on_durable.change(&written.change, &committed);
        drop(committed);
        waiters.extend(written.waiters);
        retired.extend(replaced);
        changes.push(written.change);
    }
    if let Some(last) = changes.last() {
        shared.on_durable.synced(last.revision);
    }
    for waiter in waiters {
        waiter.tell(Ok(()));
    }
    (changes, retired)
}

/// Hands the database the durable changes it has not taken yet, as one batch.
fn catch_up_database(shared: &Shared, behind: &Behind) {
    let applied = match lock(&shared.store).as_ref() {
        // The committed view holds these changes' history entries. Only this thread writes it,
        // so reading it while sled applies the batch holds up no writer.
        Some(store) => store.catch_up(behind, &read(&shared.committed)),
        None => Ok(()),
    };
    if let Err(error) = applied {
        let mut state = lock(&shared.state);
        note_database_problem(&mut state, &error);
    }
}

fn note_database_problem(state: &mut State, error: &StoreError) {
    let problem = format!(
        "the database could not take a change ({error}); every acknowledged change is safe in the journal, and rootsd rewrites the database once it can"
    );
    tracing::error!("{problem}");
    state
        .database_problem
        .get_or_insert((problem, crate::clock::unix_secs()));
    state.database_stale = true;
}

/// Makes the database durable up to the committed revision and records that in the journal;
/// rewrites a database that failed, and compacts a long journal. `last`: at shutdown, where the
/// journal is synced too and a failure is the caller's to report.
fn checkpoint(shared: &Shared, last: bool) -> Result<(), StoreError> {
    let behind = std::mem::take(&mut lock(&shared.state).behind);
    catch_up_database(shared, &behind);
    let (stale, live) = {
        let state = lock(&shared.state);
        (state.database_stale, state.journal.snapshot_len())
    };
    // Read in place rather than cloned: the contents hold the history, a few hundred KB. Only
    // this thread writes them, so holding the read lock blocks no writer, and readers share it.
    let committed = read(&shared.committed);
    let done = {
        let mut store = lock(&shared.store);
        let checkpointed = if stale {
            reopen(&mut store, &shared.db_dir).and_then(|store| store.replace_all(&committed))
        } else {
            match store.as_ref() {
                Some(store) => store.checkpoint(),
                None => Err(StoreError::Damaged(
                    "the database could not be reopened".to_owned(),
                )),
            }
        };
        checkpointed.and_then(|()| shrink_if_oversized(&mut store, &committed, live))
    };
    let mut state = lock(&shared.state);
    if let Err(error) = done {
        note_database_problem(&mut state, &error);
        state.since_checkpoint = 0;
        state.last_write = Instant::now();
        return Err(error);
    }
    state.database_stale = false;
    state.database_problem = None;
    state.since_checkpoint = 0;
    let path = state.journal.path().to_owned();
    let journal_error = |action: &'static str| {
        let path = path.display().to_string();
        move |error| StoreError::Journal {
            action,
            path,
            error,
        }
    };
    if state.journal.wants_compaction() {
        // The database is durable at the committed revision, so the journal can start afresh
        // from it; the changes written since, not yet synced, follow the snapshot, and the next
        // sync makes them durable as before. Writers wait meanwhile, which is what keeps
        // compaction from starving under back-to-back writes (it used to wait for a moment
        // with nothing in flight, which a writer that sends its next change as soon as the
        // last is acknowledged never leaves).
        let tail: Vec<Change> = state.unsynced.iter().map(|w| w.change.clone()).collect();
        let durable = state
            .journal
            .compact(&committed, &tail)
            .map_err(journal_error("compact"))?;
        let sync = state.journal.sync_handle().map_err(journal_error("open"))?;
        state.sync = Arc::new(sync);
        state.durable_len = durable;
        state.checkpointed = committed.revision;
        return Ok(());
    }
    if state.unsynced.is_empty() && state.checkpointed < committed.revision {
        state
            .journal
            .append(&Entry::Checkpoint(committed.revision))
            .map_err(journal_error("write"))?;
        state.checkpointed = committed.revision;
        if last {
            state.journal.sync().map_err(journal_error("sync"))?;
        }
        state.durable_len = state.journal.len();
    }
    Ok(())
}

/// sled keeps the space of every value it rewrote, and every change rewrites its workspace's
/// whole value: past this many times the live data (the journal's snapshot)…
const DATABASE_GROWTH: u64 = 4;
/// …and this floor (what sled takes for a small store, with room to spare), the database is
/// rebuilt ([`Store::rebuild`]).
const DATABASE_FLOOR: u64 = 16 << 20;

fn oversized(store: &Store, live: u64) -> bool {
    store.disk_bytes() > DATABASE_FLOOR.max(DATABASE_GROWTH * live)
}

/// Rebuilds the database, which is durable at `committed`, if it takes more room than
/// [`DATABASE_GROWTH`] and [`DATABASE_FLOOR`] allow. Leaves no handle if the rebuild fails: the
/// next checkpoint reopens the directory (the old database or the new, both sound).
fn shrink_if_oversized(
    slot: &mut Option<Store>,
    committed: &Contents,
    live: u64,
) -> Result<(), StoreError> {
    if !slot.as_ref().is_some_and(|store| oversized(store, live)) {
        return Ok(());
    }
    let old = slot.take().expect("checked above");
    let before = old.disk_bytes();
    let rebuilt = old.rebuild(committed)?;
    tracing::info!(
        before,
        after = rebuilt.disk_bytes(),
        live,
        "rebuilt the database to give back the room sled kept"
    );
    *slot = Some(rebuilt);
    Ok(())
}

/// Replaces a database handle that failed with a fresh one on the same directory.
fn reopen<'a>(slot: &'a mut Option<Store>, dir: &std::path::Path) -> Result<&'a Store, StoreError> {
    // sled lets go of its directory only once every handle is gone; dropping the old one may
    // fail inside sled, which the store logs and survives.
    drop(slot.take());
    let fresh = Store::reopen_released(dir)?;
    Ok(slot.insert(fresh))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::model::{StoredRootV1, StoredWorkspaceV1};
    use std::sync::atomic::{AtomicBool, Ordering};

    fn change(revision: u64) -> Change {
        change_to("w", revision)
    }

    fn change_to(workspace: &str, revision: u64) -> Change {
        Change::recorded(
            revision,
            rootsd_proto::WorkspaceName::new(workspace).unwrap(),
            StoredWorkspaceV1 {
                revision,
                roots: vec![Arc::new(StoredRootV1 {
                    uri: format!("file:///r{revision}").into(),
                    name: None,
                    by_hand: true,
                    published_by: Vec::new(),
                })],
            }
            .into(),
            None,
            0,
        )
    }

    fn write_next(committer: &Committer) -> Ticket {
        let ((), ticket) = committer
            .write(|pending| Ok::<_, StoreError>(Plan::Write(change(pending.revision + 1), ())))
            .unwrap();
        ticket.expect("a change has a ticket")
    }

    #[test]
    fn writes_back_to_back_reach_the_database_each_workspace_as_its_last_change_left_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let journal = Journal::create(
            &dir.path().join(crate::store::journal::FILE_NAME),
            &Contents::default(),
            0,
        )
        .unwrap();
        let committed = Arc::new(RwLock::new(Contents::default()));
        let committer = Committer::start(
            journal,
            Store::open(&db).unwrap(),
            Contents::default(),
            committed.clone(),
            Box::new(|_: &Change, _: &Contents| {}),
        )
        .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // Three workspaces, each changed fifty times, with no pause for the database to take
        // them: they wait for it as one change per workspace.
        let workspaces = ["a", "b", "c"];
        for n in 0..150 {
            let ((), ticket) = committer
                .write(|pending| {
                    let next = change_to(workspaces[n % 3], pending.revision + 1);
                    Ok::<_, StoreError>(Plan::Write(next, ()))
                })
                .unwrap();
            let synced = runtime.block_on(ticket.expect("a change has a ticket"));
            assert!(matches!(synced, Ok(Ok(()))), "change {n}: {synced:?}");
        }
        committer.close().unwrap();
        // The committer holds the database's lock until it is gone.
        drop(committer);
        let stored = Store::open(&db).unwrap().load().unwrap();
        let committed = committed.read().unwrap();
        assert_eq!(stored.revision, 150);
        assert_eq!(stored.workspaces, committed.workspaces);
        for (name, last) in workspaces.iter().zip([148, 149, 150]) {
            let workspace = &stored.workspaces[&rootsd_proto::WorkspaceName::new(*name).unwrap()];
            assert_eq!(workspace.revision, last, "{name}");
            assert_eq!(
                &*workspace.roots[0].uri,
                format!("file:///r{last}"),
                "{name}"
            );
        }
    }

    #[test]
    fn a_panic_on_the_commit_thread_fails_its_writer_and_later_writes_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let journal = Journal::create(
            &dir.path().join(crate::store::journal::FILE_NAME),
            &Contents::default(),
            0,
        )
        .unwrap();
        let committed = Arc::new(RwLock::new(Contents::default()));
        let panicked = Arc::new(AtomicBool::new(false));
        let once = panicked.clone();
        let on_durable: OnDurable = Box::new(move |_: &Change, _: &Contents| {
            if !once.swap(true, Ordering::SeqCst) {
                panic!("a fault on the commit thread");
            }
        });
        let committer = Committer::start(
            journal,
            store,
            Contents::default(),
            committed.clone(),
            on_durable,
        )
        .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let first = runtime.block_on(write_next(&committer));
        assert!(panicked.load(Ordering::SeqCst));
        assert!(
            !matches!(first, Ok(Ok(()))),
            "the writer whose change met the panic is not told it succeeded"
        );
        // A write that arrives while the thread recovers is refused with the changes in flight;
        // one after it succeeds.
        let succeeded =
            (0..100).any(|_| matches!(runtime.block_on(write_next(&committer)), Ok(Ok(()))));
        assert!(succeeded, "a write after the panic succeeds");
        committer.close().unwrap();
        assert_eq!(committer.health(), Health::Ok, "the checkpoint healed it");
        let refused = committer
            .write(|pending| Ok::<_, StoreError>(Plan::Write(change(pending.revision + 1), ())));
        assert!(
            refused.is_err(),
            "a write after the thread stopped is refused, not left waiting"
        );
        let replay =
            crate::store::journal::read(&dir.path().join(crate::store::journal::FILE_NAME))
                .unwrap()
                .unwrap();
        assert_eq!(replay.revision(), committed.read().unwrap().revision);
    }
}
