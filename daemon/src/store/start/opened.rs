//! What a start hands over: a store ready to serve, and what opening it found and did.

use std::path::PathBuf;

use crate::store::database::Store;
use crate::store::journal::Journal;
use crate::store::model::Contents;

/// A store ready to serve.
pub struct Opened {
    pub(in crate::store) store: Store,
    pub(in crate::store) journal: Journal,
    pub(in crate::store) contents: Contents,
    pub(in crate::store) outcome: Outcome,
}

/// What opening found and did, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Database and journal agree.
    Consistent,
    /// A new store.
    New,
    /// A database from a rootsd without a journal: the journal was started from it.
    Migrated,
    /// The database missed the journal's last changes (a crash before a checkpoint); they were
    /// applied to it.
    CaughtUp { changes: usize },
    /// `--recover` rebuilt the store from `from`; `kept` are the files it replaced, `lost` what
    /// it could not keep (empty: nothing acknowledged was lost), `unreadable` the damage found.
    Recovered {
        from: String,
        kept: Vec<PathBuf>,
        lost: Vec<String>,
        unreadable: Vec<String>,
    },
}

impl Outcome {
    pub fn describe(&self) -> String {
        match self {
            Self::Consistent => "the database and the journal agree".to_owned(),
            Self::New => "a new store".to_owned(),
            Self::Migrated => "started a journal from the database of an earlier rootsd".to_owned(),
            Self::CaughtUp { changes } => format!(
                "applied the journal's last {changes} change(s), acknowledged before rootsd stopped, to the database"
            ),
            Self::Recovered {
                from,
                kept,
                lost,
                unreadable,
            } => {
                let mut text = format!("rebuilt the store from {from}");
                if !unreadable.is_empty() {
                    text.push_str(&format!("; unreadable: {}", unreadable.join("; ")));
                }
                if lost.is_empty() {
                    text.push_str("; every acknowledged change found was kept");
                } else {
                    text.push_str(&format!("; COULD NOT KEEP: {}", lost.join("; ")));
                }
                if !kept.is_empty() {
                    text.push_str(&format!(
                        "; the files it replaced are kept at {}",
                        kept.iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                text
            }
        }
    }
}
