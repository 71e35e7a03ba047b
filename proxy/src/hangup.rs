//! The host closing its end of the proxy's stdin, seen while the host's lines are left unread.
//!
//! During a restart (and while the daemon's first list is awaited) the host's lines wait in their
//! pipe, so its end-of-file would be read only once the new server was started and answered the
//! replayed `initialize`: seconds in which a host that left kept a server starting for nobody.
//! The kernel tells a pipe's reader that the writer is gone (`POLLHUP`) and a socket's that the
//! peer shut down its writing (`POLLRDHUP`) without a byte being read, so the proxy watches a
//! copy of its stdin for that and nothing else. A terminal or a file has no such signal: for
//! those the host's end is seen when it is read, as before.

use std::os::fd::{AsFd as _, OwnedFd};

use rustix::event::{PollFd, PollFlags};
use rustix::fs::FileType;
use tokio::io::Interest;

use super::process::Readiness;

/// A copy of the proxy's stdin, registered with the runtime for readiness only.
pub(super) struct Hangup(Option<Readiness<OwnedFd>>);

impl Hangup {
    /// Watches stdin when it is a pipe or a socket; otherwise never fires.
    pub fn watch_stdin() -> Self {
        Self(watched_stdin())
    }

    /// Resolves once the host has closed its end (even with lines still unread); never
    /// otherwise.
    pub async fn wait(&self) {
        let Some(fd) = &self.0 else {
            return std::future::pending().await;
        };
        loop {
            let Ok(mut ready) = fd.readable().await else {
                return std::future::pending().await;
            };
            if hung_up(fd.get_ref()) {
                return;
            }
            // Unread lines made it readable: only a hangup, a later edge, is of interest.
            ready.clear_ready();
        }
    }
}

/// Whether the writer of `fd` is gone (a pipe) or has shut down its writing (a socket).
fn hung_up(fd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::IN | PollFlags::RDHUP)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
        && fds[0]
            .revents()
            .intersects(PollFlags::HUP | PollFlags::RDHUP | PollFlags::ERR)
}

/// The runtime's readiness of a close-on-exec copy of stdin, if it is a pipe or a socket.
fn watched_stdin() -> Option<Readiness<OwnedFd>> {
    let stdin = std::io::stdin();
    let kind = FileType::from_raw_mode(rustix::fs::fstat(stdin.as_fd()).ok()?.st_mode);
    if !matches!(kind, FileType::Fifo | FileType::Socket) {
        return None;
    }
    let copy = rustix::io::fcntl_dupfd_cloexec(stdin.as_fd(), 3).ok()?;
    Readiness::new(copy, Interest::READABLE).ok()
}
