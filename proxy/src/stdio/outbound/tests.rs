//! The queue: lines whole and in order whether written directly or through the runtime, lines
//! held behind one written in pieces, its high-water mark, and the buffers it hands back.

use super::*;
use crate::stdio::reader::tests::Chunked;
use crate::stdio::reader::{SPARES_KEPT, STREAM_BUFFER};
use crate::stdio::{Line, Piece, PieceReader, Stdio};

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
        let mut reader = PieceReader::new(reader);
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
    let mut reader = PieceReader::new(stream);
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
        let mut reader = PieceReader::new(receiver);
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
        let mut reader = PieceReader::new(reader);
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
