//! Talking to systemd: `READY=1`, `STATUS=`, `STOPPING=1` and the watchdog.
//!
//! Every function here is a no-op when `NOTIFY_SOCKET` is unset, so the same binary runs the
//! same way with or without systemd.

use std::sync::Arc;
use std::time::Duration;

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;

use crate::registry::Registry;

fn send(states: &[NotifyState<'_>]) {
    if let Err(err) = sd_notify::notify(states) {
        tracing::warn!(error = %err, "could not notify systemd");
    }
}

/// The store is open and the listener accepts: tell systemd we are ready.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// Shutdown has begun.
pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// A human-readable status line for `systemctl status`.
pub fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

/// Keeps systemd's status line and watchdog fed until `shutdown` fires.
///
/// The watchdog is pinged only after a cheap check that the registry still answers, so a wedged
/// daemon stops pinging and systemd restarts it.
pub async fn supervise(registry: Arc<Registry>, shutdown: CancellationToken) {
    let watchdog = sd_notify::watchdog_enabled();
    let period = watchdog.map_or(Duration::from_secs(5), |w| {
        (w / 2).max(Duration::from_millis(100))
    });
    let mut ticker = tokio::time::interval(period);
    let mut last_status = String::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let (revision, roots, workspaces) = registry.totals().await;
        let line = format!(
            "serving {roots} roots in {workspaces} workspaces to {} sessions (revision {revision})",
            registry.session_count()
        );
        if line != last_status {
            status(&line);
            last_status = line;
        }
        if watchdog.is_some() {
            send(&[NotifyState::Watchdog]);
        }
    }
}
