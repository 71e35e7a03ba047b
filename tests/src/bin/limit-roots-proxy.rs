//! `limit-roots-proxy RESULT COMMAND ARGS…`: the cheapest process in `rootsctl proxy`'s place
//! for the benchmark's `roots/list` rows, measured beside the row's limit (a host thread
//! answering from memory) as a reference.
//!
//! It sits where the proxy sits (the host's stdio on one side, a spawned server's pipes on the
//! other), answers the server's `roots/list` itself with `RESULT` (the bytes the proxy answers
//! with), and copies everything else: one `poll()` loop, a byte search for the method and the
//! id, no parsing, no runtime, no daemon. It shows what any process between a server and its
//! host costs against a thread of the host itself: a proxy process cannot do less per request.
//! It knows only the form `bench-server` writes (`{"jsonrpc":"2.0","id":N,"method":…}`), and
//! must stay this small.

use std::io::Write as _;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use rustix::event::{PollFd, PollFlags, poll};

/// How a request for roots starts, as `bench-server` writes it, up to its id.
const REQUEST_START: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
const ROOTS_LIST: &[u8] = br#","method":"roots/list""#;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let (Some(result), Some(program)) = (args.next(), args.next()) else {
        eprintln!("usage: limit-roots-proxy RESULT COMMAND [ARGS...]");
        std::process::exit(2);
    };
    let result = result.into_encoded_bytes();
    let mut child = Command::new(&program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("limit-roots-proxy: cannot start {program:?}: {e}"));
    let mut to_server = child.stdin.take();
    let from_server = child.stdout.take().expect("piped stdout");
    let (stdin, mut stdout) = (std::io::stdin(), std::io::stdout());
    let mut buf = vec![0u8; 1 << 16];
    // The server's bytes not yet ended by a newline.
    let mut pending: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut answer: Vec<u8> = Vec::with_capacity(result.len() + 64);
    let mut host_open = true;
    loop {
        let mut fds = [
            PollFd::new(&from_server, PollFlags::IN),
            PollFd::new(&stdin, PollFlags::IN),
        ];
        let watched = if host_open { 2 } else { 1 };
        poll(&mut fds[..watched], None).expect("poll");
        let server_ready = !fds[0].revents().is_empty();
        let host_ready = host_open && !fds[1].revents().is_empty();
        if server_ready {
            match rustix::io::read(&from_server, &mut buf[..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
            }
            let mut start = 0;
            while let Some(end) = pending[start..].iter().position(|&b| b == b'\n') {
                let line = &pending[start..start + end + 1];
                match roots_request_id(line) {
                    Some(id) => {
                        answer.clear();
                        answer.extend_from_slice(REQUEST_START);
                        answer.extend_from_slice(id);
                        answer.extend_from_slice(br#","result":"#);
                        answer.extend_from_slice(&result);
                        answer.extend_from_slice(b"}\n");
                        if let Some(server) = &to_server {
                            write_all(&server.as_fd(), &answer);
                        }
                    }
                    None => write_all(&stdout.as_fd(), line),
                }
                start += end + 1;
            }
            pending.drain(..start);
        }
        if host_ready {
            match rustix::io::read(&stdin, &mut buf[..]) {
                Ok(0) | Err(_) => {
                    host_open = false;
                    to_server = None;
                }
                Ok(n) => {
                    if let Some(server) = &to_server {
                        write_all(&server.as_fd(), &buf[..n]);
                    }
                }
            }
        }
    }
    let _ = stdout.flush();
    let status = child.wait().expect("wait for the server");
    std::process::exit(status.code().unwrap_or(1));
}

/// The id of a `roots/list` request in `bench-server`'s form.
fn roots_request_id(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(REQUEST_START)?;
    let end = rest.iter().position(|&b| b == b',')?;
    rest[end..].starts_with(ROOTS_LIST).then(|| &rest[..end])
}

fn write_all(fd: &impl AsFd, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => panic!("limit-roots-proxy: write failed: {e}"),
        }
    }
}
