//! `rootsctl proxy --host-roots MODE`: what a session does with its host's own roots (the folders
//! an editor has open), which the proxy otherwise keeps from the server.
//!
//! - [`HostRootsMode::Replace`]: the server sees the workspace's roots only (the default);
//! - [`HostRootsMode::Merge`]: the server sees the workspace's roots and the host's, each URI
//!   once ([`union`]); nothing of the host's reaches the daemon;
//! - [`HostRootsMode::Publish`]: the host's roots become part of the workspace for as long as the
//!   session lasts, so every session and `rootsctl list` see them.
//!
//! A host's list is taken as it comes only after [`accept`]: every URI canonical, named, once,
//! and no more than [`MAX_HOST_ROOTS`]; roots that are not local `file://` URIs are left out and
//! counted, since one such root makes real servers reject a whole list.
//!
//! Everything here is pure. Asking the host is the proxy's relay's job; storing published roots
//! the daemon's.

use serde::{Deserialize, Serialize};

use crate::root::{self, Root};

/// How many roots of a host a session takes; the rest are ignored and counted. Far above any
/// editor's open folders, and small enough that a publication stays well below the control
/// protocol's line limit.
pub const MAX_HOST_ROOTS: usize = 1024;

/// What a session does with its host's roots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostRootsMode {
    /// The workspace's roots replace the host's: the host is never asked.
    #[default]
    Replace,
    /// The server sees the workspace's roots and the host's.
    Merge,
    /// The host's roots join the workspace while the session lasts.
    Publish,
}

impl HostRootsMode {
    pub fn name(self) -> &'static str {
        match self {
            Self::Replace => "replace",
            Self::Merge => "merge",
            Self::Publish => "publish",
        }
    }
}

/// Where a session stands with its host's roots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostAnswer {
    /// Not asked (yet): in `replace` mode always; in the handshake era until the host's
    /// `notifications/initialized`; in 2026-07-28 until the server first asks for roots.
    #[default]
    NotAsked,
    /// The host declared no `roots` capability, so it has none to give.
    NotDeclared,
    /// Asked; the answer has not come.
    Asking,
    /// The host answered; `roots` counts what it gave.
    Answered,
    /// The host did not answer in time; the last list it gave (if any) still counts.
    NoAnswer,
    /// The host answered with an error, or with something that is not a list of roots; the last
    /// list it gave (if any) still counts.
    Refused,
}

/// A session's host roots, as its proxy reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRoots {
    #[serde(default)]
    pub mode: HostRootsMode,
    #[serde(default)]
    pub host: HostAnswer,
    /// How many roots the host gave last (after [`accept`]).
    #[serde(default)]
    pub roots: u64,
    /// How many it gave that were left out: not local `file://` URIs, or past [`MAX_HOST_ROOTS`].
    #[serde(default)]
    pub ignored: u64,
}

impl HostRoots {
    pub fn new(mode: HostRootsMode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }

    /// A short account for a table: `replace`, `merge 3`, `publish 2 (1 ignored)`,
    /// `merge (host declared no roots)`, …
    pub fn summary(&self) -> String {
        let mode = self.mode.name();
        if self.mode == HostRootsMode::Replace {
            return mode.to_owned();
        }
        let ignored = if self.ignored > 0 {
            format!(", {} ignored", self.ignored)
        } else {
            String::new()
        };
        match self.host {
            HostAnswer::Answered => format!("{mode} {}{ignored}", self.roots),
            HostAnswer::NotAsked => format!("{mode} (not asked yet)"),
            HostAnswer::NotDeclared => format!("{mode} (host declared no roots)"),
            HostAnswer::Asking => format!("{mode} (asking)"),
            HostAnswer::NoAnswer => format!("{mode} {} (host did not answer{ignored})", self.roots),
            HostAnswer::Refused => format!("{mode} {} (host refused{ignored})", self.roots),
        }
    }
}

/// A host's list as a session takes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accepted {
    /// Canonical URIs, each once (the first mention wins), named (after the directory when the
    /// host gave no name), in the host's order.
    pub roots: Vec<Root>,
    /// Roots left out: not local `file://` URIs, or past [`MAX_HOST_ROOTS`].
    pub ignored: u64,
}

/// Takes a host's list: canonical, named, deduplicated and bounded.
pub fn accept(roots: &[Root]) -> Accepted {
    let mut accepted = Accepted::default();
    for host_root in roots {
        let Ok(path) = root::path_from_uri(&host_root.uri) else {
            accepted.ignored += 1;
            continue;
        };
        let Ok(uri) = root::uri_from_path(&path) else {
            accepted.ignored += 1;
            continue;
        };
        if accepted.roots.iter().any(|r| r.uri == uri) {
            continue;
        }
        if accepted.roots.len() == MAX_HOST_ROOTS {
            accepted.ignored += 1;
            continue;
        }
        let name = host_root
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| root::default_name(&path));
        accepted.roots.push(Root {
            uri,
            name: Some(name),
        });
    }
    accepted
}

/// The workspace's roots followed by the host's that it lacks: a URI present in both is the
/// workspace's, name and place. Both lists must be canonical (the daemon's are; [`accept`]
/// makes a host's so).
pub fn union(workspace: &[Root], host: &[Root]) -> Vec<Root> {
    let mut all = workspace.to_vec();
    for root in host {
        if !all.iter().any(|r| r.uri == root.uri) {
            all.push(root.clone());
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(uri: &str, name: Option<&str>) -> Root {
        Root {
            uri: uri.to_owned(),
            name: name.map(str::to_owned),
        }
    }

    #[test]
    fn a_hosts_list_is_made_canonical_named_and_unique() {
        let accepted = accept(&[
            root("FILE://localhost/home/u/app/", Some("App")),
            root("file:///home/u/app", Some("again")),
            root("file:///home/u/a%20b", None),
            root("file:///home/u/empty", Some("")),
            root("https://example.com/x", Some("web")),
            root("file://server/share", None),
            root("not a uri", None),
        ]);
        assert_eq!(
            accepted.roots,
            vec![
                root("file:///home/u/app", Some("App")),
                root("file:///home/u/a%20b", Some("a b")),
                root("file:///home/u/empty", Some("empty")),
            ]
        );
        assert_eq!(accepted.ignored, 3);
    }

    #[test]
    fn a_hosts_list_is_bounded() {
        let many: Vec<Root> = (0..MAX_HOST_ROOTS + 5)
            .map(|i| root(&format!("file:///r/{i}"), None))
            .collect();
        let accepted = accept(&many);
        assert_eq!(accepted.roots.len(), MAX_HOST_ROOTS);
        assert_eq!(accepted.ignored, 5);
    }

    #[test]
    fn the_union_keeps_the_workspaces_entry_and_order() {
        let workspace = [
            root("file:///w/a", Some("a")),
            root("file:///w/b", Some("b")),
        ];
        let host = [
            root("file:///h/x", Some("x")),
            root("file:///w/a", Some("host's name")),
        ];
        assert_eq!(
            union(&workspace, &host),
            vec![
                root("file:///w/a", Some("a")),
                root("file:///w/b", Some("b")),
                root("file:///h/x", Some("x")),
            ]
        );
    }

    #[test]
    fn summaries_say_what_is_known() {
        let mut state = HostRoots::new(HostRootsMode::Merge);
        assert_eq!(state.summary(), "merge (not asked yet)");
        state.host = HostAnswer::Answered;
        state.roots = 3;
        assert_eq!(state.summary(), "merge 3");
        state.ignored = 1;
        assert_eq!(state.summary(), "merge 3, 1 ignored");
        state.host = HostAnswer::NotDeclared;
        assert_eq!(state.summary(), "merge (host declared no roots)");
        assert_eq!(HostRoots::default().summary(), "replace");
        let parsed: HostRoots = serde_json::from_str("{}").unwrap();
        assert_eq!(parsed, HostRoots::default());
        assert_eq!(
            serde_json::to_value(HostRoots::new(HostRootsMode::Publish)).unwrap(),
            serde_json::json!({"mode":"publish","host":"not_asked","roots":0,"ignored":0})
        );
    }
}
