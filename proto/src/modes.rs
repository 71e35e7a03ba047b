//! The ownership and permission rules for rootsd's socket, the directory holding it, and the
//! process listening on it, written once. The daemon applies them when it binds its socket (it
//! refuses or warns), rootsctl when it connects (it refuses to talk to a listener it does not
//! trust), and `rootsctl doctor` when it looks at one (it reports a failure or a note); each maps
//! a verdict to its own action and words.
//!
//! Pure functions of what `stat` says and who is asking: nothing here touches the file system.

/// The mode rootsd creates the socket directory with; systemd's `DirectoryMode=0700` too.
pub const SOCKET_DIR_MODE: u32 = 0o700;

/// The mode of a socket rootsd binds itself, which only its own user can open; the user unit's
/// `SocketMode=0600` too.
pub const SOCKET_MODE: u32 = 0o600;

/// Group or others may write: whoever that lets in can create, and (without the sticky bit, or
/// as the directory's owner) remove or replace, the files in a directory.
const WRITABLE_BY_OTHERS: u32 = 0o022;

/// root's uid: root can read and replace anything, so trusting it costs nothing.
pub const ROOT: u32 = 0;

/// Who owns a file and its permission bits (sticky bit included), as `stat` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Perms {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

impl Perms {
    /// Whether users other than the owner may create, remove or rename entries (of a directory).
    pub fn writable_by_others(self) -> bool {
        self.mode & WRITABLE_BY_OTHERS != 0
    }

    /// Whether this directory is root's and nobody else may write to it, as systemd makes
    /// `/run/rootsd` for the shared service: a socket there was put there by root, or by a
    /// daemon root let listen there.
    pub fn is_system_dir(self) -> bool {
        self.uid == ROOT && !self.writable_by_others()
    }
}

/// The verdict on the directory that holds (or is to hold) the socket, for the user `me` who
/// runs the daemon there or connects to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketDir {
    /// Ours, and closed to everyone else.
    Private,
    /// Ours; group or others may look inside, but not write. The socket itself keeps them out,
    /// so the daemon only warns.
    OpenToOthers,
    /// root's, and only root may write to it: where a shared system service's socket lives.
    System,
    /// Group or others may write to it, sticky bit or not (`/tmp` itself, a 0777 directory): any
    /// of them could have created the socket, and the directory's owner, or anyone when it is not
    /// sticky, could replace ours with their own. Refused.
    WritableByOthers,
    /// Another user's (not root's): its owner could replace our socket with their own. Refused.
    Foreign,
}

/// Judges the socket's directory.
pub fn socket_dir(dir: Perms, me: u32) -> SocketDir {
    if dir.writable_by_others() {
        SocketDir::WritableByOthers
    } else if dir.uid == me {
        if dir.mode & 0o077 == 0 {
            SocketDir::Private
        } else {
            SocketDir::OpenToOthers
        }
    } else if dir.uid == ROOT {
        SocketDir::System
    } else {
        SocketDir::Foreign
    }
}

/// The verdict on the process listening on a socket (its `SO_PEERCRED`), which a client reads
/// before it sends anything: only a daemon it trusts may receive its requests and tell it the
/// roots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listener {
    /// This user: a per-user rootsd, or systemd's user manager listening for one.
    Ours,
    /// root. The shared system service appears as root: with socket activation the listening
    /// socket is PID 1's, whatever user the service runs as. And root, who can read and replace
    /// anything, gains nothing by being refused.
    Root,
    /// Another user, listening on a socket of its own in a directory only root may write to:
    /// only root could have set that up, so it is a system service's.
    SystemService,
    /// Anyone else: that user may have created the socket to receive this user's requests and
    /// answer with roots of their choosing. Refused.
    Stranger,
}

impl Listener {
    pub fn trusted(self) -> bool {
        self != Self::Stranger
    }
}

/// Judges the listener of a socket from its credentials (`peer_uid`), the socket file and its
/// directory, for a client running as `me`.
pub fn listener(peer_uid: u32, me: u32, socket: Option<Perms>, dir: Option<Perms>) -> Listener {
    if peer_uid == me {
        Listener::Ours
    } else if peer_uid == ROOT {
        Listener::Root
    } else if socket.is_some_and(|s| s.uid == peer_uid) && dir.is_some_and(Perms::is_system_dir) {
        Listener::SystemService
    } else {
        Listener::Stranger
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
    /// Another user's, neither root's nor in a directory only root may write to: not a shared
    /// service's, and rootsctl will not talk to whoever listens there ([`listener`]).
    Stranger,
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

/// Judges a socket file in directory `dir` (when it can be inspected). `groups` are the
/// effective and supplementary groups of `me`.
pub fn socket(file: Perms, dir: Option<Perms>, me: u32, groups: &[u32]) -> Socket {
    let mode = file.mode & 0o777;
    if file.uid == me {
        return match mode {
            SOCKET_MODE => Socket::Private,
            _ if mode & 0o077 != 0 => Socket::OpenToOthers,
            _ => Socket::WrongOwnerBits,
        };
    }
    if file.uid != ROOT && !dir.is_some_and(Perms::is_system_dir) {
        Socket::Stranger
    } else if mode & 0o007 != 0 {
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
    const OTHER: u32 = 2000;

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
        for open in [0o750, 0o705, 0o755, 0o711] {
            assert_eq!(
                socket_dir(perms(ME, open), ME),
                SocketDir::OpenToOthers,
                "{open:o}"
            );
        }
    }

    #[test]
    fn a_socket_dir_others_may_write_to_is_refused_whoever_owns_it_sticky_or_not() {
        for mode in [0o1777, 0o777, 0o770, 0o1770, 0o730, 0o703, 0o1733] {
            for owner in [ME, OTHER, ROOT] {
                assert_eq!(
                    socket_dir(perms(owner, mode), ME),
                    SocketDir::WritableByOthers,
                    "owner {owner}, mode {mode:o}"
                );
            }
        }
    }

    #[test]
    fn another_users_socket_dir_is_foreign_and_roots_is_the_system_s() {
        assert_eq!(socket_dir(perms(OTHER, 0o700), ME), SocketDir::Foreign);
        assert_eq!(socket_dir(perms(OTHER, 0o755), ME), SocketDir::Foreign);
        assert_eq!(socket_dir(perms(ROOT, 0o755), ME), SocketDir::System);
        assert_eq!(socket_dir(perms(ROOT, 0o700), ROOT), SocketDir::Private);
    }

    #[test]
    fn a_client_trusts_itself_root_and_a_system_service_only() {
        let system_dir = Some(perms(ROOT, 0o755));
        let own_socket = |uid| Some(perms(uid, 0o660));
        assert_eq!(listener(ME, ME, None, None), Listener::Ours);
        assert_eq!(listener(ROOT, ME, None, None), Listener::Root);
        assert_eq!(
            listener(OTHER, ME, own_socket(OTHER), system_dir),
            Listener::SystemService
        );
        // Anywhere else another user's listener is a stranger: in its own directory, in /tmp,
        // in a directory root shares with others, or on a socket it does not own.
        for dir in [
            perms(OTHER, 0o755),
            perms(OTHER, 0o1777),
            perms(ROOT, 0o1777),
            perms(ROOT, 0o775),
            perms(ME, 0o777),
        ] {
            let verdict = listener(OTHER, ME, own_socket(OTHER), Some(dir));
            assert_eq!(verdict, Listener::Stranger, "{dir:?}");
            assert!(!verdict.trusted());
        }
        assert_eq!(
            listener(OTHER, ME, own_socket(ME), system_dir),
            Listener::Stranger
        );
        assert_eq!(listener(OTHER, ME, None, None), Listener::Stranger);
    }

    #[test]
    fn our_socket_must_be_0600() {
        let judge = |mode| socket(perms(ME, mode), None, ME, &[100]);
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
        let dir = Some(perms(ROOT, 0o755));
        let judge = |mode, groups: &[u32]| socket(perms(ROOT, mode), dir, ME, groups);
        assert_eq!(judge(0o660, &[5, 100]), Socket::Shared);
        assert_eq!(judge(0o660, &[5]), Socket::SharedNotMember);
        assert_eq!(judge(0o666, &[100]), Socket::SharedOpenToAll);
        assert_eq!(judge(0o640, &[100]), Socket::SharedClosedToGroup);
        assert_eq!(judge(0o600, &[100]), Socket::SharedClosedToGroup);
        // A service user's own socket counts as shared only in a directory only root writes to.
        let service = perms(OTHER, 0o660);
        assert_eq!(socket(service, dir, ME, &[100]), Socket::Shared);
        for elsewhere in [None, Some(perms(OTHER, 0o755)), Some(perms(ROOT, 0o1777))] {
            assert_eq!(
                socket(service, elsewhere, ME, &[100]),
                Socket::Stranger,
                "{elsewhere:?}"
            );
        }
    }
}
