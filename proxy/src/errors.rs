//! The proxy's own errors, whose exit statuses rootsctl's `errors::exit_status` decides: the
//! server's status passed on, and the shells' 126 and 127 for a server that cannot start.

use std::io;
use std::process::ExitStatus;

/// How the proxied server exited, passed on as the proxy's own status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the server exited with status {0}")]
pub struct ServerExit(pub u8);

impl ServerExit {
    /// The server's exit code, or 128 + the signal that killed it, as shells report.
    pub fn of(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        Self(match (status.code(), status.signal()) {
            (Some(code), _) => code.clamp(0, 255) as u8,
            (None, Some(signal)) => (128 + signal).clamp(0, 255) as u8,
            (None, None) => 1,
        })
    }

    /// Success when the server exited 0; otherwise this, as an error carrying its status.
    pub fn into_result(self) -> anyhow::Result<()> {
        match self.0 {
            0 => Ok(()),
            _ => Err(self.into()),
        }
    }
}

/// The proxy could not run its server (exit status 127 when the command does not exist, 126
/// when it cannot be executed, as shells do).
#[derive(Debug, thiserror::Error)]
#[error("cannot start the MCP server {command:?}: {error}")]
pub struct SpawnError {
    pub command: String,
    pub error: io::Error,
}

impl SpawnError {
    /// `program` could not be started, for `error`.
    pub fn new(program: &std::ffi::OsStr, error: io::Error) -> Self {
        Self {
            command: program.to_string_lossy().into_owned(),
            error,
        }
    }
}
