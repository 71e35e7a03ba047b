//! The rendezvous: how every client of one user finds that user's daemon, whatever part of the
//! environment it was started with.
//!
//! Hosts start MCP servers (and so `rootsctl proxy`) with a stripped environment, often without
//! `XDG_RUNTIME_DIR`, so two clients of one user may compute different socket paths. What they
//! can all compute is the state directory (from `HOME` alone). The daemon holds an exclusive lock
//! on `rootsd.lock` there for its whole life and writes into it where it listens; a client that
//! finds the lock held connects to the recorded socket. The kernel drops the lock when the daemon
//! dies, however it dies, so a record is trusted only while its lock is held.
//!
//! A state directory chosen by `XDG_STATE_HOME` is one a client with a stripped environment
//! cannot compute. A daemon there also leaves a [`Pointer`] in the directory `HOME` alone leads
//! to (`~/.local/state/rootsd`), naming its own; a client that finds no daemon where `HOME` leads
//! follows it, to the daemon's lock when one runs and, when none does, to the store an
//! autostarted daemon must open. A daemon in the `HOME` directory itself removes a pointer it
//! finds there: the newest daemon's choice is the user's.
//!
//! This module is the formats; taking and testing the lock, and reading and writing files, are
//! the daemon's and the client's I/O.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The lock file's name inside the state directory.
pub const LOCK_FILE: &str = "rootsd.lock";

/// What a running daemon records in its lock file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub pid: u32,
    /// Where it accepts connections; absent while it is still starting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
}

impl Record {
    /// The record as one line of JSON.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("records always serialise");
        line.push('\n');
        line
    }

    /// Reads a record; `None` for an empty, partly written or foreign file.
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_str(text.trim()).ok()
    }

    /// The record in words, for messages: `pid 42, socket /run/…/rootsd.sock`.
    pub fn describe(&self) -> String {
        match &self.socket {
            Some(socket) => format!("pid {}, socket {}", self.pid, socket.display()),
            None => format!("pid {}, still starting", self.pid),
        }
    }
}

/// The pointer's name inside `~/.local/state/rootsd`.
pub const POINTER_FILE: &str = "rootsd.pointer";

/// Where the user's daemon keeps its state when that is not where `HOME` alone leads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pointer {
    pub state_dir: PathBuf,
}

impl Pointer {
    /// The pointer as one line of JSON.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("pointers always serialise");
        line.push('\n');
        line
    }

    /// Reads a pointer; `None` for an empty, partly written or foreign file, and for one that
    /// names a relative directory, which could only be resolved against a client's whim.
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_str::<Self>(text.trim())
            .ok()
            .filter(|pointer| pointer.state_dir.is_absolute())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pointer_round_trips_and_only_to_an_absolute_directory() {
        let pointer = Pointer {
            state_dir: PathBuf::from("/home/u/xdg/state/rootsd"),
        };
        assert_eq!(Pointer::parse(&pointer.to_line()), Some(pointer.clone()));
        assert_eq!(Pointer::parse(r#"{"state_dir":"xdg/state"}"#), None);
        assert_eq!(Pointer::parse(&pointer.to_line()[..10]), None);
        assert_eq!(Pointer::parse(""), None);
    }

    #[test]
    fn a_record_round_trips_and_a_partial_one_is_none() {
        let record = Record {
            pid: 42,
            socket: Some(PathBuf::from("/home/u/.local/state/rootsd/rootsd.sock")),
        };
        let line = record.to_line();
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        assert_eq!(Record::parse(&line), Some(record.clone()));
        assert_eq!(Record::parse(&line[..line.len() / 2]), None);
        assert_eq!(Record::parse(""), None);
        assert_eq!(Record::parse("pid 42, socket /x"), None);
        assert_eq!(
            record.describe(),
            "pid 42, socket /home/u/.local/state/rootsd/rootsd.sock"
        );
    }
}
