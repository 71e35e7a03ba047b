//! Reading lines off a connection within bounds: a line is at most
//! [`wire::MAX_LINE_BYTES`](rootsd_proto::wire::MAX_LINE_BYTES), must be finished within
//! [`PARTIAL_LINE_TIMEOUT`](crate::limits::PARTIAL_LINE_TIMEOUT) of its first byte (unless
//! [`Tuning`](crate::limits::Tuning) says otherwise), and read buffer beyond
//! [`READ_BUFFER_FREE`] is charged to one [`Budget`] shared by every connection. A buffer that
//! grew for a long line shrinks back once the line is taken, and dropping the reader returns
//! its charge, so the memory a peer made the daemon hold goes when the line or the peer does.
//!
//! This module frames bytes into lines and nothing else: it does not parse JSON or answer
//! anyone, which `connection/` does with the [`FramingError`]s it returns.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rootsd_proto::wire::{self, code};
use tokio::io::AsyncReadExt as _;
use tokio::time::Instant;

use crate::limits::{READ_BUFFER_FREE, READ_BUFFER_START};

/// Bytes that all connections together may hold beyond their own allowance.
#[derive(Debug)]
pub struct Budget {
    used: AtomicUsize,
    limit: usize,
}

impl Budget {
    pub fn new(limit: usize) -> Self {
        Self {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    /// Bytes charged now, which the tests check.
    #[cfg(test)]
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Charges `bytes` if they fit.
    fn try_take(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Why a connection's input cannot be framed. All but [`FramingError::Io`] get one last error
/// line before the connection closes.
#[derive(Debug, thiserror::Error)]
pub enum FramingError {
    #[error(
        "line longer than {} bytes: the connection is closed; keep each request under the limit",
        wire::MAX_LINE_BYTES
    )]
    TooLong,
    #[error("the line is not valid UTF-8: the connection is closed; send UTF-8 JSON")]
    NotUtf8,
    #[error(
        "a line was started but not finished within {}s: the connection is closed; send each request as one whole line",
        limit.as_secs_f64()
    )]
    Unfinished { limit: Duration },
    #[error(
        "rootsd is holding {limit} bytes of unfinished long lines from its clients, its limit, so this {wanted}-byte line cannot be read now: the connection is closed; retry shortly"
    )]
    OverBudget { limit: usize, wanted: usize },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl FramingError {
    /// The wire error code to close the connection with; `None` when the connection is gone.
    pub fn code(&self) -> Option<i64> {
        match self {
            Self::TooLong | Self::NotUtf8 | Self::Unfinished { .. } => Some(code::INVALID_REQUEST),
            Self::OverBudget { .. } => Some(code::BUSY),
            Self::Io(_) => None,
        }
    }
}

/// The lines of one connection, read as they arrive.
pub struct LineReader<'a> {
    /// Bytes received and not yet returned: at most one partial line when [`Self::fill`] runs.
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no newline.
    scanned: usize,
    /// Bytes of `buf`'s capacity charged to `budget`.
    charged: usize,
    budget: &'a Budget,
    /// When the partial line in `buf` began to arrive.
    started: Option<Instant>,
    /// How long a partial line may take to be finished:
    /// [`crate::limits::PARTIAL_LINE_TIMEOUT`] unless a test says otherwise.
    partial_line_timeout: Duration,
}

impl<'a> LineReader<'a> {
    pub fn new(budget: &'a Budget, partial_line_timeout: Duration) -> Self {
        Self {
            buf: Vec::with_capacity(READ_BUFFER_START),
            scanned: 0,
            charged: 0,
            budget,
            started: None,
            partial_line_timeout,
        }
    }

    /// Why the partial line now buffered is cut off once [`Self::deadline`] has passed.
    pub fn unfinished(&self) -> FramingError {
        FramingError::Unfinished {
            limit: self.partial_line_timeout,
        }
    }

    /// When the partial line now buffered must be finished, if one is.
    pub fn deadline(&self) -> Option<Instant> {
        self.started
            .map(|started| started + self.partial_line_timeout)
    }

    /// The next whole line already received, without its newline (and a `\r` before it).
    pub fn next_buffered(&mut self) -> Option<Result<String, FramingError>> {
        let Some(offset) = newline_in(&self.buf[self.scanned..]) else {
            self.scanned = self.buf.len();
            return (self.buf.len() > wire::MAX_LINE_BYTES).then_some(Err(FramingError::TooLong));
        };
        let end = self.scanned + offset;
        if end > wire::MAX_LINE_BYTES {
            return Some(Err(FramingError::TooLong));
        }
        let content = match self.buf[..end] {
            [ref content @ .., b'\r'] => content,
            ref content => content,
        };
        let line = content.to_vec();
        self.buf.drain(..=end);
        self.scanned = 0;
        // What is left began to arrive with the last read, or is nothing.
        self.started = (!self.buf.is_empty()).then(Instant::now);
        self.shrink();
        Some(String::from_utf8(line).map_err(|_| FramingError::NotUtf8))
    }

    /// Reads what `stream` has; `Ok(false)` once the peer has closed it. Cancel-safe: dropped
    /// before it completes, it has read nothing.
    pub async fn fill<'s, S>(&mut self, stream: &'s S) -> Result<bool, FramingError>
    where
        &'s S: tokio::io::AsyncRead + Unpin,
    {
        if self.buf.len() == self.buf.capacity() {
            self.grow()?;
        }
        let mut reader = stream;
        let read = reader.read_buf(&mut self.buf).await?;
        if read > 0 && self.started.is_none() {
            self.started = Some(Instant::now());
        }
        Ok(read > 0)
    }

    /// Doubles the buffer, up to one whole line and its newline, charging the budget for what
    /// exceeds the connection's own allowance.
    fn grow(&mut self) -> Result<(), FramingError> {
        let capacity = (self.buf.capacity() * 2).clamp(READ_BUFFER_START, wire::MAX_LINE_BYTES + 1);
        let charge = capacity.saturating_sub(READ_BUFFER_FREE);
        if charge > self.charged {
            if !self.budget.try_take(charge - self.charged) {
                return Err(FramingError::OverBudget {
                    limit: self.budget.limit(),
                    wanted: capacity,
                });
            }
            self.charged = charge;
        }
        self.buf.reserve_exact(capacity - self.buf.len());
        Ok(())
    }

    /// Gives back what a long line made the buffer grow by, once it has been taken.
    fn shrink(&mut self) {
        if self.buf.capacity() <= READ_BUFFER_FREE || self.buf.len() > READ_BUFFER_START {
            return;
        }
        let mut small = Vec::with_capacity(READ_BUFFER_START);
        small.extend_from_slice(&self.buf);
        self.buf = small;
        self.budget.give_back(self.charged);
        self.charged = 0;
    }
}

impl Drop for LineReader<'_> {
    fn drop(&mut self) {
        self.budget.give_back(self.charged);
    }
}

fn newline_in(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader_with<'a>(budget: &'a Budget, bytes: &[u8]) -> LineReader<'a> {
        let mut reader = LineReader::new(budget, crate::limits::PARTIAL_LINE_TIMEOUT);
        for chunk in bytes.chunks(1000) {
            if reader.buf.len() + chunk.len() > reader.buf.capacity() {
                reader.grow().unwrap();
            }
            reader.buf.extend_from_slice(chunk);
        }
        reader
    }

    #[test]
    fn lines_come_out_whole_without_their_line_ends() {
        let budget = Budget::new(1 << 20);
        let mut reader = reader_with(&budget, b"one\r\ntwo\nthr");
        assert_eq!(reader.next_buffered().unwrap().unwrap(), "one");
        assert_eq!(reader.next_buffered().unwrap().unwrap(), "two");
        assert!(reader.next_buffered().is_none());
        assert!(
            reader.deadline().is_some(),
            "a partial line is on the clock"
        );
        reader.buf.extend_from_slice(b"ee\n");
        assert_eq!(reader.next_buffered().unwrap().unwrap(), "three");
        assert!(reader.deadline().is_none());
    }

    #[test]
    fn a_line_of_the_limit_passes_and_one_byte_more_does_not() {
        let budget = Budget::new(4 << 20);
        let mut line = vec![b'x'; wire::MAX_LINE_BYTES];
        line.push(b'\n');
        let mut reader = reader_with(&budget, &line);
        assert_eq!(
            reader.next_buffered().unwrap().unwrap().len(),
            wire::MAX_LINE_BYTES
        );
        let mut reader = reader_with(&budget, &vec![b'x'; wire::MAX_LINE_BYTES + 1]);
        assert!(matches!(
            reader.next_buffered(),
            Some(Err(FramingError::TooLong))
        ));
    }

    #[test]
    fn long_lines_are_charged_to_the_budget_and_returned_when_taken_or_dropped() {
        let budget = Budget::new(1 << 20);
        let mut reader = reader_with(&budget, &vec![b'x'; 100_000]);
        assert!(budget.used() > 0, "a 100 kB line is charged");
        reader.buf.push(b'\n');
        reader.next_buffered().unwrap().unwrap();
        assert_eq!(budget.used(), 0, "taking the line returned its charge");
        assert!(
            reader.buf.capacity() <= READ_BUFFER_FREE,
            "and shrank the buffer"
        );

        let reader = reader_with(&budget, &vec![b'x'; 100_000]);
        assert!(budget.used() > 0);
        drop(reader);
        assert_eq!(budget.used(), 0, "dropping the reader returned its charge");
    }

    #[test]
    fn a_line_that_does_not_fit_the_budget_is_refused_and_others_keep_theirs() {
        let budget = Budget::new(300_000);
        let _holder = reader_with(&budget, &vec![b'x'; 200_000]);
        let held = budget.used();
        let mut greedy = reader_with(&budget, &[]);
        let refused = loop {
            if let Err(err) = greedy.grow() {
                break err;
            }
            greedy.buf.resize(greedy.buf.capacity(), b'y');
        };
        assert!(
            matches!(refused, FramingError::OverBudget { .. }),
            "{refused}"
        );
        assert_eq!(refused.code(), Some(code::BUSY));
        drop(greedy);
        assert_eq!(budget.used(), held);
    }

    #[test]
    fn short_lines_cost_the_budget_nothing() {
        let budget = Budget::new(0);
        let mut reader = reader_with(&budget, &[b'x'; 3000]);
        reader.buf.push(b'\n');
        assert_eq!(reader.next_buffered().unwrap().unwrap().len(), 3000);
    }
}
