//! The daemon check: whether rootsd answers at the socket, and with which version. It is asked
//! without ever being started. [`OnDemand`] says whether the next rootsctl command would start
//! it, which decides whether a daemon that is not running is a problem.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rootsd_proto::wire::{EmptyParams, Status, StatusResult};

use super::{Check, Outcome};
use crate::autostart::{self, Target};
use crate::client::Client;
use crate::errors::ClientError;

/// What happens when a rootsctl command (a proxy a host starts included) finds no daemon.
/// Starting on demand is the design, so a daemon that is not running yet is only a problem when
/// nothing will start it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OnDemand {
    /// Autostart is on and this rootsd binary would be started.
    Starts(PathBuf),
    /// Autostart is on, but the rootsd it would start is not found.
    Missing(PathBuf),
    /// `--no-autostart` or `ROOTSD_NO_AUTOSTART`.
    Off,
}

impl OnDemand {
    /// As `target` would connect: [`autostart::daemon_binary`], looked up on `PATH` when it is
    /// a bare name, as spawning it would.
    pub fn of(target: &Target) -> Self {
        if !target.autostart {
            return Self::Off;
        }
        let binary = autostart::daemon_binary();
        match find_executable(&binary) {
            Some(found) => Self::Starts(found),
            None => Self::Missing(binary),
        }
    }

    /// What happens now that no rootsd runs, for a check's summary.
    pub fn what_happens(&self) -> String {
        match self {
            Self::Starts(binary) => format!(
                "the first rootsctl command that needs it (a proxy a host starts included) starts {} on demand",
                binary.display()
            ),
            Self::Missing(binary) => format!(
                "rootsctl cannot start it on demand: {} is not found",
                binary.display()
            ),
            Self::Off => {
                "autostart is off (--no-autostart or ROOTSD_NO_AUTOSTART), so nothing starts it"
                    .to_owned()
            }
        }
    }

    /// How bad a daemon that is not running is: a note when it will be started, else a failure.
    pub fn outcome(&self) -> Outcome {
        match self {
            Self::Starts(_) => Outcome::Note,
            Self::Missing(_) | Self::Off => Outcome::Fail,
        }
    }

    /// What to do about a daemon that is not running; nothing when it will be started.
    pub fn fix(&self) -> Option<String> {
        const UNITS: &str =
            "with the systemd units installed, `systemctl --user enable --now rootsd.socket`";
        match self {
            Self::Starts(_) => None,
            Self::Missing(_) => Some(format!(
                "install rootsd next to rootsctl or on PATH, or set ROOTSD_BIN to it; or, {UNITS}"
            )),
            Self::Off => Some(format!(
                "start it with `rootsd &`, or, {UNITS}; or let rootsctl start it (drop --no-autostart, unset ROOTSD_NO_AUTOSTART)"
            )),
        }
    }
}

/// `binary` if it is an executable file; a bare name is looked for on `PATH`.
fn find_executable(binary: &Path) -> Option<PathBuf> {
    let executable = |p: &Path| {
        fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if binary.components().count() > 1 || binary.is_absolute() {
        return executable(binary).then(|| binary.to_owned());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|candidate| executable(candidate))
}

/// How long a daemon may take to answer before doctor calls it stuck.
pub(super) const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) struct DaemonFindings {
    pub check: Check,
    pub status: Option<StatusResult>,
}

/// Connects without ever starting the daemon, and asks for its status.
pub(super) async fn ask(socket: &Path, client_name: &str, on_demand: &OnDemand) -> DaemonFindings {
    const NAME: &str = "daemon";
    let s = socket.display();
    let failed = |check: Check| DaemonFindings {
        check,
        status: None,
    };
    match fs::symlink_metadata(socket) {
        Ok(_) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return failed(Check::new(
                NAME,
                Outcome::Skip,
                format!("not asked: nothing listens at {s} (see the socket check)"),
            ));
        }
        // A directory that cannot be searched hides the socket: whether a rootsd listens there
        // cannot be told, and it may well.
        Err(err) => {
            return failed(Check::new(
                NAME,
                Outcome::Skip,
                format!(
                    "not asked: {s} cannot be reached ({err}), so whether rootsd runs there cannot be told (see the socket dir check)"
                ),
            ));
        }
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
        Ok(Err(err)) => return failed(explain_client_error(socket, &err, on_demand)),
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

fn explain_client_error(socket: &Path, err: &ClientError, on_demand: &OnDemand) -> Check {
    const NAME: &str = "daemon";
    let s = socket.display();
    match err {
        ClientError::NotRunning { .. } => {
            let check = Check::new(
                NAME,
                on_demand.outcome(),
                format!(
                    "a socket file is at {s} but nothing listens on it: rootsd stopped without removing it (killed, or crashed); {}, and a rootsd started by rootsctl reclaims the stale file",
                    on_demand.what_happens()
                ),
            );
            match on_demand.fix() {
                Some(fix) => check.fix(fix),
                None => check,
            }
        }
        ClientError::Blocked { blocked, .. } => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "you may not connect to {s}: {}; whether rootsd runs there cannot be told",
                blocked.reason()
            ),
        )
        .fix(blocked.fix()),
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
