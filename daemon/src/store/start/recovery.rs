//! `rootsd --recover`: rebuilding a damaged store, restartable at every step.
//!
//! What to keep is decided first ([`decide`]): whichever of the database and the journal's sound
//! part reaches the later revision is the base (the journal on a tie), and then every change
//! record of the journal that checks out and is newer than the base is applied, in order, even
//! past a damaged record. Revisions that no source holds are named in what recovery says it
//! could not keep; nothing is dropped silently. A database that cannot be read (sled may even
//! panic on it, which [`crate::store::database`] turns into an error) is simply not a source.
//!
//! The new store is then built beside the old one and switched in by renames:
//!
//! 1. `db.recovering/`: a new database holding the result, checkpointed and closed.
//! 2. `recovery.plan`: where the old files go (names never used before, so nothing is
//!    overwritten), synced.
//! 3. `roots.journal.recovering`: the new journal, written aside and renamed into place, synced.
//!    Its existence is the commit point: from here on the build is complete.
//! 4. The switch: the old database and journal are renamed aside as the plan says, the new ones
//!    renamed into their places, the directory synced, the plan removed.
//!
//! Killed before step 3, the old files are untouched and a rerun starts over (removing the
//! unfinished build); killed during step 4, a rerun finishes the switch. A plain start refuses a
//! state directory holding any of these files, naming `--recover`, so a half-done recovery is
//! never served and never taken for a new store.

use std::path::{Path, PathBuf};

use crate::store::database::Store;
use crate::store::database::StoreError;
use crate::store::journal::{self, Journal, Replay};
use crate::store::model::Contents;
use crate::store::start::opened::{Opened, Outcome};
use crate::store::start::reconcile;
use crate::store::start::state_dir::{DB_BUILD, DB_DIR, JOURNAL_BUILD, PLAN, journal_error};

/// What recovery keeps, and what it says about it.
#[derive(Debug, PartialEq, Eq)]
pub struct Decision {
    pub contents: Contents,
    pub from: String,
    pub lost: Vec<String>,
    pub unreadable: Vec<String>,
}

/// What to rebuild from the journal's replay and the database's contents (either may be
/// missing or unreadable, `None`).
pub fn decide(replay: Option<&Replay>, database: Option<Contents>) -> Option<Decision> {
    let mut unreadable = Vec::new();
    let mut lost = Vec::new();
    if let Some(replay) = replay {
        for damage in replay.damage.iter().chain(&replay.more_damage) {
            unreadable.push(format!("the journal's {damage}"));
        }
    }
    let snapshot_damaged = replay.is_some_and(|r| r.damage.as_ref().is_some_and(|d| d.line == 1));
    let journal = replay.map(Replay::contents);
    // A journal whose sound part ends short of the database lost records it had synced: those
    // the database holds are kept from it, and anything acknowledged after them is gone.
    let short = match (&journal, &database) {
        (Some(journal), Some(database)) if database.revision > journal.revision => {
            Some((journal.revision, database.revision))
        }
        _ => None,
    };
    let (mut contents, mut from) = match (journal, database) {
        (None, None) => return None,
        (None, Some(database)) => {
            lost.push(format!(
                "the journal is missing, so any change acknowledged after the database's last checkpoint (it holds revision {}) is unknown",
                database.revision
            ));
            let from = format!("the database (revision {})", database.revision);
            (database, from)
        }
        (Some(journal), Some(database))
            if database.revision > journal.revision || snapshot_damaged =>
        {
            let from = format!("the database (revision {})", database.revision);
            (database, from)
        }
        (Some(journal), _) => {
            let from = format!("the journal (revision {})", journal.revision);
            (journal, from)
        }
    };
    let later = replay.map_or(&[][..], |r| &r.after_damage[..]);
    let mut applied = 0;
    for record in later {
        let revision = record.revision();
        if revision <= contents.revision {
            continue;
        }
        if revision != contents.revision + 1 {
            let (first, last) = (contents.revision + 1, revision - 1);
            lost.push(if snapshot_damaged && first == 1 {
                format!(
                    "the journal's snapshot is damaged and no database could stand in for it: workspaces last changed before revision {} and the history before it",
                    revision
                )
            } else if first == last {
                format!("revision {first}, whose record is damaged and which the database did not hold")
            } else {
                format!("revisions {first} to {last}, whose records are damaged and which the database did not hold")
            });
        }
        match record.against(&contents) {
            Ok(change) => {
                contents.apply(&change);
                applied += 1;
            }
            Err(why) => {
                // A delta means something only against the state it was written against: one
                // that finds another state is named, and the store's revision moves past it so
                // that what follows is judged on its own.
                lost.push(format!(
                    "revision {revision}, a change to workspace {}, whose record is sound but {why}",
                    record.workspace()
                ));
                contents.revision = revision;
            }
        }
    }
    // A damaged record after the last sound one may have held a change no source has, and
    // nothing after it tells which revision it was: say so rather than keep quiet.
    if let Some(replay) = replay
        && let Some(last) = replay
            .damage
            .iter()
            .chain(&replay.more_damage)
            .filter(|d| d.line > replay.last_sound_line)
            .map(|d| d.line)
            .min()
    {
        lost.push(format!(
            "whatever the journal's damaged last record(s), from line {last}, held after revision {}: a change acknowledged just before rootsd stopped, if they held one",
            contents.revision
        ));
    }
    if let Some((journal_revision, database_revision)) = short
        && contents.revision == database_revision
        && !lost
            .iter()
            .any(|l| l.starts_with("whatever the journal's damaged last"))
    {
        lost.push(format!(
            "any change acknowledged after revision {database_revision}: the journal's records end at revision {journal_revision}, short of the database's {database_revision}, so the journal lost records it had synced, and no source holds a revision after {database_revision}"
        ));
    }
    if applied > 0 {
        from.push_str(&format!(
            ", then the journal's {applied} sound record(s) after the damage (to revision {})",
            contents.revision
        ));
    }
    Some(Decision {
        contents,
        from,
        lost,
        unreadable,
    })
}

/// Rebuilds the store in `state_dir` (see the module's documentation), or finishes a rebuild
/// that was interrupted, and opens it.
pub fn recover(state_dir: &Path) -> Result<Opened, StoreError> {
    recover_stopping(state_dir, &mut |_| true)
}

/// The steps of a recovery, for tests that stop it after each as a kill would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    DatabaseBuilt,
    PlanWritten,
    JournalBuilt,
    DatabaseMovedAside,
    DatabaseSwitched,
    JournalMovedAside,
    JournalSwitched,
}

/// [`recover`], asking `go_on` after each step whether to continue; `false` stops it there,
/// leaving the state directory as a kill at that moment would.
pub(crate) fn recover_stopping(
    state_dir: &Path,
    go_on: &mut dyn FnMut(Step) -> bool,
) -> Result<Opened, StoreError> {
    let stopped = || StoreError::Damaged("recovery stopped (test)".to_owned());
    let build = state_dir.join(JOURNAL_BUILD);
    if build.exists() {
        let kept = switch(state_dir, go_on).ok_or_else(stopped)??;
        let mut opened = reconcile::open(state_dir)?;
        opened.outcome = Outcome::Recovered {
            from: "the store an interrupted recovery had built".to_owned(),
            kept,
            lost: Vec::new(),
            unreadable: Vec::new(),
        };
        return Ok(opened);
    }
    // An unfinished build: the old files are untouched, so it starts over.
    remove_dir(&state_dir.join(DB_BUILD))?;
    remove_file(&state_dir.join(PLAN))?;

    let journal_path = state_dir.join(journal::FILE_NAME);
    let db_dir = state_dir.join(DB_DIR);
    let replay = journal::read(&journal_path).map_err(journal_error("read", &journal_path))?;
    let database = if db_dir.exists() {
        // A database sled cannot read, or panics on, is no source; it is moved aside whole.
        match Store::reopen_released(&db_dir).and_then(|store| store.load()) {
            Ok(contents) => Some(contents),
            Err(error) => {
                tracing::warn!(%error, "the database cannot be read; recovering without it");
                None
            }
        }
    } else {
        None
    };
    let database_revision = database.as_ref().map(|d| d.revision);
    let in_database = database.clone();
    let Some(decision) = decide(replay.as_ref(), database) else {
        return Err(StoreError::Damaged(format!(
            "nothing in {} can be recovered: there is no journal, and no database that can be read",
            state_dir.display()
        )));
    };
    let mut unreadable = decision.unreadable.clone();
    if db_dir.exists() && database_revision.is_none() {
        unreadable.push(format!("the database {}", db_dir.display()));
    }

    // 1. The new database, aside.
    {
        let store = Store::open(&state_dir.join(DB_BUILD))?;
        store.replace_all(&decision.contents)?;
    }
    if !go_on(Step::DatabaseBuilt) {
        return Err(stopped());
    }
    // 2. Where the old files go.
    let stamp = crate::clock::unix_secs();
    let db_kind = if in_database.as_ref() == Some(&decision.contents) {
        "replaced"
    } else {
        "damaged"
    };
    let journal_sound_and_same = replay
        .as_ref()
        .is_some_and(|r| r.damage.is_none() && r.contents() == decision.contents);
    let db_aside = db_dir
        .exists()
        .then(|| unused_name(state_dir, &format!("{DB_DIR}.{db_kind}-{stamp}")));
    let journal_aside = (journal_path.exists() && !journal_sound_and_same).then(|| {
        unused_name(
            state_dir,
            &format!("{}.damaged-{stamp}", journal::FILE_NAME),
        )
    });
    write_plan(state_dir, db_aside.as_deref(), journal_aside.as_deref())?;
    if !go_on(Step::PlanWritten) {
        return Err(stopped());
    }
    // 3. The new journal: once it exists, the build is complete.
    Journal::create(&build, &decision.contents, decision.contents.revision)
        .map_err(journal_error("write", &build))?;
    if !go_on(Step::JournalBuilt) {
        return Err(stopped());
    }
    // 4. The switch.
    let kept = switch(state_dir, go_on).ok_or_else(stopped)??;
    let mut opened = reconcile::open(state_dir)?;
    opened.outcome = Outcome::Recovered {
        from: decision.from,
        kept,
        lost: decision.lost,
        unreadable,
    };
    Ok(opened)
}

/// Renames the old files aside and the new ones into place, as far as that is not done yet;
/// `None` if `go_on` stopped it.
fn switch(
    state_dir: &Path,
    go_on: &mut dyn FnMut(Step) -> bool,
) -> Option<Result<Vec<PathBuf>, StoreError>> {
    let result = (|| {
        let plan = read_plan(state_dir)?;
        let mut kept = Vec::new();
        let stamp = crate::clock::unix_secs();
        let db_build = state_dir.join(DB_BUILD);
        let db_dir = state_dir.join(DB_DIR);
        if db_build.exists() {
            if db_dir.exists() {
                let name = plan
                    .db
                    .clone()
                    .unwrap_or_else(|| format!("{DB_DIR}.damaged-{stamp}"));
                kept.push(move_aside(state_dir, &db_dir, &name)?);
                if !go_on(Step::DatabaseMovedAside) {
                    return Ok(None);
                }
            }
            rename(&db_build, &db_dir)?;
            if !go_on(Step::DatabaseSwitched) {
                return Ok(None);
            }
        }
        let journal_build = state_dir.join(JOURNAL_BUILD);
        let journal_path = state_dir.join(journal::FILE_NAME);
        if journal_path.exists()
            && let Some(name) = &plan.journal
        {
            kept.push(move_aside(state_dir, &journal_path, name)?);
            if !go_on(Step::JournalMovedAside) {
                return Ok(None);
            }
        }
        rename(&journal_build, &journal_path)?;
        sync_dir(state_dir)?;
        if !go_on(Step::JournalSwitched) {
            return Ok(None);
        }
        remove_file(&state_dir.join(PLAN))?;
        sync_dir(state_dir)?;
        Ok(Some(kept))
    })();
    result.transpose()
}

#[derive(Default)]
struct Plan {
    db: Option<String>,
    journal: Option<String>,
}

/// The plan: two lines, the database's new name and the journal's (`-`: the journal is replaced
/// without being kept, as it was sound and held exactly what the new one holds).
fn write_plan(state_dir: &Path, db: Option<&str>, journal: Option<&str>) -> Result<(), StoreError> {
    let path = state_dir.join(PLAN);
    let text = format!("{}\n{}\n", db.unwrap_or("-"), journal.unwrap_or("-"));
    let written = std::fs::File::create(&path).and_then(|mut file| {
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        file.sync_all()
    });
    written.map_err(io_error("write", &path))?;
    sync_dir(state_dir)
}

fn read_plan(state_dir: &Path) -> Result<Plan, StoreError> {
    let path = state_dir.join(PLAN);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Plan::default()),
        Err(error) => return Err(io_error("read", &path)(error)),
    };
    let mut lines = text.lines().map(|line| match line.trim() {
        "-" | "" => None,
        name => Some(name.to_owned()),
    });
    Ok(Plan {
        db: lines.next().flatten(),
        journal: lines.next().flatten(),
    })
}

/// `wanted`, or `wanted-2`, `wanted-3`, … : the first name nothing in `state_dir` has, so that a
/// second recovery in the same second, or after the clock went back, overwrites nothing.
fn unused_name(state_dir: &Path, wanted: &str) -> String {
    let mut name = wanted.to_owned();
    let mut n = 1;
    while state_dir.join(&name).exists() {
        n += 1;
        name = format!("{wanted}-{n}");
    }
    name
}

/// Renames `path` to `name` in `state_dir`, never over an existing file (another name is
/// chosen if `name` was taken since it was planned).
fn move_aside(state_dir: &Path, path: &Path, name: &str) -> Result<PathBuf, StoreError> {
    loop {
        let aside = state_dir.join(unused_name(state_dir, name));
        match rustix::fs::renameat_with(
            rustix::fs::CWD,
            path,
            rustix::fs::CWD,
            &aside,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => return Ok(aside),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(error) => return Err(io_error("move aside", path)(error.into())),
        }
    }
}

fn rename(from: &Path, to: &Path) -> Result<(), StoreError> {
    std::fs::rename(from, to).map_err(io_error("rename into place", from))
}

fn remove_dir(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_dir_all(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(io_error("remove the unfinished", path)(error))
        }
        _ => Ok(()),
    }
}

fn remove_file(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(io_error("remove", path)(error))
        }
        _ => Ok(()),
    }
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    journal::sync_dir(dir).map_err(io_error("sync", dir))
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.display().to_string();
    move |error| StoreError::Sync {
        action,
        path,
        error,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::journal::Entry;
    use crate::store::model::{Change, Origin, PeerV1, StoredRootV1, StoredWorkspaceV1};
    use rootsd_proto::WorkspaceName;

    /// Change `revision`: workspace `w<revision % 3>` gets one more root.
    fn change(revision: u64, before: &Contents) -> Change {
        let workspace = WorkspaceName::new(format!("w{}", revision % 3)).unwrap();
        let mut state = before
            .workspaces
            .get(&workspace)
            .map(|w| StoredWorkspaceV1::clone(w))
            .unwrap_or_default();
        state.revision = revision;
        state.roots.push(Arc::new(StoredRootV1 {
            uri: format!("file:///r{revision}").into(),
            name: None,
            by_hand: true,
            published_by: Vec::new(),
        }));
        Change::recorded(
            revision,
            workspace,
            state.into(),
            Some(Origin::Peer(PeerV1 {
                uid: 1000,
                ..PeerV1::default()
            })),
            revision,
        )
    }

    /// A state directory after a crash: `total` changes acknowledged (all in the journal), the
    /// database checkpointed at `in_database`; then the journal's record of `damaged` has a bit
    /// flipped. Returns the directory and the contents every acknowledged change makes.
    fn crashed_and_damaged(
        total: u64,
        in_database: u64,
        damaged: u64,
    ) -> (tempfile::TempDir, Contents) {
        let dir = tempfile::tempdir().unwrap();
        let journal_path = dir.path().join(journal::FILE_NAME);
        let mut contents = Contents::default();
        let mut journal = Journal::create(&journal_path, &contents, 0).unwrap();
        let mut damaged_at = 0;
        {
            let store = Store::open(&dir.path().join(DB_DIR)).unwrap();
            store.mark_journaled().unwrap();
            for revision in 1..=total {
                let change = change(revision, &contents);
                contents.apply(&change);
                if revision == damaged {
                    damaged_at = journal.len() + 30;
                }
                journal.append(&Entry::Change(change.clone())).unwrap();
                if revision <= in_database {
                    store.apply(&[change], &contents).unwrap();
                }
            }
            journal.sync().unwrap();
            store.checkpoint().unwrap();
        }
        let mut bytes = std::fs::read(&journal_path).unwrap();
        if damaged > 0 {
            bytes[damaged_at as usize] ^= 0x02;
        }
        std::fs::write(&journal_path, bytes).unwrap();
        (dir, contents)
    }

    #[test]
    fn a_database_behind_and_a_damaged_journal_record_lose_nothing_together() {
        // The attack's case: the database at 139 of 140, a record the database holds damaged.
        let (dir, every) = crashed_and_damaged(140, 139, 100);
        assert!(reconcile::open(dir.path()).is_err(), "start refuses it");
        let recovered = recover(dir.path()).unwrap();
        assert_eq!(recovered.contents, every, "revision 140 is kept");
        let Outcome::Recovered {
            lost, unreadable, ..
        } = &recovered.outcome
        else {
            panic!("{:?}", recovered.outcome)
        };
        assert!(lost.is_empty(), "{lost:?}");
        assert_eq!(unreadable.len(), 1, "{unreadable:?}");
        drop(recovered);
        let opened = reconcile::open(dir.path()).unwrap();
        assert_eq!(opened.outcome, Outcome::Consistent);
        assert_eq!(opened.contents, every);
    }

    #[test]
    fn a_revision_nothing_holds_is_named_and_every_later_record_is_kept() {
        let (dir, every) = crashed_and_damaged(40, 10, 25);
        let recovered = recover(dir.path()).unwrap();
        let Outcome::Recovered { lost, .. } = &recovered.outcome else {
            panic!("{:?}", recovered.outcome)
        };
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert!(lost[0].contains("revision 25,"), "{lost:?}");
        assert_eq!(recovered.contents.revision, 40);
        // A change records its workspace's whole state, so the next change to the workspace
        // revision 25 changed brought its root back; only its history entry is gone.
        assert_eq!(recovered.contents.workspaces, every.workspaces);
        let logged: Vec<u64> = recovered
            .contents
            .history
            .iter()
            .map(|e| e.revision)
            .collect();
        assert!(!logged.contains(&25) && logged.contains(&24) && logged.contains(&26));
        assert!(
            recovered
                .outcome
                .describe()
                .contains("COULD NOT KEEP: revision 25"),
            "{}",
            recovered.outcome.describe()
        );
    }

    #[test]
    fn a_delta_after_damage_is_kept_only_against_the_state_it_was_written_for_and_named_otherwise()
    {
        let root = |uri: &str, name: &str| StoredRootV1 {
            uri: uri.into(),
            name: Some(name.into()),
            by_hand: true,
            published_by: Vec::new(),
        };
        let steps: [(&str, Vec<StoredRootV1>); 5] = [
            ("a", vec![root("file:///x", "x")]),
            ("b", vec![root("file:///z", "z")]),
            ("a", vec![root("file:///x", "x"), root("file:///y", "y")]),
            ("a", vec![root("file:///x", "ex"), root("file:///y", "y")]),
            ("b", vec![root("file:///z", "z"), root("file:///w", "w")]),
        ];
        let mut contents = Contents::default();
        let mut bytes = journal::encode(&Entry::Snapshot(Contents::default()));
        let mut starts = Vec::new();
        for (k, (workspace, roots)) in steps.into_iter().enumerate() {
            let revision = k as u64 + 1;
            let change = Change::recorded(
                revision,
                WorkspaceName::new(workspace).unwrap(),
                StoredWorkspaceV1 {
                    revision,
                    roots: roots.into_iter().map(Arc::new).collect(),
                }
                .into(),
                Some(Origin::daemon("test")),
                1,
            );
            let delta = journal::Delta::between(
                contents.workspaces.get(&change.workspace).map(Arc::as_ref),
                &change,
            )
            .unwrap();
            starts.push(bytes.len());
            bytes.extend(journal::encode(&Entry::Delta(delta)));
            contents.apply(&change);
        }
        // Revision 3's record (workspace a) is damaged; nothing else holds it.
        bytes[starts[2] + 20] ^= 0x04;
        let replay = journal::replay(&bytes);
        let decision = decide(Some(&replay), None).unwrap();
        let a = &decision.contents.workspaces[&WorkspaceName::new("a").unwrap()];
        let b = &decision.contents.workspaces[&WorkspaceName::new("b").unwrap()];
        assert_eq!(
            a.roots,
            [Arc::new(root("file:///x", "x"))],
            "a as revision 1 left it"
        );
        assert_eq!(b, &contents.workspaces[&WorkspaceName::new("b").unwrap()]);
        assert!(
            decision.lost.iter().any(|l| l.starts_with("revision 3,")),
            "{:?}",
            decision.lost
        );
        assert!(
            decision
                .lost
                .iter()
                .any(|l| l.starts_with("revision 4, a change to workspace a")),
            "{:?}",
            decision.lost
        );
        assert_eq!(decision.lost.len(), 2, "{:?}", decision.lost);
    }

    #[test]
    fn a_recovery_stopped_after_any_step_is_refused_at_start_and_finished_by_the_next() {
        let steps = [
            Step::DatabaseBuilt,
            Step::PlanWritten,
            Step::JournalBuilt,
            Step::DatabaseMovedAside,
            Step::DatabaseSwitched,
            Step::JournalMovedAside,
            Step::JournalSwitched,
        ];
        for stop in steps {
            let (dir, every) = crashed_and_damaged(30, 20, 12);
            let stopped = recover_stopping(dir.path(), &mut |step| step != stop);
            assert!(stopped.is_err(), "{stop:?}");
            drop(stopped);
            let refused = reconcile::open(dir.path()).err().map(|e| e.to_string());
            assert!(
                refused
                    .as_ref()
                    .is_some_and(|e| e.contains("rootsd --recover")),
                "stopped after {stop:?}, a start must refuse naming --recover: {refused:?}"
            );
            let recovered = recover(dir.path()).unwrap();
            assert_eq!(recovered.contents, every, "stopped after {stop:?}");
            drop(recovered);
            let opened = reconcile::open(dir.path()).unwrap();
            assert_eq!(opened.contents, every, "stopped after {stop:?}");
            assert!(!dir.path().join(PLAN).exists());
        }
    }

    #[test]
    fn a_damaged_last_record_is_named_as_possibly_lost() {
        let (dir, _) = crashed_and_damaged(30, 29, 30);
        let recovered = recover(dir.path()).unwrap();
        assert_eq!(recovered.contents.revision, 29);
        let Outcome::Recovered { lost, .. } = &recovered.outcome else {
            panic!("{:?}", recovered.outcome)
        };
        assert!(
            lost.len() == 1
                && lost[0].contains("damaged last record")
                && lost[0].contains("after revision 29"),
            "{lost:?}"
        );
    }

    #[test]
    fn aside_names_are_never_reused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(unused_name(dir.path(), "db.damaged-7"), "db.damaged-7");
        std::fs::create_dir(dir.path().join("db.damaged-7")).unwrap();
        std::fs::write(dir.path().join("db.damaged-7-2"), "").unwrap();
        assert_eq!(unused_name(dir.path(), "db.damaged-7"), "db.damaged-7-3");
        // A rename never replaces what is there, even if the name was taken after planning.
        let journal = dir.path().join("roots.journal");
        std::fs::write(&journal, "new").unwrap();
        std::fs::write(dir.path().join("roots.journal.damaged-7"), "old").unwrap();
        let aside = move_aside(dir.path(), &journal, "roots.journal.damaged-7").unwrap();
        assert_eq!(aside, dir.path().join("roots.journal.damaged-7-2"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("roots.journal.damaged-7")).unwrap(),
            "old"
        );
    }

    #[test]
    fn a_database_kept_with_a_journal_that_is_gone_is_refused_not_migrated() {
        let (dir, every) = crashed_and_damaged(30, 29, 0);
        std::fs::remove_file(dir.path().join(journal::FILE_NAME)).unwrap();
        let refused = reconcile::open(dir.path())
            .err()
            .expect("refused")
            .to_string();
        assert!(
            refused.contains("journal") && refused.contains("missing"),
            "{refused}"
        );
        let recovered = recover(dir.path()).unwrap();
        assert_eq!(recovered.contents.revision, 29);
        assert!(recovered.contents.revision < every.revision);
        assert!(
            recovered
                .outcome
                .describe()
                .contains("the journal is missing"),
            "says what it cannot know: {}",
            recovered.outcome.describe()
        );
        // Files moved aside with no store beside them are not a new store either.
        drop(recovered);
        std::fs::remove_dir_all(dir.path().join(DB_DIR)).unwrap();
        std::fs::remove_file(dir.path().join(journal::FILE_NAME)).unwrap();
        std::fs::write(dir.path().join("roots.journal.damaged-1"), "").unwrap();
        assert!(reconcile::open(dir.path()).is_err());
    }
}
