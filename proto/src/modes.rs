//! The ownership and permission rules for rootsd's socket and the directory holding it, written
//! once. The daemon applies them when it binds its socket (it refuses or warns), and
//! `rootsctl doctor` when it looks at one (it reports a failure or a note); each maps a verdict
//! to its own action and words.
//!
//! Pure functions of what `stat` says and who is asking: nothing here touches the file system.

/// The mode rootsd creates the socket directory with; systemd's `DirectoryMode=0700` too.
pub const SOCKET_DIR_MODE: u32 = 0o700;

/// The mode of a socket rootsd binds itself, which only its own user can open; the user unit's
/// `SocketMode=0600` too.
pub const SOCKET_MODE: u32 = 0o600;

/// The sticky bit: in a directory, only a file's owner may remove or rename it.
const STICKY: u32 = 0o1000;

/// Who owns a file and its permission bits (sticky bit included), as `stat` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Perms {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

/// The verdict on the directory that holds (or is to hold) the socket, for the user `me` who
/// runs the daemon there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketDir {
    /// Ours, and closed to everyone else.
    Private,
    /// Ours, but group or others have some access to it. The socket itself still keeps them
    /// out, so the daemon only warns.
    OpenToOthers,
    /// Someone else's, with the sticky bit (like `/tmp`): nobody else may remove or replace our
    /// socket there. Accepted, though a private directory is safer.
    SharedSticky,
    /// Someone else's, without the sticky bit: its owner could replace our socket with their
    /// own. Refused.
    Foreign,
}

/// Judges the socket's directory.
pub fn socket_dir(dir: Perms, me: u32) -> SocketDir {
    match (dir.uid == me, dir.mode & 0o077 != 0, dir.mode & STICKY != 0) {
        (true, false, _) => SocketDir::Private,
        (true, true, _) => SocketDir::OpenToOthers,
        (false, _, true) => SocketDir::SharedSticky,
        (false, _, false) => SocketDir::Foreign,
    }
}

/// The verdict on a socket file, for a user `me` who wants to connect to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Socket {
    /// Ours, mode 0600.
    Private,
    /// Ours, and others may try to connect (the daemon refuses them, but the file should keep
    /// them out).
    OpenToOthers,
    /// Ours, but not 0600 even for us: we may not be able to connect.
    WrongOwnerBits,
    /// A shared rootsd's (another user's) socket that anyone may try to connect to: its group
    /// is meant to be the access control.
    SharedOpenToAll,
    /// A shared rootsd's socket, and we are not in its group, which it admits.
    SharedNotMember,
    /// A shared rootsd's socket whose group may not connect.
    SharedClosedToGroup,
    /// A shared rootsd's socket, which we may use as a member of its group.
    Shared,
}

/// Judges a socket file. `groups` are the effective and supplementary groups of `me`.
pub fn socket(file: Perms, me: u32, groups: &[u32]) -> Socket {
    let mode = file.mode & 0o777;
    if file.uid == me {
        return match mode {
            SOCKET_MODE => Socket::Private,
            _ if mode & 0o077 != 0 => Socket::OpenToOthers,
            _ => Socket::WrongOwnerBits,
        };
    }
    if mode & 0o007 != 0 {
        Socket::SharedOpenToAll
    } else if !groups.contains(&file.gid) {
        Socket::SharedNotMember
    } else if mode & 0o060 != 0o060 {
        Socket::SharedClosedToGroup
    } else {
        Socket::Shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 1000;
    const OTHER: u32 = 0;

    fn perms(uid: u32, mode: u32) -> Perms {
        Perms {
            uid,
            gid: 100,
            mode,
        }
    }

    #[test]
    fn our_socket_dir_must_be_closed_to_others() {
        assert_eq!(socket_dir(perms(ME, 0o700), ME), SocketDir::Private);
        assert_eq!(socket_dir(perms(ME, 0o1700), ME), SocketDir::Private);
        for open in [0o750, 0o705, 0o755, 0o1777] {
            assert_eq!(
                socket_dir(perms(ME, open), ME),
                SocketDir::OpenToOthers,
                "{open:o}"
            );
        }
    }

    #[test]
    fn another_users_socket_dir_is_accepted_only_with_the_sticky_bit() {
        assert_eq!(
            socket_dir(perms(OTHER, 0o1777), ME),
            SocketDir::SharedSticky
        );
        assert_eq!(socket_dir(perms(OTHER, 0o777), ME), SocketDir::Foreign);
        assert_eq!(socket_dir(perms(OTHER, 0o700), ME), SocketDir::Foreign);
    }

    #[test]
    fn our_socket_must_be_0600() {
        let judge = |mode| socket(perms(ME, mode), ME, &[100]);
        assert_eq!(judge(SOCKET_MODE), Socket::Private);
        assert_eq!(
            judge(0o1600),
            Socket::Private,
            "the sticky bit is not access"
        );
        assert_eq!(judge(0o660), Socket::OpenToOthers);
        assert_eq!(judge(0o606), Socket::OpenToOthers);
        assert_eq!(judge(0o400), Socket::WrongOwnerBits);
    }

    #[test]
    fn a_shared_socket_is_for_members_of_its_group_only() {
        let judge = |mode, groups: &[u32]| socket(perms(OTHER, mode), ME, groups);
        assert_eq!(judge(0o660, &[5, 100]), Socket::Shared);
        assert_eq!(judge(0o660, &[5]), Socket::SharedNotMember);
        assert_eq!(judge(0o666, &[100]), Socket::SharedOpenToAll);
        assert_eq!(judge(0o640, &[100]), Socket::SharedClosedToGroup);
        assert_eq!(judge(0o600, &[100]), Socket::SharedClosedToGroup);
    }
}
