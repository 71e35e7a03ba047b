//! The proxy's own stdin and stdout. They are used as non-blocking sockets or pipes when they
//! are those (as every host makes them), so reads and writes go straight through the runtime's
//! reactor; a terminal or a file falls back to tokio's blocking-thread stdio.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite};

use crate::splice::Front;
use crate::stdio::{Descriptor, ReadDescriptor};

/// The proxy's own stdin or stdout as an async stream.
pub enum Stdio {
    Socket(tokio::net::UnixStream),
    PipeIn(tokio::net::unix::pipe::Receiver),
    PipeOut(tokio::net::unix::pipe::Sender),
    In(tokio::io::Stdin),
    Out(tokio::io::Stdout),
}

/// The proxy's stdin: a socket or pipe read through the reactor when it is one.
pub fn stdin() -> Stdio {
    match duplicate(&io::stdin()) {
        Some((fd, Kind::Socket)) => {
            socket(fd).map_or_else(|| Stdio::In(tokio::io::stdin()), Stdio::Socket)
        }
        Some((fd, Kind::Fifo)) => tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
            .map_or_else(|_| Stdio::In(tokio::io::stdin()), Stdio::PipeIn),
        _ => Stdio::In(tokio::io::stdin()),
    }
}

/// The proxy's stdout: a socket or pipe written through the reactor when it is one.
pub fn stdout() -> Stdio {
    match duplicate(&io::stdout()) {
        Some((fd, Kind::Socket)) => {
            socket(fd).map_or_else(|| Stdio::Out(tokio::io::stdout()), Stdio::Socket)
        }
        Some((fd, Kind::Fifo)) => tokio::net::unix::pipe::Sender::from_owned_fd(fd)
            .map_or_else(|_| Stdio::Out(tokio::io::stdout()), Stdio::PipeOut),
        _ => Stdio::Out(tokio::io::stdout()),
    }
}

enum Kind {
    Socket,
    Fifo,
}

/// A duplicate of `fd`, if it is a socket or a pipe. The duplicate shares the open file
/// description, so making it non-blocking affects only this process's end of the pipe.
fn duplicate(fd: &impl AsFd) -> Option<(OwnedFd, Kind)> {
    let stat = rustix::fs::fstat(fd).ok()?;
    let kind = match rustix::fs::FileType::from_raw_mode(stat.st_mode) {
        rustix::fs::FileType::Socket => Kind::Socket,
        rustix::fs::FileType::Fifo => Kind::Fifo,
        _ => return None,
    };
    let owned = fd.as_fd().try_clone_to_owned().ok()?;
    Some((owned, kind))
}

fn socket(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(std).ok()
}

impl Descriptor for Stdio {
    fn descriptor(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Self::Socket(s) => Some(s.as_fd()),
            Self::PipeOut(s) => Some(s.as_fd()),
            // Tokio's stdout writes on a thread of its own, and may hold bytes until it does.
            Self::PipeIn(_) | Self::In(_) | Self::Out(_) => None,
        }
    }

    fn splices(&self) -> bool {
        matches!(self, Self::Socket(_) | Self::PipeOut(_))
    }

    fn poll_splice(&self, cx: &mut Context<'_>, piece: &Front) -> Poll<io::Result<usize>> {
        // Through the runtime, so that a side found full waits for its next readiness.
        loop {
            let moved = match self {
                Self::Socket(s) => {
                    std::task::ready!(s.poll_write_ready(cx))?;
                    s.try_io(tokio::io::Interest::WRITABLE, || {
                        piece.splice_into(s.as_fd())
                    })
                }
                Self::PipeOut(s) => {
                    std::task::ready!(s.poll_write_ready(cx))?;
                    s.try_io(|| piece.splice_into(s.as_fd()))
                }
                Self::PipeIn(_) | Self::In(_) | Self::Out(_) => {
                    return Poll::Ready(Err(io::ErrorKind::Unsupported.into()));
                }
            };
            match moved {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                result => return Poll::Ready(result),
            }
        }
    }
}

impl ReadDescriptor for Stdio {
    fn read_descriptor(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Self::Socket(s) => Some(s.as_fd()),
            Self::PipeIn(s) => Some(s.as_fd()),
            // Tokio's stdin reads on a thread of its own, into a buffer of its own.
            Self::PipeOut(_) | Self::In(_) | Self::Out(_) => None,
        }
    }
}

impl AsyncRead for Stdio {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Socket(s) => Pin::new(s).poll_read(cx, buf),
            Self::PipeIn(s) => Pin::new(s).poll_read(cx, buf),
            Self::In(s) => Pin::new(s).poll_read(cx, buf),
            Self::PipeOut(_) | Self::Out(_) => Poll::Ready(Err(io::ErrorKind::Unsupported.into())),
        }
    }
}

impl AsyncWrite for Stdio {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Socket(s) => Pin::new(s).poll_write(cx, buf),
            Self::PipeOut(s) => Pin::new(s).poll_write(cx, buf),
            Self::Out(s) => Pin::new(s).poll_write(cx, buf),
            Self::PipeIn(_) | Self::In(_) => Poll::Ready(Err(io::ErrorKind::Unsupported.into())),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Socket(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::PipeOut(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Out(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::PipeIn(_) | Self::In(_) => Poll::Ready(Err(io::ErrorKind::Unsupported.into())),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Socket(s) => s.is_write_vectored(),
            Self::PipeOut(s) => s.is_write_vectored(),
            Self::Out(s) => s.is_write_vectored(),
            Self::PipeIn(_) | Self::In(_) => false,
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Socket(s) => Pin::new(s).poll_flush(cx),
            Self::PipeOut(s) => Pin::new(s).poll_flush(cx),
            Self::Out(s) => Pin::new(s).poll_flush(cx),
            Self::PipeIn(_) | Self::In(_) => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Socket(s) => Pin::new(s).poll_shutdown(cx),
            Self::PipeOut(s) => Pin::new(s).poll_shutdown(cx),
            Self::Out(s) => Pin::new(s).poll_shutdown(cx),
            Self::PipeIn(_) | Self::In(_) => Poll::Ready(Ok(())),
        }
    }
}
