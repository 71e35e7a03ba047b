//! Finding the user's daemon, whatever part of the environment this rootsctl was started with.
//!
//! Hosts start MCP servers, and so `rootsctl proxy`, with only `HOME LOGNAME PATH SHELL TERM USER`.
//! Computing the socket from the environment alone would then point a proxy at a different path
//! than the user's shell uses. So, unless a socket is given explicitly, rootsctl first asks the
//! state directory (reachable from `HOME` alone): a running daemon holds the lock there and
//! records its socket ([`rootsd_proto::rendezvous`]). Only when no daemon runs does it compute a
//! path, and then it also tries systemd's user socket, which waits under `/run/user/$UID` even
//! when `XDG_RUNTIME_DIR` was stripped.

use std::fs::File;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rootsd_proto::paths::{self, Environment};
use rootsd_proto::rendezvous::{LOCK_FILE, Record};

/// How long a record may be missing while its daemon is writing it.
const RECORD_PATIENCE: Duration = Duration::from_millis(200);

/// Why rootsctl uses the socket it uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `--socket` or `ROOTSD_SOCKET`.
    Explicit,
    /// The running daemon recorded it in the state directory.
    Recorded { pid: u32, state_dir: PathBuf },
    /// systemd's user socket unit, found under `/run/user/$UID` without `XDG_RUNTIME_DIR`.
    UserUnit,
    /// Computed from this environment: nothing runs yet.
    Computed,
}

impl Source {
    /// The reason in words, for `doctor` and error messages.
    pub fn describe(&self) -> String {
        match self {
            Self::Explicit => "given by --socket or ROOTSD_SOCKET".to_owned(),
            Self::Recorded { pid, state_dir } => format!(
                "recorded by the running rootsd (pid {pid}) in {}",
                state_dir.join(LOCK_FILE).display()
            ),
            Self::UserUnit => {
                "where systemd's user socket unit listens (XDG_RUNTIME_DIR is not set here)"
                    .to_owned()
            }
            Self::Computed => "computed from this environment; no rootsd is running".to_owned(),
        }
    }
}

/// Where to reach the daemon, and why there.
#[derive(Clone, Debug)]
pub struct Located {
    pub socket: PathBuf,
    pub source: Source,
    /// The state directory a daemon of this user uses, when one can be named.
    pub state_dir: Option<PathBuf>,
}

/// Finds the socket: an explicit one, else the running daemon's, else systemd's user socket when
/// `XDG_RUNTIME_DIR` is missing, else the computed default (where an autostarted daemon binds).
pub fn locate(env: &Environment, explicit: Option<PathBuf>) -> Located {
    let state_dir = paths::state_dir(env, None).ok();
    if let Some(socket) = explicit.or_else(|| env.rootsd_socket.clone().map(PathBuf::from)) {
        return Located {
            socket,
            source: Source::Explicit,
            state_dir,
        };
    }
    if let Some(located) = state_dir.as_deref().and_then(recorded) {
        return located;
    }
    if env.xdg_runtime_dir.is_none() {
        let unit = paths::user_unit_socket(env.uid);
        if std::fs::symlink_metadata(&unit).is_ok_and(|m| m.file_type().is_socket()) {
            return Located {
                socket: unit,
                source: Source::UserUnit,
                state_dir,
            };
        }
    }
    Located {
        socket: paths::socket_path(env, None, state_dir.as_deref()),
        source: Source::Computed,
        state_dir,
    }
}

/// The socket the daemon holding `state_dir`'s lock recorded, if a daemon holds it.
pub fn recorded(state_dir: &Path) -> Option<Located> {
    let record = live_record(state_dir)?;
    Some(Located {
        socket: record.socket?,
        source: Source::Recorded {
            pid: record.pid,
            state_dir: state_dir.to_owned(),
        },
        state_dir: Some(state_dir.to_owned()),
    })
}

/// The record of the daemon that holds `state_dir`'s lock, if one does. A daemon that is still
/// writing its record gets a moment to finish.
pub fn live_record(state_dir: &Path) -> Option<Record> {
    let path = state_dir.join(LOCK_FILE);
    let file = File::open(&path).ok()?;
    if !held(&file) {
        return None;
    }
    let deadline = std::time::Instant::now() + RECORD_PATIENCE;
    loop {
        if let Some(record) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| Record::parse(&t))
        {
            return Some(record);
        }
        if std::time::Instant::now() >= deadline || !held(&file) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether someone holds the exclusive lock on `file`. The probe takes a shared lock for an
/// instant when nobody does; a daemon starting at that very instant retries its own lock for a
/// moment, so the probe never keeps it from starting.
fn held(file: &File) -> bool {
    use rustix::fs::{FlockOperation, flock};
    match flock(file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => {
            let _ = flock(file, FlockOperation::Unlock);
            false
        }
        Err(rustix::io::Errno::WOULDBLOCK) => true,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with_state(state: &Path) -> Environment {
        Environment {
            rootsd_state_dir: Some(state.as_os_str().to_owned()),
            uid: u32::MAX - 1,
            ..Environment::default()
        }
    }

    #[test]
    fn a_held_lock_with_a_record_wins_over_the_computed_path() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let env = env_with_state(&state);
        let computed = locate(&env, None);
        assert_eq!(computed.source, Source::Computed);
        assert_eq!(computed.socket, state.join("rootsd.sock"));

        let lock = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(state.join(LOCK_FILE))
            .unwrap();
        let record = Record {
            pid: 7,
            socket: Some(PathBuf::from("/elsewhere/rootsd.sock")),
        };
        std::fs::write(state.join(LOCK_FILE), record.to_line()).unwrap();
        assert_eq!(
            locate(&env, None).source,
            Source::Computed,
            "a record whose lock nobody holds is stale"
        );
        lock.try_lock().unwrap();
        let found = locate(&env, None);
        assert_eq!(found.socket, PathBuf::from("/elsewhere/rootsd.sock"));
        assert!(matches!(found.source, Source::Recorded { pid: 7, .. }));
        assert_eq!(
            locate(&env, Some(PathBuf::from("/given.sock"))).source,
            Source::Explicit
        );
    }
}
