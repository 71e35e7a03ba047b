//! Talking to systemd: `READY=1`, `STATUS=`, `STOPPING=1` and the watchdog.
//!
//! Every function here is a no-op when `NOTIFY_SOCKET` is unset, so the same binary runs the
//! same way with or without systemd.

use std::sync::Arc;
use std::time::Duration;

use sd_notify::NotifyState;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::registry::Registry;

/// The shortest gap between two `STATUS=` updates. A burst of changes (a thousand sessions
/// connecting at once) then costs systemd a handful of messages, and the line still follows the
/// counts within a tenth of a second.
const STATUS_MIN_GAP: Duration = Duration::from_millis(100);

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

/// How often systemd expects a `WATCHDOG=1`, if it does: `WatchdogSec=` sets `WATCHDOG_USEC`,
/// and `WATCHDOG_PID` (when present) must name this process. A zero interval is invalid
/// (sd_watchdog_enabled(3) rejects it too), so it means no watchdog.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().filter(|interval| !interval.is_zero())
}

/// Keeps systemd's status line and watchdog fed until `shutdown` fires.
///
/// The status line is rewritten when the registry reports a change, never on a timer, so an
/// idle daemon sends nothing unless the watchdog is on. The watchdog is pinged every half
/// interval, but only after a cheap check that the registry still answers, so a wedged daemon
/// stops pinging and systemd restarts it.
pub async fn supervise(registry: Arc<Registry>, shutdown: CancellationToken) {
    let watchdog = watchdog_interval();
    if let Some(interval) = watchdog {
        tracing::info!(
            interval_ms = interval.as_millis(),
            "systemd's watchdog is on; pinging it every half interval"
        );
    }
    // `interval` panics on a zero period; the watchdog's is never zero, and the placeholder
    // for "no watchdog" never ticks because its branch is disabled.
    let mut ticker = tokio::time::interval(watchdog.map_or(Duration::from_secs(3600), |w| {
        (w / 2).max(Duration::from_millis(1))
    }));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut changes = registry.subscribe_counts();
    let mut changes_open = true;
    // The first status line goes out at once, then at most one per `STATUS_MIN_GAP`.
    let mut pending = true;
    let mut not_before = Instant::now();
    let mut last_status = String::new();
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            _ = ticker.tick(), if watchdog.is_some() => {
                // Taking the model's lock is the health check: it fails to return if a writer
                // is stuck, and then systemd stops hearing from us.
                let _ = registry.totals().await;
                send(&[NotifyState::Watchdog]);
            }
            () = tokio::time::sleep_until(not_before), if pending => {
                pending = false;
                let line = status_line(&registry).await;
                if line != last_status {
                    status(&line);
                    last_status = line;
                }
                not_before = Instant::now() + STATUS_MIN_GAP;
            }
            changed = changes.changed(), if changes_open && !pending => {
                // The registry owns the sender for as long as we hold it, so the channel never
                // closes; if it did, the counts could no longer change either.
                changes_open = changed.is_ok();
                pending = changes_open;
            }
        }
    }
}

async fn status_line(registry: &Registry) -> String {
    let (revision, roots, workspaces) = registry.totals().await;
    format!(
        "serving {roots} roots in {workspaces} workspaces to {} sessions (revision {revision})",
        registry.session_count()
    )
}
