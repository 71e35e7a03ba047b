//! Getting a listening socket: adopt the one systemd passed, or bind our own safely.
//!
//! Binding our own follows three rules:
//! - the socket's directory is created mode 0700; an existing one that other users may write to
//!   (sticky or not, `/tmp` itself included), or that belongs to another user, is refused (the
//!   rules live in [`rootsd_proto::modes`], shared with rootsctl and doctor);
//! - a socket file that answers belongs to a live daemon and is never touched;
//! - a dead socket file is reclaimed only if this state directory's records show rootsd created
//!   it (same device and inode); anything else at the path is left for the user to remove.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use interprocess::local_socket::tokio::Listener;
use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName};
use interprocess::os::unix::local_socket::ListenerOptionsExt as _;
use rootsd_proto::modes::{self, Perms, SocketDir};

pub use crate::error::{SocketError, SocketFileProblem};

/// Name of the file, inside the state directory, recording the socket rootsd bound.
const SOCKET_RECORD: &str = "socket.id";

/// A listener plus what must happen to its file at exit.
///
/// Dropping it removes the socket file rootsd created (never one systemd passed), so a start
/// that fails after binding leaves nothing behind that would make the next start refuse.
pub struct BoundSocket {
    // Declared before `closer`, so that the listener closes before its file is removed.
    pub listener: Listener,
    pub path: PathBuf,
    /// Whether systemd passed the socket (and so owns its file).
    pub activated: bool,
    closer: SocketCloser,
}

/// Identifies one socket file. Inode numbers are reused as soon as a file is deleted, so the
/// change time (to the nanosecond) is part of the identity: a new file that gets the same inode
/// has a different one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    ctime: i64,
    ctime_nsec: i64,
}

impl FileId {
    fn of(meta: &fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            ctime: meta.ctime(),
            ctime_nsec: meta.ctime_nsec(),
        }
    }

    fn encode(self) -> String {
        format!(
            "{} {} {} {}\n",
            self.dev, self.ino, self.ctime, self.ctime_nsec
        )
    }

    fn decode(text: &str) -> Option<Self> {
        let mut parts = text.split_whitespace();
        Some(Self {
            dev: parts.next()?.parse().ok()?,
            ino: parts.next()?.parse().ok()?,
            ctime: parts.next()?.parse().ok()?,
            ctime_nsec: parts.next()?.parse().ok()?,
        })
    }
}

/// Takes the socket systemd passed with `LISTEN_FDS`, if any.
///
/// Call this before starting any thread: listenfd removes `LISTEN_FDS` and `LISTEN_PID` from the
/// environment, which is only sound while no other thread can be reading it. Then hand the
/// listener to [`adopt`] inside the runtime.
pub fn take_inherited() -> Result<Option<std::os::unix::net::UnixListener>, SocketError> {
    listenfd::ListenFd::from_env()
        .take_unix_listener(0)
        .map_err(SocketError::Inherited)
}

/// Serves on the socket systemd passed. Its file belongs to systemd and is never removed: the
/// listener gets no clean-up guard, and the returned socket records nothing to remove.
///
/// Must run inside the tokio runtime, which the listener registers with.
pub fn adopt(
    std_listener: std::os::unix::net::UnixListener,
    configured: &Path,
) -> Result<BoundSocket, SocketError> {
    use interprocess::os::unix::uds_local_socket::tokio::Listener as UdsListener;
    let actual = std_listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(Path::to_path_buf));
    let fd = std::os::fd::OwnedFd::from(std_listener);
    let listener: Listener = UdsListener::try_from(fd)
        .map_err(SocketError::Inherited)?
        .into();
    let path = match actual {
        Some(actual) if actual != configured => {
            tracing::warn!(
                configured = %configured.display(),
                inherited = %actual.display(),
                "systemd's socket is not at the configured path; clients must use the inherited one"
            );
            actual
        }
        Some(actual) => actual,
        None => configured.to_path_buf(),
    };
    Ok(BoundSocket {
        listener,
        closer: SocketCloser {
            path: path.clone(),
            created: Identity::default(),
            record: None,
        },
        path,
        activated: true,
    })
}

/// Binds a new socket at `path`, reclaiming a stale one only if we made it.
///
/// The caller must hold the state directory's instance lock: that is what makes removing a dead
/// socket safe against another rootsd of the same state directory binding at the same moment.
pub fn bind(path: &Path, state_dir: &Path) -> Result<BoundSocket, SocketError> {
    check(path, true)?;
    if let Ok(meta) = fs::symlink_metadata(path) {
        reclaim_if_stale(path, state_dir, &meta)?;
    }
    let io_err = |action, error| SocketError::Io {
        action,
        path: path.to_owned(),
        error,
    };
    let name = path
        .to_fs_name::<GenericFilePath>()
        .map_err(|e| io_err("name the socket", e))?;
    let listener = ListenerOptions::new()
        .name(name)
        .mode(modes::SOCKET_MODE)
        .reclaim_name(false)
        .create_tokio()
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AddrInUse {
                SocketError::InUse {
                    path: path.to_owned(),
                }
            } else {
                io_err("bind the socket at", e)
            }
        })?;
    // From here on the file is ours: if any later step fails, dropping `bound` removes it (and
    // the record, which may be half written), so that the next start does not find a socket it
    // cannot tell from someone else's.
    let identity = |path: &Path| {
        fs::symlink_metadata(path)
            .map(|meta| FileId::of(&meta))
            .map_err(|e| io_err("inspect", e))
    };
    let mut bound = BoundSocket {
        listener,
        path: path.to_owned(),
        activated: false,
        closer: SocketCloser {
            path: path.to_owned(),
            created: Identity::default(),
            record: None,
        },
    };
    bound.closer.created.set(Some(identity(path)?));
    // The sticky bit exempts the file from the periodic clean-up the XDG base directory
    // specification allows in $XDG_RUNTIME_DIR, which would otherwise leave a running daemon
    // that nobody can reach. It changes nothing else for a socket.
    fs::set_permissions(
        path,
        fs::Permissions::from_mode(0o1000 | modes::SOCKET_MODE),
    )
    .map_err(|e| io_err("set the sticky bit on", e))?;
    // Changing the mode changed the file's ctime, which is part of its identity.
    let id = identity(path)?;
    bound.closer.created.set(Some(id));
    let record = state_dir.join(SOCKET_RECORD);
    bound.closer.record = Some(record.clone());
    fs::write(&record, id.encode()).map_err(|e| io_err("record the socket identity for", e))?;
    Ok(bound)
}

/// Removes the socket file rootsd created, and its record, when closed or dropped: at exit, and
/// when a start fails after binding.
pub struct SocketCloser {
    path: PathBuf,
    created: Identity,
    record: Option<PathBuf>,
}

/// The identity of the socket file rootsd created (`None` when systemd owns the file), shared
/// by the closer that removes it at exit and the [`SocketFile`] that SIGHUP re-checks, so that a
/// socket bound anew ([`rebind`]) is the one both know.
#[derive(Clone, Debug, Default)]
struct Identity(std::sync::Arc<std::sync::Mutex<Option<FileId>>>);

impl Identity {
    fn get(&self) -> Option<FileId> {
        *self.0.lock().expect("socket identity lock")
    }

    fn set(&self, id: Option<FileId>) {
        *self.0.lock().expect("socket identity lock") = id;
    }
}

/// What clients need in order to reach the daemon: the socket file at its path. Kept apart from
/// the listener so that it can be re-checked while [`crate::server::run`] owns the listener.
#[derive(Clone, Debug)]
pub struct SocketFile {
    path: PathBuf,
    /// The identity of the file we created; `None` when systemd owns the file.
    created: Identity,
}

impl SocketFile {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks that the file clients connect to is still the one we listen on. For a socket rootsd
    /// bound that is an exact identity; a socket systemd passed can only be checked to still be
    /// a socket at its path.
    pub fn check(&self) -> Result<(), SocketFileProblem> {
        let path = self.path.clone();
        let meta = match fs::symlink_metadata(&self.path) {
            Ok(meta) => meta,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(SocketFileProblem::Missing { path });
            }
            Err(error) => return Err(SocketFileProblem::Unreadable { path, error }),
        };
        let same = match self.created.get() {
            Some(id) => FileId::of(&meta) == id,
            None => meta.file_type().is_socket(),
        };
        if same {
            Ok(())
        } else {
            Err(SocketFileProblem::Replaced { path })
        }
    }
}

impl SocketFile {
    /// Whether rootsd bound this socket itself (not systemd), and so may bind it anew.
    pub fn is_ours(&self) -> bool {
        self.created.get().is_some()
    }
}

/// Binds the socket anew at its path, once its file is gone (removed by a clean-up of the runtime
/// directory, or by hand), so that new clients reach this rootsd again: the same checks and modes
/// as at start, a new identity recorded in the state directory, and the clean-up at exit
/// following the new file. Returns the new listener, which replaces the old one (reachable by no
/// name any more) in the accept loop. Only for a socket rootsd bound itself; the caller holds the
/// instance lock, as at start.
pub fn rebind(file: &SocketFile, state_dir: &Path) -> Result<Listener, SocketError> {
    let fresh = bind(&file.path, state_dir)?;
    let (listener, closer) = fresh.split();
    // The record `bind` wrote stays: the original closer removes it at exit, with the file,
    // which it now knows by the new identity.
    file.created.set(closer.disarm());
    Ok(listener)
}

impl BoundSocket {
    /// The socket file, for re-checking it later (on SIGHUP).
    pub fn file(&self) -> SocketFile {
        SocketFile {
            path: self.path.clone(),
            created: self.closer.created.clone(),
        }
    }

    /// Separates the listener, which [`crate::server::run`] consumes, from the clean-up of its
    /// file.
    pub fn split(self) -> (Listener, SocketCloser) {
        (self.listener, self.closer)
    }
}

impl SocketCloser {
    /// Removes the socket file if, and only if, it is still the one we created. A socket systemd
    /// passed is never removed. Call after the listener is dropped; dropping the closer does the
    /// same.
    pub fn close(self) {}

    /// Gives up the clean-up, returning the identity of the file it would have removed.
    fn disarm(mut self) -> Option<FileId> {
        self.record = None;
        let id = self.created.get();
        self.created = Identity::default();
        id
    }

    fn remove(&mut self) {
        // After a clean exit there is nothing to reclaim, so nothing may ever match the record.
        if let Some(record) = self.record.take() {
            let _ = fs::remove_file(record);
        }
        let Some(id) = self.created.get() else {
            return;
        };
        self.created.set(None);
        let path = &self.path;
        match fs::symlink_metadata(path) {
            Ok(meta) if FileId::of(&meta) == id => {
                if let Err(err) = fs::remove_file(path) {
                    tracing::warn!(path = %path.display(), error = %err, "could not remove the socket");
                }
            }
            Ok(_) => tracing::warn!(
                path = %path.display(),
                "the socket file was replaced by someone else; leaving it"
            ),
            Err(_) => {}
        }
    }
}

impl Drop for SocketCloser {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Creates the socket's directory, or checks an existing one by [`modes::socket_dir`]'s rules:
/// one that others may write to, or that belongs to another user, is refused; ours open to
/// others earns a warning (`warn`: [`bind`] gives it, [`check_path`] before it does not, so
/// that a start says it once).
fn prepare_directory(dir: &Path, warn: bool) -> Result<(), SocketError> {
    let me = rustix::process::geteuid().as_raw();
    let meta = match fs::metadata(dir) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return fs::DirBuilder::new()
                .recursive(true)
                .mode(modes::SOCKET_DIR_MODE)
                .create(dir)
                .map_err(|error| SocketError::Io {
                    action: "create the socket directory",
                    path: dir.to_owned(),
                    error,
                });
        }
        Err(error) => {
            return Err(SocketError::Io {
                action: "inspect the socket directory",
                path: dir.to_owned(),
                error,
            });
        }
        Ok(meta) => meta,
    };
    let perms = Perms {
        uid: meta.uid(),
        gid: meta.gid(),
        mode: meta.permissions().mode() & 0o7777,
    };
    match modes::socket_dir(perms, me) {
        SocketDir::Private | SocketDir::System => Ok(()),
        SocketDir::OpenToOthers if !warn => Ok(()),
        SocketDir::OpenToOthers => {
            tracing::warn!(
                dir = %dir.display(),
                mode = format!("{:o}", perms.mode),
                "the socket directory is open to other users; the socket itself is still 0600 and other users are refused"
            );
            Ok(())
        }
        SocketDir::WritableByOthers => Err(SocketError::DirectoryWritable {
            path: dir.to_owned(),
            owner: perms.uid,
            mode: perms.mode,
            fix: writable_directory_fix(dir, perms, me),
        }),
        SocketDir::Foreign => Err(SocketError::DirectoryOwner {
            path: dir.to_owned(),
            owner: perms.uid,
            me,
        }),
    }
}

/// What to do about a socket directory others may write to. A shared directory (sticky, as
/// `/tmp` is) must stay open to everyone, so the answer is always a private directory of
/// rootsd's own; only a directory of this user's that is not shared may be closed instead.
fn writable_directory_fix(dir: &Path, perms: Perms, me: u32) -> String {
    const PRIVATE: &str = "pass a --socket in a private directory rootsd makes for itself (a missing one is created, mode 0700): $XDG_RUNTIME_DIR/rootsd/rootsd.sock for your own rootsd, or /run/rootsd/rootsd.sock for a system service run as root";
    let shared = perms.mode & 0o1000 != 0;
    if perms.uid == me && !shared {
        format!(
            "{PRIVATE}; or, as the directory is yours and not shared, remove group and other write access from it (chmod go-w {})",
            dir.display()
        )
    } else {
        PRIVATE.to_owned()
    }
}

/// Checks, before anything else is created, that rootsd may bind at `path`: its length, and its
/// directory by [`modes::socket_dir`]'s rules (creating it, mode 0700, when it is missing). So a
/// socket rootsd must refuse is refused before the state directory or the store is touched.
/// [`bind`] checks the same again when it binds.
pub fn check_path(path: &Path) -> Result<(), SocketError> {
    check(path, false)
}

fn check(path: &Path, warn: bool) -> Result<(), SocketError> {
    use std::os::unix::ffi::OsStrExt;
    let len = path.as_os_str().as_bytes().len();
    if len > 107 {
        return Err(SocketError::TooLong {
            path: path.to_owned(),
            len,
        });
    }
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => prepare_directory(dir, warn),
        None => Ok(()),
    }
}

fn reclaim_if_stale(path: &Path, state_dir: &Path, meta: &fs::Metadata) -> Result<(), SocketError> {
    if !meta.file_type().is_socket() {
        return Err(SocketError::Foreign {
            path: path.to_owned(),
            state_dir: state_dir.to_owned(),
        });
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(SocketError::InUse {
            path: path.to_owned(),
        });
    }
    let recorded = fs::read_to_string(state_dir.join(SOCKET_RECORD))
        .ok()
        .and_then(|t| FileId::decode(&t));
    if recorded != Some(FileId::of(meta)) {
        return Err(SocketError::Foreign {
            path: path.to_owned(),
            state_dir: state_dir.to_owned(),
        });
    }
    tracing::info!(path = %path.display(), "reclaiming the stale socket of a previous rootsd");
    fs::remove_file(path).map_err(|error| SocketError::Io {
        action: "remove the stale socket",
        path: path.to_owned(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_start_that_fails_after_binding_leaves_no_socket_and_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        fs::create_dir(&state).unwrap();
        let path = dir.path().join("run").join("rootsd.sock");
        let bound = bind(&path, &state).unwrap();
        assert!(path.exists() && state.join(SOCKET_RECORD).exists());
        // What main does when a step after binding fails: `bound` goes out of scope.
        drop(bound);
        assert!(!path.exists(), "the socket was left behind");
        assert!(
            !state.join(SOCKET_RECORD).exists(),
            "the record was left behind"
        );
        // So the next start binds without finding anything it cannot account for.
        let again = bind(&path, &state).unwrap();
        let (listener, closer) = again.split();
        drop(listener);
        closer.close();
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn a_failure_inside_bind_after_the_socket_exists_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        // The record cannot be written where a directory stands.
        fs::create_dir_all(state.join(SOCKET_RECORD)).unwrap();
        let path = dir.path().join("run").join("rootsd.sock");
        let err = bind(&path, &state).err().expect("bind fails");
        assert!(
            err.to_string().contains("record the socket identity"),
            "{err}"
        );
        assert!(!path.exists(), "the socket was left behind");
        assert!(
            state.join(SOCKET_RECORD).is_dir(),
            "a directory rootsd did not create is not its record to remove"
        );
    }
}
