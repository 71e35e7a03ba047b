//! `rootsd`: runs in the foreground, systemd style, until SIGTERM or SIGINT.

use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context as _;
use clap::Parser;
use futures::StreamExt as _;
use rootsd::args::Args;
use rootsd::error::SocketFileProblem;
use rootsd::info::{Access, DaemonInfo};
use rootsd::registry::Registry;
use rootsd::socket::SocketFile;
use rootsd::{groups, instance, reconnect, server, socket, store, systemd};
use rootsd_proto::paths::{self, Environment};
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // Everything rootsd creates (state directory, database, journal, log, socket) is private to
    // its user, whatever umask it inherited.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    init_logging();
    // Before the runtime starts any thread: taking the socket edits the environment.
    let inherited = match socket::take_inherited() {
        Ok(inherited) => inherited,
        Err(err) => return fail(&err.into()),
    };
    // The workers say when they park, so that the commit thread syncs a burst of changes once
    // they have planned all of it (`store::activity`).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(rootsd::store::worker_parked)
        .on_thread_unpark(rootsd::store::worker_unparked)
        .build()
        .expect("failed to start the tokio runtime");
    match runtime.block_on(daemon(args, inherited)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => fail(&err),
    }
}

/// Reports a failed start once, on stderr (which the journal or rootsd.log keeps): a log line
/// as well would only say it twice.
fn fail(err: &anyhow::Error) -> std::process::ExitCode {
    eprintln!("rootsd: error: {err:#}");
    std::process::ExitCode::FAILURE
}

async fn daemon(args: Args, inherited: Option<UnixListener>) -> anyhow::Result<()> {
    let env = Environment::capture(rustix::process::getuid().as_raw());
    let (state_dir, state_dir_source) = paths::state_dir_and_source(&env, args.state_dir)?;
    let socket_path = paths::socket_path(&env, args.socket, Some(&state_dir));
    let access = if args.allow_group {
        anyhow::ensure!(
            inherited.is_some(),
            "--allow-group needs the socket from systemd (the units in systemd/system/ create it with SocketGroup= and SocketMode=0660); a socket rootsd binds itself is 0600, which only its own user can open"
        );
        Access::OwnerOrSocketGroup
    } else {
        Access::Owner
    };
    let admin_group = args
        .admin_group
        .as_deref()
        .map(|group| groups::resolve(group, std::path::Path::new(groups::GROUP_FILE)))
        .transpose()?;

    // A socket rootsd must refuse is refused before the state directory is touched.
    if inherited.is_none() && !args.recover {
        socket::check_path(&socket_path)?;
    }
    let mut lock = instance::acquire(&state_dir)?;
    if args.recover {
        let recovered = tokio::task::spawn_blocking(move || store::recover(&state_dir))
            .await
            .context("the recovery did not finish")??;
        let message = format!(
            "recovered {}: {}",
            recovered.contents().describe(),
            recovered.outcome().describe()
        );
        tracing::info!("{message}");
        eprintln!("rootsd: {message}");
        return Ok(());
    }
    let opened = {
        let state_dir = state_dir.clone();
        tokio::task::spawn_blocking(move || store::open(&state_dir))
            .await
            .context("opening the store did not finish")??
    };
    tracing::info!(
        contents = %opened.contents().describe(),
        "store opened: {}",
        opened.outcome().describe()
    );
    let registry = Arc::new(Registry::new(opened)?);
    // Before the socket accepts anyone: a proxy that reconnects at once is recognised.
    registry.expect_previous(reconnect::load(&state_dir));
    let bound = match inherited {
        Some(listener) => socket::adopt(listener, &socket_path)?,
        None => socket::bind(&socket_path, &state_dir)?,
    };
    lock.record_socket(&bound.path)?;
    instance::leave_pointer(&env, &state_dir, state_dir_source);
    raise_fd_limit();

    let shutdown = CancellationToken::new();
    let (rebound, replacements) = tokio::sync::mpsc::channel(4);
    let reload = Reload {
        socket: bound.file(),
        state_dir: state_dir.clone(),
        rebound,
    };
    let signals =
        watch_signals(shutdown.clone(), reload).context("failed to install signal handlers")?;
    let info = DaemonInfo {
        socket: bound.path.clone(),
        state_dir: state_dir.clone(),
        socket_activated: bound.activated,
        access,
        admin_group: admin_group.clone(),
    };
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        socket = %bound.path.display(),
        state_dir = %state_dir.display(),
        socket_activated = bound.activated,
        allow_group = args.allow_group,
        admin_group = admin_group.as_ref().map(|g| g.to_string()),
        "rootsd is ready"
    );
    systemd::ready(&format!("accepting on {}", bound.path.display()));
    let supervisor = tokio::spawn(systemd::supervise(registry.clone(), shutdown.clone()));
    let recorder = tokio::spawn(rootsd::registry::keep_record(
        registry.clone(),
        state_dir.clone(),
        shutdown.clone(),
    ));

    // `run` takes the listener by value; the socket file's clean-up stays with `bound`.
    let (listener, closer) = bound.split();
    let served = server::run_replaceable(
        listener,
        replacements,
        registry,
        info,
        shutdown.clone(),
        server::Tuning::default(),
    )
    .await;
    closer.close();
    signals.close();
    let _ = supervisor.await;
    let _ = recorder.await;
    served.context("the store's final checkpoint failed; every acknowledged change is in the journal, and the next start catches the database up")?;
    tracing::info!("rootsd stopped");
    Ok(())
}

/// SIGTERM and SIGINT start a graceful shutdown; a second one exits at once. SIGHUP (what
/// `systemctl reload` sends) never stops the daemon: rootsd has no configuration file, so what it
/// re-reads is the state of its socket file, which a clean-up of the runtime directory or a
/// careless `rm` can remove while the daemon keeps listening on a name nobody can reach; then
/// it binds the socket anew.
fn watch_signals(
    shutdown: CancellationToken,
    reload: Reload,
) -> std::io::Result<signal_hook_tokio::Handle> {
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
                reload.run();
                continue;
            }
            tracing::info!(signal, "shutting down");
            systemd::stopping();
            shutdown.cancel();
        }
    });
    Ok(handle)
}

/// What SIGHUP needs: the socket file to re-check, and where to bind it anew.
struct Reload {
    socket: SocketFile,
    state_dir: std::path::PathBuf,
    /// The accept loop's replacement listeners.
    rebound: tokio::sync::mpsc::Sender<interprocess::local_socket::tokio::Listener>,
}

impl Reload {
    /// Re-checks the socket file and says what was found; binds a socket rootsd bound itself
    /// anew if its file is gone. A file someone replaced is not ours to remove, and systemd's
    /// socket is systemd's to recreate: for those the warning says what to do.
    fn run(&self) {
        let path = self.socket.path().display();
        match self.socket.check() {
            Ok(()) => tracing::info!(
                socket = %path,
                "SIGHUP: reloaded; the socket file is in place and rootsd is still serving"
            ),
            Err(SocketFileProblem::Missing { .. }) if self.socket.is_ours() => {
                match socket::rebind(&self.socket, &self.state_dir) {
                    Ok(listener) => match self.rebound.try_send(listener) {
                        Ok(()) => tracing::info!(
                            socket = %path,
                            "SIGHUP: reloaded; the socket file was gone, so rootsd bound it anew and new clients reach it again"
                        ),
                        Err(_) => tracing::warn!(
                            socket = %path,
                            "SIGHUP: reloaded; the socket file was gone and was bound anew, but the accept loop did not take it: restart rootsd"
                        ),
                    },
                    Err(error) => tracing::warn!(
                        socket = %path,
                        "SIGHUP: reloaded; the socket file is gone and binding it anew failed ({error}): restart rootsd"
                    ),
                }
            }
            Err(problem) => tracing::warn!("SIGHUP: reloaded; {problem}"),
        }
    }
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
