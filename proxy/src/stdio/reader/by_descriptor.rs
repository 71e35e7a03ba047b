//! The reader's use of its stream's descriptor past the runtime: peeking at a streamed line's
//! pieces with `tee`, so that `splice` can move them on (`crate::splice`), and reads the relay
//! loop makes itself once its own wait saw the descriptor readable.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use tokio::io::AsyncRead;

use super::{DIRECT_READS, Mode, Piece, PieceReader, READ_CHUNK, STREAM_BUFFER};
use crate::splice::{Front, Peek};
use crate::stdio::ReadDescriptor;

impl<R: AsyncRead + ReadDescriptor + Unpin> PieceReader<R> {
    /// Peeks at the pieces of streamed lines from now on, where the stream is a pipe: each is
    /// copied out with `tee` and left in the pipe ([`PieceReader::peeked`]) for the caller to
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
    /// [`PieceReader::drop_peeked`].
    pub fn peeked(&self) -> Option<Arc<Front>> {
        self.peek.as_ref().and_then(Peek::handed)
    }

    /// Reads the piece handed out last out of the pipe, where it was only peeked at, and drops
    /// it: the caller has the copy.
    pub fn drop_peeked(&mut self) -> io::Result<()> {
        self.peek.as_ref().map_or(Ok(()), Peek::settle)
    }

    /// [`PieceReader::next_piece`], with the pieces of a streamed line peeked at once
    /// [`PieceReader::peek_pieces`] was called.
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

    /// The next piece of a streamed line, as [`PieceReader::next_part`] reads it, but copied
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

    /// The stream's descriptor, for a wait on it before [`PieceReader::try_read`].
    pub fn descriptor(&self) -> Option<BorrowedFd<'_>> {
        self.stream.read_descriptor()
    }

    /// The next line or piece as [`PieceReader::next_piece`] (with `offer`) or
    /// [`PieceReader::next_line`] make it, read straight from the stream's non-blocking
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
