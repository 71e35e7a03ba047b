//! The accept loop: [`run`] serves a listener until the shutdown token fires, then drains.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use interprocess::local_socket::tokio::{Listener, Stream, prelude::*};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::registry::Registry;

/// Upper bound on concurrent connections. Each MCP session holds one, so this is sized for
/// thousands of sessions; past it, new connections wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 16_384;

/// What `status` reports about where the daemon lives.
#[derive(Clone, Debug)]
pub struct DaemonInfo {
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub socket_activated: bool,
}

/// Serves `listener` until `shutdown` is cancelled, then waits for every connection to finish
/// what it is doing and flushes the store.
///
/// Connections from another user are refused and logged. The caller owns the listener's socket
/// file and removes it afterwards if it created it.
pub async fn run(
    listener: Listener,
    registry: Arc<Registry>,
    info: DaemonInfo,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let info = Arc::new(info);
    let tracker = TaskTracker::new();
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let our_uid = rustix::process::geteuid().as_raw();
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(stream) => stream,
                Err(err) => {
                    // Running out of file descriptors is the usual cause; backing off lets
                    // existing connections finish instead of spinning.
                    tracing::warn!(error = %err, "accept failed; retrying shortly");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Some(peer) = admit(&stream, our_uid) else {
            continue;
        };
        let span = tracing::info_span!("conn", pid = peer.pid);
        let registry = registry.clone();
        let info = info.clone();
        let shutdown = shutdown.clone();
        tracker.spawn(tracing::Instrument::instrument(
            async move {
                crate::connection::serve(stream, registry, info, shutdown).await;
                drop(permit);
            },
            span,
        ));
    }
    tracing::info!(
        connections = tracker.len(),
        "no longer accepting; finishing open requests"
    );
    tracker.close();
    tracker.wait().await;
    if let Err(err) = registry.store().flush().await {
        tracing::error!(error = %err, "final flush failed");
    }
    Ok(())
}

struct Peer {
    pid: Option<i32>,
}

/// Checks the peer's credentials: only our own user may talk to the daemon.
fn admit(stream: &Stream, our_uid: u32) -> Option<Peer> {
    match stream.peer_creds() {
        Ok(creds) if creds.euid() == Some(our_uid) => Some(Peer {
            pid: creds.pid(),
        }),
        Ok(creds) => {
            tracing::warn!(
                peer_uid = ?creds.euid(),
                peer_pid = ?creds.pid(),
                "refused a connection from another user"
            );
            None
        }
        Err(err) => {
            tracing::warn!(error = %err, "refused a connection whose credentials could not be read");
            None
        }
    }
}
