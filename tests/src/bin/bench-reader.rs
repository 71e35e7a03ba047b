//! `bench-reader`: the benchmark's fan-out reader. It holds N connections that each receive one
//! line per change and times how long after the change's acknowledgement every one of them has
//! read its line. The same code reads rootsd's sessions and `limit-fanout`'s listeners, so the
//! two figures differ only in the server.
//!
//! ```text
//! bench-reader rootsd SOCKET WORKSPACE N   # N sessions registered in WORKSPACE
//! bench-reader limit SOCKET N              # N plain connections to limit-fanout
//! ```
//!
//! It prints `ready` once every connection is set up (for rootsd: greeted and registered). Then,
//! for each line on stdin it writes TRIGGER on its control connection, reads the
//! acknowledgement and one line on each of the N connections, and prints `NANOSECONDS LINE`
//! (the line the first connection read):
//!
//! - `round TRIGGER`: the time from the acknowledgement to the last line read, reading whichever
//!   connection has data (epoll), so that the order in which a server writes does not matter.
//! - `whole TRIGGER`: the time from just before TRIGGER is written until the acknowledgement and
//!   every connection's line are read, by the cheapest reader there is: one thread doing
//!   blocking reads, the acknowledgement first, then each connection in the order it connected.
//!
//! It runs in its own process so that it has a descriptor limit of its own, and so the benchmark
//! can hold rootsd's readers and the limit's side by side.

use std::io::{BufRead, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use std::os::fd::OwnedFd;

use anyhow::{Context, Result, bail, ensure};
use rootsd_tests::bench_wire;
use rustix::buffer::spare_capacity;
use rustix::event::epoll;

/// Longest line a reader accepts; pushes of a few roots are a few hundred bytes.
const MAX_LINE: usize = 1 << 16;
/// How long any one read may wait before the run is declared broken.
const PATIENCE: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Server {
    Rootsd,
    Limit,
}

fn main() {
    if let Err(err) = run() {
        eprintln!("bench-reader: {err:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (server, socket, workspace, count) = match args.as_slice() {
        [kind, socket, workspace, n] if kind == "rootsd" => {
            (Server::Rootsd, socket, workspace.as_str(), n)
        }
        [kind, socket, n] if kind == "limit" => (Server::Limit, socket, "", n),
        _ => bail!("usage: bench-reader rootsd SOCKET WORKSPACE N | bench-reader limit SOCKET N"),
    };
    let count: usize = count.parse().context("N must be a number")?;
    let mut buf = vec![0u8; MAX_LINE];
    let mut control = connect(socket)?;
    if server == Server::Rootsd {
        send(&mut control, &bench_wire::hello(0))?;
        let hello = read_line(&mut control, &mut buf)?;
        ensure!(
            bench_wire::is_success(hello),
            "rootsd refused hello: {hello}"
        );
    }
    let mut sessions = Vec::with_capacity(count);
    for _ in 0..count {
        sessions.push(connect(socket)?);
    }
    if server == Server::Rootsd {
        register(&mut sessions, workspace, &mut buf)?;
    }
    let mut ready = Readiness::new(&sessions)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;

    let mut first = Vec::new();
    for command in std::io::stdin().lock().lines() {
        let command = command?;
        let (whole, trigger) = if let Some(trigger) = command.strip_prefix("round ") {
            (false, trigger)
        } else if let Some(trigger) = command.strip_prefix("whole ") {
            (true, trigger)
        } else {
            bail!("unknown command {command:?}");
        };
        let requested = Instant::now();
        send(&mut control, trigger)?;
        let ack = read_line(&mut control, &mut buf)?;
        match server {
            Server::Rootsd => ensure!(bench_wire::is_success(ack), "the change failed: {ack}"),
            Server::Limit => ensure!(ack == "ok", "limit-fanout answered {ack:?}"),
        }
        let elapsed = if whole {
            read_in_order(&sessions, &mut buf, &mut first)?;
            requested.elapsed()
        } else {
            let start = Instant::now();
            ready.read_round(&sessions, &mut buf, &mut first)?;
            start.elapsed()
        };
        if server == Server::Rootsd {
            ensure!(
                first.starts_with(bench_wire::PUSH_PREFIX.as_bytes()),
                "a session received {:?}, not roots.changed",
                String::from_utf8_lossy(&first)
            );
        }
        writeln!(
            out,
            "{} {}",
            elapsed.as_nanos(),
            String::from_utf8_lossy(&first)
        )?;
        out.flush()?;
    }
    Ok(())
}

/// Waits on all N connections at once and reads whichever has data, so that the order in which
/// a server writes its connections does not matter to the time it is given.
struct Readiness {
    epoll: OwnedFd,
    events: Vec<epoll::Event>,
    /// Bytes of the current round's line read so far, per connection.
    got: Vec<usize>,
    /// Whether the connection has read its whole line this round.
    complete: Vec<bool>,
}

impl Readiness {
    fn new(sessions: &[UnixStream]) -> Result<Self> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).context("epoll_create")?;
        for (i, session) in sessions.iter().enumerate() {
            epoll::add(
                &epoll,
                session,
                epoll::EventData::new_u64(i as u64),
                epoll::EventFlags::IN,
            )
            .context("epoll_ctl")?;
        }
        Ok(Self {
            epoll,
            events: Vec::with_capacity(1024),
            got: vec![0; sessions.len()],
            complete: vec![false; sessions.len()],
        })
    }

    /// Reads one line on every connection; `first` gets the first complete one, and every
    /// other must have its length.
    fn read_round(
        &mut self,
        sessions: &[UnixStream],
        buf: &mut [u8],
        first: &mut Vec<u8>,
    ) -> Result<()> {
        self.got.iter_mut().for_each(|g| *g = 0);
        self.complete.iter_mut().for_each(|c| *c = false);
        first.clear();
        let mut done = 0;
        let started = Instant::now();
        let second = rustix::event::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        while done < sessions.len() {
            self.events.clear();
            epoll::wait(&self.epoll, spare_capacity(&mut self.events), Some(&second))
                .context("epoll_wait")?;
            ensure!(
                !self.events.is_empty() || started.elapsed() < PATIENCE,
                "{} of {} connections had no line after {PATIENCE:?}",
                sessions.len() - done,
                sessions.len()
            );
            for event in &self.events {
                let i = event.data.u64() as usize;
                let n = (&sessions[i]).read(buf).context("read a line")?;
                ensure!(n > 0, "the server closed connection {i}");
                ensure!(
                    !self.complete[i],
                    "connection {i} received more than one line"
                );
                self.got[i] += n;
                if buf[n - 1] != b'\n' {
                    continue;
                }
                self.complete[i] = true;
                done += 1;
                let len = self.got[i] - 1;
                if first.is_empty() {
                    ensure!(
                        n == self.got[i],
                        "the first complete line arrived in pieces"
                    );
                    first.extend_from_slice(&buf[..len]);
                } else {
                    ensure!(
                        len == first.len(),
                        "connection {i} read a line of {len} bytes, another one of {}",
                        first.len()
                    );
                }
            }
        }
        Ok(())
    }
}

/// Reads one line on every connection with blocking reads, in order: no readiness, no wake-up
/// but the kernel's own when a connection that has nothing yet receives its line. `first` gets
/// the first connection's line, and every other must have its length.
fn read_in_order(sessions: &[UnixStream], buf: &mut [u8], first: &mut Vec<u8>) -> Result<()> {
    first.clear();
    for (i, mut session) in sessions.iter().enumerate() {
        let mut got = 0;
        loop {
            let n = session.read(buf).context("read a line")?;
            ensure!(n > 0, "the server closed connection {i}");
            if i == 0 {
                first.extend_from_slice(&buf[..n]);
            }
            got += n;
            if buf[n - 1] == b'\n' {
                break;
            }
        }
        if i == 0 {
            first.pop();
        } else {
            ensure!(
                got - 1 == first.len(),
                "connection {i} read a line of {} bytes, another one of {}",
                got - 1,
                first.len()
            );
        }
    }
    Ok(())
}

fn connect(socket: &str) -> Result<UnixStream> {
    let stream = UnixStream::connect(socket).with_context(|| format!("connect to {socket}"))?;
    stream.set_read_timeout(Some(PATIENCE))?;
    Ok(stream)
}

/// Greets and registers every session, pipelined: all requests go out before any answer is
/// read, so that thousands of registrations take one pass instead of thousands of round trips.
fn register(sessions: &mut [UnixStream], workspace: &str, buf: &mut [u8]) -> Result<()> {
    let pid = std::process::id();
    for (i, session) in sessions.iter_mut().enumerate() {
        let lines = format!(
            "{}\n{}\n",
            bench_wire::hello(1),
            bench_wire::register(2, workspace, &format!("bench-{i}"), pid)
        );
        session.write_all(lines.as_bytes())?;
    }
    for session in sessions.iter_mut() {
        // Both answers may arrive in one read or in two; nothing else is sent before a change.
        let mut seen = 0;
        let mut text = String::new();
        while seen < 2 {
            let n = session.read(buf).context("read a registration answer")?;
            ensure!(n > 0, "rootsd closed a connection during registration");
            seen += buf[..n].iter().filter(|&&b| b == b'\n').count();
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        ensure!(
            text.lines().all(bench_wire::is_success),
            "registration failed: {text}"
        );
    }
    Ok(())
}

fn send(stream: &mut UnixStream, line: &str) -> Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    stream.write_all(&bytes).context("write a line")
}

/// Reads exactly one line (the connection receives nothing else until the next round) and
/// returns it without its newline.
fn read_line<'b>(stream: &mut UnixStream, buf: &'b mut [u8]) -> Result<&'b str> {
    let mut len = 0;
    loop {
        ensure!(len < buf.len(), "a line longer than {MAX_LINE} bytes");
        let n = stream.read(&mut buf[len..]).context("read a line")?;
        ensure!(n > 0, "the server closed a connection");
        len += n;
        if buf[len - 1] == b'\n' {
            break;
        }
    }
    std::str::from_utf8(&buf[..len - 1]).context("a line that is not UTF-8")
}
