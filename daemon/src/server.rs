//! The accept loop: [`run`] serves a listener until the shutdown token fires, then drains.

use std::os::unix::fs::MetadataExt as _;
use std::sync::Arc;
use std::time::Duration;

use interprocess::local_socket::tokio::{Listener, Stream, prelude::*};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::StoreError;
use crate::info::{Access, DaemonInfo};
use crate::registry::Registry;

/// Upper bound on concurrent connections. Each MCP session holds one, so this is sized for
/// thousands of sessions; past it, new connections wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 16_384;

/// Serves `listener` until `shutdown` is cancelled, then waits for every connection to finish
/// what it is doing and closes the store. An error means the store's final checkpoint failed
/// (every acknowledged change is still in the journal); the daemon then exits non-zero.
///
/// Connections that `info.access` does not admit (by default, those of any other user) are
/// refused and logged. The caller owns the listener's socket file and removes it afterwards if
/// it created it.
pub async fn run(
    listener: Listener,
    registry: Arc<Registry>,
    info: DaemonInfo,
    shutdown: CancellationToken,
) -> Result<(), StoreError> {
    let info = Arc::new(info);
    let tracker = TaskTracker::new();
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let our_uid = rustix::process::geteuid().as_raw();
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(stream) => stream,
                Err(err) => {
                    // Running out of file descriptors is the usual cause; backing off lets
                    // existing connections finish instead of spinning.
                    tracing::warn!(error = %err, "accept failed; retrying shortly");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Some(peer) = admit(&stream, our_uid, &info) else {
            continue;
        };
        let span = tracing::info_span!("conn", pid = peer.pid);
        let registry = registry.clone();
        let info = info.clone();
        let shutdown = shutdown.clone();
        tracker.spawn(tracing::Instrument::instrument(
            async move {
                crate::connection::serve(stream, registry, info, shutdown).await;
                drop(permit);
            },
            span,
        ));
    }
    tracing::info!(
        connections = tracker.len(),
        "no longer accepting; finishing open requests"
    );
    tracker.close();
    tracker.wait().await;
    // The last checkpoint syncs the journal and the database; it blocks, so it runs off the
    // runtime's threads.
    let closing = registry.clone();
    match tokio::task::spawn_blocking(move || closing.close()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => {
            tracing::error!(error = %error, "the final checkpoint failed");
            Err(error)
        }
        Err(_) => Err(StoreError::Damaged(
            "the final checkpoint did not finish; the journal holds every acknowledged change"
                .to_owned(),
        )),
    }
}

struct Peer {
    pid: Option<i32>,
}

/// Checks the peer's credentials against the daemon's [`Access`] policy, logging refusals.
fn admit(stream: &Stream, our_uid: u32, info: &DaemonInfo) -> Option<Peer> {
    let creds = match stream.peer_creds() {
        Ok(creds) => creds,
        Err(err) => {
            tracing::warn!(error = %err, "refused a connection whose credentials could not be read");
            return None;
        }
    };
    let peer = PeerIds {
        uid: creds.euid(),
        gid: creds.egid(),
        pid: creds.pid(),
    };
    let socket_group = || match std::fs::metadata(&info.socket) {
        Ok(meta) => Some(meta.gid()),
        Err(err) => {
            tracing::warn!(
                socket = %info.socket.display(),
                error = %err,
                "cannot read the socket file's group; admitting only rootsd's own user"
            );
            None
        }
    };
    if admits(info.access, our_uid, &peer, socket_group, || {
        peer.pid
            .map(|pid| supplementary_groups(pid, peer.uid))
            .unwrap_or_default()
    }) {
        return Some(Peer { pid: peer.pid });
    }
    match info.access {
        Access::Owner => tracing::warn!(
            peer_uid = ?peer.uid,
            peer_pid = ?peer.pid,
            "refused a connection from another user"
        ),
        Access::OwnerOrSocketGroup => tracing::warn!(
            peer_uid = ?peer.uid,
            peer_gid = ?peer.gid,
            peer_pid = ?peer.pid,
            "refused a connection from a user who is not in the socket's group"
        ),
    }
    None
}

/// The credentials the kernel recorded for a peer when it connected.
struct PeerIds {
    uid: Option<u32>,
    gid: Option<u32>,
    pid: Option<i32>,
}

/// The admission rule. The socket's group and the peer's supplementary groups cost a system
/// call or a file read each, so they are only looked up for a peer of another user in
/// [`Access::OwnerOrSocketGroup`] mode.
fn admits(
    access: Access,
    our_uid: u32,
    peer: &PeerIds,
    socket_group: impl FnOnce() -> Option<u32>,
    supplementary: impl FnOnce() -> Vec<u32>,
) -> bool {
    if peer.uid == Some(our_uid) {
        return true;
    }
    if access != Access::OwnerOrSocketGroup {
        return false;
    }
    let Some(group) = socket_group() else {
        return false;
    };
    peer.gid == Some(group) || supplementary().contains(&group)
}

/// The supplementary groups of process `pid`, from `/proc/<pid>/status`; empty if unreadable.
///
/// `SO_PEERCRED` carries only the primary group. The process could have exited and its pid been
/// reused between connecting and this read, so the groups count only while the file still shows
/// the peer's effective uid.
fn supplementary_groups(pid: i32, peer_uid: Option<u32>) -> Vec<u32> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Vec::new();
    };
    match parse_proc_status(&text) {
        (euid, groups) if euid.is_some() && euid == peer_uid => groups,
        _ => Vec::new(),
    }
}

/// The effective uid and the supplementary groups in a `/proc/<pid>/status` text.
fn parse_proc_status(text: &str) -> (Option<u32>, Vec<u32>) {
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .unwrap_or_default()
    };
    // "Uid:" lists the real, effective, saved and filesystem uids, in that order.
    let euid = field("Uid:")
        .split_whitespace()
        .nth(1)
        .and_then(|u| u.parse().ok());
    let groups = field("Groups:")
        .split_whitespace()
        .filter_map(|g| g.parse().ok())
        .collect();
    (euid, groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: u32 = 1000;
    const GROUP: u32 = 4242;

    fn peer(uid: u32, gid: u32) -> PeerIds {
        PeerIds {
            uid: Some(uid),
            gid: Some(gid),
            pid: Some(1),
        }
    }

    fn no_lookup<T>() -> T {
        panic!("nothing needs looking up for this peer")
    }

    #[test]
    fn the_owner_is_always_admitted_without_any_lookup() {
        for access in [Access::Owner, Access::OwnerOrSocketGroup] {
            assert!(admits(access, OURS, &peer(OURS, 1), no_lookup, no_lookup));
        }
    }

    #[test]
    fn strict_mode_refuses_other_users_even_in_the_socket_group() {
        assert!(!admits(
            Access::Owner,
            OURS,
            &peer(2000, GROUP),
            no_lookup,
            no_lookup
        ));
    }

    #[test]
    fn group_mode_admits_the_socket_group_as_primary_or_supplementary_group() {
        let group = || Some(GROUP);
        let access = Access::OwnerOrSocketGroup;
        assert!(admits(access, OURS, &peer(2000, GROUP), group, no_lookup));
        assert!(admits(access, OURS, &peer(2000, 7), group, || vec![
            3, GROUP
        ]));
        assert!(!admits(access, OURS, &peer(2000, 7), group, || vec![3, 8]));
        // Without a readable socket file there is no group to be a member of.
        assert!(!admits(
            access,
            OURS,
            &peer(2000, GROUP),
            || None,
            no_lookup
        ));
    }

    #[test]
    fn a_peer_without_credentials_is_refused() {
        let anonymous = PeerIds {
            uid: None,
            gid: None,
            pid: None,
        };
        let access = Access::OwnerOrSocketGroup;
        assert!(!admits(access, OURS, &anonymous, || Some(GROUP), Vec::new));
    }

    #[test]
    fn proc_status_gives_the_effective_uid_and_supplementary_groups() {
        let text = "Name:\tagent\nUid:\t1000\t2000\t2000\t2000\nGid:\t100\t100\t100\t100\nGroups:\t4242 27 \nVmPeak:\t1 kB\n";
        assert_eq!(parse_proc_status(text), (Some(2000), vec![4242, 27]));
        assert_eq!(
            parse_proc_status("Uid:\t1\t1\t1\t1\nGroups:\t\n"),
            (Some(1), vec![])
        );
        assert_eq!(parse_proc_status(""), (None, vec![]));
    }
}
