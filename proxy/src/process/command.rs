//! What a child is started with, made whole before the clone (the child may not allocate), and
//! its start: the pipes, the keeper's control and report pipes, and the call into `raw`.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use super::raw;
use super::{Process, Started};
use crate::stdio::STREAM_HIGH_WATER;

/// A program to start, as the child will read it: made whole before the clone, since the child
/// may not allocate.
pub struct Command {
    path: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    cwd: Option<CString>,
    options: Options,
}

/// How a child starts besides its command.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// It asks for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`).
    pub death_signal: bool,
    /// It leads a process group of its own, so that a signal to the group reaches what it
    /// starts, and a signal to its parent's group does not reach it.
    pub own_group: bool,
    /// It gets the read end of a pipe as descriptor 3, whose write end only the parent holds:
    /// a keeper's control pipe, which reads end-of-file once the parent is gone, however it
    /// ended.
    pub control: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            death_signal: true,
            own_group: false,
            control: false,
        }
    }
}

impl Command {
    /// `path` run with `argv` (its first item the name it is started by), the proxy's
    /// environment with `overrides` set on top (the last of a repeated name wins, as with std),
    /// in `cwd` or the proxy's own directory.
    pub fn new(
        path: &Path,
        argv: &[OsString],
        overrides: &[(OsString, OsString)],
        cwd: Option<&Path>,
    ) -> io::Result<Self> {
        let mut env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
        env.extend(overrides.iter().cloned());
        Ok(Self {
            path: c_string(path.as_os_str(), || format!("the program's path {path:?}"))?,
            argv: argv
                .iter()
                .map(|arg| c_string(arg, || format!("the argument {arg:?}")))
                .collect::<io::Result<_>>()?,
            env: env
                .into_iter()
                .map(|(name, value)| {
                    let mut entry = name.clone();
                    entry.push("=");
                    entry.push(value);
                    // The value is left out of the message: it may be a secret.
                    c_string(&entry, || format!("the environment variable {name:?}"))
                })
                .collect::<io::Result<_>>()?,
            cwd: cwd
                .map(|dir| c_string(dir.as_os_str(), || format!("the directory {dir:?}")))
                .transpose()?,
            options: Options::default(),
        })
    }

    /// Starts it with `options` rather than the defaults.
    pub fn with(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Starts it with piped stdin and stdout and the proxy's stderr. An error names the step
    /// that failed: the pipes, the clone, or the child's own steps (its directory, the exec),
    /// whose `errno` it is.
    pub fn spawn(&self) -> io::Result<Started> {
        let (stdin_child, stdin) = io::pipe()?;
        let (stdout, stdout_child) = io::pipe()?;
        // The server's pipe is where a long line it writes waits for the host: the proxy moves
        // the line's pieces on from it by `splice` (`super::splice`), and a piece still waiting
        // there stops the proxy reading more. At the kernel's default of 64 KiB, a server on
        // another core then stalled until the host had read each piece; room for as much as
        // the proxy would otherwise queue lets it write ahead, as it could into the proxy's
        // queue. Its pages are allocated only as the server fills them, though the user's pipe
        // quota (`/proc/sys/fs/pipe-user-pages-soft`, 64 MiB by default) counts all 256 KiB at
        // once; a user past it keeps the smaller pipe the kernel made, which is only slower.
        let _ = rustix::pipe::fcntl_setpipe_size(&stdout, STREAM_HIGH_WATER);
        // The child moves its ends onto 0 and 1 (`above_fixed` says why they start higher).
        let stdin_child = above_fixed(stdin_child.into())?;
        let stdout_child = above_fixed(stdout_child.into())?;
        let (pid, process) =
            self.clone_and_exec(Some((stdin_child.as_fd(), stdout_child.as_fd())))?;
        Ok(Started {
            pid,
            process,
            stdin: stdin.into(),
            stdout: stdout.into(),
        })
    }

    /// Starts it with the caller's own stdin, stdout and stderr.
    pub fn spawn_inheriting(&self) -> io::Result<(u32, Process)> {
        self.clone_and_exec(None)
    }

    fn clone_and_exec(
        &self,
        pipes: Option<(BorrowedFd<'_>, BorrowedFd<'_>)>,
    ) -> io::Result<(u32, Process)> {
        let control = if self.options.control {
            let (read, write) = io::pipe()?;
            let write = OwnedFd::from(write);
            rustix::fs::fcntl_setfl(&write, rustix::fs::OFlags::NONBLOCK)?;
            let (report, report_child) = io::pipe()?;
            let report = OwnedFd::from(report);
            rustix::fs::fcntl_setfl(&report, rustix::fs::OFlags::NONBLOCK)?;
            Some((
                above_fixed(read.into())?,
                write,
                above_fixed(report_child.into())?,
                report,
            ))
        } else {
            None
        };
        let argv = pointers(&self.argv);
        let envp = pointers(&self.env);
        let (pid, pidfd) = raw::clone_and_exec(&raw::Exec {
            path: &self.path,
            argv: &argv,
            envp: &envp,
            cwd: self.cwd.as_deref(),
            stdin: pipes.map(|(stdin, _)| stdin),
            stdout: pipes.map(|(_, stdout)| stdout),
            control: control.as_ref().map(|(read, ..)| read.as_fd()),
            report: control.as_ref().map(|(_, _, write, _)| write.as_fd()),
            death_signal: self.options.death_signal,
            own_group: self.options.own_group,
        })?;
        let pipes = control.map(|(_, control, _, report)| (control, report));
        Ok((pid, Process::new(pidfd, pipes)))
    }
}

/// `text` as a C string, or an error naming `what` (`the argument "…"`) when it holds a NUL byte.
fn c_string(text: &OsStr, what: impl FnOnce() -> String) -> io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} holds a NUL byte, which no program can be given", what()),
        )
    })
}

/// The strings' pointers, ended by a null one, as `execve` takes them.
fn pointers(strings: &[CString]) -> Vec<*const std::ffi::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// `fd`, or a close-on-exec copy of it numbered 4 or more: above the descriptors the child moves
/// its ends onto (0, 1, and a keeper's 3 and 4), so that no move overwrites another's source,
/// even in a proxy started with a standard descriptor closed.
fn above_fixed(fd: OwnedFd) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd as _;
    if fd.as_raw_fd() > raw::REPORT_FD {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, raw::REPORT_FD + 1)?)
}

/// The control pipe a keeper was started with ([`Options::control`]), as its own: marked
/// close-on-exec, so that the server it starts does not hold it.
pub fn inherited_control() -> io::Result<OwnedFd> {
    let fd = raw::adopt_pipe(raw::CONTROL_FD, "control")?;
    rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC)?;
    Ok(fd)
}

/// The write end of the report pipe a keeper was started with, as its own and close-on-exec.
pub fn inherited_report() -> io::Result<OwnedFd> {
    let fd = raw::adopt_pipe(raw::REPORT_FD, "report")?;
    rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC)?;
    Ok(fd)
}
