//! The systemd check: the user units installed, enabled, and listening where rootsctl looks.
//!
//! systemd is asked, not second-guessed: `systemctl --user show` reports what its user manager
//! loaded, from whichever unit directory, with every drop-in applied and `%t` expanded. Asking
//! ([`Systemd::ask`]) is kept apart from judging ([`check`]), so tests judge recorded answers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rootsd_proto::paths::Environment;

use super::{Check, Outcome};

const NAME: &str = "systemd";

/// The properties doctor reads, for both units in one call.
const PROPERTIES: &str = "Id,LoadState,Listen,UnitFileState,FragmentPath,DropInPaths";
const UNITS: [&str; 2] = ["rootsd.socket", "rootsd.service"];

/// How long systemctl may take to answer.
const SHOW_TIMEOUT: Duration = Duration::from_secs(5);

/// What systemd said about the rootsd units, or why it could not be asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Systemd {
    /// systemd is not the init system here (it creates `/run/systemd/system` at boot), so its
    /// units cannot start anything.
    NotBooted,
    /// `systemctl --user` did not answer, in its own words (no user manager in this session,
    /// no D-Bus, …).
    Unreachable(String),
    /// The output of `systemctl --user show -p PROPERTIES rootsd.socket rootsd.service`.
    Answered(String),
}

impl Systemd {
    /// Asks this machine's systemd user manager.
    pub async fn ask() -> Self {
        if !Path::new("/run/systemd/system").is_dir() {
            return Self::NotBooted;
        }
        let mut systemctl = tokio::process::Command::new("systemctl");
        systemctl
            .args(["--user", "show", "-p", PROPERTIES])
            .args(UNITS);
        Self::run(systemctl).await
    }

    /// Runs `command`, which prints what `systemctl show` does, within [`SHOW_TIMEOUT`].
    async fn run(mut command: tokio::process::Command) -> Self {
        command
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        match tokio::time::timeout(SHOW_TIMEOUT, command.output()).await {
            Err(_elapsed) => Self::Unreachable(format!(
                "it did not answer within {}s",
                SHOW_TIMEOUT.as_secs()
            )),
            Ok(Err(err)) => Self::Unreachable(format!("it could not be run: {err}")),
            Ok(Ok(output)) if !output.status.success() => {
                let said = String::from_utf8_lossy(&output.stderr).trim().to_owned();
                Self::Unreachable(if said.is_empty() {
                    format!("it exited with {}", output.status)
                } else {
                    format!("it said {said:?}")
                })
            }
            Ok(Ok(output)) => Self::Answered(String::from_utf8_lossy(&output.stdout).into_owned()),
        }
    }
}

/// One unit as `systemctl show` describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Unit {
    id: String,
    /// `loaded`, `not-found`, `masked`, `bad-setting`, `error`, …
    load_state: String,
    /// `enabled`, `disabled`, `masked`, `static`, …; empty when not installed.
    unit_file_state: String,
    fragment_path: String,
    drop_ins: Vec<String>,
    /// The stream sockets it listens on.
    listen: Vec<PathBuf>,
}

impl Unit {
    fn installed(&self) -> bool {
        self.load_state != "not-found"
    }

    fn enabled(&self) -> bool {
        matches!(self.unit_file_state.as_str(), "enabled" | "enabled-runtime")
    }
}

/// Parses `systemctl show` output: one `Key=value` block per unit, separated by blank lines.
/// `Listen=` may repeat and reads `PATH (TYPE)`; `DropInPaths=` is space-separated.
fn parse(output: &str) -> Vec<Unit> {
    output
        .split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut unit = Unit::default();
            for (key, value) in block.lines().filter_map(|l| l.split_once('=')) {
                match key {
                    "Id" => unit.id = value.to_owned(),
                    "LoadState" => unit.load_state = value.to_owned(),
                    "UnitFileState" => unit.unit_file_state = value.to_owned(),
                    "FragmentPath" => unit.fragment_path = value.to_owned(),
                    "DropInPaths" => {
                        unit.drop_ins = value.split_whitespace().map(str::to_owned).collect();
                    }
                    "Listen" => {
                        if let Some(path) = value.strip_suffix(" (Stream)") {
                            unit.listen.push(PathBuf::from(path));
                        }
                    }
                    _ => {}
                }
            }
            unit
        })
        .collect()
}

const INSTALL: &str = "copy systemd/user/rootsd.socket and rootsd.service to ~/.config/systemd/user/, then `systemctl --user daemon-reload && systemctl --user enable --now rootsd.socket`";

/// Whether the user units are installed and enabled, and listen where rootsctl looks; judged
/// from what systemd said.
pub(super) fn check(systemd: &Systemd, socket: &Path, env: &Environment) -> Check {
    let output = match systemd {
        Systemd::NotBooted => {
            return Check::new(
                NAME,
                Outcome::Skip,
                "systemd is not running as the init system here (no /run/systemd/system), so its units cannot start rootsd; rootsctl starts it on demand instead",
            );
        }
        Systemd::Unreachable(why) => {
            return Check::new(
                NAME,
                Outcome::Skip,
                format!(
                    "systemd's user manager could not be asked about the rootsd units (`systemctl --user show`: {why}); rootsctl starts rootsd on demand either way"
                ),
            );
        }
        Systemd::Answered(output) => output,
    };
    let units = parse(output);
    let find = |id: &str| units.iter().find(|u| u.id == id);
    let (Some(socket_unit), Some(service_unit)) = (find(UNITS[0]), find(UNITS[1])) else {
        return Check::new(
            NAME,
            Outcome::Skip,
            format!("systemctl's answer does not describe both rootsd units: {output:?}"),
        );
    };
    match (socket_unit.installed(), service_unit.installed()) {
        (false, false) => {
            return Check::new(
                NAME,
                Outcome::Note,
                "the rootsd units are not installed; that is fine, as rootsctl starts rootsd on demand",
            )
            .fix(format!("to have systemd start it instead: {INSTALL}"));
        }
        (true, false) | (false, true) => {
            let found = if socket_unit.installed() {
                socket_unit
            } else {
                service_unit
            };
            return Check::new(
                NAME,
                Outcome::Fail,
                format!(
                    "only half of the units is installed: {} has no partner",
                    found.fragment_path
                ),
            )
            .fix(format!("install both: {INSTALL}"));
        }
        (true, true) => {}
    }
    for unit in [socket_unit, service_unit] {
        match unit.load_state.as_str() {
            "loaded" => {}
            "masked" if unit.id == UNITS[0] => {
                return Check::new(
                    NAME,
                    Outcome::Note,
                    "rootsd.socket is masked, so systemd never listens for rootsd; rootsctl starts it on demand instead",
                )
                .fix("to have systemd start it: `systemctl --user unmask rootsd.socket && systemctl --user enable --now rootsd.socket`");
            }
            "masked" => {
                return Check::new(
                    NAME,
                    Outcome::Fail,
                    "rootsd.service is masked, so a connection to systemd's socket would start nothing",
                )
                .fix("systemctl --user unmask rootsd.service");
            }
            other => {
                return Check::new(
                    NAME,
                    Outcome::Fail,
                    format!(
                        "systemd could not load {} ({}): its load state is {other}",
                        unit.id, unit.fragment_path
                    ),
                )
                .fix(format!(
                    "`systemctl --user status {}` says why; fix the unit, then `systemctl --user daemon-reload`",
                    unit.id
                ));
            }
        }
    }
    let drop_ins = match socket_unit.drop_ins.as_slice() {
        [] => String::new(),
        paths => format!(" (with {})", paths.join(", ")),
    };
    let installed = format!(
        "{}{drop_ins} and {}",
        socket_unit.fragment_path,
        Path::new(&service_unit.fragment_path)
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    );
    if !socket_unit.enabled() {
        return Check::new(
            NAME,
            Outcome::Note,
            format!("{installed} are installed but not enabled, so systemd does not listen on the socket; rootsctl starts rootsd on demand instead"),
        )
        .fix("systemctl --user enable --now rootsd.socket");
    }
    match socket_unit.listen.first() {
        Some(listens) if !socket_unit.listen.iter().any(|l| l == socket) => Check::new(
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

#[cfg(test)]
mod tests {
    use rootsd_proto::paths;

    use super::*;

    fn env_with_runtime(dir: &Path) -> Environment {
        Environment {
            xdg_runtime_dir: Some(dir.as_os_str().to_owned()),
            uid: 1000,
            ..Environment::default()
        }
    }

    const HOME_UNITS: &str = "/home/ana/.config/systemd/user";

    /// `systemctl --user show` for both units, as systemd 252 prints it (recorded with the
    /// shipped units, paths rewritten): `socket_unit` and `service_unit` are the properties of
    /// each, in systemd's order.
    fn answer(socket_unit: &str, service_unit: &str) -> Systemd {
        Systemd::Answered(format!(
            "{socket_unit}\n\n{service_unit}\n",
            socket_unit = socket_unit.trim(),
            service_unit = service_unit.trim()
        ))
    }

    fn socket_unit(listen: &[&str], unit_file_state: &str, drop_ins: &str) -> String {
        let listen: String = listen
            .iter()
            .map(|path| format!("Listen={path} (Stream)\n"))
            .collect();
        format!(
            "{listen}Id=rootsd.socket\nLoadState=loaded\nFragmentPath={HOME_UNITS}/rootsd.socket\nDropInPaths={drop_ins}\nUnitFileState={unit_file_state}"
        )
    }

    fn service_unit() -> String {
        format!(
            "Id=rootsd.service\nLoadState=loaded\nFragmentPath={HOME_UNITS}/rootsd.service\nDropInPaths=\nUnitFileState=indirect"
        )
    }

    fn not_found(id: &str) -> String {
        format!("Id={id}\nLoadState=not-found\nFragmentPath=\nDropInPaths=\nUnitFileState=")
    }

    const OURS: &str = "/run/user/1000/rootsd/rootsd.sock";

    fn judge(systemd: &Systemd) -> Check {
        check(
            systemd,
            Path::new(OURS),
            &env_with_runtime(Path::new("/run/user/1000")),
        )
    }

    #[test]
    fn units_are_skipped_without_systemd() {
        let check = check(
            &Systemd::NotBooted,
            Path::new("/s.sock"),
            &Environment::default(),
        );
        assert_eq!(check.outcome, Outcome::Skip);
        assert!(check.summary.contains("/run/systemd/system"), "{check:?}");
    }

    #[test]
    fn a_user_manager_that_cannot_be_reached_is_a_skip_that_says_why() {
        let check = judge(&Systemd::Unreachable(
            "it said \"Failed to connect to bus: No medium found\"".into(),
        ));
        assert_eq!(check.outcome, Outcome::Skip, "{check:?}");
        assert!(check.summary.contains("No medium found"), "{check:?}");
        assert!(check.summary.contains("on demand"), "{check:?}");
    }

    #[test]
    fn units_are_found_enabled_and_checked_against_the_socket_path() {
        let none = judge(&answer(
            &not_found("rootsd.socket"),
            &not_found("rootsd.service"),
        ));
        assert_eq!(none.outcome, Outcome::Note, "{none:?}");
        assert!(none.summary.contains("not installed"), "{none:?}");

        let half = judge(&answer(
            &socket_unit(&[OURS], "disabled", ""),
            &not_found("rootsd.service"),
        ));
        assert_eq!(half.outcome, Outcome::Fail, "{half:?}");
        assert!(
            half.summary
                .contains(&format!("{HOME_UNITS}/rootsd.socket has no partner")),
            "{half:?}"
        );

        let disabled = judge(&answer(
            &socket_unit(&[OURS], "disabled", ""),
            &service_unit(),
        ));
        assert_eq!(disabled.outcome, Outcome::Note, "{disabled:?}");
        assert_eq!(
            disabled.fix.as_deref(),
            Some("systemctl --user enable --now rootsd.socket")
        );

        let enabled = judge(&answer(
            &socket_unit(&[OURS], "enabled", ""),
            &service_unit(),
        ));
        assert_eq!(enabled.outcome, Outcome::Ok, "{enabled:?}");
        assert!(
            enabled
                .summary
                .starts_with(&format!("{HOME_UNITS}/rootsd.socket and rootsd.service")),
            "{enabled:?}"
        );

        let elsewhere = check(
            &answer(&socket_unit(&[OURS], "enabled", ""), &service_unit()),
            Path::new("/elsewhere/rootsd.sock"),
            &env_with_runtime(Path::new("/run/user/1000")),
        );
        assert_eq!(elsewhere.outcome, Outcome::Fail, "{elsewhere:?}");
        assert!(
            elsewhere.fix.unwrap().contains("unset ROOTSD_SOCKET"),
            "the fix names the variable"
        );

        let without_runtime_dir = check(
            &answer(&socket_unit(&[OURS], "enabled", ""), &service_unit()),
            Path::new("/tmp/rootsd-1000/rootsd.sock"),
            &Environment::default(),
        );
        assert_eq!(without_runtime_dir.outcome, Outcome::Fail);
        assert!(
            without_runtime_dir
                .fix
                .unwrap()
                .starts_with("XDG_RUNTIME_DIR is not set"),
        );
    }

    #[test]
    fn a_drop_in_that_moves_the_socket_is_seen() {
        let drop_in = format!("{HOME_UNITS}/rootsd.socket.d/override.conf");
        let moved = judge(&answer(
            &socket_unit(&["/srv/rootsd.sock"], "enabled", &drop_in),
            &service_unit(),
        ));
        assert_eq!(moved.outcome, Outcome::Fail, "{moved:?}");
        assert!(
            moved.summary.contains("listens on /srv/rootsd.sock")
                && moved.summary.contains(&drop_in),
            "{moved:?}"
        );
        assert_eq!(
            moved.fix.as_deref(),
            Some("unset ROOTSD_SOCKET (and --socket), or set it to /srv/rootsd.sock")
        );

        // A drop-in that adds a second socket keeps the first.
        let added = judge(&answer(
            &socket_unit(&[OURS, "/srv/rootsd.sock"], "enabled", &drop_in),
            &service_unit(),
        ));
        assert_eq!(added.outcome, Outcome::Ok, "{added:?}");
    }

    #[test]
    fn a_masked_socket_unit_is_noted_with_how_to_unmask_it() {
        let masked = judge(&answer(
            &format!(
                "Id=rootsd.socket\nLoadState=masked\nFragmentPath={HOME_UNITS}/rootsd.socket\nDropInPaths=\nUnitFileState=masked"
            ),
            &service_unit(),
        ));
        assert_eq!(masked.outcome, Outcome::Note, "{masked:?}");
        assert!(masked.fix.unwrap().contains("unmask rootsd.socket"));
    }

    #[test]
    fn an_unexpected_answer_is_a_skip_not_a_verdict() {
        let check = judge(&Systemd::Answered(String::new()));
        assert_eq!(check.outcome, Outcome::Skip, "{check:?}");
    }

    #[test]
    fn the_shipped_socket_unit_listens_where_rootsctl_looks() {
        // What systemd reports as Listen= for the shipped unit: its ListenStream= with %t
        // expanded to the user's runtime directory.
        let unit = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd/user/rootsd.socket"),
        )
        .unwrap();
        let listen_stream = unit
            .lines()
            .find_map(|l| l.trim().strip_prefix("ListenStream="))
            .expect("the shipped socket unit has ListenStream=");
        let runtime = Path::new("/run/user/1000");
        let listens = listen_stream.replace("%t", runtime.to_str().unwrap());
        let env = env_with_runtime(runtime);
        let rootsctl_uses = paths::socket_path(&env, None, None);
        assert_eq!(Path::new(&listens), rootsctl_uses);
        // Without XDG_RUNTIME_DIR, rootsctl still tries the unit's socket.
        assert_eq!(paths::user_unit_socket(1000), Path::new(&listens));
        let verdict = check(
            &answer(&socket_unit(&[&listens], "enabled", ""), &service_unit()),
            &rootsctl_uses,
            &env,
        );
        assert_eq!(verdict.outcome, Outcome::Ok, "{verdict:?}");
    }

    #[tokio::test]
    async fn asking_turns_a_failing_or_missing_systemctl_into_unreachable() {
        let mut failing = tokio::process::Command::new("sh");
        failing.args([
            "-c",
            "echo 'Failed to connect to bus: No medium found' >&2; exit 1",
        ]);
        assert_eq!(
            Systemd::run(failing).await,
            Systemd::Unreachable(
                "it said \"Failed to connect to bus: No medium found\"".to_owned()
            )
        );

        let missing = tokio::process::Command::new("/nonexistent/systemctl");
        assert!(
            matches!(Systemd::run(missing).await, Systemd::Unreachable(why) if why.starts_with("it could not be run")),
        );

        let mut answering = tokio::process::Command::new("sh");
        answering.args(["-c", "printf 'Id=rootsd.socket\\nLoadState=not-found\\n'"]);
        assert_eq!(
            Systemd::run(answering).await,
            Systemd::Answered("Id=rootsd.socket\nLoadState=not-found\n".to_owned())
        );
    }
}
