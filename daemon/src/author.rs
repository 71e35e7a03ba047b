//! Who a connection is, for the history of the changes it makes: the kernel's credentials
//! (`SO_PEERCRED`, recorded when it connected), its process name, read once when it says hello
//! (the process may be gone by the time a change is recorded), the name it claimed in hello, and
//! its user's name, looked up the first time it makes a change.
//!
//! Each read is of a small local file (`/proc/PID/comm`, `/etc/passwd`), bounded in size and
//! done once per connection; a read that fails leaves the field out rather than fail anything.
//! This module decides nothing about what a peer may do: that is [`crate::info::Role`]'s.

use std::io::Read as _;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::info::AdmittedPeer;
use crate::store::PeerV1;
use crate::store::bounded_text;
use crate::users;

/// A greeted connection's identity, as the history records it. Its texts are shared with every
/// change it makes, which clones them as pointers.
#[derive(Debug)]
pub struct Author {
    uid: u32,
    pid: Option<i32>,
    process: Option<Arc<str>>,
    client: Option<Arc<str>>,
    user: OnceLock<Option<Arc<str>>>,
}

impl Author {
    /// Records who `peer` is as it says hello, claiming to be `client`.
    pub fn at_hello(peer: &AdmittedPeer, client: &str) -> Self {
        let client = client.trim();
        Self {
            uid: peer.uid,
            pid: peer.pid,
            process: peer.pid.and_then(process_name).map(Arc::from),
            client: (!client.is_empty()).then(|| Arc::from(bounded_text(client))),
            user: OnceLock::new(),
        }
    }

    /// This connection as a peer of the history, for changes made by it or on behalf of its
    /// session.
    pub fn peer(&self) -> PeerV1 {
        let user = self
            .user
            .get_or_init(|| {
                users::name_of(self.uid, Path::new(users::PASSWD_FILE))
                    .map(|name| Arc::from(bounded_text(&name)))
            })
            .clone();
        PeerV1 {
            uid: self.uid,
            user,
            pid: self.pid.and_then(|pid| u32::try_from(pid).ok()),
            process: self.process.clone(),
            client: self.client.clone(),
        }
    }
}

/// The name the kernel keeps for process `pid` (`/proc/PID/comm`: the executable's base name cut
/// to 15 bytes, unless the process renamed itself), if it can be read.
pub fn process_name(pid: i32) -> Option<String> {
    let mut bytes = Vec::with_capacity(32);
    std::fs::File::open(format!("/proc/{pid}/comm"))
        .ok()?
        // The kernel writes at most 16 bytes and a newline; more would be a strange /proc.
        .take(64)
        .read_to_end(&mut bytes)
        .ok()?;
    let name = String::from_utf8_lossy(&bytes);
    let name = name.strip_suffix('\n').unwrap_or(&name);
    (!name.is_empty()).then(|| bounded_text(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::Role;

    #[test]
    fn the_process_name_is_the_kernels_and_a_gone_process_has_none() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("run sleep");
        let pid = i32::try_from(child.id()).unwrap();
        // Once seen at all, the name is the executable's; it was seen wrong once under a busy
        // parallel run, so a moment's wait for the exec is allowed, naming what was read.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut name = process_name(pid);
        while name.as_deref() != Some("sleep") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            name = process_name(pid);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            name.as_deref(),
            Some("sleep"),
            "the name read for pid {pid}"
        );
        assert_eq!(process_name(pid), None, "a reaped process has no name");
    }

    #[test]
    fn an_author_records_the_kernels_ids_and_what_the_client_claimed() {
        let me = rustix::process::geteuid().as_raw();
        let pid = i32::try_from(std::process::id()).unwrap();
        let peer = AdmittedPeer {
            uid: me,
            pid: Some(pid),
            role: Role::Owner,
        };
        let author = Author::at_hello(&peer, &format!("  rootsctl 0.1.0 {}", "x".repeat(1000)));
        let PeerV1 {
            uid,
            user,
            pid: recorded_pid,
            process,
            client,
        } = author.peer();
        assert_eq!(uid, me);
        assert_eq!(recorded_pid, Some(std::process::id()));
        assert_eq!(process.as_deref(), process_name(pid).as_deref());
        assert!(process.is_some());
        let client = client.unwrap();
        assert!(
            client.starts_with("rootsctl 0.1.0 x") && client.len() <= 256,
            "{client}"
        );
        assert_eq!(
            user,
            users::name_of(me, Path::new(users::PASSWD_FILE)).map(Arc::from),
            "the user is named from /etc/passwd"
        );
        assert_eq!(Author::at_hello(&peer, " ").peer().client, None);
    }
}
