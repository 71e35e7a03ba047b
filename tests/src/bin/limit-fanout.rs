//! `limit-fanout SOCKET N`: the limit for rootsd's fan-out in the benchmark.
//!
//! It binds a Unix socket at SOCKET, prints `ready`, accepts one control connection and then N
//! listeners, and prints `accepted`. From then on, for every line the control connection sends,
//! it answers `ok` and writes that same line to each listener in turn, with one blocking write
//! each. That is the I/O rootsd does for a change (a request in, an acknowledgement out, one line
//! to each session) and nothing else: no JSON, no store, no tasks, no locks.
//!
//! With N = 0 it is also the benchmark's limit for a daemon's cold start: the cheapest process
//! that binds a socket and answers a line on it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [socket, count] = args.as_slice() else {
        eprintln!("usage: limit-fanout SOCKET N");
        std::process::exit(2);
    };
    let count: usize = count.parse().expect("N must be a number");
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
        ack.write_all(b"ok\n").expect("acknowledge");
        for listener in &mut listeners {
            listener.write_all(&line).expect("write to a listener");
        }
    }
}
