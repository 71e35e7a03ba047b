//! Why this user may not reach a socket by its permission bits, and what lets them in.
//!
//! Connecting to a Unix socket needs search (`x`) permission on every directory of its path and
//! write permission on the socket itself. The kernel only says "permission denied"; this names
//! the file that refused, its mode and owner, and the command that fixes it, for both the
//! client's error ([`crate::errors::ClientError::Blocked`]) and `rootsctl doctor`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rootsd_proto::modes;

use crate::presence::allowed;

/// The file on a socket's path that keeps this user out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub path: PathBuf,
    /// The socket itself (not writable), rather than a directory on its path (not searchable).
    pub is_socket: bool,
    /// Its permission bits, when it could be inspected.
    pub mode: Option<u32>,
    pub owner: Option<u32>,
}

impl Blocked {
    /// The first directory on `socket`'s path, from `/` down, that this user may not search,
    /// else the socket itself when it exists and this user may not write to it; `None` when the
    /// permission bits let this user through. Judged with the effective ids, as `connect` is.
    pub fn find(socket: &Path) -> Option<Self> {
        let dirs: Vec<&Path> = socket
            .ancestors()
            .skip(1)
            .filter(|d| !d.as_os_str().is_empty())
            .collect();
        if let Some(dir) = dirs
            .into_iter()
            .rev()
            .find(|dir| allowed(dir, rustix::fs::Access::EXEC_OK).is_err_and(is_denied))
        {
            return Some(Self::at(dir, false));
        }
        let exists = fs::symlink_metadata(socket).is_ok();
        (exists && allowed(socket, rustix::fs::Access::WRITE_OK).is_err_and(is_denied))
            .then(|| Self::at(socket, true))
    }

    fn at(path: &Path, is_socket: bool) -> Self {
        let meta = fs::symlink_metadata(path).ok();
        Self {
            path: path.to_owned(),
            is_socket,
            mode: meta.as_ref().map(|m| m.mode() & 0o7777),
            owner: meta.as_ref().map(MetadataExt::uid),
        }
    }

    /// What refuses, in words: "you may not search its directory /run/x (mode 0000), so
    /// nothing inside it can be reached".
    pub fn reason(&self) -> String {
        let p = self.path.display();
        let mode = self
            .mode
            .map(|m| format!(" (mode {m:04o})"))
            .unwrap_or_default();
        if self.is_socket {
            format!("you may not write to the socket{mode}, which connecting needs")
        } else {
            format!(
                "you may not search the directory {p}{mode}, so nothing inside it can be reached"
            )
        }
    }

    /// The command that lets this user in: a `chmod` when the file is theirs, else whom to ask.
    pub fn fix(&self) -> String {
        let p = self.path.display();
        let me = rustix::process::geteuid().as_raw();
        match (self.owner == Some(me), self.is_socket) {
            (true, false) => format!("chmod {:o} {p}", modes::SOCKET_DIR_MODE),
            (true, true) => format!("chmod {:o} {p}", modes::SOCKET_MODE),
            (false, _) => format!(
                "{p} belongs to {}: ask its owner or an administrator to let you in, or use your own rootsd (unset ROOTSD_SOCKET and drop --socket)",
                self.owner
                    .map_or_else(|| "another user".to_owned(), |uid| format!("uid {uid}"))
            ),
        }
    }
}

fn is_denied(err: std::io::Error) -> bool {
    err.kind() == std::io::ErrorKind::PermissionDenied
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Root with its capabilities searches any directory, so only a user without them can see
    /// a refusal here; the end-to-end tests cover that case through `without_privilege`.
    #[test]
    fn a_searchable_path_to_a_writable_socket_is_not_blocked() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o700);
        let socket = dir.join("rootsd.sock");
        assert_eq!(Blocked::find(&socket), None);
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        chmod(&socket, 0o600);
        assert_eq!(Blocked::find(&socket), None);
    }

    #[test]
    fn the_fix_for_ones_own_directory_is_chmod_700_and_for_ones_own_socket_chmod_600() {
        let me = rustix::process::geteuid().as_raw();
        let dir = Blocked {
            path: PathBuf::from("/run/user/1000/rootsd"),
            is_socket: false,
            mode: Some(0),
            owner: Some(me),
        };
        assert_eq!(dir.fix(), "chmod 700 /run/user/1000/rootsd");
        assert!(
            dir.reason()
                .contains("may not search the directory /run/user/1000/rootsd (mode 0000)")
        );
        let socket = Blocked {
            path: PathBuf::from("/run/user/1000/rootsd/rootsd.sock"),
            is_socket: true,
            mode: Some(0o400),
            owner: Some(me),
        };
        assert_eq!(socket.fix(), "chmod 600 /run/user/1000/rootsd/rootsd.sock");
        let theirs = Blocked {
            owner: Some(me.wrapping_add(1)),
            ..dir
        };
        assert!(theirs.fix().contains("ask its owner"), "{}", theirs.fix());
    }
}
