//! The MCP server process: starting it so that it dies with the proxy, and signalling it only
//! while it is ours to signal.
//!
//! Between fork and exec, the child asks the kernel to kill it when the proxy dies
//! (`PR_SET_PDEATHSIG`): the request survives the exec, so a proxy killed with SIGKILL takes its
//! server with it instead of leaving an orphan. That takes the workspace's one `unsafe` block
//! ([`die_with_the_proxy`]). It replaced a copy of rootsctl started in a hidden mode to make the
//! request and then exec the server: a second exec and a second Rust start-up on every start and
//! restart, which was most of what a restart added to the server's own start.

use std::ffi::OsStr;
use std::future::Future;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use signal_hook::consts::signal::SIGKILL;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::errors::SpawnError;
use rootsd_relay::template::Launch;

/// Where to look for a command when `PATH` is unset, as `execvp` does.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A started server.
pub struct Server {
    /// The process, until [`Server::exit`] takes it to wait for it.
    child: Option<Child>,
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
        let mut cmd = Command::new(&resolved);
        cmd.arg0(program).args(args);
        die_with_the_proxy(&mut cmd);
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
            child: Some(child),
            pid,
            reaped: false,
        })
    }

    /// The server's stdin and stdout, once.
    pub fn pipes(&mut self) -> Option<(ChildStdin, ChildStdout)> {
        let child = self.child.as_mut()?;
        Some((child.stdin.take()?, child.stdout.take()?))
    }

    /// The pid it was started with.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Its exit, once: a future that owns the process, so that the event loop keeps one future
    /// for the server's whole life, where a `Child::wait` made anew on every turn cost a tenth
    /// of relaying a line. Dropping it before the exit kills the server (`kill_on_drop`).
    ///
    /// The loop must call [`Server::reaped`] in the turn the future resolves, before anything
    /// can signal the pid.
    pub fn exit(
        &mut self,
    ) -> Option<impl Future<Output = std::io::Result<ExitStatus>> + 'static + use<>> {
        let mut child = self.child.take()?;
        Some(async move { child.wait().await })
    }

    /// The process was reaped: from now on its pid is never signalled.
    pub fn reaped(&mut self) {
        self.reaped = true;
    }

    /// SIGKILL, unless it has been reaped.
    pub fn kill(&self) {
        self.signal(SIGKILL);
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

/// Makes the child ask, between fork and exec, to be killed when the proxy dies, and refuse to
/// start if the proxy is already gone (then nobody would send the signal).
#[allow(unsafe_code)]
fn die_with_the_proxy(cmd: &mut Command) {
    let proxy = rustix::process::getpid();
    let hook = move || -> std::io::Result<()> {
        if rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
            .is_err()
        {
            // A static message and one write: nothing here may allocate or take a lock.
            let _ = rustix::io::write(
                rustix::stdio::stderr(),
                b"rootsctl proxy: warning: the server will not die with the proxy\n",
            );
        }
        if rustix::process::getppid() != Some(proxy) {
            return Err(rustix::io::Errno::SRCH.into());
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec, where only async-signal-safe calls
    // are sound. It makes three system calls through rustix's raw system-call backend (prctl,
    // getppid, and write on failure), allocates nothing (an `io::Error` from an errno is not
    // boxed) and takes no lock.
    unsafe {
        cmd.pre_exec(hook);
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
