//! Whether each root's directory is there for servers to use. `rootsctl list` marks the roots
//! whose directory is gone, `rootsctl list --long --json` says why, and `rootsctl doctor` names
//! them.
//!
//! The check runs here, in the CLI, because the CLI runs as the user and in the user's mount
//! namespace, as the user's servers do; the daemon may be a system service that sees neither,
//! and it never touches the filesystem. This module only looks (`stat`, then `access` with the
//! effective ids): it never creates, mounts or changes anything, and it decides nothing for the
//! daemon or the servers, which are still given every root and check for themselves.
//!
//! A filesystem may hang (an NFS server that went away, a stuck FUSE daemon), so the looks run
//! on helper threads under one deadline, [`TIME_LIMIT`] for all roots together: a root whose
//! look has not answered by then is reported as unknown, and the caller waits no longer. A
//! helper stuck in the kernel is left behind; it holds nothing, and ends with the process.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use rootsd_proto::Root;
use serde::Serialize;

/// How long checking every root may take in all, however many roots and however many hung
/// filesystems. Long enough for a network filesystem that is slow but working, short enough
/// that `rootsctl list` stays an interactive command.
pub const TIME_LIMIT: Duration = Duration::from_secs(2);

/// At most this many helper threads look at once: enough that a few hung mounts do not hold
/// up the rest, few enough that a workspace of thousands of roots does not start thousands.
const MAX_HELPERS: usize = 16;

/// What rootsctl found at a root's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Presence {
    /// A directory this user can list and enter.
    Present,
    Gone(Gone),
    /// Not a local `file://` URI, so there is no path here to look at.
    NotChecked,
}

/// Why a root's directory is not there for servers, as `list --long --json` prints it:
/// `{"reason":"missing","detail":"no such file or directory"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Gone {
    /// For programs: one of a fixed set of words.
    pub reason: Reason,
    /// For people: what exactly was found, in plain words. Its wording may change.
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Nothing is at the path (`ENOENT`), or something on the way to it is not a directory
    /// (`ENOTDIR`): deleted, renamed, or on a filesystem that is not mounted.
    Missing,
    /// Something other than a directory is at the path.
    NotADirectory,
    /// Permission denied: this user cannot reach it, list it, or enter it.
    Unreadable,
    /// The look failed otherwise (the error is the detail), or its filesystem did not answer
    /// within [`TIME_LIMIT`].
    Unknown,
}

impl Reason {
    /// The reason for people, as the STATUS column and doctor show it.
    pub fn words(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::NotADirectory => "not a directory",
            Self::Unreadable => "unreadable",
            Self::Unknown => "unknown",
        }
    }
}

impl Gone {
    fn new(reason: Reason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }
}

impl std::fmt::Display for Gone {
    /// `missing: no such file or directory`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason.words(), self.detail)
    }
}

impl Presence {
    /// What `rootsctl list` shows in its STATUS column.
    pub fn status(&self) -> String {
        match self {
            Self::Present => "ok".to_owned(),
            Self::Gone(gone) => gone.to_string(),
            Self::NotChecked => "not checked (not a local file:// URI)".to_owned(),
        }
    }

    pub fn gone(&self) -> Option<&Gone> {
        match self {
            Self::Gone(gone) => Some(gone),
            Self::Present | Self::NotChecked => None,
        }
    }
}

/// What one look at a path found, before it is judged by [`classify`]: the results of the calls
/// themselves, so that tests can give any of them.
#[derive(Debug)]
pub enum Observation {
    /// `stat` (which follows symlinks, as servers do) failed.
    Unreachable(io::Error),
    /// `stat` found something other than a directory.
    NotDirectory(Kind),
    /// `stat` found a directory; whether this user may list it (`access(R_OK)`) and enter it
    /// (`access(X_OK)`), judged with the effective ids as the kernel will judge the servers'.
    Directory {
        list: io::Result<()>,
        enter: io::Result<()>,
    },
}

/// The kind of file found where a directory should be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Socket,
    Fifo,
    Device,
    Other,
}

impl Kind {
    fn of(file_type: fs::FileType) -> Self {
        if file_type.is_file() {
            Self::File
        } else if file_type.is_socket() {
            Self::Socket
        } else if file_type.is_fifo() {
            Self::Fifo
        } else if file_type.is_block_device() || file_type.is_char_device() {
            Self::Device
        } else {
            Self::Other
        }
    }

    fn described(self) -> &'static str {
        match self {
            Self::File => "a regular file",
            Self::Socket => "a socket",
            Self::Fifo => "a named pipe",
            Self::Device => "a device",
            Self::Other => "something other than a directory",
        }
    }
}

/// Looks at `path` as a server would reach it.
pub fn look(path: &Path) -> Observation {
    match fs::metadata(path) {
        Err(error) => Observation::Unreachable(error),
        Ok(meta) if !meta.is_dir() => Observation::NotDirectory(Kind::of(meta.file_type())),
        Ok(_) => Observation::Directory {
            list: allowed(path, rustix::fs::Access::READ_OK),
            enter: allowed(path, rustix::fs::Access::EXEC_OK),
        },
    }
}

/// `access` with the effective ids (`AT_EACCESS`): a process running as root without the
/// capabilities that override permission bits is refused, as it would be when opening.
pub(crate) fn allowed(path: &Path, access: rustix::fs::Access) -> io::Result<()> {
    use rustix::fs::{AtFlags, CWD};
    match rustix::fs::accessat(CWD, path, access, AtFlags::EACCESS) {
        // `access` refuses with EACCES, never EPERM; EPERM is a container's syscall filter that
        // predates `faccessat2` refusing the call itself. Plain `access` judges with the real
        // ids, which for rootsctl (never set-uid) are the effective ones.
        Err(rustix::io::Errno::PERM) => rustix::fs::access(path, access),
        answer => answer,
    }
    .map_err(io::Error::from)
}

/// Judges one look.
pub fn classify(observation: Observation) -> Presence {
    let gone = match observation {
        Observation::Unreachable(error) => unreachable(&error),
        Observation::NotDirectory(kind) => {
            Gone::new(Reason::NotADirectory, format!("it is {}", kind.described()))
        }
        Observation::Directory { list, enter } => match (list, enter) {
            (Ok(()), Ok(())) => return Presence::Present,
            // Deleted between the calls.
            (Err(e), _) | (_, Err(e)) if e.kind() == io::ErrorKind::NotFound => unreachable(&e),
            (Err(list), Err(enter)) if denied(&list) && denied(&enter) => Gone::new(
                Reason::Unreadable,
                "cannot list or enter it: permission denied",
            ),
            (Err(list), _) if denied(&list) => Gone::new(
                Reason::Unreadable,
                "cannot list it: permission denied (no read permission)",
            ),
            (_, Err(enter)) if denied(&enter) => Gone::new(
                Reason::Unreadable,
                "cannot enter it: permission denied (no search permission)",
            ),
            (Err(other), _) | (_, Err(other)) => Gone::new(Reason::Unknown, other.to_string()),
        },
    };
    Presence::Gone(gone)
}

/// Why `stat` failed, judged.
fn unreachable(error: &io::Error) -> Gone {
    match error.kind() {
        io::ErrorKind::NotFound => Gone::new(Reason::Missing, "no such file or directory"),
        io::ErrorKind::NotADirectory => {
            Gone::new(Reason::Missing, "something on its path is not a directory")
        }
        io::ErrorKind::PermissionDenied => Gone::new(
            Reason::Unreadable,
            "cannot reach it: permission denied on a directory above it",
        ),
        _ => Gone::new(Reason::Unknown, error.to_string()),
    }
}

fn denied(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::PermissionDenied
}

/// Checks every root's directory, taking at most [`TIME_LIMIT`] in all, and returns one
/// [`Presence`] per root, in order. Blocks the calling thread meanwhile.
pub fn check(roots: &[&Root]) -> Vec<Presence> {
    check_with(roots, TIME_LIMIT, look)
}

/// [`check`] with its time limit and its look given: tests give a look that hangs.
fn check_with(
    roots: &[&Root],
    limit: Duration,
    look: impl Fn(&Path) -> Observation + Send + Sync + 'static,
) -> Vec<Presence> {
    // The same directory in several workspaces (`list --all`) is looked at once.
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut index_of: HashMap<PathBuf, usize> = HashMap::new();
    let slots: Vec<Option<usize>> = roots
        .iter()
        .map(|root| {
            let path = rootsd_proto::root::path_from_uri(&root.uri).ok()?;
            Some(*index_of.entry(path.clone()).or_insert_with(|| {
                paths.push(path);
                paths.len() - 1
            }))
        })
        .collect();
    let found = look_all(paths, limit, look);
    slots
        .into_iter()
        .map(|slot| slot.map_or(Presence::NotChecked, |i| found[i].clone()))
        .collect()
}

/// Looks at every path on up to [`MAX_HELPERS`] helper threads, and judges whatever answered
/// within `limit`; the rest are unknown.
fn look_all(
    paths: Vec<PathBuf>,
    limit: Duration,
    look: impl Fn(&Path) -> Observation + Send + Sync + 'static,
) -> Vec<Presence> {
    let count = paths.len();
    if count == 0 {
        return Vec::new();
    }
    let deadline = Instant::now() + limit;
    let paths: Arc<[PathBuf]> = paths.into();
    let look = Arc::new(look);
    // The next path a helper takes; set past the end at the deadline, which stops them.
    let next = Arc::new(AtomicUsize::new(0));
    let (sender, answers) = mpsc::channel::<(usize, Observation)>();
    let mut helpers = 0;
    let mut refused = None;
    for _ in 0..count.min(MAX_HELPERS) {
        let (paths, look, next, sender) =
            (paths.clone(), look.clone(), next.clone(), sender.clone());
        let spawned = std::thread::Builder::new()
            .name("rootsctl-look".into())
            .spawn(move || {
                loop {
                    let index = next.fetch_add(1, Ordering::SeqCst);
                    let Some(path) = paths.get(index) else { return };
                    if sender.send((index, look(path))).is_err() {
                        return;
                    }
                }
            });
        match spawned {
            Ok(_detached) => helpers += 1,
            Err(error) => {
                refused = Some(error);
                break;
            }
        }
    }
    drop(sender);
    if let (0, Some(error)) = (helpers, refused) {
        let detail = format!("not checked: could not start a thread to look: {error}");
        return vec![Presence::Gone(Gone::new(Reason::Unknown, detail)); count];
    }
    let mut found: Vec<Option<Presence>> = vec![None; count];
    let mut answered = 0;
    while answered < count {
        let left = deadline.saturating_duration_since(Instant::now());
        // A timeout ends the wait; so does every helper having gone, which cannot happen
        // before every path was answered unless one panicked.
        let Ok((index, observation)) = answers.recv_timeout(left) else {
            break;
        };
        found[index] = Some(classify(observation));
        answered += 1;
    }
    let started = next.swap(count, Ordering::SeqCst).min(count);
    found
        .into_iter()
        .enumerate()
        .map(|(index, found)| {
            found.unwrap_or_else(|| Presence::Gone(no_answer(index < started, limit)))
        })
        .collect()
}

/// A root whose look did not answer in time: started, and its filesystem hangs; or never
/// started, because every helper was held up by hanging filesystems.
fn no_answer(started: bool, limit: Duration) -> Gone {
    let limit = if limit.subsec_millis() == 0 {
        format!("{}s", limit.as_secs())
    } else {
        format!("{}ms", limit.as_millis())
    };
    Gone::new(
        Reason::Unknown,
        if started {
            format!("its filesystem did not answer within {limit} (a hung network mount?)")
        } else {
            format!("not checked: other roots' filesystems were still not answering after {limit}")
        },
    )
}

#[cfg(test)]
mod tests;
