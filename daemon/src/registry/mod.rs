//! The daemon's shared state: the roots of every workspace, the live MCP sessions, and the
//! channels that tell connections about changes.
//!
//! Writers decide their change against the pending state and hand it to the store's `Committer`, which
//! makes it durable (group commit) before the change is acknowledged, visible to readers, and
//! published. Readers of a workspace's roots never wait for the store: they read the committed
//! state, and each workspace that changed or has sessions has a `watch` channel holding its
//! newest state ([`Published`]), which also coalesces bursts, so a session or a `watch`
//! subscriber that is slow to read only ever sees the newest list, and the daemon holds one copy
//! of it however many connections are behind.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use rootsd_proto::session::{self, SessionState};
use rootsd_proto::wire::{
    self, ChangeResult, ListedRoot, LogParams, LogResult, RegisterParams, RemoveTarget,
    RootsListing, RootsSnapshot, SessionInfo, WorkspaceSummary,
};
use rootsd_proto::{Root, WorkspaceName};
use tokio::sync::{Notify, oneshot, watch};

use crate::error::RequestError;
use crate::provenance;
use crate::reconnect::Expected;
use crate::session_bounds;
use crate::store::{
    self, Change, Committer, Contents, Durable, Health, Opened, Origin, PeerV1, Plan, Serving,
    StoreError, StoredWorkspaceV1,
};
use crate::workspace_bounds;
pub use answering::Answer;
use fanout::FanOut;
pub use fanout::{Next, Outbox, Socket};
pub use reconnecting::keep_record;

/// Shared state of one running daemon.
pub struct Registry {
    committer: Committer,
    /// Every durable change, and only those: what readers see.
    committed: Arc<RwLock<Contents>>,
    publisher: Arc<Publisher>,
    /// Shared with the calls that answer changes on the commit thread ([`answering`]).
    sessions: Arc<Mutex<BTreeMap<u64, SessionRecord>>>,
    next_session_id: AtomicU64,
    /// Woken whenever a session registers, reports a new state or goes away, for `wait`.
    progress: Notify,
    /// Bumped whenever a session registers or goes away, for the record of live sessions
    /// ([`keep_record`]).
    session_table: watch::Sender<u64>,
    /// The previous run's sessions expected back after a start ([`crate::reconnect`]).
    expected: Mutex<Expected>,
    clients: AtomicUsize,
    started: Instant,
    /// Each workspace's measured size, for the bound on all of them together.
    sizes: workspace_bounds::Sizes,
}

/// What tells connections about durable changes; the commit thread calls it, in order.
struct Publisher {
    /// Per workspace: the newest state, and the sessions it goes to. Created when a workspace
    /// first changes or gets a session.
    channels: Mutex<HashMap<WorkspaceName, Channel>>,
    /// Numbers every state published, so that a session is never sent one twice or an older
    /// one after a newer.
    sequence: AtomicU64,
    /// The thread that writes each change to the sessions ([`fanout`]); set once, at start.
    fanout: OnceLock<Arc<FanOut>>,
    /// The store revision of the newest change published, which wakes `watch` subscribers.
    changes: watch::Sender<u64>,
    /// Bumped whenever the totals `systemd::supervise` reports (roots, workspaces, sessions,
    /// revision) may have changed, so that systemd's status line follows without polling.
    counts: watch::Sender<u64>,
}

/// One workspace's newest state (for `watch` subscribers, and for sessions as they register),
/// and the outboxes of its sessions by session id, which is the order they registered in.
struct Channel {
    newest: watch::Sender<Arc<Published>>,
    outboxes: BTreeMap<u64, Arc<Outbox>>,
}

impl Channel {
    fn new(published: Arc<Published>) -> Self {
        Self {
            newest: watch::channel(published).0,
            outboxes: BTreeMap::new(),
        }
    }
}

impl Publisher {
    /// Publishes a workspace's new state: its channel holds it, and its sessions' outboxes get
    /// it through the fan-out thread. [`Publisher::revised`] follows.
    fn publish(&self, state: Stored) {
        {
            let mut channels = self.channels.lock().expect("channels lock");
            // Numbered under the lock, as a state made for a session's registration is: a
            // session shown a state is never offered an older one as newer.
            let published = Arc::new(self.published(state));
            let channel = channels
                .entry(published.workspace.clone())
                .and_modify(|channel| {
                    channel.newest.send_replace(published.clone());
                })
                .or_insert_with(|| Channel::new(published.clone()));
            // Under the lock: a session registering now either sees this state in the channel
            // or is among the outboxes the fan-out thread writes it to. A workspace without
            // sessions wakes no thread at all.
            if !channel.outboxes.is_empty()
                && let Some(fanout) = self.fanout.get()
            {
                fanout.hand_over(published.clone());
            }
        }
    }

    /// The store is at `revision`: wakes the `watch` subscribers and whoever waits for counts.
    /// After the channels hold the states: a subscriber woken by this finds them there.
    fn revised(&self, revision: u64) {
        self.changes.send_replace(revision);
        self.counts_changed();
    }

    fn published(&self, state: Stored) -> Published {
        Published {
            workspace: state.workspace,
            revision: state.state.revision,
            state: state.state,
            sequence: self.sequence.fetch_add(1, Ordering::Relaxed) + 1,
            snapshot: OnceLock::new(),
            line: OnceLock::new(),
        }
    }

    /// The outboxes of `workspace`'s sessions, oldest session first.
    fn outboxes(&self, workspace: &WorkspaceName) -> Vec<Arc<Outbox>> {
        let channels = self.channels.lock().expect("channels lock");
        channels
            .get(workspace)
            .map(|channel| channel.outboxes.values().cloned().collect())
            .unwrap_or_default()
    }

    fn counts_changed(&self) {
        self.counts
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }
}

/// The publisher as the commit thread tells it of durable changes: each change's workspace is
/// published as it comes, and the new revision once per sync, so that a burst of changes wakes
/// the `watch` subscribers and the counts' waiters once.
struct Durably(Arc<Publisher>);

impl Durable for Durably {
    fn change(&self, change: &Change, committed: &Contents) {
        self.0.publish(Stored::of(committed, &change.workspace));
    }

    fn synced(&self, revision: u64) {
        self.0.revised(revision);
    }
}

/// What the daemon keeps per session: deliberately small, as it may hold thousands.
struct SessionRecord {
    /// The proxy's own id across reconnections; empty if it sent none.
    instance: String,
    label: String,
    pid: u32,
    workspace: WorkspaceName,
    /// The proxy's last report, as it sent it.
    state: SessionState,
    /// When the server last fetched roots, by the daemon's clock: the proxy reports how many
    /// times, and the daemon notes when that number grows.
    last_fetch_unix: Option<u64>,
    connected: Instant,
    /// The session published its host's roots at least once: it withdraws them when it ends.
    published: bool,
    /// URIs the user removed (`rootsctl remove`) while this session published them: it does not
    /// publish them again until its host's list drops them. Never more than the host's list.
    declined: BTreeSet<String>,
    /// The session's connection as the history names it, for the changes made on its behalf.
    peer: PeerV1,
}

impl Registry {
    /// Serves the store `opened` ([`crate::store::open`]) and starts committing into it, once
    /// whatever sessions of the daemon's previous run published is withdrawn: no session
    /// outlives the daemon, and live ones publish again when they register.
    pub fn new(opened: Opened) -> Result<Self, StoreError> {
        let publisher = Arc::new(Publisher {
            channels: Mutex::new(HashMap::new()),
            sequence: AtomicU64::new(0),
            fanout: OnceLock::new(),
            changes: watch::channel(0).0,
            counts: watch::channel(0).0,
        });
        let fanout = {
            let publisher = publisher.clone();
            // Like the runtime's own threads: a daemon that cannot start a thread cannot run.
            FanOut::start(move |workspace| publisher.outboxes(workspace))
                .expect("failed to start the fan-out thread")
        };
        let _ = publisher.fanout.set(fanout);
        let on_durable = Box::new(Durably(publisher.clone()));
        let Serving {
            committer,
            committed,
            withdrawn,
        } = opened.serve(on_durable)?;
        if withdrawn > 0 {
            tracing::info!(
                workspaces = withdrawn,
                "withdrew the roots sessions of the previous run published; live sessions publish theirs again when they reconnect"
            );
        }
        // Nothing is written before the registry exists, so nobody has seen another revision.
        let revision = committed.read().expect("committed").revision;
        publisher.changes.send_replace(revision);
        Ok(Self {
            committer,
            committed,
            publisher,
            sessions: Arc::new(Mutex::new(BTreeMap::new())),
            next_session_id: AtomicU64::new(1),
            progress: Notify::new(),
            session_table: watch::channel(0).0,
            expected: Mutex::new(Expected::nobody()),
            clients: AtomicUsize::new(0),
            started: Instant::now(),
            sizes: workspace_bounds::Sizes::default(),
        })
    }

    /// How the store is doing.
    pub fn store_health(&self) -> Health {
        self.committer.health()
    }

    /// Makes everything durable, checkpoints the database and stops committing; at shutdown.
    pub fn close(&self) -> Result<(), StoreError> {
        self.committer.close()
    }

    pub fn uptime_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    pub fn client_connected(&self) -> ClientGuard<'_> {
        self.clients.fetch_add(1, Ordering::Relaxed);
        ClientGuard(self)
    }

    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    /// The roots of `workspace`; an unknown workspace is empty at revision 0. For the tests:
    /// connections read their workspace's published state instead.
    #[cfg(test)]
    pub async fn snapshot(&self, workspace: &WorkspaceName) -> RootsSnapshot {
        Stored::of(&self.committed.read().expect("committed"), workspace).snapshot()
    }

    /// The roots of `workspace` with their origins, for `roots.list`.
    pub async fn listing(&self, workspace: &WorkspaceName) -> RootsListing {
        let model = self.committed.read().expect("committed");
        let stored = model.workspaces.get(workspace);
        RootsListing {
            workspace: workspace.clone(),
            revision: stored.map_or(0, |w| w.revision),
            roots: stored
                .map(|w| {
                    w.roots
                        .iter()
                        .map(|r| ListedRoot {
                            root: Root::from(&**r),
                            origin: provenance::origins(r),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Resolves, through [`watch::Receiver::changed`], each time the totals or the session count
    /// may have changed. Bursts coalesce: a slow receiver sees one change, not each of them.
    pub fn subscribe_counts(&self) -> watch::Receiver<u64> {
        self.publisher.counts.subscribe()
    }

    fn counts_changed(&self) {
        self.publisher.counts_changed();
    }

    /// Store revision, total roots and workspace count.
    pub async fn totals(&self) -> (u64, usize, usize) {
        let model = self.committed.read().expect("committed");
        (model.revision, model.root_count(), model.workspaces.len())
    }

    pub async fn workspaces(&self) -> Vec<WorkspaceSummary> {
        let names: Vec<(WorkspaceName, usize)> = {
            let model = self.committed.read().expect("committed");
            model
                .workspaces
                .iter()
                .map(|(name, ws)| (name.clone(), ws.roots.len()))
                .collect()
        };
        let sessions = self.sessions.lock().expect("sessions lock");
        let mut summaries: BTreeMap<WorkspaceName, WorkspaceSummary> = names
            .into_iter()
            .map(|(name, roots)| {
                let summary = WorkspaceSummary {
                    name: name.clone(),
                    roots,
                    sessions: 0,
                };
                (name, summary)
            })
            .collect();
        for session in sessions.values() {
            summaries
                .entry(session.workspace.clone())
                .or_insert_with(|| WorkspaceSummary {
                    name: session.workspace.clone(),
                    roots: 0,
                    sessions: 0,
                })
                .sessions += 1;
        }
        summaries.into_values().collect()
    }

    /// Adds `roots` to `workspace`, renaming those that exist when a name is given. A new root
    /// without a name is named after its directory. `origin` is who asks, for the history.
    pub async fn add(
        &self,
        workspace: &WorkspaceName,
        roots: Vec<Root>,
        origin: Origin,
    ) -> Result<ChangeResult, RequestError> {
        self.awaited(|answer| self.add_answered(workspace, roots, origin, answer))
            .await
    }

    /// Removes the roots `targets` name. If any target matches nothing, or a name matches several
    /// roots, nothing is removed.
    pub async fn remove(
        &self,
        workspace: &WorkspaceName,
        targets: Vec<RemoveTarget>,
        origin: Origin,
    ) -> Result<ChangeResult, RequestError> {
        self.awaited(|answer| self.remove_answered(workspace, targets, origin, answer))
            .await
    }

    /// The recorded changes `params` asks for, newest first (`store::log`); only durable
    /// changes, like every read.
    pub fn log(&self, params: &LogParams) -> LogResult {
        store::log(&self.committed, params)
    }

    /// Decides a change with `plan` and waits until it (or, for a no-op, the state it found) is
    /// durable; then it is acknowledged.
    async fn commit<T>(
        &self,
        plan: impl FnOnce(&Contents) -> Result<Plan<T>, RequestError>,
    ) -> Result<T, RequestError> {
        let (result, ticket) = self.committer.write(self.bounded(plan))?;
        if let Some(ticket) = ticket {
            durable(ticket).await?;
        }
        Ok(result)
    }

    /// `plan`, refusing a change that would take its workspace past a bound
    /// ([`workspace_bounds`]). Every change a peer asks for is planned through this, whatever its
    /// source and however it is acknowledged.
    fn bounded<T>(
        &self,
        plan: impl FnOnce(&Contents) -> Result<Plan<T>, RequestError>,
    ) -> impl FnOnce(&Contents) -> Result<Plan<T>, RequestError> {
        move |pending| workspace_bounds::check(pending, plan(pending)?, &self.sizes)
    }

    /// Fills in how many sessions hear of a change that changed something.
    fn count_notified(&self, result: &mut ChangeResult) {
        if changed(result) {
            result.notified_sessions = self.notified(&result.workspace, result.revision);
        }
    }

    /// Subscribes to every change, for `watch`: the receiver wakes after each change (bursts
    /// coalesce), and [`Registry::changed_since`] says what changed. Returns the revision the
    /// subscription starts after.
    pub async fn subscribe_feed(&self) -> (u64, watch::Receiver<u64>) {
        // Subscribe first, then read the revision: the commit thread applies a change to the
        // committed state before publishing it, so a change that falls between the two is
        // either counted in the revision or wakes the receiver, never neither.
        let receiver = self.publisher.changes.subscribe();
        (self.committed.read().expect("committed").revision, receiver)
    }

    /// The newest state of each workspace (of `workspace` only, if given) that changed after
    /// store revision `after`, oldest change first. Changes are published in revision order
    /// on the commit thread, so what this returns never skips one that a later call would find.
    pub fn changed_since(
        &self,
        after: u64,
        workspace: Option<&WorkspaceName>,
    ) -> VecDeque<Arc<Published>> {
        let channels = self.publisher.channels.lock().expect("channels lock");
        let mut changed: Vec<Arc<Published>> = channels
            .iter()
            .filter(|(name, _)| workspace.is_none_or(|w| w == *name))
            .map(|(_, channel)| channel.newest.borrow().clone())
            .filter(|published| published.revision > after)
            .collect();
        changed.sort_by_key(|published| published.revision);
        changed.into()
    }

    /// Registers an MCP session and subscribes it to its workspace's snapshots, unless the
    /// table is full or `peer`'s user holds its share ([`session_bounds::admit`]). What the
    /// session reports is kept within its bounds.
    pub async fn register_session(
        &self,
        params: RegisterParams,
        peer: PeerV1,
    ) -> Result<Session<'_>, RequestError> {
        {
            let sessions = self.sessions.lock().expect("sessions lock");
            let our_uid = rustix::process::geteuid().as_raw();
            let privileged = |uid: u32| uid == our_uid || uid == 0;
            let of_uid = sessions.values().filter(|s| s.peer.uid == peer.uid).count();
            let of_others = sessions
                .values()
                .filter(|s| !privileged(s.peer.uid))
                .count();
            session_bounds::admit(
                peer.uid,
                privileged(peer.uid),
                sessions.len(),
                of_uid,
                of_others,
            )?;
        }
        let id = self.next_session_id.fetch_add(1, Ordering::Relaxed);
        let (snapshot, outbox) = {
            let model = self.committed.read().expect("committed");
            let mut channels = self.publisher.channels.lock().expect("channels lock");
            let channel = channels.entry(params.workspace.clone()).or_insert_with(|| {
                let state = Stored::of(&model, &params.workspace);
                Channel::new(Arc::new(self.publisher.published(state)))
            });
            // Under the channels lock, as publications are: every later state reaches this
            // outbox, and its registration answer shows this one.
            let current = channel.newest.borrow().clone();
            let outbox = Arc::new(Outbox::new(current.sequence));
            channel.outboxes.insert(id, outbox.clone());
            (current.snapshot(), outbox)
        };
        // An id, as long as its proxy likes: cut like the other texts a session reports.
        let instance = session_bounds::cut(params.instance, crate::limits::SESSION_TEXT_BYTES);
        if !instance.is_empty() {
            self.expected
                .lock()
                .expect("expected lock")
                .returned(&instance);
        }
        let record = SessionRecord {
            instance,
            label: session_bounds::label(params.label),
            pid: params.pid,
            workspace: params.workspace,
            last_fetch_unix: (params.state.fetches > 0).then(crate::clock::unix_secs),
            state: session_bounds::state(params.state),
            connected: Instant::now(),
            published: false,
            declined: BTreeSet::new(),
            peer,
        };
        self.sessions
            .lock()
            .expect("sessions lock")
            .insert(id, record);
        self.counts_changed();
        self.session_table_changed();
        // A session of the previous run coming back may be what a `wait` waits for.
        self.progress.notify_waiters();
        Ok(Session {
            registry: self,
            id,
            workspace: snapshot.workspace.clone(),
            snapshot,
            outbox,
        })
    }

    /// The sessions after id `after` (from the first if `None`), as many as fit in one answer,
    /// and whether more follow.
    pub fn sessions(&self, after: Option<u64>) -> (Vec<SessionInfo>, bool) {
        let (mut listed, more) = {
            let sessions = self.sessions.lock().expect("sessions lock");
            let from = after.map_or(0, |id| id.saturating_add(1));
            session_bounds::page(sessions.range(from..).map(|(id, s)| session_info(*id, s)))
        };
        let model = self.committed.read().expect("committed");
        for info in &mut listed {
            info.workspace_missing = !model.workspaces.contains_key(&info.workspace);
        }
        (listed, more)
    }

    /// The workspaces that exist, for a session of `workspace`, if that one does not: the
    /// session's proxy warns that its server gets no roots.
    pub fn unknown_workspace(&self, workspace: &WorkspaceName) -> Option<wire::UnknownWorkspace> {
        let model = self.committed.read().expect("committed");
        if model.workspaces.contains_key(workspace) {
            return None;
        }
        let names = model.workspaces.keys();
        let total = names.len();
        let existing: Vec<WorkspaceName> = names
            .take(wire::UnknownWorkspace::MAX_LISTED)
            .cloned()
            .collect();
        Some(wire::UnknownWorkspace {
            more: total - existing.len(),
            existing,
        })
    }

    pub fn session_count(&self) -> usize {
        self.sessions.lock().expect("sessions lock").len()
    }

    /// How many sessions of `workspace` are told about `revision` ([`session::notice`]).
    fn notified(&self, workspace: &WorkspaceName, revision: u64) -> usize {
        notified_in(
            &self.sessions.lock().expect("sessions lock"),
            workspace,
            revision,
        )
    }

    /// Where the notified sessions of `workspace` are with `revision`: those `wait` waits for
    /// ([`session::awaited`]) split into fetched and not yet, and those that fetch on use.
    pub fn fetch_progress(&self, workspace: &WorkspaceName, revision: u64) -> FetchProgress {
        let sessions = self.sessions.lock().expect("sessions lock");
        let mut progress = FetchProgress::default();
        for (id, s) in sessions.iter() {
            if &s.workspace != workspace || !session::told(&s.state, revision) {
                continue;
            }
            let info = session_info(*id, s);
            if !session::awaited(&s.state, revision) {
                progress.on_use.push(info);
            } else if session::caught_up(&s.state, revision) {
                progress.caught_up.push(info);
            } else {
                progress.lagging.push(info);
            }
        }
        progress
    }

    /// Resolves the next time any session reports a new state or goes away.
    pub fn progress(&self) -> &Notify {
        &self.progress
    }
}

/// The notified sessions of a workspace, by what they did with one revision.
#[derive(Debug, Default)]
pub struct FetchProgress {
    pub caught_up: Vec<SessionInfo>,
    pub lagging: Vec<SessionInfo>,
    /// Told, but they fetch only when they need roots: not waited for.
    pub on_use: Vec<SessionInfo>,
}

/// A registered session; unregisters itself when dropped.
pub struct Session<'a> {
    registry: &'a Registry,
    pub id: u64,
    workspace: WorkspaceName,
    /// The workspace's state when the session registered, for the registration's answer.
    pub snapshot: Arc<RootsSnapshot>,
    /// Where the workspace's later states go ([`fanout`]).
    pub outbox: Arc<Outbox>,
}

/// One state of a workspace as published to connections: its state as stored (shared with the
/// committed contents), and, made when the first connection needs them and then shared by all,
/// the wire snapshot and the `roots.changed` line that pushes it. Nothing is converted or
/// serialised for a change that no connection is shown.
pub struct Published {
    pub workspace: WorkspaceName,
    pub revision: u64,
    state: Arc<StoredWorkspaceV1>,
    /// Increases with every state published, in any workspace ([`Publisher::published`]).
    sequence: u64,
    snapshot: OnceLock<Arc<RootsSnapshot>>,
    line: OnceLock<Arc<str>>,
}

/// A workspace's state as the committed contents hold it, to publish.
struct Stored {
    workspace: WorkspaceName,
    state: Arc<StoredWorkspaceV1>,
}

impl Stored {
    /// `workspace` in `model`; an unknown workspace is empty at revision 0.
    fn of(model: &Contents, workspace: &WorkspaceName) -> Self {
        Self {
            workspace: workspace.clone(),
            state: model.workspaces.get(workspace).cloned().unwrap_or_default(),
        }
    }

    #[cfg(test)]
    fn snapshot(&self) -> RootsSnapshot {
        snapshot_of(&self.workspace, &self.state)
    }
}

impl Published {
    /// The state as the wire shows it.
    pub fn snapshot(&self) -> Arc<RootsSnapshot> {
        self.snapshot
            .get_or_init(|| Arc::new(snapshot_of(&self.workspace, &self.state)))
            .clone()
    }

    /// The `roots.changed` notification for this state, newline included.
    pub fn line(&self) -> Arc<str> {
        self.line
            .get_or_init(|| wire::Notification::line::<wire::RootsChanged>(&self.snapshot()).into())
            .clone()
    }
}

impl Session<'_> {
    /// Replaces what the daemon holds about this session with the proxy's latest report.
    pub fn update(&self, state: SessionState) {
        self.with_record(|record| {
            if state.fetches > record.state.fetches {
                record.last_fetch_unix = Some(crate::clock::unix_secs());
            }
            record.state = session_bounds::state(state);
        });
        self.registry.progress.notify_waiters();
    }

    fn with_record(&self, change: impl FnOnce(&mut SessionRecord)) {
        let mut sessions = self.registry.sessions.lock().expect("sessions lock");
        if let Some(record) = sessions.get_mut(&self.id) {
            change(record);
        }
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.outbox.close();
        let mut channels = self
            .registry
            .publisher
            .channels
            .lock()
            .expect("channels lock");
        if let Some(channel) = channels.get_mut(&self.workspace) {
            channel.outboxes.remove(&self.id);
        }
        drop(channels);
        let record = self
            .registry
            .sessions
            .lock()
            .expect("sessions lock")
            .remove(&self.id);
        if let Some(record) = record.filter(|r| r.published) {
            self.registry.withdraw(self.id, &record);
        }
        self.registry.progress.notify_waiters();
        self.registry.counts_changed();
        self.registry.session_table_changed();
    }
}

/// The fan-out thread stops with the registry (it holds the publisher, which holds it).
impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(fanout) = self.publisher.fanout.get() {
            fanout.stop();
        }
    }
}

/// What the commit thread said of a change: `T` once it is durable, or why it is not.
async fn durable<T>(told: oneshot::Receiver<Result<T, StoreError>>) -> Result<T, RequestError> {
    match told.await {
        Ok(outcome) => Ok(outcome?),
        Err(_) => Err(StoreError::Damaged(
            "the commit thread stopped before the change was durable".to_owned(),
        )
        .into()),
    }
}

/// How many of `sessions` belong to `workspace` and are told about `revision`.
fn notified_in(
    sessions: &BTreeMap<u64, SessionRecord>,
    workspace: &WorkspaceName,
    revision: u64,
) -> usize {
    sessions
        .values()
        .filter(|s| &s.workspace == workspace && session::told(&s.state, revision))
        .count()
}

/// The roots of an add, each made canonical once: its name (none if empty), URI and path.
fn canonical_roots(roots: Vec<Root>) -> Result<Vec<CanonicalRoot>, RequestError> {
    let mut canonical: Vec<CanonicalRoot> = Vec::with_capacity(roots.len());
    for root in roots {
        let uri = rootsd_proto::root::canonical_owned(root.uri)?;
        let name = root.name.filter(|n| !n.is_empty());
        // One root mentioned twice (`rootsctl add a a/`) is one change, reported once; the
        // last name given for it wins, as if the mentions had been separate adds.
        match canonical.iter_mut().find(|(_, u)| *u == uri) {
            Some(earlier) => earlier.0 = name.or(earlier.0.take()),
            None => canonical.push((name, uri)),
        }
    }
    Ok(canonical)
}

/// A root of an add as [`plan::plan_add`] takes it: its name and canonical URI.
type CanonicalRoot = (Option<String>, String);

/// Whether a change result reports a change of the workspace.
fn changed(result: &ChangeResult) -> bool {
    !(result.added.is_empty()
        && result.renamed.is_empty()
        && result.removed.is_empty()
        && result.adopted.is_empty())
}

/// Counts a connected client for `status` until dropped.
pub struct ClientGuard<'a>(&'a Registry);

impl Drop for ClientGuard<'_> {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

fn snapshot_of(workspace: &WorkspaceName, state: &StoredWorkspaceV1) -> RootsSnapshot {
    RootsSnapshot {
        workspace: workspace.clone(),
        revision: state.revision,
        roots: state.roots.iter().map(|r| Root::from(&**r)).collect(),
    }
}

fn session_info(id: u64, s: &SessionRecord) -> SessionInfo {
    SessionInfo {
        id,
        label: s.label.clone(),
        pid: s.pid,
        workspace: s.workspace.clone(),
        // Filled in by whoever lists sessions, from the committed state.
        workspace_missing: false,
        list_changed: s.state.list_changed,
        era: s.state.era,
        server: s.state.server.clone(),
        protocol_version: s.state.protocol_version.clone(),
        last_fetch_unix: s.last_fetch_unix,
        fetched_revision: s.state.fetched_revision,
        notifications_sent: s.state.notifications_sent,
        fetch_behaviour: s.state.fetch_behaviour,
        withheld: s.state.withheld.clone(),
        host_roots: s.state.host_roots.clone(),
        workspace_via: s.state.workspace_via(),
        restarts: s.state.launch.restarts,
        launch_failure: s.state.launch.failure.clone(),
        connected_secs: s.connected.elapsed().as_secs(),
    }
}

mod answering;
mod fanout;
mod plan;
mod publish;
mod reconnecting;
#[cfg(test)]
mod tests;
