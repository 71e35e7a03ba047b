//! What the database holds of each workspace's roots, kept in memory beside it, so that a change
//! can be written as the buckets it touched without reading the database or knowing the
//! workspace's previous state.
//!
//! Each root is mirrored with its sequence number (which orders the workspace's roots: buckets
//! scatter them, and the order is part of the state that start-up compares with the journal)
//! and its bucket. A workspace's new state is walked against its mirror as
//! `journal::delta::Delta::between` walks two states: roots both hold in the same order keep
//! their numbers, the mirrored roots the walk passes are removed, and the new roots after the
//! last kept one get new numbers, above every number given out before, which keeps the order.
//! The buckets of every root kept with new fields, removed or added are rewritten, each once.
//!
//! The mirror is built from what a load read ([`Assembly`]), or from the contents a rewrite
//! stores ([`Mirror::write`] on an empty mirror); it is only right while every write to the
//! roots' keys goes through it, which is why the store drops it when a batch fails.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use rootsd_proto::WorkspaceName;

use super::StoreError;
use super::layout::{HeaderV2, bucket_key, bucket_of, encode_bucket, encode_header, header_key};
use crate::store::model::{StoredRootV1, StoredWorkspaceV1, same_name, same_uri};

/// Keys and values to write, in order, as one batch.
pub(super) type Writes = Vec<(Vec<u8>, Vec<u8>)>;

/// The stored roots of every workspace.
#[derive(Default)]
pub(super) struct Mirror {
    shelves: HashMap<WorkspaceName, Shelf>,
}

/// One workspace's stored roots, in order (and so in sequence order).
#[derive(Default)]
struct Shelf {
    next: u64,
    held: Vec<Held>,
}

struct Held {
    seq: u64,
    bucket: u16,
    /// Shared with the state it mirrors: a root no change touched is the same allocation.
    root: Arc<StoredRootV1>,
}

/// Whether two roots of the same URI are stored alike: every field but the URI, which the walk
/// has just compared (a third of the walk's comparisons at 2,000 roots). Destructured without
/// `..`, so that a field added to the stored root fails to compile here instead of being left
/// out of the comparison, which would leave its changes unwritten. A function rather than `==`
/// at the call site so that it reads the same whether a workspace holds its roots by value or
/// behind a pointer.
fn same_but_uri(a: &StoredRootV1, b: &StoredRootV1) -> bool {
    let StoredRootV1 {
        uri: _,
        name,
        by_hand,
        published_by,
    } = a;
    same_name(name, &b.name) && *by_hand == b.by_hand && *published_by == b.published_by
}

impl Mirror {
    /// The mirror and keys of a database that holds exactly `workspaces`: what a rewrite of the
    /// whole database (and a migration) writes. Roots are numbered from 0 in order.
    pub(super) fn of<'a>(
        workspaces: impl IntoIterator<Item = (&'a WorkspaceName, &'a StoredWorkspaceV1)>,
    ) -> (Self, Writes) {
        let mut mirror = Self::default();
        let mut writes = Writes::new();
        for (name, workspace) in workspaces {
            mirror.write(name, workspace, &mut writes);
        }
        (mirror, writes)
    }

    /// Makes workspace `name` hold `state`, adding to `writes` the buckets that changed and the
    /// header. Work in proportion to the workspace's roots (one walk comparing URIs), bytes in
    /// proportion to the roots that changed.
    pub(super) fn write(
        &mut self,
        name: &WorkspaceName,
        state: &StoredWorkspaceV1,
        writes: &mut Writes,
    ) {
        if !self.shelves.contains_key(name) {
            self.shelves.insert(name.clone(), Shelf::default());
        }
        let shelf = self.shelves.get_mut(name).expect("inserted above");
        let new = &state.roots;
        let mut touched: Vec<u16> = Vec::new();
        // In place, as `Vec::retain` does: kept roots move down over removed ones, so that a
        // rename in a large workspace moves nothing and allocates nothing.
        let (mut next_new, mut kept) = (0, 0);
        for i in 0..shelf.held.len() {
            let held = &mut shelf.held[i];
            let keep = new
                .get(next_new)
                .is_some_and(|root| same_uri(root, &held.root));
            if keep {
                let root = &new[next_new];
                if !Arc::ptr_eq(&held.root, root) {
                    if !same_but_uri(&held.root, root) {
                        touched.push(held.bucket);
                    }
                    held.root = root.clone();
                }
                next_new += 1;
                // Nothing to move until a root was removed; a swap in place still copies.
                if kept != i {
                    shelf.held.swap(kept, i);
                }
                kept += 1;
            } else {
                touched.push(held.bucket);
            }
        }
        shelf.held.truncate(kept);
        for root in &new[next_new..] {
            let bucket = bucket_of(&root.uri);
            touched.push(bucket);
            shelf.held.push(Held {
                seq: shelf.next,
                bucket,
                root: root.clone(),
            });
            shelf.next += 1;
        }
        touched.sort_unstable();
        touched.dedup();
        if !touched.is_empty() {
            // One pass gathers every touched bucket's roots, already in sequence order. An
            // emptied bucket is written as an empty array rather than removed: see the module
            // doc of `database` on sled and removals.
            let mut groups: Vec<Vec<(u64, &StoredRootV1)>> = vec![Vec::new(); touched.len()];
            for held in &shelf.held {
                if let Ok(k) = touched.binary_search(&held.bucket) {
                    groups[k].push((held.seq, &*held.root));
                }
            }
            for (bucket, group) in touched.iter().zip(&groups) {
                writes.push((bucket_key(name, *bucket), encode_bucket(group)));
            }
        }
        let header = HeaderV2 {
            revision: state.revision,
            roots: shelf.held.len() as u64,
            next: shelf.next,
        };
        writes.push((header_key(name), encode_header(&header)));
    }
}

/// A load in progress: headers and buckets as they are read, checked against each other by
/// [`Assembly::finish`].
#[derive(Default)]
pub(super) struct Assembly {
    workspaces: BTreeMap<WorkspaceName, Gathered>,
}

struct Gathered {
    header: HeaderV2,
    held: Vec<Held>,
}

fn corrupt(key: &str, reason: String) -> StoreError {
    StoreError::Corrupt {
        key: key.to_owned(),
        reason,
    }
}

impl Assembly {
    /// A workspace's header, read from its key.
    pub(super) fn header(&mut self, name: WorkspaceName, header: HeaderV2) {
        self.workspaces.insert(
            name,
            Gathered {
                header,
                held: Vec::new(),
            },
        );
    }

    /// The roots of bucket `bucket` of workspace `name`, read from the key `key` (as messages
    /// name it). Headers are read first: a bucket of a workspace without one is damage.
    pub(super) fn bucket(
        &mut self,
        key: &str,
        name: &str,
        bucket: u16,
        roots: Vec<(u64, StoredRootV1)>,
    ) -> Result<(), StoreError> {
        let gathered = WorkspaceName::new(name)
            .ok()
            .and_then(|name| self.workspaces.get_mut(&name))
            .ok_or_else(|| {
                corrupt(
                    key,
                    format!(
                        "the bucket belongs to workspace {name:?}, which has no header w/{name}"
                    ),
                )
            })?;
        for (seq, root) in roots {
            let belongs = bucket_of(&root.uri);
            if belongs != bucket {
                return Err(corrupt(
                    key,
                    format!("root {} belongs in bucket {belongs}, not here", root.uri),
                ));
            }
            if seq >= gathered.header.next {
                return Err(corrupt(
                    key,
                    format!(
                        "root {} has sequence number {seq}, but the header gave out only the numbers below {}",
                        root.uri, gathered.header.next
                    ),
                ));
            }
            gathered.held.push(Held {
                seq,
                bucket,
                root: Arc::new(root),
            });
        }
        Ok(())
    }

    /// The workspaces read, each in its roots' order, and their mirror; refused, naming the
    /// header, if a workspace's buckets do not add up to its header: a root missing, one too
    /// many, two with one number, or one URI twice.
    pub(super) fn finish(
        self,
    ) -> Result<(BTreeMap<WorkspaceName, Arc<StoredWorkspaceV1>>, Mirror), StoreError> {
        let mut workspaces = BTreeMap::new();
        let mut mirror = Mirror::default();
        for (name, mut gathered) in self.workspaces {
            let key = format!("w/{name}");
            gathered.held.sort_unstable_by_key(|held| held.seq);
            if let Some(pair) = gathered.held.windows(2).find(|p| p[0].seq == p[1].seq) {
                return Err(corrupt(
                    &key,
                    format!(
                        "roots {} and {} have the same sequence number {}",
                        pair[0].root.uri, pair[1].root.uri, pair[0].seq
                    ),
                ));
            }
            let mut uris = HashSet::with_capacity(gathered.held.len());
            if let Some(twice) = gathered.held.iter().find(|h| !uris.insert(&h.root.uri)) {
                return Err(corrupt(
                    &key,
                    format!("root {} is stored twice", twice.root.uri),
                ));
            }
            let found = gathered.held.len() as u64;
            if found != gathered.header.roots {
                return Err(corrupt(
                    &key,
                    format!(
                        "the header counts {} roots, but the workspace's buckets hold {found}",
                        gathered.header.roots
                    ),
                ));
            }
            let state = StoredWorkspaceV1 {
                revision: gathered.header.revision,
                roots: gathered.held.iter().map(|h| h.root.clone()).collect(),
            };
            workspaces.insert(name.clone(), Arc::new(state));
            mirror.shelves.insert(
                name,
                Shelf {
                    next: gathered.header.next,
                    held: gathered.held,
                },
            );
        }
        Ok((workspaces, mirror))
    }
}
