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
//!
//! The module's files: this one holds the started process and its wait; `command` makes what the
//! child reads and starts it; `raw` holds the clone and the child, and every other `unsafe`
//! block of the workspace (the runtime's registration of a descriptor, [`Readiness`]).

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::os::fd::{AsFd as _, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::rc::Rc;

use rustix::process::{Signal, WaitId, WaitIdOptions, WaitIdStatus};
use tokio::io::Interest;

mod command;
mod raw;
#[cfg(test)]
mod tests;

pub use command::{Command, Options, inherited_control, inherited_report};
pub use raw::Readiness;

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
            let exit = Readiness::new(Registered(pidfd), Interest::READABLE)?;
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
