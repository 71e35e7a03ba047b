//! Every error rootsd reports, in one place: what a request failed with (sent to the client as a
//! wire error code) and why the daemon could not start or keep serving (logged, then it exits).
//!
//! Messages read after "failed to …", or are full sentences that end with the fix. The modules
//! that raise these errors re-export them, so callers may name them from either place. This
//! module only defines errors: it does no I/O, and it does not name sled (the store's errors,
//! [`StoreError`], are defined in the store beside sled's opaque error they wrap, and re-exported
//! here).

use std::io;
use std::path::PathBuf;

use rootsd_proto::RootError;
use rootsd_proto::wire::{ErrorObject, code};

pub use crate::store::StoreError;

/// A request that failed; becomes a JSON-RPC error response and never closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    pub code: i64,
    pub message: String,
}

impl RequestError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn into_object(self) -> ErrorObject {
        ErrorObject::new(self.code, self.message)
    }
}

impl From<RootError> for RequestError {
    fn from(err: RootError) -> Self {
        Self::new(code::INVALID_ROOT, err.to_string())
    }
}

impl From<StoreError> for RequestError {
    fn from(err: StoreError) -> Self {
        tracing::error!(error = %err, "store failure; the change was not applied");
        Self::new(
            code::STORAGE,
            format!("{err}; nothing was changed, check the daemon's log and disk"),
        )
    }
}

/// Why no listener could be had ([`crate::socket`]).
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error(
        "another rootsd is already serving {path}: stop it first, or pass a different --socket"
    )]
    InUse { path: PathBuf },
    #[error(
        "{path} exists but was not created by this rootsd (state dir {state_dir}): remove it yourself if nothing uses it, or pass a different --socket"
    )]
    Foreign { path: PathBuf, state_dir: PathBuf },
    #[error(
        "the socket directory {path} belongs to uid {owner}, not to you (uid {me}): pass a --socket in a directory you own"
    )]
    DirectoryOwner { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "the socket directory {path} (owner uid {owner}, mode {mode:04o}) can be written by other users, who could put their own socket in rootsd's place: rootsd will not listen there; {fix}"
    )]
    DirectoryWritable {
        path: PathBuf,
        owner: u32,
        mode: u32,
        /// What to do instead ([`crate::socket`] words it): never to open up a shared
        /// directory such as `/tmp`.
        fix: String,
    },
    #[error("failed to {action} {path}: {error}")]
    Io {
        action: &'static str,
        path: PathBuf,
        error: io::Error,
    },
    #[error(
        "the socket path {path} is too long for a Unix socket ({len} bytes; the limit is 107): choose a shorter --socket"
    )]
    TooLong { path: PathBuf, len: usize },
    #[error("systemd passed a socket rootsd cannot use: {0}")]
    Inherited(io::Error),
}

/// Why clients can no longer reach the daemon through its socket file
/// ([`crate::socket::SocketFile::check`]).
#[derive(Debug, thiserror::Error)]
pub enum SocketFileProblem {
    #[error(
        "the socket file {path} is gone, so new clients cannot connect: restart rootsd (under systemd: `systemctl --user restart rootsd.socket`, which restarts the service too)"
    )]
    Missing { path: PathBuf },
    #[error(
        "{path} is no longer the socket rootsd listens on (someone replaced it), so new clients reach something else: restart rootsd"
    )]
    Replaced { path: PathBuf },
    #[error("could not inspect the socket file {path}: {error}")]
    Unreadable { path: PathBuf, error: io::Error },
}

/// Why this daemon may not run for its state directory ([`crate::instance`]).
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error(
        "rootsd is already running for state directory {state_dir} ({holder}): use it, or stop it before starting another"
    )]
    AlreadyRunning { state_dir: PathBuf, holder: String },
    #[error(
        "the state directory {path} belongs to uid {owner}, not to you (uid {me}): rootsd keeps your roots only in a directory of your own; pass --state-dir DIR or set ROOTSD_STATE_DIR"
    )]
    StateDirOwner { path: PathBuf, owner: u32, me: u32 },
    #[error("failed to {action} {path}: {error}")]
    Io {
        action: &'static str,
        path: PathBuf,
        error: io::Error,
    },
}
