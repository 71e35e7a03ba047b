//! Delta records: a change as what it did to its workspace (the roots it removed, and the roots
//! it added or whose stored fields it changed), not the workspace's whole new state, so that a
//! change writes bytes in proportion to itself rather than to the workspace.
//!
//! A delta names the workspace revision it applies to (`base`: the revision of the change that
//! last touched the workspace, 0 for a workspace that does not exist yet). Store revisions are
//! never reused, so that one number says exactly which state of the workspace the delta was
//! written against: replay (and recovery, after damage) applies a delta only to that state, and
//! one that finds another is damage, named, never applied to a state it was not meant for.
//!
//! Records are encoded here by hand, without serde, as serde would write them
//! ([`crate::json_text`]): the encoder runs on every acknowledged change, under the writers'
//! lock, and a change's record is a handful of short strings. Decoding goes through serde (the
//! journal's `RecordV1`); the tests check that every field of a record decodes to itself, and that
//! a stored root and who made a change are written byte for byte as serde writes them.

use std::collections::HashMap;
use std::sync::Arc;

use rootsd_proto::WorkspaceName;

use crate::json_text::{number, string};
use crate::store::model::{
    Change, Origin, PeerV1, StoredPublisherV1, StoredRootV1, StoredWorkspaceV1, same_uri,
};

/// A change as a delta against the workspace's state at revision `base`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delta {
    pub revision: u64,
    pub workspace: WorkspaceName,
    /// The workspace's revision before the change (0: the workspace did not exist).
    pub base: u64,
    /// URIs of the roots the change removed.
    pub removed: Vec<Arc<str>>,
    /// Roots the change added or whose stored fields (name, holders) it changed: each replaces
    /// the root of its URI in place, or, if there is none, is appended.
    pub set: Vec<Arc<StoredRootV1>>,
    pub origin: Option<Origin>,
    pub time_unix_ms: u64,
}

/// Above this many roots in a delta, applying it indexes the workspace's URIs first rather
/// than searching the list once per root.
const INDEX_ABOVE: usize = 16;

impl Delta {
    /// `change` as a delta against `previous`, the workspace before it. `None` when the change
    /// is not the workspace's next state as a delta can say it (its state's revision is not the
    /// change's), and the whole state must be written instead.
    ///
    /// One walk over both lists, comparing URIs: the roots both hold in the same order are kept
    /// (and set if their fields changed), the old roots the walk passes are removed, and the new
    /// roots after the last kept one are set, which appends them. A change that moved or
    /// inserted roots mid-list so becomes a longer delta, never a wrong one.
    pub fn between(previous: Option<&StoredWorkspaceV1>, change: &Change) -> Option<Self> {
        if change.state.revision != change.revision {
            return None;
        }
        let before: &[Arc<StoredRootV1>] = previous.map_or(&[], |w| &w.roots);
        let after = &change.state.roots;
        let (mut removed, mut set) = (Vec::new(), Vec::new());
        let (mut i, mut j) = (0, 0);
        while i < before.len() && j < after.len() {
            if same_uri(&before[i], &after[j]) {
                if before[i] != after[j] {
                    set.push(after[j].clone());
                }
                j += 1;
            } else {
                removed.push(before[i].uri.clone());
            }
            i += 1;
        }
        removed.extend(before[i..].iter().map(|r| r.uri.clone()));
        set.extend(after[j..].iter().cloned());
        Some(Self {
            revision: change.revision,
            workspace: change.workspace.clone(),
            base: previous.map_or(0, |w| w.revision),
            removed,
            set,
            origin: change.origin.clone(),
            time_unix_ms: change.time_unix_ms,
        })
    }

    /// The change this delta makes to `previous`, the workspace as it is now; refused, saying
    /// why, if that is not the state the delta was written against, or if the delta does not fit
    /// it (it removes a root the workspace does not hold).
    pub fn apply_to(&self, previous: Option<&StoredWorkspaceV1>) -> Result<Change, String> {
        let current = previous.map_or(0, |w| w.revision);
        if current != self.base {
            return Err(format!(
                "changes workspace {} as it was at revision {}, but it is at revision {current}: an earlier change to it is missing",
                self.workspace, self.base
            ));
        }
        let mut roots: Vec<Arc<StoredRootV1>> = previous.map_or_else(Vec::new, |w| w.roots.clone());
        if !self.removed.is_empty() {
            let before = roots.len();
            roots.retain(|r| !self.removed.contains(&r.uri));
            if before - roots.len() != self.removed.len() {
                return Err(format!(
                    "removes roots that workspace {} at revision {} does not hold",
                    self.workspace, self.base
                ));
            }
        }
        if self.set.len() > INDEX_ABOVE {
            let mut index: HashMap<Arc<str>, usize> = roots
                .iter()
                .enumerate()
                .map(|(k, r)| (r.uri.clone(), k))
                .collect();
            for root in &self.set {
                match index.get(&root.uri) {
                    Some(&k) => roots[k] = root.clone(),
                    None => {
                        index.insert(root.uri.clone(), roots.len());
                        roots.push(root.clone());
                    }
                }
            }
        } else {
            for root in &self.set {
                match roots.iter_mut().find(|r| r.uri == root.uri) {
                    Some(existing) => *existing = root.clone(),
                    None => roots.push(root.clone()),
                }
            }
        }
        Ok(Change::recorded(
            self.revision,
            self.workspace.clone(),
            Arc::new(StoredWorkspaceV1 {
                revision: self.revision,
                roots,
            }),
            self.origin.clone(),
            self.time_unix_ms,
        ))
    }

    /// The record's JSON, as the journal's `RecordV1::Delta` reads it.
    pub fn encode_json(&self, out: &mut Vec<u8>) {
        // Every field by name, without `..`, here and in the writers below: a field added to a
        // type this writes fails the build here until it is written too (ARCHITECTURE.md,
        // "Where to start"). Taking a struct apart costs nothing at run time.
        let Self {
            revision,
            workspace,
            base,
            removed,
            set,
            origin,
            time_unix_ms,
        } = self;
        out.extend_from_slice(b"{\"kind\":\"delta\",\"revision\":");
        number(out, *revision);
        out.extend_from_slice(b",\"workspace\":");
        string(out, workspace.as_str());
        out.extend_from_slice(b",\"base\":");
        number(out, *base);
        if !removed.is_empty() {
            out.extend_from_slice(b",\"removed\":[");
            for (k, uri) in removed.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                string(out, uri);
            }
            out.push(b']');
        }
        if !set.is_empty() {
            out.extend_from_slice(b",\"set\":[");
            for (k, root) in set.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                stored_root(out, root);
            }
            out.push(b']');
        }
        if let Some(origin) = origin {
            out.extend_from_slice(b",\"origin\":");
            origin_json(out, origin);
        }
        if *time_unix_ms != 0 {
            out.extend_from_slice(b",\"time_unix_ms\":");
            number(out, *time_unix_ms);
        }
        out.push(b'}');
    }
}

/// A stored root as serde writes `StoredRootV1`: fields at their defaults left out.
fn stored_root(out: &mut Vec<u8>, root: &StoredRootV1) {
    let StoredRootV1 {
        uri,
        name,
        by_hand,
        published_by,
    } = root;
    out.extend_from_slice(b"{\"uri\":");
    string(out, uri);
    if let Some(name) = name {
        out.extend_from_slice(b",\"name\":");
        string(out, name);
    }
    if !by_hand {
        out.extend_from_slice(b",\"by_hand\":false");
    }
    if !published_by.is_empty() {
        out.extend_from_slice(b",\"published_by\":[");
        for (k, publisher) in published_by.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            publisher_json(out, publisher);
        }
        out.push(b']');
    }
    out.push(b'}');
}

/// Who made a change, as serde writes `Origin` (tagged by `kind`, absent texts left out).
fn origin_json(out: &mut Vec<u8>, origin: &Origin) {
    match origin {
        Origin::Peer(peer) => {
            out.extend_from_slice(b"{\"kind\":\"peer\",");
            peer_members(out, peer);
        }
        Origin::Session { id, label, peer } => {
            out.extend_from_slice(b"{\"kind\":\"session\",\"id\":");
            number(out, *id);
            out.extend_from_slice(b",\"label\":");
            string(out, label);
            out.extend_from_slice(b",\"peer\":");
            peer_json(out, peer);
        }
        Origin::Daemon { reason } => {
            out.extend_from_slice(b"{\"kind\":\"daemon\",\"reason\":");
            string(out, reason);
        }
    }
    out.push(b'}');
}

fn peer_json(out: &mut Vec<u8>, peer: &PeerV1) {
    out.push(b'{');
    peer_members(out, peer);
    out.push(b'}');
}

/// A peer's members: `uid`, then whichever of the others it has.
fn peer_members(out: &mut Vec<u8>, peer: &PeerV1) {
    let PeerV1 {
        uid,
        user,
        pid,
        process,
        client,
    } = peer;
    out.extend_from_slice(b"\"uid\":");
    number(out, u64::from(*uid));
    if let Some(user) = user {
        out.extend_from_slice(b",\"user\":");
        string(out, user);
    }
    if let Some(pid) = pid {
        out.extend_from_slice(b",\"pid\":");
        number(out, u64::from(*pid));
    }
    if let Some(process) = process {
        out.extend_from_slice(b",\"process\":");
        string(out, process);
    }
    if let Some(client) = client {
        out.extend_from_slice(b",\"client\":");
        string(out, client);
    }
}

fn publisher_json(out: &mut Vec<u8>, publisher: &StoredPublisherV1) {
    let StoredPublisherV1 {
        session,
        label,
        pid,
    } = publisher;
    out.extend_from_slice(b"{\"session\":");
    number(out, *session);
    out.extend_from_slice(b",\"label\":");
    string(out, label);
    out.extend_from_slice(b",\"pid\":");
    number(out, u64::from(*pid));
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::json_text::tests::text;
    use crate::store::journal::Entry;

    fn shared() -> impl Strategy<Value = Option<Arc<str>>> {
        prop::option::of(text().prop_map(Arc::from))
    }

    fn peer() -> impl Strategy<Value = PeerV1> {
        (
            any::<u32>(),
            shared(),
            prop::option::of(any::<u32>()),
            shared(),
            shared(),
        )
            .prop_map(|(uid, user, pid, process, client)| PeerV1 {
                uid,
                user,
                pid,
                process,
                client,
            })
    }

    fn origin() -> impl Strategy<Value = Origin> {
        prop_oneof![
            peer().prop_map(Origin::Peer),
            (any::<u64>(), text(), peer()).prop_map(|(id, label, peer)| Origin::Session {
                id,
                label,
                peer
            }),
            text().prop_map(|reason| Origin::Daemon { reason }),
        ]
    }

    // The values below are built field by field, without `..`, so that a field added to a
    // stored type fails the build of these tests until they give it values too.

    fn publisher() -> impl Strategy<Value = StoredPublisherV1> {
        (any::<u64>(), text(), any::<u32>()).prop_map(|(session, label, pid)| StoredPublisherV1 {
            session,
            label,
            pid,
        })
    }

    fn any_root() -> impl Strategy<Value = StoredRootV1> {
        (
            text(),
            shared(),
            any::<bool>(),
            prop::collection::vec(publisher(), 0..3),
        )
            .prop_map(|(uri, name, by_hand, published_by)| StoredRootV1 {
                uri: uri.into(),
                name,
                by_hand,
                published_by,
            })
    }

    fn delta() -> impl Strategy<Value = Delta> {
        (
            any::<u64>(),
            prop::sample::select(vec!["default", "work-1"]),
            any::<u64>(),
            prop::collection::vec(text().prop_map(Arc::from), 0..3),
            prop::collection::vec(any_root().prop_map(Arc::new), 0..3),
            prop::option::of(origin()),
            any::<u64>(),
        )
            .prop_map(
                |(revision, workspace, base, removed, set, origin, time_unix_ms)| Delta {
                    revision,
                    workspace: WorkspaceName::new(workspace).expect("a valid name"),
                    base,
                    removed,
                    set,
                    origin,
                    time_unix_ms,
                },
            )
    }

    proptest! {
        #[test]
        fn a_stored_root_is_written_as_serde_writes_it(root in any_root()) {
            let mut ours = Vec::new();
            stored_root(&mut ours, &root);
            prop_assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string(&root).unwrap()
            );
        }

        #[test]
        fn every_field_of_a_delta_reads_back_as_written(delta in delta()) {
            let line = crate::store::journal::encode(&Entry::Delta(delta.clone()));
            prop_assert_eq!(
                crate::store::journal::decode(&line[..line.len() - 1]),
                Ok(Entry::Delta(delta))
            );
        }

        #[test]
        fn who_made_a_change_is_written_as_serde_writes_it(origin in origin()) {
            let mut ours = Vec::new();
            origin_json(&mut ours, &origin);
            prop_assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string(&origin).unwrap()
            );
        }
    }
}
