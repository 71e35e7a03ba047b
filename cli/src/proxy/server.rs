//! The MCP server process: starting it so that it dies with the proxy, and signalling it only
//! while it is ours to signal.
//!
//! The server is not started directly. `rootsctl` starts a copy of itself in a hidden mode
//! ([`EXEC_MODE`]) that asks the kernel to kill it when the proxy dies (`PR_SET_PDEATHSIG`), then
//! replaces itself with the server: the request survives the exec, so a proxy killed with SIGKILL
//! takes its server with it instead of leaving an orphan. Doing this in the child between fork and
//! exec would need `unsafe` (`pre_exec`), which the workspace denies.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::errors::SpawnError;
use rootsd_relay::template::Launch;

/// The first argument that puts `rootsctl` in its server-starting mode:
/// `rootsctl __exec-server PARENT-PID PROGRAM ARGS…`. Not a subcommand: it is never shown, and
/// nothing but the proxy calls it.
pub const EXEC_MODE: &str = "__exec-server";

/// Where to look for a command when `PATH` is unset, as `execvp` does.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A started server.
pub struct Server {
    pub child: Child,
    pid: Option<u32>,
    /// Set once the child has been reaped: its pid may then belong to another process.
    reaped: bool,
}

impl Server {
    /// Starts `launch` (its command line, with its variables set, in its directory) with piped
    /// stdin and stdout and the proxy's stderr.
    pub fn spawn(launch: &Launch) -> Result<Self, SpawnError> {
        let (program, args) = launch.argv.split_first().expect("clap requires a command");
        let mut resolved = resolve(program)?;
        if launch.cwd.is_some() && resolved.is_relative() {
            // The server starts in another directory, where a relative path would name another
            // program than the one found here.
            if let Ok(here) = std::env::current_dir() {
                resolved = here.join(resolved);
            }
        }
        let mut cmd = match std::env::current_exe() {
            Ok(rootsctl) => {
                let mut cmd = Command::new(rootsctl);
                cmd.arg(EXEC_MODE)
                    .arg(std::process::id().to_string())
                    .arg(&resolved)
                    .arg(program)
                    .args(args);
                cmd
            }
            // Without a path to ourselves the server starts directly, only without the
            // death signal.
            Err(_) => {
                let mut cmd = Command::new(&resolved);
                cmd.arg0(program).args(args);
                cmd
            }
        };
        cmd.envs(launch.env.iter().map(|(name, value)| (name, value)));
        if let Some(dir) = &launch.cwd {
            cmd.current_dir(dir);
        }
        let child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| SpawnError {
                command: program.to_string_lossy().into_owned(),
                error,
            })?;
        let pid = child.id();
        Ok(Self {
            child,
            pid,
            reaped: false,
        })
    }

    /// Waits for the server to exit, and from then on never signals its pid.
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let status = self.child.wait().await;
        self.reaped = true;
        status
    }

    /// Sends `signal` to the server, unless it has been reaped.
    pub fn signal(&self, signal: i32) {
        if self.reaped {
            return;
        }
        let Some(pid) = self
            .pid
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        else {
            return;
        };
        let Some(signal) = rustix::process::Signal::from_named_raw(signal) else {
            return;
        };
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// Finds `program` as `execvp` would, so that a missing or unrunnable command is reported by the
/// proxy itself (127 or 126, as shells do) before anything starts.
fn resolve(program: &OsStr) -> Result<PathBuf, SpawnError> {
    let fail = |error: std::io::Error| SpawnError {
        command: program.to_string_lossy().into_owned(),
        error,
    };
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

/// `rootsctl __exec-server PARENT PROGRAM ARGV0 ARGS…`: arranges to be killed when the proxy
/// (`PARENT`) dies, then becomes the server. Returns only if that fails, with the exit status
/// shells use (126, or 127 for a missing program).
pub fn exec_server(args: &[OsString]) -> u8 {
    let [parent, program, argv0, rest @ ..] = args else {
        eprintln!(
            "rootsctl: {EXEC_MODE} is rootsctl proxy's own; it takes PARENT PROGRAM ARGV0 ARGS…"
        );
        return 2;
    };
    let parent: i32 = parent.to_str().and_then(|p| p.parse().ok()).unwrap_or(0);
    if let Err(err) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        eprintln!("rootsctl proxy: warning: the server will not die with the proxy: {err}");
    }
    // The proxy may have died before the request took effect; then nobody would send the signal.
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) != Some(parent) {
        return 1;
    }
    let error = std::process::Command::new(program)
        .arg0(argv0)
        .args(rest)
        .exec();
    eprintln!(
        "rootsctl proxy: cannot start the MCP server {:?}: {error}",
        argv0.to_string_lossy()
    );
    if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
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
