//! The errors of reaching and talking to rootsd, and of reading what the user gave: every
//! crate of rootsctl reports them, and rootsctl's `errors::exit_status` maps each to its
//! documented exit status.
//!
//! Messages are full sentences that name what went wrong and end with what to do. This module
//! only defines errors; it does no I/O and raises nothing itself.

use std::cmp::Ordering;
use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use rootsd_proto::wire::{self, ErrorObject};
use rootsd_proto::{RootError, WorkspaceName};

/// A usage error found after parsing (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// `~/.config/rootsd/rootsd.conf` cannot be used (exit status 2, like any other usage error).
/// Nothing runs on a guess: a setting skipped could send a proxy to the wrong daemon.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "{path} line {line}: {problem}; fix or remove that line (see README.md, 'The user configuration file')"
    )]
    Invalid {
        path: PathBuf,
        line: usize,
        problem: String,
    },
    #[error("cannot read {path}: {error}; make it readable, or remove it")]
    Unreadable { path: PathBuf, error: io::Error },
}

/// Why an argument cannot be a root. Each message names the argument and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// `reason` names the input itself, so the input is kept only for callers.
    #[error("{reason}")]
    Root { input: OsString, reason: RootError },
    /// What [`crate::resolve::resolve_root`] finds; `add` turns it into [`Self::NewMissing`]
    /// once it knows the path is not a root already (an existing root is renamed whatever its
    /// directory).
    #[error("{input:?} does not exist: create it first, or pass --allow-missing to add it anyway")]
    Missing { input: OsString },
    #[error(
        "{input:?} does not exist and is not a root of workspace {workspace}: create the directory first, or pass --allow-missing to add it as a root before it exists"
    )]
    NewMissing {
        input: OsString,
        workspace: WorkspaceName,
    },
    #[error("{input:?} is not a directory ({path:?}): a root must be a directory")]
    NotDirectory { input: OsString, path: PathBuf },
    #[error("{input:?}: cannot resolve {path:?}: {error}")]
    Io {
        input: OsString,
        path: PathBuf,
        error: io::Error,
    },
}

/// Why talking to the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("rootsd is not running at {socket}{hint}")]
    NotRunning { socket: PathBuf, hint: String },
    #[error("failed to connect to rootsd at {socket}: {error}")]
    Connect { socket: PathBuf, error: io::Error },
    /// Permission bits keep this user from the socket: the message names the directory or the
    /// socket that refuses, and the command that lets them in.
    #[error(
        "cannot connect to rootsd at {socket}: permission denied: {}; fix: {}",
        .blocked.reason(),
        .blocked.fix()
    )]
    Blocked {
        socket: PathBuf,
        blocked: crate::reach::Blocked,
    },
    #[error("lost the connection to rootsd at {socket}: {reason}")]
    Lost { socket: PathBuf, reason: String },
    #[error("rootsd sent something rootsctl cannot read: {0}")]
    Protocol(String),
    /// The daemon did not accept, answer, or take a request in time.
    #[error(
        "rootsd at {socket} did not {waiting_for} within {}s: it may be stopped (SIGSTOP), overloaded or stuck. `rootsctl doctor` looks at it; restart it if it stays this way (`systemctl --user restart rootsd.service` under systemd, otherwise kill the pid in rootsd.lock in its state directory), or let rootsctl wait longer with ROOTSD_TIMEOUT=SECS",
        format_secs(*.after)
    )]
    TimedOut {
        socket: PathBuf,
        waiting_for: String,
        after: std::time::Duration,
    },
    /// The daemon does not admit this user; its message says whom it admits and what to do.
    #[error("rootsd at {socket} does not admit you: {message}")]
    NotAdmitted { socket: PathBuf, message: String },
    /// Whoever listens on the socket is neither this user, nor root, nor a system service
    /// ([`rootsd_proto::modes::listener`]); nothing was sent to it.
    #[error(
        "refusing to talk to {socket}: it is served by uid {peer_uid}{}, which is neither you (uid {me}) nor root, and the socket is not in a directory only root can write to, as a shared system rootsd's is. Another user may have created it to receive your requests; nothing was sent. Use your own rootsd (unset ROOTSD_SOCKET and drop --socket, or point them at a directory only you can write to), and ask uid {peer_uid} or an administrator about that socket",
        .peer_pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Untrusted {
        socket: PathBuf,
        peer_uid: u32,
        peer_pid: Option<i32>,
        me: u32,
    },
    /// The daemon speaks another version of the control protocol, so nothing can be asked of it.
    #[error("{}: {}", .daemon.summary(.socket), .daemon.fix())]
    VersionMismatch {
        socket: PathBuf,
        daemon: OtherProtocol,
    },
    #[error("{0}")]
    Refused(ErrorObject),
    #[error("{0}")]
    Autostart(String),
}

/// Seconds as a person would write them: `10`, `0.5`.
fn format_secs(duration: std::time::Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}")
    } else {
        format!("{secs:.1}")
    }
}

impl ClientError {
    /// Whether the socket had no daemon behind it (as opposed to some other failure).
    pub fn is_absent(&self) -> bool {
        matches!(self, Self::NotRunning { .. })
    }
}

/// What a daemon of another control protocol said about itself at hello.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OtherProtocol {
    /// It greeted with its own protocol and release.
    Greeted {
        protocol: u32,
        daemon_version: String,
    },
    /// It refused rootsctl's hello with `VERSION_MISMATCH`, as every rootsd so far does. Its
    /// message names the versions in words, which rootsctl shows and never reads.
    Refused { message: String },
}

impl OtherProtocol {
    /// Whether the daemon's protocol is newer (`Greater`) or older than rootsctl's; `None` when
    /// it did not say.
    pub fn daemon_compared_to_rootsctl(&self) -> Option<Ordering> {
        match self {
            Self::Greeted { protocol, .. } => Some(protocol.cmp(&wire::PROTOCOL_VERSION)),
            Self::Refused { .. } => None,
        }
    }

    /// What was found, naming both sides.
    pub fn summary(&self, socket: &std::path::Path) -> String {
        let s = socket.display();
        let ours = env!("CARGO_PKG_VERSION");
        let protocol = wire::PROTOCOL_VERSION;
        match self {
            Self::Greeted {
                protocol: theirs,
                daemon_version,
            } => {
                let relation = match self.daemon_compared_to_rootsctl() {
                    Some(Ordering::Greater) => "newer than",
                    Some(Ordering::Less) => "older than",
                    _ => "not",
                };
                format!(
                    "rootsd {daemon_version} at {s} speaks control protocol {theirs}, {relation} rootsctl {ours}'s control protocol {protocol}"
                )
            }
            Self::Refused { message } => {
                format!("rootsd at {s} refused the hello of rootsctl {ours}: {message}")
            }
        }
    }

    /// What to do: the side that is behind must catch up. A daemon older than rootsctl is
    /// still running from before an upgrade, so it must be restarted; a newer daemon needs the
    /// rootsctl of its own release, which restarting the daemon would not give.
    pub fn fix(&self) -> String {
        const RESTART: &str = "`systemctl --user restart rootsd.service` under systemd, otherwise stop the rootsd whose pid is in rootsd.lock in its state directory and rootsctl starts the new one on demand";
        match (self, self.daemon_compared_to_rootsctl()) {
            (Self::Greeted { daemon_version, .. }, Some(Ordering::Greater)) => format!(
                "upgrade rootsctl to rootsd {daemon_version}'s release, or check that `command -v rootsctl` finds the rootsctl installed with that rootsd"
            ),
            (_, Some(Ordering::Less)) => format!(
                "restart rootsd, so that the one from rootsctl {}'s release runs: {RESTART}",
                env!("CARGO_PKG_VERSION")
            ),
            _ => format!(
                "use rootsctl and rootsd from the same release: after an upgrade, restart rootsd ({RESTART}); if rootsd is the newer one, upgrade rootsctl instead"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_mismatch_fix_depends_on_which_side_is_behind() {
        let greeted = |protocol| OtherProtocol::Greeted {
            protocol,
            daemon_version: "9.9.9".into(),
        };
        let newer = greeted(wire::PROTOCOL_VERSION + 1);
        assert_eq!(newer.daemon_compared_to_rootsctl(), Some(Ordering::Greater));
        assert!(
            newer.fix().starts_with("upgrade rootsctl"),
            "{}",
            newer.fix()
        );
        assert!(!newer.fix().contains("restart"), "{}", newer.fix());

        let older = greeted(wire::PROTOCOL_VERSION - 1);
        assert!(older.fix().starts_with("restart rootsd"), "{}", older.fix());
        assert!(!older.fix().contains("upgrade rootsctl"), "{}", older.fix());
        assert!(
            older
                .summary(std::path::Path::new("/s.sock"))
                .contains(&format!(
                    "speaks control protocol {}, older than",
                    wire::PROTOCOL_VERSION - 1
                ))
        );

        let refused = OtherProtocol::Refused {
            message: "rootsctl speaks 1 but this rootsd speaks 2".into(),
        };
        assert_eq!(refused.daemon_compared_to_rootsctl(), None);
        let fix = refused.fix();
        assert!(
            fix.contains("restart rootsd") && fix.contains("upgrade rootsctl"),
            "{fix}"
        );
    }
}
