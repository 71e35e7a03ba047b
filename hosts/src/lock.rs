//! One `rootsctl hosts` command at a time: a command that changes hosts' files holds an exclusive
//! `flock` on `lock` in the state directory for the whole read, change and write of the record
//! and the files, so that two commands never both write the record from what each read (one
//! file's record would be lost, and that file stay wrapped for good). The holder writes its pid
//! into the file, so that a command that waited in vain can say who holds it. The kernel drops
//! the lock when its holder exits, however it exits.

use std::fs;
use std::io::{self, Read as _, Seek as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, flock};

/// How long a command waits for another to finish: far longer than any command takes.
pub const WAIT: Duration = Duration::from_secs(10);

/// How often a waiting command tries again.
const RETRY: Duration = Duration::from_millis(20);

/// The lock, held until dropped (or the process exits).
#[derive(Debug)]
pub struct Lock {
    _file: fs::File,
}

/// Takes the lock in `dir` (created, private, when missing), waiting up to `wait` for another
/// command that holds it.
pub fn take(dir: &Path, wait: Duration) -> anyhow::Result<Lock> {
    super::write::private_dir(dir)?;
    let path = dir.join("lock");
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)?;
    let deadline = Instant::now() + wait;
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => break,
            Err(rustix::io::Errno::WOULDBLOCK) if Instant::now() < deadline => {
                std::thread::sleep(RETRY);
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                anyhow::bail!(
                    "another rootsctl hosts command ({}) is changing the hosts' files and holds {}; waited {:?} for it: let it finish and run this command again (or, if it hangs, stop it)",
                    holder(&mut file),
                    path.display(),
                    wait
                );
            }
            Err(e) => return Err(io::Error::from(e).into()),
        }
    }
    file.set_len(0)?;
    file.rewind()?;
    writeln!(file, "{}", std::process::id())?;
    Ok(Lock { _file: file })
}

/// Who holds the lock, as its holder wrote it.
fn holder(file: &mut fs::File) -> String {
    let mut text = String::new();
    let read = file
        .rewind()
        .and_then(|()| io::Read::by_ref(file).take(32).read_to_string(&mut text));
    match read.ok().and(text.trim().parse::<u32>().ok()) {
        Some(pid) => format!("pid {pid}"),
        None => "its pid unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_command_waits_a_bounded_time_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("hosts");
        let held = take(&state, WAIT).unwrap();
        let started = Instant::now();
        let error = take(&state, Duration::from_millis(200)).unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(200));
        let message = error.to_string();
        assert!(
            message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        assert!(message.contains("waited 200ms"), "{message}");
        drop(held);
        take(&state, Duration::ZERO).unwrap();
    }
}
