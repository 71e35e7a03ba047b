//! What rootsctl wrapped, so that `unwrap` restores it exactly even after rootsctl moved or the
//! host's file changed elsewhere: per file and entry, the text of the entry's command-to-arguments
//! region as it was and as rootsctl wrote it. Kept in `~/.local/state/rootsctl/hosts/wrapped.json`
//! (found from `HOME` alone, private to the user), written atomically.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::Remembered;
use super::write;

const VERSION: u32 = 1;

/// Where rootsctl keeps the record and the backups: `~/.local/state/rootsctl/hosts`.
pub fn dir(home: &Path) -> PathBuf {
    home.join(".local/state/rootsctl/hosts")
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub version: u32,
    pub files: Vec<FileRecord>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub host: String,
    pub file: PathBuf,
    pub entries: Vec<Remembered>,
}

impl Record {
    /// The record in `dir`; none yet is an empty one. One that cannot be read is an error: unwrap
    /// must not guess.
    pub fn load(dir: &Path) -> Result<Self, String> {
        let path = dir.join("wrapped.json");
        let bytes = match write::read(&path) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                return Ok(Self {
                    version: VERSION,
                    files: Vec::new(),
                });
            }
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let record: Self = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} does not parse ({e}); restore it from a backup, or move it away to start afresh", path.display()))?;
        if record.version != VERSION {
            return Err(format!(
                "{} is of version {}, which this rootsctl does not know; use the rootsctl that wrote it",
                path.display(),
                record.version
            ));
        }
        Ok(record)
    }

    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        write::private_dir(dir)?;
        let mut bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        // A record rootsctl could not read back would stop every later command.
        if bytes.len() as u64 > write::MAX_FILE_BYTES {
            return Err(std::io::Error::other(format!(
                "the record would be larger than {} MiB, more than rootsctl reads back",
                write::MAX_FILE_BYTES >> 20
            )));
        }
        write::write_new(&dir.join("wrapped.json"), &bytes, None)
    }

    /// Remembers `entries` of `file`, replacing what was remembered of the same entries.
    pub fn add(&mut self, host: &str, file: &Path, entries: Vec<Remembered>) {
        let index = match self.files.iter().position(|f| f.file == file) {
            Some(index) => index,
            None => {
                self.files.push(FileRecord {
                    host: host.to_owned(),
                    file: file.to_owned(),
                    entries: Vec::new(),
                });
                self.files.len() - 1
            }
        };
        let record = &mut self.files[index];
        record
            .entries
            .retain(|e| entries.iter().all(|n| n.path != e.path));
        record.entries.extend(entries);
    }

    /// Keeps, of `file`'s entries, only those `keep` says.
    pub fn retain(&mut self, file: &Path, mut keep: impl FnMut(&Remembered) -> bool) {
        for record in self.files.iter_mut().filter(|f| f.file == file) {
            record.entries.retain(&mut keep);
        }
        self.files.retain(|f| !f.entries.is_empty());
    }
}
