//! Every error rootsctl reports, and the one place that decides its exit status.
//!
//! The exit statuses are part of rootsctl's interface: scripts test them. [`EXIT_STATUSES`] is
//! their one description: `rootsctl --help` prints it ([`exit_status_help`]), a test holds
//! README.md's list to it, and [`exit_status`] is the only map from an error to a status.
//!
//! Messages are full sentences that name what went wrong and end with what to do. This module
//! only defines errors and statuses; it does no I/O and raises nothing itself.

use std::io;

pub use rootsd_client::errors::{
    ClientError, ConfigError, OtherProtocol, ResolveError, UsageError,
};
pub use rootsd_proxy::{ServerExit, SpawnError};

/// rootsctl's own exit statuses. A proxy also passes on its server's status ([`ServerExit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    Success = 0,
    /// Nothing was changed: the daemon refused, or rootsctl refused the input before asking.
    Refused = 1,
    Usage = 2,
    /// The daemon could not be reached.
    Unreachable = 3,
    /// `--wait` ran out of time after the change was made.
    WaitTimeout = 4,
    /// The proxy's server command exists but could not be executed, as shells report it.
    CannotExecute = 126,
    /// The proxy's server command was not found, as shells report it.
    NotFound = 127,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// The statuses a row of [`EXIT_STATUSES`] describes.
#[derive(Clone, Copy, Debug)]
pub enum Statuses {
    Of(&'static [Exit]),
    /// Any other status: the proxied server's own.
    Server,
}

/// One documented exit status (or group of them) and what it means.
#[derive(Clone, Copy, Debug)]
pub struct Documented {
    pub statuses: Statuses,
    pub meaning: &'static str,
}

impl Documented {
    /// How the statuses are written in the help text and the README: `0`, `126, 127`, `other`.
    pub fn label(&self) -> String {
        match self.statuses {
            Statuses::Of(exits) => exits
                .iter()
                .map(|e| e.code().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            Statuses::Server => "other".to_owned(),
        }
    }
}

/// Every exit status rootsctl documents, in the order the help text and README list them.
pub const EXIT_STATUSES: &[Documented] = &[
    Documented {
        statuses: Statuses::Of(&[Exit::Success]),
        meaning: "success; also when the reader of the output went away, as in `rootsctl list | head -1`",
    },
    Documented {
        statuses: Statuses::Of(&[Exit::Refused]),
        meaning: "the daemon refused the operation, or the input was refused (nothing was changed); rootsctl and the daemon speak different control protocols; doctor: a check failed; hosts: a file or a server was left as it was (it does not parse, changed while being edited, its host is running, or it was edited since it was wrapped)",
    },
    Documented {
        statuses: Statuses::Of(&[Exit::Usage]),
        meaning: "usage error, or the configuration file ~/.config/rootsd/rootsd.conf cannot be used (the message names the line)",
    },
    Documented {
        statuses: Statuses::Of(&[Exit::Unreachable]),
        meaning: "the daemon could not be reached (not running with autostart off, could not be started, went away, or did not answer in time), does not admit you, or rootsctl does not trust whoever listens on the socket (another user's)",
    },
    Documented {
        statuses: Statuses::Of(&[Exit::WaitTimeout]),
        meaning: "add/remove --wait: the change was made, but some sessions did not fetch it in time (the message names them)",
    },
    Documented {
        statuses: Statuses::Of(&[Exit::CannotExecute, Exit::NotFound]),
        meaning: "proxy: the server command could not be executed, or was not found",
    },
    Documented {
        statuses: Statuses::Server,
        meaning: "proxy: the server's own exit status (128+N if it was killed by signal N)",
    },
];

/// The `Exit status:` block of `rootsctl --help`, generated from [`EXIT_STATUSES`] and wrapped
/// to fit a terminal.
pub fn exit_status_help() -> String {
    const WIDTH: usize = 100;
    let label_width = EXIT_STATUSES
        .iter()
        .map(|d| d.label().len())
        .max()
        .unwrap_or(0);
    let indent = 2 + label_width + 2;
    let mut help = String::from("Exit status:");
    for documented in EXIT_STATUSES {
        let mut line = format!("\n  {:<label_width$}  ", documented.label());
        let mut column = indent;
        for (i, word) in unbreakable_words(documented.meaning).iter().enumerate() {
            if i > 0 && column + 1 + word.len() > WIDTH {
                line.push('\n');
                line.push_str(&" ".repeat(indent));
                column = indent;
            } else if i > 0 {
                line.push(' ');
                column += 1;
            }
            line.push_str(word);
            column += word.len();
        }
        help.push_str(&line);
    }
    help
}

/// The words of `text`, except that a `code span` stays one word: a command must not be split
/// across lines.
fn unbreakable_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut in_code = false;
    for word in text.split(' ') {
        match words.last_mut() {
            Some(last) if in_code => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_owned()),
        }
        if word.matches('`').count() % 2 == 1 {
            in_code = !in_code;
        }
    }
    words
}

/// The exit status for a command that failed with `err`: the one place an error becomes a
/// status.
pub fn exit_status(err: &anyhow::Error) -> u8 {
    if is_broken_pipe(err) {
        return Exit::Success.code();
    }
    if let Some(ServerExit(status)) = err.downcast_ref::<ServerExit>() {
        return *status;
    }
    let exit = if let Some(client) = err.downcast_ref::<ClientError>() {
        match client {
            ClientError::Refused(_)
            | ClientError::Protocol(_)
            | ClientError::VersionMismatch { .. } => Exit::Refused,
            ClientError::NotRunning { .. }
            | ClientError::Untrusted { .. }
            | ClientError::TimedOut { .. }
            | ClientError::NotAdmitted { .. }
            | ClientError::Connect { .. }
            | ClientError::Blocked { .. }
            | ClientError::Lost { .. }
            | ClientError::Autostart(_) => Exit::Unreachable,
        }
    } else if err.downcast_ref::<UsageError>().is_some()
        || err.downcast_ref::<rootsd_hosts::UsageError>().is_some()
        || err.downcast_ref::<ConfigError>().is_some()
    {
        Exit::Usage
    } else if err.downcast_ref::<WaitTimeout>().is_some() {
        Exit::WaitTimeout
    } else if let Some(spawn) = err.downcast_ref::<SpawnError>() {
        match spawn.error.kind() {
            io::ErrorKind::NotFound => Exit::NotFound,
            _ => Exit::CannotExecute,
        }
    } else {
        // ProblemsFound, ResolveError, rootsd_hosts::HostsRefused, and anything unforeseen: nothing was changed.
        Exit::Refused
    };
    exit.code()
}

/// Whether rootsctl should stay silent about `err`: a proxied server that exited has said why
/// on its own stderr, and a reader that went away (`rootsctl list | head -1`) is not an error.
pub fn is_silent(err: &anyhow::Error) -> bool {
    is_broken_pipe(err) || err.downcast_ref::<ServerExit>().is_some()
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// `--wait` ran out of time; the message lists the sessions that lag (exit status 4).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WaitTimeout(pub String);

/// Doctor found problems; they are already printed (exit status 1).
#[derive(Debug, thiserror::Error)]
#[error("doctor found {0} problem(s)")]
pub struct ProblemsFound(pub usize);

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use rootsd_proto::wire::{self, ErrorObject};

    use super::*;

    /// README.md's `**Exit status:**` list, one `(label, meaning)` per item, with wrapped lines
    /// joined.
    fn readme_exit_statuses() -> Vec<(String, String)> {
        let readme = include_str!("../../README.md");
        let start = readme
            .find("**Exit status:**")
            .expect("README.md has an **Exit status:** list");
        let mut items: Vec<(String, String)> = Vec::new();
        for line in readme[start..].lines().skip(1) {
            if line.trim().is_empty() {
                if items.is_empty() {
                    continue;
                }
                break;
            }
            if let Some(item) = line.strip_prefix("- `") {
                let (label, meaning) = item.split_once("`: ").unwrap_or_else(|| {
                    panic!("README.md exit status item {line:?} is not \"- `STATUS`: meaning\"")
                });
                items.push((label.to_owned(), meaning.to_owned()));
            } else if let (Some(continued), Some(last)) =
                (line.strip_prefix("  "), items.last_mut())
            {
                last.1.push(' ');
                last.1.push_str(continued.trim());
            } else {
                panic!("README.md's exit status list has an unexpected line: {line:?}");
            }
        }
        items
    }

    #[test]
    fn the_readme_lists_exactly_the_documented_exit_statuses() {
        let table: Vec<(String, String)> = EXIT_STATUSES
            .iter()
            .map(|d| (d.label(), d.meaning.to_owned()))
            .collect();
        assert_eq!(
            readme_exit_statuses(),
            table,
            "README.md's exit status list must match errors::EXIT_STATUSES word for word"
        );
    }

    #[test]
    fn the_help_lists_every_documented_exit_status() {
        let help = exit_status_help();
        assert!(help.starts_with("Exit status:\n  0 "), "{help}");
        let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        for documented in EXIT_STATUSES {
            let line = format!("{} {}", documented.label(), documented.meaning);
            assert!(words(&help).contains(&line), "{line:?} missing from {help}");
        }
        assert!(help.lines().all(|l| l.len() <= 100), "{help}");
        assert!(
            help.contains("`rootsctl list | head -1`"),
            "a command is never split across lines: {help}"
        );
    }

    #[test]
    fn every_exit_status_is_documented() {
        for exit in [
            Exit::Success,
            Exit::Refused,
            Exit::Usage,
            Exit::Unreachable,
            Exit::WaitTimeout,
            Exit::CannotExecute,
            Exit::NotFound,
        ] {
            assert!(
                EXIT_STATUSES
                    .iter()
                    .any(|d| matches!(d.statuses, Statuses::Of(exits) if exits.contains(&exit))),
                "{exit:?} is not in EXIT_STATUSES"
            );
        }
    }

    #[test]
    fn each_error_maps_to_its_documented_status() {
        let status = |err: anyhow::Error| exit_status(&err);
        let socket = PathBuf::from("/s.sock");
        assert_eq!(status(UsageError("x".into()).into()), 2);
        assert_eq!(status(WaitTimeout("x".into()).into()), 4);
        assert_eq!(status(ProblemsFound(2).into()), 1);
        assert_eq!(status(ServerExit(42).into()), 42);
        assert_eq!(
            status(ResolveError::Missing { input: "x".into() }.into()),
            1
        );
        let spawn = |kind| SpawnError {
            command: "x".into(),
            error: io::Error::from(kind),
        };
        assert_eq!(status(spawn(io::ErrorKind::NotFound).into()), 127);
        assert_eq!(status(spawn(io::ErrorKind::PermissionDenied).into()), 126);
        assert_eq!(
            status(
                ClientError::NotRunning {
                    socket: socket.clone(),
                    hint: String::new()
                }
                .into()
            ),
            3
        );
        assert_eq!(
            status(
                ClientError::Lost {
                    socket: socket.clone(),
                    reason: "x".into()
                }
                .into()
            ),
            3
        );
        assert_eq!(status(ClientError::Autostart("x".into()).into()), 3);
        assert_eq!(
            status(
                ClientError::TimedOut {
                    socket: socket.clone(),
                    waiting_for: "answer status".into(),
                    after: std::time::Duration::from_secs(10)
                }
                .into()
            ),
            3
        );
        assert_eq!(
            status(
                ClientError::NotAdmitted {
                    socket: socket.clone(),
                    message: "x".into()
                }
                .into()
            ),
            3
        );
        assert_eq!(
            status(
                ClientError::Untrusted {
                    socket: socket.clone(),
                    peer_uid: 1001,
                    peer_pid: Some(7),
                    me: 1000
                }
                .into()
            ),
            3
        );
        assert_eq!(
            status(ClientError::Refused(ErrorObject::new(wire::code::NOT_FOUND, "x")).into()),
            1
        );
        assert_eq!(
            status(
                ClientError::VersionMismatch {
                    socket,
                    daemon: OtherProtocol::Refused {
                        message: "x".into()
                    }
                }
                .into()
            ),
            1
        );
        let pipe = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(is_silent(&pipe));
        assert_eq!(status(pipe), 0);
        assert!(is_silent(&ServerExit(3).into()));
        assert!(!is_silent(&UsageError("x".into()).into()));
    }
}
