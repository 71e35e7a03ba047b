//! The MCP server: its command found as `execvp` would, its process started under a keeper that
//! ends it and everything it started with the proxy ([`super::keeper`], [`super::process`]), and
//! its pipes.

use std::ffi::OsStr;
use std::future::Future;
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use rustix::process::Signal;
use tokio::net::unix::pipe;

use super::keeper;
use super::process::{self, Process};
use crate::errors::SpawnError;
use rootsd_relay::template::Launch;

/// How much of the end of a server's stderr a failed start's error quotes.
const TAIL_SHOWN: usize = 400;

/// Where to look for a command when `PATH` is unset, as `execvp` does.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The server's stdin, as the proxy writes it.
pub type ServerStdin = pipe::Sender;
/// The server's stdout, as the proxy reads it.
pub type ServerStdout = pipe::Receiver;

/// A started server.
pub struct Server {
    process: Process,
    pid: u32,
    pipes: Option<(ServerStdin, ServerStdout)>,
    /// [`Server::exit`] was taken.
    watched: bool,
}

impl Server {
    /// Starts `launch` (its command line, with its variables set, in its directory) under its
    /// keeper, with piped stdin and stdout and the proxy's stderr.
    ///
    /// Any thread may start it: the keeper watches a pipe that closes with the proxy, where a
    /// death signal would have followed the thread that started the child.
    pub fn spawn(launch: &Launch) -> Result<Self, SpawnError> {
        let program = launch.argv.first().expect("clap requires a command");
        let fail = |error| SpawnError::new(program, error);
        let mut resolved = resolve(program)?;
        if launch.cwd.is_some() && resolved.is_relative() {
            // The server starts in another directory, where a relative path would name another
            // program than the one found here.
            if let Ok(here) = std::env::current_dir() {
                resolved = here.join(resolved);
            }
        }
        // The keeper starts the server, in the directory and with the environment it is given.
        let (keeper, line) = keeper::command_line(&resolved, &launch.argv);
        let started = process::Command::new(&keeper, &line, &launch.env, launch.cwd.as_deref())
            .and_then(|command| command.with(keeper::options()).spawn())
            .map_err(fail)?;
        // The proxy's ends, made non-blocking for the runtime. Should that fail, the process
        // is killed as `started` goes.
        let stdin = pipe::Sender::from_owned_fd(started.stdin).map_err(fail)?;
        let stdout = pipe::Receiver::from_owned_fd(started.stdout).map_err(fail)?;
        Ok(Self {
            process: started.process,
            pid: started.pid,
            pipes: Some((stdin, stdout)),
            watched: false,
        })
    }

    /// The server's stdin and stdout, once.
    pub fn pipes(&mut self) -> Option<(ServerStdin, ServerStdout)> {
        self.pipes.take()
    }

    /// The pid it was started with.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its pidfd, readable once it has exited, for the loop's own wait.
    pub fn pidfd(&self) -> BorrowedFd<'_> {
        self.process.pidfd()
    }

    /// Its exit, once: a future that reaps it, kept by the event loop for the server's whole
    /// life, where a wait made anew on every turn cost a tenth of relaying a line.
    pub fn exit(
        &mut self,
    ) -> Option<impl Future<Output = std::io::Result<ExitStatus>> + 'static + use<>> {
        (!std::mem::replace(&mut self.watched, true)).then(|| self.process.exit())
    }

    /// The last lines the server wrote to its stderr (at most [`TAIL_SHOWN`] bytes, control
    /// characters escaped), once its keeper has exited; empty when it wrote nothing.
    pub fn stderr_tail(&self) -> String {
        let bytes = self.process.report(super::keeper::STDERR_TAIL);
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim_end();
        let start = text
            .char_indices()
            .map(|(at, _)| at)
            .find(|&at| text.len() - at <= TAIL_SHOWN)
            .unwrap_or(text.len());
        rootsd_proto::text::escape_controls(text[start..].trim_start()).into_owned()
    }

    /// SIGKILL to the server and everything it started, unless it has been reaped.
    pub fn kill(&self) {
        self.process.kill();
    }

    /// Sends `signal` to the server's process group (through its keeper), unless it has been
    /// reaped.
    pub fn signal(&self, signal: i32) {
        if let Some(signal) = Signal::from_named_raw(signal) {
            self.process.signal(signal);
        }
    }
}

/// Finds `program` as `execvp` would, so that a missing or unrunnable command is reported by the
/// proxy itself (127 or 126, as shells do) before anything starts.
fn resolve(program: &OsStr) -> Result<PathBuf, SpawnError> {
    let fail = |error| SpawnError::new(program, error);
    if program.as_bytes().contains(&b'/') {
        let path = PathBuf::from(program);
        check_executable(&path).map_err(fail)?;
        return Ok(path);
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    let mut denied = None;
    for dir in std::env::split_paths(&search) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(program);
        match check_executable(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
                denied.get_or_insert(err);
            }
            Err(_) => {}
        }
    }
    Err(fail(denied.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("not found on PATH ({})", Path::new(&search).display()),
        )
    })))
}

fn check_executable(path: &Path) -> std::io::Result<()> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() || meta.permissions().mode() & 0o111 == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} is not an executable file", path.display()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_resolve_like_execvp_and_failures_name_the_reason() {
        assert!(resolve(OsStr::new("sh")).unwrap().is_absolute());
        let missing = resolve(OsStr::new("no-such-command-anywhere")).unwrap_err();
        assert_eq!(missing.error.kind(), std::io::ErrorKind::NotFound);
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("server.txt");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        let denied = resolve(plain.as_os_str()).unwrap_err();
        assert_eq!(denied.error.kind(), std::io::ErrorKind::PermissionDenied);
        let absent = resolve(dir.path().join("absent").as_os_str()).unwrap_err();
        assert_eq!(absent.error.kind(), std::io::ErrorKind::NotFound);
    }
}
