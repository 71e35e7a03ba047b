//! The state directory as start-up and recovery see it: what its files are called, which of
//! them say a store (or a recovery) was there, and how damage is named to the user.

use std::path::{Path, PathBuf};

use crate::store::database::StoreError;

/// The database's directory in the state directory.
pub const DB_DIR: &str = "db";

/// The database being built by a recovery.
pub const DB_BUILD: &str = "db.recovering";
/// The journal being built by a recovery; once it exists, the build is complete.
pub const JOURNAL_BUILD: &str = "roots.journal.recovering";
/// Where a recovery moves the old files.
pub const PLAN: &str = "recovery.plan";

pub(crate) fn damaged(state_dir: &Path, why: &str, source: &str) -> StoreError {
    StoreError::Damaged(format!(
        "the store in {dir} is damaged, so rootsd did not start and served nothing: {why}. With rootsd stopped, run `rootsd --recover --state-dir {dir}` to rebuild it from the {source}; the damaged files are kept beside the new ones",
        dir = state_dir.display()
    ))
}

pub(crate) fn journal_error(
    action: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.display().to_string();
    move |error| StoreError::Journal {
        action,
        path,
        error,
    }
}

/// Refuses to start on a state directory holding an unfinished recovery.
pub fn refuse_if_interrupted(state_dir: &Path) -> Result<(), StoreError> {
    let found: Vec<PathBuf> = [DB_BUILD, JOURNAL_BUILD, PLAN]
        .iter()
        .map(|name| state_dir.join(name))
        .filter(|path| path.exists())
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    Err(damaged(
        state_dir,
        &format!(
            "a `rootsd --recover` was interrupted ({} remain)",
            found
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        "same sources (it finishes or restarts the interrupted recovery)",
    ))
}

/// Files and directories an earlier recovery moved aside.
pub fn asides(state_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(".damaged-") || n.contains(".replaced-"))
        })
        .collect();
    found.sort();
    found
}
