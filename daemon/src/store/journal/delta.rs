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
//! Records are encoded here by hand, without serde: the encoder runs on every acknowledged
//! change, under the writers' lock, and a change's record is a handful of short strings.
//! Decoding goes through serde (the journal's `RecordV1`); the tests check that every encoded
//! record decodes to itself.

use std::collections::HashMap;
use std::sync::Arc;

use rootsd_proto::WorkspaceName;

use crate::store::model::{
    Change, Origin, StoredPublisherV1, StoredRootV1, StoredWorkspaceV1, same_uri,
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
        Ok(Change {
            revision: self.revision,
            workspace: self.workspace.clone(),
            state: Arc::new(StoredWorkspaceV1 {
                revision: self.revision,
                roots,
            }),
            origin: self.origin.clone(),
            time_unix_ms: self.time_unix_ms,
        })
    }

    /// The record's JSON, as the journal's `RecordV1::Delta` reads it.
    pub fn encode_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"kind\":\"delta\",\"revision\":");
        number(out, self.revision);
        out.extend_from_slice(b",\"workspace\":");
        string(out, self.workspace.as_str());
        out.extend_from_slice(b",\"base\":");
        number(out, self.base);
        if !self.removed.is_empty() {
            out.extend_from_slice(b",\"removed\":[");
            for (k, uri) in self.removed.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                string(out, uri);
            }
            out.push(b']');
        }
        if !self.set.is_empty() {
            out.extend_from_slice(b",\"set\":[");
            for (k, root) in self.set.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                stored_root(out, root);
            }
            out.push(b']');
        }
        if let Some(origin) = &self.origin {
            out.extend_from_slice(b",\"origin\":");
            // Who made a change is a few short fields, and rarely the same shape twice; serde
            // writes it as the history reads it.
            serde_json::to_writer(&mut *out, origin).expect("an origin always serialises");
        }
        if self.time_unix_ms != 0 {
            out.extend_from_slice(b",\"time_unix_ms\":");
            number(out, self.time_unix_ms);
        }
        out.push(b'}');
    }
}

/// A stored root as serde writes `StoredRootV1`: fields at their defaults left out.
fn stored_root(out: &mut Vec<u8>, root: &StoredRootV1) {
    out.extend_from_slice(b"{\"uri\":");
    string(out, &root.uri);
    if let Some(name) = &root.name {
        out.extend_from_slice(b",\"name\":");
        string(out, name);
    }
    if !root.by_hand {
        out.extend_from_slice(b",\"by_hand\":false");
    }
    if !root.published_by.is_empty() {
        out.extend_from_slice(b",\"published_by\":[");
        for (k, publisher) in root.published_by.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            publisher_json(out, publisher);
        }
        out.push(b']');
    }
    out.push(b'}');
}

fn publisher_json(out: &mut Vec<u8>, publisher: &StoredPublisherV1) {
    out.extend_from_slice(b"{\"session\":");
    number(out, publisher.session);
    out.extend_from_slice(b",\"label\":");
    string(out, &publisher.label);
    out.extend_from_slice(b",\"pid\":");
    number(out, u64::from(publisher.pid));
    out.push(b'}');
}

fn number(out: &mut Vec<u8>, value: u64) {
    let mut digits = [0u8; 20];
    let mut k = digits.len();
    let mut rest = value;
    loop {
        k -= 1;
        digits[k] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[k..]);
}

/// `text` as a JSON string: quotes, backslashes and control characters escaped, everything
/// else (UTF-8 included) as it is, which is what JSON allows.
fn string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut start = 0;
    for (k, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..k]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 0xf)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = k + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}
