//! The server's process: started without a copy of the proxy and with the request to die with
//! it, then waited for and signalled through its pidfd. The proxy starts its server's keeper
//! (`super::keeper`) this way, with a control pipe instead of the death signal ([`Options`]),
//! and the keeper starts the server so.
//!
//! A server must not outlive a proxy killed with SIGKILL, so its child asks the kernel for a
//! death signal (`PR_SET_PDEATHSIG`) before it execs: only the child can ask, and the request
//! survives the exec. std can run code in the child only on its `fork` path, which copies the
//! proxy's address space (its page tables marked copy-on-write, then faulted back in the
//! parent): that cost this project's machine 0.25–0.45 ms per start, most of what a restart
//! added to the server's own start (docs/BENCHMARKS.md). Without such code std uses
//! `posix_spawn`, which shares the parent's memory until the exec (a `vfork`) but cannot make the
//! request. This module does what `posix_spawn` does, and makes the request.
//!
//! The child runs in the proxy's memory until it execs, while the proxy's other threads go on,
//! so it takes the care `posix_spawn` takes:
//! - it runs on a stack of its own, and reads only what the parent made before the clone (the C
//!   strings of the path, arguments, environment and directory), which nothing changes while
//!   the calling thread is suspended (`CLONE_VFORK`);
//! - it allocates nothing, takes no lock and makes only async-signal-safe calls;
//! - it has its own descriptor table, directory and signal handlers (the clone shares none of
//!   them: no `CLONE_FILES`, `CLONE_FS` or `CLONE_SIGHAND`), so that what it changes before the
//!   exec is its own;
//! - it starts with every signal blocked (the parent blocks them around the clone) and resets
//!   every handler to the default before it unblocks them, so that none of the proxy's handlers
//!   runs in the child, on the proxy's memory; like std, it starts the server with no signal
//!   blocked and SIGPIPE at its default;
//! - a step that fails before the exec leaves its `errno` in a word of the shared memory, which
//!   the parent reads when it resumes (the kernel resumes it once the child has exec'd or
//!   exited).
//!
//! The clone also makes a pidfd (`CLONE_PIDFD`, Linux 5.2; waiting on one needs 5.4), which
//! [`Process`] waits on and signals through: a signal can never reach another process that took
//! the pid once the server's was reaped.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::future::Future;
use std::io;
use std::os::fd::{AsFd as _, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::ExitStatus;
use std::rc::Rc;

use rustix::process::{Signal, WaitId, WaitIdOptions, WaitIdStatus};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::stdio::STREAM_HIGH_WATER;

/// A started child: its pid, its process, and the proxy's ends of its stdin and stdout.
pub struct Started {
    pub pid: u32,
    pub process: Process,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
}

/// A child process behind its pidfd. Clones share it (the server, and the future that waits for
/// its exit); the last of them to go kills a process that was never reaped, since a server must
/// not outlive the proxy letting go of it.
#[derive(Clone)]
pub struct Process(Rc<Pidfd>);

struct Pidfd {
    fd: OwnedFd,
    reaped: Cell<bool>,
    /// The write end of a keeper's control pipe ([`Options::control`]): a keeper is never
    /// killed, since the tree it keeps would outlive it, but told to kill that tree.
    control: Option<OwnedFd>,
    /// The read end of a keeper's report pipe: the tail of its server's stderr, written as the
    /// keeper exits.
    report: Option<OwnedFd>,
}

/// The byte that tells a keeper to kill everything it keeps at once (`super::keeper`).
pub const KILL_REQUEST: u8 = b'K';

impl Pidfd {
    /// SIGKILL for a plain child; for a keeper, the request to SIGKILL its whole tree.
    fn kill(&self) {
        match &self.control {
            // The pipe is non-blocking: a full one already holds requests the keeper has yet
            // to read, and a keeper that is gone has nothing left to kill.
            Some(control) => {
                let _ = rustix::io::write(control, &[KILL_REQUEST]);
            }
            None => {
                let _ = rustix::process::pidfd_send_signal(&self.fd, Signal::KILL);
            }
        }
    }
}

impl Drop for Pidfd {
    /// Kills the process (or has its keeper kill its tree), without waiting for it: a process
    /// stuck in the kernel (a hung mount) may take its time to die, and the proxy does not wait
    /// without a limit. It lets go of a server only as it ends or when a start failed half-way,
    /// so the zombie is its parent's for moments at most.
    fn drop(&mut self) {
        if !self.reaped.get() {
            self.kill();
        }
    }
}

/// The pidfd as the runtime's readiness holds it: open for as long as the registration, as one
/// of the shared owners.
struct Registered(Rc<Pidfd>);

impl AsRawFd for Registered {
    fn as_raw_fd(&self) -> RawFd {
        self.0.fd.as_raw_fd()
    }
}

impl Process {
    fn new(fd: OwnedFd, pipes: Option<(OwnedFd, OwnedFd)>) -> Self {
        let (control, report) = pipes.unzip();
        Self(Rc::new(Pidfd {
            fd,
            reaped: Cell::new(false),
            control,
            report,
        }))
    }

    /// What a keeper reported as it exited (the tail of its server's stderr), at most
    /// `limit` bytes; empty for any other process, or before the keeper exited.
    pub fn report(&self, limit: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; limit];
        let Some(report) = &self.0.report else {
            return Vec::new();
        };
        let mut filled = 0;
        while filled < limit {
            match rustix::io::read(report, &mut bytes[filled..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => filled += n,
            }
        }
        bytes.truncate(filled);
        bytes
    }

    /// SIGKILL, unless it has been reaped; a keeper is asked to SIGKILL its whole tree instead.
    pub fn kill(&self) {
        if !self.0.reaped.get() {
            self.0.kill();
        }
    }

    /// The pidfd, readable once the process has exited.
    pub fn pidfd(&self) -> BorrowedFd<'_> {
        self.0.fd.as_fd()
    }

    /// Sends `signal`, unless the process has been reaped: the kernel refuses a pidfd's signal
    /// once its process is gone, whoever has its pid now.
    pub fn signal(&self, signal: Signal) {
        let _ = rustix::process::pidfd_send_signal(&self.0.fd, signal);
    }

    /// The process's exit, which reaps it. Made once: a second registration of the pidfd with
    /// the runtime would fail.
    pub fn exit(&self) -> impl Future<Output = io::Result<ExitStatus>> + 'static + use<> {
        let pidfd = Rc::clone(&self.0);
        async move {
            let exit = readiness(Registered(pidfd))?;
            loop {
                let mut ready = exit.readable().await?;
                let pidfd = &exit.get_ref().0;
                match rustix::process::waitid(
                    WaitId::PidFd(pidfd.fd.as_fd()),
                    WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
                ) {
                    Ok(Some(status)) => {
                        pidfd.reaped.set(true);
                        return Ok(exit_status(&status));
                    }
                    // Readiness stays set for the retry: it may have been the only edge.
                    Err(rustix::io::Errno::INTR) => {}
                    Ok(None) => ready.clear_ready(),
                    Err(rustix::io::Errno::INVAL) => {
                        return Err(io::Error::new(
                            io::ErrorKind::Unsupported,
                            "this kernel cannot wait on a pidfd (Linux 5.4 or later is needed)",
                        ));
                    }
                    Err(error) => return Err(error.into()),
                }
            }
        }
    }
}

/// A wait's status as std tells it: an exit code, or the signal that ended the process.
fn exit_status(status: &WaitIdStatus) -> ExitStatus {
    let raw = match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => (code & 0xff) << 8,
        (None, Some(signal)) => signal | if status.dumped() { 0x80 } else { 0 },
        // A wait for exits reports nothing else; should it, it counts as a failure, never as
        // success.
        (None, None) => 1 << 8,
    };
    ExitStatus::from_raw(raw)
}

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

/// The runtime's readiness of a pidfd.
///
/// tokio deprecated its safe constructor because a caller could hand it a descriptor it does not
/// own and close it while registered; the replacement is `unsafe`. `Registered` is one of the
/// pidfd's owners, so the descriptor stays open, and the same, for as long as the registration
/// holds it: the condition the `unsafe` one asks its caller to uphold (as the daemon's
/// `connection/peer_socket.rs` registers its sockets).
#[allow(deprecated)]
fn readiness(pidfd: Registered) -> io::Result<AsyncFd<Registered>> {
    AsyncFd::with_interest(pidfd, Interest::READABLE)
}

/// The clone and the child: the workspace's one place allowed `unsafe`.
#[allow(unsafe_code)]
mod raw {
    use std::ffi::{CStr, c_char, c_int, c_void};
    use std::io;
    use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
    use std::sync::atomic::{AtomicI32, Ordering};

    /// The child's stack. It runs a few small frames of its own and glibc's wrappers, never
    /// anything that grows with the command; `posix_spawn` gives its child 32 KiB and the
    /// arguments' size, for a `PATH` search this child does not make.
    const STACK_BYTES: usize = 64 * 1024;

    /// Where a child started with a control pipe finds its read end.
    pub const CONTROL_FD: RawFd = 3;
    /// Where it finds the write end of its report pipe.
    pub const REPORT_FD: RawFd = 4;

    /// Takes descriptor `fd` as the keeper's own, after checking that it is a pipe (as the
    /// proxy starts a keeper), so that nothing else is taken by mistake.
    pub fn adopt_pipe(fd: RawFd, what: &str) -> io::Result<OwnedFd> {
        // SAFETY: the borrow is only for the check below, during which nothing closes it.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let stat = rustix::fs::fstat(borrowed)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Fifo {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("descriptor {fd} is not the proxy's {what} pipe"),
            ));
        }
        // SAFETY: the proxy started this process with the pipe as descriptor `fd`, and nothing
        // else in it refers to that descriptor: it is owned from here on.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// What to exec, and where the child's stdin and stdout come from.
    pub struct Exec<'a> {
        pub path: &'a CStr,
        /// Null-terminated, pointing into strings that outlive the call.
        pub argv: &'a [*const c_char],
        pub envp: &'a [*const c_char],
        pub cwd: Option<&'a CStr>,
        /// None: the caller's own.
        pub stdin: Option<BorrowedFd<'a>>,
        pub stdout: Option<BorrowedFd<'a>>,
        /// Moved onto [`CONTROL_FD`], when given.
        pub control: Option<BorrowedFd<'a>>,
        /// Moved onto [`REPORT_FD`], when given.
        pub report: Option<BorrowedFd<'a>>,
        pub death_signal: bool,
        pub own_group: bool,
    }

    /// All the child reads, in the parent's frame.
    struct Child {
        path: *const c_char,
        argv: *const *const c_char,
        envp: *const *const c_char,
        /// Null for the proxy's own directory.
        cwd: *const c_char,
        /// -1 for none (stdin and stdout: the parent's own).
        stdin: RawFd,
        stdout: RawFd,
        control: RawFd,
        report: RawFd,
        death_signal: bool,
        own_group: bool,
        /// The proxy, which the child checks is still its parent once it asked for the signal.
        proxy: libc::pid_t,
        /// The highest signal number whose handler the child resets.
        last_signal: c_int,
        /// The `errno` of the child's step that failed, 0 while none has.
        failed: AtomicI32,
    }

    /// Starts `exec` in a child that shares the proxy's memory until it execs, and asks to be
    /// killed when the proxy dies. Returns its pid and pidfd once it has exec'd; a child that
    /// failed before its exec has been reaped, and its `errno` is the error.
    pub fn clone_and_exec(exec: &Exec<'_>) -> io::Result<(u32, OwnedFd)> {
        assert!(
            exec.argv.last().is_some_and(|p| p.is_null())
                && exec.envp.last().is_some_and(|p| p.is_null()),
            "argv and envp end with a null pointer"
        );
        let child = Child {
            path: exec.path.as_ptr(),
            argv: exec.argv.as_ptr(),
            envp: exec.envp.as_ptr(),
            cwd: exec.cwd.map_or(std::ptr::null(), CStr::as_ptr),
            stdin: exec.stdin.map_or(-1, |fd| fd.as_raw_fd()),
            stdout: exec.stdout.map_or(-1, |fd| fd.as_raw_fd()),
            control: exec.control.map_or(-1, |fd| fd.as_raw_fd()),
            report: exec.report.map_or(-1, |fd| fd.as_raw_fd()),
            death_signal: exec.death_signal,
            own_group: exec.own_group,
            proxy: rustix::process::getpid().as_raw_nonzero().get(),
            last_signal: libc::SIGRTMAX(),
            failed: AtomicI32::new(0),
        };
        // Memory for the stack, never read before the child writes it. `u128` aligns it to the
        // 16 bytes the ABI asks of a stack.
        let mut stack: Vec<u128> = Vec::with_capacity(STACK_BYTES / size_of::<u128>());
        let top = stack
            .as_mut_ptr()
            .wrapping_add(stack.capacity())
            .cast::<c_void>();
        let mut pidfd: c_int = -1;
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
        // Every signal blocked in this thread, so that the child inherits them blocked and no
        // handler runs in it before it has reset them all.
        let before = set_signal_mask(!0);
        // SAFETY: `child_main` gets a pointer to `child`, which lives in this frame until the
        // call returns, and the call returns only once the child has exec'd or exited
        // (`CLONE_VFORK`): it never reads `child` or the stack afterwards. The stack is owned
        // memory of STACK_BYTES, and `top` is its end, as the stack grows down. The child
        // shares this memory (`CLONE_VM`) and writes only its own stack and `child.failed`,
        // an atomic. With `CLONE_PIDFD` the kernel writes the pidfd to the first of the
        // variadic arguments; the other two are read only with flags not given here.
        let pid = unsafe {
            libc::clone(
                child_main,
                top,
                flags,
                std::ptr::from_ref(&child).cast_mut().cast::<c_void>(),
                &raw mut pidfd,
                std::ptr::null_mut::<c_void>(),
                std::ptr::null_mut::<c_int>(),
            )
        };
        let clone_error = (pid < 0).then(io::Error::last_os_error);
        set_signal_mask(before);
        drop(stack);
        if let Some(error) = clone_error {
            return Err(error);
        }
        let pid = u32::try_from(pid).expect("a successful clone returns a positive pid");
        if pidfd < 0 {
            // A kernel older than 5.2 ignores the flag: the pid is all there is.
            reap_without_pidfd(pid);
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel cannot give the proxy a pidfd for its server (Linux 5.4 or later is needed)",
            ));
        }
        // SAFETY: the kernel made this descriptor for the proxy, and nothing else owns it.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        match child.failed.load(Ordering::Acquire) {
            0 => Ok((pid, pidfd)),
            errno => {
                // It has exited (or is exiting): reap it so that it leaves no zombie.
                let _ = rustix::process::waitid(
                    rustix::process::WaitId::PidFd(std::os::fd::AsFd::as_fd(&pidfd)),
                    rustix::process::WaitIdOptions::EXITED,
                );
                Err(io::Error::from_raw_os_error(errno))
            }
        }
    }

    /// Kills and reaps a child the proxy has no pidfd of: it was just started, and nothing else
    /// waits for it, so its pid is still its own.
    fn reap_without_pidfd(pid: u32) {
        if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
        }
    }

    /// The child: until its exec it is a guest in the proxy's memory (the module's comment says
    /// what that forbids).
    extern "C" fn child_main(arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the parent's `Child`, alive while the parent is suspended.
        let child = unsafe { &*arg.cast::<Child>() };
        // SAFETY: `prepare_and_exec` makes only async-signal-safe calls, on `child`'s fields.
        let errno = unsafe { prepare_and_exec(child) };
        child.failed.store(errno.max(1), Ordering::Release);
        // SAFETY: `_exit` ends the child without running anything of the proxy's (no atexit
        // handlers, no buffers flushed).
        unsafe { libc::_exit(127) }
    }

    /// Returns only if a step failed, with its `errno`.
    ///
    /// # Safety
    /// In the child of `clone_and_exec` only, with `child` as the parent made it.
    unsafe fn prepare_and_exec(child: &Child) -> c_int {
        // SAFETY: each call is async-signal-safe and takes pointers to this frame's data or to
        // the strings the parent made.
        unsafe {
            // No handler of the proxy's may run here, and the server starts as std starts
            // programs: every handler at its default (an ignored signal stays ignored, as across
            // any exec) but SIGPIPE, which Rust ignores, at its default too. glibc refuses
            // the two numbers it keeps for itself, whose handlers stay blocked until the last
            // step before the exec (its handler for them acts only on a signal a process sends
            // itself), as in `posix_spawn`'s child.
            for signal in 1..=child.last_signal {
                let mut action = std::mem::zeroed::<libc::sigaction>();
                if libc::sigaction(signal, std::ptr::null(), &mut action) != 0 {
                    continue;
                }
                let handled =
                    action.sa_sigaction != libc::SIG_IGN && action.sa_sigaction != libc::SIG_DFL;
                if handled || signal == libc::SIGPIPE {
                    let mut default = std::mem::zeroed::<libc::sigaction>();
                    default.sa_sigaction = libc::SIG_DFL;
                    libc::sigaction(signal, &default, std::ptr::null_mut());
                }
            }
            for (from, to) in [
                (child.stdin, 0),
                (child.stdout, 1),
                (child.control, CONTROL_FD),
                (child.report, REPORT_FD),
            ] {
                if from >= 0 && libc::dup2(from, to) < 0 {
                    return errno();
                }
            }
            if !child.cwd.is_null() && libc::chdir(child.cwd) != 0 {
                return errno();
            }
            if child.own_group && libc::setpgid(0, 0) != 0 {
                return errno();
            }
            if !child.death_signal {
                set_signal_mask(0);
                libc::execve(child.path, child.argv, child.envp);
                return errno();
            }
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            ) != 0
            {
                // A static message and one write: nothing here may allocate.
                let warning = b"rootsctl proxy: warning: the server will not die with the proxy\n";
                libc::write(2, warning.as_ptr().cast(), warning.len());
            }
            // A proxy that died before the request took effect will never send the signal.
            if libc::getppid() != child.proxy {
                return libc::ESRCH;
            }
            set_signal_mask(0);
            libc::execve(child.path, child.argv, child.envp);
            errno()
        }
    }

    /// Sets the calling thread's signal mask, in the kernel's terms, and returns the one before.
    /// The system call, not glibc's `sigprocmask`: glibc leaves out the two signals it keeps for
    /// itself, whose handlers must not run in the child either (`posix_spawn` blocks them too).
    /// Async-signal-safe, for the child as for the parent.
    fn set_signal_mask(mask: u64) -> u64 {
        let mut before: u64 = 0;
        // SAFETY: rt_sigprocmask reads `mask` and writes `before`, both of the 8 bytes that are
        // the kernel's signal set on Linux, and changes only the calling thread's mask.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                &raw const mask,
                &raw mut before,
                size_of::<u64>(),
            );
        }
        before
    }

    /// The calling thread's `errno`: in the child, the parent thread's word, which the parent
    /// does not read while the child runs.
    unsafe fn errno() -> c_int {
        // SAFETY: glibc's errno location is valid for the calling thread.
        unsafe { *libc::__errno_location() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    fn run(argv: &[&str], env: &[(&str, &str)], cwd: Option<&Path>) -> io::Result<Started> {
        let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
        let env: Vec<(OsString, OsString)> = env
            .iter()
            .map(|(n, v)| (OsString::from(n), OsString::from(v)))
            .collect();
        Command::new(Path::new("/bin/sh"), &argv, &env, cwd)?.spawn()
    }

    /// Waits for the child through its pidfd, as the proxy does: its exit code.
    fn exit_code(started: &Started) -> i32 {
        let status = rustix::process::waitid(
            rustix::process::WaitId::PidFd(started.process.pidfd()),
            rustix::process::WaitIdOptions::EXITED,
        )
        .unwrap()
        .expect("a blocking wait returns the status");
        status.exit_status().expect("it exited")
    }

    fn output(started: Started) -> String {
        let mut text = String::new();
        std::fs::File::from(started.stdout.try_clone().unwrap())
            .read_to_string(&mut text)
            .unwrap();
        text
    }

    #[test]
    fn the_child_gets_its_arguments_environment_directory_and_pipes() {
        let dir = tempfile::tempdir().unwrap();
        // argv[0] is the name the server is started by, which /proc shows; `$0` is the first
        // argument after the script.
        let script = "read line; printf '%s|%s|%s|%s|' \"$0\" \"$ROOTSD_TEST_VAR\" \"$(pwd -P)\" \"$line\"; tr '\\0' ' ' < /proc/$$/cmdline";
        let started = run(
            &["server-name", "-c", script, "first arg"],
            &[("ROOTSD_TEST_VAR", "one"), ("ROOTSD_TEST_VAR", "two")],
            Some(dir.path()),
        )
        .unwrap();
        std::fs::File::from(started.stdin.try_clone().unwrap())
            .write_all(b"from the proxy\n")
            .unwrap();
        let code = exit_code(&started);
        let dir = dir.path().canonicalize().unwrap();
        assert_eq!(
            output(started),
            format!(
                "first arg|two|{}|from the proxy|server-name -c {script} first arg ",
                dir.display()
            )
        );
        assert_eq!(code, 0);
    }

    #[test]
    fn the_child_writes_ahead_into_its_stdout_up_to_a_streamed_lines_queue() {
        // Nothing reads the pipe until the child has exited: its writes must all fit.
        let script = format!("head -c {STREAM_HIGH_WATER} /dev/zero");
        let started = run(&["sh", "-c", &script], &[], None).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let status = loop {
            let options = rustix::process::WaitIdOptions::EXITED
                | rustix::process::WaitIdOptions::NOHANG
                | rustix::process::WaitIdOptions::NOWAIT;
            let waited = rustix::process::waitid(
                rustix::process::WaitId::PidFd(started.process.pidfd()),
                options,
            )
            .unwrap();
            if waited.is_some() {
                break exit_code(&started);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the child is still blocked writing {STREAM_HIGH_WATER} bytes to its stdout"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(status, 0);
        assert_eq!(output(started).len(), STREAM_HIGH_WATER);
    }

    #[test]
    fn the_child_starts_with_no_signal_blocked_and_sigpipe_at_its_default() {
        // The parent blocks every signal around the clone, and this test binary ignores SIGPIPE,
        // as every Rust program does: the server must inherit neither. (That the child asks to
        // die with the proxy is the end-to-end test
        // `a_proxy_killed_with_sigkill_takes_its_server_with_it`.)
        let started = run(
            &["sh", "-c", "grep -E '^(SigBlk|SigIgn):' /proc/self/status"],
            &[],
            None,
        )
        .unwrap();
        assert_eq!(exit_code(&started), 0);
        let text = output(started);
        let field = |name: &str| {
            let line = text.lines().find(|l| l.starts_with(name)).unwrap();
            u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
        };
        assert_eq!(field("SigBlk:"), 0, "{text}");
        let sigpipe = 1u64 << (libc::SIGPIPE - 1);
        assert_eq!(field("SigIgn:") & sigpipe, 0, "{text}");
    }

    #[tokio::test]
    async fn the_exit_is_waited_for_through_the_pidfd_and_a_reaped_process_is_not_signalled() {
        let started = run(&["sh", "-c", "exec sleep 30"], &[], None).unwrap();
        let process = started.process.clone();
        process.signal(Signal::TERM);
        let status = process.exit().await.unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGTERM)
        );
        // Reaped: the kernel refuses the pidfd's signals, whoever has the pid now.
        assert_eq!(
            rustix::process::pidfd_send_signal(process.pidfd(), Signal::KILL),
            Err(rustix::io::Errno::SRCH)
        );
        let exited = run(&["sh", "-c", "exit 3"], &[], None).unwrap();
        assert_eq!(exited.process.exit().await.unwrap().code(), Some(3));
    }

    #[test]
    fn letting_go_of_a_process_unreaped_kills_it() {
        let started = run(&["sh", "-c", "exec sleep 30"], &[], None).unwrap();
        let pidfd = started.process.pidfd().try_clone_to_owned().unwrap();
        drop(started);
        let status = rustix::process::waitid(
            rustix::process::WaitId::PidFd(pidfd.as_fd()),
            rustix::process::WaitIdOptions::EXITED,
        )
        .unwrap()
        .unwrap();
        assert_eq!(status.terminating_signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn the_parent_gets_its_signal_mask_back() {
        let blocked = || {
            std::fs::read_to_string("/proc/thread-self/status")
                .unwrap()
                .lines()
                .find(|l| l.starts_with("SigBlk:"))
                .unwrap()
                .to_owned()
        };
        let before = blocked();
        let started = run(&["sh", "-c", "true"], &[], None).unwrap();
        assert_eq!(blocked(), before);
        assert_eq!(exit_code(&started), 0);
    }

    #[test]
    fn a_failed_exec_or_directory_is_the_childs_errno() {
        let missing = Command::new(
            Path::new("/nonexistent/server"),
            &[OsString::from("server")],
            &[],
            None,
        )
        .unwrap()
        .spawn()
        .err()
        .expect("no such program");
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let dir = run(
            &["sh", "-c", "true"],
            &[],
            Some(Path::new("/nonexistent/dir")),
        )
        .err()
        .expect("no such directory");
        assert_eq!(dir.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_nul_byte_is_refused_before_anything_starts() {
        let error = Command::new(
            Path::new("/bin/sh"),
            &[OsString::from("sh"), OsString::from("a\0b")],
            &[],
            None,
        )
        .err()
        .expect("refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(error.to_string().contains("NUL byte"), "{error}");
        assert!(error.to_string().contains(r#""a\0b""#), "{error}");
        // A variable is named without its value, which may be a secret.
        let error = Command::new(
            Path::new("/bin/sh"),
            &[OsString::from("sh")],
            &[(
                OsString::from("ROOTSD_TOKEN"),
                OsString::from("secret\0value"),
            )],
            None,
        )
        .err()
        .expect("refused");
        let message = error.to_string();
        assert!(message.contains("ROOTSD_TOKEN"), "{message}");
        assert!(!message.contains("secret"), "{message}");
    }
}
