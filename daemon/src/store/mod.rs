//! The durability stack behind one face: a store is opened (or recovered) from its state
//! directory, started into a `Serving` store, written through `Committer::write` with a
//! `Plan` (the writer waits for its acknowledgement: the change is on stable storage), read
//! from the committed `Contents`, queried with `log`, and closed with `Committer::close`.
//!
//! Inside, one module a concept: `model` the stored types, `history` what a change did and
//! the `log` query, `journal` the checksummed file every acknowledged change is synced to,
//! `database` sled (the only file that names it, with its lock's quirks), `commit` the
//! group-commit thread, `activity` whether the runtime is still planning a burst of changes, and
//! `start` opening, checking and recovering a state directory. None of
//! them is visible outside this module but through what is re-exported here.

use std::path::Path;
use std::sync::{Arc, RwLock};

mod activity;
mod commit;
mod database;
mod history;
mod journal;
mod model;
mod reaper;
mod start;

pub use activity::{worker_parked, worker_unparked};
pub use commit::Health;
pub(crate) use commit::{Call, Committer, Durable, OnDurable, Plan};
pub use database::StoreError;
pub(crate) use history::log;
pub use model::Contents;
pub(crate) use model::{
    Change, Origin, PeerV1, StoredPublisherV1, StoredRootV1, StoredWorkspaceV1, bounded_text,
    same_uri, unshared,
};
pub use start::{Opened, Outcome};

/// The registry's tests check what reached the journal, record by record.
#[cfg(test)]
pub(crate) use journal::{FILE_NAME as JOURNAL_FILE, read as read_journal};

/// Opens the store in `state_dir`, refusing a damaged one (and one a recovery left unfinished).
pub fn open(state_dir: &Path) -> Result<Opened, StoreError> {
    start::open(state_dir)
}

/// `rootsd --recover`: rebuilds the store in `state_dir` from whatever of it is sound.
pub fn recover(state_dir: &Path) -> Result<Opened, StoreError> {
    start::recover(state_dir)
}

/// A store being served: the commit thread writing into it, and the committed state readers
/// see (only durable changes).
pub(crate) struct Serving {
    pub(crate) committer: Committer,
    pub(crate) committed: Arc<RwLock<Contents>>,
    /// How many workspaces lost roots that sessions of the previous run had published.
    pub(crate) withdrawn: usize,
}

impl Opened {
    /// What opening the store found and did.
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// The state the store holds.
    pub fn contents(&self) -> &Contents {
        &self.contents
    }

    /// Starts serving the store, once whatever sessions of the daemon's previous run published
    /// is withdrawn, durably: no session outlives the daemon, and live ones publish again when
    /// they register. `on_durable` is called on the commit thread for each change once it is
    /// durable, in order.
    pub(crate) fn serve(mut self, on_durable: OnDurable) -> Result<Serving, StoreError> {
        let withdrawn = start::withdraw_sessions(&mut self)?;
        let committed = Arc::new(RwLock::new(self.contents.clone()));
        let committer = Committer::start(
            self.journal,
            self.store,
            self.contents,
            committed.clone(),
            on_durable,
        )?;
        Ok(Serving {
            committer,
            committed,
            withdrawn,
        })
    }
}
