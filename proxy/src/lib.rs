//! `rootsctl proxy -- COMMAND ARGS…`: puts a stdio MCP server behind rootsd.
//!
//! The proxy starts the server ([`server`]), reads lines from the host and the server
//! (`stdio::LineReader`), lets [`rootsd_relay::Relay`] decide what each becomes, and writes the
//! results through queues (`stdio::Outbound`) whose size decides what is read next: a side that
//! stops reading stops the proxy from reading the side that feeds it, so nothing grows without
//! bound. The server's stderr passes through its keeper, which keeps its tail for a failed start's
//! error. Nothing but MCP messages is ever written to stdout: diagnostics go to stderr, prefixed
//! `rootsctl proxy:`.
//!
//! Shutdown follows MCP's stdio rules (`running`): when the host closes stdin (or the server
//! closes its stdout), the server's stdin is closed, and a server that lingers gets SIGTERM and
//! then SIGKILL. The proxy's own SIGTERM or SIGINT is passed on and escalates the same way. The
//! server runs under a keeper (`keeper`) that ends everything the server started, however the
//! session ends, the proxy's SIGKILL included; a host that leaves during a restart is seen at
//! once (`hangup`).
//!
//! A server started with the workspace in its command line, environment or working directory
//! ([`rootsd_relay::template`]) starts once the daemon's first list is known, and is restarted
//! when a change alters what it is started with (`launch`): the host's lines wait in their
//! pipe, the requests in flight finish (or get an error), the old server is stopped as above, the
//! new one is started and given the host's set-up again ([`rootsd_relay`] keeps it), and relaying
//! resumes.
//!
//! This module is the event loop alone: what it reads each turn, and where each output goes. The
//! daemon's side is `link`, the pipes `stdio`, the process [`server`], and the loop's own wait for
//! a busy session's two pipes, past the runtime, `wait`.

mod args;
mod errors;
mod hangup;
pub mod keeper;
mod launch;
mod link;
mod news;
mod process;
mod running;
mod server;
mod splice;
mod stdio;
mod wait;

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rootsd_proto::wire::RegisterParams;
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};
use tokio::sync::watch;

pub use args::{HostRootsArg, ProxyArgs};
pub use errors::{ServerExit, SpawnError};
use launch::Launcher;
use news::{Item, News};
use rootsd_client::autostart::Target;
use rootsd_client::errors::UsageError;
use rootsd_relay::template::LaunchTemplate;
use rootsd_relay::{Config, Output, Relay, Side, Streamed, label};
use running::Running;
use server::{ServerStdin, ServerStdout};
use stdio::{Line, LineReader, MAX_LINE_BYTES, Outbound, Piece};
use wait::{Turn, Wait};

/// How long a session report whose only news is the fetch count may wait.
const COUNT_REPORT_DELAY: Duration = Duration::from_secs(1);
/// At the end, how long the host gets to take what is still queued for it.
const FINAL_WRITE_GRACE: Duration = Duration::from_secs(5);

/// The next line (or piece of a long one) of the server's stdout, if a server runs; never
/// resolves otherwise.
async fn server_line(
    lines: Option<&mut LineReader<ServerStdout>>,
) -> std::io::Result<Option<Piece>> {
    match lines {
        Some(lines) => lines.next_piece_peeking().await,
        None => std::future::pending().await,
    }
}

/// Forwards a piece of the server line being streamed to the host, as far as the relay says.
/// Past the limit, the relay still reads the pieces (for the id) but the host's line has ended.
/// The buffers of pieces already written go back to `lines`, to read the next ones into.
///
/// A piece the reader only peeked at (`LineReader::peeked`) is still in the server's pipe: one
/// the host gets whole moves there by `splice`, `ends_line` saying whether its newline goes with
/// it; any other is dropped from the pipe, and the copy goes on as a piece read.
fn forward_part(
    to_host: &mut Outbound<stdio::Stdio>,
    lines: &mut LineReader<ServerStdout>,
    streamed: &mut Streamed,
    mut bytes: Vec<u8>,
    ends_line: bool,
) -> std::io::Result<()> {
    while let Some(spare) = to_host.spare() {
        lines.recycle(spare);
    }
    let ended = streamed.is_over();
    let forward = streamed.part(&bytes);
    if let Some(piece) = lines.peeked() {
        if to_host.splices() && !ended && !forward.cut {
            debug_assert_eq!(forward.bytes, bytes.len(), "a piece not cut goes whole");
            to_host.push_spliced(piece, ends_line);
            lines.recycle(bytes);
            return Ok(());
        }
        drop(piece);
        if to_host.splices() {
            lines.drop_peeked()?;
        } else {
            lines.stop_peeking()?;
        }
    }
    if ended {
        lines.recycle(bytes);
        return Ok(());
    }
    bytes.truncate(forward.bytes);
    to_host.push_part(bytes);
    if forward.cut {
        eprintln!(
            "rootsctl proxy: cut off a line from the server longer than {MAX_LINE_BYTES} bytes"
        );
        to_host.end_line(Vec::new());
    }
    Ok(())
}

/// Resolves when the server takes more of what is queued for it.
async fn server_drain(queue: Option<&mut Outbound<ServerStdin>>) {
    match queue {
        Some(queue) => queue.drain().await,
        None => std::future::pending().await,
    }
}

/// Hands a newly started server's exit to `news`, which then tells of it.
fn watch_exit(slot: &mut Option<Running>, news: &mut News) {
    if let Some(server) = slot.as_mut().map(|running| &mut running.server)
        && let Some(exit) = server.exit()
    {
        news.watch_exit(server.pid(), exit);
    }
}

/// Runs the proxy until the server exits; returns how it exited, to pass on.
pub async fn run(target: &Target, args: ProxyArgs) -> anyhow::Result<ServerExit> {
    // A bad --map or template is a usage error before anything starts.
    let mapping = if args.map.is_empty() {
        None
    } else {
        let cwd = std::env::current_dir()
            .context("cannot read the current directory to resolve --map HOST_DIR")?;
        Some(rootsd_client::resolve::path_maps(&args.map, &cwd)?)
    };
    let template = LaunchTemplate::parse(&args.command, &args.env, args.cwd.as_deref())
        .map_err(|e| UsageError(format!("rootsctl proxy: {e}")))?;
    let mut launcher = Launcher::new(
        template,
        args.workspace.clone(),
        Instant::now() + rootsd_relay::FIRST_LIST_PATIENCE,
    );
    // A server that does not take the workspace starts at once, as written; one that does
    // waits for the daemon's first list.
    let mut slot = if launcher.templated() {
        None
    } else {
        Some(Running::start(&launcher.plain())?)
    };

    let label = args
        .name
        .clone()
        .unwrap_or_else(|| label::default_label(&args.command));
    let config = Config {
        mapping,
        host_roots: args.host_roots.into(),
        templated: launcher.templated(),
        ..Config::new(!args.no_list_changed)
    };
    let mut relay = Relay::new(config, Instant::now());
    // Rung by the link and on the signals below, so that the loop's own wait (`wait`) hands what
    // they bring to the runtime.
    let bell = wait::Bell::new().context("cannot make the relay loop's bell")?;
    let (roots_tx, roots) = watch::channel(None);
    let link::Link {
        states,
        publications,
        acks,
    } = link::spawn(
        target.clone(),
        RegisterParams {
            workspace: args.workspace.clone(),
            label,
            pid: std::process::id(),
            state: relay.state().clone(),
            instance: link::instance_id(),
        },
        roots_tx,
        bell.ringer().context("cannot make the relay loop's bell")?,
    );

    // The daemon's news, the signals and the server's exit as one stream made once: a
    // `changed()` made anew on every turn registered with its channel and unregistered again
    // each time, whether or not anything changed.
    let signals = signal_hook_tokio::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    bell.ring_on(&[SIGTERM, SIGINT, SIGHUP])?;
    // A signal between the two registrations reached the runtime's handler alone: the first turn
    // goes through the runtime and lets its driver look.
    bell.ring();
    let mut news = News::new(roots, acks, signals);
    let mut waiter = wait::Waiter::new(bell).context("cannot make the relay loop's wait")?;
    watch_exit(&mut slot, &mut news);

    let mut to_host = Outbound::new(stdio::stdout());
    let mut host_lines = LineReader::new(stdio::stdin());
    // The host's end-of-file while its lines are left unread (a restart, the first list).
    let host_hangup = hangup::Hangup::watch_stdin();

    let mut host_open = true;
    // The proxy was told to end (SIGTERM, SIGINT): no server is started or restarted any more.
    let mut ending = false;
    // The last exit of a server that ended the session, or of any server at all.
    let mut last_exit: Option<ExitStatus> = None;
    // The proxy's own SIGTERM or SIGINT while no server runs ends it with 128 + the signal.
    let mut signalled: Option<i32> = None;
    // A state whose only news is the fetch count is reported late: it only dates "last fetched"
    // in `rootsctl sessions`, so a server asking hundreds of times a second costs the daemon one
    // report a second rather than hundreds.
    let mut fetch_report_at: Option<Instant> = None;
    // One timer for every deadline, reset only when the earliest one moves: a timer made anew
    // on each turn of the loop cost more than relaying the line that turned it.
    let mut timer = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
    // The server line being forwarded to the host as it arrives (`rootsd_relay::Streamed`).
    let mut streamed: Option<Streamed> = None;
    // The last turn took news: the loop does not wait by itself until a turn finds none.
    let mut news_taken = false;

    loop {
        let relay_deadline = relay.next_deadline();
        let escalate_at = slot.as_ref().and_then(Running::escalation_at);
        let output_at = slot.as_ref().and_then(Running::output_at);
        let wake_at = [
            relay_deadline,
            escalate_at,
            fetch_report_at,
            output_at,
            launcher.deadline(),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(at) = wake_at.map(tokio::time::Instant::from_std)
            && timer.deadline() != at
        {
            timer.as_mut().reset(at);
        }
        // A piece of the server's line queued for the host still in the server's pipe
        // (`splice`) is that pipe's next bytes: nothing is read from it until the piece moved.
        let reads_server =
            slot.as_ref().is_some_and(|r| r.open) && !to_host.is_full() && !to_host.holds_pipe();
        let reads_host = host_open
            // While a streamed line holds the host's other lines back, they count as queued.
            && !(to_host.is_open() && to_host.is_full())
            && launcher.reads_host()
            && !relay.replaying()
            && match &slot {
                Some(running) => !running.to_server.is_full(),
                // No server: the relay answers the host itself.
                None => !to_host.is_full(),
            };
        // The steady state of a busy session (a server running, nothing queued either way, no
        // line streamed) waits for its two pipes with an epoll of its own and reads them itself.
        let direct = match slot.as_mut() {
            Some(running)
                if !news_taken
                    && reads_server
                    && reads_host
                    && streamed.is_none()
                    && to_host.is_empty()
                    && running.to_server.is_empty()
                    && !running.retiring
                    && running.exited.is_none() =>
            {
                let exit = running.server.pidfd();
                let number = running.number;
                waiter.ready(&mut host_lines, &mut running.lines, number, exit, wake_at)
            }
            _ => Wait::Runtime,
        };
        if matches!(direct, Wait::Runtime) && waiter.take_alert() {
            // What rang may be a signal, which only the runtime's driver turns into news: a
            // yield lets it look, since the loop may have waited past it.
            tokio::task::yield_now().await;
        }
        // The server's pipes, borrowed apart for the select below.
        let (lines, queue) = match slot.as_mut() {
            Some(r) => (
                Some(&mut r.lines).filter(|_| r.open),
                Some(&mut r.to_server),
            ),
            None => (None, None),
        };
        let turn = match direct {
            Wait::Turn(turn) => turn,
            // Biased: news first, so that a turn that returns anything else has found none
            // waiting, which the loop's own wait relies on once the bell's flag is cleared; then
            // the streams, in the order a busy session needs them.
            Wait::Runtime => tokio::select! {
                biased;
                item = news.next() => Turn::News(item),
                line = server_line(lines), if reads_server => Turn::Server(line),
                line = host_lines.next_line(), if reads_host => Turn::Host(line),
                // A host that left during a restart ends the session now, rather than once a
                // new server was started for nobody; what it sent before is not read.
                () = host_hangup.wait(), if host_open && !reads_host => Turn::Host(Ok(None)),
                () = to_host.drain() => Turn::Wrote,
                () = server_drain(queue) => Turn::Wrote,
                () = &mut timer, if wake_at.is_some() => Turn::Timer,
            },
        };
        // A turn that took news proves nothing of what else is waiting (a wake-up may bring
        // several), so the next one goes through the runtime, which looks at news first.
        news_taken = matches!(turn, Turn::News(_));
        // One reading of the clock serves the whole turn: a turn takes microseconds, and each
        // reading was a measurable part of relaying a small line.
        let now = Instant::now();
        match turn {
            Turn::Server(line) => {
                let running = slot.as_mut().expect("a server runs");
                match line {
                    // A server being stopped for a restart says nothing to anyone.
                    Ok(Some(_)) if running.retiring => {}
                    Ok(Some(Piece::Line(Line::Complete(line)))) => relay.from_server(line, now),
                    Ok(Some(Piece::Line(Line::TooLong(prefix)))) => {
                        eprintln!(
                            "rootsctl proxy: discarded a line from the server longer than {MAX_LINE_BYTES} bytes"
                        );
                        relay.line_too_long(Side::Server, &prefix, MAX_LINE_BYTES);
                    }
                    // A long line whose fate its start settles goes on as it arrives; any other
                    // is read whole.
                    Ok(Some(Piece::Long)) => {
                        if let Some(mut started) =
                            relay.stream_from_server(running.lines.unfinished(), MAX_LINE_BYTES)
                        {
                            let first = running.lines.stream();
                            // The rest moves from the server's pipe to the host's, where the
                            // host's stdout takes it so.
                            if to_host.splices() {
                                running.lines.peek_pieces();
                            }
                            let to = &mut to_host;
                            if forward_part(to, &mut running.lines, &mut started, first, false)
                                .is_err()
                            {
                                running.stdout_closed(now);
                            }
                            // Kept either way: a line whose server is no longer read is ended
                            // below, as any streamed line cut short is.
                            streamed = Some(started);
                        }
                    }
                    Ok(Some(Piece::Part(bytes))) => {
                        if let Some(streaming) = streamed.as_mut() {
                            let to = &mut to_host;
                            if forward_part(to, &mut running.lines, streaming, bytes, false)
                                .is_err()
                            {
                                running.stdout_closed(now);
                            }
                        }
                    }
                    Ok(Some(Piece::End(bytes))) => {
                        if let Some(mut ended) = streamed.take() {
                            let to = &mut to_host;
                            let forwarded =
                                forward_part(to, &mut running.lines, &mut ended, bytes, true);
                            to_host.end_line(Vec::new());
                            match forwarded {
                                Ok(()) => relay.stream_end(ended, now),
                                // The host did not get the line's end: its request stays in
                                // flight, to be answered as the server's end decides.
                                Err(_) => running.stdout_closed(now),
                            }
                        }
                    }
                    // A server that closed its stdout has ended the session, running or not.
                    Ok(None) | Err(_) => running.stdout_closed(now),
                }
            }
            Turn::Host(line) => match line {
                Ok(Some(Line::Complete(line))) => relay.from_host(line, now),
                Ok(Some(Line::TooLong(prefix))) => {
                    eprintln!(
                        "rootsctl proxy: discarded a line from the host longer than {MAX_LINE_BYTES} bytes"
                    );
                    relay.line_too_long(Side::Host, &prefix, MAX_LINE_BYTES);
                }
                Ok(None) | Err(_) => {
                    // MCP's stdio shutdown: close the server's stdin, then escalate if it lingers.
                    host_open = false;
                    if let Some(running) = slot.as_mut() {
                        running.stop(now);
                    }
                }
            },
            Turn::Wrote => {}
            Turn::News(item) => match item {
                Item::Roots(Some(snapshot)) => relay.roots_changed(snapshot, now),
                Item::Ack(Some(ack)) => relay.published(ack, now),
                Item::Roots(None) | Item::Ack(None) => {}
                Item::Signal(signal) => match slot.as_mut() {
                    Some(running) => ending |= running.pass_on(signal, now),
                    None if signal != SIGHUP => signalled = Some(signal),
                    None => {}
                },
                // Only the current server's exit: a server is replaced only once it ended.
                Item::Exited(pid, status) => {
                    let status = status?;
                    if let Some(running) = slot.as_mut()
                        && running.exited.is_none()
                        && running.server.pid() == pid
                    {
                        running.reaped(status, now);
                    }
                }
            },
            Turn::Timer => {
                if relay_deadline.is_some_and(|at| at <= now) {
                    relay.tick(now);
                }
                if fetch_report_at.is_some_and(|at| at <= now) {
                    fetch_report_at = None;
                    states.send_replace(relay.state().clone());
                }
                if let Some(running) = slot.as_mut() {
                    running.deadlines(escalate_at, output_at, now);
                }
            }
        }
        // Where the server stands after this turn: a restart's next phase, a failed start.
        launcher.reap_failed_start(&mut relay, &mut slot, host_open);
        launcher.step(&mut relay, &mut slot, host_open && !ending, now);
        watch_exit(&mut slot, &mut news);
        for output in relay.drain_output() {
            match output {
                Output::ToServer(line) => {
                    if let Some(running) = slot.as_mut() {
                        running.to_server.push(line);
                    }
                }
                Output::ToHost(line) => to_host.push(line),
                Output::State(state) => {
                    states.send_replace(state);
                    fetch_report_at = None;
                }
                Output::Fetched => {
                    fetch_report_at.get_or_insert_with(|| now + COUNT_REPORT_DELAY);
                }
                Output::Publish(publication) => {
                    publications.send_replace(Some(publication));
                }
            }
        }
        // A streamed line whose server is no longer read (stopped for a restart, its stdout given
        // up on) ends where it stopped, before the lines held behind it; its request is still in
        // flight, so it gets the restart's error, never a second answer.
        if streamed.is_some() && !slot.as_ref().is_some_and(|r| r.open && !r.retiring) {
            streamed = None;
            to_host.end_line(Vec::new());
        }
        // The session ends with a server that ended on its own (not one a restart stopped, unless
        // the host left or the proxy was told to end meanwhile), or with the host once no server
        // is left.
        let finished = !host_open || ending;
        match &slot {
            Some(running) if running.ended() && (!launcher.stopping() || finished) => {
                last_exit = running.exited;
                break;
            }
            None if !host_open || signalled.is_some() => break,
            _ => {}
        }
    }
    drop(states);
    drop(publications);
    // Everything the server said must reach the host before the proxy exits, unless the host
    // stopped reading.
    let _ = tokio::time::timeout(FINAL_WRITE_GRACE, to_host.finish()).await;
    Ok(match (last_exit, signalled) {
        (Some(status), _) => ServerExit::of(status),
        (None, Some(signal)) => ServerExit((128 + signal).clamp(0, 255) as u8),
        (None, None) => ServerExit(0),
    })
}
