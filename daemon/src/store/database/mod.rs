//! The database: the only module that knows sled exists.
//!
//! sled 0.34 is effectively unmaintained, so it stays behind this small API and could be replaced
//! without touching anything else. Everything lives in one tree, so every change is one atomic
//! batch. Durability is the journal's job ([`crate::store::journal`]): a change is applied here after
//! it is acknowledged, and [`Store::checkpoint`] makes the database itself durable now and then
//! (sled's flush, then `fdatasync` of its files and directory, since sled's own flush uses
//! `sync_file_range`, which leaves the drive's cache and the file's metadata behind).
//!
//! Layout (one tree, `rootsd`):
//!
//! | key | value |
//! |---|---|
//! | `m/schema` | schema version, `u32` big-endian |
//! | `m/revision` | store revision, `u64` big-endian |
//! | `m/journaled` | present (empty) once a rootsd that keeps a journal has used the database: such a database without its journal is damage, not an earlier rootsd's store to migrate |
//! | `w/<workspace>` | JSON header of the workspace: `{"revision":…,"roots":…,"next":…}`, its store revision, how many roots its buckets hold, and the sequence number its next root gets |
//! | `r/<workspace>/<bucket>` | JSON array of `[sequence number, root]` pairs (roots as [`crate::store::model::StoredRootV1`]): the workspace's roots whose URI's FNV-1a hash modulo 4,096 is `bucket` (`u16` big-endian), in sequence order |
//! | `h/<slot>` | JSON [`HistoryEntryV1`] of the change that made store revision `revision`, where `slot` is `revision` modulo [`HISTORY_ENTRIES`] (`u32` big-endian) |
//!
//! The history is a ring of [`HISTORY_ENTRIES`] keys, each change overwriting the entry that
//! drops out of the window: sled 0.34 can deadlock (a file truncation queued behind I/O that
//! waits for the truncation) under a stream of inserts of new keys and removals of old ones,
//! which is what keys by revision made of the history (3 hangs in 12 runs of 20,000 changes;
//! none in 12 with the ring, as with the workspaces' keys, which are overwritten in place too).
//! History entries were added without a schema change: a database written before them simply
//! has none.
//!
//! A workspace is a header and its roots spread over up to 4,096 bucket keys ([`layout`]), so
//! that a change rewrites the buckets of the roots it changed and the header, in proportion to
//! the change: schema 1 stored a workspace as one JSON [`StoredWorkspaceV1`] under `w/`,
//! rewritten whole by every change (141 KB a rename at 2,000 roots, and the CPU to encode it on
//! the commit thread). Which buckets a change touched is found without reading the database or
//! the previous state, by walking the new state against an in-memory [`mirror`] of what is
//! stored. Bucket keys are created as roots first need them and then overwritten in place, an
//! emptied bucket holding an empty array, for the same reason as the ring. The roots' order is
//! their sequence numbers' (buckets scatter them), and the header says how many roots there are
//! and which numbers were given out, so that a lost, extra or misfiled root is damage
//! ([`StoreError::Corrupt`], naming the key), never a workspace served short. A schema-1
//! database is migrated when opened, in one batch, then checkpointed.
//!
//! The stored types are separate from the wire types on purpose: the wire may grow without
//! forcing a migration, and a migration never changes the wire.
//!
//! sled panics on some failures instead of returning them: a damaged file can make its page
//! cache panic while opening or reading ("tried to serialize Uninitialized"), and dropping the
//! last handle panics if its final `fsync` fails. Every call into sled here, the drop of the
//! handles included, runs under [`guarded`], which turns a panic into
//! [`StoreError::Panicked`], so that a failure in sled is an error like any other for the
//! commit thread and for start-up, never the end of the thread that made the call.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rootsd_proto::WorkspaceName;

use crate::limits::HISTORY_ENTRIES;
use crate::store::model::{Change, Contents, HistoryEntryV1, StoredWorkspaceV1};

mod behind;
mod layout;
mod mirror;

pub use behind::Behind;

use layout::{BUCKET_PREFIX, HeaderV2, WORKSPACE_PREFIX};
use mirror::{Assembly, Mirror, Writes};

const SCHEMA_KEY: &[u8] = b"m/schema";
const REVISION_KEY: &[u8] = b"m/revision";
const JOURNALED_KEY: &[u8] = b"m/journaled";
const HISTORY_PREFIX: &[u8] = b"h/";
/// How long sled may take to let go of a database's lock after its last handle is dropped
/// (it releases it from a background thread): longer is a lock someone else holds.
const RELEASE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);
/// The schema this rootsd reads and writes.
pub(crate) const SCHEMA_VERSION: u32 = 2;
/// The schema before workspaces were split into buckets: migrated when opened.
const SCHEMA_WHOLE_WORKSPACES: u32 = 1;

/// Failures of the store, defined here beside sled's opaque error they wrap. Messages read after "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("failed to open the database at {path}: {error}")]
    Open { path: String, error: DbError },
    #[error("failed to read or write the database: {0}")]
    Db(#[from] DbError),
    #[error(
        "the database has schema version {found}, but this rootsd understands only versions 1 to {}: run a newer rootsd",
        SCHEMA_VERSION
    )]
    UnknownSchema { found: u32 },
    #[error("the database holds a corrupt record under {key:?}: {reason}")]
    Corrupt { key: String, reason: String },
    #[error("failed to {action} {path}: {error}")]
    Sync {
        action: &'static str,
        path: String,
        error: std::io::Error,
    },
    #[error("failed to {action} the journal {path}: {error}")]
    Journal {
        action: &'static str,
        path: String,
        error: std::io::Error,
    },
    /// sled panicked inside a call (see `guarded`): the handle is treated as failed.
    #[error("the database failed: sled panicked while {during} ({message})")]
    Panicked {
        during: &'static str,
        message: String,
    },
    /// The database and the journal disagree, or one of them is damaged: nothing is served.
    #[error("{0}")]
    Damaged(String),
}

/// sled's own error, kept opaque so that no module but this one names sled.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct DbError(#[from] sled::Error);

impl From<sled::Error> for StoreError {
    fn from(error: sled::Error) -> Self {
        Self::Db(DbError(error))
    }
}

/// The open database.
pub struct Store {
    /// `None` only while the store is being dropped.
    handles: Option<Handles>,
    dir: PathBuf,
    /// Whether the database had no schema when it was opened: new, or emptied.
    fresh: bool,
    /// What the database holds of the roots, once a load or a rewrite has said; `None` before,
    /// and after a batch failed, when [`Store::apply`] reads it from the database again.
    mirror: Mutex<Option<Mirror>>,
}

struct Handles {
    db: sled::Db,
    tree: sled::Tree,
}

/// Runs `call`, a call into sled, turning a panic inside it into [`StoreError::Panicked`].
///
/// sled's state after such a panic is unknown: callers treat the handle as failed (the commit
/// thread reopens the database and rewrites it from the committed state; start-up refuses the
/// store, naming `--recover`).
fn guarded<T>(
    during: &'static str,
    call: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    catch_unwind(AssertUnwindSafe(call)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        tracing::error!(during, message, "sled panicked; the call failed");
        Err(StoreError::Panicked { during, message })
    })
}

impl Drop for Store {
    fn drop(&mut self) {
        // sled flushes and fsyncs as its last handle goes, and panics if that fails: the journal
        // holds everything, so such a failure is logged and the thread dropping the store goes on.
        if let Some(handles) = self.handles.take() {
            let _ = guarded("closing the database", move || {
                drop(handles);
                Ok(())
            });
        }
    }
}

impl Store {
    fn tree(&self) -> &sled::Tree {
        &self.handles.as_ref().expect("handles live until drop").tree
    }

    /// Opens (creating if needed) the database in `dir`.
    ///
    /// sled takes an exclusive lock on the directory, so the daemon must hold its own instance
    /// lock first to report a second instance clearly.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let existed = dir.join("db").exists();
        let handles = guarded("opening the database", || {
            let db = sled::Config::new()
                .path(dir)
                .cache_capacity(8 << 20)
                // Durability is the journal's, and checkpoints are the commit thread's: sled's
                // own timed flush would only compete with the journal's syncs for the disk.
                .flush_every_ms(None)
                .open()
                .map_err(|error| StoreError::Open {
                    path: dir.display().to_string(),
                    error: DbError(error),
                })?;
            let tree = db.open_tree("rootsd")?;
            Ok(Handles { db, tree })
        })?;
        let mut store = Self {
            handles: Some(handles),
            dir: dir.to_owned(),
            fresh: false,
            mirror: Mutex::new(None),
        };
        let found = store.check_schema()?;
        store.fresh = found == Schema::Fresh;
        if !existed || found == Schema::Migrated {
            // sled created the directory and its files, or a migration rewrote the roots: make
            // them durable now (the journal holds changes, not a migration).
            store.checkpoint()?;
        }
        Ok(store)
    }

    /// Whether the database held nothing, not even its schema, when it was opened: a new
    /// database, or one whose contents were lost.
    pub fn was_fresh(&self) -> bool {
        self.fresh
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Opens like [`Store::open`], waiting up to [`RELEASE_PATIENCE`] for an earlier handle's
    /// lock to go ([`Store::reopen`]): what start-up, recovery and the commit thread use.
    pub fn reopen_released(dir: &Path) -> Result<Self, StoreError> {
        Self::reopen(dir, RELEASE_PATIENCE)
    }

    /// Opens like [`Store::open`], but waits up to `patience` for a previous `Store` of this
    /// process to let go of the directory: sled releases its lock from a background thread some
    /// time after the last handle is dropped. For restarting a store in-process, as tests do.
    pub fn reopen(dir: &Path, patience: std::time::Duration) -> Result<Self, StoreError> {
        let deadline = std::time::Instant::now() + patience;
        loop {
            match Self::open(dir) {
                Err(StoreError::Open { .. })
                    if is_locked(dir) && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                other => return other,
            }
        }
    }

    /// Bytes the database's files take on disk.
    pub fn disk_bytes(&self) -> u64 {
        disk_bytes(&self.dir)
    }

    /// Writes `contents` into a fresh database beside this one (`<dir>.compacting`), then swaps
    /// the two directories in one `renameat2(RENAME_EXCHANGE)` and removes the old one: sled
    /// keeps the space of every value it ever rewrote (a database of 0.1 MiB of roots grew past
    /// 100 MiB), and this is how it is given back. A crash before the swap leaves the old
    /// database, after it the new one (checkpointed at `contents.revision`, which is no older
    /// than what the journal says was checkpointed); [`remove_leftovers`] clears the rest.
    pub fn rebuild(self, contents: &Contents) -> Result<Self, StoreError> {
        let dir = self.dir.clone();
        let fresh = compacting_dir(&dir);
        let io = |action: &'static str, path: &Path| {
            let path = path.display().to_string();
            move |error: std::io::Error| StoreError::Sync {
                action,
                path,
                error,
            }
        };
        remove_leftovers(&dir);
        // The rebuilt database's mirror goes with it, so that the next change is not preceded
        // by a load of the whole database.
        let mirror = {
            let built = Self::open(&fresh)?;
            built.replace_all(contents)?;
            built.mirror().take()
        };
        wait_until_released(&fresh);
        drop(self);
        wait_until_released(&dir);
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            &fresh,
            rustix::fs::CWD,
            &dir,
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .map_err(|error| io("swap in the rebuilt database at", &dir)(error.into()))?;
        let parent = dir.parent().unwrap_or(Path::new("."));
        std::fs::File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(io("sync", parent))?;
        remove_leftovers(&dir);
        let reopened = Self::reopen_released(&dir)?;
        *reopened.mirror() = mirror;
        Ok(reopened)
    }

    /// Checks the schema, writing it into a database that has none and migrating one of
    /// schema 1.
    fn check_schema(&self) -> Result<Schema, StoreError> {
        let found = guarded("reading the schema", || Ok(self.tree().get(SCHEMA_KEY)?))?;
        match found {
            None => {
                guarded("writing the schema", || {
                    self.tree()
                        .insert(SCHEMA_KEY, &SCHEMA_VERSION.to_be_bytes())?;
                    Ok(())
                })?;
                Ok(Schema::Fresh)
            }
            Some(bytes) => {
                let found = <[u8; 4]>::try_from(bytes.as_ref())
                    .map(u32::from_be_bytes)
                    .map_err(|_| StoreError::Corrupt {
                        key: "m/schema".into(),
                        reason: format!("expected 4 bytes, found {}", bytes.len()),
                    })?;
                match found {
                    SCHEMA_VERSION => Ok(Schema::Current),
                    SCHEMA_WHOLE_WORKSPACES => {
                        guarded("migrating the database", || self.migrate_from_whole())?;
                        tracing::info!(from = found, to = SCHEMA_VERSION, "migrated the database");
                        Ok(Schema::Migrated)
                    }
                    _ => Err(StoreError::UnknownSchema { found }),
                }
            }
        }
    }

    /// Calls `visit` with every `w/` record: its workspace's name, its value, and what names the
    /// record as damaged.
    fn for_each_workspace(
        &self,
        mut visit: impl FnMut(
            WorkspaceName,
            &[u8],
            &dyn Fn(String) -> StoreError,
        ) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        for item in self.tree().scan_prefix(WORKSPACE_PREFIX) {
            let (key, value) = item?;
            let key_text = String::from_utf8_lossy(&key).into_owned();
            let corrupt = |reason: String| StoreError::Corrupt {
                key: key_text.clone(),
                reason,
            };
            let name = workspace_name(&key).map_err(corrupt)?;
            visit(name, &value, &corrupt)?;
        }
        Ok(())
    }

    /// Rewrites a schema-1 database's workspaces (each one JSON [`StoredWorkspaceV1`] under
    /// `w/`) as headers and buckets, with the new schema, in one atomic batch: a crash leaves
    /// either the old database or the new one. A record that does not parse is refused as
    /// damage, and the database is left as it was.
    fn migrate_from_whole(&self) -> Result<(), StoreError> {
        let mut workspaces = BTreeMap::new();
        self.for_each_workspace(|name, value, corrupt| {
            let workspace: StoredWorkspaceV1 =
                serde_json::from_slice(value).map_err(|e| corrupt(e.to_string()))?;
            let mut uris = HashSet::with_capacity(workspace.roots.len());
            if let Some(twice) = workspace.roots.iter().find(|r| !uris.insert(&r.uri)) {
                return Err(corrupt(format!("root {} is stored twice", twice.uri)));
            }
            workspaces.insert(name, workspace);
            Ok(())
        })?;
        let (_, writes) = Mirror::of(&workspaces);
        let mut batch = sled::Batch::default();
        for (key, value) in writes {
            batch.insert(key, value);
        }
        batch.insert(SCHEMA_KEY, &SCHEMA_VERSION.to_be_bytes());
        self.tree().apply_batch(batch)?;
        Ok(())
    }

    fn mirror(&self) -> MutexGuard<'_, Option<Mirror>> {
        self.mirror.lock().unwrap_or_else(|poisoned| {
            // A panic while the mirror was being moved on may have left it half-way: it goes,
            // and the next apply reads it from the database again.
            let mut mirror = poisoned.into_inner();
            *mirror = None;
            self.mirror.clear_poison();
            mirror
        })
    }

    /// Whether a rootsd that keeps a journal has used this database ([`Store::mark_journaled`]),
    /// or its history says so (only such a rootsd keeps one).
    pub fn journaled(&self) -> Result<bool, StoreError> {
        guarded("reading the database", || {
            Ok(self.tree().get(JOURNALED_KEY)?.is_some()
                || self.tree().scan_prefix(HISTORY_PREFIX).next().is_some())
        })
    }

    /// Records that this database is kept with a journal. Durable at the next checkpoint.
    pub fn mark_journaled(&self) -> Result<(), StoreError> {
        guarded("writing to the database", || {
            self.tree().insert(JOURNALED_KEY, b"".as_slice())?;
            Ok(())
        })
    }

    /// Reads the whole store.
    pub fn load(&self) -> Result<Contents, StoreError> {
        let (contents, mirror) = guarded("reading the database", || self.load_unguarded())?;
        *self.mirror() = Some(mirror);
        Ok(contents)
    }

    fn load_unguarded(&self) -> Result<(Contents, Mirror), StoreError> {
        let revision = match self.tree().get(REVISION_KEY)? {
            None => 0,
            Some(bytes) => <[u8; 8]>::try_from(bytes.as_ref())
                .map(u64::from_be_bytes)
                .map_err(|_| StoreError::Corrupt {
                    key: "m/revision".into(),
                    reason: format!("expected 8 bytes, found {}", bytes.len()),
                })?,
        };
        let mut assembly = Assembly::default();
        self.for_each_workspace(|name, value, corrupt| {
            let header: HeaderV2 = serde_json::from_slice(value)
                .map_err(|e| corrupt(format!("the workspace's header does not parse: {e}")))?;
            assembly.header(name, header);
            Ok(())
        })?;
        for item in self.tree().scan_prefix(BUCKET_PREFIX) {
            let (key, value) = item?;
            let key_text = layout::describe_key(&key);
            let corrupt = |reason: String| StoreError::Corrupt {
                key: key_text.clone(),
                reason,
            };
            let (name, bucket) = layout::parse_bucket_key(&key).ok_or_else(|| {
                corrupt(format!(
                    "a bucket's key is r/<workspace>/ and a bucket below {} as u16 big-endian",
                    layout::BUCKETS
                ))
            })?;
            let roots = layout::decode_bucket(&value)
                .map_err(|e| corrupt(format!("the bucket does not parse: {e}")))?;
            assembly.bucket(&key_text, name, bucket, roots)?;
        }
        let (workspaces, mirror) = assembly.finish()?;
        let mut history = Vec::new();
        for item in self.tree().scan_prefix(HISTORY_PREFIX) {
            let (key, value) = item?;
            let key_text = format!("{key:?}");
            let corrupt = |reason: String| StoreError::Corrupt {
                key: key_text.clone(),
                reason,
            };
            let slot = <[u8; 4]>::try_from(&key[HISTORY_PREFIX.len()..])
                .map(u32::from_be_bytes)
                .map_err(|_| corrupt("a history key holds a 4-byte slot".to_owned()))?;
            let entry: HistoryEntryV1 =
                serde_json::from_slice(&value).map_err(|e| corrupt(e.to_string()))?;
            if slot_of(entry.revision) != slot {
                return Err(corrupt(format!(
                    "the entry is of revision {}, which belongs in another slot",
                    entry.revision
                )));
            }
            history.push(entry);
        }
        // Slots wrap around; the entries' own revisions give their order. An entry the window
        // should have dropped is kept here, so that the comparison with the journal at start
        // finds it.
        history.sort_by_key(|entry| entry.revision);
        let history = VecDeque::from(history);
        let contents = Contents {
            revision,
            workspaces,
            history,
        };
        Ok((contents, mirror))
    }

    /// Applies `changes`, in order, as one atomic batch, with their history entries from
    /// `after` (the contents once they are applied), each in the slot of the entry it pushes
    /// out of the window. Durable only after a checkpoint: the journal holds them until then.
    pub fn apply(&self, changes: &[Change], after: &Contents) -> Result<(), StoreError> {
        self.catch_up(&changes.iter().cloned().collect(), after)
    }

    /// Applies the changes `behind` as [`Store::apply`] does: each workspace as its last change
    /// left it, and the history entries of every revision behind.
    pub fn catch_up(&self, behind: &Behind, after: &Contents) -> Result<(), StoreError> {
        let mut mirror = self.mirror();
        let writes = self.writes_of(&mut mirror, behind, after)?;
        self.write_batch(&mut mirror, writes)
    }

    /// The keys and values that apply `behind` (see [`Store::catch_up`]), with the mirror moved
    /// on to them; read from the database first if no load or rewrite has built it yet.
    fn writes_of(
        &self,
        mirror: &mut Option<Mirror>,
        behind: &Behind,
        after: &Contents,
    ) -> Result<Writes, StoreError> {
        let Some((first, last)) = behind.span() else {
            return Ok(Writes::new());
        };
        let mirror = match mirror {
            Some(mirror) => mirror,
            None => {
                let (_, read) = guarded("reading the database", || self.load_unguarded())?;
                mirror.insert(read)
            }
        };
        let mut writes = Writes::new();
        // Each workspace is written once, as the last change behind left it: a burst of
        // changes to one workspace writes each bucket it touched once.
        for change in behind.latest() {
            mirror.write(&change.workspace, &change.state, &mut writes);
        }
        writes.push((REVISION_KEY.to_vec(), last.to_be_bytes().to_vec()));
        let new = after
            .history
            .iter()
            .rev()
            .take_while(|entry| entry.revision >= first);
        for entry in new {
            writes.push((history_key(entry.revision), encode_entry(entry)));
        }
        Ok(writes)
    }

    /// Writes `writes` as one atomic batch. If that fails, the database may not hold what the
    /// mirror says, so the mirror goes, to be read again by the next [`Store::apply`].
    fn write_batch(&self, mirror: &mut Option<Mirror>, writes: Writes) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        let mut batch = sled::Batch::default();
        for (key, value) in writes {
            batch.insert(key, value);
        }
        let written = guarded("applying changes to the database", || {
            Ok(self.tree().apply_batch(batch)?)
        });
        if written.is_err() {
            *mirror = None;
        }
        written
    }

    /// Makes the database hold exactly `contents`, as one atomic batch, and checkpoints it.
    pub fn replace_all(&self, contents: &Contents) -> Result<(), StoreError> {
        let mut mirror = self.mirror();
        // Until the batch is in, the database holds neither the old mirror's state for sure
        // nor the new one's.
        *mirror = None;
        let built = guarded("rewriting the database", || {
            self.replace_all_unguarded(contents)
        })?;
        *mirror = Some(built);
        drop(mirror);
        self.checkpoint()
    }

    fn replace_all_unguarded(&self, contents: &Contents) -> Result<Mirror, StoreError> {
        let (mirror, mut writes) = Mirror::of(
            contents
                .workspaces
                .iter()
                .map(|(name, workspace)| (name, &**workspace)),
        );
        for entry in &contents.history {
            writes.push((history_key(entry.revision), encode_entry(entry)));
        }
        let mut batch = sled::Batch::default();
        // Only keys the new contents do not overwrite are removed: fewer removals beside the
        // inserts (see the module doc on sled's deadlock), and fewer bytes.
        let kept: HashSet<&[u8]> = writes.iter().map(|(key, _)| key.as_slice()).collect();
        for prefix in [WORKSPACE_PREFIX, BUCKET_PREFIX, HISTORY_PREFIX] {
            for item in self.tree().scan_prefix(prefix) {
                let (key, _) = item?;
                if !kept.contains(key.as_ref()) {
                    batch.remove(key);
                }
            }
        }
        for (key, value) in writes {
            batch.insert(key, value);
        }
        batch.insert(REVISION_KEY, &contents.revision.to_be_bytes());
        batch.insert(SCHEMA_KEY, &SCHEMA_VERSION.to_be_bytes());
        batch.insert(JOURNALED_KEY, b"".as_slice());
        self.tree().apply_batch(batch)?;
        Ok(mirror)
    }

    /// Makes everything applied so far durable: sled's flush, then `fdatasync` of every file in
    /// the database directory and `fsync` of the directory. Blocking; call it off the runtime.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        guarded("flushing the database", || {
            self.handles
                .as_ref()
                .expect("handles live until drop")
                .db
                .flush()?;
            Ok(())
        })?;
        let io = |action: &'static str, path: &Path| {
            let path = path.display().to_string();
            move |error| StoreError::Sync {
                action,
                path,
                error,
            }
        };
        for entry in std::fs::read_dir(&self.dir).map_err(io("list", &self.dir))? {
            let path = entry.map_err(io("list", &self.dir))?.path();
            if path.is_file() {
                std::fs::File::open(&path)
                    .and_then(|f| f.sync_data())
                    .map_err(io("sync", &path))?;
            }
        }
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io("sync", &self.dir))?;
        Ok(())
    }
}

/// What [`Store::check_schema`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Schema {
    /// No schema: a new database, or one whose contents were lost. It has this rootsd's now.
    Fresh,
    Current,
    /// Schema 1, now migrated to this rootsd's.
    Migrated,
}

/// The workspace named by a key under [`WORKSPACE_PREFIX`], or why it names none.
fn workspace_name(key: &[u8]) -> Result<WorkspaceName, String> {
    let name = std::str::from_utf8(&key[WORKSPACE_PREFIX.len()..]).map_err(|e| e.to_string())?;
    WorkspaceName::new(name).map_err(|e| e.to_string())
}

/// The ring slot of the history entry of `revision`.
fn slot_of(revision: u64) -> u32 {
    (revision % HISTORY_ENTRIES as u64) as u32
}

fn history_key(revision: u64) -> Vec<u8> {
    let mut key = HISTORY_PREFIX.to_vec();
    key.extend_from_slice(&slot_of(revision).to_be_bytes());
    key
}

fn encode_entry(entry: &HistoryEntryV1) -> Vec<u8> {
    serde_json::to_vec(entry).expect("stored types always serialise")
}

/// Where [`Store::rebuild`] builds the new database.
fn compacting_dir(dir: &Path) -> PathBuf {
    dir.with_extension("compacting")
}

/// Removes what an interrupted [`Store::rebuild`] left beside the database in `dir`.
pub fn remove_leftovers(dir: &Path) {
    let _ = std::fs::remove_dir_all(compacting_dir(dir));
}

/// Bytes the files under `dir` take on disk.
pub fn disk_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_bytes(&entry.path()),
            Ok(meta) => meta.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// sled releases its directory lock from a background thread after the last handle goes.
fn wait_until_released(dir: &Path) {
    let deadline = std::time::Instant::now() + RELEASE_PATIENCE;
    while is_locked(dir) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Whether another handle holds the database's lock. sled takes `flock(LOCK_EX | LOCK_NB)` on
/// `<dir>/db` and reports a failure only as text, so the lock is probed with the same call
/// instead. `flock` locks belong to an open file, so the probe conflicts with sled's lock even
/// within this process; the probe's own lock goes with its file at the end of this function.
pub(crate) fn is_locked(dir: &Path) -> bool {
    use rustix::fs::{FlockOperation, flock};
    std::fs::File::open(dir.join("db")).is_ok_and(|file| {
        flock(&file, FlockOperation::NonBlockingLockExclusive) == Err(rustix::io::Errno::WOULDBLOCK)
    })
}

/// Runs `use_tree` on the tree of the database in `dir`, opened by sled alone (no schema check,
/// no migration), then flushes and closes it: how the tests write databases of schemas this
/// rootsd no longer writes, and look at one a failed open left behind.
#[cfg(test)]
fn with_raw_tree<T>(dir: &Path, use_tree: impl FnOnce(&sled::Tree) -> T) -> T {
    let db = sled::Config::new()
        .path(dir)
        .open()
        .expect("open the raw database");
    let tree = db.open_tree("rootsd").expect("open the raw tree");
    let result = use_tree(&tree);
    db.flush().expect("flush the raw database");
    drop(tree);
    drop(db);
    wait_until_released(dir);
    result
}

#[cfg(test)]
mod tests;
