//! `rootsctl doctor`: checks what rootsctl and rootsd depend on, and explains each problem in
//! plain words together with its fix.
//!
//! Doctor only looks. It never starts the daemon (a daemon that is not running is one of the
//! things it reports), never changes a permission, and, like all of rootsctl, never opens the
//! database: what it knows about the state it learns from the daemon and from `stat`.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rootsd_proto::paths::{self, Environment, SOCKET_FILE_NAME};
use rootsd_proto::wire::{EmptyParams, Status, StatusResult};
use serde::Serialize;

use crate::args::JsonArg;
use crate::autostart::Target;
use crate::client::Client;
use crate::errors::{ClientError, ProblemsFound};

/// How long a daemon may take to answer before doctor calls it stuck.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// What doctor found, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct Report {
    /// True when no check failed.
    pub ok: bool,
    /// The socket rootsctl uses.
    pub socket: PathBuf,
    pub checks: Vec<Check>,
}

/// One check and its verdict.
#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub outcome: Outcome,
    /// What was found, in plain words.
    pub summary: String,
    /// What to do about it, when there is something to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// All is well.
    Ok,
    /// Worth knowing, perhaps with a suggestion, but not a problem.
    Note,
    /// Could not be checked here, for a reason that is not a problem.
    Skip,
    /// A problem: doctor exits 1.
    Fail,
}

impl Check {
    fn new(name: &'static str, outcome: Outcome, summary: impl Into<String>) -> Self {
        Self {
            name,
            outcome,
            summary: summary.into(),
            fix: None,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// Runs every check, prints the report, and fails with [`ProblemsFound`] if any check failed.
pub async fn run(target: &Target, args: JsonArg, out: &mut impl Write) -> anyhow::Result<()> {
    let env = Environment::capture(rustix::process::getuid().as_raw());
    let me = Me::current();
    let report = diagnose(
        &target.socket,
        &env,
        &me,
        &SystemdLayout::of(&env),
        &target.client_name,
    )
    .await;
    if args.json {
        crate::output::json(out, &report)?;
    } else {
        print_report(out, &report)?;
    }
    match report
        .checks
        .iter()
        .filter(|c| c.outcome == Outcome::Fail)
        .count()
    {
        0 => Ok(()),
        failed => Err(ProblemsFound(failed).into()),
    }
}

/// Who is asking: file ownership and group membership are judged against this.
#[derive(Clone, Debug)]
pub struct Me {
    pub uid: u32,
    /// The effective group and the supplementary groups.
    pub groups: Vec<u32>,
}

impl Me {
    fn current() -> Self {
        let mut groups: Vec<u32> = rustix::process::getgroups()
            .map(|gs| gs.into_iter().map(|g| g.as_raw()).collect())
            .unwrap_or_default();
        groups.push(rustix::process::getegid().as_raw());
        Self {
            uid: rustix::process::geteuid().as_raw(),
            groups,
        }
    }
}

/// Where systemd keeps user units on this machine, so that tests can point it elsewhere.
#[derive(Clone, Debug)]
pub struct SystemdLayout {
    /// Whether systemd is the init system: it creates `/run/systemd/system` at boot.
    pub booted: bool,
    /// Where user units may be installed, in systemd's order of precedence.
    pub unit_dirs: Vec<PathBuf>,
    /// Where `systemctl --user enable` (and `--global enable`) link an enabled socket unit.
    pub wants_dirs: Vec<PathBuf>,
}

impl SystemdLayout {
    fn of(env: &Environment) -> Self {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| env.home.as_ref().map(|h| Path::new(h).join(".config")));
        let mut unit_dirs = Vec::new();
        let mut wants_dirs = Vec::new();
        if let Some(config) = config {
            let user = config.join("systemd").join("user");
            wants_dirs.push(user.join("sockets.target.wants"));
            unit_dirs.push(user);
        }
        unit_dirs.push(PathBuf::from("/etc/systemd/user"));
        wants_dirs.push(PathBuf::from("/etc/systemd/user/sockets.target.wants"));
        unit_dirs.push(PathBuf::from("/usr/lib/systemd/user"));
        Self {
            booted: Path::new("/run/systemd/system").is_dir(),
            unit_dirs,
            wants_dirs,
        }
    }
}

/// Runs every check against `socket`.
pub async fn diagnose(
    socket: &Path,
    env: &Environment,
    me: &Me,
    layout: &SystemdLayout,
    client_name: &str,
) -> Report {
    let mut checks = vec![check_socket_dir(socket, me), check_socket(socket, me)];
    let daemon = ask_daemon(socket, client_name).await;
    checks.push(daemon.check);
    let shared = fs::symlink_metadata(socket).is_ok_and(|m| m.uid() != me.uid);
    checks.push(check_state_dir(env, daemon.status.as_ref(), me, shared));
    checks.push(check_units(layout, socket, env));
    checks.push(match &daemon.status {
        Some(status) => Check::new(
            "sessions",
            Outcome::Ok,
            format!(
                "{} MCP session(s) attached, {} client connection(s) in all (this one included)",
                status.sessions, status.clients
            ),
        ),
        None => Check::new(
            "sessions",
            Outcome::Skip,
            "not counted: the daemon did not answer",
        ),
    });
    Report {
        ok: checks.iter().all(|c| c.outcome != Outcome::Fail),
        socket: socket.to_owned(),
        checks,
    }
}

fn print_report(out: &mut impl Write, report: &Report) -> io::Result<()> {
    writeln!(out, "rootsctl doctor: socket {}", report.socket.display())?;
    let width = report
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for check in &report.checks {
        let label = match check.outcome {
            Outcome::Ok => "ok",
            Outcome::Note => "note",
            Outcome::Skip => "skip",
            Outcome::Fail => "FAIL",
        };
        writeln!(
            out,
            "  {label:<4}  {:<width$}  {}",
            check.name, check.summary
        )?;
        if let Some(fix) = &check.fix {
            writeln!(out, "  {:<4}  {:<width$}  fix: {fix}", "", "")?;
        }
    }
    let failed = report
        .checks
        .iter()
        .filter(|c| c.outcome == Outcome::Fail)
        .count();
    if failed == 0 {
        writeln!(out, "No problems found.")
    } else {
        writeln!(out, "{failed} problem(s) found.")
    }
}

/// How to get a daemon listening, for the fix of every "not running" finding.
const START_FIX: &str = "start it: any rootsctl command starts it on demand (try `rootsctl status`), or, with the systemd units installed, `systemctl --user enable --now rootsd.socket`";

fn mode_of(meta: &fs::Metadata) -> u32 {
    meta.permissions().mode() & 0o7777
}

/// The directory holding the socket: rootsd makes it 0700, systemd's `DirectoryMode=0700` too.
fn check_socket_dir(socket: &Path, me: &Me) -> Check {
    const NAME: &str = "socket dir";
    let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Check::new(NAME, Outcome::Ok, "the socket path has no directory part");
    };
    let d = dir.display();
    let meta = match fs::metadata(dir) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return Check::new(
                NAME,
                Outcome::Ok,
                format!("{d} does not exist yet; rootsd creates it, mode 0700, when it starts"),
            );
        }
        Err(err) => {
            return Check::new(NAME, Outcome::Fail, format!("cannot inspect {d}: {err}")).fix(
                "make sure every directory above it is searchable by you, or choose another --socket",
            );
        }
    };
    let mode = mode_of(&meta);
    if !meta.is_dir() {
        return Check::new(NAME, Outcome::Fail, format!("{d} is not a directory"))
            .fix("remove it, or choose another path with --socket or ROOTSD_SOCKET");
    }
    let socket_owner = fs::symlink_metadata(socket).ok().map(|m| m.uid());
    if meta.uid() != me.uid {
        if socket_owner.is_some_and(|owner| owner != me.uid) {
            // A shared daemon's socket: the directory is not ours, and must not be.
            return Check::new(
                NAME,
                Outcome::Ok,
                format!(
                    "{d} belongs to uid {} (mode {mode:04o}): a shared rootsd's directory",
                    meta.uid()
                ),
            );
        }
        if mode & 0o1000 != 0 {
            return Check::new(
                NAME,
                Outcome::Note,
                format!(
                    "the socket sits directly in the shared directory {d} (mode {mode:04o}); rootsd accepts that, but a private directory is safer"
                ),
            )
            .fix(format!(
                "use a socket in a directory of your own, such as {}",
                dir.join(format!("rootsd-{}", me.uid))
                    .join(SOCKET_FILE_NAME)
                    .display()
            ));
        }
        return Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{d} belongs to uid {}, not to you (uid {}): rootsd refuses to put its socket there",
                meta.uid(),
                me.uid
            ),
        )
        .fix("unset ROOTSD_SOCKET (or --socket) to use the default path, or point it into a directory you own");
    }
    if mode & 0o077 != 0 {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{d} is mode {mode:04o}: other users can look inside (rootsd and systemd create it 0700)"
            ),
        )
        .fix(format!("chmod 700 {d}"));
    }
    Check::new(
        NAME,
        Outcome::Ok,
        format!("{d} is yours and private (mode {mode:04o})"),
    )
}

/// The socket file itself: a socket, mode 0600, ours; or a shared daemon's socket we may open.
fn check_socket(socket: &Path, me: &Me) -> Check {
    const NAME: &str = "socket";
    let s = socket.display();
    let meta = match fs::symlink_metadata(socket) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return Check::new(
                NAME,
                Outcome::Fail,
                format!("there is no socket at {s}, so rootsd is not running there"),
            )
            .fix(START_FIX);
        }
        Err(err) => {
            return Check::new(NAME, Outcome::Fail, format!("cannot inspect {s}: {err}"))
                .fix("make sure the directories above it are searchable by you");
        }
    };
    if !meta.file_type().is_socket() {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!("{s} exists but is not a socket, and rootsd will not replace it"),
        )
        .fix(format!(
            "remove it if nothing uses it (rm {s}), or choose another path with --socket or ROOTSD_SOCKET"
        ));
    }
    let mode = mode_of(&meta);
    if meta.uid() != me.uid {
        return check_shared_socket(socket, &meta, me);
    }
    if mode & 0o777 != 0o600 {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} is mode {mode:04o}, not 0600: {}",
                if mode & 0o077 != 0 {
                    "other users may try to connect (rootsd refuses them, but the file should keep them out)"
                } else {
                    "you may not be able to connect"
                }
            ),
        )
        .fix(format!("chmod 600 {s}"));
    }
    Check::new(
        NAME,
        Outcome::Ok,
        format!("{s} is a socket, yours, mode 0600"),
    )
}

/// A socket owned by another user belongs to a shared, system-wide rootsd (`--allow-group`):
/// its group is the access control, so we must be in it, and others must be kept out.
fn check_shared_socket(socket: &Path, meta: &fs::Metadata, me: &Me) -> Check {
    const NAME: &str = "socket";
    let s = socket.display();
    let mode = mode_of(meta);
    if mode & 0o007 != 0 {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} belongs to uid {} and is mode {mode:04o}: anyone may try to connect",
                meta.uid()
            ),
        )
        .fix("give the shared socket SocketMode=0660 and a SocketGroup= in its unit (see systemd/system/rootsd.socket)");
    }
    if !me.groups.contains(&meta.gid()) {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} belongs to a shared rootsd (uid {}), which admits members of group {}, and you are not one",
                meta.uid(),
                meta.gid()
            ),
        )
        .fix(format!(
            "ask an administrator to add you to group {} (usermod -aG GROUP YOUR-USER), then log in again; or use a rootsd of your own by unsetting ROOTSD_SOCKET",
            meta.gid()
        ));
    }
    if mode & 0o060 != 0o060 {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{s} is mode {mode:04o}: members of its group {} cannot connect",
                meta.gid()
            ),
        )
        .fix(
            "give the shared socket SocketMode=0660 in its unit (see systemd/system/rootsd.socket)",
        );
    }
    Check::new(
        NAME,
        Outcome::Ok,
        format!(
            "{s} is a shared rootsd's socket (uid {}, mode {mode:04o}); you may use it as a member of group {}",
            meta.uid(),
            meta.gid()
        ),
    )
}

struct DaemonFindings {
    check: Check,
    status: Option<StatusResult>,
}

/// Connects without ever starting the daemon, and asks for its status.
async fn ask_daemon(socket: &Path, client_name: &str) -> DaemonFindings {
    const NAME: &str = "daemon";
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
        let mut client = Client::connect(socket, client_name).await?;
        let status = client.call::<Status>(&EmptyParams {}).await?;
        Ok::<_, ClientError>((client.hello, status))
    })
    .await;
    let (hello, status) = match asked {
        Ok(Ok(answered)) => answered,
        Err(_elapsed) => {
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
        ClientError::VersionMismatch { socket, daemon } => {
            Check::new(NAME, Outcome::Fail, daemon.summary(socket)).fix(daemon.fix())
        }
        ClientError::Lost { .. } => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "rootsd at {s} closed the connection without answering: it admits only its own user (and, with --allow-group, its socket's group), so it probably runs as someone else"
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

/// The state directory: the daemon's own if it answered (under systemd, `StateDirectory=`
/// decides it), else the one a rootsd started by rootsctl would use.
fn check_state_dir(
    env: &Environment,
    status: Option<&StatusResult>,
    me: &Me,
    shared: bool,
) -> Check {
    const NAME: &str = "state dir";
    const NEVER: &str = "rootsctl never opens the database; only rootsd does";
    let (dir, whose) = match status {
        Some(status) => (PathBuf::from(&status.state_dir), "the running rootsd's"),
        None => match paths::state_dir(env, None) {
            Ok(dir) => (dir, "where a rootsd started by rootsctl keeps its state"),
            Err(err) => {
                return Check::new(NAME, Outcome::Fail, err.to_string())
                    .fix("set HOME, XDG_STATE_HOME or ROOTSD_STATE_DIR");
            }
        },
    };
    let d = dir.display();
    let meta = match fs::metadata(&dir) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound && status.is_none() => {
            return Check::new(
                NAME,
                Outcome::Ok,
                format!(
                    "{d} ({whose}) does not exist yet; rootsd creates it when it first starts ({NEVER})"
                ),
            );
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return Check::new(
                NAME,
                Outcome::Fail,
                format!("{d}, the running rootsd's state directory, is gone: what it stores from now on is lost at restart"),
            )
            .fix("restart rootsd, which recreates it; then re-add your roots");
        }
        Err(err) if shared && err.kind() == io::ErrorKind::PermissionDenied => {
            return Check::new(
                NAME,
                Outcome::Ok,
                format!("{d} belongs to the shared rootsd and is private to it ({NEVER})"),
            );
        }
        Err(err) => {
            return Check::new(NAME, Outcome::Fail, format!("cannot inspect {d}: {err}"))
                .fix("make sure the directories above it are searchable by you");
        }
    };
    if !meta.is_dir() {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!("{d} ({whose}) is not a directory"),
        )
        .fix("move it away, or point ROOTSD_STATE_DIR (or --state-dir) at a directory");
    }
    if meta.uid() != me.uid {
        if shared {
            return Check::new(
                NAME,
                Outcome::Ok,
                format!(
                    "{d} belongs to the shared rootsd (uid {}), as it should ({NEVER})",
                    meta.uid()
                ),
            );
        }
        return Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{d} ({whose}) belongs to uid {}, not to you (uid {})",
                meta.uid(),
                me.uid
            ),
        )
        .fix(format!(
            "give it back to yourself (chown -R {} {d}), or point ROOTSD_STATE_DIR at a directory you own",
            me.uid
        ));
    }
    let writable = rustix::fs::access(
        &dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    );
    if writable.is_err() {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!("{d} ({whose}) is not writable, so rootsd cannot store anything"),
        )
        .fix(format!("chmod 700 {d}"));
    }
    let mode = mode_of(&meta);
    if mode & 0o077 != 0 {
        return Check::new(
            NAME,
            Outcome::Note,
            format!(
                "{d} ({whose}) is mode {mode:04o}: other users can look at your roots ({NEVER})"
            ),
        )
        .fix(format!("chmod 700 {d}"));
    }
    Check::new(
        NAME,
        Outcome::Ok,
        format!("{d} ({whose}) exists, is yours and writable, mode {mode:04o} ({NEVER})"),
    )
}

/// Whether the user units are installed and enabled, where systemd runs at all.
fn check_units(layout: &SystemdLayout, socket: &Path, env: &Environment) -> Check {
    const NAME: &str = "systemd";
    if !layout.booted {
        return Check::new(
            NAME,
            Outcome::Skip,
            "systemd is not running as the init system here (no /run/systemd/system), so its units cannot start rootsd; rootsctl starts it on demand instead",
        );
    }
    let find = |unit: &str| {
        layout
            .unit_dirs
            .iter()
            .map(|dir| dir.join(unit))
            .find(|path| path.exists())
    };
    let install = "copy systemd/user/rootsd.socket and rootsd.service to ~/.config/systemd/user/, then `systemctl --user daemon-reload && systemctl --user enable --now rootsd.socket`";
    let (socket_unit, service_unit) = match (find("rootsd.socket"), find("rootsd.service")) {
        (None, None) => {
            return Check::new(
                NAME,
                Outcome::Note,
                "the rootsd units are not installed; that is fine, as rootsctl starts rootsd on demand",
            )
            .fix(format!("to have systemd start it instead: {install}"));
        }
        (Some(found), None) | (None, Some(found)) => {
            return Check::new(
                NAME,
                Outcome::Fail,
                format!(
                    "only half of the units is installed: {} has no partner",
                    found.display()
                ),
            )
            .fix(format!("install both: {install}"));
        }
        (Some(socket_unit), Some(service_unit)) => (socket_unit, service_unit),
    };
    let enabled = layout
        .wants_dirs
        .iter()
        .any(|dir| fs::symlink_metadata(dir.join("rootsd.socket")).is_ok());
    let installed = format!(
        "{} and {}",
        socket_unit.display(),
        service_unit
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    );
    if !enabled {
        return Check::new(
            NAME,
            Outcome::Note,
            format!("{installed} are installed but not enabled, so systemd does not listen on the socket; rootsctl starts rootsd on demand instead"),
        )
        .fix("systemctl --user enable --now rootsd.socket");
    }
    match unit_socket_path(&socket_unit, env) {
        Some(listens) if listens != socket => Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{installed} are enabled, but the socket unit listens on {} while rootsctl uses {}: rootsctl would start a second rootsd beside systemd's",
                listens.display(),
                socket.display()
            ),
        )
        .fix(if env.xdg_runtime_dir.is_none() {
            "XDG_RUNTIME_DIR is not set in this shell: log in through a session that sets it, or set ROOTSD_SOCKET to the unit's path".to_owned()
        } else {
            format!(
                "unset ROOTSD_SOCKET (and --socket), or set it to {}",
                listens.display()
            )
        }),
        _ => Check::new(
            NAME,
            Outcome::Ok,
            format!("{installed} are installed and enabled; systemd listens on the socket and starts rootsd on the first connection"),
        ),
    }
}

/// The path the socket unit at `unit` listens on, with `%t` expanded for a user unit; `None`
/// when it cannot be told (no `ListenStream=`, or other specifiers).
fn unit_socket_path(unit: &Path, env: &Environment) -> Option<PathBuf> {
    let text = fs::read_to_string(unit).ok()?;
    let value = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("ListenStream="))
        .next_back()?
        .trim();
    let expanded = match value.strip_prefix("%t/") {
        Some(rest) => Path::new(env.xdg_runtime_dir.as_ref()?).join(rest),
        None => PathBuf::from(value),
    };
    let text = expanded.to_str()?;
    (expanded.is_absolute() && !text.contains('%')).then_some(expanded)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn me() -> Me {
        Me {
            uid: rustix::process::geteuid().as_raw(),
            groups: vec![rustix::process::getegid().as_raw()],
        }
    }

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn env_with_runtime(dir: &Path) -> Environment {
        Environment {
            xdg_runtime_dir: Some(dir.as_os_str().to_owned()),
            uid: 1000,
            ..Environment::default()
        }
    }

    #[test]
    fn a_socket_dir_open_to_others_fails_with_chmod_700() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o755);
        let check = check_socket_dir(&dir.join("rootsd.sock"), &me());
        assert_eq!(check.outcome, Outcome::Fail, "{check:?}");
        assert_eq!(check.fix, Some(format!("chmod 700 {}", dir.display())));
        chmod(&dir, 0o700);
        assert_eq!(
            check_socket_dir(&dir.join("rootsd.sock"), &me()).outcome,
            Outcome::Ok
        );
    }

    #[test]
    fn a_missing_socket_dir_is_fine_because_rootsd_creates_it() {
        let tmp = tempfile::tempdir().unwrap();
        let check = check_socket_dir(&tmp.path().join("absent/rootsd.sock"), &me());
        assert_eq!(check.outcome, Outcome::Ok, "{check:?}");
    }

    #[test]
    fn the_socket_must_be_a_socket_of_mode_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rootsd.sock");
        let missing = check_socket(&path, &me());
        assert_eq!(missing.outcome, Outcome::Fail);
        assert!(missing.summary.contains("no socket"), "{missing:?}");

        fs::write(&path, "not a socket").unwrap();
        let file = check_socket(&path, &me());
        assert_eq!(file.outcome, Outcome::Fail);
        assert!(file.summary.contains("not a socket"), "{file:?}");
        fs::remove_file(&path).unwrap();

        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        chmod(&path, 0o666);
        let open = check_socket(&path, &me());
        assert_eq!(open.outcome, Outcome::Fail, "{open:?}");
        assert_eq!(open.fix, Some(format!("chmod 600 {}", path.display())));
        chmod(&path, 0o600);
        assert_eq!(check_socket(&path, &me()).outcome, Outcome::Ok);
    }

    #[test]
    fn a_shared_socket_needs_membership_of_its_group() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rootsd.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        chmod(&path, 0o660);
        let meta = fs::symlink_metadata(&path).unwrap();
        let member = Me {
            uid: meta.uid().wrapping_add(1),
            groups: vec![meta.gid()],
        };
        let check = check_shared_socket(&path, &meta, &member);
        assert_eq!(check.outcome, Outcome::Ok, "{check:?}");
        let stranger = Me {
            uid: meta.uid().wrapping_add(1),
            groups: vec![meta.gid().wrapping_add(1)],
        };
        let check = check_shared_socket(&path, &meta, &stranger);
        assert_eq!(check.outcome, Outcome::Fail, "{check:?}");
        assert!(check.fix.unwrap().contains("usermod -aG"));
        chmod(&path, 0o666);
        let meta = fs::symlink_metadata(&path).unwrap();
        assert_eq!(
            check_shared_socket(&path, &meta, &member).outcome,
            Outcome::Fail
        );
    }

    #[test]
    fn the_state_dir_may_be_missing_only_before_the_first_start() {
        let tmp = tempfile::tempdir().unwrap();
        let env = Environment {
            rootsd_state_dir: Some(tmp.path().join("state").into_os_string()),
            ..Environment::default()
        };
        let check = check_state_dir(&env, None, &me(), false);
        assert_eq!(check.outcome, Outcome::Ok, "{check:?}");
        assert!(check.summary.contains("does not exist yet"), "{check:?}");
        assert!(check.summary.contains("never opens the database"));

        fs::create_dir(tmp.path().join("state")).unwrap();
        chmod(&tmp.path().join("state"), 0o700);
        let check = check_state_dir(&env, None, &me(), false);
        assert_eq!(check.outcome, Outcome::Ok, "{check:?}");
        assert!(check.summary.contains("writable"), "{check:?}");
    }

    fn layout(root: &Path) -> SystemdLayout {
        let user = root.join("config/systemd/user");
        SystemdLayout {
            booted: true,
            unit_dirs: vec![user.clone(), root.join("usr/lib/systemd/user")],
            wants_dirs: vec![user.join("sockets.target.wants")],
        }
    }

    #[test]
    fn units_are_skipped_without_systemd() {
        let tmp = tempfile::tempdir().unwrap();
        let mut layout = layout(tmp.path());
        layout.booted = false;
        let check = check_units(&layout, Path::new("/s.sock"), &Environment::default());
        assert_eq!(check.outcome, Outcome::Skip);
        assert!(check.summary.contains("/run/systemd/system"), "{check:?}");
    }

    #[test]
    fn units_are_found_enabled_and_checked_against_the_socket_path() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = layout(tmp.path());
        let runtime = tmp.path().join("xdg");
        let env = env_with_runtime(&runtime);
        let socket = runtime.join("rootsd/rootsd.sock");

        let none = check_units(&layout, &socket, &env);
        assert_eq!(none.outcome, Outcome::Note, "{none:?}");
        assert!(none.summary.contains("not installed"), "{none:?}");

        let system_dir = &layout.unit_dirs[1];
        fs::create_dir_all(system_dir).unwrap();
        let unit = system_dir.join("rootsd.socket");
        fs::write(&unit, "[Socket]\nListenStream=%t/rootsd/rootsd.sock\n").unwrap();
        let half = check_units(&layout, &socket, &env);
        assert_eq!(half.outcome, Outcome::Fail, "{half:?}");

        fs::write(system_dir.join("rootsd.service"), "[Service]\n").unwrap();
        let disabled = check_units(&layout, &socket, &env);
        assert_eq!(disabled.outcome, Outcome::Note, "{disabled:?}");
        assert_eq!(
            disabled.fix.as_deref(),
            Some("systemctl --user enable --now rootsd.socket")
        );

        fs::create_dir_all(&layout.wants_dirs[0]).unwrap();
        symlink(&unit, layout.wants_dirs[0].join("rootsd.socket")).unwrap();
        let enabled = check_units(&layout, &socket, &env);
        assert_eq!(enabled.outcome, Outcome::Ok, "{enabled:?}");

        let elsewhere = check_units(&layout, Path::new("/elsewhere/rootsd.sock"), &env);
        assert_eq!(elsewhere.outcome, Outcome::Fail, "{elsewhere:?}");
        assert!(
            elsewhere.fix.unwrap().contains("unset ROOTSD_SOCKET"),
            "the fix names the variable"
        );
    }

    #[test]
    fn the_shipped_socket_unit_listens_where_rootsctl_looks() {
        let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd/user/rootsd.socket");
        let runtime = Path::new("/run/user/1000");
        let env = env_with_runtime(runtime);
        assert_eq!(
            unit_socket_path(&unit, &env),
            Some(paths::socket_path(&env, None))
        );
    }
}
