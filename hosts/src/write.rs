//! Reading and replacing a host's file safely: bounded reads of regular files only, a backup
//! before a change, and an atomic replacement (a temporary file in the same directory, synced,
//! renamed over the file, the directory synced) that keeps the file's mode and owner, made only
//! if the file still holds what was read, compared once before the temporary file is written and
//! again after it is synced, right before the rename: a host that wrote it meanwhile is not
//! overwritten. What remains is the window between that last comparison and rename(2), which no
//! lock in userspace that the host does not share can close.

use std::fs;
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{
    DirBuilderExt as _, FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _,
    PermissionsExt as _,
};
use std::path::{Path, PathBuf};

/// The most rootsctl reads of any file: its own record (`wrapped.json`) included.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// The most a host's file may be for rootsctl to edit it. Larger than any host's file (Claude
/// Code's `~/.claude.json` grows with its history, to a few MiB), and small enough that the
/// record of a wrap (the changed regions before and after, escaped as JSON) stays below
/// [`MAX_FILE_BYTES`], so that rootsctl can always read back what it wrote.
pub const MAX_HOST_FILE_BYTES: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(
        "it changed since rootsctl read it (its host may have written it): nothing was written; run the command again"
    )]
    Changed,
    #[error(
        "it changed while rootsctl was replacing it (its host wrote it meanwhile): the host's version was kept and nothing was written; run the command again"
    )]
    ChangedWhileWriting,
    #[error(
        "it is read-only (mode {mode:04o}), which says it is not to be changed: it was left untouched; to change it anyway, make it writable (chmod u+w on it) and run the command again"
    )]
    ReadOnly { mode: u32 },
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// The file's bytes, up to [`MAX_FILE_BYTES`]; `None` when there is no such file.
pub fn read(path: &Path) -> io::Result<Option<Vec<u8>>> {
    read_at_most(path, MAX_FILE_BYTES)
}

/// A host's file's bytes, up to [`MAX_HOST_FILE_BYTES`]; `None` when there is no such file.
pub fn read_host(path: &Path) -> io::Result<Option<Vec<u8>>> {
    read_at_most(path, MAX_HOST_FILE_BYTES)
}

fn read_at_most(path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let Some((file, meta)) = open_regular(path)? else {
        return Ok(None);
    };
    let too_large = || {
        io::Error::other(format!(
            "it is larger than {} MiB, more than any host writes: rootsctl leaves it alone",
            limit >> 20
        ))
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // One byte more than the limit tells a file that grew since its size was read.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(Some(bytes))
}

/// `path` opened for reading if it is a regular file (a symbolic link is followed); `None` when
/// there is no such file. Anything else (a FIFO, a device, a directory) is refused from its
/// metadata, and opened without blocking in case it was swapped for one since: opening a FIFO
/// for reading would wait for a writer, and a device would read forever.
fn open_regular(path: &Path) -> io::Result<Option<(fs::File, fs::Metadata)>> {
    match fs::metadata(path) {
        Ok(meta) => regular(&meta)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    regular(&meta)?;
    Ok(Some((file, meta)))
}

/// An error naming what the file is unless it is a regular file.
fn regular(meta: &fs::Metadata) -> io::Result<()> {
    let kind = meta.file_type();
    let what = if kind.is_file() {
        return Ok(());
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "something other than a file"
    };
    Err(io::Error::other(format!(
        "it is {what}, not a regular file: rootsctl reads and edits only regular files (or symbolic links to them); make it one, or leave this project out"
    )))
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

/// Refuses a file whose owner may not write it: someone made it read-only on purpose.
pub fn writable(path: &Path) -> Result<(), WriteError> {
    let meta = fs::metadata(path)?;
    regular(&meta)?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o200 == 0 {
        return Err(WriteError::ReadOnly { mode });
    }
    Ok(())
}

/// Replaces `path`'s contents with `new`, atomically, if it still holds `expected`. A symbolic
/// link (a dotfiles manager's) is followed, so the link stays and its target changes.
pub fn replace(path: &Path, expected: &[u8], new: &[u8]) -> Result<(), WriteError> {
    let target = fs::canonicalize(path)?;
    writable(&target)?;
    let meta = fs::metadata(&target)?;
    // Re-read before writing: what the planner saw must still be the file.
    if !holds(&target, expected)? {
        return Err(WriteError::Changed);
    }
    // And again once the new text is on disk, right before the rename: a host that wrote the
    // file while the temporary one was written and synced (which can take long) is kept.
    write_atomic(&target, new, Some(&meta), || holds(&target, expected))
}

/// Whether the file at `path` holds exactly `expected`. It is read a piece at a time: reading a
/// large file whole a second time cost a fresh buffer of its size, whose page faults cost about
/// as much as the read.
fn holds(path: &Path, expected: &[u8]) -> io::Result<bool> {
    let Some((mut file, meta)) = open_regular(path)? else {
        return Ok(false);
    };
    if meta.len() != expected.len() as u64 {
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
    match write_atomic(path, bytes, like, || Ok(true)) {
        Ok(()) => Ok(()),
        Err(WriteError::Io(e)) => Err(e),
        Err(other) => Err(io::Error::other(other.to_string())),
    }
}

/// The temporary file rootsctl (of pid `pid`) writes beside `name`.
fn temp_name(name: &str, pid: u32) -> String {
    format!(".{name}.rootsctl-{pid}.tmp")
}

/// Writes `bytes` to a temporary file beside `path`, syncs it, and renames it over `path` if
/// `still` then says the file may still be replaced.
fn write_atomic(
    path: &Path,
    bytes: &[u8],
    like: Option<&fs::Metadata>,
    still: impl FnOnce() -> io::Result<bool>,
) -> Result<(), WriteError> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    remove_stale(dir, &name);
    let temp = dir.join(temp_name(&name, std::process::id()));
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
        before_last_compare();
        if !still()? {
            return Err(WriteError::ChangedWhileWriting);
        }
        fs::rename(&temp, path)?;
        Ok(sync_dir(dir)?)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Removes the temporary files beside `name` that a rootsctl killed mid-write left (its pid is
/// in the name and no longer runs). Best effort: a file that cannot be removed stays.
fn remove_stale(dir: &Path, name: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{name}.rootsctl-");
    for entry in entries.filter_map(Result::ok) {
        let file = entry.file_name();
        let Some(pid) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix)?.strip_suffix(".tmp"))
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let dead = rustix::process::Pid::from_raw(pid).is_some_and(|pid| {
            rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
        });
        if dead {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
thread_local! {
    /// What a test does between the temporary file's sync and the last comparison.
    static BEFORE_LAST_COMPARE: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        std::cell::RefCell::new(None);
}

#[cfg(test)]
fn before_last_compare() {
    if let Some(hook) = BEFORE_LAST_COMPARE.with(|h| h.borrow_mut().take()) {
        hook();
    }
}

#[cfg(not(test))]
fn before_last_compare() {}

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
        let read = read_host(&file).unwrap().unwrap();
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
    fn a_host_write_after_the_temporary_file_is_synced_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mcp.json");
        fs::write(&file, "{}\n").unwrap();
        let read = read_host(&file).unwrap().unwrap();
        // The host writes the file while rootsctl's replacement is being synced.
        let host = file.clone();
        BEFORE_LAST_COMPARE.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                fs::write(&host, "{\"servers\": {}}\n").unwrap();
            }));
        });
        let error = replace(&file, &read, b"{\"wrapped\": 1}\n").unwrap_err();
        assert!(matches!(error, WriteError::ChangedWhileWriting), "{error}");
        assert!(error.to_string().contains("the host's version was kept"));
        assert_eq!(fs::read_to_string(&file).unwrap(), "{\"servers\": {}}\n");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file is left"
        );
    }

    #[test]
    fn a_fifo_and_a_device_are_refused_without_blocking_and_a_large_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo (coreutils) makes a FIFO");
        let error = read_host(&fifo).unwrap_err().to_string();
        assert!(error.contains("a FIFO, not a regular file"), "{error}");
        let zero = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let error = read_host(&zero).unwrap_err().to_string();
        assert!(error.contains("a character device"), "{error}");
        let big = dir.path().join("big.json");
        fs::File::create(&big)
            .unwrap()
            .set_len(MAX_HOST_FILE_BYTES + 1)
            .unwrap();
        let error = read_host(&big).unwrap_err().to_string();
        assert!(error.contains("larger than 16 MiB"), "{error}");
        assert!(
            read(&big).unwrap().is_some(),
            "the record's own limit is larger"
        );
    }

    #[test]
    fn a_read_only_file_is_refused_naming_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mcp.json");
        fs::write(&file, "old").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o444)).unwrap();
        let error = replace(&file, b"old", b"new").unwrap_err();
        assert!(
            matches!(error, WriteError::ReadOnly { mode: 0o444 }),
            "{error}"
        );
        assert!(error.to_string().contains("mode 0444"), "{error}");
        assert_eq!(fs::read_to_string(&file).unwrap(), "old");
    }

    #[test]
    fn temporary_files_of_dead_rootsctls_are_removed_and_of_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mcp.json");
        fs::write(&file, "old").unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        let stale = dir.path().join(temp_name("mcp.json", dead));
        // pid 1 runs as long as the machine does.
        let live = dir.path().join(temp_name("mcp.json", 1));
        fs::write(&stale, "half").unwrap();
        fs::write(&live, "half").unwrap();
        replace(&file, b"old", b"new").unwrap();
        assert!(
            !stale.exists(),
            "a dead rootsctl's temporary file is removed"
        );
        assert!(live.exists(), "a live process's is kept");
    }

    #[test]
    fn a_record_larger_than_rootsctl_reads_back_is_not_written() {
        use super::super::plan::Remembered;
        use super::super::record::Record;
        let dir = tempfile::tempdir().unwrap();
        let mut record = Record::default();
        let region = "x".repeat(40 << 20);
        let entry = Remembered {
            path: vec!["mcpServers".to_owned(), "fs".to_owned()],
            original: region.clone(),
            wrapped: region,
            values: None,
        };
        record.add("claude-code", Path::new("/h/.mcp.json"), vec![entry]);
        let error = record.save(dir.path()).unwrap_err().to_string();
        assert!(error.contains("larger than 64 MiB"), "{error}");
        assert!(!dir.path().join("wrapped.json").exists());
        assert!(
            Record::load(dir.path()).is_ok(),
            "later commands still read it"
        );
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
