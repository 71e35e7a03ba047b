//! What one turn of the relay loop acts on, and the loop's own wait for its two pipes.
//!
//! A busy session is mostly one line in from one side and one line out to the other. Waiting for
//! each through the runtime cost a park, the reactor's dispatch and a `select!` over every source:
//! about a third of the proxy's instructions per relayed request. So in the steady state (a server
//! running, nothing queued either way, no line streamed) the loop waits for the host's stdin and
//! the server's stdout itself, with an epoll instance of its own, and reads whichever is ready
//! straight from its descriptor.
//!
//! Everything else still goes through the runtime: the daemon's news, signals, the server's exit,
//! writes that must wait, timers. The wait watches for each of them and hands the turn to the
//! runtime as soon as one may be due: the [`Bell`] (which the daemon's link, on a thread of its
//! own, and the signal handlers ring), the server's pidfd, and the earliest deadline.

use std::io::{self, Read as _, Write as _};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rustix::buffer::spare_capacity;
use rustix::event::Timespec;
use rustix::event::epoll::{self, EventData, EventFlags};
use tokio::io::AsyncRead;

use super::news::Item;
use super::stdio::{Line, LineReader, Piece, ReadDescriptor};

/// What a turn of the loop acts on.
pub(super) enum Turn {
    /// A line, or a piece of one, from the server; `None` when its stdout closed.
    Server(io::Result<Option<Piece>>),
    /// A line from the host; `None` when its stdin closed.
    Host(io::Result<Option<Line>>),
    /// A side took bytes that waited for it.
    Wrote,
    /// The daemon's news, a signal or the server's exit.
    News(Item),
    /// The earliest deadline passed.
    Timer,
}

/// How the loop's own wait ended.
pub(super) enum Wait {
    /// A pipe brought what the turn acts on.
    Turn(Turn),
    /// The runtime's turn is next: news may be waiting, the server exited, a deadline came, the
    /// wait cannot be used, or a readiness brought nothing yet.
    Runtime,
}

/// What tells the loop that the runtime has news for it: a flag, which the loop reads before it
/// waits by itself and clears before the runtime's turn that looks, and a socket pair, whose
/// read end wakes a wait already begun. The link sets and rings it after each list or
/// acknowledgement it hands over, the signal handlers on each signal.
///
/// The flag, not the socket, is what the loop trusts: one wake-up may bring several items, of
/// which a turn takes one, and a signal becomes news only once the runtime's driver has read its
/// pipe. So while the flag is set the loop takes the runtime's turns, and a turn that clears it
/// first lets the driver look (`yield_now`); a turn that took news is followed by another
/// through the runtime, which looks at news first, until one finds none.
pub(super) struct Bell {
    alert: Arc<AtomicBool>,
    heard: UnixStream,
    rung: UnixStream,
}

/// The end of a [`Bell`] that rings it, for another thread.
pub struct Ringer {
    alert: Arc<AtomicBool>,
    rung: UnixStream,
}

impl Ringer {
    pub fn ring(&self) {
        ring(&self.alert, &self.rung);
    }
}

/// Sets the flag, then writes the socket's byte: a wait the byte ends finds the flag set.
fn ring(alert: &AtomicBool, rung: &UnixStream) {
    alert.store(true, Ordering::Release);
    // The socket is non-blocking: a full one is a bell already ringing, and nothing else can
    // fail that matters here.
    let _ = (&*rung).write(b"!");
}

impl Bell {
    pub fn new() -> io::Result<Self> {
        let (heard, rung) = UnixStream::pair()?;
        heard.set_nonblocking(true)?;
        rung.set_nonblocking(true)?;
        Ok(Self {
            alert: Arc::new(AtomicBool::new(false)),
            heard,
            rung,
        })
    }

    pub fn ringer(&self) -> io::Result<Ringer> {
        Ok(Ringer {
            alert: self.alert.clone(),
            rung: self.rung.try_clone()?,
        })
    }

    /// Rings the bell on each of `signals`, besides whatever else handles them: the flag first,
    /// so that a wait the socket ends finds it set.
    pub fn ring_on(&self, signals: &[i32]) -> io::Result<()> {
        for &signal in signals {
            signal_hook::flag::register(signal, self.alert.clone())?;
            signal_hook::low_level::pipe::register(signal, self.rung.try_clone()?)?;
        }
        Ok(())
    }

    /// Rings it from the loop's own thread.
    pub fn ring(&self) {
        ring(&self.alert, &self.rung);
    }

    /// Empties the socket.
    fn silence(&self) {
        let mut sink = [0u8; 64];
        while matches!((&self.heard).read(&mut sink), Ok(n) if n > 0) {}
    }
}

/// The loop's own wait: an epoll instance of its own, apart from the runtime's, over the host's
/// stdin, the server's stdout and exit, and the bell. Level-triggered, and registered once per
/// descriptor rather than per wait, so a wait is one `epoll_wait` that sets nothing up, where a
/// `ppoll` adds and removes a wait-queue entry on each of the four descriptors every time. (A
/// first cut with `ppoll` over four, and the link's thread, measured about 2 µs more per relayed
/// request than one over the two pipes alone; the two were not measured apart.)
pub(super) struct Waiter {
    epoll: OwnedFd,
    bell: Bell,
    /// The host's stdin is registered (once: it never changes).
    host_watched: bool,
    /// The server whose stdout and exit are registered, by its number in the session
    /// (`Running::number`). A server's descriptors leave the instance by themselves when they
    /// close, so a new server's are simply added.
    server_watched: Option<u64>,
    /// Set when the instance failed: the runtime waits from then on.
    failed: bool,
    /// What one wait found, kept to wait into again.
    events: Vec<epoll::Event>,
}

const SERVER: u64 = 0;
const HOST: u64 = 1;
const BELL: u64 = 2;
const EXIT: u64 = 3;

impl Waiter {
    pub fn new(bell: Bell) -> io::Result<Self> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &epoll,
            &bell.heard,
            EventData::new_u64(BELL),
            EventFlags::IN,
        )?;
        Ok(Self {
            epoll,
            bell,
            host_watched: false,
            server_watched: None,
            failed: false,
            events: Vec::with_capacity(4),
        })
    }

    /// Waits until the server's stdout or the host's stdin is readable, or something the
    /// runtime handles may be due, and returns what the readable one brought, or why the
    /// runtime's turn is next.
    ///
    /// `server` is the stdout of the session's server `number`, and `exit` its pidfd.
    pub fn ready<H, S>(
        &mut self,
        host: &mut LineReader<H>,
        server: &mut LineReader<S>,
        number: u64,
        exit: BorrowedFd<'_>,
        deadline: Option<Instant>,
    ) -> Wait
    where
        H: AsyncRead + ReadDescriptor + Unpin,
        S: AsyncRead + ReadDescriptor + Unpin,
    {
        if self.failed || server.is_streaming() || self.bell.alert.load(Ordering::Acquire) {
            return Wait::Runtime;
        }
        // Lines already read (a read brings what the side wrote, often more than one line) come
        // first, the server's before the host's as in the runtime's turn.
        if let Some(piece) = server.buffered(true) {
            return Wait::Turn(Turn::Server(Ok(piece)));
        }
        if let Some(piece) = host.buffered(false) {
            return Wait::Turn(Turn::Host(Ok(piece.map(whole))));
        }
        let (Some(host_fd), Some(server_fd)) = (host.descriptor(), server.descriptor()) else {
            return Wait::Runtime;
        };
        let registered = self.watch(host_fd, server_fd, number, exit);
        if let Err(error) = registered {
            return self.give_up(error);
        }
        let timeout = deadline.map(|at| {
            let wait = at.saturating_duration_since(Instant::now());
            Timespec {
                tv_sec: wait.as_secs().try_into().unwrap_or(i64::MAX),
                tv_nsec: wait.subsec_nanos().into(),
            }
        });
        self.events.clear();
        match epoll::wait(
            &self.epoll,
            spare_capacity(&mut self.events),
            timeout.as_ref(),
        ) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Wait::Runtime,
            Err(error) => return self.give_up(error),
        }
        let events = &self.events;
        let ready = |which| events.iter().any(|event| event.data.u64() == which);
        if ready(BELL) {
            // Rung since the flag was read; or a ring whose flag a turn already took, which
            // costs this one turn through the runtime.
            self.bell.silence();
            return Wait::Runtime;
        }
        if ready(EXIT) {
            return Wait::Runtime;
        }
        if ready(SERVER) {
            match server.try_read(true) {
                Ok(Some(piece)) => return Wait::Turn(Turn::Server(Ok(piece))),
                Ok(None) => {}
                Err(error) => return Wait::Turn(Turn::Server(Err(error))),
            }
        }
        if ready(HOST) {
            match host.try_read(false) {
                Ok(Some(piece)) => return Wait::Turn(Turn::Host(Ok(piece.map(whole)))),
                Ok(None) => {}
                Err(error) => return Wait::Turn(Turn::Host(Err(error))),
            }
        }
        Wait::Runtime
    }

    /// Clears the bell's flag before the runtime's turn that looks at what rang it; whether it
    /// was set, and so whether the driver must look first.
    pub fn take_alert(&self) -> bool {
        let alerted = self.bell.alert.swap(false, Ordering::AcqRel);
        if alerted {
            self.bell.silence();
        }
        alerted
    }

    /// Registers the host's stdin once, and each new server's stdout and exit.
    fn watch(
        &mut self,
        host: BorrowedFd<'_>,
        server: BorrowedFd<'_>,
        number: u64,
        exit: BorrowedFd<'_>,
    ) -> rustix::io::Result<()> {
        if !self.host_watched {
            self.add(host, HOST)?;
            self.host_watched = true;
        }
        if self.server_watched != Some(number) {
            self.add(server, SERVER)?;
            self.add(exit, EXIT)?;
            self.server_watched = Some(number);
        }
        Ok(())
    }

    /// Registers `fd` as `which`, or registers it anew if the instance still holds it (a
    /// descriptor that another copy of it kept open).
    fn add(&self, fd: BorrowedFd<'_>, which: u64) -> rustix::io::Result<()> {
        let data = EventData::new_u64(which);
        match epoll::add(&self.epoll, fd, data, EventFlags::IN) {
            Err(rustix::io::Errno::EXIST) => epoll::modify(&self.epoll, fd, data, EventFlags::IN),
            done => done,
        }
    }

    fn give_up(&mut self, error: rustix::io::Errno) -> Wait {
        eprintln!(
            "rootsctl proxy: waiting for the pipes failed ({error}); relaying through the runtime from now on"
        );
        self.failed = true;
        Wait::Runtime
    }
}

/// The line of a piece read without offering to stream.
fn whole(piece: Piece) -> Line {
    match piece {
        Piece::Line(line) => line,
        // Only a read that offers streaming hands out anything else.
        Piece::Long | Piece::Part(_) | Piece::End(_) => unreachable!("not offered"),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::os::fd::AsFd as _;
    use std::time::Duration;

    use tokio::net::unix::pipe::Receiver;

    use super::*;

    /// A pipe whose read end is a line reader, as the proxy reads the server and the host.
    fn pipe() -> (std::io::PipeWriter, LineReader<Receiver>) {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        let receiver = Receiver::from_owned_fd(OwnedFd::from(reader)).expect("a non-blocking pipe");
        (writer, LineReader::new(receiver))
    }

    fn line(wait: Wait) -> (&'static str, Vec<u8>) {
        match wait {
            Wait::Turn(Turn::Server(Ok(Some(Piece::Line(Line::Complete(line)))))) => {
                ("server", line)
            }
            Wait::Turn(Turn::Host(Ok(Some(Line::Complete(line))))) => ("host", line),
            Wait::Turn(_) => panic!("a turn other than a line"),
            Wait::Runtime => panic!("no turn"),
        }
    }

    /// A readable descriptor that stands for an exited server's pidfd, and one that never is.
    fn exit_fd(exited: bool) -> (std::io::PipeReader, std::io::PipeWriter) {
        let (reader, mut writer) = std::io::pipe().expect("a pipe");
        if exited {
            writer.write_all(b"x").expect("write");
        }
        (reader, writer)
    }

    #[tokio::test]
    async fn lines_one_read_brought_are_handed_out_before_the_pipes_are_waited_for() {
        let (mut to_server, mut server) = pipe();
        let (_to_host, mut host) = pipe();
        let mut waiter = Waiter::new(Bell::new().unwrap()).unwrap();
        let (exit, _keep) = exit_fd(false);
        to_server.write_all(b"a\nb\n").unwrap();
        // A deadline already passed: the wait itself returns at once, so only lines already
        // read can come after the first.
        let now = Some(Instant::now());
        let exit = exit.as_fd();
        assert_eq!(
            line(waiter.ready(&mut host, &mut server, 1, exit, now)),
            ("server", b"a".to_vec())
        );
        assert_eq!(
            line(waiter.ready(&mut host, &mut server, 1, exit, now)),
            ("server", b"b".to_vec())
        );
        assert!(matches!(
            waiter.ready(&mut host, &mut server, 1, exit, now),
            Wait::Runtime
        ));
    }

    #[tokio::test]
    async fn the_server_goes_first_and_the_host_follows() {
        let (mut to_server, mut server) = pipe();
        let (mut to_host, mut host) = pipe();
        let mut waiter = Waiter::new(Bell::new().unwrap()).unwrap();
        let (exit, _keep) = exit_fd(false);
        let exit = exit.as_fd();
        to_host.write_all(b"from the host\n").unwrap();
        to_server.write_all(b"from the server\n").unwrap();
        let later = Some(Instant::now() + Duration::from_secs(10));
        let first = line(waiter.ready(&mut host, &mut server, 1, exit, later));
        let second = line(waiter.ready(&mut host, &mut server, 1, exit, later));
        assert_eq!(first, ("server", b"from the server".to_vec()));
        assert_eq!(second, ("host", b"from the host".to_vec()));
    }

    #[tokio::test]
    async fn a_line_in_pieces_is_read_whole_and_the_end_of_the_stream_is_told() {
        let (mut to_server, mut server) = pipe();
        let (_to_host, mut host) = pipe();
        let mut waiter = Waiter::new(Bell::new().unwrap()).unwrap();
        let (exit, _keep) = exit_fd(false);
        let exit = exit.as_fd();
        let later = Some(Instant::now() + Duration::from_secs(10));
        to_server.write_all(b"{\"half\":").unwrap();
        // Half a line is no turn: the runtime's read takes it up from there.
        assert!(matches!(
            waiter.ready(&mut host, &mut server, 1, exit, Some(Instant::now())),
            Wait::Runtime
        ));
        to_server.write_all(b"1}\n").unwrap();
        drop(to_server);
        let whole = line(waiter.ready(&mut host, &mut server, 1, exit, later));
        assert_eq!(whole, ("server", b"{\"half\":1}".to_vec()));
        assert!(matches!(
            waiter.ready(&mut host, &mut server, 1, exit, later),
            Wait::Turn(Turn::Server(Ok(None)))
        ));
    }

    /// Whether the wait handed the turn to the runtime before `deadline`: what rang it, not the
    /// deadline, ended it.
    fn handed_over_early(
        waiter: &mut Waiter,
        host: &mut LineReader<Receiver>,
        server: &mut LineReader<Receiver>,
        number: u64,
        exit: BorrowedFd<'_>,
        deadline: Instant,
    ) -> bool {
        let wait = waiter.ready(host, server, number, exit, Some(deadline));
        matches!(wait, Wait::Runtime) && Instant::now() < deadline
    }

    #[tokio::test]
    async fn the_bell_and_the_servers_exit_hand_the_turn_to_the_runtime_before_the_deadline() {
        let (_to_server, mut server) = pipe();
        let (_to_host, mut host) = pipe();
        let bell = Bell::new().unwrap();
        let ringer = bell.ringer().unwrap();
        let mut waiter = Waiter::new(bell).unwrap();
        let (running, _keep) = exit_fd(false);
        let running = running.as_fd();
        let deadline = Instant::now() + Duration::from_secs(30);
        let heard_nothing = |waiter: &Waiter| {
            let mut left = [0u8; 8];
            let heard = (&waiter.bell.heard).read(&mut left);
            heard.map_err(|e| e.kind()).unwrap_err() == io::ErrorKind::WouldBlock
        };

        // A ring that comes once the wait has begun ends it: here its byte alone, as a wait
        // that read the flag just before the ring finds the bell.
        (&waiter.bell.rung).write_all(b"!").unwrap();
        let early = handed_over_early(&mut waiter, &mut host, &mut server, 1, running, deadline);
        assert!(early, "the bell ended the wait");
        assert!(heard_nothing(&waiter), "the wait silences what it heard");

        // A ring before the wait: its flag waits for the runtime's turn, which clears it.
        ringer.ring();
        ringer.ring();
        assert!(handed_over_early(
            &mut waiter,
            &mut host,
            &mut server,
            1,
            running,
            deadline
        ));
        assert!(waiter.take_alert(), "the flag waits for the runtime's turn");
        assert!(!waiter.take_alert(), "and that turn clears it");

        // While the flag is set, the loop does not wait by itself at all, even with a line
        // read (the flag alone here, without the socket's byte).
        waiter.bell.alert.store(true, Ordering::Release);
        let (mut to_server, mut busy) = pipe();
        to_server.write_all(b"a line\n").unwrap();
        assert!(handed_over_early(
            &mut waiter,
            &mut host,
            &mut busy,
            3,
            running,
            deadline
        ));
        assert!(waiter.take_alert());
        let after = line(waiter.ready(&mut host, &mut busy, 3, running, Some(deadline)));
        assert_eq!(after, ("server", b"a line".to_vec()), "the line waited");
        // Clearing the flag silences the socket too.
        waiter.bell.ring();
        assert!(waiter.take_alert());
        assert!(heard_nothing(&waiter));
        // Its pipe closed, that server's descriptor leaves the wait.
        drop((to_server, busy));

        // Another server (as after a restart), whose pidfd the wait adds, has exited.
        let (exited, _keep) = exit_fd(true);
        let exited = exited.as_fd();
        let early = handed_over_early(&mut waiter, &mut host, &mut server, 2, exited, deadline);
        assert!(early, "the exit ended the wait");
        assert!(
            !waiter.failed,
            "the new server's descriptors were registered"
        );
    }
}
