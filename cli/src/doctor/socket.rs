//! The socket check: our own socket, or a shared daemon's.

use std::fs;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use rootsd_proto::modes::{self, Perms, Socket};

use super::daemon::OnDemand;
use super::{Check, Me, Outcome, perms_of};

/// The socket file itself: a socket, mode 0600, ours; or a shared daemon's socket we may open.
/// No socket at all is a failure only when nothing will start rootsd ([`OnDemand`]).
pub(super) fn check(socket: &Path, me: &Me, on_demand: &OnDemand) -> Check {
    const NAME: &str = "socket";
    let s = socket.display();
    let meta = match fs::symlink_metadata(socket) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            let check = Check::new(
                NAME,
                on_demand.outcome(),
                format!(
                    "there is no socket at {s}: rootsd is not running yet; {}",
                    on_demand.what_happens()
                ),
            );
            return match on_demand.fix() {
                Some(fix) => check.fix(fix),
                None => check,
            };
        }
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
            return Check::new(
                NAME,
                Outcome::Skip,
                format!(
                    "cannot look at {s} ({err}): a directory on its path keeps you out (see the socket dir check)"
                ),
            );
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
    let dir = socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .and_then(|d| fs::metadata(d).ok())
        .map(|m| perms_of(&m));
    judge(socket, perms_of(&meta), dir, me)
}

/// Applies the socket rules to a socket file in directory `dir`: ours must be 0600; a socket
/// owned by root, or by another user in a directory only root may write to, belongs to a shared,
/// system-wide rootsd (`--allow-group`), whose group is the access control, so we must be in it,
/// and others must be kept out; any other user's is a stranger's.
fn judge(socket: &Path, file: Perms, dir: Option<Perms>, me: &Me) -> Check {
    const NAME: &str = "socket";
    let s = socket.display();
    let mode = file.mode;
    match modes::socket(file, dir, me.uid, &me.groups) {
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
        Socket::Stranger => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} belongs to uid {}, neither you (uid {}) nor root, and it is not in a directory only root can write to, as a shared rootsd's socket is: rootsctl refuses to talk to whoever listens there",
                file.uid,
                me.uid
            ),
        )
        .fix("if you did not put another user's socket there, someone may be waiting for your requests: use your own rootsd (unset ROOTSD_SOCKET and drop --socket), and tell your administrator"),
        Socket::SharedOpenToAll => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} belongs to uid {} and is mode {mode:04o}: anyone may try to connect",
                file.uid
            ),
        )
        .fix("give the shared socket SocketMode=0660 and a SocketGroup= in its unit (see systemd/system/rootsd.socket)"),
        Socket::SharedNotMember => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} belongs to a shared rootsd (uid {}), which admits members of group {}, and you are not one",
                file.uid,
                file.gid
            ),
        )
        .fix(format!(
            "ask an administrator to add you to group {} (usermod -aG GROUP YOUR-USER), then log in again; or use a rootsd of your own by unsetting ROOTSD_SOCKET",
            file.gid
        )),
        Socket::SharedClosedToGroup => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} is mode {mode:04o}: members of its group {} cannot connect",
                file.gid
            ),
        )
        .fix("give the shared socket SocketMode=0660 in its unit (see systemd/system/rootsd.socket)"),
        Socket::Shared => Check::new(
            NAME,
            Outcome::Ok,
            format!(
                "{s} is a shared rootsd's socket (uid {}, mode {mode:04o}); you may use it as a member of group {}",
                file.uid,
                file.gid
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
        let missing = super::check(&path, &me(), &OnDemand::Off);
        assert_eq!(missing.outcome, Outcome::Fail);
        assert!(missing.summary.contains("no socket"), "{missing:?}");
        let started = super::check(&path, &me(), &OnDemand::Starts("/usr/bin/rootsd".into()));
        assert_eq!(started.outcome, Outcome::Note, "{started:?}");
        assert!(
            started.summary.contains("starts /usr/bin/rootsd on demand"),
            "{started:?}"
        );
        assert_eq!(started.fix, None);
        let missing_binary = super::check(&path, &me(), &OnDemand::Missing("rootsd".into()));
        assert_eq!(missing_binary.outcome, Outcome::Fail, "{missing_binary:?}");
        assert!(
            missing_binary
                .fix
                .as_deref()
                .unwrap()
                .contains("ROOTSD_BIN"),
            "{missing_binary:?}"
        );

        fs::write(&path, "not a socket").unwrap();
        let file = super::check(&path, &me(), &OnDemand::Off);
        assert_eq!(file.outcome, Outcome::Fail);
        assert!(file.summary.contains("not a socket"), "{file:?}");
        fs::remove_file(&path).unwrap();

        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        chmod(&path, 0o666);
        let open = super::check(&path, &me(), &OnDemand::Off);
        assert_eq!(open.outcome, Outcome::Fail, "{open:?}");
        assert_eq!(open.fix, Some(format!("chmod 600 {}", path.display())));
        chmod(&path, 0o600);
        assert_eq!(
            super::check(&path, &me(), &OnDemand::Off).outcome,
            Outcome::Ok
        );
    }

    #[test]
    fn a_shared_socket_needs_membership_of_its_group() {
        let path = Path::new("/run/rootsd/rootsd.sock");
        const GROUP: u32 = 4242;
        let socket = |mode| Perms {
            uid: 0,
            gid: GROUP,
            mode,
        };
        // As systemd makes /run/rootsd.
        let system_dir = Some(Perms {
            uid: 0,
            gid: 0,
            mode: 0o755,
        });
        let member = Me {
            uid: 1000,
            groups: vec![GROUP],
        };
        let check = judge(path, socket(0o660), system_dir, &member);
        assert_eq!(check.outcome, Outcome::Ok, "{check:?}");
        let stranger = Me {
            uid: 1000,
            groups: vec![GROUP + 1],
        };
        let check = judge(path, socket(0o660), system_dir, &stranger);
        assert_eq!(check.outcome, Outcome::Fail, "{check:?}");
        assert!(check.fix.unwrap().contains("usermod -aG"));
        assert_eq!(
            judge(path, socket(0o666), system_dir, &member).outcome,
            Outcome::Fail
        );
    }

    #[test]
    fn another_users_socket_outside_a_system_directory_is_a_strangers() {
        let path = Path::new("/tmp/rootsd-1000/rootsd.sock");
        let mallory = 1001;
        let socket = Perms {
            uid: mallory,
            gid: mallory,
            mode: 0o666,
        };
        let victim = Me {
            uid: 1000,
            groups: vec![1000, mallory],
        };
        for dir in [0o755, 0o1777, 0o777].map(|mode| Perms {
            uid: mallory,
            gid: mallory,
            mode,
        }) {
            let check = judge(path, socket, Some(dir), &victim);
            assert_eq!(check.outcome, Outcome::Fail, "{check:?}");
            assert!(check.summary.contains("uid 1001"), "{check:?}");
            assert!(check.summary.contains("refuses to talk"), "{check:?}");
        }
    }
}
