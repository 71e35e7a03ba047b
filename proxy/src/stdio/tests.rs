//! A streamed line peeked at and moved by `splice` (`crate::splice`), through real pipes on both
//! sides: the reader's peeking, the queue's spliced pieces and the proxy's own stdout together.

use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

use crate::stdio::reader::STREAM_AT;
use crate::stdio::{Descriptor, Line, Outbound, Piece, PieceReader, ReadDescriptor, Stdio};

/// A pipe the test writes `input` into from a thread (it holds more than a pipe does), read by
/// a `PieceReader` as the proxy reads its server.
fn server_pipe(input: Vec<u8>) -> (PieceReader<pipe::Receiver>, std::thread::JoinHandle<()>) {
    let (reader, mut writer) = std::io::pipe().unwrap();
    // A test that stops reading early closes the pipe: the rest is not written.
    let writing = std::thread::spawn(move || {
        let _ = writer.write_all(&input);
    });
    let receiver = pipe::Receiver::from_owned_fd(OwnedFd::from(reader)).unwrap();
    (PieceReader::new(receiver), writing)
}

/// [`server_pipe`] carrying `line`, its newline, then `after`.
fn server_line(
    line: &[u8],
    after: &[u8],
) -> (PieceReader<pipe::Receiver>, std::thread::JoinHandle<()>) {
    let mut input = line.to_vec();
    input.push(b'\n');
    input.extend_from_slice(after);
    server_pipe(input)
}

/// Ends a session as the proxy does once its server is done: the queue closed, and written out.
async fn finish<W: AsyncWrite + Descriptor + Unpin>(
    mut out: Outbound<W>,
    writing: std::thread::JoinHandle<()>,
) {
    writing.join().unwrap();
    out.close();
    out.finish().await;
}

/// A pipe standing for the host's stdin, read to its end by a thread.
fn host_pipe() -> (Outbound<Stdio>, std::thread::JoinHandle<Vec<u8>>) {
    let (mut reader, writer) = std::io::pipe().unwrap();
    let reading = std::thread::spawn(move || {
        let mut got = Vec::new();
        reader.read_to_end(&mut got).unwrap();
        got
    });
    let sender = pipe::Sender::from_owned_fd(OwnedFd::from(writer)).unwrap();
    (Outbound::new(Stdio::PipeOut(sender)), reading)
}

/// Relays a streamed line from `lines` to `out` as the proxy's loop does: the first piece
/// copied, the rest peeked at and queued for `splice` when `splice` is true, or read and pushed
/// as copies when it is false (the loop peeks only for a side that splices, and has the line
/// end with its newline, which a spliced end already holds). Returns the bytes the pieces were
/// seen as.
async fn relay_streamed<W: AsyncWrite + Descriptor + Unpin>(
    lines: &mut PieceReader<pipe::Receiver>,
    out: &mut Outbound<W>,
    splice: bool,
) -> Vec<u8> {
    let seen = start_streamed(lines, out, splice).await;
    relay_rest(lines, out, splice, seen).await
}

/// The start of [`relay_streamed`]: the line's first piece, copied to `out`, and the reader set
/// to peek at the rest when `splice` is true. Returns the bytes seen so far.
async fn start_streamed<W: AsyncWrite + Descriptor + Unpin>(
    lines: &mut PieceReader<pipe::Receiver>,
    out: &mut Outbound<W>,
    splice: bool,
) -> Vec<u8> {
    assert_eq!(lines.next_piece_peeking().await.unwrap(), Some(Piece::Long));
    let first = lines.stream();
    let seen = first.clone();
    out.push_part(first);
    if splice {
        lines.peek_pieces();
    }
    seen
}

/// The rest of [`relay_streamed`], after [`start_streamed`] saw `seen`: every later piece to
/// the line's end, which it ends as the loop does.
async fn relay_rest<W: AsyncWrite + Descriptor + Unpin>(
    lines: &mut PieceReader<pipe::Receiver>,
    out: &mut Outbound<W>,
    splice: bool,
    mut seen: Vec<u8>,
) -> Vec<u8> {
    loop {
        while out.holds_pipe() {
            out.drain().await;
        }
        let (bytes, ends) = match lines.next_piece_peeking().await.unwrap() {
            Some(Piece::Part(bytes)) => (bytes, false),
            Some(Piece::End(bytes)) => (bytes, true),
            other => panic!("expected a piece, got {other:?}"),
        };
        seen.extend_from_slice(&bytes);
        match lines.peeked() {
            Some(piece) if splice => out.push_spliced(piece, ends),
            None if !splice => out.push_part(bytes),
            other => panic!("peeked {other:?} with splice {splice}"),
        }
        if ends {
            out.end_line(Vec::new());
            // As the proxy's loop does, nothing more is read from the pipe until the line's
            // last piece has left it.
            while out.holds_pipe() {
                out.drain().await;
            }
            return seen;
        }
    }
}

/// Reads the rest of a streamed line, queueing none of its pieces (one peeked at leaves the pipe
/// before the next read): its bytes, and how many of its pieces were peeked at.
async fn rest_of_line<R: AsyncRead + ReadDescriptor + Unpin>(
    lines: &mut PieceReader<R>,
) -> (Vec<u8>, usize) {
    let (mut rest, mut peeked) = (Vec::new(), 0);
    loop {
        let piece = lines.next_piece_peeking().await.unwrap();
        peeked += usize::from(lines.peeked().is_some());
        match piece {
            Some(Piece::Part(bytes)) => rest.extend_from_slice(&bytes),
            Some(Piece::End(bytes)) => {
                rest.extend_from_slice(&bytes);
                return (rest, peeked);
            }
            other => panic!("expected a piece, got {other:?}"),
        }
    }
}

/// The streamed line was seen whole, every byte once and in order, and the line after it
/// (`next`) comes whole.
async fn whole_then_next<R: AsyncRead + ReadDescriptor + Unpin>(
    lines: &mut PieceReader<R>,
    seen: &[u8],
    long: &[u8],
) {
    assert!(seen == long, "every byte once, in order");
    assert_eq!(
        lines.next_piece_peeking().await.unwrap(),
        Some(Piece::Line(Line::Complete(b"next".to_vec())))
    );
}

/// The first line an in-memory host reads.
async fn first_line(stream: tokio::io::DuplexStream) -> Option<Line> {
    PieceReader::new(stream).next_line().await.unwrap()
}

fn long_line(size: usize) -> Vec<u8> {
    let mut line = b"{\"result\":\"".to_vec();
    line.extend((0..size).map(|i| b'a' + (i % 26) as u8));
    line.extend_from_slice(b"\"}");
    line
}

#[tokio::test]
async fn a_streamed_line_moves_by_splice_whole_and_the_lines_around_it_keep_their_order() {
    let long = long_line(5 * STREAM_AT + 123);
    let (mut lines, writing) = server_line(&long, b"after\n");
    let (mut out, reading) = host_pipe();
    assert!(out.splices(), "a pipe takes bytes by splice");

    out.push(b"before".to_vec());
    let seen = relay_streamed(&mut lines, &mut out, true).await;
    // The relay saw every byte of the line, without its newline, as the host gets it.
    assert_eq!(seen, long);
    assert!(out.splices(), "the pipe took every piece by splice");
    // What follows the line in the server's pipe is read as any line is.
    match lines.next_piece_peeking().await.unwrap() {
        Some(Piece::Line(Line::Complete(line))) => out.push(line),
        other => panic!("expected the next line whole, got {other:?}"),
    }
    assert_eq!(lines.next_piece_peeking().await.unwrap(), None);
    finish(out, writing).await;

    let mut expected = b"before\n".to_vec();
    expected.extend_from_slice(&long);
    expected.extend_from_slice(b"\nafter\n");
    let got = reading.join().unwrap();
    assert_eq!(got.len(), expected.len());
    assert!(
        got == expected,
        "the host got every line whole and in order"
    );
}

#[tokio::test]
async fn a_streamed_line_moves_by_splice_into_a_socket_as_into_a_pipe() {
    let long = long_line(4 * STREAM_AT + 5);
    let (mut lines, writing) = server_line(&long, b"");
    // Some hosts give their servers a socket for stdio.
    let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let reading = std::thread::spawn(move || {
        let mut got = Vec::new();
        theirs.read_to_end(&mut got).unwrap();
        got
    });
    ours.set_nonblocking(true).unwrap();
    let socket = tokio::net::UnixStream::from_std(ours).unwrap();
    let mut out = Outbound::new(Stdio::Socket(socket));
    assert!(out.splices(), "a socket takes bytes by splice");

    let seen = relay_streamed(&mut lines, &mut out, true).await;
    assert_eq!(seen, long);
    assert!(out.splices(), "the socket took every piece by splice");
    finish(out, writing).await;
    let mut expected = long;
    expected.push(b'\n');
    assert!(reading.join().unwrap() == expected);
}

#[tokio::test]
async fn a_line_pushed_while_a_spliced_line_is_open_follows_it() {
    let long = long_line(3 * STREAM_AT);
    let (mut lines, writing) = server_line(&long, b"");
    let (mut out, reading) = host_pipe();

    let seen = start_streamed(&mut lines, &mut out, true).await;
    // The relay answers the host while the server's line is still coming: held until it ends.
    out.push(b"held".to_vec());
    // The loop ends the host's line after its last piece: a spliced end already holds the
    // newline, so no second one follows.
    let seen = relay_rest(&mut lines, &mut out, true, seen).await;
    assert_eq!(seen, long);
    finish(out, writing).await;

    let mut expected = long;
    expected.extend_from_slice(b"\nheld\n");
    assert!(reading.join().unwrap() == expected);
}

#[tokio::test]
async fn a_peeked_piece_nobody_queues_is_dropped_from_the_pipe_before_the_next_read() {
    let long = long_line(4 * STREAM_AT);
    let (mut lines, writing) = server_line(&long, b"next\n");

    assert_eq!(lines.next_piece_peeking().await.unwrap(), Some(Piece::Long));
    let mut seen = lines.stream();
    lines.peek_pieces();
    // Each piece is only looked at, as a retiring server's pieces are: the next read must not
    // see its bytes again.
    let (rest, peeked) = rest_of_line(&mut lines).await;
    assert!(peeked > 0);
    seen.extend_from_slice(&rest);
    whole_then_next(&mut lines, &seen, &long).await;
    writing.join().unwrap();
}

#[tokio::test]
async fn pieces_go_as_copies_when_the_host_side_cannot_splice() {
    let long = long_line(3 * STREAM_AT + 7);
    let (mut lines, writing) = server_line(&long, b"");
    let (reader, writer) = tokio::io::duplex(1 << 20);
    let mut out = Outbound::new(writer);
    assert!(!out.splices(), "an in-memory stream takes no splice");

    let seen = relay_streamed(&mut lines, &mut out, false).await;
    assert_eq!(seen, long);
    let reading = tokio::spawn(first_line(reader));
    finish(out, writing).await;
    assert_eq!(reading.await.unwrap(), Some(Line::Complete(long)));
}

/// A side that says it takes `splice` and then refuses it, as a file system without it would.
struct Refusing(tokio::io::DuplexStream);

impl Descriptor for Refusing {
    fn descriptor(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    fn splices(&self) -> bool {
        true
    }
}

impl AsyncWrite for Refusing {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn a_side_that_refuses_splice_gets_the_piece_read_out_of_the_pipe_and_no_more_pieces_so() {
    let long = long_line(3 * STREAM_AT + 11);
    let (mut lines, writing) = server_line(&long, b"next\n");
    let (reader, writer) = tokio::io::duplex(1 << 20);
    let mut out = Outbound::new(Refusing(writer));

    assert_eq!(lines.next_piece_peeking().await.unwrap(), Some(Piece::Long));
    out.push_part(lines.stream());
    lines.peek_pieces();
    let Some(Piece::Part(_)) = lines.next_piece_peeking().await.unwrap() else {
        panic!("expected a piece");
    };
    out.push_spliced(lines.peeked().expect("peeked"), false);
    // The refused piece was read out of the pipe into the queue, whole.
    assert!(!out.holds_pipe());
    assert!(!out.splices(), "no later piece is queued in a pipe");
    loop {
        match lines.next_piece_peeking().await.unwrap() {
            Some(Piece::Part(bytes)) => {
                lines.stop_peeking().unwrap();
                out.push_part(bytes);
            }
            Some(Piece::End(bytes)) => {
                lines.stop_peeking().unwrap();
                out.end_line(bytes);
                break;
            }
            other => panic!("expected a piece, got {other:?}"),
        }
    }
    assert_eq!(
        lines.next_piece_peeking().await.unwrap(),
        Some(Piece::Line(Line::Complete(b"next".to_vec())))
    );
    let reading = tokio::spawn(first_line(reader));
    finish(out, writing).await;
    assert_eq!(reading.await.unwrap(), Some(Line::Complete(long)));
}

#[tokio::test]
async fn the_pipe_is_not_read_while_a_queue_still_holds_its_piece() {
    let long = long_line(4 * STREAM_AT);
    let (mut lines, writing) = server_line(&long, b"next\n");
    // A host that reads nothing: its pipe fills with the line's first piece.
    let (host_end, writer) = std::io::pipe().unwrap();
    let sender = pipe::Sender::from_owned_fd(OwnedFd::from(writer)).unwrap();
    let mut out = Outbound::new(Stdio::PipeOut(sender));

    assert_eq!(lines.next_piece_peeking().await.unwrap(), Some(Piece::Long));
    out.push_part(lines.stream());
    lines.peek_pieces();
    let Some(Piece::Part(_)) = lines.next_piece_peeking().await.unwrap() else {
        panic!("expected a piece");
    };
    out.push_spliced(lines.peeked().expect("peeked"), false);
    assert!(out.holds_pipe(), "the host has no room for the piece");
    let refused = lines.next_piece_peeking().await.unwrap_err();
    assert!(
        refused.to_string().contains("still owed to the host"),
        "{refused}"
    );
    drop((lines, out, host_end));
    writing.join().unwrap();
}

#[tokio::test]
async fn a_piece_queued_for_a_host_that_left_is_dropped_and_reading_goes_on() {
    let long = long_line(4 * STREAM_AT);
    let (mut lines, writing) = server_line(&long, b"next\n");
    // A host that reads nothing, then leaves: its pipe fills with the line's first piece.
    let (host_end, writer) = std::io::pipe().unwrap();
    let sender = pipe::Sender::from_owned_fd(OwnedFd::from(writer)).unwrap();
    let mut out = Outbound::new(Stdio::PipeOut(sender));

    assert_eq!(lines.next_piece_peeking().await.unwrap(), Some(Piece::Long));
    let mut seen = lines.stream();
    out.push_part(seen.clone());
    lines.peek_pieces();
    let Some(Piece::Part(bytes)) = lines.next_piece_peeking().await.unwrap() else {
        panic!("expected a piece");
    };
    seen.extend_from_slice(&bytes);
    out.push_spliced(lines.peeked().expect("peeked"), false);
    assert!(out.holds_pipe());
    drop(host_end);
    out.drain().await;
    assert!(!out.holds_pipe(), "a broken side holds nothing");
    assert!(!out.splices());
    // Reading goes on: the piece the queue let go of leaves the pipe before the next read.
    seen.extend_from_slice(&rest_of_line(&mut lines).await.0);
    whole_then_next(&mut lines, &seen, &long).await;
    writing.join().unwrap();
}

#[tokio::test]
async fn a_stream_that_cannot_be_teed_is_read_as_before() {
    let long = long_line(3 * STREAM_AT + 3);
    let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut input = long.clone();
    input.extend_from_slice(b"\nnext\n");
    let writing = std::thread::spawn(move || {
        let _ = theirs.write_all(&input);
    });
    ours.set_nonblocking(true).unwrap();
    let socket = tokio::net::UnixStream::from_std(ours).unwrap();
    // A socket has a descriptor to peek with, but `tee` takes only pipes.
    let mut lines = PieceReader::new(Stdio::Socket(socket));

    assert_eq!(lines.next_piece_peeking().await.unwrap(), Some(Piece::Long));
    let mut seen = lines.stream();
    lines.peek_pieces();
    let (rest, peeked) = rest_of_line(&mut lines).await;
    assert_eq!(peeked, 0, "every piece read, none peeked at");
    seen.extend_from_slice(&rest);
    whole_then_next(&mut lines, &seen, &long).await;
    writing.join().unwrap();
}
