//! Reading and replacing a host's file safely: bounded reads, a backup before a change, and an
//! atomic replacement (a temporary file in the same directory, synced, renamed over the file,
//! the directory synced) that keeps the file's mode and owner, made only if the file still holds
//! what was read: a host that wrote it meanwhile is not overwritten.

use std::fs;
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{
    DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _,
};
use std::path::{Path, PathBuf};

/// Larger than any host's file (Claude Code's `~/.claude.json` grows with its history, to a few
/// MiB), small enough to hold twice in memory.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(
        "it changed since rootsctl read it (its host may have written it): nothing was written; run the command again"
    )]
    Changed,
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// The file's bytes; `None` when there is no such file.
pub fn read(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::metadata(path) {
        Ok(meta) if meta.len() > MAX_FILE_BYTES => Err(io::Error::other(format!(
            "it is larger than {} MiB, more than any host writes",
            MAX_FILE_BYTES >> 20
        ))),
        Ok(_) => fs::read(path).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Copies `bytes` (the file as read) to `backups/NAME@SECONDS`, private to the user, synced,
/// and returns its path. An existing backup of the same second is kept, not overwritten.
pub fn backup(backups: &Path, file: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    private_dir(backups)?;
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let name = escape(file);
    for n in 0.. {
        let suffix = if n == 0 {
            String::new()
        } else {
            format!(".{n}")
        };
        let path = backups.join(format!("{name}@{seconds}{suffix}"));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(mut out) => {
                out.write_all(bytes)?;
                out.sync_all()?;
                sync_dir(backups)?;
                return Ok(path);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("some suffix is free")
}

/// A file's absolute path as one file name: `/` becomes `%2F` (and `%` becomes `%25`).
pub fn escape(file: &Path) -> String {
    file.to_string_lossy()
        .replace('%', "%25")
        .replace('/', "%2F")
}

/// Creates `dir` (and its parents) with mode 0700 when missing.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Replaces `path`'s contents with `new`, atomically, if it still holds `expected`. A symbolic
/// link (a dotfiles manager's) is followed, so the link stays and its target changes.
pub fn replace(path: &Path, expected: &[u8], new: &[u8]) -> Result<(), WriteError> {
    let target = fs::canonicalize(path)?;
    let meta = fs::metadata(&target)?;
    // Re-read just before writing: what the planner saw must still be the file.
    if !holds(&target, expected)? {
        return Err(WriteError::Changed);
    }
    write_new(&target, new, Some(&meta))?;
    Ok(())
}

/// Whether the file at `path` holds exactly `expected`. It is read a piece at a time: reading a
/// large file whole a second time cost a fresh buffer of its size, whose page faults cost about
/// as much as the read.
fn holds(path: &Path, expected: &[u8]) -> io::Result<bool> {
    let mut file = match fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if file.metadata()?.len() != expected.len() as u64 {
        return Ok(false);
    }
    let mut piece = vec![0; 64 << 10];
    let mut at = 0;
    loop {
        let n = match file.read(&mut piece) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(at == expected.len());
        }
        if expected.get(at..at + n) != Some(&piece[..n]) {
            return Ok(false);
        }
        at += n;
    }
}

/// Writes `path` atomically, with `like`'s mode and owner (else mode 0600).
pub fn write_new(path: &Path, bytes: &[u8], like: Option<&fs::Metadata>) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.rootsctl-{}.tmp", std::process::id()));
    let result = (|| {
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        if let Some(like) = like {
            let mine = out.metadata()?;
            if (mine.uid(), mine.gid()) != (like.uid(), like.gid()) {
                std::os::unix::fs::fchown(&out, Some(like.uid()), Some(like.gid()))?;
            }
            out.set_permissions(fs::Permissions::from_mode(like.mode() & 0o7777))?;
        }
        out.write_all(bytes)?;
        out.sync_all()?;
        fs::rename(&temp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_changed_since_it_was_read_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mcp.json");
        fs::write(&file, "{}\n").unwrap();
        let read = read(&file).unwrap().unwrap();
        // The host writes the file between rootsctl's read and its write.
        fs::write(&file, "{\"servers\": {}}\n").unwrap();
        let error = replace(&file, &read, b"{\"wrapped\": 1}\n").unwrap_err();
        assert!(matches!(error, WriteError::Changed), "{error}");
        assert!(error.to_string().contains("run the command again"));
        assert_eq!(fs::read_to_string(&file).unwrap(), "{\"servers\": {}}\n");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file is left"
        );
    }

    #[test]
    fn a_file_is_held_only_byte_for_byte_whatever_its_length() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big.json");
        // Longer than one piece, so that a difference past the first is found too.
        let text: Vec<u8> = (0..200_000u32).map(|n| b'a' + (n % 26) as u8).collect();
        fs::write(&file, &text).unwrap();
        assert!(holds(&file, &text).unwrap());
        let mut late = text.clone();
        late[150_000] = b'!';
        assert!(
            !holds(&file, &late).unwrap(),
            "a byte changed past the first piece"
        );
        assert!(
            !holds(&file, &text[..text.len() - 1]).unwrap(),
            "one byte shorter"
        );
        let mut longer = text.clone();
        longer.push(b'\n');
        assert!(!holds(&file, &longer).unwrap(), "one byte longer");
        assert!(!holds(&dir.path().join("gone.json"), &text).unwrap());
    }

    #[test]
    fn a_replacement_keeps_the_mode_and_follows_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        fs::write(&real, "old").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        replace(&link, b"old", b"new").unwrap();
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::metadata(&real).unwrap().mode() & 0o777, 0o640);
    }

    #[test]
    fn backups_are_private_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let backups = dir.path().join("b");
        let first = backup(&backups, Path::new("/h/.codex/config.toml"), b"one").unwrap();
        let second = backup(&backups, Path::new("/h/.codex/config.toml"), b"two").unwrap();
        assert_ne!(first, second);
        assert_eq!(fs::read(&first).unwrap(), b"one");
        assert!(
            first
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("%2Fh%2F.codex%2Fconfig.toml@")
        );
        assert_eq!(fs::metadata(&backups).unwrap().mode() & 0o777, 0o700);
        assert_eq!(fs::metadata(&first).unwrap().mode() & 0o777, 0o600);
    }
}
