//! `rootsctl doctor`: checks what rootsctl and rootsd depend on, and explains each problem in
//! plain words together with its fix.
//!
//! Doctor only looks. It never starts the daemon (a daemon that is not running is one of the
//! things it reports), never changes a permission, and, like all of rootsctl, never opens the
//! database: what it knows about the state it learns from the daemon and from `stat`.
//!
//! This module runs the checks and prints the report; each check is its own module:
//! `locate` (which socket, and why), `socket_dir`, `socket`, `daemon`, `state_dir`, `systemd`,
//! `store`, `sessions` and `roots`.

mod daemon;
mod locate;
mod roots;
mod sessions;
mod socket;
mod socket_dir;
mod state_dir;
mod store;
mod systemd;

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rootsd_proto::modes::Perms;
use rootsd_proto::paths::Environment;
use serde::Serialize;

use crate::args::JsonArg;
use crate::autostart::Target;
use crate::errors::ProblemsFound;
use crate::output::{escape_bytes, escape_controls};

pub use daemon::OnDemand;
pub use systemd::Systemd;

/// What doctor found, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct Report {
    /// True when no check failed.
    pub ok: bool,
    /// The socket rootsctl uses.
    pub socket: PathBuf,
    pub checks: Vec<Check>,
    /// A rootsd answered at the socket.
    #[serde(skip)]
    pub running: bool,
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
    let systemd = Systemd::ask().await;
    let on_demand = OnDemand::of(target);
    let mut report = diagnose(
        &target.socket,
        &env,
        &me,
        &systemd,
        &target.client_name,
        &on_demand,
    )
    .await;
    let which = locate::check(target, &env);
    let host = locate::host_check(target, &env, report.running);
    report.ok &= which.outcome != Outcome::Fail && host.outcome != Outcome::Fail;
    report.checks.splice(0..0, [which, host]);
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

/// Runs every check against `socket`.
pub async fn diagnose(
    socket: &Path,
    env: &Environment,
    me: &Me,
    systemd: &Systemd,
    client_name: &str,
    on_demand: &OnDemand,
) -> Report {
    let mut checks = vec![
        socket_dir::check(socket, me),
        socket::check(socket, me, on_demand),
    ];
    let daemon = daemon::ask(socket, client_name, on_demand).await;
    checks.push(daemon.check);
    let shared = fs::symlink_metadata(socket).is_ok_and(|m| m.uid() != me.uid);
    checks.push(state_dir::check(env, daemon.status.as_ref(), me, shared));
    checks.push(systemd::check(systemd, socket, env));
    checks.push(store::check(daemon.status.as_ref()));
    checks.push(sessions::check(daemon.status.as_ref()));
    checks.extend(roots::check(socket, client_name, daemon.status.is_some()).await);
    Report {
        ok: checks.iter().all(|c| c.outcome != Outcome::Fail),
        socket: socket.to_owned(),
        checks,
        running: daemon.status.is_some(),
    }
}

/// Prints the report for people. Findings quote paths and what the daemon and systemd said, so
/// each line passes through [`escape_controls`].
fn print_report(out: &mut impl Write, report: &Report) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    writeln!(
        out,
        "rootsctl doctor: socket {}",
        escape_bytes(report.socket.as_os_str().as_bytes())
    )?;
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
            check.name,
            escape_controls(&check.summary)
        )?;
        if let Some(fix) = &check.fix {
            let fix = escape_controls(fix);
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

fn mode_of(meta: &fs::Metadata) -> u32 {
    meta.permissions().mode() & 0o7777
}

/// What the mode rules of [`rootsd_proto::modes`] judge a file by.
fn perms_of(meta: &fs::Metadata) -> Perms {
    Perms {
        uid: meta.uid(),
        gid: meta.gid(),
        mode: mode_of(meta),
    }
}

#[cfg(test)]
mod test_support {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use super::Me;

    pub fn me() -> Me {
        Me {
            uid: rustix::process::geteuid().as_raw(),
            groups: vec![rustix::process::getegid().as_raw()],
        }
    }

    pub fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }
}
