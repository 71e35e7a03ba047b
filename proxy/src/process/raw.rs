//! Every `unsafe` block of the workspace, each with the reason it is sound: the clone and the
//! child that start a server (`super`'s module comment says what the child may and may not do),
//! the descriptors a keeper is started with, and the runtime's registration of a descriptor
//! ([`Readiness`]). The workspace denies `unsafe_code`; this file alone lifts it, and the tidy
//! tests fail any other file that does.
#![allow(unsafe_code)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use tokio::io::Interest;
use tokio::io::unix::{AsyncFd, AsyncFdReadyGuard};

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

impl Child {
    /// What the child of `exec` reads: pointers into `exec`'s strings, made before the clone.
    fn new(exec: &Exec<'_>) -> Self {
        Self {
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
        }
    }
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
    let child = Child::new(exec);
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

/// A descriptor the runtime watches for readiness, owned by the registration for as long as it
/// lasts.
///
/// tokio's safe constructors of `AsyncFd` are deprecated as unsound: they take any `AsRawFd`,
/// whose descriptor the caller may close, or swap for another through `AsyncFd::get_mut`, while
/// it is registered. The sound one, `AsyncFd::register_with_interest`, is `unsafe` and asks its
/// caller to keep the descriptor open and the same until the registration ends. This type keeps
/// that promise for every caller: it takes only a value that [`OwnsFd`], and hands out only
/// shared references to it, through which nothing can close or replace the descriptor.
pub struct Readiness<T: OwnsFd>(AsyncFd<T>);

impl<T: OwnsFd> Readiness<T> {
    /// Registers `owned` with the current runtime for `interest`.
    pub fn new(owned: T, interest: Interest) -> io::Result<Self> {
        // SAFETY: `OwnsFd` promises that `owned.as_raw_fd()` is the same open descriptor for as
        // long as `owned` lives, and that nothing reached through a shared reference to it can
        // close or change it. The `AsyncFd` owns `owned` until it is dropped, which ends the
        // registration before `owned` is dropped; this type never hands out `&mut T`, the
        // `AsyncFd` itself, or `owned` back (no `get_mut`, `into_inner` or `mem::forget`).
        let registered = unsafe { AsyncFd::register_with_interest(owned, interest) }?;
        Ok(Self(registered))
    }

    /// Waits until the descriptor is readable; the guard says whether it still is.
    pub async fn readable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        self.0.readable().await
    }

    /// The registered value.
    pub fn get_ref(&self) -> &T {
        self.0.get_ref()
    }
}

/// A value whose descriptor may be registered with the runtime ([`Readiness`]).
///
/// # Safety
/// `as_raw_fd` returns the same open descriptor, referring to the same open file description,
/// for as long as the value lives, and nothing reached through a shared reference to the value
/// can close or replace it. Implemented only here, where `unsafe` is allowed.
pub unsafe trait OwnsFd: AsRawFd {}

// SAFETY: an `OwnedFd` closes its descriptor only when it is dropped, and through `&OwnedFd`
// nothing can close or change it (it has no interior mutability).
unsafe impl OwnsFd for OwnedFd {}

// SAFETY: a `Registered` is one owner of an `Rc<Pidfd>`, whose `fd` is an `OwnedFd` closed only
// when the last owner drops the `Pidfd`; a shared reference reaches the `Pidfd` only through
// `Rc`'s shared borrow, and `Pidfd` has no interior mutability around its `fd`.
unsafe impl OwnsFd for super::Registered {}
