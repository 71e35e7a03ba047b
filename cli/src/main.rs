//! `rootsctl`: parses the command line, runs one subcommand, and maps failures to the documented
//! exit statuses.

use std::io::{self, Write as _};
use std::process::ExitCode;

use clap::{CommandFactory as _, Parser as _};
use rootsctl::args::{Cli, Command};
use rootsctl::autostart::Target;
use rootsctl::client::ClientError;
use rootsctl::resolve::ResolveError;
use rootsctl::{UsageError, commands, exit};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let target = Target::new(cli.socket.clone(), cli.no_autostart);
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let result = match cli.command {
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "rootsctl", &mut out);
            Ok(())
        }
        command => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("failed to start the tokio runtime");
            runtime.block_on(run(command, &target, &mut out))
        }
    };
    let result = result.and_then(|()| out.flush().map_err(anyhow::Error::from));
    match result {
        Ok(()) => ExitCode::from(exit::OK),
        Err(err) if is_broken_pipe(&err) => ExitCode::from(exit::OK),
        Err(err) => {
            eprintln!("rootsctl: error: {err:#}");
            ExitCode::from(exit_code(&err))
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
        Command::Completions { .. } => unreachable!("handled without a runtime"),
    }
}

fn exit_code(err: &anyhow::Error) -> u8 {
    if let Some(client) = err.downcast_ref::<ClientError>() {
        return client.exit_code();
    }
    if err.downcast_ref::<UsageError>().is_some() {
        return exit::USAGE;
    }
    if err.downcast_ref::<ResolveError>().is_some() {
        return exit::REFUSED;
    }
    exit::REFUSED
}

/// A reader that went away (`rootsctl list | head -1`) is not an error.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}
