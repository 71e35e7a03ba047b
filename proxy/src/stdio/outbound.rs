//! The queue of lines waiting to be written to one side: written as the side takes them, its
//! size watched by the relay loop, so that a side that stops reading stops the proxy reading the
//! side that feeds it instead of growing the queue.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;

use futures::FutureExt as _;
use tokio::io::{AsyncWrite, AsyncWriteExt as _};

use crate::splice::Front;
use crate::stdio::Descriptor;
use crate::stdio::reader::{SPARES_KEPT, is_stream_buffer};

#[cfg(test)]
mod tests;

/// Past this many bytes queued toward one side, the proxy stops reading the side that feeds it.
pub const QUEUE_HIGH_WATER: usize = 1 << 20;

/// The same while a line is being written in pieces: such a line is forwarded as it arrives,
/// so a few reads' worth keeps the side's pipe full, and holding more would only hold memory
/// (a full megabyte queued was most of the proxy's peak with 1 MiB results).
pub const STREAM_HIGH_WATER: usize = 256 << 10;

/// Bytes waiting to be written: a whole line, or a piece of a streamed one.
struct Queued {
    bytes: Vec<u8>,
    end: End,
    /// A piece still in the server's pipe, moved on by `splice` instead of `bytes`.
    pipe: Option<Arc<Front>>,
}

/// How a queued piece ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// It is a piece of a line still being streamed.
    Open,
    /// It ends its line, and the newline is written after it, from a constant.
    Newline,
    /// It ends its line, and its last byte is the newline.
    Included,
}

impl Queued {
    /// A whole line and its newline. The newline goes into the line's own buffer when that has
    /// room for it, which never reallocates, so that the line is one plain write; a line without
    /// room (appending could copy megabytes) has it written beside, in a vectored write.
    fn line(mut bytes: Vec<u8>) -> Self {
        if bytes.capacity() > bytes.len() {
            bytes.push(b'\n');
            return Self {
                bytes,
                end: End::Included,
                pipe: None,
            };
        }
        Self {
            bytes,
            end: End::Newline,
            pipe: None,
        }
    }

    /// Its length, written or not; for a piece in a pipe, what is left of it there (such a
    /// piece counts the bytes it moved off itself, and the queue's `written` stays 0 for it).
    fn len(&self) -> usize {
        match &self.pipe {
            Some(front) => front.unread(),
            None => self.bytes.len() + usize::from(self.end == End::Newline),
        }
    }
}

/// How much of what one write offered the side took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Taken {
    All,
    Part,
}

/// Lines waiting to be written to one side, written as the side takes them.
///
/// [`Outbound::push`] never blocks and never fails: the relay loop keeps the queue bounded by
/// not reading the side that feeds it while [`Outbound::is_full`].
///
/// A line may also be written in pieces as it arrives ([`Outbound::push_part`], then
/// [`Outbound::end_line`]); whole lines pushed meanwhile wait until it ends, so that no line
/// is ever written into the middle of another.
pub struct Outbound<W> {
    stream: Option<W>,
    lines: VecDeque<Queued>,
    /// Whole lines pushed while a line is open, in order.
    held: VecDeque<Vec<u8>>,
    /// A line is being written in pieces and has not ended.
    open: bool,
    /// Bytes of the front piece (and its newline) already written.
    written: usize,
    queued: usize,
    /// Close the stream once the queue is empty.
    closing: bool,
    /// The side stopped taking bytes (a broken pipe); later lines are dropped.
    broken: bool,
    /// Buffers of written pieces of streamed lines, for the reader to read more into.
    spares: Vec<Vec<u8>>,
    /// Queued pieces still in the server's pipe ([`Outbound::push_spliced`]).
    piped: usize,
    /// A `splice` into the side failed other than for room: pieces are no longer taken that way.
    splice_refused: bool,
}

impl<W: AsyncWrite + Descriptor + Unpin> Outbound<W> {
    pub fn new(stream: W) -> Self {
        Self {
            stream: Some(stream),
            lines: VecDeque::new(),
            held: VecDeque::new(),
            open: false,
            written: 0,
            queued: 0,
            closing: false,
            broken: false,
            spares: Vec::new(),
            piped: 0,
            splice_refused: false,
        }
    }

    /// Whether pieces of a streamed line may be queued still in the server's pipe
    /// ([`Outbound::push_spliced`]).
    pub fn splices(&self) -> bool {
        !self.splice_refused && self.stream.as_ref().is_some_and(Descriptor::splices)
    }

    /// Queues the next piece of a line written as it arrives, still at the front of the
    /// server's pipe (as [`super::PieceReader::peeked`] hands it out), to be moved to the side by
    /// `splice`; `ends_line` if it ends with the line's newline, after which the lines held
    /// meanwhile follow. The pipe must not be read until the piece has moved
    /// ([`Outbound::holds_pipe`]).
    pub fn push_spliced(&mut self, piece: Arc<Front>, ends_line: bool) {
        if self.broken || self.stream.is_none() || self.closing {
            return;
        }
        self.open = !ends_line;
        self.queued += piece.unread();
        self.piped += 1;
        self.lines.push_back(Queued {
            bytes: Vec::new(),
            end: if ends_line { End::Included } else { End::Open },
            pipe: Some(piece),
        });
        if ends_line {
            self.lines.extend(self.held.drain(..).map(Queued::line));
        }
        self.write_ready();
    }

    /// The buffer of a piece of a streamed line already written, if one is kept: the reader
    /// that fed it reads the next pieces into it ([`super::PieceReader::recycle`]).
    pub fn spare(&mut self) -> Option<Vec<u8>> {
        self.spares.pop()
    }

    /// Queues `line` and a newline, and writes as much as the side takes at once.
    pub fn push(&mut self, line: Vec<u8>) {
        if self.broken || self.stream.is_none() || self.closing {
            return;
        }
        self.queued += line.len() + 1;
        if self.open {
            self.held.push_back(line);
            return;
        }
        self.lines.push_back(Queued::line(line));
        self.write_ready();
    }

    /// Queues the next piece of a line written as it arrives (no newline), and writes what the
    /// side takes at once.
    pub fn push_part(&mut self, bytes: Vec<u8>) {
        if self.broken || self.stream.is_none() || self.closing {
            return;
        }
        self.open = true;
        if bytes.is_empty() {
            return;
        }
        self.queued += bytes.len();
        self.lines.push_back(Queued {
            bytes,
            end: End::Open,
            pipe: None,
        });
        self.write_ready();
    }

    /// Ends the line written in pieces with `bytes` and a newline; the lines held meanwhile
    /// follow it.
    pub fn end_line(&mut self, bytes: Vec<u8>) {
        if !self.open {
            return;
        }
        self.open = false;
        if self.broken || self.stream.is_none() {
            return;
        }
        self.queued += bytes.len() + 1;
        self.lines.push_back(Queued::line(bytes));
        self.lines.extend(self.held.drain(..).map(Queued::line));
        self.write_ready();
    }

    /// Whether a line is being written in pieces.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Nothing waits to be written.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Whether the side is not keeping up: stop feeding it until it drains.
    pub fn is_full(&self) -> bool {
        let high_water = if self.open {
            STREAM_HIGH_WATER
        } else {
            QUEUE_HIGH_WATER
        };
        self.queued >= high_water
    }

    /// Whether a piece queued here is still at the front of the server's pipe
    /// ([`Outbound::push_spliced`]): the pipe must not be read until it has moved.
    pub fn holds_pipe(&self) -> bool {
        self.piped > 0
    }

    /// Closes the stream after everything queued is written.
    pub fn close(&mut self) {
        // A line cut off in the middle still ends: the side never sees two lines run together.
        self.end_line(Vec::new());
        self.closing = true;
        if self.lines.is_empty() {
            self.stream = None;
        }
    }

    /// Writes what the side takes without waiting. A write the side took only part of filled
    /// its pipe or socket buffer: trying again at once would only be refused, one system call
    /// more for every piece of a large line, so the rest waits for [`Outbound::drain`].
    fn write_ready(&mut self) {
        let direct = self
            .stream
            .as_ref()
            .is_some_and(|stream| stream.descriptor().is_some());
        while !self.lines.is_empty() {
            let attempt = if direct {
                self.write_direct()
            } else {
                self.write_once().now_or_never()
            };
            match attempt {
                Some(Ok(Taken::All)) => {}
                Some(Ok(Taken::Part)) | None => return,
                Some(Err(_)) => return self.break_off(),
            }
        }
    }

    /// Waits until the side took more bytes; for the relay loop's `select!`. Never resolves
    /// with nothing queued.
    pub async fn drain(&mut self) {
        if self.lines.is_empty() || self.stream.is_none() {
            return std::future::pending().await;
        }
        match self.write_once().await {
            Ok(Taken::All) => self.write_ready(),
            Ok(Taken::Part) => {}
            Err(_) => self.break_off(),
        }
    }

    /// Writes the rest of the queue, waiting as long as it takes; for the end of the session.
    pub async fn finish(&mut self) {
        self.end_line(Vec::new());
        while !self.lines.is_empty() && self.stream.is_some() {
            if self.write_once().await.is_err() {
                return self.break_off();
            }
        }
        if let Some(stream) = self.stream.as_mut() {
            let _ = stream.flush().await;
            if self.closing {
                let _ = stream.shutdown().await;
                self.stream = None;
            }
        }
    }

    /// One write of the front of the queue: how much of what it offered the side took.
    async fn write_once(&mut self) -> io::Result<Taken> {
        let Some(stream) = self.stream.as_mut() else {
            return Ok(Taken::All);
        };
        let Some(front) = self.lines.front() else {
            return Ok(Taken::All);
        };
        let offered = front.len() - self.written;
        let n = if let Some(piece) = front.pipe.clone() {
            let moved = std::future::poll_fn(|cx| stream.poll_splice(cx, &piece)).await;
            match moved {
                Ok(n) => n,
                Err(error) if splice_unusable(&error) => {
                    self.unsplice()?;
                    return Ok(Taken::Part);
                }
                Err(error) => return Err(error),
            }
        } else {
            let (parts, count) = unwritten(front, self.written);
            match count {
                1 => stream.write(&parts[0]).await?,
                _ => stream.write_vectored(&parts[..count]).await?,
            }
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let (taken, emptied) = self.wrote(n, offered);
        if emptied {
            if let Some(stream) = self.stream.as_mut() {
                stream.flush().await?;
            }
            if self.closing {
                self.stream = None;
            }
        }
        Ok(taken)
    }

    /// One write of the front of the queue straight to the side's descriptor; `None` if it
    /// would block (or was interrupted), which leaves it to [`Outbound::drain`].
    fn write_direct(&mut self) -> Option<io::Result<Taken>> {
        let fd = self.stream.as_ref()?.descriptor()?;
        let front = self.lines.front()?;
        let offered = front.len() - self.written;
        if let Some(piece) = &front.pipe {
            let n = match piece.splice_into(fd) {
                Ok(n) => n,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return None,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => return None,
                Err(error) if splice_unusable(&error) => {
                    return Some(self.unsplice().map(|()| Taken::Part));
                }
                Err(error) => return Some(Err(error)),
            };
            let (taken, emptied) = self.wrote(n, offered);
            if emptied && self.closing {
                self.stream = None;
            }
            return Some(Ok(taken));
        }
        let (parts, count) = unwritten(front, self.written);
        // One slice is a plain write, which costs the kernel less than a vectored one.
        let result = match count {
            1 => rustix::io::write(fd, &parts[0]),
            _ => rustix::io::writev(fd, &parts[..count]),
        };
        let n = match result {
            Ok(0) => return Some(Err(io::ErrorKind::WriteZero.into())),
            Ok(n) => n,
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return None,
            Err(error) => return Some(Err(error.into())),
        };
        let (taken, emptied) = self.wrote(n, offered);
        // Nothing to flush: a stream written to directly buffers nothing.
        if emptied && self.closing {
            self.stream = None;
        }
        Some(Ok(taken))
    }

    /// Counts `n` bytes of the `offered` written from the front of the queue; returns how much
    /// was taken, and whether that emptied the queue.
    fn wrote(&mut self, n: usize, offered: usize) -> (Taken, bool) {
        let taken = if n < offered { Taken::Part } else { Taken::All };
        self.queued -= n;
        let done = match self.lines.front() {
            // A piece in a pipe counts its bytes off itself as they move.
            Some(Queued {
                pipe: Some(piece), ..
            }) => piece.unread() == 0,
            Some(front) => {
                self.written += n;
                front.len() == self.written
            }
            None => false,
        };
        if done {
            if let Some(piece) = self.lines.pop_front() {
                if piece.pipe.is_some() {
                    self.piped -= 1;
                } else if piece.end == End::Open
                    && self.spares.len() < SPARES_KEPT
                    && is_stream_buffer(&piece.bytes)
                {
                    self.spares.push(piece.bytes);
                }
            }
            self.written = 0;
            return (taken, self.lines.is_empty());
        }
        (taken, false)
    }

    /// The side refused a `splice` for a reason other than room: the front piece is read out of
    /// the server's pipe into the queue, to be written as any piece is, and no later piece is
    /// queued in a pipe.
    fn unsplice(&mut self) -> io::Result<()> {
        self.splice_refused = true;
        let Some(front) = self.lines.front_mut() else {
            return Ok(());
        };
        let Some(piece) = front.pipe.take() else {
            return Ok(());
        };
        self.piped -= 1;
        piece.take(Some(&mut front.bytes))
    }

    fn break_off(&mut self) {
        self.broken = true;
        // Pieces still in the server's pipe go back to its reader, which drops them.
        self.lines.clear();
        self.piped = 0;
        self.held.clear();
        self.queued = 0;
        self.stream = None;
    }
}

/// A `splice` into a side failed because the side cannot take bytes that way (a file system or
/// device without it), not for room or a broken pipe.
fn splice_unusable(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::Unsupported
        || matches!(
            rustix::io::Errno::from_io_error(error),
            Some(
                rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS | rustix::io::Errno::OPNOTSUPP
            )
        )
}

/// What is left to write of `front` after its first `written` bytes, as the slices one write
/// offers: the rest of its bytes and the newline written beside them ([`End::Newline`]),
/// whichever remain; the count says how many slices.
fn unwritten(front: &Queued, written: usize) -> ([io::IoSlice<'_>; 2], usize) {
    let rest = front.bytes.get(written..).unwrap_or_default();
    let newline: &[u8] = if front.end == End::Newline {
        b"\n"
    } else {
        b""
    };
    match (rest.is_empty(), newline.is_empty()) {
        (false, false) => ([io::IoSlice::new(rest), io::IoSlice::new(newline)], 2),
        (false, true) => ([io::IoSlice::new(rest), io::IoSlice::new(&[])], 1),
        (true, _) => ([io::IoSlice::new(newline), io::IoSlice::new(&[])], 1),
    }
}
