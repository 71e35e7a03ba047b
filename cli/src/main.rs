//! `rootsctl`: parses the command line, runs one subcommand, and exits with the documented status
//! that [`rootsctl::errors::exit_status`] decides.

use std::io::{self, Write as _};
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _};
use rootsctl::args::{self, Cli, Command};
use rootsctl::errors::{self, Exit};
use rootsctl::{commands, output};
use rootsd_client::autostart::Target;

fn main() -> ExitCode {
    // The keeper of a proxy's server (`rootsctl proxy`) is this binary started again, before
    // any of the command line is parsed.
    let own: Vec<std::ffi::OsString> = std::env::args_os().take(2).collect();
    if rootsd_proxy::keeper::requested(&own) {
        rootsd_proxy::keeper::main(&std::env::args_os().collect::<Vec<_>>());
    }
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches)
        .map_err(|err| err.format(&mut Cli::command()))
        .unwrap_or_else(|err| err.exit());
    let settings = args::refuse_empty_settings(
        cli.socket.as_deref(),
        matches.value_source("socket"),
        |name| std::env::var_os(name),
    );
    let target = Target::new(cli.socket.clone(), cli.no_autostart, cli.daemon_timeout);
    // The proxy writes MCP messages through tokio's stdout, which needs the same lock: only
    // the other commands may hold it.
    let result = match (cli.command, target) {
        (Command::Completions { shell }, _) => completions(shell),
        _ if settings.is_err() => settings.map_err(anyhow::Error::from),
        // It edits files only: neither the daemon nor the configuration file is needed.
        (Command::Hosts(args), _) => {
            let mut out = io::stdout().lock();
            rootsd_hosts::run(args, cli.socket, args::is_proxy, &mut out)
                .and_then(|()| out.flush().map_err(anyhow::Error::from))
        }
        (_, Err(config)) => Err(config.into()),
        (Command::Proxy(args), Ok(target)) => {
            let runtime = runtime();
            let result = runtime
                .block_on(rootsd_proxy::run(&target, args))
                .and_then(errors::ServerExit::into_result);
            // The read of our stdin runs on a blocking thread that cannot be cancelled; when the
            // server exits first, the host may still hold stdin open, and waiting for that read
            // would keep the proxy alive after its server is gone.
            runtime.shutdown_background();
            result
        }
        (command, Ok(target)) => {
            let mut out = io::stdout().lock();
            runtime()
                .block_on(run(command, &target, &mut out))
                .and_then(|()| out.flush().map_err(anyhow::Error::from))
        }
    };
    match result {
        Ok(()) => ExitCode::from(Exit::Success.code()),
        Err(err) => {
            if !errors::is_silent(&err) {
                // Messages may quote a path, a name or what a daemon or server said.
                let message = format!("{err:#}");
                eprintln!("rootsctl: error: {}", output::escape_controls(&message));
            }
            ExitCode::from(errors::exit_status(&err))
        }
    }
}

async fn run(command: Command, target: &Target, out: &mut impl io::Write) -> anyhow::Result<()> {
    match command {
        Command::Add(args) => commands::add(target, args, out).await,
        Command::Remove(args) => commands::remove(target, args, out).await,
        Command::List(args) => commands::list(target, args, out).await,
        Command::Workspaces(args) => commands::workspaces(target, args, out).await,
        Command::Status(args) => commands::status(target, args, out).await,
        Command::Watch(args) => commands::watch(target, args, out).await,
        Command::Sessions(args) => commands::sessions(target, args, out).await,
        Command::Log(args) => rootsctl::log::run(target, args, out).await,
        Command::Doctor(args) => rootsctl::doctor::run(target, args, out).await,
        Command::Proxy(_) | Command::Hosts(_) | Command::Completions { .. } => {
            unreachable!("handled in main, which owns stdout for them")
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("failed to start the tokio runtime")
}

/// clap_complete panics on a write error, so the script is built in memory and written here,
/// where a closed pipe is an ordinary error.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "rootsctl", &mut script);
    let mut out = io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(())
}
