//! The daemon's end of a connection, registered with the runtime for readability alone.
//!
//! tokio registers a socket for both readability and writability, edge-triggered, and a Unix
//! socket signals writability again each time its peer reads: so every push a session read woke
//! a runtime worker that had nothing to write. With 10,000 sessions that was 10,000 wake-ups per
//! change, about half of what the runtime's workers did while the fan-out thread wrote (`perf`,
//! docs/BENCHMARKS.md). Here writes go straight to the non-blocking socket, and only a write
//! that finds the socket full registers a second descriptor of it for writability, until the
//! write has gone; a full socket is rare (a peer that does not read), so that costs nothing in
//! the usual case.

use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// The most one read asks for. A read into safe memory must zero it first, and a connection's
/// buffer grows to a megabyte for a long line: asking for all of it zeroed the buffer's whole
/// spare room on every read, up to half a megabyte per read while a long line arrives in small
/// pieces. Bounded, each read zeroes at most what it may bring.
const READ_WINDOW: usize = 64 << 10;

pub struct PeerSocket {
    socket: AsyncFd<UnixStream>,
    /// A second descriptor of the socket, registered for writability while a write waits for
    /// room, and dropped (deregistered and closed) once a write goes through.
    room: Mutex<Option<AsyncFd<OwnedFd>>>,
}

impl PeerSocket {
    /// Takes over an accepted connection from the listener's runtime registration.
    pub fn new(stream: interprocess::local_socket::tokio::Stream) -> io::Result<Self> {
        let interprocess::local_socket::tokio::Stream::UdSocket(stream) = stream;
        let fd = OwnedFd::try_from(stream)?;
        Self::from_std(UnixStream::from(fd))
    }

    /// A non-blocking Unix stream, registered for readability.
    pub fn from_std(socket: UnixStream) -> io::Result<Self> {
        socket.set_nonblocking(true)?;
        Ok(Self {
            socket: register(socket, Interest::READABLE)?,
            room: Mutex::new(None),
        })
    }

    fn room(&self) -> std::sync::MutexGuard<'_, Option<AsyncFd<OwnedFd>>> {
        // Nothing panics while holding it; a poisoned lock still holds a consistent state.
        self.room
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits until the socket may have room, registering for writability if no earlier write
    /// has: `Ready` means "try again", not "there is room".
    fn poll_room(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut room = self.room();
        let waiter = match room.as_mut() {
            Some(waiter) => waiter,
            None => {
                let second = self.socket.get_ref().as_fd().try_clone_to_owned()?;
                room.insert(register(second, Interest::WRITABLE)?)
            }
        };
        let mut guard = ready!(waiter.poll_write_ready(cx))?;
        guard.clear_ready();
        Poll::Ready(Ok(()))
    }
}

/// Registers `owned` with the runtime for `interest`.
///
/// tokio deprecated its safe constructor because a caller could hand it a descriptor it does not
/// own and close it while registered; the replacement is `unsafe`, which this workspace denies
/// but in one place. Here the `AsyncFd` owns the descriptor (`UnixStream`, `OwnedFd`), so nothing
/// can close or replace it while it is registered, which is the condition the `unsafe` one asks
/// its caller to uphold.
#[allow(deprecated)]
fn register<T: AsFd + std::os::fd::AsRawFd>(
    owned: T,
    interest: Interest,
) -> io::Result<AsyncFd<T>> {
    AsyncFd::with_interest(owned, interest)
}

impl AsFd for PeerSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.get_ref().as_fd()
    }
}

impl AsyncRead for &PeerSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.socket.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled_to(buf.remaining().min(READ_WINDOW));
            let asked = unfilled.len();
            match guard.try_io(|socket| socket.get_ref().read(unfilled)) {
                Ok(Ok(n)) => {
                    // A read that brought less than it asked for emptied the socket: the next
                    // poll waits for the runtime to hear of more, instead of reading again only
                    // to be told there is nothing (a system call per request, as tokio's own
                    // sockets avoid the same way). Cleared only if the runtime heard of nothing
                    // newer meanwhile, so data that came since is never missed.
                    if n > 0 && n < asked {
                        guard.clear_ready();
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(error)) if error.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(error)) => return Poll::Ready(Err(error)),
                // Readiness was stale; `try_io` cleared it, so the next poll waits for more.
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for &PeerSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            match self.socket.get_ref().write(buf) {
                Ok(n) => {
                    // The wait for room is over: no more writability wake-ups.
                    self.room().take();
                    return Poll::Ready(Ok(n));
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.poll_room(cx))?;
                }
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    #[tokio::test]
    async fn reads_and_writes_and_a_full_socket_waits_for_its_peer() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let socket = PeerSocket::from_std(ours).unwrap();
        let mut theirs = tokio::net::UnixStream::from_std({
            theirs.set_nonblocking(true).unwrap();
            theirs
        })
        .unwrap();
        theirs.write_all(b"hello\n").await.unwrap();
        let mut got = [0u8; 6];
        (&socket).read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hello\n");

        // Far more than the socket's buffers hold: the write waits for room until the peer
        // reads, then finishes, and the peer gets every byte in order.
        let big: Vec<u8> = (0..8u32 << 20).map(|n| (n % 251) as u8).collect();
        let (written, read) = tokio::join!(
            async {
                (&socket).write_all(&big).await.unwrap();
                assert!(
                    socket.room().is_none(),
                    "the wait for room ended with the write"
                );
            },
            async {
                let mut read = vec![0u8; big.len()];
                theirs.read_exact(&mut read).await.unwrap();
                read
            }
        );
        let () = written;
        assert!(read == big, "every byte arrived, in order");

        // The peer's end: a read sees it.
        drop(theirs);
        let mut rest = Vec::new();
        (&socket).read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
    }
}
