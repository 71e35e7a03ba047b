//! Persistence: the only module that knows sled exists.
//!
//! sled 0.34 is effectively unmaintained, so it stays behind this small API and could be replaced
//! without touching anything else. Everything lives in one tree, so every change is one atomic
//! batch, and every change is flushed to disk before [`Store::commit`] returns: the daemon
//! acknowledges nothing that a crash could take back.
//!
//! Layout (one tree, `rootsd`):
//!
//! | key | value |
//! |---|---|
//! | `m/schema` | schema version, `u32` big-endian |
//! | `m/revision` | store revision, `u64` big-endian |
//! | `w/<workspace>` | JSON [`StoredWorkspaceV1`] |
//!
//! The stored types are separate from the wire types on purpose: the wire may grow without
//! forcing a migration, and a migration never changes the wire.

use std::collections::BTreeMap;
use std::path::Path;

use rootsd_proto::{Root, WorkspaceName};
use serde::{Deserialize, Serialize};

const SCHEMA_KEY: &[u8] = b"m/schema";
const REVISION_KEY: &[u8] = b"m/revision";
const WORKSPACE_PREFIX: &[u8] = b"w/";
/// The schema this rootsd reads and writes.
pub(crate) const SCHEMA_VERSION: u32 = 1;

pub use crate::error::StoreError;

/// sled's own error, kept opaque so that no module but this one names sled.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct DbError(#[from] sled::Error);

impl From<sled::Error> for StoreError {
    fn from(error: sled::Error) -> Self {
        Self::Db(DbError(error))
    }
}

/// One workspace as stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredWorkspaceV1 {
    /// The store revision of the last change to this workspace.
    pub revision: u64,
    pub roots: Vec<StoredRootV1>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRootV1 {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Everything in the store, as loaded at start-up.
#[derive(Clone, Debug, Default)]
pub struct Contents {
    pub revision: u64,
    pub workspaces: BTreeMap<WorkspaceName, StoredWorkspaceV1>,
}

/// The open database.
#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    tree: sled::Tree,
}

impl Store {
    /// Opens (creating if needed) the database in `dir`.
    ///
    /// sled takes an exclusive lock on the directory, so the daemon must hold its own instance
    /// lock first to report a second instance clearly.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(8 << 20)
            .flush_every_ms(Some(1000))
            .open()
            .map_err(|error| StoreError::Open {
                path: dir.display().to_string(),
                error: DbError(error),
            })?;
        let tree = db.open_tree("rootsd")?;
        let store = Self { db, tree };
        store.check_schema()?;
        Ok(store)
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

    fn check_schema(&self) -> Result<(), StoreError> {
        match self.tree.get(SCHEMA_KEY)? {
            None => {
                self.tree
                    .insert(SCHEMA_KEY, &SCHEMA_VERSION.to_be_bytes())?;
                self.tree.flush()?;
                Ok(())
            }
            Some(bytes) => {
                let found = <[u8; 4]>::try_from(bytes.as_ref())
                    .map(u32::from_be_bytes)
                    .map_err(|_| StoreError::Corrupt {
                        key: "m/schema".into(),
                        reason: format!("expected 4 bytes, found {}", bytes.len()),
                    })?;
                if found == SCHEMA_VERSION {
                    Ok(())
                } else {
                    Err(StoreError::UnknownSchema { found })
                }
            }
        }
    }

    /// Reads the whole store.
    pub fn load(&self) -> Result<Contents, StoreError> {
        let revision = match self.tree.get(REVISION_KEY)? {
            None => 0,
            Some(bytes) => <[u8; 8]>::try_from(bytes.as_ref())
                .map(u64::from_be_bytes)
                .map_err(|_| StoreError::Corrupt {
                    key: "m/revision".into(),
                    reason: format!("expected 8 bytes, found {}", bytes.len()),
                })?,
        };
        let mut workspaces = BTreeMap::new();
        for item in self.tree.scan_prefix(WORKSPACE_PREFIX) {
            let (key, value) = item?;
            let key_text = String::from_utf8_lossy(&key).into_owned();
            let corrupt = |reason: String| StoreError::Corrupt {
                key: key_text.clone(),
                reason,
            };
            let name = std::str::from_utf8(&key[WORKSPACE_PREFIX.len()..])
                .map_err(|e| corrupt(e.to_string()))
                .and_then(|n| WorkspaceName::new(n).map_err(|e| corrupt(e.to_string())))?;
            let workspace: StoredWorkspaceV1 =
                serde_json::from_slice(&value).map_err(|e| corrupt(e.to_string()))?;
            workspaces.insert(name, workspace);
        }
        Ok(Contents {
            revision,
            workspaces,
        })
    }

    /// Writes one workspace and the new store revision as one atomic batch, then flushes.
    ///
    /// Returns only once the change is on disk. On error nothing may be assumed written, and the
    /// caller must not apply the change in memory.
    pub async fn commit(
        &self,
        revision: u64,
        workspace: &WorkspaceName,
        contents: &StoredWorkspaceV1,
    ) -> Result<(), StoreError> {
        let mut key = WORKSPACE_PREFIX.to_vec();
        key.extend_from_slice(workspace.as_str().as_bytes());
        let value = serde_json::to_vec(contents).expect("stored types always serialise");
        let mut batch = sled::Batch::default();
        batch.insert(key, value);
        batch.insert(REVISION_KEY, &revision.to_be_bytes());
        self.tree.apply_batch(batch)?;
        self.tree.flush_async().await?;
        Ok(())
    }

    /// Flushes anything outstanding; called once at shutdown.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.db.flush_async().await?;
        Ok(())
    }
}

/// Whether another handle holds the database's lock. sled takes `flock(LOCK_EX | LOCK_NB)` on
/// `<dir>/db` and reports a failure only as text, so the lock is probed with the same call
/// instead. `flock` locks belong to an open file, so the probe conflicts with sled's lock even
/// within this process; the probe's own lock goes with its file at the end of this function.
fn is_locked(dir: &Path) -> bool {
    use rustix::fs::{FlockOperation, flock};
    std::fs::File::open(dir.join("db")).is_ok_and(|file| {
        flock(&file, FlockOperation::NonBlockingLockExclusive) == Err(rustix::io::Errno::WOULDBLOCK)
    })
}

impl From<&Root> for StoredRootV1 {
    fn from(root: &Root) -> Self {
        Self {
            uri: root.uri.clone(),
            name: root.name.clone(),
        }
    }
}

impl From<&StoredRootV1> for Root {
    fn from(root: &StoredRootV1) -> Self {
        Self {
            uri: root.uri.clone(),
            name: root.name.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

    fn ws(name: &str) -> WorkspaceName {
        WorkspaceName::new(name).unwrap()
    }

    #[tokio::test]
    async fn commits_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let contents = StoredWorkspaceV1 {
            revision: 3,
            roots: vec![StoredRootV1 {
                uri: "file:///a".into(),
                name: Some("a".into()),
            }],
        };
        {
            let store = Store::open(dir.path()).unwrap();
            store.commit(3, &ws("work"), &contents).await.unwrap();
        }
        let loaded = Store::reopen(dir.path(), PATIENCE).unwrap().load().unwrap();
        assert_eq!(loaded.revision, 3);
        assert_eq!(loaded.workspaces[&ws("work")], contents);
    }

    #[test]
    fn a_second_open_of_the_same_directory_fails() {
        let dir = tempfile::tempdir().unwrap();
        let _first = Store::open(dir.path()).unwrap();
        assert!(matches!(
            Store::open(dir.path()),
            Err(StoreError::Open { .. })
        ));
    }

    #[test]
    fn the_lock_probe_sees_an_open_store_and_leaves_it_working() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_locked(dir.path()), "no database yet, so no lock");
        let store = Store::open(dir.path()).unwrap();
        assert!(is_locked(dir.path()));
        assert!(
            is_locked(dir.path()),
            "the first probe let go of its own lock"
        );
        store.tree.insert(b"k", b"v").unwrap();
        store.tree.flush().unwrap();
    }

    #[test]
    fn an_unknown_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store.tree.insert(SCHEMA_KEY, &9u32.to_be_bytes()).unwrap();
            store.tree.flush().unwrap();
        }
        let reopened = Store::reopen(dir.path(), PATIENCE);
        assert!(
            matches!(reopened, Err(StoreError::UnknownSchema { found: 9 })),
            "{:?}",
            reopened.err()
        );
    }
}
