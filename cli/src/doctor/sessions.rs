//! How many MCP sessions and client connections the daemon counts.

use rootsd_proto::wire::StatusResult;

use super::{Check, Outcome};

/// Counted by the daemon, so only when it answered.
pub(super) fn check(status: Option<&StatusResult>) -> Check {
    match status {
        Some(status) => Check::new(
            "sessions",
            Outcome::Ok,
            format!(
                "{} MCP session(s) attached, {} client connection(s) in all (this one included)",
                status.sessions, status.clients
            ),
        ),
        None => Check::new(
            "sessions",
            Outcome::Skip,
            "not counted: the daemon did not answer",
        ),
    }
}
