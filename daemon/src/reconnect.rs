//! Which sessions a restarted daemon expects back, so that `wait` right after a start does not
//! report `0 of 0` while live proxies are still reconnecting.
//!
//! The daemon keeps a small record of its live sessions in its state directory
//! (`sessions.json`): each proxy's stable instance id (`session.register`'s `instance`), its
//! workspace, label and pid. The record is advisory: it is not part of the store, never goes
//! through the journal, and is written (atomically, by rename, without `fdatasync`) by one task
//! a moment after the session table changes, so registrations cost nothing but a wake-up. Once a
//! shutdown starts the record is no longer written: the table empties as connections close, and
//! the record must still say who was connected.
//!
//! At start the record is read once. For [`RECONNECT_WINDOW`] the sessions it names whose
//! process still runs are expected back: `wait` waits for them too, and reports those not back
//! when the window closes. A record that cannot be read is said so by `wait`, since the daemon
//! then cannot know who will come back; a missing one (a first start) means nobody is expected.

use std::collections::HashMap;
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::time::Instant;

use rootsd_proto::WorkspaceName;
use rootsd_proto::wire::PreviousSession;
use serde::{Deserialize, Serialize};

use crate::limits::{MAX_CONNECTIONS, RECONNECT_WINDOW, SESSION_RECORD_BYTES};

/// The record's file name in the state directory.
pub const RECORD_FILE: &str = "sessions.json";
const RECORD_VERSION: u32 = 1;

/// One live session as the record keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedSession {
    /// The proxy's own id, the same across its reconnections.
    pub instance: String,
    pub workspace: WorkspaceName,
    pub label: String,
    /// The pid the proxy reported.
    pub pid: u32,
    /// The proxy's pid as the daemon's kernel gave it (its peer credentials), by which a new
    /// start tells whether the process still runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_pid: Option<u32>,
}

#[derive(Serialize, Deserialize)]
struct RecordFile {
    version: u32,
    sessions: Vec<RecordedSession>,
}

/// What a start found in the record.
#[derive(Debug, PartialEq, Eq)]
pub enum Loaded {
    /// No record: no run before this one recorded sessions.
    Absent,
    Sessions(Vec<RecordedSession>),
    /// A record that could not be read, and why.
    Unreadable(String),
}

/// Reads the record in `state_dir`, at most [`SESSION_RECORD_BYTES`] of it.
pub fn load(state_dir: &Path) -> Loaded {
    let path = state_dir.join(RECORD_FILE);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Loaded::Absent,
        Err(err) => return Loaded::Unreadable(format!("cannot open {}: {err}", path.display())),
    };
    let mut bytes = Vec::new();
    if let Err(err) = file.take(SESSION_RECORD_BYTES + 1).read_to_end(&mut bytes) {
        return Loaded::Unreadable(format!("cannot read {}: {err}", path.display()));
    }
    if bytes.len() as u64 > SESSION_RECORD_BYTES {
        return Loaded::Unreadable(format!(
            "{} is larger than {SESSION_RECORD_BYTES} bytes",
            path.display()
        ));
    }
    match serde_json::from_slice::<RecordFile>(&bytes) {
        Ok(record) if record.version == RECORD_VERSION => {
            let mut sessions = record.sessions;
            sessions.truncate(MAX_CONNECTIONS);
            Loaded::Sessions(sessions)
        }
        Ok(record) => Loaded::Unreadable(format!(
            "{} is of version {}, which this rootsd does not know",
            path.display(),
            record.version
        )),
        Err(err) => Loaded::Unreadable(format!("{} is damaged: {err}", path.display())),
    }
}

/// Replaces the record in `state_dir` with `sessions`, atomically: a reader (the next start)
/// sees the old record or the new one, never part of one. Not synced: after a power loss an
/// old record, or none, only makes one `wait` less informed.
pub fn write(state_dir: &Path, sessions: &[RecordedSession]) -> io::Result<()> {
    let record = RecordFile {
        version: RECORD_VERSION,
        sessions: sessions.to_vec(),
    };
    let text = serde_json::to_vec(&record).expect("the record always serialises");
    let temporary = state_dir.join(format!("{RECORD_FILE}.tmp"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(&text)?;
    drop(file);
    std::fs::rename(&temporary, state_dir.join(RECORD_FILE))
}

/// The previous run's sessions still expected back, and until when.
#[derive(Debug)]
pub struct Expected {
    until: Instant,
    /// By instance id; a session leaves when it registers again.
    awaited: HashMap<String, RecordedSession>,
    /// The record could not be read: who will come back is unknown.
    unknown: bool,
}

/// Where the previous run's sessions of one workspace stand.
#[derive(Debug, Default)]
pub struct Returning {
    /// The reconnection window is still open.
    pub open: bool,
    pub until: Option<Instant>,
    /// The workspace's sessions of the previous run that have not registered again.
    pub awaited: Vec<PreviousSession>,
    /// The record could not be read.
    pub unknown: bool,
}

impl Expected {
    /// Nobody is expected (in-process tests, and daemons that read no record).
    pub fn nobody() -> Self {
        Self {
            until: Instant::now(),
            awaited: HashMap::new(),
            unknown: false,
        }
    }

    /// Expects back, from `started` for [`RECONNECT_WINDOW`], the recorded sessions whose
    /// process `runs` says still runs.
    pub fn from_record(loaded: Loaded, started: Instant, runs: impl Fn(u32) -> bool) -> Self {
        let until = started + RECONNECT_WINDOW;
        match loaded {
            Loaded::Absent => Self {
                until: started,
                ..Self::nobody()
            },
            Loaded::Unreadable(_) => Self {
                until,
                awaited: HashMap::new(),
                unknown: true,
            },
            Loaded::Sessions(sessions) => Self {
                until,
                awaited: sessions
                    .into_iter()
                    .filter(|s| !s.instance.is_empty() && runs(s.kernel_pid.unwrap_or(s.pid)))
                    .map(|s| (s.instance.clone(), s))
                    .collect(),
                unknown: false,
            },
        }
    }

    /// The session `instance` registered again.
    pub fn returned(&mut self, instance: &str) {
        self.awaited.remove(instance);
    }

    pub fn until(&self) -> Instant {
        self.until
    }

    /// The sessions still expected, for the record: a restart within the window must expect
    /// them too. None once the window has closed.
    pub fn still_expected(&self, now: Instant) -> impl Iterator<Item = &RecordedSession> {
        let open = now < self.until;
        self.awaited.values().filter(move |_| open)
    }

    /// Where `workspace`'s sessions of the previous run stand at `now`.
    pub fn of(&self, workspace: &WorkspaceName, now: Instant) -> Returning {
        let mut awaited: Vec<PreviousSession> = self
            .awaited
            .values()
            .filter(|s| &s.workspace == workspace)
            .map(|s| PreviousSession {
                label: s.label.clone(),
                pid: s.pid,
                workspace: s.workspace.clone(),
            })
            .collect();
        awaited.sort_by(|a, b| (a.pid, &a.label).cmp(&(b.pid, &b.label)));
        Returning {
            open: now < self.until,
            until: Some(self.until),
            awaited,
            unknown: self.unknown,
        }
    }
}

/// Whether process `pid` runs, as far as `/proc` shows.
pub fn runs(pid: u32) -> bool {
    pid != 0 && Path::new("/proc").join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(instance: &str, workspace: &str, pid: u32) -> RecordedSession {
        RecordedSession {
            instance: instance.into(),
            workspace: WorkspaceName::new(workspace).unwrap(),
            label: format!("label-{instance}"),
            pid,
            kernel_pid: Some(pid),
        }
    }

    #[test]
    fn a_record_written_is_read_back_and_a_damaged_one_is_said_so() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()), Loaded::Absent);
        let sessions = vec![session("a", "default", 10), session("b", "work", 11)];
        write(dir.path(), &sessions).unwrap();
        assert_eq!(load(dir.path()), Loaded::Sessions(sessions));
        std::fs::write(dir.path().join(RECORD_FILE), b"{\"version\":1,\"sess").unwrap();
        assert!(
            matches!(load(dir.path()), Loaded::Unreadable(why) if why.contains("damaged")),
            "a torn record is unreadable"
        );
    }

    #[test]
    fn only_running_sessions_are_expected_and_only_within_the_window() {
        let started = Instant::now();
        let loaded = Loaded::Sessions(vec![
            session("alive", "default", 10),
            session("dead", "default", 11),
            session("other", "work", 12),
            session("", "default", 13),
        ]);
        let mut expected = Expected::from_record(loaded, started, |pid| pid != 11);
        let default = WorkspaceName::default();
        let returning = expected.of(&default, started);
        assert!(returning.open && !returning.unknown);
        assert_eq!(
            returning.awaited.iter().map(|s| s.pid).collect::<Vec<_>>(),
            [10]
        );
        assert_eq!(expected.still_expected(started).count(), 2);
        expected.returned("alive");
        assert!(expected.of(&default, started).awaited.is_empty());
        let after = started + RECONNECT_WINDOW;
        assert!(!expected.of(&default, after).open);
        assert_eq!(expected.still_expected(after).count(), 0);
    }

    #[test]
    fn an_unreadable_record_makes_the_window_one_of_not_knowing() {
        let started = Instant::now();
        let expected = Expected::from_record(Loaded::Unreadable("x".into()), started, |_| true);
        let returning = expected.of(&WorkspaceName::default(), started);
        assert!(returning.open && returning.unknown && returning.awaited.is_empty());
        let nobody = Expected::from_record(Loaded::Absent, started, |_| true);
        assert!(!nobody.of(&WorkspaceName::default(), started).open);
    }
}
