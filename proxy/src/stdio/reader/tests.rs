//! The reader's lines and pieces, however the bytes arrive, and its reads of a pipe's
//! descriptor past the runtime.

use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::AsyncRead;

use super::*;

async fn lines_of(input: Vec<u8>) -> Vec<Line> {
    let mut reader = PieceReader::new(&input[..]);
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
    let mut reader = PieceReader::new(&input[..]);
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
pub(in crate::stdio) struct Chunked {
    pub data: Vec<u8>,
    pub sizes: Vec<usize>,
    pub read: usize,
    pub next: usize,
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
            let mut reader = PieceReader::new(stream);
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
    let mut reader = PieceReader::new(stream);
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
    let mut reader = PieceReader::new(&input[..]);
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
async fn lines_read_from_a_pipe_directly_and_through_the_runtime_come_whole_in_order() {
    use std::io::Write as _;
    let (reader, mut writer) = std::io::pipe().unwrap();
    let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader)).unwrap();
    let mut lines = PieceReader::new(receiver);
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
