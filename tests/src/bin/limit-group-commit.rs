//! `limit-group-commit SOCKET FILE RECORD_BYTES ANSWER_BYTES`: the cheapest program doing a group
//! commit's I/O, measured beside rootsd's 50 concurrent `roots.add` in the benchmark as a
//! reference.
//!
//! It binds a Unix socket at SOCKET, prints `ready`, and serves any number of connections in one
//! `poll()` loop. Each line a connection sends is a change: RECORD_BYTES (what rootsd's journal
//! grows by for the same change) go into the group. Once a `poll()` that does not wait finds
//! nothing more to read, the group is written to FILE with one `write` and one `fdatasync`, and
//! every line is answered with ANSWER_BYTES (rootsd's answer to the same request, a JSON-RPC
//! success), in the order the lines came. That is the I/O a durable group commit cannot avoid:
//! no parsing, no store, no tasks, no threads. A connection's lines are only counted, so a line
//! longer than its buffer is simply the next read's.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};

use rustix::event::{PollFd, PollFlags, Timespec, poll};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [socket, file, record, answer] = args.as_slice() else {
        eprintln!("usage: limit-group-commit SOCKET FILE RECORD_BYTES ANSWER_BYTES");
        std::process::exit(2);
    };
    let record = vec![b'r'; record.parse().expect("RECORD_BYTES must be a number")];
    let answer = success_line(answer.parse().expect("ANSWER_BYTES must be a number"));
    let mut journal = OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .unwrap_or_else(|e| panic!("limit-group-commit: cannot open {file}: {e}"));
    let listener = UnixListener::bind(socket)
        .unwrap_or_else(|e| panic!("limit-group-commit: cannot bind {socket}: {e}"));
    // Accepted until none is left waiting; the connections themselves block, each read
    // following a poll that found it readable.
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    println!("ready");
    let _ = std::io::stdout().flush();

    // A connection that closed keeps its slot (the group's lines name connections by slot) and
    // is no longer watched.
    let mut connections: Vec<Option<UnixStream>> = Vec::new();
    let mut group: Vec<u8> = Vec::with_capacity(1 << 16);
    // The slot of each line's connection, in the order the lines came.
    let mut owed: Vec<usize> = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let at_once = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    loop {
        let open: Vec<usize> = (0..connections.len())
            .filter(|&slot| connections[slot].is_some())
            .collect();
        let mut fds = vec![PollFd::new(&listener, PollFlags::IN)];
        fds.extend(
            open.iter()
                .filter_map(|&slot| connections[slot].as_ref())
                .map(|stream| PollFd::new(stream, PollFlags::IN)),
        );
        let patience = (!owed.is_empty()).then_some(&at_once);
        let ready = poll(&mut fds, patience).expect("poll");
        let readable: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        drop(fds);
        if ready == 0 {
            // Nothing more to read: the group is complete.
            journal.write_all(&group).expect("write the group");
            journal.sync_data().expect("fdatasync the group");
            group.clear();
            for slot in owed.drain(..) {
                if let Some(mut stream) = connections[slot].as_ref() {
                    // A connection that stopped reading is not the limit's concern.
                    let _ = stream.write_all(&answer);
                }
            }
            continue;
        }
        if readable[0] {
            while let Ok((stream, _)) = listener.accept() {
                connections.push(Some(stream));
            }
        }
        for (&slot, _) in open.iter().zip(&readable[1..]).filter(|(_, r)| **r) {
            let Some(stream) = connections[slot].as_mut() else {
                continue;
            };
            match stream.read(&mut buf) {
                Ok(0) => connections[slot] = None,
                Ok(n) => {
                    for _ in buf[..n].iter().filter(|&&b| b == b'\n') {
                        group.extend_from_slice(&record);
                        owed.push(slot);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => connections[slot] = None,
            }
        }
    }
}

/// A JSON-RPC success line of `bytes` bytes, newline included (padded inside its result).
fn success_line(bytes: usize) -> Vec<u8> {
    let head = br#"{"jsonrpc":"2.0","id":0,"result":{"pad":""#;
    let tail = b"\"}}\n";
    let pad = bytes.saturating_sub(head.len() + tail.len());
    let mut line = Vec::with_capacity(bytes);
    line.extend_from_slice(head);
    line.resize(head.len() + pad, b'r');
    line.extend_from_slice(tail);
    line
}
