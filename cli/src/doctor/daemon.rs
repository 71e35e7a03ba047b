//! The daemon check: whether rootsd answers at the socket, and with which version. It is asked
//! without ever being started.

use std::fs;
use std::io;
use std::path::Path;
use std::time::Duration;

use rootsd_proto::wire::{EmptyParams, Status, StatusResult};

use super::{Check, Outcome, START_FIX};
use crate::client::Client;
use crate::errors::ClientError;

/// How long a daemon may take to answer before doctor calls it stuck.
pub(super) const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) struct DaemonFindings {
    pub check: Check,
    pub status: Option<StatusResult>,
}

/// The check's name in the report.
pub(super) const NAME: &str = "daemon";

/// Connects without ever starting the daemon, and asks for its status.
pub(super) async fn ask(socket: &Path, client_name: &str) -> DaemonFindings {
    let s = socket.display();
    let failed = |check: Check| DaemonFindings {
        check,
        status: None,
    };
    if fs::symlink_metadata(socket).is_err() {
        return failed(Check::new(
            NAME,
            Outcome::Skip,
            format!("not asked: nothing listens at {s} (see the socket check)"),
        ));
    }
    let asked = tokio::time::timeout(ANSWER_TIMEOUT, async {
        let mut client = Client::connect(socket, client_name, ANSWER_TIMEOUT).await?;
        let status = client.call::<Status>(&EmptyParams {}).await?;
        Ok::<_, ClientError>((client.hello, status))
    })
    .await;
    let (hello, status) = match asked {
        Ok(Ok(answered)) => answered,
        Err(_) | Ok(Err(ClientError::TimedOut { .. })) => {
            return failed(
                Check::new(
                    NAME,
                    Outcome::Fail,
                    format!(
                        "rootsd at {s} accepted the connection but did not answer within {}s: it is stuck",
                        ANSWER_TIMEOUT.as_secs()
                    ),
                )
                .fix("restart it: `systemctl --user restart rootsd.service` under systemd, otherwise kill the pid named in rootsd.lock in its state directory and let rootsctl start a new one"),
            );
        }
        Ok(Err(err)) => return failed(explain_client_error(socket, &err)),
    };
    let ours = env!("CARGO_PKG_VERSION");
    let origin = if status.socket_activated {
        "its socket came from systemd"
    } else {
        "it bound its socket itself"
    };
    let summary = format!(
        "rootsd {} answers: pid {}, control protocol {} (the same as rootsctl's), up {}, {origin}",
        hello.daemon_version,
        hello.pid,
        hello.protocol_version,
        crate::output::duration(status.uptime_secs)
    );
    let check = if hello.daemon_version == ours {
        Check::new(NAME, Outcome::Ok, summary)
    } else {
        Check::new(
            NAME,
            Outcome::Note,
            format!("{summary}; but rootsctl is {ours}, from another release"),
        )
        .fix("restart rootsd after upgrading, so that both come from the same release")
    };
    DaemonFindings {
        check,
        status: Some(status),
    }
}

fn explain_client_error(socket: &Path, err: &ClientError) -> Check {
    const NAME: &str = "daemon";
    let s = socket.display();
    match err {
        ClientError::NotRunning { .. } => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "a socket file is at {s} but nothing listens on it: rootsd stopped without removing it (killed, or crashed)"
            ),
        )
        .fix(format!(
            "{START_FIX}; a rootsd started by rootsctl reclaims the stale file itself"
        )),
        ClientError::Untrusted { peer_uid, me, .. } => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "not asked: {s} is served by uid {peer_uid}, neither you (uid {me}) nor root, and the socket is not in a directory only root can write to, so it is no shared rootsd either; rootsctl sends it nothing"
            ),
        )
        .fix("use your own rootsd (unset ROOTSD_SOCKET and drop --socket, or point them at a directory only you can write to); another user may be waiting for your requests there, so tell your administrator"),
        ClientError::NotAdmitted { message, .. } => Check::new(
            NAME,
            Outcome::Fail,
            format!("rootsd at {s} answers, but does not admit you: {message}"),
        )
        .fix("do what its message says: join the group it names, or use a rootsd of your own (unset ROOTSD_SOCKET and drop --socket)"),
        ClientError::VersionMismatch { socket, daemon } => {
            Check::new(NAME, Outcome::Fail, daemon.summary(socket)).fix(daemon.fix())
        }
        ClientError::Lost { .. } => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "rootsd at {s} closed the connection without answering ({err}): a rootsd older than rootsctl does that to users it does not admit"
            ),
        )
        .fix("use a rootsd of your own (unset ROOTSD_SOCKET), or ask its owner to add you to the socket's group"),
        ClientError::Connect { error, .. } if error.kind() == io::ErrorKind::PermissionDenied => {
            Check::new(
                NAME,
                Outcome::Fail,
                format!("you may not connect to {s}: permission denied"),
            )
            .fix("see the socket check: the socket or its directory keeps you out")
        }
        other => Check::new(
            NAME,
            Outcome::Fail,
            format!("could not talk to rootsd at {s}: {other}"),
        )
        .fix("look at the daemon's log (`journalctl --user -u rootsd` under systemd, otherwise rootsd.log in its state directory)"),
    }
}
