//! One daemon per state directory, enforced with an exclusive lock on `rootsd.lock`.
//!
//! The lock file also records who holds it and where it listens ([`rootsd_proto::rendezvous`]):
//! a second instance names the first in its error, and clients started with less of the
//! environment (as hosts start MCP servers) find the socket there. The kernel drops the lock
//! when the process dies however it dies, so there is never a stale lock to clean up.

use std::fs::{self, File, TryLockError};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::FileExt as _;
use std::path::Path;

use rootsd_proto::rendezvous::{LOCK_FILE, Record};

pub use crate::error::InstanceError;

/// Held for the daemon's whole life; releasing it lets another instance start.
#[derive(Debug)]
pub struct InstanceLock {
    file: File,
    path: std::path::PathBuf,
}

impl InstanceLock {
    /// Records where the daemon listens, once it does, for clients to find
    /// ([`rootsd_proto::rendezvous`]).
    pub fn record_socket(&mut self, socket: &Path) -> Result<(), InstanceError> {
        write_record(
            &mut self.file,
            &self.path,
            &Record {
                pid: std::process::id(),
                socket: Some(socket.to_owned()),
            },
        )
    }
}

fn write_record(file: &mut File, path: &Path, record: &Record) -> Result<(), InstanceError> {
    // One write of one line: a reader sees the old record, nothing, or the new one, and parses
    // only a whole line.
    file.set_len(0)
        .and_then(|()| file.write_all_at(record.to_line().as_bytes(), 0))
        .map_err(|error| InstanceError::Io {
            action: "write the lock file",
            path: path.to_owned(),
            error,
        })
}

/// How long a starting daemon keeps trying for its lock. Clients looking for a running daemon
/// take a shared lock for an instant ([`rootsd_proto::rendezvous`]); that must not make a daemon
/// starting at the same instant think another one runs.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(100);

fn try_lock(file: &File) -> Result<(), TryLockError> {
    let deadline = std::time::Instant::now() + LOCK_PATIENCE;
    loop {
        match file.try_lock() {
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            other => return other,
        }
    }
}

/// Creates `state_dir` (mode 0700) if needed and takes its instance lock. The record names this
/// process as still starting until [`InstanceLock::record_socket`].
pub fn acquire(state_dir: &Path) -> Result<InstanceLock, InstanceError> {
    let io_err = |action, path: &Path| {
        let path = path.to_owned();
        move |error| InstanceError::Io {
            action,
            path,
            error,
        }
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .map_err(io_err("create the state directory", state_dir))?;
    let lock_path = state_dir.join(LOCK_FILE);
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(io_err("open the lock file", &lock_path))?;
    match try_lock(&file) {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let holder = fs::read_to_string(&lock_path)
                .ok()
                .and_then(|t| Record::parse(&t))
                .map_or_else(|| "holder unknown".to_owned(), |r| r.describe());
            return Err(InstanceError::AlreadyRunning {
                state_dir: state_dir.to_owned(),
                holder,
            });
        }
        Err(TryLockError::Error(error)) => {
            return Err(InstanceError::Io {
                action: "lock",
                path: lock_path,
                error,
            });
        }
    }
    write_record(
        &mut file,
        &lock_path,
        &Record {
            pid: std::process::id(),
            socket: None,
        },
    )?;
    Ok(InstanceLock {
        file,
        path: lock_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_first_holder() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = acquire(dir.path()).unwrap();
        first.record_socket(Path::new("/s.sock")).unwrap();
        let err = acquire(dir.path()).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("already running"), "{message}");
        assert!(
            message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        assert!(message.contains("/s.sock"), "{message}");
        let record = Record::parse(&fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap());
        assert_eq!(
            record.and_then(|r| r.socket),
            Some(std::path::PathBuf::from("/s.sock"))
        );
    }
}
