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

use rootsd_proto::paths::{self, Environment, StateDirSource};
use rootsd_proto::rendezvous::{LOCK_FILE, POINTER_FILE, Pointer, Record};

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

/// Leaves, or clears, the pointer by which a client that sees only `HOME` finds this state
/// directory ([`rootsd_proto::rendezvous::Pointer`]). A daemon whose state directory came from
/// `XDG_STATE_HOME` writes one into `~/.local/state/rootsd`; a daemon in that directory itself
/// removes a pointer it finds there, since the newest daemon's choice is the user's. Directories
/// chosen explicitly (`--state-dir`, `ROOTSD_STATE_DIR`) or by systemd leave it alone: their
/// clients are told by the same configuration, or reach the unit's socket.
///
/// Failing here does not stop the daemon, which serves every client that computes its state
/// directory; the warning says who will miss it.
pub fn leave_pointer(env: &Environment, state_dir: &Path, source: StateDirSource) {
    let Some(home_dir) = paths::home_state_dir(env) else {
        return;
    };
    let pointer = home_dir.join(POINTER_FILE);
    let result = match source {
        StateDirSource::XdgStateHome if home_dir != state_dir => write_pointer(
            &home_dir,
            &Pointer {
                state_dir: state_dir.to_owned(),
            },
        ),
        StateDirSource::Home => match fs::remove_file(&pointer) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        },
        _ => Ok(()),
    };
    if let Err(error) = result {
        tracing::warn!(
            pointer = %pointer.display(),
            "could not update the pointer to the state directory ({error}): clients started without XDG_STATE_HOME, as hosts start MCP servers, may not find this rootsd"
        );
    }
}

/// Writes the pointer atomically and durably: a client reads the old pointer or the new one,
/// and after a crash the pointer still leads to the store it named.
fn write_pointer(home_dir: &Path, pointer: &Pointer) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(home_dir)?;
    let path = home_dir.join(POINTER_FILE);
    let temporary = home_dir.join(format!("{POINTER_FILE}.{}", std::process::id()));
    let mut file = File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(pointer.to_line().as_bytes())?;
    file.sync_data()?;
    fs::rename(&temporary, &path)?;
    File::open(home_dir)?.sync_all()
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
    make_private(state_dir)?;
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

/// Makes an existing state directory, and what rootsd keeps in it, private to its user again:
/// earlier versions created the database readable by others, and a user may have loosened the
/// directory. A directory of another user is refused: its owner, not rootsd, decides about it.
fn make_private(state_dir: &Path) -> Result<(), InstanceError> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let me = rustix::process::geteuid().as_raw();
    let meta = fs::metadata(state_dir).map_err(|error| InstanceError::Io {
        action: "inspect the state directory",
        path: state_dir.to_owned(),
        error,
    })?;
    if meta.uid() != me {
        return Err(InstanceError::StateDirOwner {
            path: state_dir.to_owned(),
            owner: meta.uid(),
            me,
        });
    }
    let mut repaired = Vec::new();
    let mut pending = vec![state_dir.to_owned()];
    while let Some(path) = pending.pop() {
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let kind = meta.file_type();
        if kind.is_symlink() || meta.uid() != me {
            continue;
        }
        let mode = meta.permissions().mode() & 0o7777;
        let private = if kind.is_dir() {
            mode & !0o077 | 0o700
        } else {
            mode & !0o077
        };
        if kind.is_dir()
            && (path == state_dir || path.file_name().is_some_and(|n| n == "db"))
            && let Ok(entries) = fs::read_dir(&path)
        {
            pending.extend(entries.flatten().map(|e| e.path()));
        }
        if private != mode {
            fs::set_permissions(&path, fs::Permissions::from_mode(private)).map_err(|error| {
                InstanceError::Io {
                    action: "make private",
                    path: path.clone(),
                    error,
                }
            })?;
            repaired.push(format!("{} ({mode:04o} → {private:04o})", path.display()));
        }
    }
    if !repaired.is_empty() {
        tracing::warn!(
            "the state directory was open to other users, who could read your roots; made private: {}",
            repaired.join(", ")
        );
    }
    Ok(())
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

    #[test]
    fn a_state_directory_from_xdg_state_home_is_pointed_at_from_home_and_home_clears_it() {
        let dir = tempfile::tempdir().unwrap();
        let env = Environment {
            home: Some(dir.path().join("home").into()),
            uid: 1000,
            ..Environment::default()
        };
        let home_dir = paths::home_state_dir(&env).unwrap();
        let pointer = home_dir.join(POINTER_FILE);
        let xdg = dir.path().join("xdg/state/rootsd");

        leave_pointer(&env, &xdg, StateDirSource::Explicit);
        leave_pointer(&env, &xdg, StateDirSource::Systemd);
        assert!(
            !pointer.exists(),
            "explicit and systemd directories leave none"
        );

        leave_pointer(&env, &xdg, StateDirSource::XdgStateHome);
        let read = Pointer::parse(&fs::read_to_string(&pointer).unwrap());
        assert_eq!(read.map(|p| p.state_dir), Some(xdg.clone()));
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            fs::metadata(&home_dir).unwrap().permissions().mode() & 0o777,
            0o700
        );

        leave_pointer(&env, &home_dir, StateDirSource::XdgStateHome);
        assert!(
            pointer.exists(),
            "XDG_STATE_HOME leading home needs no pointer"
        );
        leave_pointer(&env, &home_dir, StateDirSource::Home);
        assert!(!pointer.exists(), "a daemon at home clears the pointer");
        leave_pointer(&env, &home_dir, StateDirSource::Home);
    }

    #[test]
    fn a_state_directory_open_to_others_is_made_private_with_its_contents() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        fs::create_dir_all(state.join("db")).unwrap();
        fs::write(state.join("db/db"), "x").unwrap();
        fs::write(state.join("roots.journal"), "x").unwrap();
        for (path, mode) in [
            (state.clone(), 0o755),
            (state.join("db"), 0o755),
            (state.join("db/db"), 0o644),
            (state.join("roots.journal"), 0o644),
        ] {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        }
        let _lock = acquire(&state).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state), 0o700);
        assert_eq!(mode(&state.join("db")), 0o700);
        assert_eq!(mode(&state.join("db/db")), 0o600);
        assert_eq!(mode(&state.join("roots.journal")), 0o600);
    }
}
