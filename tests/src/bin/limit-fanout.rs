//! `limit-fanout SOCKET N [SYNC_FILE RECORD_BYTES]`: the limit for rootsd's fan-out in the
//! benchmark.
//!
//! It binds a Unix socket at SOCKET, prints `ready`, accepts one control connection and then N
//! listeners, and prints `accepted`. From then on, for every line the control connection sends,
//! it answers `ok` and writes that same line to each listener in turn, with one blocking write
//! each. That is the I/O rootsd does for a change (a request in, an acknowledgement out, one line
//! to each session) and nothing else: no JSON, no store, no tasks, no locks.
//!
//! With SYNC_FILE, it also does what makes rootsd's acknowledgement durable before it answers:
//! one blocking `write` of RECORD_BYTES (the size of the journal record rootsd appended for the
//! same change, measured by the benchmark) to SYNC_FILE, and `fdatasync`. That makes it the limit
//! for the whole path, from the request written until every listener has read the change.
//!
//! With N = 0 it is also the benchmark's limit for a daemon's cold start: the cheapest process
//! that binds a socket and answers a line on it.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (socket, count, sync) = match args.as_slice() {
        [socket, count] => (socket, count, None),
        [socket, count, file, bytes] => (socket, count, Some((file, bytes))),
        _ => {
            eprintln!("usage: limit-fanout SOCKET N [SYNC_FILE RECORD_BYTES]");
            std::process::exit(2);
        }
    };
    let count: usize = count.parse().expect("N must be a number");
    let mut journal = sync.map(|(file, bytes)| {
        let bytes: usize = bytes.parse().expect("RECORD_BYTES must be a number");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .unwrap_or_else(|e| panic!("limit-fanout: cannot open {file}: {e}"));
        (file, vec![b'r'; bytes])
    });
    let listener = UnixListener::bind(socket)
        .unwrap_or_else(|e| panic!("limit-fanout: cannot bind {socket}: {e}"));
    let mut out = std::io::stdout();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    let (control, _) = listener.accept().expect("accept the control connection");
    let mut listeners = Vec::with_capacity(count);
    for _ in 0..count {
        listeners.push(listener.accept().expect("accept a listener").0);
    }
    let _ = writeln!(out, "accepted");
    let _ = out.flush();
    let mut ack = control.try_clone().expect("clone the control connection");
    let mut lines = BufReader::new(control);
    let mut line = Vec::new();
    loop {
        line.clear();
        match lines.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if let Some((file, record)) = &mut journal {
            record_durably(file, record);
        }
        ack.write_all(b"ok\n").expect("acknowledge");
        for listener in &mut listeners {
            listener.write_all(&line).expect("write to a listener");
        }
    }
}

/// One append and one flush to stable storage: the least a durable acknowledgement costs.
fn record_durably(file: &mut File, record: &[u8]) {
    file.write_all(record).expect("append the record");
    file.sync_data().expect("fdatasync the record");
}
