//! The change history on the wire: the `log` method's params and result, and who made a change.
//!
//! The daemon keeps its own stored form of each entry (`daemon/src/model.rs`); these types are
//! what clients see, so the two may change apart. Nothing here does I/O.

use serde::{Deserialize, Serialize};

use crate::root::Root;
use crate::workspace::WorkspaceName;

/// `log` params. Every field is optional: no params means every recorded change, newest first,
/// as many as fit in one response.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogParams {
    /// Only changes of this workspace; every workspace when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceName>,
    /// At most this many entries; as many as fit in one response when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only changes older than this store revision: the next page after a result whose `more`
    /// was true, from the last entry's revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
}

/// `log` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogResult {
    /// Newest first.
    pub entries: Vec<LogEntry>,
    /// Older entries that match exist beyond these (past `limit`, or past what fits in one
    /// response): ask again with `before` set to the last entry's revision.
    #[serde(default)]
    pub more: bool,
    /// Every change from this store revision on is recorded. Changes before it were dropped (the
    /// history keeps a bounded number of entries, oldest dropped first) or were made by a rootsd
    /// that kept no history. 1 when nothing was ever left out.
    #[serde(default)]
    pub recorded_from: u64,
    /// How many entries the daemon keeps at most.
    #[serde(default)]
    pub capacity: usize,
}

/// One change: what it did to one workspace, when, and who made it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// The store revision the change made.
    pub revision: u64,
    /// When the daemon accepted it, in milliseconds since the Unix epoch (its own clock).
    pub time_unix_ms: u64,
    pub workspace: WorkspaceName,
    #[serde(default)]
    pub added: Vec<Root>,
    #[serde(default)]
    pub renamed: Vec<Renamed>,
    #[serde(default)]
    pub removed: Vec<Root>,
    /// Roots the change touched that the entry does not list, to keep it bounded (absent when
    /// it lists them all).
    #[serde(default, skip_serializing_if = "Omitted::is_empty")]
    pub omitted: Omitted,
    pub who: Who,
}

/// A root whose name a change replaced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renamed {
    pub uri: String,
    /// The new name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_name: Option<String>,
}

/// How many roots of each kind an entry leaves out of its lists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Omitted {
    #[serde(default)]
    pub added: usize,
    #[serde(default)]
    pub renamed: usize,
    #[serde(default)]
    pub removed: usize,
}

impl Omitted {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Who made a change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Who {
    /// A client of the control socket (`rootsctl add`, or any program speaking this protocol).
    Peer(LoggedPeer),
    /// The daemon, on behalf of an MCP session (a `rootsctl proxy` whose host's roots it
    /// publishes); `peer` is the proxy's connection.
    Session {
        /// The session's id at the time (`rootsctl sessions`); ids restart with the daemon.
        id: u64,
        #[serde(default)]
        label: String,
        peer: LoggedPeer,
    },
    /// The daemon itself, for the reason given.
    Daemon { reason: String },
    /// A kind this client does not know (from a newer daemon).
    #[serde(other)]
    Unknown,
}

/// A connected peer. `uid` and `pid` are the kernel's (`SO_PEERCRED`, recorded when the peer
/// connected); `user` is the uid's name in the daemon's `/etc/passwd`; `process` is what
/// `/proc/PID/comm` said when the peer said hello (the kernel reports it, but a process may set
/// its own); `client` is what the peer claimed to be in `hello`, unchecked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedPeer {
    pub uid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_as_documented_and_an_unknown_kind_of_author_is_kept_as_unknown() {
        let line = r#"{"revision":9,"time_unix_ms":1796000000123,"workspace":"default","added":[],"renamed":[{"uri":"file:///a","name":"main","previous_name":"a"}],"removed":[{"uri":"file:///b","name":"b"}],"who":{"kind":"peer","uid":1000,"user":"ana","pid":5151,"process":"rootsctl","client":"rootsctl 0.1.0"}}"#;
        let entry: LogEntry = serde_json::from_str(line).unwrap();
        assert_eq!(entry.renamed[0].previous_name.as_deref(), Some("a"));
        assert!(entry.omitted.is_empty());
        assert_eq!(serde_json::to_string(&entry).unwrap(), line);
        let who: Who = serde_json::from_str(r#"{"kind":"robot","serial":7}"#).unwrap();
        assert_eq!(who, Who::Unknown);
    }
}
