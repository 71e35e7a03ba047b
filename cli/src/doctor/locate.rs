//! Which socket rootsctl uses and why: the rendezvous in the state directory, the user's
//! configuration file, the environment, or an explicit path ([`crate::locate`]); and what a host
//! gets, which starts `rootsctl proxy` with a stripped environment: the same daemon as this
//! shell, or another, or none.

use std::path::Path;

use rootsd_proto::paths::{self, Environment};

use super::{Check, Outcome};
use crate::autostart::Target;
use crate::locate::{self, Source};

/// Where the shared service's socket unit listens (`systemd/system/rootsd.socket`).
const SHARED_SOCKET: &str = "/run/rootsd/rootsd.sock";

const NAME: &str = "which socket";

pub fn check(target: &Target, env: &Environment) -> Check {
    let socket = target.socket.display();
    let state_dir = target.state_dir.as_deref();
    match &target.source {
        Source::Explicit | Source::Configured { .. } => {
            let running = state_dir
                .and_then(locate::recorded)
                .filter(|found| found.socket != target.socket);
            match running {
                Some(found) => Check::new(
                    NAME,
                    Outcome::Fail,
                    format!(
                        "{socket} is {}, but the rootsd running for this user's state directory listens on {} ({}): rootsctl would not reach it, and a rootsd it started would find the state directory taken",
                        target.source.describe(),
                        found.socket.display(),
                        found.source.describe()
                    ),
                )
                .fix(match &target.source {
                    Source::Configured { file } => format!(
                        "set `socket = {}` in {}, or remove that line",
                        found.socket.display(),
                        file.display()
                    ),
                    _ => format!(
                        "unset ROOTSD_SOCKET (and drop --socket), or set it to {}",
                        found.socket.display()
                    ),
                }),
                None => Check::new(
                    NAME,
                    Outcome::Ok,
                    format!("{socket}, {}", target.source.describe()),
                ),
            }
        }
        Source::Recorded { .. } => {
            let computed = paths::socket_path(env, None, state_dir);
            let also = if computed == target.socket {
                String::new()
            } else {
                format!(
                    "; this environment alone would point at {} ({}), but every rootsctl of this user follows the record, so all of them, proxies started by hosts included, reach this one daemon",
                    computed.display(),
                    if env.xdg_runtime_dir.is_some() {
                        "XDG_RUNTIME_DIR is set here"
                    } else {
                        "XDG_RUNTIME_DIR is not set here"
                    }
                )
            };
            Check::new(
                NAME,
                Outcome::Ok,
                format!("{socket}, {}{also}", target.source.describe()),
            )
        }
        Source::UserUnit | Source::Computed => Check::new(
            NAME,
            Outcome::Ok,
            format!("{socket}, {}", target.source.describe()),
        ),
    }
}

const HOST: &str = "from a host";

/// What a proxy gets that a host starts with only `HOME`, `PATH` and `USER`, as Codex and the MCP
/// SDKs start servers: the daemon this rootsctl reaches (`running` says whether it answered), or
/// a different one, or none. A host never passes `ROOTSD_*` on, but the configuration file, found
/// from `HOME`, applies to it as to everyone.
pub fn host_check(target: &Target, env: &Environment, running: bool) -> Check {
    let host = Target::within(
        &paths::bare(env),
        target.config.clone(),
        None,
        false,
        target.timeout,
    );
    let config = crate::config::path(env).map_or_else(
        || "~/.config/rootsd/rootsd.conf".to_owned(),
        |p| p.display().to_string(),
    );
    let lead = "a host that starts `rootsctl proxy` with only HOME and PATH";
    if host.socket != target.socket {
        let gets = match &host.source {
            Source::Recorded { pid, .. } => format!("would reach another rootsd (pid {pid})"),
            _ if host.autostart => format!(
                "would start a second rootsd there, {}, and its servers would not get these roots",
                store_words(host.state_dir.as_deref())
            ),
            _ => format!(
                "would find no rootsd there, autostart being off ({}), and its servers would get no roots",
                host.autostart_off_because()
            ),
        };
        let mut fix = format!("write `socket = {}` into {config}", target.socket.display());
        if !target.autostart {
            fix.push_str(" with `autostart = no` below it");
        }
        fix.push_str(", so that every rootsctl of yours uses it whatever its environment");
        if matches!(target.source, Source::Recorded { .. }) {
            fix.push_str("; or restart rootsd, which then leaves a pointer to its state directory in ~/.local/state/rootsd");
        }
        return Check::new(
            HOST,
            Outcome::Fail,
            format!(
                "{lead} would use {} ({}) instead of {} ({}): it {gets}",
                host.socket.display(),
                host.source.describe(),
                target.socket.display(),
                target.source.describe()
            ),
        )
        .fix(fix);
    }
    let same = format!(
        "{lead} reaches this same socket ({})",
        host.source.describe()
    );
    if running {
        return Check::new(
            HOST,
            Outcome::Ok,
            format!("{same}, and the rootsd answering there"),
        );
    }
    if !host.autostart {
        return Check::new(
            HOST,
            Outcome::Note,
            format!(
                "{same}, but no rootsd answers there and autostart is off ({}): its servers get no roots until one runs",
                host.autostart_off_because()
            ),
        );
    }
    let started = format!(
        "{same}; no rootsd runs yet, so its first proxy starts one, {}",
        store_words(host.state_dir.as_deref())
    );
    if Path::new(SHARED_SOCKET).exists() && !has_store(host.state_dir.as_deref()) {
        return Check::new(
            HOST,
            Outcome::Note,
            format!("{started}, though a shared rootsd listens at {SHARED_SOCKET}"),
        )
        .fix(format!(
            "to use the shared one from every app, write `socket = {SHARED_SOCKET}` and `autostart = no` into {config}"
        ));
    }
    Check::new(HOST, Outcome::Ok, started)
}

/// Whether `state_dir` holds a store: a journal or a database.
fn has_store(state_dir: Option<&Path>) -> bool {
    state_dir.is_some_and(|dir| dir.join("roots.journal").exists() || dir.join("db").exists())
}

/// The state directory a started daemon would use, and whether it holds roots already.
fn store_words(state_dir: Option<&Path>) -> String {
    match state_dir {
        Some(dir) if has_store(Some(dir)) => {
            format!("with the store in {}", dir.display())
        }
        Some(dir) => format!("with a new, empty store in {}", dir.display()),
        None => "with no state directory it can name".to_owned(),
    }
}
