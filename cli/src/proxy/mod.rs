//! `rootsctl proxy -- COMMAND ARGS…`: puts a stdio MCP server behind rootsd.
//!
//! The proxy starts the server ([`server`]), reads lines from the host and the server
//! ([`stdio::LineReader`]), lets [`relay::Relay`] decide what each becomes, and writes the
//! results through queues ([`stdio::Outbound`]) whose size decides what is read next: a side that
//! stops reading stops the proxy from reading the side that feeds it, so nothing grows without
//! bound. The server's stderr passes straight through. Nothing but MCP messages is ever written
//! to stdout: diagnostics go to stderr, prefixed `rootsctl proxy:`.
//!
//! Shutdown follows MCP's stdio rules: when the host closes stdin (or the server closes its
//! stdout), the server's stdin is closed, and a server that lingers gets SIGTERM and then
//! SIGKILL. The proxy's own SIGTERM or SIGINT is passed on and escalates the same way.

pub mod label;
pub mod link;
pub mod relay;
pub mod server;
pub mod stdio;
pub mod template;

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use rootsd_proto::wire::RegisterParams;
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};
use tokio::sync::watch;

use crate::args::ProxyArgs;
use crate::autostart::Target;
use crate::errors::ServerExit;
use relay::{Config, Output, Relay, Side};
use server::Server;
use stdio::{Line, LineReader, MAX_LINE_BYTES, Outbound};

/// After the host closes stdin, how long the server gets to exit on its own before SIGTERM.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// After SIGTERM, how long before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(3);
/// After the server exits, how long its stdout may stay open (held by a process it started)
/// before the proxy stops waiting for the rest of its output.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);
/// How long a session report whose only news is the fetch count may wait.
const COUNT_REPORT_DELAY: Duration = Duration::from_secs(1);
/// At the end, how long the host gets to take what is still queued for it.
const FINAL_WRITE_GRACE: Duration = Duration::from_secs(5);

/// The next step of ending a server that does not end on its own.
#[derive(Clone, Copy, Debug)]
enum Escalation {
    Term,
    Kill,
}

/// Runs the proxy until the server exits; returns how it exited, to pass on.
pub async fn run(target: &Target, args: ProxyArgs) -> anyhow::Result<ServerExit> {
    // A bad --map is a usage error before anything starts.
    let mapping = if args.map.is_empty() {
        None
    } else {
        let cwd = std::env::current_dir()
            .context("cannot read the current directory to resolve --map HOST_DIR")?;
        Some(crate::resolve::path_maps(&args.map, &cwd)?)
    };
    let mut server = Server::spawn(&args.command)?;
    let server_in = server.child.stdin.take().expect("stdin was piped");
    let server_out = server.child.stdout.take().expect("stdout was piped");

    let label = args
        .name
        .clone()
        .unwrap_or_else(|| label::default_label(&args.command));
    let config = Config {
        mapping,
        host_roots: args.host_roots.into(),
        ..Config::new(!args.no_list_changed)
    };
    let mut relay = Relay::new(config, Instant::now());
    let (roots_tx, mut roots) = watch::channel(None);
    let link::Link {
        states,
        publications,
        mut acks,
    } = link::spawn(
        target.clone(),
        RegisterParams {
            workspace: args.workspace.workspace.clone(),
            label,
            pid: std::process::id(),
            state: relay.state().clone(),
            instance: link::instance_id(),
        },
        roots_tx,
    );

    let mut to_server = Outbound::new(server_in);
    let mut to_host = Outbound::new(stdio::stdout());
    let mut host_lines = LineReader::new(stdio::stdin());
    let mut server_lines = LineReader::new(server_out);
    let mut signals = signal_hook_tokio::Signals::new([SIGTERM, SIGINT, SIGHUP])?;

    let mut host_open = true;
    let mut server_open = true;
    let mut roots_open = true;
    let mut acks_open = true;
    let mut exited: Option<ExitStatus> = None;
    let mut escalation: Option<(Instant, Escalation)> = None;
    let mut output_deadline: Option<Instant> = None;
    // A state whose only news is the fetch count is reported late: it only dates "last fetched"
    // in `rootsctl sessions`, so a server asking hundreds of times a second costs the daemon one
    // report a second rather than hundreds.
    let mut fetch_report_at: Option<Instant> = None;
    // One timer for every deadline, reset only when the earliest one moves: a timer made anew
    // on each turn of the loop cost more than relaying the line that turned it.
    let mut timer = std::pin::pin!(tokio::time::sleep(Duration::ZERO));

    while server_open || exited.is_none() {
        let relay_deadline = relay.next_deadline();
        let escalate_at = escalation.map(|(at, _)| at).filter(|_| exited.is_none());
        let output_at = output_deadline.filter(|_| server_open);
        let wake_at = [relay_deadline, escalate_at, fetch_report_at, output_at]
            .into_iter()
            .flatten()
            .min();
        if let Some(at) = wake_at.map(tokio::time::Instant::from_std)
            && timer.deadline() != at
        {
            timer.as_mut().reset(at);
        }
        // Biased: the streams first, in the order a busy session needs them, so that a turn
        // with a line to relay polls nothing else.
        tokio::select! {
            biased;
            line = server_lines.next_line(), if server_open && !to_host.is_full() => match line {
                Ok(Some(Line::Complete(line))) => relay.from_server(line, Instant::now()),
                Ok(Some(Line::TooLong(prefix))) => {
                    eprintln!("rootsctl proxy: discarded a line from the server longer than {MAX_LINE_BYTES} bytes");
                    relay.line_too_long(Side::Server, &prefix, MAX_LINE_BYTES);
                }
                Ok(None) | Err(_) => {
                    // A server that closed its stdout has ended the session, running or not.
                    server_open = false;
                    if exited.is_none() {
                        to_server.close();
                        escalation.get_or_insert((Instant::now() + EXIT_GRACE, Escalation::Term));
                    }
                }
            },
            line = host_lines.next_line(), if host_open && !to_server.is_full() => match line {
                Ok(Some(Line::Complete(line))) => relay.from_host(line, Instant::now()),
                Ok(Some(Line::TooLong(prefix))) => {
                    eprintln!("rootsctl proxy: discarded a line from the host longer than {MAX_LINE_BYTES} bytes");
                    relay.line_too_long(Side::Host, &prefix, MAX_LINE_BYTES);
                }
                Ok(None) | Err(_) => {
                    // MCP's stdio shutdown: close the server's stdin, then escalate if it lingers.
                    host_open = false;
                    to_server.close();
                    escalation.get_or_insert((Instant::now() + EXIT_GRACE, Escalation::Term));
                }
            },
            () = to_host.drain() => {}
            () = to_server.drain() => {}
            changed = roots.changed(), if roots_open => match changed {
                Ok(()) => {
                    let snapshot = roots.borrow_and_update().clone();
                    if let Some(snapshot) = snapshot {
                        relay.roots_changed(snapshot, Instant::now());
                    }
                }
                Err(_) => roots_open = false,
            },
            changed = acks.changed(), if acks_open => match changed {
                Ok(()) => {
                    let ack = *acks.borrow_and_update();
                    if let Some(ack) = ack {
                        relay.published(ack, Instant::now());
                    }
                }
                Err(_) => acks_open = false,
            },
            () = &mut timer, if wake_at.is_some() => {
                let now = Instant::now();
                if relay_deadline.is_some_and(|at| at <= now) {
                    relay.tick(now);
                }
                if fetch_report_at.is_some_and(|at| at <= now) {
                    fetch_report_at = None;
                    states.send_replace(relay.state().clone());
                }
                if let Some((_, step)) = escalation.filter(|_| escalate_at.is_some_and(|at| at <= now)) {
                    match step {
                        Escalation::Term => {
                            eprintln!("rootsctl proxy: the server did not exit after its stdin closed; sending SIGTERM");
                            server.signal(SIGTERM);
                            escalation = Some((now + TERM_GRACE, Escalation::Kill));
                        }
                        Escalation::Kill => {
                            eprintln!("rootsctl proxy: the server ignored SIGTERM; sending SIGKILL");
                            let _ = server.child.start_kill();
                            escalation = None;
                        }
                    }
                }
                if output_at.is_some_and(|at| at <= now) {
                    eprintln!("rootsctl proxy: the server exited, but a process it started still holds its stdout; not waiting for it");
                    server_open = false;
                }
            }
            status = server.wait(), if exited.is_none() => {
                exited = Some(status?);
                output_deadline = Some(Instant::now() + OUTPUT_GRACE);
            }
            Some(signal) = signals.next() => {
                server.signal(signal);
                if signal != SIGHUP {
                    // Passed on like the host's stdin closing: if the server ignores it, it is
                    // killed after the same grace.
                    escalation = Some((Instant::now() + TERM_GRACE, Escalation::Kill));
                }
            }
        }
        for output in relay.take_output() {
            match output {
                Output::ToServer(line) => to_server.push(line),
                Output::ToHost(line) => to_host.push(line),
                Output::State(state) => {
                    states.send_replace(state);
                    fetch_report_at = None;
                }
                Output::Fetched => {
                    fetch_report_at.get_or_insert_with(|| Instant::now() + COUNT_REPORT_DELAY);
                }
                Output::Publish(publication) => {
                    publications.send_replace(Some(publication));
                }
            }
        }
    }
    drop(states);
    drop(publications);
    // Everything the server said must reach the host before the proxy exits, unless the host
    // stopped reading.
    let _ = tokio::time::timeout(FINAL_WRITE_GRACE, to_host.finish()).await;
    Ok(ServerExit::of(
        exited.expect("the loop ends only once the server exited"),
    ))
}
