//! What the proxy's queues and readers ask of a stream beyond reading and writing: its
//! non-blocking descriptor, to use past the runtime where that is the same as using the stream,
//! and whether it takes bytes by `splice` or gives them by `tee`.

use std::io;
use std::os::fd::{AsFd as _, BorrowedFd};
use std::task::{Context, Poll};

use crate::splice::Front;

/// A stream whose non-blocking descriptor the queue may write to itself ([`super::Outbound`]'s
/// writes that do not wait), rather than through the runtime's write future: that took more
/// instructions than the relay's own work on a small line. The runtime's readiness is left as it
/// was, which is sound: a write that would block leaves the bytes queued for
/// [`super::Outbound::drain`], whose write through the runtime finds out the same and waits.
pub trait Descriptor {
    /// The descriptor, if writing to it directly is the same as writing to the stream: it is
    /// non-blocking and the stream buffers nothing (its flush does nothing).
    fn descriptor(&self) -> Option<BorrowedFd<'_>>;

    /// Whether the stream takes bytes by `splice` from a pipe ([`Descriptor::poll_splice`]).
    fn splices(&self) -> bool {
        false
    }

    /// Moves what is left of `piece` into the stream by `splice`, once it has room; how many
    /// bytes moved. `Unsupported` unless [`Descriptor::splices`].
    fn poll_splice(&self, _cx: &mut Context<'_>, _piece: &Front) -> Poll<io::Result<usize>> {
        Poll::Ready(Err(io::ErrorKind::Unsupported.into()))
    }
}

/// A stream whose non-blocking descriptor the relay loop may wait on and read from itself
/// ([`super::PieceReader::try_read`]).
pub trait ReadDescriptor {
    /// The descriptor, if reading from it directly is the same as reading from the stream: it
    /// is non-blocking and the stream buffers nothing.
    fn read_descriptor(&self) -> Option<BorrowedFd<'_>>;

    /// Copies up to `len` bytes from the front of the stream into the pipe `into` without
    /// consuming them (`tee`), once there are any; `Ok(0)` at the end of the stream.
    /// `Unsupported` unless the stream is a pipe.
    fn poll_tee(
        &self,
        _cx: &mut Context<'_>,
        _into: BorrowedFd<'_>,
        _len: usize,
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Err(io::ErrorKind::Unsupported.into()))
    }
}

impl ReadDescriptor for tokio::net::unix::pipe::Receiver {
    fn read_descriptor(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }

    fn poll_tee(
        &self,
        cx: &mut Context<'_>,
        into: BorrowedFd<'_>,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        use rustix::pipe::SpliceFlags;
        loop {
            std::task::ready!(self.poll_read_ready(cx))?;
            // Through the runtime, so that a pipe found empty waits for its next readiness.
            match self.try_io(|| {
                rustix::pipe::tee(self, into, len, SpliceFlags::NONBLOCK).map_err(io::Error::from)
            }) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                result => return Poll::Ready(result),
            }
        }
    }
}
impl Descriptor for tokio::net::unix::pipe::Sender {
    fn descriptor(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }
}

/// The tests' in-memory streams are written through the runtime only.
#[cfg(test)]
impl Descriptor for tokio::io::DuplexStream {
    fn descriptor(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}
