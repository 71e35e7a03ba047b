//! `limit-relay COMMAND ARGS…`: the limit for `rootsctl proxy`'s relay in the benchmark.
//!
//! It sits exactly where the proxy sits (the host's stdio on one side, a spawned server's pipes
//! on the other) and does nothing but copy bytes both ways in one poll() loop: no parsing, no
//! lines, no runtime, no daemon. Whatever the proxy costs beyond this program is the proxy's own
//! work. It must stay that small: a cleverer relay here would flatter nobody and mislead everyone.

use std::io::Write as _;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use rustix::event::{PollFd, PollFlags, poll};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: limit-relay COMMAND [ARGS...]");
        std::process::exit(2);
    };
    let mut child = Command::new(&program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("limit-relay: cannot start {program:?}: {e}"));
    let mut to_server = child.stdin.take();
    let from_server = child.stdout.take().expect("piped stdout");
    let (stdin, mut stdout) = (std::io::stdin(), std::io::stdout());
    let mut buf = vec![0u8; 1 << 16];
    let mut host_open = true;
    loop {
        let mut fds = [
            PollFd::new(&from_server, PollFlags::IN),
            PollFd::new(&stdin, PollFlags::IN),
        ];
        // Once the host has closed its side, only the server is watched: a closed stdin would
        // otherwise report itself forever.
        let watched = if host_open { 2 } else { 1 };
        poll(&mut fds[..watched], None).expect("poll");
        let server_ready = !fds[0].revents().is_empty();
        let host_ready = host_open && !fds[1].revents().is_empty();
        if server_ready {
            match rustix::io::read(&from_server, &mut buf[..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => write_all(&stdout.as_fd(), &buf[..n]),
            }
        }
        if host_ready {
            match rustix::io::read(&stdin, &mut buf[..]) {
                Ok(0) | Err(_) => {
                    // The host closed its side: close the server's stdin, as MCP's stdio
                    // shutdown asks, and keep relaying what the server still says.
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

fn write_all(fd: &impl AsFd, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => panic!("limit-relay: write failed: {e}"),
        }
    }
}
