//! Whether the daemon's store takes changes: a failed write (a full disk, an I/O error) leaves it
//! degraded until a later write succeeds.

use rootsd_proto::wire::{StatusResult, StoreState};

use super::{Check, Outcome};

const NAME: &str = "store";

/// Reported by the daemon, so only when it answered.
pub(super) fn check(status: Option<&StatusResult>) -> Check {
    let Some(status) = status else {
        return Check::new(NAME, Outcome::Skip, "not known: the daemon did not answer");
    };
    match status.store.state {
        StoreState::Ok => Check::new(
            NAME,
            Outcome::Ok,
            format!(
                "every change is synced to the journal in {} before it is acknowledged",
                status.state_dir
            ),
        ),
        StoreState::Degraded => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "degraded{}: {}",
                status
                    .store
                    .since_unix
                    .map(|since| format!(" since {}", crate::output::unix_time(since)))
                    .unwrap_or_default(),
                status.store.problem.as_deref().unwrap_or("a write failed")
            ),
        )
        .fix(format!(
            "make room on the disk holding {} (df -h), or check it for errors (dmesg); rootsd retries with the next change and heals by itself once writes succeed",
            status.state_dir
        )),
    }
}
