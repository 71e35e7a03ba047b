//! The journal: every acknowledged change, checksummed, on stable storage before the change is
//! acknowledged.
//!
//! It is the store's durability and its witness. A change is acknowledged once its record is
//! written here and `fdatasync`ed; the database ([`crate::store::database`]) is brought up to date after,
//! and checkpointed now and then. At start the two are compared ([`crate::store::start::reconcile`]): a
//! database that lost changes or was damaged is caught up from the journal or refused, never
//! served short.
//!
//! The file is text, one record per line: eight hex digits of the CRC-32 of the JSON that
//! follows, a space, the JSON, a newline. It starts with a snapshot of everything and then holds
//! changes and checkpoints (the database is durable up to a revision). A change is written as a
//! delta ([`delta`]: the roots it removed, added or altered, and the workspace revision it applies
//! to), so that it costs bytes in proportion to itself, not to its workspace; journals written
//! before deltas hold `change` records, each the whole new state of one workspace, which still
//! read, and which the compaction tail and a state a delta cannot say still use.
//!
//! The trade-off: a whole-state record after a damaged one carried forward what the damaged one
//! said, while a delta means something only against the state it was written against. So every
//! delta names that state (its workspace's revision before it), and a delta after damage is
//! applied only if the state recovery holds is that state; otherwise it, and every later delta of
//! the same workspace, is named as lost, never applied to a state it was not meant for. Damage
//! to one record so loses the later changes of its own workspace up to the next whole-state
//! record of it (a compaction's snapshot), not only its own, and changes to other workspaces are
//! kept as before. The database, checkpointed at least every 1,000 changes, bounds it from the
//! other side: recovery starts from the newer of the database and the journal's sound part. When the records after its snapshot grow past [`COMPACT_AFTER`] it is
//! rewritten as one snapshot (measured after the snapshot, because the snapshot itself, which
//! holds the history, may be large).
//! A last line without its newline that is the start of a record is a write that never
//! completed (and so was never acknowledged) and is dropped; zeros or other bytes that are not
//! (`not_a_torn_record`), and any other line that does not check out, are damage. Reading goes
//! on past damage: every later record whose checksum holds is kept
//! ([`Replay::after_damage`]), so that `rootsd --recover` can keep the changes acknowledged
//! after a damaged record, and say exactly which it could not.

use std::collections::{BTreeMap, VecDeque};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rootsd_proto::WorkspaceName;
use serde::{Deserialize, Serialize};

use crate::store::model::{
    Change, Contents, HistoryEntryV1, Origin, StoredRootV1, StoredWorkspaceV1,
};

mod delta;
pub use delta::Delta;

/// The journal's file name in the state directory.
pub const FILE_NAME: &str = "roots.journal";

/// Once the records after its snapshot pass this size, or twice the snapshot's if that is more,
/// the journal is rewritten as a single snapshot: so it stays within three times the live data
/// (the snapshot) plus 1 MiB, plus the changes of one batch.
pub const COMPACT_AFTER: u64 = 1 << 20;

/// One record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Snapshot(Contents),
    /// A change as its workspace's whole new state (as journals before deltas held every change).
    Change(Change),
    /// A change as what it did to its workspace.
    Delta(Delta),
    /// The database is on stable storage up to this revision.
    Checkpoint(u64),
}

/// A record as stored. Fields added since the first version default when absent, so that a
/// journal written before them still reads: a change without `origin` has no history entry, and
/// a snapshot without `history` has an empty one.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum RecordV1 {
    Snapshot {
        revision: u64,
        workspaces: BTreeMap<WorkspaceName, Arc<StoredWorkspaceV1>>,
        #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
        history: VecDeque<HistoryEntryV1>,
    },
    Change {
        revision: u64,
        workspace: WorkspaceName,
        state: Arc<StoredWorkspaceV1>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<Origin>,
        #[serde(default, skip_serializing_if = "is_zero")]
        time_unix_ms: u64,
    },
    Checkpoint {
        revision: u64,
    },
    Delta {
        revision: u64,
        workspace: WorkspaceName,
        base: u64,
        #[serde(default)]
        removed: Vec<Arc<str>>,
        #[serde(default)]
        set: Vec<Arc<StoredRootV1>>,
        #[serde(default)]
        origin: Option<Origin>,
        #[serde(default)]
        time_unix_ms: u64,
    },
}

/// A change as the journal holds it: a whole state or a delta.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Logged {
    Whole(Change),
    Delta(Delta),
}

impl Logged {
    pub fn revision(&self) -> u64 {
        match self {
            Self::Whole(change) => change.revision,
            Self::Delta(delta) => delta.revision,
        }
    }

    pub fn workspace(&self) -> &WorkspaceName {
        match self {
            Self::Whole(change) => &change.workspace,
            Self::Delta(delta) => &delta.workspace,
        }
    }

    /// The change this record makes to `contents`; a delta written against another state of
    /// its workspace is refused, saying why.
    pub fn against(&self, contents: &Contents) -> Result<Change, String> {
        match self {
            Self::Whole(change) => Ok(change.clone()),
            Self::Delta(delta) => {
                delta.apply_to(contents.workspaces.get(&delta.workspace).map(Arc::as_ref))
            }
        }
    }
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Why a journal cannot be trusted, with where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line} (byte {offset}) {reason}")]
pub struct Damage {
    pub line: usize,
    pub offset: u64,
    pub reason: String,
}

/// What reading a journal found.
#[derive(Clone, Debug)]
pub struct Replay {
    /// The snapshot the journal starts from.
    pub base: Contents,
    /// The changes after it, in order, as the journal holds them.
    pub records: Vec<Logged>,
    /// The state after every record of the sound part: `base` with `records` applied.
    pub latest: Contents,
    /// The highest revision the database was checkpointed at.
    pub checkpoint: u64,
    /// Bytes of whole, valid records: where the next record goes.
    pub valid_len: u64,
    /// Bytes of the snapshot the journal starts with.
    pub snapshot_len: u64,
    /// Bytes of a last record that was never completed, dropped.
    pub torn: u64,
    /// The first damaged record, if any; everything before it is in `base` and `changes`.
    pub damage: Option<Damage>,
    /// After the first damage: the changes whose records still check out, in the order they
    /// were written. Start-up refuses a damaged journal whatever these hold; recovery keeps those
    /// that apply to the state it has ([`Logged::against`]).
    pub after_damage: Vec<Logged>,
    /// After the first damage: every further line that does not check out.
    pub more_damage: Vec<Damage>,
    /// The line of the last record that checks out (0: none).
    pub last_sound_line: usize,
}

impl Replay {
    /// The state after every valid record.
    pub fn contents(&self) -> Contents {
        self.latest.clone()
    }

    /// The state at `revision` (or the newest before it); the base snapshot if `revision` is
    /// older than it.
    pub fn at(&self, revision: u64) -> Contents {
        if revision >= self.revision() {
            return self.latest.clone();
        }
        let mut contents = self.base.clone();
        for record in self.records.iter().take_while(|c| c.revision() <= revision) {
            // Every record of the sound part applied when it was read.
            let change = record
                .against(&contents)
                .expect("the sound part of a journal replays");
            contents.apply(&change);
        }
        contents
    }

    /// Every change of the sound part as a whole state, in order (a test's view: it holds a
    /// copy of the workspace per change).
    #[cfg(test)]
    pub fn changes(&self) -> Vec<Change> {
        self.changes_after(self.base.revision, false)
    }

    /// The changes after `revision`, for a database to catch up on. With `last_only`, of each
    /// workspace only its last change is kept (and the first change, which says where the
    /// history to catch up starts): the database writes each change's workspace whole, so a
    /// later state of a workspace makes its earlier ones moot, and this keeps one copy of each
    /// workspace rather than one per change.
    pub fn changes_after(&self, revision: u64, last_only: bool) -> Vec<Change> {
        let mut contents = self.base.clone();
        let mut out: Vec<Change> = Vec::new();
        for record in &self.records {
            let change = record
                .against(&contents)
                .expect("the sound part of a journal replays");
            contents.apply(&change);
            if change.revision <= revision {
                continue;
            }
            if last_only
                && out.len() > 1
                && let Some(k) = out[1..]
                    .iter()
                    .position(|c| c.workspace == change.workspace)
            {
                out.remove(k + 1);
            }
            out.push(change);
        }
        out
    }

    pub fn revision(&self) -> u64 {
        self.latest.revision
    }
}

/// Appends `delta`'s record, its CRC and its newline to `out`, as [`encode`] makes it.
fn encode_delta(delta: &Delta, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(b"00000000 ");
    delta.encode_json(out);
    let crc = crc32fast::hash(&out[start + 9..]);
    for (k, digit) in out[start..start + 8].iter_mut().enumerate() {
        let nibble = (crc >> (28 - 4 * k)) & 0xf;
        *digit = b"0123456789abcdef"[nibble as usize];
    }
    out.push(b'\n');
}

/// One record as a line.
pub fn encode(entry: &Entry) -> Vec<u8> {
    if let Entry::Delta(delta) = entry {
        let mut line = Vec::with_capacity(256);
        encode_delta(delta, &mut line);
        return line;
    }
    let record = match entry {
        Entry::Snapshot(contents) => RecordV1::Snapshot {
            revision: contents.revision,
            workspaces: contents.workspaces.clone(),
            history: contents.history.clone(),
        },
        Entry::Change(change) => RecordV1::Change {
            revision: change.revision,
            workspace: change.workspace.clone(),
            state: change.state.clone(),
            origin: change.origin.clone(),
            time_unix_ms: change.time_unix_ms,
        },
        Entry::Checkpoint(revision) => RecordV1::Checkpoint {
            revision: *revision,
        },
        Entry::Delta(_) => unreachable!("encoded above"),
    };
    let json = serde_json::to_vec(&record).expect("records always serialise");
    let mut line = format!("{:08x} ", crc32fast::hash(&json)).into_bytes();
    line.extend_from_slice(&json);
    line.push(b'\n');
    line
}

fn decode(line: &[u8]) -> Result<Entry, String> {
    let (crc, json) = match (line.get(..8), line.get(8), line.get(9..)) {
        (Some(crc), Some(b' '), Some(json)) => (crc, json),
        _ => return Err("is not a journal record".to_owned()),
    };
    let expected = std::str::from_utf8(crc)
        .ok()
        .and_then(|hex| u32::from_str_radix(hex, 16).ok())
        .ok_or("has no checksum")?;
    if crc32fast::hash(json) != expected {
        return Err("fails its checksum".to_owned());
    }
    let record: RecordV1 =
        serde_json::from_slice(json).map_err(|e| format!("does not parse: {e}"))?;
    Ok(match record {
        RecordV1::Snapshot {
            revision,
            workspaces,
            history,
        } => Entry::Snapshot(Contents {
            revision,
            workspaces,
            history,
        }),
        RecordV1::Change {
            revision,
            workspace,
            state,
            origin,
            time_unix_ms,
        } => Entry::Change(Change::recorded(
            revision,
            workspace,
            state,
            origin,
            time_unix_ms,
        )),
        RecordV1::Checkpoint { revision } => Entry::Checkpoint(revision),
        RecordV1::Delta {
            revision,
            workspace,
            base,
            removed,
            set,
            origin,
            time_unix_ms,
        } => Entry::Delta(Delta {
            revision,
            workspace,
            base,
            removed,
            set,
            origin,
            time_unix_ms,
        }),
    })
}

/// Replays journal `bytes`. Never fails: damage is reported in [`Replay::damage`], with
/// everything valid before it.
pub fn replay(bytes: &[u8]) -> Replay {
    let mut replay = Replay {
        base: Contents::default(),
        records: Vec::new(),
        latest: Contents::default(),
        checkpoint: 0,
        valid_len: 0,
        snapshot_len: 0,
        torn: 0,
        damage: None,
        after_damage: Vec::new(),
        more_damage: Vec::new(),
        last_sound_line: 0,
    };
    let mut offset = 0usize;
    let mut line_number = 0usize;
    while offset < bytes.len() {
        let Some(end) = memchr_newline(&bytes[offset..]) else {
            // A last record without its newline never finished being written, if it is the
            // start of a record; bytes that cannot be are damage where records may have been.
            let rest = &bytes[offset..];
            match not_a_torn_record(rest) {
                None => replay.torn = rest.len() as u64,
                Some(reason) => {
                    let damage = Damage {
                        line: line_number + 1,
                        offset: offset as u64,
                        reason,
                    };
                    match replay.damage {
                        None => replay.damage = Some(damage),
                        Some(_) => replay.more_damage.push(damage),
                    }
                }
            }
            break;
        };
        line_number += 1;
        let line = &bytes[offset..offset + end];
        let damage = |reason: String| Damage {
            line: line_number,
            offset: offset as u64,
            reason,
        };
        let decoded = decode(line);
        if replay.damage.is_some() {
            // Past the damage, every record that checks out is kept for recovery.
            match decoded {
                Ok(entry) => {
                    replay.last_sound_line = line_number;
                    replay.after_damage.extend(logged(entry));
                }
                Err(reason) => replay.more_damage.push(damage(reason)),
            }
            offset += end + 1;
            continue;
        }
        let entry = match decoded {
            Ok(entry) => entry,
            Err(reason) => {
                replay.damage = Some(damage(reason));
                offset += end + 1;
                continue;
            }
        };
        let current = replay.revision();
        let fits = match (&entry, line_number) {
            (Entry::Snapshot(_), 1) => Ok(()),
            (_, 1) => Err("is not the snapshot a journal starts with".to_owned()),
            (Entry::Snapshot(_), _) => Err("is a second snapshot".to_owned()),
            (Entry::Change(Change { revision, .. }) | Entry::Delta(Delta { revision, .. }), _)
                if *revision != current + 1 =>
            {
                Err(format!(
                    "holds revision {revision} after revision {current}: changes are missing"
                ))
            }
            (Entry::Checkpoint(revision), _) if *revision > current => Err(format!(
                "checkpoints revision {revision}, which the journal has not reached ({current})"
            )),
            _ => Ok(()),
        };
        if let Err(reason) = fits {
            replay.damage = Some(damage(reason));
            // The record itself checks out: recovery may still keep it.
            replay.last_sound_line = line_number;
            replay.after_damage.extend(logged(entry));
            offset += end + 1;
            continue;
        }
        let entry = match entry {
            Entry::Delta(delta) => {
                match delta.apply_to(
                    replay
                        .latest
                        .workspaces
                        .get(&delta.workspace)
                        .map(Arc::as_ref),
                ) {
                    Ok(change) => {
                        replay.latest.apply(&change);
                        Entry::Delta(delta)
                    }
                    Err(reason) => {
                        // It checks out, but not against the state before it: something is missing
                        // or wrong before it, so it is damage, kept for recovery to judge.
                        replay.damage = Some(damage(reason));
                        replay.last_sound_line = line_number;
                        replay.after_damage.push(Logged::Delta(delta));
                        offset += end + 1;
                        continue;
                    }
                }
            }
            other => other,
        };
        replay.last_sound_line = line_number;
        match entry {
            Entry::Snapshot(contents) => {
                replay.checkpoint = contents.revision;
                replay.latest = contents.clone();
                replay.base = contents;
                replay.snapshot_len = (end + 1) as u64;
            }
            Entry::Change(change) => {
                replay.latest.apply(&change);
                replay.records.push(Logged::Whole(change));
            }
            Entry::Delta(delta) => replay.records.push(Logged::Delta(delta)),
            Entry::Checkpoint(revision) => replay.checkpoint = replay.checkpoint.max(revision),
        }
        offset += end + 1;
        replay.valid_len = offset as u64;
    }
    if line_number == 0 && replay.damage.is_none() {
        // A journal is created whole (written aside, then renamed into place), so one without
        // even its first record lost everything in it.
        replay.damage = Some(Damage {
            line: 1,
            offset: 0,
            reason: "is missing: the journal holds no record at all".to_owned(),
        });
    }
    replay
}

/// Why `rest`, the bytes after the last whole line, cannot be a record rootsd began to write and
/// never finished; `None` if they can.
///
/// rootsd writes a batch of whole records with one `pwrite` and acknowledges none of them before
/// its `fdatasync`, so a crash in between may leave the start of a record (eight hex digits, a
/// space, a JSON object), which is dropped, safely. Zeros, or bytes that do not begin a record,
/// are not what that leaves when the write itself reached the file: they are what a disk or a
/// file system leaves over records, perhaps over records already synced and acknowledged, and
/// the journal cannot tell which revisions they held. So they are damage, refused at start and
/// named by `--recover`, never taken for an end. (A file system that extends a file before its
/// data reaches the disk may leave zeros for a write that was never synced: refusing that too
/// costs a `--recover`, which keeps every sound record, and serves nothing short.)
fn not_a_torn_record(rest: &[u8]) -> Option<String> {
    let starts_a_record = rest.iter().enumerate().all(|(k, &byte)| match k {
        0..=7 => byte.is_ascii_hexdigit(),
        8 => byte == b' ',
        9 => byte == b'{',
        _ => byte != 0,
    });
    if starts_a_record {
        return None;
    }
    let zeros = rest.iter().filter(|&&byte| byte == 0).count();
    Some(if zeros == rest.len() {
        format!(
            "holds {} zero bytes up to the end of the file, where a record or records had been",
            rest.len()
        )
    } else {
        format!(
            "holds {} bytes up to the end of the file ({zeros} of them zero) that are not the start of a record",
            rest.len()
        )
    })
}

/// The change a record holds, if it holds one.
fn logged(entry: Entry) -> Option<Logged> {
    match entry {
        Entry::Change(change) => Some(Logged::Whole(change)),
        Entry::Delta(delta) => Some(Logged::Delta(delta)),
        Entry::Snapshot(_) | Entry::Checkpoint(_) => None,
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// Reads the journal at `path`; `None` if there is none.
pub fn read(path: &Path) -> io::Result<Option<Replay>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(replay(&bytes))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

/// The open journal, appended to by the writer and synced by the committer.
pub struct Journal {
    file: File,
    path: PathBuf,
    /// Bytes of whole records, those still in `unwritten` included.
    len: u64,
    snapshot_len: u64,
    /// Records appended with [`Journal::append_deferred`] and not yet written to the file: the
    /// commit thread writes them all with one `pwrite` before its sync
    /// ([`Journal::take_unwritten`]), so that a burst of writers costs one system call, not one
    /// each under the writers' lock. Bounded by the changes waiting for that sync.
    unwritten: Vec<u8>,
    /// The buffer the last sync wrote, given back emptied ([`Journal::recycle`]) to take
    /// `unwritten`'s place at the next: a buffer that started empty at every sync grew by
    /// doubling under the writers' lock, reallocated and copied at each step.
    spare: Vec<u8>,
}

/// The largest buffer kept for reuse: a burst of a few hundred small changes. A larger one,
/// after a burst of large changes, goes back to the allocator.
const SPARE_MAX: usize = 64 * 1024;

impl Journal {
    /// Writes a new journal holding `contents` (checkpointed at `checkpoint`) in place of any
    /// old one: to a temporary file, synced, renamed over, and the directory synced, so that a
    /// crash leaves the old journal or the new one, never a mix.
    pub fn create(path: &Path, contents: &Contents, checkpoint: u64) -> io::Result<Self> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let temporary = path.with_extension("journal.new");
        let mut bytes = encode(&Entry::Snapshot(contents.clone()));
        let snapshot_len = bytes.len() as u64;
        if checkpoint > contents.revision {
            return Err(io::Error::other(
                "a checkpoint cannot be ahead of the snapshot",
            ));
        }
        bytes.extend_from_slice(&encode(&Entry::Checkpoint(checkpoint)));
        {
            let file = private_file(&temporary, true)?;
            file.write_all_at(&bytes, 0)?;
            file.sync_all()?;
        }
        fs::rename(&temporary, path)?;
        sync_dir(dir)?;
        let file = private_file(path, false)?;
        Ok(Self {
            file,
            path: path.to_owned(),
            len: bytes.len() as u64,
            snapshot_len,
            unwritten: Vec::new(),
            spare: Vec::new(),
        })
    }

    /// Rewrites the journal as a snapshot of `contents` (which the database is durable at),
    /// followed by `tail`, the changes written after it that are not durable yet: aside, synced,
    /// renamed over, the directory synced. Returns the length up to the tail, the part that is
    /// durable as the journal's (a failed sync of the tail cuts back to it).
    pub fn compact(&mut self, contents: &Contents, tail: &[Change]) -> io::Result<u64> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let temporary = self.path.with_extension("journal.new");
        let mut bytes = encode(&Entry::Snapshot(contents.clone()));
        let snapshot_len = bytes.len() as u64;
        bytes.extend_from_slice(&encode(&Entry::Checkpoint(contents.revision)));
        let durable = bytes.len() as u64;
        for change in tail {
            bytes.extend_from_slice(&encode(&Entry::Change(change.clone())));
        }
        {
            let file = private_file(&temporary, true)?;
            file.write_all_at(&bytes, 0)?;
            file.sync_all()?;
        }
        fs::rename(&temporary, &self.path)?;
        sync_dir(dir)?;
        self.file = private_file(&self.path, false)?;
        self.len = bytes.len() as u64;
        self.snapshot_len = snapshot_len;
        // The tail was written above, re-encoded from the changes in flight.
        self.unwritten.clear();
        Ok(durable)
    }

    /// Opens an existing journal, as `replay` found it, for appending after its valid records,
    /// cutting off a torn last record.
    pub fn open(path: &Path, replay: &Replay) -> io::Result<Self> {
        let valid_len = replay.valid_len;
        let file = private_file(path, false)?;
        if file.metadata()?.len() != valid_len {
            file.set_len(valid_len)?;
            file.sync_all()?;
        }
        Ok(Self {
            file,
            path: path.to_owned(),
            len: valid_len,
            snapshot_len: replay.snapshot_len,
            unwritten: Vec::new(),
            spare: Vec::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of whole records.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Bytes of the snapshot the journal starts with: the live data, as the journal holds it.
    pub fn snapshot_len(&self) -> u64 {
        self.snapshot_len
    }

    /// Whether the records after the snapshot have grown past [`COMPACT_AFTER`] (or twice the
    /// snapshot), so that the journal should be rewritten as one snapshot.
    pub fn wants_compaction(&self) -> bool {
        self.len.saturating_sub(self.snapshot_len) > COMPACT_AFTER.max(2 * self.snapshot_len)
    }

    /// Writes `entry` after the last record (and any deferred ones before it). Not durable
    /// until [`Journal::sync`].
    pub fn append(&mut self, entry: &Entry) -> io::Result<()> {
        let line = encode(entry);
        self.len += line.len() as u64;
        self.unwritten.extend_from_slice(&line);
        let (bytes, at) = self.take_unwritten();
        if let Err(error) = self.file.write_all_at(&bytes, at) {
            // A partial record must not stay in front of the next one.
            let _ = self.file.set_len(at);
            self.len = at;
            return Err(error);
        }
        Ok(())
    }

    /// Where the file's written part ends: the records after it wait in `unwritten`.
    fn written(&self) -> u64 {
        self.len - self.unwritten.len() as u64
    }

    /// Queues `change` (whose workspace was `previous` before it) after the last record, for
    /// [`Journal::take_unwritten`] to hand to the writer of the next sync: as a delta, which
    /// costs bytes in proportion to the change, when a delta can say it.
    pub fn append_change_deferred(
        &mut self,
        change: &Change,
        previous: Option<&StoredWorkspaceV1>,
    ) {
        let before = self.unwritten.len();
        match Delta::between(previous, change) {
            // Encoded in place: the common record needs no buffer of its own.
            Some(delta) => encode_delta(&delta, &mut self.unwritten),
            None => self
                .unwritten
                .extend_from_slice(&encode(&Entry::Change(change.clone()))),
        }
        self.len += (self.unwritten.len() - before) as u64;
    }

    /// The records queued since the last call and the offset they go at. The caller writes them
    /// there (through [`Journal::sync_handle`]) before syncing; if that fails, it cuts the
    /// journal back with [`Journal::truncate`].
    pub fn take_unwritten(&mut self) -> (Vec<u8>, u64) {
        let at = self.written();
        let spare = std::mem::take(&mut self.spare);
        (std::mem::replace(&mut self.unwritten, spare), at)
    }

    /// Takes back a buffer [`Journal::take_unwritten`] handed out, once written, for reuse.
    pub fn recycle(&mut self, mut bytes: Vec<u8>) {
        if bytes.capacity() <= SPARE_MAX {
            bytes.clear();
            self.spare = bytes;
        }
    }

    /// Writes `change`, whose workspace was `previous` before it, after the last record: as a
    /// delta, which costs bytes in proportion to the change, when a delta can say it.
    pub fn append_change(
        &mut self,
        change: &Change,
        previous: Option<&StoredWorkspaceV1>,
    ) -> io::Result<()> {
        match Delta::between(previous, change) {
            Some(delta) => self.append(&Entry::Delta(delta)),
            None => self.append(&Entry::Change(change.clone())),
        }
    }

    /// Makes everything appended so far durable: writes what was deferred, then `fdatasync`.
    pub fn sync(&mut self) -> io::Result<()> {
        let (bytes, at) = self.take_unwritten();
        if let Err(error) = self.file.write_all_at(&bytes, at) {
            let _ = self.file.set_len(at);
            self.len = at;
            return Err(error);
        }
        self.file.sync_data()
    }

    /// A second handle on the file, for syncing it from another thread while appends go on.
    pub fn sync_handle(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// Cuts the journal back to `len` bytes (dropping records that failed to become durable)
    /// and syncs.
    pub fn truncate(&mut self, len: u64) -> io::Result<()> {
        // Records not yet written are cut with the rest.
        self.len = self.written();
        self.unwritten.clear();
        self.file.set_len(len)?;
        // The next record goes at `len` whether or not this sync succeeds.
        self.len = len;
        self.file.sync_data()
    }
}

/// Opens (or creates, mode 0600) a file of the journal.
fn private_file(path: &Path, truncate: bool) -> io::Result<File> {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(truncate)
        .mode(0o600)
        .open(path)
}

/// Makes the directory's entries (a new or renamed file) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests;
