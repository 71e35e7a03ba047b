//! `rootsd`: runs in the foreground, systemd style, until SIGTERM or SIGINT.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context as _;
use clap::Parser;
use futures::StreamExt as _;
use rootsd::registry::Registry;
use rootsd::server::DaemonInfo;
use rootsd::store::Store;
use rootsd::{instance, server, socket, systemd};
use rootsd_proto::paths::{self, Environment};
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// The rootsd daemon: keeps MCP workspace roots and serves them over a local socket.
///
/// Runs in the foreground and logs to stderr (RUST_LOG filters, info by default). Under systemd
/// it adopts the socket from rootsd.socket and reports readiness; otherwise it binds its own.
/// rootsctl starts it on demand when it is not running.
#[derive(Debug, Parser)]
#[command(name = "rootsd", version)]
struct Args {
    /// Socket path [default: $XDG_RUNTIME_DIR/rootsd/rootsd.sock, else ${TMPDIR:-/tmp}/rootsd-$UID/rootsd.sock]
    #[arg(long, env = "ROOTSD_SOCKET", value_name = "PATH")]
    socket: Option<PathBuf>,
    /// State directory holding the database [env: ROOTSD_STATE_DIR] [default: $STATE_DIRECTORY, else $XDG_STATE_HOME/rootsd, else ~/.local/state/rootsd]
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    init_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("failed to start the tokio runtime");
    match runtime.block_on(daemon(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("rootsd: error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn daemon(args: Args) -> anyhow::Result<()> {
    let env = Environment::capture(rustix::process::getuid().as_raw());
    let socket_path = paths::socket_path(&env, args.socket);
    let state_dir = paths::state_dir(&env, args.state_dir)?;

    let inherited = socket::inherited(&socket_path)?;
    let _lock = instance::acquire(&state_dir, &socket_path)?;
    let store = Store::open(&state_dir.join("db"))?;
    let registry = Arc::new(Registry::new(store)?);
    let bound = match inherited {
        Some(bound) => bound,
        None => socket::bind(&socket_path, &state_dir)?,
    };
    raise_fd_limit();

    let shutdown = CancellationToken::new();
    let signals = watch_signals(shutdown.clone()).context("failed to install signal handlers")?;
    let info = DaemonInfo {
        socket: bound.path.clone(),
        state_dir: state_dir.clone(),
        socket_activated: bound.activated,
    };
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        socket = %bound.path.display(),
        state_dir = %state_dir.display(),
        socket_activated = bound.activated,
        "rootsd is ready"
    );
    systemd::ready(&format!("accepting on {}", bound.path.display()));
    let supervisor = tokio::spawn(systemd::supervise(registry.clone(), shutdown.clone()));

    // `run` takes the listener by value; the socket file's clean-up stays with `bound`.
    let (listener, closer) = bound.split();
    let served = server::run(listener, registry, info, shutdown.clone()).await;
    closer.close();
    signals.close();
    let _ = supervisor.await;
    served.context("the accept loop failed")?;
    tracing::info!("rootsd stopped");
    Ok(())
}

/// SIGTERM and SIGINT start a graceful shutdown; a second one exits at once. SIGHUP is logged and
/// never stops the daemon: rootsd has no configuration file, so there is nothing to re-read
/// beyond the log filter, which is fixed at start.
fn watch_signals(shutdown: CancellationToken) -> std::io::Result<signal_hook_tokio::Handle> {
    let forced = Arc::new(AtomicBool::new(false));
    for sig in [SIGTERM, SIGINT] {
        // Registered first, so that it sees the flag before the second handler sets it: the
        // first signal only sets the flag, the second exits.
        signal_hook::flag::register_conditional_shutdown(sig, 1, forced.clone())?;
        signal_hook::flag::register(sig, forced.clone())?;
    }
    let mut signals = signal_hook_tokio::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    let handle = signals.handle();
    tokio::spawn(async move {
        while let Some(signal) = signals.next().await {
            if signal == SIGHUP {
                tracing::info!("SIGHUP received: nothing to reload; still serving");
                continue;
            }
            tracing::info!(signal, "shutting down");
            systemd::stopping();
            shutdown.cancel();
        }
    });
    Ok(handle)
}

/// Each MCP session holds a connection, so the soft file-descriptor limit (often 1024) would cap
/// sessions well below what the daemon can serve. Raise it to the hard limit.
fn raise_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if let Err(err) = setrlimit(Resource::Nofile, raised) {
            tracing::debug!(error = %err, "could not raise the file-descriptor limit");
        }
    }
}

fn init_logging() {
    use std::io::IsTerminal as _;
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env_lossy();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // journald stamps each line itself; a second timestamp is noise.
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().init();
    } else {
        builder.init();
    }
}
