//! One MCP session as its proxy sees it, and the one rule that decides whether its server is told
//! about a change.
//!
//! The proxy owns a session's state and reports all of it to the daemon whenever it changes; the
//! daemon stores the latest report as it is. Both sides then ask [`notice`] the same question:
//! the proxy to decide whether to send `notifications/roots/list_changed` now, the daemon to
//! decide which sessions `wait` and `notified_sessions` count. Neither keeps a rule of its own.

use serde::{Deserialize, Serialize};

use crate::host_roots::HostRoots;
use crate::mapping::Withheld;
use crate::workspace::WorkspaceName;

/// Which MCP protocol era a session speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Era {
    /// Not known yet: the host has not sent its first request.
    #[default]
    Unknown,
    /// 2024-11-05 … 2025-11-25: `initialize`, `roots/list`, `list_changed`.
    Handshake,
    /// 2026-07-28: no handshake; roots travel in `input_required` results.
    Stateless,
}

/// Who the server behind a session is, from its `initialize` result or a result's `_meta`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
}

/// How a session's server keeps its roots current, as the proxy has seen it behave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FetchBehaviour {
    /// Not seen yet: the server has not been notified of a change since it first fetched.
    #[default]
    Unknown,
    /// It fetched soon after a `list_changed` with no request of the host's in flight, as the
    /// reference filesystem server does. A fetch inside a host request proves nothing either
    /// way (a server that fetches on use does that too), so it never changes the classification.
    AfterNotification,
    /// It let a `list_changed` go unanswered: it asks for roots only when it needs them (inside
    /// a tool call, as fastmcp and the Python SDK's `Context` do), and sees a change then.
    OnUse,
}

/// Everything about one session that the daemon needs, as its proxy last reported it.
///
/// Every field has a default so that a report may leave out what is not known yet; the daemon
/// replaces its copy with each report and never merges two of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionState {
    /// Whether the proxy declared `roots.listChanged` to its server.
    #[serde(default)]
    pub list_changed: bool,
    #[serde(default)]
    pub era: Era,
    /// The negotiated protocol version (the `initialize` result's, or a 2026-07-28 request's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerInfo>,
    /// Whether the host's `notifications/initialized` has reached the server.
    #[serde(default)]
    pub initialized: bool,
    /// The newest store revision whose roots the server was given. With `rootsctl proxy
    /// --map`, a revision whose mapped list is the very list the server was given last counts as
    /// given: nothing it can see changed, so it is not notified, and `wait` counts it caught up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_revision: Option<u64>,
    /// How many times the server was given roots; the daemon notes the time when it grows.
    #[serde(default)]
    pub fetches: u64,
    /// A `list_changed` was sent and the server has not fetched since.
    #[serde(default)]
    pub notification_outstanding: bool,
    /// The server is owed a `list_changed`: it asked for roots while none were available and was
    /// answered with an error, which promised one once they are; or the list it holds changed
    /// in a way no revision shows (its host's roots, with `rootsctl proxy --host-roots merge`).
    #[serde(default)]
    pub owes_notification: bool,
    /// How many `list_changed` notifications the proxy has sent.
    #[serde(default)]
    pub notifications_sent: u64,
    #[serde(default)]
    pub fetch_behaviour: FetchBehaviour,
    /// The roots of the workspace the server was not given (`rootsctl proxy --map`), counted by
    /// reason, the first few listed. Without `--map` nothing is withheld.
    #[serde(default, skip_serializing_if = "Withheld::is_empty")]
    pub withheld: Withheld,
    /// What the session does with its host's own roots (`rootsctl proxy --host-roots`), and what
    /// it knows of them.
    #[serde(default)]
    pub host_roots: HostRoots,
    /// Whether the server's command line, environment or working directory holds the workspace
    /// (`rootsctl proxy --env`, `--cwd`, `{roots}`), and where its restarts stand. Absent for a
    /// server started as written.
    #[serde(default, skip_serializing_if = "LaunchState::is_plain")]
    pub launch: LaunchState,
}

/// A server started from a template of the workspace (`rootsctl proxy -- server {roots}`): the
/// proxy restarts it when a change alters what it is started with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchState {
    /// The server's command line, environment or working directory holds the workspace.
    #[serde(default)]
    pub templated: bool,
    /// The newest revision whose workspace the running server was started with and has caught
    /// up on: it answered the `initialize` the proxy replayed to it after a restart (or had
    /// nothing to replay), or the revision changed nothing it is started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// How many times the proxy restarted the server because the workspace changed.
    #[serde(default)]
    pub restarts: u64,
    /// Why no server runs now (it could not be started, or `{root}` has no root to name); the
    /// proxy tries again at the next change. Absent while a server runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl LaunchState {
    /// A server started as written: nothing to report.
    pub fn is_plain(&self) -> bool {
        *self == Self::default()
    }
}

/// How a session's server gets the workspace, as `rootsctl sessions` shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceVia {
    /// It asks for roots (or has not been started from a template).
    #[default]
    Roots,
    /// Its command line, environment or working directory; it never asked for roots.
    Arguments,
    /// Both: started from a template, and it asked for roots too.
    Both,
}

impl SessionState {
    /// How the server gets the workspace.
    pub fn workspace_via(&self) -> WorkspaceVia {
        match (self.launch.templated, self.fetches > 0) {
            (false, _) => WorkspaceVia::Roots,
            (true, false) => WorkspaceVia::Arguments,
            (true, true) => WorkspaceVia::Both,
        }
    }

    /// Whether `other` differs from this state in more than how many times the server fetched:
    /// a report that only counts fetches can wait, while any other change matters at once.
    pub fn differs_beyond_fetch_count(&self, other: &Self) -> bool {
        // Destructured, so that a new field cannot be forgotten here.
        let Self {
            list_changed,
            era,
            protocol_version,
            server,
            initialized,
            fetched_revision,
            fetches: _,
            notification_outstanding,
            owes_notification,
            notifications_sent,
            fetch_behaviour,
            withheld,
            host_roots,
            launch,
        } = self;
        *list_changed != other.list_changed
            || *era != other.era
            || *protocol_version != other.protocol_version
            || *server != other.server
            || *initialized != other.initialized
            || *fetched_revision != other.fetched_revision
            || *notification_outstanding != other.notification_outstanding
            || *owes_notification != other.owes_notification
            || *notifications_sent != other.notifications_sent
            || *fetch_behaviour != other.fetch_behaviour
            || *withheld != other.withheld
            || *host_roots != other.host_roots
            || *launch != other.launch
    }
}

/// `session.register`'s answer when the session's workspace does not exist: the workspaces that
/// do, for the proxy's warning.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnknownWorkspace {
    /// The first [`UnknownWorkspace::MAX_LISTED`] existing workspaces, by name.
    pub existing: Vec<WorkspaceName>,
    /// How many more exist beyond those listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more: usize,
}

impl UnknownWorkspace {
    /// How many existing workspaces a registration's answer names at most.
    pub const MAX_LISTED: usize = 16;
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
/// A session of the daemon's previous run, expected back after a restart (`wait`'s
/// `reconnecting` and `not_reconnected`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviousSession {
    pub label: String,
    pub pid: u32,
    pub workspace: WorkspaceName,
}

/// What a change of the roots to revision `newest` means for one session's server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// The server is never told: it was not promised `listChanged`, it speaks 2026-07-28 (which
    /// has no notifications), or it holds no list that could be stale.
    Never,
    /// The server already holds `newest`.
    UpToDate,
    /// The server will be told, but not yet: the host has not initialized it, or a notification
    /// is outstanding and the fetch it causes brings the newest list anyway.
    Pending,
    /// Send `notifications/roots/list_changed` now.
    Due,
}

impl Notice {
    /// Whether the server is told about `newest` (now or later): what `notified_sessions`
    /// counts.
    pub fn notified(self) -> bool {
        self != Self::Never
    }
}

/// The notification rule, for the proxy and the daemon alike.
///
/// A server hears `list_changed` only if it was promised `listChanged`, speaks the handshake era
/// (or has not said yet), and holds a list: it fetched one, or it was refused one and promised a
/// notification. One that never asked has nothing to refresh and fetches on its own after
/// `initialized`. At most one notification is outstanding, and none is sent before the host's
/// `notifications/initialized` has reached the server.
pub fn notice(state: &SessionState, newest: u64) -> Notice {
    let holds_list = state.fetched_revision.is_some() || state.owes_notification;
    if !state.list_changed || state.era == Era::Stateless || !holds_list {
        return Notice::Never;
    }
    let stale = state.owes_notification || state.fetched_revision.is_none_or(|f| f < newest);
    if !stale {
        Notice::UpToDate
    } else if !state.initialized || state.notification_outstanding {
        Notice::Pending
    } else {
        Notice::Due
    }
}

/// Whether the session's server hears of a change to `revision` at all: it is notified
/// ([`notice`]), or it is started from a template of the workspace and so is restarted when the
/// change alters what it is started with. What `notified_sessions` counts.
pub fn told(state: &SessionState, revision: u64) -> bool {
    notice(state, revision).notified() || state.launch.templated
}

/// Whether `wait` waits for this session's server to take `revision`: it is notified of the
/// change ([`notice`]) and fetches when notified, or it is started from a template (and so is
/// restarted, or left alone, by the proxy, which reports either). A server that fetches on use
/// sees the change at its next request, which may be much later, so it is not waited for.
pub fn awaited(state: &SessionState, revision: u64) -> bool {
    fetch_awaited(state, revision) || state.launch.templated
}

fn fetch_awaited(state: &SessionState, revision: u64) -> bool {
    notice(state, revision).notified() && state.fetch_behaviour != FetchBehaviour::OnUse
}

/// Whether an awaited session has caught up on `revision`: it fetched it (when a fetch is
/// awaited), and its template's server was started with it and answered the replayed
/// `initialize` (when it is started from one).
pub fn caught_up(state: &SessionState, revision: u64) -> bool {
    let fetched =
        !fetch_awaited(state, revision) || state.fetched_revision.is_some_and(|r| r >= revision);
    let launched = !state.launch.templated || state.launch.revision.is_some_and(|r| r >= revision);
    fetched && launched
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An initialized handshake session that declared `listChanged` and fetched revision 3.
    fn fetched_3() -> SessionState {
        SessionState {
            list_changed: true,
            era: Era::Handshake,
            initialized: true,
            fetched_revision: Some(3),
            fetches: 1,
            ..SessionState::default()
        }
    }

    #[test]
    fn a_server_holding_an_older_list_is_due_a_notification() {
        assert_eq!(notice(&fetched_3(), 4), Notice::Due);
        assert_eq!(notice(&fetched_3(), 3), Notice::UpToDate);
    }

    #[test]
    fn no_notification_without_list_changed_in_2026_or_without_a_list() {
        let undeclared = SessionState {
            list_changed: false,
            ..fetched_3()
        };
        let stateless = SessionState {
            era: Era::Stateless,
            ..fetched_3()
        };
        let never_fetched = SessionState {
            fetched_revision: None,
            fetches: 0,
            ..fetched_3()
        };
        for state in [undeclared, stateless, never_fetched] {
            assert_eq!(notice(&state, 4), Notice::Never, "{state:?}");
            assert!(!awaited(&state, 4));
        }
    }

    #[test]
    fn notifications_wait_for_initialized_and_for_the_outstanding_one() {
        let uninitialized = SessionState {
            initialized: false,
            ..fetched_3()
        };
        let outstanding = SessionState {
            notification_outstanding: true,
            ..fetched_3()
        };
        for state in [uninitialized, outstanding] {
            assert_eq!(notice(&state, 4), Notice::Pending, "{state:?}");
            assert!(awaited(&state, 4));
        }
    }

    #[test]
    fn a_server_refused_for_want_of_a_list_is_owed_a_notification() {
        let refused = SessionState {
            fetched_revision: None,
            fetches: 0,
            owes_notification: true,
            ..fetched_3()
        };
        assert_eq!(notice(&refused, 1), Notice::Due);
        let unknown_era = SessionState {
            era: Era::Unknown,
            ..refused
        };
        assert_eq!(notice(&unknown_era, 1), Notice::Due);
    }

    #[test]
    fn a_server_that_fetches_on_use_is_notified_but_not_waited_for() {
        let on_use = SessionState {
            fetch_behaviour: FetchBehaviour::OnUse,
            ..fetched_3()
        };
        assert_eq!(notice(&on_use, 4), Notice::Due);
        assert!(!awaited(&on_use, 4));
        let reacts = SessionState {
            fetch_behaviour: FetchBehaviour::AfterNotification,
            ..fetched_3()
        };
        assert!(awaited(&reacts, 4));
    }

    #[test]
    fn only_the_fetch_count_can_wait() {
        let more = SessionState {
            fetches: 9,
            ..fetched_3()
        };
        assert!(!fetched_3().differs_beyond_fetch_count(&more));
        let newer = SessionState {
            fetched_revision: Some(4),
            ..more.clone()
        };
        assert!(more.differs_beyond_fetch_count(&newer));
    }

    #[test]
    fn a_templated_server_is_awaited_until_it_was_started_with_the_revision() {
        let templated = SessionState {
            launch: LaunchState {
                templated: true,
                revision: Some(3),
                ..LaunchState::default()
            },
            ..SessionState::default()
        };
        // It never asked for roots, so no notification reaches it, but a restart does.
        assert_eq!(notice(&templated, 4), Notice::Never);
        assert!(told(&templated, 4) && awaited(&templated, 4));
        assert!(!caught_up(&templated, 4));
        assert!(caught_up(&templated, 3));
        assert_eq!(templated.workspace_via(), WorkspaceVia::Arguments);
        // Both ways: it must have fetched the revision too.
        let both = SessionState {
            launch: LaunchState {
                revision: Some(4),
                ..templated.launch.clone()
            },
            ..fetched_3()
        };
        assert!(!caught_up(&both, 4));
        assert!(caught_up(
            &SessionState {
                fetched_revision: Some(4),
                ..both.clone()
            },
            4
        ));
        assert_eq!(both.workspace_via(), WorkspaceVia::Both);
        assert_eq!(fetched_3().workspace_via(), WorkspaceVia::Roots);
        assert!(!told(&SessionState::default(), 4));
    }

    #[test]
    fn a_plain_launch_is_left_out_of_a_report_and_an_old_report_parses() {
        let text = serde_json::to_string(&fetched_3()).unwrap();
        assert!(!text.contains("launch"), "{text}");
        let state: SessionState =
            serde_json::from_str(r#"{"launch":{"templated":true,"restarts":2,"failure":"x"}}"#)
                .unwrap();
        assert_eq!(state.launch.restarts, 2);
        assert_eq!(state.launch.revision, None);
    }

    #[test]
    fn missing_fields_default_so_a_minimal_report_parses() {
        let state: SessionState = serde_json::from_str(r#"{"list_changed":true}"#).unwrap();
        assert!(state.list_changed);
        assert_eq!(state.era, Era::Unknown);
    }
}
