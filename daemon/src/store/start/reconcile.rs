//! Start-up: the database and the journal compared before anything is served.
//!
//! The journal holds every acknowledged change; the database holds the same, up to its last
//! checkpoint at least. At start they must agree, or the database must be the journal's state
//! at some revision no older than that checkpoint (a crash between acknowledging changes and
//! checkpointing them), in which case the journal's later changes are applied to it. Anything
//! else is damage, and rootsd refuses to start, naming what it found, rather than serve a
//! shortened store: [`crate::store::start::recovery::recover`] (`rootsd --recover`) then rebuilds it.
//!
//! A state directory without a journal is a new store only when nothing in it says a store was
//! there: a database kept with a journal (marked so, [`Store::journaled`]) is refused, since the
//! changes acknowledged after its last checkpoint were only in the journal; so is a directory
//! holding only files an earlier recovery moved aside, or the pieces of an interrupted one.
//!
//! Before a store is served, [`withdraw_sessions`] withdraws the roots that sessions of the
//! previous run published: sessions end with the daemon, and live ones publish again when they
//! register.

use std::path::Path;
use std::sync::Arc;

use crate::store::database::Store;
use crate::store::database::StoreError;
use crate::store::journal::{self, Entry, Journal};
use crate::store::model::{Change, Contents, Origin};
use crate::store::start::opened::{Opened, Outcome};
use crate::store::start::state_dir::{
    DB_DIR, asides, damaged, journal_error, refuse_if_interrupted,
};

/// Opens the store in `state_dir`, refusing a damaged one.
pub fn open(state_dir: &Path) -> Result<Opened, StoreError> {
    refuse_if_interrupted(state_dir)?;
    // A rebuild of the database the commit thread did not finish: the database is the old one.
    crate::store::database::remove_leftovers(&state_dir.join(DB_DIR));
    let journal_path = state_dir.join(journal::FILE_NAME);
    let replay = journal::read(&journal_path).map_err(journal_error("read", &journal_path))?;
    let Some(replay) = replay else {
        return without_journal(state_dir);
    };
    // Within one process (tests, `--recover`) sled may still be letting go of a database just
    // closed; another process cannot hold it, as the instance lock keeps rootsd single.
    let store = match Store::reopen_released(&state_dir.join(DB_DIR)) {
        Ok(store) => store,
        Err(error) => {
            let source = if replay.damage.is_none() {
                "journal"
            } else {
                "journal's and the database's sound parts"
            };
            return Err(damaged(
                state_dir,
                &format!("the database could not be read ({error})"),
                source,
            ));
        }
    };
    if let Some(damage) = &replay.damage {
        return Err(damaged(
            state_dir,
            &format!(
                "the journal {} is damaged at {damage}; its valid part ends at revision {}",
                journal_path.display(),
                replay.revision()
            ),
            "database",
        ));
    }
    if replay.torn > 0 {
        tracing::warn!(
            journal = %journal_path.display(),
            offset = replay.valid_len,
            bytes = replay.torn,
            revision = replay.revision(),
            "the journal ends in part of a record, a write rootsd began but never synced (so never acknowledged) before it stopped; it is cut off, and the store is served at the revision of the last whole record"
        );
    }
    let from_journal = replay.contents();
    if store.was_fresh() && from_journal.revision > 0 {
        return Err(damaged(
            state_dir,
            &format!(
                "the database is empty, but the journal holds {}",
                from_journal.describe()
            ),
            "journal",
        ));
    }
    let in_database = match store.load() {
        Ok(contents) => contents,
        Err(error) => {
            return Err(damaged(
                state_dir,
                &format!("the database could not be read ({error})"),
                "journal",
            ));
        }
    };
    if in_database == from_journal {
        store.mark_journaled()?;
        let journal =
            Journal::open(&journal_path, &replay).map_err(journal_error("open", &journal_path))?;
        return Ok(Opened {
            store,
            journal,
            contents: from_journal,
            outcome: Outcome::Consistent,
        });
    }
    let behind = in_database.revision < from_journal.revision
        && in_database.revision >= replay.checkpoint
        && in_database == replay.at(in_database.revision);
    if !behind {
        let why = if in_database.revision > from_journal.revision {
            // The database is written only after the journal's sync, so what it holds past the
            // journal was acknowledged and is gone from the journal.
            format!(
                "the database holds {}, but the journal's records end at revision {} (byte {}), so the journal lost the records of revisions {} to {}, which were acknowledged",
                in_database.describe(),
                from_journal.revision,
                replay.valid_len,
                from_journal.revision + 1,
                in_database.revision
            )
        } else if in_database.revision < replay.checkpoint {
            format!(
                "the database holds {}, but it was checkpointed at revision {}, so it lost changes it had stored; the journal holds {}",
                in_database.describe(),
                replay.checkpoint,
                from_journal.describe()
            )
        } else {
            let at_that_revision = replay.at(in_database.revision);
            let what = if in_database.workspaces == at_that_revision.workspaces {
                "whose history of changes is not the one the journal holds at that revision"
            } else {
                "which is not what the journal holds at that revision"
            };
            format!(
                "the database holds {}, {what} (the journal holds {})",
                in_database.describe(),
                from_journal.describe()
            )
        };
        return Err(damaged(state_dir, &why, "journal"));
    }
    let missing = replay.changes_after(in_database.revision, true);
    // The sound part's revisions follow each other, one change each (`missing` keeps only the
    // last change of each workspace).
    let caught_up = (from_journal.revision - in_database.revision) as usize;
    store.apply(&missing, &from_journal)?;
    store.mark_journaled()?;
    store.checkpoint()?;
    let mut journal =
        Journal::open(&journal_path, &replay).map_err(journal_error("open", &journal_path))?;
    journal
        .append(&Entry::Checkpoint(from_journal.revision))
        .and_then(|()| journal.sync())
        .map_err(journal_error("write", &journal_path))?;
    Ok(Opened {
        store,
        journal,
        contents: from_journal,
        outcome: Outcome::CaughtUp { changes: caught_up },
    })
}

/// Withdraws every root published by a session (by the previous run: no session outlives its
/// daemon), durably, as one change per workspace that held any. Returns how many workspaces
/// changed. Run once, before the store is served.
pub fn withdraw_sessions(opened: &mut Opened) -> Result<usize, StoreError> {
    let withdrawn = opened.contents.without_sessions();
    if withdrawn.is_empty() {
        return Ok(0);
    }
    let path = opened.journal.path().to_owned();
    let mut changes = Vec::with_capacity(withdrawn.len());
    for (workspace, state) in withdrawn {
        let change = Change::next(
            &opened.contents,
            workspace,
            state,
            Origin::daemon(
                "start-up: withdrawing the roots sessions of the previous run published",
            ),
        );
        let previous = opened
            .contents
            .workspaces
            .get(&change.workspace)
            .map(Arc::as_ref);
        opened
            .journal
            .append_change(&change, previous)
            .map_err(journal_error("write", &path))?;
        opened.contents.apply(&change);
        changes.push(change);
    }
    opened
        .journal
        .sync()
        .map_err(journal_error("sync", &path))?;
    opened.store.apply(&changes, &opened.contents)?;
    opened.store.checkpoint()?;
    opened
        .journal
        .append(&Entry::Checkpoint(opened.contents.revision))
        .and_then(|()| opened.journal.sync())
        .map_err(journal_error("write", &path))?;
    Ok(changes.len())
}

/// A state directory without a journal: a new store only if nothing in it says a store was
/// there (a database, files an earlier `--recover` moved aside); a database of a rootsd that kept
/// no journal is migrated; a database kept with a journal that is now missing is damage, since
/// the changes acknowledged after its last checkpoint were only in the journal.
fn without_journal(state_dir: &Path) -> Result<Opened, StoreError> {
    let path = state_dir.join(journal::FILE_NAME);
    let db_dir = state_dir.join(DB_DIR);
    if !db_dir.exists() {
        let asides = asides(state_dir);
        if !asides.is_empty() {
            return Err(damaged(
                state_dir,
                &format!(
                    "both the journal and the database are missing, but {} remain from an earlier store",
                    asides
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "files kept there, or move them away to start an empty store,",
            ));
        }
        // A new store: the journal first, so that a database never exists without one unless
        // something removed it.
        let contents = Contents::default();
        let journal =
            Journal::create(&path, &contents, 0).map_err(journal_error("create", &path))?;
        let store = Store::reopen_released(&db_dir)?;
        store.mark_journaled()?;
        store.checkpoint()?;
        return Ok(Opened {
            store,
            journal,
            contents,
            outcome: Outcome::New,
        });
    }
    let store = Store::reopen_released(&db_dir).map_err(|error| {
        damaged(
            state_dir,
            &format!(
                "the journal {} is missing and the database could not be read ({error})",
                path.display()
            ),
            "database",
        )
    })?;
    let read = store
        .journaled()
        .and_then(|journaled| Ok((journaled, store.load()?)));
    let (journaled, contents) = read.map_err(|error| {
        damaged(
            state_dir,
            &format!(
                "the journal {} is missing and the database could not be read ({error})",
                path.display()
            ),
            "database",
        )
    })?;
    if journaled || store.was_fresh() {
        let why = if journaled {
            format!(
                "the journal {} is missing, though the database (which holds {}) was kept with one: changes acknowledged after its last checkpoint were only in the journal",
                path.display(),
                contents.describe()
            )
        } else {
            format!(
                "the journal {} is missing and the database holds nothing, so whatever the store held is gone",
                path.display()
            )
        };
        return Err(damaged(state_dir, &why, "database"));
    }
    store.mark_journaled()?;
    store.checkpoint()?;
    let journal = Journal::create(&path, &contents, contents.revision)
        .map_err(journal_error("create", &path))?;
    Ok(Opened {
        store,
        journal,
        outcome: Outcome::Migrated,
        contents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::model::{Change, Origin, PeerV1, StoredRootV1, StoredWorkspaceV1};
    use rootsd_proto::WorkspaceName;

    fn change(revision: u64, origin: Option<Origin>) -> Change {
        Change::recorded(
            revision,
            WorkspaceName::new("w").unwrap(),
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
            origin,
            revision,
        )
    }

    fn by_ana() -> Option<Origin> {
        Some(Origin::Peer(PeerV1 {
            uid: 1000,
            user: Some("ana".into()),
            ..PeerV1::default()
        }))
    }

    /// A state directory as a rootsd left it: the database holding the first `checkpointed`
    /// changes, the journal holding all of them.
    fn left_behind(changes: &[Change], checkpointed: usize) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join(DB_DIR)).unwrap();
        let mut contents = Contents::default();
        let mut journal =
            Journal::create(&dir.path().join(journal::FILE_NAME), &contents, 0).unwrap();
        for (n, change) in changes.iter().enumerate() {
            contents.apply(change);
            journal.append(&Entry::Change(change.clone())).unwrap();
            if n < checkpointed {
                store
                    .apply(std::slice::from_ref(change), &contents)
                    .unwrap();
            }
        }
        journal.sync().unwrap();
        store.checkpoint().unwrap();
        dir
    }

    #[test]
    fn a_store_from_before_the_history_opens_and_its_history_starts_after_it() {
        let old: Vec<Change> = (1..=3).map(|r| change(r, None)).collect();
        let dir = left_behind(&old, 3);
        let opened = open(dir.path()).unwrap();
        assert_eq!(opened.outcome, Outcome::Consistent);
        assert!(opened.contents.history.is_empty());
        assert_eq!(opened.contents.recorded_from(), 4);
        drop(opened);
        // Changes an old rootsd acknowledged but never checkpointed are caught up, unlogged.
        let dir = left_behind(&old, 1);
        let opened = open(dir.path()).unwrap();
        assert_eq!(opened.outcome, Outcome::CaughtUp { changes: 2 });
        assert_eq!(opened.contents.root_count(), 1);
        assert!(opened.contents.history.is_empty());
    }

    #[test]
    fn history_the_database_missed_is_caught_up_from_the_journal() {
        let changes: Vec<Change> = (1..=5).map(|r| change(r, by_ana())).collect();
        let dir = left_behind(&changes, 2);
        let opened = open(dir.path()).unwrap();
        assert_eq!(opened.outcome, Outcome::CaughtUp { changes: 3 });
        let revisions: Vec<u64> = opened.contents.history.iter().map(|e| e.revision).collect();
        assert_eq!(revisions, [1, 2, 3, 4, 5]);
        assert_eq!(opened.store.load().unwrap(), opened.contents);
    }

    #[test]
    fn a_database_whose_history_differs_from_the_journals_is_refused_naming_the_history() {
        let changes: Vec<Change> = (1..=2).map(|r| change(r, by_ana())).collect();
        let dir = left_behind(&changes, 2);
        {
            let store = Store::reopen_released(&dir.path().join(DB_DIR)).unwrap();
            let mut other = store.load().unwrap();
            other.history.pop_front();
            store.replace_all(&other).unwrap();
        }
        let error = open(dir.path()).err().expect("refused").to_string();
        assert!(
            error.contains("whose history of changes is not the one the journal holds"),
            "{error}"
        );
        assert!(error.contains("rootsd --recover"), "{error}");
        let recovered = crate::store::start::recover(dir.path()).unwrap();
        assert_eq!(recovered.contents.history.len(), 2);
    }
}
