//! What a running daemon is: where it lives and whom it admits. Shared by the accept loop, which
//! applies the admission policy, and each connection, which reports it in `status`.

use std::path::PathBuf;

/// What `status` reports about where the daemon lives, and who it lets in.
#[derive(Clone, Debug)]
pub struct DaemonInfo {
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub socket_activated: bool,
    pub access: Access,
}

/// Who may talk to the daemon, decided from the peer's credentials at accept time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Access {
    /// Only the daemon's own user. The default: a per-user daemon serves nobody else.
    #[default]
    Owner,
    /// The daemon's own user, and every peer whose group or supplementary groups include the
    /// socket file's group (`rootsd --allow-group`, for the system-wide units). The socket file's
    /// permissions (`SocketGroup=`, `SocketMode=0660`) are then the access control; this check
    /// repeats them, so that a peer that got a connection some other way is still refused.
    OwnerOrSocketGroup,
}
