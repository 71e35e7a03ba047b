//! The reader of a side's stream: lines of at most [`MAX_LINE_BYTES`], and a line still
//! unfinished at [`STREAM_AT`] bytes offered in pieces, one read each, so that a long result is
//! relayed as it arrives. Reading past the runtime (peeking by `tee`, reads of the descriptor
//! itself) is in `by_descriptor`.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt as _};

use crate::splice::Peek;

mod by_descriptor;
#[cfg(test)]
pub(super) mod tests;

/// The longest line the proxy relays, in bytes. The TypeScript SDK refuses messages over 10 MiB,
/// so nothing a real peer accepts is lost; a longer line is discarded and its sender told.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// How many bytes of a discarded line are kept to find out whom to tell.
const PREFIX_KEPT: usize = 64 << 10;

/// How much room a read asks for at least.
const READ_CHUNK: usize = 64 << 10;

/// The most a new read buffer is sized for in advance, whatever lines came before.
const BUFFER_HINT_MAX: usize = 4 << 20;

/// A line still unfinished at this length is offered for streaming ([`Piece::Long`]): one read's
/// worth, so that lines a single read brings whole are never split.
pub const STREAM_AT: usize = READ_CHUNK;
/// How many reads [`PieceReader::try_read`] makes at most before it leaves the rest to the
/// runtime: 1 MiB of pipe at the most.
const DIRECT_READS: usize = 16;

/// The buffer a streamed line is read into, and handed on in, one read at a time. It is below
/// glibc's mmap threshold, so the pieces come from (and go back to) the heap's free lists
/// instead of being mapped and unmapped for every read. The line after a streamed one starts in
/// such a buffer too, and is read whole until [`STREAM_AT`]: the eighth of a read beyond it is
/// the room [`PieceReader`] keeps free before it grows a buffer, so that reaching [`STREAM_AT`]
/// never copies the line into a larger one.
pub(super) const STREAM_BUFFER: usize = STREAM_AT + READ_CHUNK / 8;

/// How many written pieces of a streamed line are kept to read the next ones into, on each side
/// of the trip ([`super::Outbound::spare`], [`PieceReader::recycle`]). A piece freed and the next one
/// allocated made the heap shrink and grow again every few reads, and the kernel clear the
/// pages it had just taken back: a tenth of the proxy's time with 1 MiB results.
pub(super) const SPARES_KEPT: usize = 1;

/// Whether `buffer` is one a streamed piece is read into, and so worth keeping for the next. A
/// line's first piece, in whatever buffer the line started, is not: a larger one kept idle would
/// only add to the proxy's peak memory.
pub(super) fn is_stream_buffer(buffer: &Vec<u8>) -> bool {
    buffer.capacity() == STREAM_BUFFER
}

/// One read from a [`PieceReader`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A whole line, without its newline.
    Complete(Vec<u8>),
    /// A line longer than [`MAX_LINE_BYTES`], discarded; its first bytes.
    TooLong(Vec<u8>),
}

/// One read from [`PieceReader::next_piece`].
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    Line(Line),
    /// A line longer than [`STREAM_AT`] has not ended yet: its bytes so far are
    /// [`PieceReader::unfinished`]; call [`PieceReader::stream`] to have it in pieces, or read on
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

/// Splits a byte stream into lines of at most [`MAX_LINE_BYTES`], and a long line into pieces
/// when asked ([`Piece`]).
///
/// Named for what it hands out, a [`Piece`] (a whole line, or part of a streamed one), and so
/// that it is never taken for the daemon's `framing::LineReader`, which hands out only whole
/// lines, charged to a budget shared by every connection and cut off by a timeout.
///
/// Large lines cost no copy in user space: a line that starts the buffer is handed on in that
/// very buffer, and reading goes on in a new one sized for lines like it.
pub struct PieceReader<R> {
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
    /// ([`PieceReader::peek_pieces`]).
    peek: Option<Peek>,
}

impl<R: AsyncRead + Unpin> PieceReader<R> {
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

    /// The next line, or piece of one: as [`PieceReader::next_line`], but a line that is still
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

    /// The next line or piece the bytes already read make, as [`PieceReader::try_read`] would
    /// return it first, without reading: the relay loop asks before it waits for the stream.
    pub fn buffered(&mut self, offer: bool) -> Option<Option<Piece>> {
        debug_assert!(
            !self.is_streaming(),
            "streamed pieces are read through the runtime"
        );
        self.scan(offer)
    }

    /// Whether the reader is handing out a line in pieces ([`PieceReader::stream`]).
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
