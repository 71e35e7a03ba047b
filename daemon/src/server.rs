//! The accept loop: [`run`] serves a listener until the shutdown token fires, then drains.

use std::sync::Arc;
use std::time::Duration;

use interprocess::local_socket::tokio::{Listener, Stream, prelude::*};
use rootsd_proto::wire::{ErrorObject, code};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::StoreError;
use crate::framing::Budget;
use crate::groups;
use crate::info::{Access, AdmittedPeer, DaemonInfo, Role};
pub use crate::limits::Tuning;
use crate::limits::{
    INPUT_BUDGET, MAX_CONNECTIONS, REFUSAL_DRAIN_BYTES, REFUSAL_TIMEOUT, REFUSALS_AT_ONCE,
};
use crate::registry::Registry;
use crate::shares::Shares;

/// Serves `listener` until `shutdown` is cancelled, then waits for every connection to finish
/// what it is doing (requests being served finish; a peer that does not take its last line gets
/// [`crate::limits::SHUTDOWN_GRACE`]) and closes the store. An error means the store's final
/// checkpoint failed (every acknowledged change is still in the journal); the daemon then exits
/// non-zero.
///
/// Connections that `info.access` does not admit (by default, those of any other user) are
/// told why in one error line, closed and logged; each admitted one gets its [`Role`]. The
/// caller owns the listener's socket file and removes it afterwards if
/// it created it.
pub async fn run(
    listener: Listener,
    registry: Arc<Registry>,
    info: DaemonInfo,
    shutdown: CancellationToken,
) -> Result<(), StoreError> {
    run_tuned(listener, registry, info, shutdown, Tuning::default()).await
}

/// [`run`] with `tuning` instead of the limits' waits.
pub async fn run_tuned(
    listener: Listener,
    registry: Arc<Registry>,
    info: DaemonInfo,
    shutdown: CancellationToken,
    tuning: Tuning,
) -> Result<(), StoreError> {
    let (_none, replacements) = mpsc::channel(1);
    run_replaceable(listener, replacements, registry, info, shutdown, tuning).await
}

/// [`run_tuned`], taking each listener `replacements` delivers in place of the one it accepts
/// on: the socket bound anew after its file went away (SIGHUP, [`crate::socket::rebind`]).
/// Connections accepted before go on.
pub async fn run_replaceable(
    mut listener: Listener,
    mut replacements: mpsc::Receiver<Listener>,
    registry: Arc<Registry>,
    info: DaemonInfo,
    shutdown: CancellationToken,
    tuning: Tuning,
) -> Result<(), StoreError> {
    let info = Arc::new(info);
    let tracker = TaskTracker::new();
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let refusals = Arc::new(Semaphore::new(REFUSALS_AT_ONCE));
    let shares = Arc::new(Shares::default());
    let input = Arc::new(Budget::new(INPUT_BUDGET));
    let our_uid = rustix::process::geteuid().as_raw();
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            Some(replacement) = replacements.recv() => {
                tracing::info!("accepting on the socket bound anew");
                listener = replacement;
                continue;
            }
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
        let admitted = admit(&stream, our_uid, &info).and_then(|peer| {
            let privileged = peer.uid == our_uid || peer.uid == 0;
            match shares.take(peer.uid, privileged) {
                Ok(share) => Ok((peer, share)),
                Err(why) => {
                    tracing::warn!(uid = peer.uid, "refused a connection past its user's share");
                    Err((code::BUSY, why))
                }
            }
        });
        let (peer, share) = match admitted {
            Ok(admitted) => admitted,
            Err((code, refusal)) => {
                // A refusal gives its connection slot back at once, so refused peers never
                // use up the slots kept for the owner. It is told in a task of its own, so that
                // a refused peer that does not read delays nobody, and only so many at once,
                // so that they cannot pile up; past that it is closed without a word.
                drop(permit);
                if let Ok(told) = refusals.clone().try_acquire_owned() {
                    tracker.spawn(async move {
                        refuse(stream, code, refusal).await;
                        drop(told);
                    });
                }
                continue;
            }
        };
        let span = tracing::info_span!("conn", pid = peer.pid, uid = peer.uid, role = ?peer.role);
        let registry = registry.clone();
        let info = info.clone();
        let input = input.clone();
        let shutdown = shutdown.clone();
        tracker.spawn(tracing::Instrument::instrument(
            async move {
                crate::connection::serve(stream, peer, registry, info, input, shutdown, tuning)
                    .await;
                drop(share);
                drop(permit);
            },
            span,
        ));
    }
    // New clients find nothing listening, rather than a backlog nobody will ever accept.
    drop(listener);
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

/// Checks the peer's credentials against the daemon's [`Access`] policy and gives it its
/// [`Role`]; a refusal is logged and returned as the message the peer is sent.
fn admit(stream: &Stream, our_uid: u32, info: &DaemonInfo) -> Result<AdmittedPeer, (i64, String)> {
    admit_by_credentials(stream, our_uid, info).map_err(|refusal| (code::NOT_ADMITTED, refusal))
}

fn admit_by_credentials(
    stream: &Stream,
    our_uid: u32,
    info: &DaemonInfo,
) -> Result<AdmittedPeer, String> {
    let creds = match stream.peer_creds() {
        Ok(creds) => creds,
        Err(err) => {
            tracing::warn!(error = %err, "refused a connection whose credentials could not be read");
            return Err(format!(
                "rootsd could not read this connection's credentials ({err}), so it cannot tell who you are; it admits only peers it can identify"
            ));
        }
    };
    let peer = PeerIds {
        uid: creds.euid(),
        gid: creds.egid(),
        pid: creds.pid(),
    };
    let role = role_of(
        info.access,
        our_uid,
        &peer,
        || info.socket_group(),
        info.admin_group.as_ref().map(|g| g.gid),
        || {
            peer.pid
                .map(|pid| supplementary_groups(pid, peer.uid))
                .unwrap_or_default()
        },
    );
    if let (Some(role), Some(uid)) = (role, peer.uid) {
        return Ok(AdmittedPeer {
            uid,
            pid: peer.pid,
            role,
        });
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
    Err(refusal(info, our_uid, &peer))
}

/// What a refused peer is told: who it is, whom this daemon admits, and what to do.
fn refusal(info: &DaemonInfo, our_uid: u32, peer: &PeerIds) -> String {
    let who = match (peer.uid, peer.pid) {
        (Some(uid), Some(pid)) => format!("uid {uid}, pid {pid}"),
        (Some(uid), None) => format!("uid {uid}"),
        _ => "a peer without credentials".to_owned(),
    };
    let daemon = format!("rootsd (pid {}, uid {our_uid})", std::process::id());
    const OWN: &str = "use a rootsd of your own (unset ROOTSD_SOCKET and drop --socket; rootsctl starts one for you)";
    match info.access {
        Access::Owner => format!("{daemon} serves only its own user, and you are {who}: {OWN}"),
        Access::OwnerOrSocketGroup => {
            let socket_group = info.socket_group().map(groups::by_gid);
            let (groups, join) = match (&socket_group, &info.admin_group) {
                (Some(members), Some(admins)) => (
                    format!(
                        "members of group {members} (who may list, watch and attach sessions) and of group {admins} (who may also change roots)"
                    ),
                    members.name.clone(),
                ),
                (Some(members), None) => {
                    (format!("members of group {members}"), members.name.clone())
                }
                (None, Some(admins)) => (format!("members of group {admins}"), admins.name.clone()),
                (None, None) => ("nobody else".to_owned(), "GROUP".to_owned()),
            };
            format!(
                "{daemon} admits its own user, root and {groups}, and you ({who}) are none of them: ask an administrator to add you (usermod -aG {join} YOUR-USER, then log in again), or {OWN}"
            )
        }
    }
}

/// Tells a refused peer why in one error line (`code`: not admitted, or past its share), reads what it sent meanwhile (so that it sees
/// the connection end, not a reset), and closes; all within [`REFUSAL_TIMEOUT`].
async fn refuse(stream: Stream, code: i64, message: String) {
    let line = crate::envelope::failure_line(None, &ErrorObject::new(code, message));
    let _ = tokio::time::timeout(REFUSAL_TIMEOUT, async {
        let mut stream = &stream;
        if stream.write_all(line.as_bytes()).await.is_err() {
            return;
        }
        let mut sink = [0u8; 4096];
        let mut read = 0;
        while read < REFUSAL_DRAIN_BYTES {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    })
    .await;
}

/// The credentials the kernel recorded for a peer when it connected.
struct PeerIds {
    uid: Option<u32>,
    gid: Option<u32>,
    pid: Option<i32>,
}

/// The admission rule: the role of a peer, or `None` if it is not admitted. The socket's group
/// and the peer's supplementary groups cost a system call or a file read each, so they are only
/// looked up for a peer of another user (not root) in [`Access::OwnerOrSocketGroup`] mode, and
/// each at most once.
fn role_of(
    access: Access,
    our_uid: u32,
    peer: &PeerIds,
    socket_group: impl FnOnce() -> Option<u32>,
    admin_group: Option<u32>,
    supplementary: impl FnOnce() -> Vec<u32>,
) -> Option<Role> {
    let uid = peer.uid?;
    if uid == our_uid {
        return Some(Role::Owner);
    }
    if access != Access::OwnerOrSocketGroup {
        return None;
    }
    if uid == 0 {
        return Some(Role::Root);
    }
    let mut supplementary = Some(supplementary);
    let mut groups: Option<Vec<u32>> = None;
    let mut member_of = |gid: u32| {
        peer.gid == Some(gid)
            || groups
                .get_or_insert_with(|| supplementary.take().map(|f| f()).unwrap_or_default())
                .contains(&gid)
    };
    if admin_group.is_some_and(&mut member_of) {
        return Some(Role::Admin);
    }
    let group = socket_group()?;
    member_of(group).then_some(Role::Member)
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
    use crate::groups::Group;

    const OURS: u32 = 1000;
    const GROUP: u32 = 4242;
    const ADMINS: u32 = 4343;

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
            assert_eq!(
                role_of(
                    access,
                    OURS,
                    &peer(OURS, 1),
                    no_lookup,
                    Some(ADMINS),
                    no_lookup
                ),
                Some(Role::Owner)
            );
        }
    }

    #[test]
    fn strict_mode_refuses_other_users_even_root_or_in_the_groups() {
        for uid in [2000, 0] {
            assert_eq!(
                role_of(
                    Access::Owner,
                    OURS,
                    &peer(uid, GROUP),
                    no_lookup,
                    Some(ADMINS),
                    no_lookup
                ),
                None
            );
        }
    }

    #[test]
    fn group_mode_gives_members_read_only_roles_and_admins_and_root_the_rest() {
        let group = || Some(GROUP);
        let access = Access::OwnerOrSocketGroup;
        let role = |peer: PeerIds, admins, supplementary: Vec<u32>| {
            role_of(access, OURS, &peer, group, admins, move || supplementary)
        };
        assert_eq!(role(peer(2000, GROUP), None, vec![]), Some(Role::Member));
        assert_eq!(
            role(peer(2000, 7), None, vec![3, GROUP]),
            Some(Role::Member)
        );
        assert_eq!(role(peer(2000, 7), None, vec![3, 8]), None);
        assert_eq!(
            role(peer(2000, 7), Some(ADMINS), vec![GROUP, ADMINS]),
            Some(Role::Admin)
        );
        assert_eq!(
            role(peer(2000, ADMINS), Some(ADMINS), vec![]),
            Some(Role::Admin)
        );
        assert_eq!(
            role(peer(2000, GROUP), Some(ADMINS), vec![]),
            Some(Role::Member)
        );
        assert_eq!(
            role_of(
                access,
                OURS,
                &peer(0, 0),
                no_lookup,
                Some(ADMINS),
                no_lookup
            ),
            Some(Role::Root)
        );
        assert!(!Role::Member.may_change_roots());
        for role in [Role::Owner, Role::Root, Role::Admin] {
            assert!(role.may_change_roots(), "{role:?}");
        }
        // Without a readable socket file there is no group to be a member of.
        assert_eq!(
            role_of(access, OURS, &peer(2000, GROUP), || None, None, Vec::new),
            None
        );
    }

    #[test]
    fn a_peer_without_credentials_is_refused() {
        let anonymous = PeerIds {
            uid: None,
            gid: None,
            pid: None,
        };
        let access = Access::OwnerOrSocketGroup;
        assert_eq!(
            role_of(access, OURS, &anonymous, || Some(GROUP), None, Vec::new),
            None
        );
    }

    #[test]
    fn a_refusal_says_who_is_refused_whom_rootsd_admits_and_what_to_do() {
        let info = |access, admin_group| DaemonInfo {
            socket: "/nonexistent/rootsd.sock".into(),
            state_dir: "/nonexistent".into(),
            socket_activated: true,
            access,
            admin_group,
        };
        let stranger = peer(2000, 7);
        let strict = refusal(&info(Access::Owner, None), OURS, &stranger);
        assert!(strict.contains("serves only its own user"), "{strict}");
        assert!(strict.contains("uid 2000, pid 1"), "{strict}");
        assert!(strict.contains("unset ROOTSD_SOCKET"), "{strict}");
        let admins = Group {
            gid: ADMINS,
            name: "rootsd-admin".into(),
        };
        let shared = refusal(
            &info(Access::OwnerOrSocketGroup, Some(admins)),
            OURS,
            &stranger,
        );
        assert!(shared.contains(&format!("uid {OURS}")), "{shared}");
        assert!(shared.contains("rootsd-admin (gid 4343)"), "{shared}");
        assert!(shared.contains("usermod -aG"), "{shared}");
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
