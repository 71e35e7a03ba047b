//! What a running daemon is: where it lives, whom it admits, and what each admitted peer may do.
//! Shared by the accept loop, which applies the admission policy and gives each peer its role,
//! and each connection, which enforces the role and reports the rest in `status`.

use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;

use crate::groups::Group;

/// What `status` reports about where the daemon lives, and who it lets in.
#[derive(Clone, Debug)]
pub struct DaemonInfo {
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub socket_activated: bool,
    pub access: Access,
    /// With [`Access::OwnerOrSocketGroup`]: the group whose members may change roots too
    /// (`rootsd --admin-group`).
    pub admin_group: Option<Group>,
}

impl DaemonInfo {
    /// The socket file's group, whose members a shared daemon admits; `None` if it cannot be read.
    pub(crate) fn socket_group(&self) -> Option<u32> {
        match std::fs::metadata(&self.socket) {
            Ok(meta) => Some(meta.gid()),
            Err(err) => {
                tracing::warn!(
                    socket = %self.socket.display(),
                    error = %err,
                    "cannot read the socket file's group; admitting only rootsd's own user and root"
                );
                None
            }
        }
    }
}

/// Who may talk to the daemon, decided from the peer's credentials at accept time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Access {
    /// Only the daemon's own user. The default: a per-user daemon serves nobody else.
    #[default]
    Owner,
    /// The daemon's own user, root, the admin group, and every peer whose group or supplementary
    /// groups include the socket file's group (`rootsd --allow-group`, for the system-wide
    /// units). The socket file's permissions (`SocketGroup=`, `SocketMode=0660`) are then the
    /// access control; this check repeats them, so that a peer that got a connection some other
    /// way is still refused.
    OwnerOrSocketGroup,
}

/// What an admitted peer may do, decided once, when it connects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The daemon's own user.
    Owner,
    /// root, admitted by a shared daemon.
    Root,
    /// A member of the admin group.
    Admin,
    /// A member of the socket's group only: it may list, watch and attach sessions, but not
    /// change roots, which every agent of every member works in.
    Member,
}

impl Role {
    pub fn may_change_roots(self) -> bool {
        self != Self::Member
    }
}

/// The peer at the other end of a connection, as the kernel recorded it when it connected.
#[derive(Clone, Copy, Debug)]
pub struct AdmittedPeer {
    pub uid: u32,
    pub pid: Option<i32>,
    pub role: Role,
}
