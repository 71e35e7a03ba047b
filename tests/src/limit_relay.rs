//! The loop of the benchmark's programs in the proxy's place (`limit-relay`,
//! `limit-roots-proxy`): a spawned server's pipes on one side, this process's stdio (the host) on
//! the other, one `poll()` loop and a 64 KiB buffer. What the host writes goes to the server as it
//! comes; what the server writes is handed to the program, which decides where it goes. Nothing
//! else: no lines, no runtime, no daemon. Whatever the proxy costs beyond such a program is the
//! proxy's own work.

use std::io::Write as _;
use std::os::fd::AsFd;
use std::process::{ChildStdin, Command, Stdio};

use rustix::event::{PollFd, PollFlags, poll};

/// Where a program sends what the server wrote.
pub struct Sides {
    /// `None` once the host has closed its side, which closes the server's stdin, as MCP's stdio
    /// shutdown asks.
    to_server: Option<ChildStdin>,
    stdout: std::io::Stdout,
}

impl Sides {
    pub fn to_host(&self, bytes: &[u8]) {
        write_all(&self.stdout.as_fd(), bytes);
    }

    pub fn to_server(&self, bytes: &[u8]) {
        if let Some(server) = &self.to_server {
            write_all(&server.as_fd(), bytes);
        }
    }
}

/// Runs the command the arguments after `skip` name and relays between it and the host, handing
/// each read of the server's stdout to `from_server`, until the server closes it; then exits
/// with the server's status. `name` is the program's and `synopsis` its arguments', for its
/// messages: without a command it prints its usage and exits 2.
pub fn run(
    name: &str,
    synopsis: &str,
    skip: usize,
    mut from_server: impl FnMut(&[u8], &Sides),
) -> ! {
    let mut args = std::env::args_os().skip(1 + skip);
    let Some(program) = args.next() else {
        eprintln!("usage: {name} {synopsis}");
        std::process::exit(2);
    };
    let mut child = Command::new(&program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{name}: cannot start {program:?}: {e}"));
    let from = child.stdout.take().expect("piped stdout");
    let mut sides = Sides {
        to_server: child.stdin.take(),
        stdout: std::io::stdout(),
    };
    let stdin = std::io::stdin();
    let mut buf = vec![0u8; 1 << 16];
    let mut host_open = true;
    loop {
        let mut fds = [
            PollFd::new(&from, PollFlags::IN),
            PollFd::new(&stdin, PollFlags::IN),
        ];
        // Once the host has closed its side, only the server is watched: a closed stdin would
        // otherwise report itself forever.
        let watched = if host_open { 2 } else { 1 };
        poll(&mut fds[..watched], None).expect("poll");
        let server_ready = !fds[0].revents().is_empty();
        let host_ready = host_open && !fds[1].revents().is_empty();
        if server_ready {
            match rustix::io::read(&from, &mut buf[..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => from_server(&buf[..n], &sides),
            }
        }
        if host_ready {
            match rustix::io::read(&stdin, &mut buf[..]) {
                Ok(0) | Err(_) => {
                    // Keep relaying what the server still says.
                    host_open = false;
                    sides.to_server = None;
                }
                Ok(n) => sides.to_server(&buf[..n]),
            }
        }
    }
    let _ = sides.stdout.flush();
    let status = child.wait().expect("wait for the server");
    std::process::exit(status.code().unwrap_or(1));
}

fn write_all(fd: &impl AsFd, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => panic!("write failed: {e}"),
        }
    }
}
