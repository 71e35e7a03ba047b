//! `rootsctl add|remove --wait`: MCP's `list_changed` has no acknowledgement, so rootsd gives
//! one, and this is how it is told: who fetched the change, who fetches on use, and, right after
//! rootsd restarted, which sessions of its previous run did not come back.

use std::io::Write;

use anyhow::bail;
use rootsd_proto::wire::{ChangeResult, PreviousSession, SessionInfo, WaitForSessions, WaitParams};

use crate::errors::WaitTimeout;
use crate::output::escape;

/// `--wait`: MCP's list_changed has no acknowledgement, so rootsd gives one: it reports when
/// every notified session has fetched the list of this change.
pub async fn wait_for_sessions(
    client: &mut crate::client::Client,
    change: &ChangeResult,
    timeout_secs: f64,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let timeout_ms = (timeout_secs.max(0.0) * 1000.0) as u64;
    let result = client
        .call::<WaitForSessions>(&WaitParams {
            workspace: change.workspace.clone(),
            revision: change.revision,
            timeout_ms,
        })
        .await?;
    // What rootsd observes is that a server was *given* the list: MCP has no acknowledgement of
    // a server having applied it, and servers apply a fetched list on their own schedule (the
    // reference filesystem server a few milliseconds later).
    let waited = result.caught_up.len() + result.lagging.len();
    let on_use = if result.on_use.is_empty() {
        String::new()
    } else {
        format!(
            "; {} session(s) fetch roots only when they need them and get it at their next request, not waited for: {}",
            result.on_use.len(),
            describe_sessions(&result.on_use)
        )
    };
    // After a restart rootsd expects its previous run's sessions back for a few seconds, and
    // says which did not come back, or that it cannot know.
    let mut previous = String::new();
    if !result.not_reconnected.is_empty() {
        previous.push_str(&format!(
            "; {} session(s) of the previous run did not reconnect after rootsd restarted: {}",
            result.not_reconnected.len(),
            describe_previous(&result.not_reconnected)
        ));
    }
    if result.previous_unknown {
        previous.push_str(
            "; rootsd started moments ago and could not read its record of the previous run's sessions, so it cannot know whether more are still reconnecting",
        );
    }
    if result.lagging.is_empty() && result.reconnecting.is_empty() {
        eprintln!(
            "{} of {waited} notified session(s) fetched revision {}{on_use}{previous}",
            result.caught_up.len(),
            change.revision
        );
        return Ok(());
    }
    out.flush()?;
    let mut missing = Vec::new();
    if !result.lagging.is_empty() {
        missing.push(format!(
            "{} of {waited} notified session(s) of workspace {} had not fetched revision {} after {timeout_secs}s: {}",
            result.lagging.len(),
            change.workspace,
            change.revision,
            describe_sessions(&result.lagging)
        ));
    }
    if !result.reconnecting.is_empty() {
        missing.push(format!(
            "{} session(s) of workspace {} from before rootsd restarted had not reconnected after {timeout_secs}s: {}",
            result.reconnecting.len(),
            change.workspace,
            describe_previous(&result.reconnecting)
        ));
    }
    bail!(WaitTimeout(format!(
        "{}{on_use}{previous}",
        missing.join("; ")
    )))
}

/// `label (pid 123), …`
fn describe_previous(sessions: &[PreviousSession]) -> String {
    sessions
        .iter()
        .map(|s| {
            let label = if s.label.is_empty() {
                "-".into()
            } else {
                escape(&s.label)
            };
            format!("{label} (pid {})", s.pid)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `session 3 (label, pid 123), …`
fn describe_sessions(sessions: &[SessionInfo]) -> String {
    sessions
        .iter()
        .map(|s| {
            let label = if s.label.is_empty() {
                "-".into()
            } else {
                escape(&s.label)
            };
            format!("session {} ({label}, pid {})", s.id, s.pid)
        })
        .collect::<Vec<_>>()
        .join(", ")
}
