//! The proxy's byte streams: reading lines with a length limit, and writing lines through a
//! queue whose size the relay loop watches, so that a peer that stops reading stops the proxy
//! from reading the other side instead of growing it.
//!
//! The proxy's own stdin and stdout are used as non-blocking sockets or pipes when they are
//! those (as every host makes them), so reads and writes go straight through the runtime's
//! reactor; a terminal or a file falls back to tokio's blocking-thread stdio.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt as _;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

use super::splice::{Front, Peek};

/// The longest line the proxy relays, in bytes. The TypeScript SDK refuses messages over 10 MiB,
/// so nothing a real peer accepts is lost; a longer line is discarded and its sender told.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// How many bytes of a discarded line are kept to find out whom to tell.
const PREFIX_KEPT: usize = 64 << 10;

/// Past this many bytes queued toward one side, the proxy stops reading the side that feeds it.
pub const QUEUE_HIGH_WATER: usize = 1 << 20;

/// The same while a line is being written in pieces: such a line is forwarded as it arrives,
/// so a few reads' worth keeps the side's pipe full, and holding more would only hold memory
/// (a full megabyte queued was most of the proxy's peak with 1 MiB results).
pub const STREAM_HIGH_WATER: usize = 256 << 10;

/// How much room a read asks for at least.
const READ_CHUNK: usize = 64 << 10;

/// The most a new read buffer is sized for in advance, whatever lines came before.
const BUFFER_HINT_MAX: usize = 4 << 20;

/// A line still unfinished at this length is offered for streaming ([`Line::Long`]): one read's
/// worth, so that lines a single read brings whole are never split.
pub const STREAM_AT: usize = READ_CHUNK;
/// How many reads [`LineReader::try_read`] makes at most before it leaves the rest to the
/// runtime: 1 MiB of pipe at the most.
const DIRECT_READS: usize = 16;

/// The buffer a streamed line is read into, and handed on in, one read at a time. It is below
/// glibc's mmap threshold, so the pieces come from (and go back to) the heap's free lists
/// instead of being mapped and unmapped for every read. The line after a streamed one starts in
/// such a buffer too, and is read whole until [`STREAM_AT`]: the eighth of a read beyond it is
/// the room [`LineReader`] keeps free before it grows a buffer, so that reaching [`STREAM_AT`]
/// never copies the line into a larger one.
const STREAM_BUFFER: usize = STREAM_AT + READ_CHUNK / 8;

/// How many written pieces of a streamed line are kept to read the next ones into, on each side
/// of the trip ([`Outbound::spare`], [`LineReader::recycle`]). A piece freed and the next one
/// allocated made the heap shrink and grow again every few reads, and the kernel clear the
/// pages it had just taken back: a tenth of the proxy's time with 1 MiB results.
const SPARES_KEPT: usize = 1;

/// Whether `buffer` is one a streamed piece is read into, and so worth keeping for the next. A
/// line's first piece, in whatever buffer the line started, is not: a larger one kept idle would
/// only add to the proxy's peak memory.
fn is_stream_buffer(buffer: &Vec<u8>) -> bool {
    buffer.capacity() == STREAM_BUFFER
}

/// One read from a [`LineReader`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A whole line, without its newline.
    Complete(Vec<u8>),
    /// A line longer than [`MAX_LINE_BYTES`], discarded; its first bytes.
    TooLong(Vec<u8>),
}

/// One read from [`LineReader::next_piece`].
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    Line(Line),
    /// A line longer than [`STREAM_AT`] has not ended yet: its bytes so far are
    /// [`LineReader::unfinished`]; call [`LineReader::stream`] to have it in pieces, or read on
    /// to have it whole.
    Long,
    /// A piece of a streamed line.
    Part(Vec<u8>),
    /// The last piece of a streamed line (at its newline, or the end of the stream), without
    /// its newline.
    End(Vec<u8>),
}

/// How the line being read is handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Whole, unless offered for streaming once it is long.
    Whole,
    /// Offered and not taken: whole.
    Held,
    /// In pieces, one per read.
    Streaming,
}

/// Lines at least this long leave the reader in the buffer they were read into; shorter ones are
/// copied out, so that a small line does not carry a read-sized buffer through the queues.
const TAKE_BUFFER_AT: usize = 16 << 10;

/// Splits a byte stream into lines of at most [`MAX_LINE_BYTES`].
///
/// Large lines cost no copy in user space: a line that starts the buffer is handed on in that
/// very buffer, and reading goes on in a new one sized for lines like it.
pub struct LineReader<R> {
    stream: R,
    buffer: Vec<u8>,
    /// Where the first line not yet returned starts in `buffer`.
    start: usize,
    /// Bytes of `buffer` already searched for a newline.
    searched: usize,
    /// The prefix of a line being discarded, while its end has not come yet.
    discarding: Option<Vec<u8>>,
    eof: bool,
    /// The length of the largest recent line, decaying by a quarter per line, to size buffers.
    /// Streamed lines do not count: they never need a buffer of their size.
    typical: usize,
    mode: Mode,
    /// Empty buffers to read the next pieces of a streamed line into.
    spares: Vec<Vec<u8>>,
    /// The last scan found that the bytes read make no piece, and nothing was read since: a scan
    /// now would find the same. The relay loop asks each reader before every wait and again
    /// before every read, so this saves most scans of a busy session. It holds because each
    /// reader is always scanned with the same `offer` (the server's with, the host's without):
    /// a reader scanned both ways would have to remember which way settled it.
    settled: bool,
    /// The pieces of a streamed line are peeked at, to be moved on by `splice`
    /// ([`LineReader::peek_pieces`]).
    peek: Option<Peek>,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(stream: R) -> Self {
        Self {
            stream,
            buffer: Vec::new(),
            start: 0,
            searched: 0,
            discarding: None,
            eof: false,
            typical: 0,
            mode: Mode::Whole,
            spares: Vec::new(),
            settled: false,
            peek: None,
        }
    }

    /// Keeps a written piece's buffer to read a later piece into (up to [`SPARES_KEPT`]).
    pub fn recycle(&mut self, mut buffer: Vec<u8>) {
        if self.spares.len() < SPARES_KEPT && is_stream_buffer(&buffer) {
            buffer.clear();
            self.spares.push(buffer);
        }
    }

    /// A buffer for the next piece of a streamed line: a kept one, or a new one.
    fn piece_buffer(&mut self) -> Vec<u8> {
        self.spares
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(STREAM_BUFFER))
    }

    /// The next line; `None` at the end of the stream. A last line without a newline counts.
    pub async fn next_line(&mut self) -> io::Result<Option<Line>> {
        Ok(self.read(false).await?.map(|piece| match piece {
            Piece::Line(line) => line,
            // Only a read that offers streaming hands out anything else.
            Piece::Long | Piece::Part(_) | Piece::End(_) => unreachable!("not offered"),
        }))
    }

    /// The next line, or piece of one: as [`LineReader::next_line`], but a line that is still
    /// unfinished at [`STREAM_AT`] bytes is first offered with [`Line::Long`].
    pub async fn next_piece(&mut self) -> io::Result<Option<Piece>> {
        if self.mode == Mode::Streaming {
            return self.next_part().await.map(Some);
        }
        self.read(true).await
    }

    /// The bytes of the unfinished line, after [`Line::Long`].
    pub fn unfinished(&self) -> &[u8] {
        &self.buffer[self.start..]
    }

    /// Hands out the line offered with [`Line::Long`] in pieces from now on; returns its bytes
    /// so far, the first piece.
    pub fn stream(&mut self) -> Vec<u8> {
        self.mode = Mode::Streaming;
        self.settled = false;
        self.compact();
        self.searched = 0;
        let next = self.piece_buffer();
        std::mem::replace(&mut self.buffer, next)
    }

    /// The next piece of a streamed line: what one read brought, up to its newline.
    async fn next_part(&mut self) -> io::Result<Piece> {
        loop {
            if let Some(at) = memchr::memchr(b'\n', &self.buffer) {
                // The line's end: what follows its newline starts the next line, in a buffer
                // of its own.
                let next = self.piece_buffer();
                let mut part = std::mem::replace(&mut self.buffer, next);
                self.buffer.extend_from_slice(&part[at + 1..]);
                part.truncate(at);
                self.mode = Mode::Whole;
                return Ok(Piece::End(part));
            }
            if !self.buffer.is_empty() {
                let next = self.piece_buffer();
                return Ok(Piece::Part(std::mem::replace(&mut self.buffer, next)));
            }
            if self.eof {
                self.mode = Mode::Whole;
                return Ok(Piece::End(Vec::new()));
            }
            if self.buffer.capacity() < STREAM_BUFFER {
                self.buffer.reserve(STREAM_BUFFER);
            }
            self.settled = false;
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                self.eof = true;
            }
        }
    }

    async fn read(&mut self, offer: bool) -> io::Result<Option<Piece>> {
        loop {
            if let Some(piece) = self.scan(offer) {
                return Ok(piece);
            }
            self.settled = false;
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                self.eof = true;
            }
        }
    }

    /// The next line or piece the bytes already read make, as [`LineReader::try_read`] would
    /// return it first, without reading: the relay loop asks before it waits for the stream.
    pub fn buffered(&mut self, offer: bool) -> Option<Option<Piece>> {
        debug_assert!(
            !self.is_streaming(),
            "streamed pieces are read through the runtime"
        );
        self.scan(offer)
    }

    /// Whether the reader is handing out a line in pieces ([`LineReader::stream`]).
    pub fn is_streaming(&self) -> bool {
        self.mode == Mode::Streaming
    }

    /// What the bytes read so far make: the next piece (`Some(None)` at the end of the stream),
    /// or `None` when a read must come first, with the buffer made ready for it.
    fn scan(&mut self, offer: bool) -> Option<Option<Piece>> {
        if self.settled {
            return None;
        }
        if let Some(at) = memchr::memchr(b'\n', &self.buffer[self.searched..]) {
            let end = self.searched + at;
            let line = self.take_line(end);
            return Some(Some(Piece::Line(match self.discarding.take() {
                Some(prefix) => Line::TooLong(prefix),
                None if line.len() > MAX_LINE_BYTES => {
                    let mut prefix = line;
                    prefix.truncate(PREFIX_KEPT);
                    Line::TooLong(prefix)
                }
                None => Line::Complete(line),
            })));
        }
        if offer
            && self.mode == Mode::Whole
            && !self.eof
            && self.discarding.is_none()
            && self.buffer.len() - self.start >= STREAM_AT
        {
            self.mode = Mode::Held;
            self.compact();
            self.searched = self.buffer.len();
            return Some(Some(Piece::Long));
        }
        if self.discarding.is_none() && self.buffer.len() - self.start > MAX_LINE_BYTES {
            let keep = (self.buffer.len() - self.start).min(PREFIX_KEPT);
            self.discarding = Some(self.buffer[self.start..self.start + keep].to_vec());
        }
        if self.discarding.is_some() {
            // Only the prefix of an over-long line is kept; the rest is dropped as it comes.
            self.buffer.clear();
            self.buffer.shrink_to(READ_CHUNK);
            self.start = 0;
        }
        if self.eof {
            if let Some(prefix) = self.discarding.take() {
                return Some(Some(Piece::Line(Line::TooLong(prefix))));
            }
            if self.start == self.buffer.len() {
                return Some(None);
            }
            let end = self.buffer.len();
            return Some(Some(Piece::Line(Line::Complete(self.take_line(end)))));
        }
        self.compact();
        self.searched = self.buffer.len();
        if self.buffer.capacity() - self.buffer.len() < READ_CHUNK / 8 {
            self.buffer.reserve(READ_CHUNK);
        }
        self.settled = true;
        None
    }

    /// Removes the line from `start` to `end` (a newline, or the end of the stream) from the
    /// buffer and returns it without its newline.
    fn take_line(&mut self, end: usize) -> Vec<u8> {
        self.mode = Mode::Whole;
        let length = end - self.start;
        self.typical = length.max(self.typical - self.typical / 4);
        let next_start = (end + 1).min(self.buffer.len());
        if self.start == 0 && length >= TAKE_BUFFER_AT {
            // Reading goes on in a new buffer with room for a line as large as the largest
            // recent one plus one read, so that a stream of large lines is neither copied nor
            // regrown from nothing.
            let rest = &self.buffer[next_start..];
            let mut next =
                Vec::with_capacity(rest.len() + self.typical.min(BUFFER_HINT_MAX) + READ_CHUNK);
            next.extend_from_slice(rest);
            let mut line = std::mem::replace(&mut self.buffer, next);
            line.truncate(length);
            self.start = 0;
            self.searched = 0;
            return line;
        }
        // Room for the newline that `Outbound` writes after the line, so that it is one write.
        let mut line = Vec::with_capacity(length + 1);
        line.extend_from_slice(&self.buffer[self.start..end]);
        self.start = next_start;
        self.searched = next_start;
        line
    }

    /// Moves the unfinished line to the front of the buffer before reading more, so that a
    /// line always starts its buffer (and can be taken whole), and gives back a large buffer
    /// once lines are small again.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        let wanted = self.typical.min(BUFFER_HINT_MAX) + READ_CHUNK;
        if self.buffer.capacity() > 4 * wanted && self.buffer.len() < wanted {
            self.buffer.shrink_to(wanted);
        }
    }
}

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

/// A stream whose non-blocking descriptor the queue may write to itself ([`Outbound`]'s
/// writes that do not wait), rather than through the runtime's write future: that took more
/// instructions than the relay's own work on a small line. The runtime's readiness is left as it
/// was, which is sound: a write that would block leaves the bytes queued for
/// [`Outbound::drain`], whose write through the runtime finds out the same and waits.
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
/// ([`LineReader::try_read`]).
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

impl<R: AsyncRead + ReadDescriptor + Unpin> LineReader<R> {
    /// Peeks at the pieces of streamed lines from now on, where the stream is a pipe: each is
    /// copied out with `tee` and left in the pipe ([`LineReader::peeked`]) for the caller to
    /// move on by `splice` or have dropped. Where no peek can be made, pieces are read as before.
    pub fn peek_pieces(&mut self) {
        if self.peek.is_none()
            && let Some(fd) = self.stream.read_descriptor()
        {
            self.peek = Peek::new(fd).ok();
        }
    }

    /// Reads pieces as before, without peeking: the side they go to cannot take them by
    /// `splice`. The piece handed out last is dropped from the pipe first.
    pub fn stop_peeking(&mut self) -> io::Result<()> {
        if let Some(peek) = self.peek.take() {
            peek.settle()?;
        }
        Ok(())
    }

    /// The piece handed out last, if it was peeked at and is still in the pipe: the caller
    /// either queues it for `splice` (the queue then owns its bytes) or calls
    /// [`LineReader::drop_peeked`].
    pub fn peeked(&self) -> Option<Arc<Front>> {
        self.peek.as_ref().and_then(Peek::handed)
    }

    /// Reads the piece handed out last out of the pipe, where it was only peeked at, and drops
    /// it: the caller has the copy.
    pub fn drop_peeked(&mut self) -> io::Result<()> {
        self.peek.as_ref().map_or(Ok(()), Peek::settle)
    }

    /// [`LineReader::next_piece`], with the pieces of a streamed line peeked at once
    /// [`LineReader::peek_pieces`] was called.
    pub async fn next_piece_peeking(&mut self) -> io::Result<Option<Piece>> {
        if let Some(peek) = &self.peek {
            // A piece handed out and dropped unqueued (a retiring server's) leaves the pipe
            // before anything else is read.
            peek.settle()?;
            if self.mode == Mode::Streaming && self.buffer.is_empty() && !self.eof {
                match self.peek_part().await {
                    Ok(piece) => return Ok(Some(piece)),
                    // A `tee`, or the read of its copy, that failed took nothing from the
                    // stream (a system that forbids `tee`, say): what it left in the buffer is
                    // dropped, and pieces are read as before from now on.
                    Err(_) => {
                        self.buffer.clear();
                        self.peek = None;
                    }
                }
            }
        }
        self.next_piece().await
    }

    /// The next piece of a streamed line, as [`LineReader::next_part`] reads it, but copied
    /// from the pipe by `tee`: the piece's bytes (and its newline, at the line's end) stay at
    /// the front of the pipe. What the copy holds beyond the newline is dropped: it is still in
    /// the pipe, the start of the next line, read as any line is.
    async fn peek_part(&mut self) -> io::Result<Piece> {
        let peek = self.peek.as_ref().expect("peeking");
        let stream = &self.stream;
        let n = std::future::poll_fn(|cx| stream.poll_tee(cx, peek.copy_in(), READ_CHUNK)).await?;
        self.settled = false;
        if n == 0 {
            self.eof = true;
            self.mode = Mode::Whole;
            return Ok(Piece::End(Vec::new()));
        }
        if self.buffer.capacity() < STREAM_BUFFER {
            self.buffer.reserve(STREAM_BUFFER);
        }
        peek.read_copy(&mut self.buffer, n)?;
        let piece = match memchr::memchr(b'\n', &self.buffer) {
            Some(at) => {
                self.buffer.truncate(at);
                peek.hand_out(at + 1);
                self.mode = Mode::Whole;
                Piece::End
            }
            None => {
                peek.hand_out(n);
                Piece::Part
            }
        };
        let next = self.piece_buffer();
        Ok(piece(std::mem::replace(&mut self.buffer, next)))
    }

    /// The stream's descriptor, for a wait on it before [`LineReader::try_read`].
    pub fn descriptor(&self) -> Option<BorrowedFd<'_>> {
        self.stream.read_descriptor()
    }

    /// The next line or piece as [`LineReader::next_piece`] (with `offer`) or
    /// [`LineReader::next_line`] make it, read straight from the stream's non-blocking
    /// descriptor; `Ok(None)` if that would block, or if the stream has no such descriptor. For
    /// the relay loop's own wait (`wait`), which has seen the descriptor readable. The
    /// runtime's idea of its readiness is left as it was, which is sound: a read through the
    /// runtime that finds nothing waits for the next readiness, as it would anyway. Not for a
    /// line being streamed in pieces.
    pub fn try_read(&mut self, offer: bool) -> io::Result<Option<Option<Piece>>> {
        debug_assert!(
            !self.is_streaming(),
            "streamed pieces are read through the runtime"
        );
        if let Some(peek) = &self.peek {
            peek.settle()?;
        }
        // A side that keeps its pipe full without ending a line (one being discarded, or held
        // whole) is left to the runtime's reads after a few, which its budget bounds, so that
        // news and deadlines get their turns meanwhile.
        for _ in 0..DIRECT_READS {
            if let Some(piece) = self.scan(offer) {
                return Ok(Some(piece));
            }
            let Some(fd) = self.stream.read_descriptor() else {
                return Ok(None);
            };
            match rustix::io::read(fd, rustix::buffer::spare_capacity(&mut self.buffer)) {
                Ok(0) => {
                    self.eof = true;
                    self.settled = false;
                }
                Ok(_) => self.settled = false,
                // Nothing was read: the scan just made stays true.
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => return Ok(None),
                Err(error) => return Err(error.into()),
            }
        }
        Ok(self.scan(offer))
    }
}

impl Descriptor for tokio::net::unix::pipe::Sender {
    fn descriptor(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }
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
    /// server's pipe (as [`LineReader::peeked`] hands it out), to be moved to the side by
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
    /// that fed it reads the next pieces into it ([`LineReader::recycle`]).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests' in-memory streams are written through the runtime only.
    impl Descriptor for tokio::io::DuplexStream {
        fn descriptor(&self) -> Option<BorrowedFd<'_>> {
            None
        }
    }

    async fn lines_of(input: Vec<u8>) -> Vec<Line> {
        let mut reader = LineReader::new(&input[..]);
        let mut out = Vec::new();
        while let Some(line) = reader.next_line().await.unwrap() {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn lines_split_on_newlines_and_a_last_partial_line_counts() {
        let lines = lines_of(b"a\r\n\nbc\nlast".to_vec()).await;
        assert_eq!(
            lines,
            vec![
                Line::Complete(b"a\r".to_vec()),
                Line::Complete(Vec::new()),
                Line::Complete(b"bc".to_vec()),
                Line::Complete(b"last".to_vec()),
            ]
        );
    }

    #[tokio::test]
    async fn an_over_long_line_is_discarded_but_its_neighbours_are_kept() {
        let mut input = b"before\n".to_vec();
        input.extend_from_slice(br#"{"id":7,"x":""#);
        input.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 10));
        input.extend_from_slice(b"\"}\nafter\n");
        let lines = lines_of(input).await;
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], Line::Complete(b"before".to_vec()));
        match &lines[1] {
            Line::TooLong(prefix) => {
                assert!(prefix.starts_with(br#"{"id":7,"#));
                assert!(prefix.len() <= PREFIX_KEPT);
            }
            other => panic!("expected a discarded line, got {other:?}"),
        }
        assert_eq!(lines[2], Line::Complete(b"after".to_vec()));
    }

    #[tokio::test]
    async fn small_lines_are_copied_out_right_sized_and_a_large_line_among_them_is_whole() {
        let large: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut input = b"one\ntwo\n".to_vec();
        input.extend_from_slice(&large);
        input.extend_from_slice(b"\nthree\n");
        let mut reader = LineReader::new(&input[..]);
        let mut lines = Vec::new();
        while let Some(Line::Complete(line)) = reader.next_line().await.unwrap() {
            lines.push(line);
        }
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], b"one");
        assert_eq!(
            lines[0].capacity(),
            lines[0].len() + 1,
            "a small line keeps no read buffer, only room for its newline"
        );
        assert_eq!(lines[2], large);
        assert_eq!(lines[3], b"three");
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_passes() {
        let mut input = vec![b'y'; MAX_LINE_BYTES];
        input.push(b'\n');
        let lines = lines_of(input).await;
        assert!(matches!(&lines[..], [Line::Complete(l)] if l.len() == MAX_LINE_BYTES));
    }

    /// A stream that hands out its bytes in the chunks it was given, as pipes do.
    struct Chunked {
        data: Vec<u8>,
        sizes: Vec<usize>,
        read: usize,
        next: usize,
    }

    impl AsyncRead for Chunked {
        fn poll_read(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            let size = this
                .sizes
                .get(this.next)
                .copied()
                .unwrap_or(usize::MAX)
                .max(1);
            this.next += 1;
            let end = this.data.len().min(this.read + size.min(buf.remaining()));
            buf.put_slice(&this.data[this.read..end]);
            this.read = end;
            Poll::Ready(Ok(()))
        }
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        /// However the bytes arrive, the lines are the bytes split at each newline, a last line
        /// without one included.
        #[test]
        fn lines_do_not_depend_on_how_the_bytes_arrive(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048)
                // One byte in sixteen a newline.
                .prop_map(|bytes| bytes.into_iter().map(|b| if b % 16 == 0 { b'\n' } else { b }).collect::<Vec<u8>>()),
            sizes in proptest::collection::vec(1usize..300, 0..64),
        ) {
            let mut expected: Vec<Line> = data
                .split(|b| *b == b'\n')
                .map(|l| Line::Complete(l.to_vec()))
                .collect();
            if data.last().is_none_or(|b| *b == b'\n') {
                // The split leaves an empty piece after a final newline (or of an empty stream).
                expected.pop();
            }
            let stream = Chunked { data, sizes, read: 0, next: 0 };
            let lines = futures::executor::block_on(async {
                let mut reader = LineReader::new(stream);
                let mut out = Vec::new();
                while let Some(line) = reader.next_line().await.unwrap() {
                    out.push(line);
                }
                out
            });
            proptest::prop_assert_eq!(lines, expected);
        }
    }

    /// Reads `input` with streaming taken for every long line: the lines, each as its pieces.
    async fn pieces_of(input: &[u8], sizes: Vec<usize>) -> Vec<Vec<Vec<u8>>> {
        let stream = Chunked {
            data: input.to_vec(),
            sizes,
            read: 0,
            next: 0,
        };
        let mut reader = LineReader::new(stream);
        let mut lines = Vec::new();
        let mut open: Option<Vec<Vec<u8>>> = None;
        while let Some(piece) = reader.next_piece().await.unwrap() {
            match piece {
                Piece::Line(Line::Complete(line)) => lines.push(vec![line]),
                Piece::Line(Line::TooLong(_)) => panic!("no line is that long here"),
                Piece::Long => open = Some(vec![reader.stream()]),
                Piece::Part(bytes) => open.as_mut().expect("streaming").push(bytes),
                Piece::End(bytes) => {
                    let mut parts = open.take().expect("streaming");
                    parts.push(bytes);
                    lines.push(parts);
                }
            }
        }
        assert!(open.is_none());
        lines
    }

    #[tokio::test]
    async fn a_long_line_comes_in_pieces_of_a_read_each_and_its_neighbours_whole() {
        let long: Vec<u8> = (0..1_000_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut input = b"one\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\ntwo\n");
        input.extend_from_slice(&long);
        // The second long line is cut off by the end of the stream.
        let lines = pieces_of(&input, vec![3, 70_000, 65_536, 1_000_000]).await;
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], vec![b"one".to_vec()]);
        assert_eq!(lines[1].concat(), long);
        assert!(lines[1].len() > 2, "in pieces");
        assert!(lines[1].iter().all(|p| p.len() <= 2 * STREAM_BUFFER));
        assert_eq!(lines[2], vec![b"two".to_vec()]);
        assert_eq!(lines[3].concat(), long);
    }

    #[tokio::test]
    async fn a_long_line_not_taken_for_streaming_is_whole() {
        let long = vec![b'x'; 300_000];
        let mut input = long.clone();
        input.extend_from_slice(b"\nafter\n");
        let mut reader = LineReader::new(&input[..]);
        assert_eq!(reader.next_piece().await.unwrap(), Some(Piece::Long));
        assert!(long.starts_with(reader.unfinished()));
        assert_eq!(
            reader.next_piece().await.unwrap(),
            Some(Piece::Line(Line::Complete(long)))
        );
        assert_eq!(
            reader.next_piece().await.unwrap(),
            Some(Piece::Line(Line::Complete(b"after".to_vec())))
        );
    }

    #[tokio::test]
    async fn lines_pushed_while_a_line_goes_out_in_pieces_follow_it() {
        let (reader, writer) = tokio::io::duplex(64);
        let mut out = Outbound::new(writer);
        out.push_part(b"{\"result\":".to_vec());
        out.push(b"held".to_vec());
        out.push_part(b"1,\"id\":1".to_vec());
        out.end_line(b"}".to_vec());
        out.push(b"after".to_vec());
        // A line cut off by the end of the session still ends.
        out.push_part(b"cut".to_vec());
        out.close();
        let reading = tokio::spawn(async move {
            let mut reader = LineReader::new(reader);
            let mut lines = Vec::new();
            while let Some(Line::Complete(line)) = reader.next_line().await.unwrap() {
                lines.push(String::from_utf8(line).unwrap());
            }
            lines
        });
        out.finish().await;
        assert_eq!(
            reading.await.unwrap(),
            vec![r#"{"result":1,"id":1}"#, "held", "after", "cut"]
        );
    }

    #[tokio::test]
    async fn a_written_piece_is_read_into_again_and_only_so_many_are_kept() {
        let (_reader, writer) = tokio::io::duplex(1 << 20);
        let mut out = Outbound::new(writer);
        let mut sent = Vec::new();
        for _ in 0..SPARES_KEPT + 1 {
            let mut piece = Vec::with_capacity(STREAM_BUFFER);
            piece.extend_from_slice(b"{\"result\":");
            sent.push(piece.as_ptr());
            out.push_part(piece);
        }
        // A small piece is not worth keeping.
        out.push_part(b"1".to_vec());
        out.end_line(b"}".to_vec());
        let mut spares = Vec::new();
        while let Some(spare) = out.spare() {
            assert!(spare.is_empty() || spare.capacity() >= STREAM_BUFFER);
            spares.push(spare);
        }
        assert_eq!(
            spares.len(),
            SPARES_KEPT,
            "the queue keeps a bounded number"
        );
        assert!(spares.iter().all(|s| sent.contains(&s.as_ptr())));

        let long = vec![b'x'; 3 * STREAM_BUFFER];
        let mut input = long.clone();
        input.extend_from_slice(b"\n");
        let stream = Chunked {
            data: input,
            sizes: vec![STREAM_BUFFER; 8],
            read: 0,
            next: 0,
        };
        let mut reader = LineReader::new(stream);
        let kept: Vec<*const u8> = spares.iter().map(|s| s.as_ptr()).collect();
        for spare in spares {
            reader.recycle(spare);
        }
        assert_eq!(reader.next_piece().await.unwrap(), Some(Piece::Long));
        let mut pieces = vec![reader.stream()];
        loop {
            match reader.next_piece().await.unwrap() {
                Some(Piece::Part(bytes)) => pieces.push(bytes),
                Some(Piece::End(bytes)) => {
                    pieces.push(bytes);
                    break;
                }
                other => panic!("expected a piece, got {other:?}"),
            }
        }
        assert_eq!(pieces.concat(), long);
        assert!(
            pieces.iter().any(|p| kept.contains(&p.as_ptr())),
            "a recycled buffer was read into"
        );
    }

    #[tokio::test]
    async fn lines_read_from_a_pipe_directly_and_through_the_runtime_come_whole_in_order() {
        use std::io::Write as _;
        let (reader, mut writer) = std::io::pipe().unwrap();
        let receiver =
            tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader)).unwrap();
        let mut lines = LineReader::new(receiver);
        let complete = |piece: Option<Option<Piece>>| match piece {
            Some(Some(Piece::Line(Line::Complete(line)))) => line,
            _ => panic!("not a line"),
        };
        assert!(
            lines.try_read(true).unwrap().is_none(),
            "nothing to read yet"
        );
        writer
            .write_all(
                b"one
tw",
            )
            .unwrap();
        assert_eq!(complete(lines.try_read(true).unwrap()), b"one");
        // Half a line read directly is finished by a read through the runtime...
        assert!(lines.try_read(true).unwrap().is_none());
        writer
            .write_all(
                b"o
three
fo",
            )
            .unwrap();
        assert_eq!(complete(Some(lines.next_piece().await.unwrap())), b"two");
        // ...and what that read brought beyond it is there for the next direct one.
        assert_eq!(complete(lines.buffered(true)), b"three");
        assert!(lines.buffered(true).is_none());
        writer
            .write_all(
                b"ur
",
            )
            .unwrap();
        drop(writer);
        assert_eq!(complete(lines.try_read(true).unwrap()), b"four");
        assert!(
            matches!(lines.try_read(true).unwrap(), Some(None)),
            "the end of the stream"
        );
    }

    #[tokio::test]
    async fn lines_written_to_a_pipe_directly_and_through_the_runtime_arrive_whole_in_order() {
        let (sender, receiver) = tokio::net::unix::pipe::pipe().unwrap();
        let mut out = Outbound::new(Stdio::PipeOut(sender));
        // Far more than a pipe holds: the first lines go straight in, the rest wait.
        let lines: Vec<Vec<u8>> = (0..40u8)
            .map(|i| vec![b'a' + i % 26; 3000 + usize::from(i) * 97])
            .collect();
        for (i, line) in lines.iter().enumerate() {
            if i == 20 {
                // A streamed line among them, in pieces.
                out.push_part(b"{\"streamed\":".to_vec());
                out.push_part(vec![b'7'; 70_000]);
                out.end_line(b"}".to_vec());
            }
            // Every other line has room for its newline, which then goes into its own buffer.
            let mut pushed = Vec::with_capacity(line.len() + i % 2);
            pushed.extend_from_slice(line);
            out.push(pushed);
        }
        assert!(
            !out.lines.is_empty(),
            "the pipe is full and the rest is queued"
        );
        assert!(
            out.lines.iter().any(|q| q.end == End::Included)
                && out.lines.iter().any(|q| q.end == End::Newline),
            "both kinds of line wait in the queue"
        );
        let reading = tokio::spawn(async move {
            let mut reader = LineReader::new(receiver);
            let mut got = Vec::new();
            while let Some(Line::Complete(line)) = reader.next_line().await.unwrap() {
                got.push(line);
            }
            got
        });
        out.close();
        out.finish().await;
        let got = reading.await.unwrap();
        let mut expected = lines.clone();
        let mut streamed = b"{\"streamed\":".to_vec();
        streamed.extend(vec![b'7'; 70_000]);
        streamed.push(b'}');
        expected.insert(20, streamed);
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "every line whole and in order");
    }

    #[tokio::test]
    async fn the_queue_reports_full_past_its_high_water_mark_and_drains() {
        let (reader, writer) = tokio::io::duplex(1024);
        let mut out = Outbound::new(writer);
        // The side takes what fits in its buffer at once; the rest stays queued.
        out.push(vec![b'z'; QUEUE_HIGH_WATER + 4096]);
        assert!(out.is_full());
        let reading = tokio::spawn(async move {
            let mut reader = LineReader::new(reader);
            reader.next_line().await.unwrap()
        });
        while !out.lines.is_empty() {
            out.drain().await;
        }
        assert!(!out.is_full());
        assert!(
            matches!(reading.await.unwrap(), Some(Line::Complete(l)) if l.len() == QUEUE_HIGH_WATER + 4096)
        );
    }
}
