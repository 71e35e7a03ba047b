//! One daemon per state directory, enforced with an exclusive lock on `rootsd.lock`.
//!
//! The lock file also records who holds it, so a second instance can name the first in its
//! error. The kernel drops the lock when the process dies however it dies, so there is never a
//! stale lock to clean up.

use std::fs::{self, File, TryLockError};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

const LOCK_FILE: &str = "rootsd.lock";

pub use crate::error::InstanceError;

/// Held for the daemon's whole life; releasing it lets another instance start.
#[derive(Debug)]
pub struct InstanceLock {
    _file: File,
}

/// Creates `state_dir` (mode 0700) if needed and takes its instance lock.
pub fn acquire(state_dir: &Path, socket: &Path) -> Result<InstanceLock, InstanceError> {
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
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let holder = fs::read_to_string(&lock_path)
                .ok()
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| "holder unknown".to_owned());
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
    let record = format!("pid {}, socket {}\n", std::process::id(), socket.display());
    file.set_len(0)
        .and_then(|()| file.write_all(record.as_bytes()))
        .map_err(io_err("write the lock file", &lock_path))?;
    Ok(InstanceLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_first_holder() {
        let dir = tempfile::tempdir().unwrap();
        let _first = acquire(dir.path(), Path::new("/s.sock")).unwrap();
        let err = acquire(dir.path(), Path::new("/other.sock")).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("already running"), "{message}");
        assert!(
            message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        assert!(message.contains("/s.sock"), "{message}");
    }
}
