//! The socket check: our own socket, or a shared daemon's.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use rootsd_proto::modes::{self, Socket};

use super::{Check, Me, Outcome, START_FIX, mode_of, perms_of};

/// The socket file itself: a socket, mode 0600, ours; or a shared daemon's socket we may open.
pub(super) fn check(socket: &Path, me: &Me) -> Check {
    const NAME: &str = "socket";
    let s = socket.display();
    let meta = match fs::symlink_metadata(socket) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return Check::new(
                NAME,
                Outcome::Fail,
                format!("there is no socket at {s}, so rootsd is not running there"),
            )
            .fix(START_FIX);
        }
        Err(err) => {
            return Check::new(NAME, Outcome::Fail, format!("cannot inspect {s}: {err}"))
                .fix("make sure the directories above it are searchable by you");
        }
    };
    if !meta.file_type().is_socket() {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!("{s} exists but is not a socket, and rootsd will not replace it"),
        )
        .fix(format!(
            "remove it if nothing uses it (rm {s}), or choose another path with --socket or ROOTSD_SOCKET"
        ));
    }
    judge(socket, &meta, me)
}

/// Applies the socket rules to a socket file: ours must be 0600; a socket owned by another
/// user belongs to a shared, system-wide rootsd (`--allow-group`), whose group is the access
/// control, so we must be in it, and others must be kept out.
fn judge(socket: &Path, meta: &fs::Metadata, me: &Me) -> Check {
    const NAME: &str = "socket";
    let s = socket.display();
    let mode = mode_of(meta);
    match modes::socket(perms_of(meta), me.uid, &me.groups) {
        Socket::Private => Check::new(
            NAME,
            Outcome::Ok,
            format!("{s} is a socket, yours, mode {:04o}", modes::SOCKET_MODE),
        ),
        verdict @ (Socket::OpenToOthers | Socket::WrongOwnerBits) => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} is mode {mode:04o}, not {:04o}: {}",
                modes::SOCKET_MODE,
                if verdict == Socket::OpenToOthers {
                    "other users may try to connect (rootsd refuses them, but the file should keep them out)"
                } else {
                    "you may not be able to connect"
                }
            ),
        )
        .fix(format!("chmod {:o} {s}", modes::SOCKET_MODE)),
        Socket::SharedOpenToAll => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} belongs to uid {} and is mode {mode:04o}: anyone may try to connect",
                meta.uid()
            ),
        )
        .fix("give the shared socket SocketMode=0660 and a SocketGroup= in its unit (see systemd/system/rootsd.socket)"),
        Socket::SharedNotMember => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} belongs to a shared rootsd (uid {}), which admits members of group {}, and you are not one",
                meta.uid(),
                meta.gid()
            ),
        )
        .fix(format!(
            "ask an administrator to add you to group {} (usermod -aG GROUP YOUR-USER), then log in again; or use a rootsd of your own by unsetting ROOTSD_SOCKET",
            meta.gid()
        )),
        Socket::SharedClosedToGroup => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} is mode {mode:04o}: members of its group {} cannot connect",
                meta.gid()
            ),
        )
        .fix("give the shared socket SocketMode=0660 in its unit (see systemd/system/rootsd.socket)"),
        Socket::Shared => Check::new(
            NAME,
            Outcome::Ok,
            format!(
                "{s} is a shared rootsd's socket (uid {}, mode {mode:04o}); you may use it as a member of group {}",
                meta.uid(),
                meta.gid()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::test_support::{chmod, me};

    #[test]
    fn the_socket_must_be_a_socket_of_mode_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rootsd.sock");
        let missing = super::check(&path, &me());
        assert_eq!(missing.outcome, Outcome::Fail);
        assert!(missing.summary.contains("no socket"), "{missing:?}");

        fs::write(&path, "not a socket").unwrap();
        let file = super::check(&path, &me());
        assert_eq!(file.outcome, Outcome::Fail);
        assert!(file.summary.contains("not a socket"), "{file:?}");
        fs::remove_file(&path).unwrap();

        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        chmod(&path, 0o666);
        let open = super::check(&path, &me());
        assert_eq!(open.outcome, Outcome::Fail, "{open:?}");
        assert_eq!(open.fix, Some(format!("chmod 600 {}", path.display())));
        chmod(&path, 0o600);
        assert_eq!(super::check(&path, &me()).outcome, Outcome::Ok);
    }

    #[test]
    fn a_shared_socket_needs_membership_of_its_group() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rootsd.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        chmod(&path, 0o660);
        let meta = fs::symlink_metadata(&path).unwrap();
        let member = Me {
            uid: meta.uid().wrapping_add(1),
            groups: vec![meta.gid()],
        };
        let check = judge(&path, &meta, &member);
        assert_eq!(check.outcome, Outcome::Ok, "{check:?}");
        let stranger = Me {
            uid: meta.uid().wrapping_add(1),
            groups: vec![meta.gid().wrapping_add(1)],
        };
        let check = judge(&path, &meta, &stranger);
        assert_eq!(check.outcome, Outcome::Fail, "{check:?}");
        assert!(check.fix.unwrap().contains("usermod -aG"));
        chmod(&path, 0o666);
        let meta = fs::symlink_metadata(&path).unwrap();
        assert_eq!(judge(&path, &meta, &member).outcome, Outcome::Fail);
    }
}
