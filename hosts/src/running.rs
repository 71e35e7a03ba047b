//! Whether Claude Code runs for this user: every session holds `~/.claude.json` in memory and
//! writes it back whole, which would undo a wrap or tear the file. Found in /proc: a process
//! named `claude` or `claude.exe` (the native build's name; or a node running a `claude` script)
//! whose `HOME` is this home, however spelled (`/home/me/` is `/home/me`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// A look through /proc for Claude Code ([`claude_code`]) on a thread of its own, whose answer
/// is waited for only when it is needed.
pub struct Scan {
    home: PathBuf,
    started: Option<JoinHandle<Vec<u32>>>,
    pids: Option<Vec<u32>>,
}

impl Scan {
    /// Starts looking; a scan whose thread cannot start looks when asked instead.
    pub fn start(home: &Path) -> Self {
        let owned = home.to_owned();
        let started = std::thread::Builder::new()
            .name("claude-scan".to_owned())
            .spawn(move || claude_code(&owned))
            .ok();
        Self {
            home: home.to_owned(),
            started,
            pids: None,
        }
    }

    /// The pids found, sorted.
    pub fn pids(&mut self) -> &[u32] {
        let home = &self.home;
        let started = &mut self.started;
        self.pids.get_or_insert_with(|| {
            started
                .take()
                .and_then(|scan| scan.join().ok())
                .unwrap_or_else(|| claude_code(home))
        })
    }
}

/// The pids of the Claude Code processes running with `home` as their home.
pub fn claude_code(home: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid| pid != &std::process::id() && is_claude(*pid) && home_of(*pid, home))
        .collect();
    pids.sort_unstable();
    pids
}

/// The names Claude Code's process goes by: the npm package's native binary is `claude.exe`,
/// run as such or through a `claude` link.
const NAMES: [&[u8]; 2] = [b"claude", b"claude.exe"];

fn is_claude(pid: u32) -> bool {
    let named = |arg: &[u8]| {
        Path::new(OsStr::from_bytes(arg))
            .file_name()
            .is_some_and(|name| NAMES.contains(&name.as_bytes()))
    };
    let comm = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
    if NAMES.contains(&comm.strip_suffix(b"\n").unwrap_or(&comm)) {
        return true;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut args = cmdline.split(|b| *b == 0);
    let first = args.next().unwrap_or_default();
    named(first) || (named_node(first) && args.next().is_some_and(named))
}

fn named_node(arg: &[u8]) -> bool {
    Path::new(OsStr::from_bytes(arg)).file_name() == Some(OsStr::new("node"))
}

/// Whether `pid`'s environment has `HOME` set to `home`, compared as paths so that a trailing
/// slash does not count (readable for the user's own processes only).
fn home_of(pid: u32, home: &Path) -> bool {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    environ.split(|b| *b == 0).any(|v| {
        v.strip_prefix(b"HOME=")
            .is_some_and(|h| Path::new(OsStr::from_bytes(h)) == home)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claude_exe_with_home_spelled_with_a_trailing_slash_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        // A process named as the native Claude Code is: a copy of sleep called claude.exe.
        let exe = dir.path().join("claude.exe");
        std::fs::copy("/bin/sleep", &exe).unwrap();
        let mut child = std::process::Command::new(&exe)
            .arg("30")
            .env("HOME", format!("{}/", home.display()))
            .spawn()
            .unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let found = loop {
            let found = claude_code(&home).contains(&pid);
            if found || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::yield_now();
        };
        let _ = child.kill();
        let _ = child.wait();
        assert!(found, "pid {pid} (claude.exe, HOME with a slash) is found");
    }
}
