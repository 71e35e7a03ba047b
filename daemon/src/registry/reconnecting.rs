//! Where the session table meets [`crate::reconnect`]: the previous run's sessions expected
//! back after a start, what the record of live sessions holds, and the task that keeps that
//! record ([`keep_record`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use rootsd_proto::WorkspaceName;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Registry;
use crate::limits::SESSION_RECORD_DEBOUNCE;
use crate::reconnect::{self, Expected, RECORD_FILE, RecordedSession};

impl Registry {
    /// Expects back the sessions of the previous run that `loaded` names ([`crate::reconnect`]),
    /// for the reconnection window from the daemon's start.
    pub fn expect_previous(&self, loaded: reconnect::Loaded) {
        if let reconnect::Loaded::Unreadable(why) = &loaded {
            tracing::warn!(
                "cannot read the record of the previous run's sessions ({why}); `wait` says it cannot know which sessions are reconnecting for {}s",
                crate::limits::RECONNECT_WINDOW.as_secs()
            );
        }
        let expected = Expected::from_record(loaded, self.started, reconnect::runs);
        let count = expected.still_expected(Instant::now()).count();
        if count > 0 {
            tracing::info!(
                sessions = count,
                "expecting the previous run's live sessions back for {}s",
                crate::limits::RECONNECT_WINDOW.as_secs()
            );
        }
        *self.expected.lock().expect("expected lock") = expected;
    }

    /// When the reconnection window closes.
    pub fn expected_until(&self) -> Instant {
        self.expected.lock().expect("expected lock").until()
    }

    /// Where `workspace`'s sessions of the previous run stand now.
    pub fn returning(&self, workspace: &WorkspaceName) -> reconnect::Returning {
        self.expected
            .lock()
            .expect("expected lock")
            .of(workspace, Instant::now())
    }

    /// Resolves, through [`watch::Receiver::changed`], each time a session registers or goes
    /// away.
    pub fn subscribe_session_table(&self) -> watch::Receiver<u64> {
        self.session_table.subscribe()
    }

    /// What the record of live sessions holds now: every live session that has an instance id,
    /// and, while the reconnection window is open, the previous run's sessions not back yet (a
    /// restart within the window must expect them too).
    pub fn session_record(&self) -> Vec<RecordedSession> {
        let mut record: Vec<RecordedSession> = {
            let sessions = self.sessions.lock().expect("sessions lock");
            sessions
                .values()
                .filter(|s| !s.instance.is_empty())
                .map(|s| RecordedSession {
                    instance: s.instance.clone(),
                    workspace: s.workspace.clone(),
                    label: crate::store::bounded_text(&s.label),
                    pid: s.pid,
                    kernel_pid: s.peer.pid,
                })
                .collect()
        };
        let expected = self.expected.lock().expect("expected lock");
        record.extend(expected.still_expected(Instant::now()).cloned());
        record
    }

    pub(super) fn session_table_changed(&self) {
        self.session_table
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }
}

/// Keeps the record in `state_dir` up to date with `registry`'s session table until `shutdown`:
/// a write a moment after each change (changes meanwhile join it), and one when the
/// reconnection window closes, which drops the sessions that never came back.
pub async fn keep_record(registry: Arc<Registry>, state_dir: PathBuf, shutdown: CancellationToken) {
    let mut changes = registry.subscribe_session_table();
    let window_closes = tokio::time::Instant::from_std(registry.expected_until());
    let mut window_closed = false;
    let mut warned = false;
    loop {
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            () = tokio::time::sleep_until(window_closes), if !window_closed => window_closed = true,
            () = shutdown.cancelled() => return,
        }
        tokio::select! {
            () = tokio::time::sleep(SESSION_RECORD_DEBOUNCE) => {}
            () = shutdown.cancelled() => return,
        }
        changes.borrow_and_update();
        let sessions = registry.session_record();
        if shutdown.is_cancelled() {
            return;
        }
        let dir = state_dir.clone();
        let written = tokio::task::spawn_blocking(move || reconnect::write(&dir, &sessions)).await;
        match written {
            Ok(Ok(())) => warned = false,
            Ok(Err(err)) if !warned => {
                warned = true;
                tracing::warn!(
                    error = %err,
                    "cannot write the record of live sessions ({RECORD_FILE} in the state directory); after a restart, `wait` will not know which sessions to expect back"
                );
            }
            Ok(Err(_)) | Err(_) => {}
        }
    }
}
