//! The systemd check: the user units installed, enabled, and listening where rootsctl looks.

use std::fs;
use std::path::{Path, PathBuf};

use rootsd_proto::paths::Environment;

use super::{Check, Outcome};

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
    pub(super) fn of(env: &Environment) -> Self {
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

/// Whether the user units are installed and enabled, where systemd runs at all.
pub(super) fn check(layout: &SystemdLayout, socket: &Path, env: &Environment) -> Check {
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

    use rootsd_proto::paths;

    use super::*;

    fn env_with_runtime(dir: &Path) -> Environment {
        Environment {
            xdg_runtime_dir: Some(dir.as_os_str().to_owned()),
            uid: 1000,
            ..Environment::default()
        }
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
        let check = super::check(&layout, Path::new("/s.sock"), &Environment::default());
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

        let none = super::check(&layout, &socket, &env);
        assert_eq!(none.outcome, Outcome::Note, "{none:?}");
        assert!(none.summary.contains("not installed"), "{none:?}");

        let system_dir = &layout.unit_dirs[1];
        fs::create_dir_all(system_dir).unwrap();
        let unit = system_dir.join("rootsd.socket");
        fs::write(&unit, "[Socket]\nListenStream=%t/rootsd/rootsd.sock\n").unwrap();
        let half = super::check(&layout, &socket, &env);
        assert_eq!(half.outcome, Outcome::Fail, "{half:?}");

        fs::write(system_dir.join("rootsd.service"), "[Service]\n").unwrap();
        let disabled = super::check(&layout, &socket, &env);
        assert_eq!(disabled.outcome, Outcome::Note, "{disabled:?}");
        assert_eq!(
            disabled.fix.as_deref(),
            Some("systemctl --user enable --now rootsd.socket")
        );

        fs::create_dir_all(&layout.wants_dirs[0]).unwrap();
        symlink(&unit, layout.wants_dirs[0].join("rootsd.socket")).unwrap();
        let enabled = super::check(&layout, &socket, &env);
        assert_eq!(enabled.outcome, Outcome::Ok, "{enabled:?}");

        let elsewhere = super::check(&layout, Path::new("/elsewhere/rootsd.sock"), &env);
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
