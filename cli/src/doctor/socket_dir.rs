//! The socket's directory check.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rootsd_proto::modes::{self, SocketDir};

use super::{Check, Me, Outcome, mode_of, perms_of};
use crate::reach::Blocked;

/// The directory holding the socket: rootsd makes it 0700, systemd's `DirectoryMode=0700` too.
/// First of all, this user must be able to search it and every directory above it, or no
/// connection reaches the socket, whoever listens there.
pub(super) fn check(socket: &Path, me: &Me) -> Check {
    const NAME: &str = "socket dir";
    let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Check::new(NAME, Outcome::Ok, "the socket path has no directory part");
    };
    let d = dir.display();
    if let Some(blocked) = Blocked::find(socket).filter(|b| !b.is_socket) {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{}{} cannot be searched by you: rootsctl cannot reach the socket {} behind it, whether or not rootsd runs there",
                blocked.path.display(),
                blocked
                    .mode
                    .map(|m| format!(" (mode {m:04o})"))
                    .unwrap_or_default(),
                socket.display()
            ),
        )
        .fix(blocked.fix());
    }
    let meta = match fs::metadata(dir) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return Check::new(
                NAME,
                Outcome::Ok,
                format!(
                    "{d} does not exist yet; rootsd creates it, mode {:04o}, when it starts",
                    modes::SOCKET_DIR_MODE
                ),
            );
        }
        Err(err) => {
            return Check::new(NAME, Outcome::Fail, format!("cannot inspect {d}: {err}")).fix(
                "make sure every directory above it is searchable by you, or choose another --socket",
            );
        }
    };
    let mode = mode_of(&meta);
    if !meta.is_dir() {
        return Check::new(NAME, Outcome::Fail, format!("{d} is not a directory"))
            .fix("remove it, or choose another path with --socket or ROOTSD_SOCKET");
    }
    let owner = meta.uid();
    let socket_owner = fs::symlink_metadata(socket).ok().map(|m| m.uid());
    let shared = socket_owner.is_some_and(|o| o != me.uid);
    match modes::socket_dir(perms_of(&meta), me.uid) {
        SocketDir::WritableByOthers => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{d} (owner uid {owner}, mode {mode:04o}) can be written by other users: any of them could have put the socket there, or could replace it; rootsd refuses to listen there and rootsctl talks only to a socket served by you, root or a system service"
            ),
        )
        .fix(if owner == me.uid {
            format!("chmod {:o} {d}", modes::SOCKET_DIR_MODE)
        } else {
            "use a socket in a directory only you can write to: unset ROOTSD_SOCKET (and --socket) to use the default, or point it into a directory you own".to_owned()
        }),
        SocketDir::Foreign if shared => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{d} belongs to uid {owner}, neither you (uid {}) nor root: a shared rootsd's socket sits in a directory only root can write to (like /run/rootsd), so this is not one, and uid {owner} could have put any socket there",
                me.uid
            ),
        )
        .fix("unset ROOTSD_SOCKET (and --socket) to use your own rootsd; if you expected a shared one, ask your administrator where its socket is"),
        SocketDir::Foreign => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{d} belongs to uid {owner}, not to you (uid {}): rootsd refuses to put its socket there",
                me.uid
            ),
        )
        .fix("unset ROOTSD_SOCKET (or --socket) to use the default path, or point it into a directory you own"),
        SocketDir::System => Check::new(
            NAME,
            Outcome::Ok,
            format!(
                "{d} belongs to root and only root may write to it (mode {mode:04o}): a shared rootsd's directory"
            ),
        ),
        // rootsd only warns about it, but only the socket's own mode then keeps others out.
        SocketDir::OpenToOthers => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{d} is mode {mode:04o}: other users can look inside (rootsd and systemd create it {:04o})",
                modes::SOCKET_DIR_MODE
            ),
        )
        .fix(format!("chmod {:o} {d}", modes::SOCKET_DIR_MODE)),
        SocketDir::Private => Check::new(
            NAME,
            Outcome::Ok,
            format!("{d} is yours and private (mode {mode:04o})"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::test_support::{chmod, me};

    #[test]
    fn a_socket_dir_open_to_others_fails_with_chmod_700() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o755);
        let check = super::check(&dir.join("rootsd.sock"), &me());
        assert_eq!(check.outcome, Outcome::Fail, "{check:?}");
        assert_eq!(check.fix, Some(format!("chmod 700 {}", dir.display())));
        chmod(&dir, 0o700);
        assert_eq!(
            super::check(&dir.join("rootsd.sock"), &me()).outcome,
            Outcome::Ok
        );
    }

    #[test]
    fn a_missing_socket_dir_is_fine_because_rootsd_creates_it() {
        let tmp = tempfile::tempdir().unwrap();
        let check = super::check(&tmp.path().join("absent/rootsd.sock"), &me());
        assert_eq!(check.outcome, Outcome::Ok, "{check:?}");
    }
}
