//! `rootsctl proxy -- COMMAND ARGS…`: puts a stdio MCP server behind rootsd.
//!
//! The proxy spawns the server, relays the host's stdin to it and its stdout to the host line
//! by line, and lets [`relay::Relay`] handle the roots traffic. The server's stderr passes
//! straight through. Nothing but MCP messages is ever written to stdout: diagnostics go to
//! stderr, prefixed `rootsctl proxy:`.

pub mod link;
pub mod relay;

use std::ffi::OsString;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use futures::StreamExt as _;
use rootsd_proto::wire::RegisterParams;
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use crate::args::ProxyArgs;
use crate::autostart::Target;
use crate::errors::{ServerExit, SpawnError};
use link::LinkEvent;
use relay::{Output, Relay};

/// After the host closes stdin, how long the server gets to exit on its own before SIGTERM, and
/// then before SIGKILL.
const EXIT_GRACE: Duration = Duration::from_secs(2);
const TERM_GRACE: Duration = Duration::from_secs(3);
/// How long a server's `roots/list` may wait for the daemon's first list before it is answered
/// with an error.
const FIRST_LIST_PATIENCE: Duration = Duration::from_secs(5);

/// Runs the proxy until the server exits; returns how it exited, to pass on.
pub async fn run(target: &Target, args: ProxyArgs) -> anyhow::Result<ServerExit> {
    let (program, rest) = args.command.split_first().expect("clap requires a command");
    let mut child = Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| SpawnError {
            command: program.to_string_lossy().into_owned(),
            error,
        })?;
    let child_pid = child.id();
    let server_in = child.stdin.take().expect("stdin was piped");
    let server_out = child.stdout.take().expect("stdout was piped");

    let label = args
        .name
        .clone()
        .unwrap_or_else(|| default_label(&args.command));
    let mut relay = Relay::new(!args.no_list_changed);
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let states = link::spawn(
        target.clone(),
        RegisterParams {
            workspace: args.workspace.workspace.clone(),
            label,
            pid: std::process::id(),
            state: relay.state().clone(),
        },
        events_tx,
    );

    let (to_server, server_writer) = writer(server_in);
    let (to_host, host_writer) = writer(tokio::io::stdout());
    let mut to_server = Some(to_server);
    let mut host_lines = BufReader::new(tokio::io::stdin()).split(b'\n');
    let mut server_lines = BufReader::new(server_out).split(b'\n');
    let mut signals = signal_hook_tokio::Signals::new([SIGTERM, SIGINT, SIGHUP])?;

    let mut host_open = true;
    let mut server_open = true;
    let mut exited: Option<ExitStatus> = None;
    let mut escalation: Option<(tokio::time::Instant, Escalation)> = None;
    let first_list_deadline = tokio::time::sleep(FIRST_LIST_PATIENCE);
    tokio::pin!(first_list_deadline);
    let mut first_list_pending = true;

    while server_open || exited.is_none() {
        let escalate_at = escalation.map(|(at, _)| at);
        tokio::select! {
            line = host_lines.next_segment(), if host_open => match line {
                Ok(Some(line)) => relay.from_host(&line),
                _ => {
                    // MCP's stdio shutdown: close the server's stdin, then escalate if it lingers.
                    host_open = false;
                    to_server = None;
                    escalation = Some((tokio::time::Instant::now() + EXIT_GRACE, Escalation::Term));
                }
            },
            line = server_lines.next_segment(), if server_open => match line {
                Ok(Some(line)) => relay.from_server(&line),
                _ => server_open = false,
            },
            status = child.wait(), if exited.is_none() => {
                exited = Some(status?);
            }
            Some(event) = events.recv() => match event {
                LinkEvent::Roots(snapshot) => {
                    first_list_pending = false;
                    relay.roots_changed(snapshot);
                }
            },
            () = &mut first_list_deadline, if first_list_pending => {
                first_list_pending = false;
                relay.give_up_waiting();
            }
            Some(signal) = signals.next() => forward_signal(child_pid, signal),
            () = sleep_until_opt(escalate_at), if escalate_at.is_some() && exited.is_none() => {
                let Some((_, step)) = escalation else { continue };
                match step {
                    Escalation::Term => {
                        eprintln!("rootsctl proxy: the server did not exit after its stdin closed; sending SIGTERM");
                        forward_signal(child_pid, SIGTERM);
                        escalation = Some((tokio::time::Instant::now() + TERM_GRACE, Escalation::Kill));
                    }
                    Escalation::Kill => {
                        eprintln!("rootsctl proxy: the server ignored SIGTERM; sending SIGKILL");
                        let _ = child.start_kill();
                        escalation = None;
                    }
                }
            }
        }
        for output in relay.take_output() {
            match output {
                Output::ToServer(line) => {
                    if let Some(to_server) = &to_server {
                        let _ = to_server.send(line);
                    }
                }
                Output::ToHost(line) => {
                    let _ = to_host.send(line);
                }
                Output::State(state) => {
                    states.send_replace(state);
                }
            }
        }
    }
    drop(to_server);
    drop(to_host);
    drop(states);
    // Everything the server said must reach the host before the proxy exits.
    let _ = host_writer.await;
    server_writer.abort();
    Ok(ServerExit::of(
        exited.expect("the loop ends only once the server exited"),
    ))
}

#[derive(Clone, Copy, Debug)]
enum Escalation {
    Term,
    Kill,
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A task that writes queued lines, each followed by a newline, and closes the stream when the
/// queue's sender is dropped. Queuing means the relay never blocks on a slow reader.
fn writer<W: AsyncWrite + Unpin + Send + 'static>(
    mut stream: W,
) -> (mpsc::UnboundedSender<Vec<u8>>, tokio::task::JoinHandle<()>) {
    let (sender, mut receiver) = mpsc::unbounded_channel::<Vec<u8>>();
    let task = tokio::spawn(async move {
        while let Some(mut line) = receiver.recv().await {
            line.push(b'\n');
            if stream.write_all(&line).await.is_err() {
                break;
            }
            // Flush when the queue is empty: batches writes under load, adds no latency when idle.
            if receiver.is_empty() && stream.flush().await.is_err() {
                break;
            }
        }
        let _ = stream.shutdown().await;
    });
    (sender, task)
}

fn forward_signal(pid: Option<u32>, signal: i32) {
    let Some(pid) = pid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) else {
        return;
    };
    let Some(signal) = rustix::process::Signal::from_named_raw(signal) else {
        return;
    };
    let _ = rustix::process::kill_process(pid, signal);
}

/// A label for `rootsctl sessions` when `--name` is not given: the command's file name, plus the
/// script's for interpreters (`node server-filesystem`, not just `node`).
fn default_label(command: &[OsString]) -> String {
    let Some(program) = command.first() else {
        return String::new();
    };
    let program = file_name(Path::new(program));
    let interpreters = [
        "node", "python", "python3", "npx", "uvx", "uv", "deno", "bun", "bash", "sh",
    ];
    if interpreters.contains(&program.as_str())
        && let Some(script) = command[1..]
            .iter()
            .find(|a| !a.to_string_lossy().starts_with('-'))
    {
        return format!("{program} {}", script_name(Path::new(script)));
    }
    program
}

/// What a script is called: its file name without extension, or, for a generic entry point
/// (`node_modules/@scope/server-x/dist/index.js`), the package directory it belongs to.
fn script_name(script: &Path) -> String {
    let stem = script
        .file_stem()
        .map_or_else(|| file_name(script), |s| s.to_string_lossy().into_owned());
    if !["index", "main", "cli", "server", "__main__"].contains(&stem.as_str()) {
        return stem;
    }
    script
        .ancestors()
        .skip(1)
        .filter_map(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .find(|n| !["dist", "build", "lib", "bin", "src", "out"].contains(&n.as_str()))
        .unwrap_or(stem)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.to_string_lossy().into_owned(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(command: &[&str]) -> String {
        default_label(&command.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn labels_name_the_server_not_the_interpreter() {
        assert_eq!(
            label(&[
                "node",
                "/x/node_modules/@m/server-filesystem/dist/index.js",
                "/tmp"
            ]),
            "node server-filesystem"
        );
        assert_eq!(
            label(&["npx", "-y", "@modelcontextprotocol/server-memory"]),
            "npx server-memory"
        );
        assert_eq!(label(&["python3", "-u", "tools/scan.py"]), "python3 scan");
        assert_eq!(label(&["/usr/local/bin/mcp-git", "--repo", "."]), "mcp-git");
    }
}
