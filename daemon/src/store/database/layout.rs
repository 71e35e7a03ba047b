//! Schema 2's keys and values for the roots: a small header per workspace and its roots spread
//! over a fixed set of bucket keys, so that a change rewrites the buckets of the roots it
//! changed and the header, never the whole workspace.
//!
//! Pure encoding: which buckets a change touches, and how a loaded database is checked, are
//! [`super::mirror`]'s.

use rootsd_proto::WorkspaceName;
use serde::{Deserialize, Serialize};

use crate::store::model::StoredRootV1;

/// `w/<workspace>`: the workspace's [`HeaderV2`].
pub(super) const WORKSPACE_PREFIX: &[u8] = b"w/";
/// `r/<workspace>/<bucket>`: a bucket of the workspace's roots.
pub(super) const BUCKET_PREFIX: &[u8] = b"r/";
/// How many buckets a workspace's roots are spread over. Part of the schema: a root's bucket is
/// [`bucket_of`] its URI, so changing this means rewriting every bucket. As many as a workspace
/// may hold roots (4,096), so that a rename rewrites a bucket of one or two roots at any size:
/// sled also rewrites whole leaves of up to 16 keys now and then, and smaller buckets keep those
/// leaves as small at 2,000 roots as at 10 (with 4,096 buckets, sled wrote 1.7–2.0 KB a rename at
/// 2,000 roots and 1.8–2.0 KB at 10, leaving out its occasional relocations of live pages; with
/// 1,024, 8.4 KB and 3.8 KB, in one run). A small workspace creates only the keys its roots need.
pub(super) const BUCKETS: u16 = 4096;

/// A workspace's header: what its buckets must add up to, so that a lost or extra root is
/// damage found at load, never a workspace served short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HeaderV2 {
    /// The store revision of the last change to the workspace.
    pub revision: u64,
    /// How many roots its buckets hold in all.
    pub roots: u64,
    /// The sequence number the next root added gets; every stored root's is below it.
    pub next: u64,
}

/// The bucket of the root `uri`: FNV-1a (64 bits) of its bytes, modulo [`BUCKETS`]. Written out
/// here rather than taken from std, whose hashers may change between Rust versions and are
/// seeded per process: a root must land in the same bucket in every run of every build.
pub(super) fn bucket_of(uri: &str) -> u16 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = uri.as_bytes().iter().fold(OFFSET, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    });
    (hash % u64::from(BUCKETS)) as u16
}

pub(super) fn header_key(workspace: &WorkspaceName) -> Vec<u8> {
    let mut key = WORKSPACE_PREFIX.to_vec();
    key.extend_from_slice(workspace.as_str().as_bytes());
    key
}

/// `r/<workspace>/` then the bucket as `u16` big-endian.
pub(super) fn bucket_key(workspace: &WorkspaceName, bucket: u16) -> Vec<u8> {
    let name = workspace.as_str().as_bytes();
    let mut key = Vec::with_capacity(BUCKET_PREFIX.len() + name.len() + 3);
    key.extend_from_slice(BUCKET_PREFIX);
    key.extend_from_slice(name);
    key.push(b'/');
    key.extend_from_slice(&bucket.to_be_bytes());
    key
}

/// The workspace name (not yet checked) and bucket of a key under [`BUCKET_PREFIX`], or `None`
/// if it is not shaped like one.
pub(super) fn parse_bucket_key(key: &[u8]) -> Option<(&str, u16)> {
    let rest = key.strip_prefix(BUCKET_PREFIX)?;
    let (name, bucket) = rest.split_at(rest.len().checked_sub(3)?);
    let [b'/', high, low] = *bucket else {
        return None;
    };
    let bucket = u16::from_be_bytes([high, low]);
    (bucket < BUCKETS).then_some(())?;
    Some((std::str::from_utf8(name).ok()?, bucket))
}

/// A key as messages about damage name it: text where it is text, the bucket as a number.
pub(super) fn describe_key(key: &[u8]) -> String {
    match parse_bucket_key(key) {
        Some((name, bucket)) => format!("r/{name}/{bucket}"),
        None => String::from_utf8_lossy(key).into_owned(),
    }
}

pub(super) fn encode_header(header: &HeaderV2) -> Vec<u8> {
    serde_json::to_vec(header).expect("stored types always serialise")
}

/// A bucket's value: a JSON array of `[sequence number, root]` pairs, in sequence order.
pub(super) fn encode_bucket(roots: &[(u64, &StoredRootV1)]) -> Vec<u8> {
    serde_json::to_vec(roots).expect("stored types always serialise")
}

pub(super) fn decode_bucket(bytes: &[u8]) -> Result<Vec<(u64, StoredRootV1)>, serde_json::Error> {
    serde_json::from_slice(bytes)
}
