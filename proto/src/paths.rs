//! Where the socket and the state directory live.
//!
//! Resolution is one pure function of an [`Environment`] snapshot so that the daemon, the CLI
//! (which must find the socket the daemon chose, and autostart it there) and the tests agree
//! without anyone calling `set_var`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// File name of the socket inside its directory.
pub const SOCKET_FILE_NAME: &str = "rootsd.sock";

/// The environment variables path resolution reads, captured once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Environment {
    /// `ROOTSD_SOCKET`.
    pub rootsd_socket: Option<OsString>,
    /// `ROOTSD_STATE_DIR`.
    pub rootsd_state_dir: Option<OsString>,
    /// `XDG_RUNTIME_DIR`.
    pub xdg_runtime_dir: Option<OsString>,
    /// `TMPDIR`.
    pub tmpdir: Option<OsString>,
    /// `STATE_DIRECTORY`, set by systemd from `StateDirectory=`; may hold several paths separated
    /// by `:`.
    pub state_directory: Option<OsString>,
    /// `XDG_STATE_HOME`.
    pub xdg_state_home: Option<OsString>,
    /// `HOME`.
    pub home: Option<OsString>,
    /// The real user id, for the per-user fallback directory under `/tmp`.
    pub uid: u32,
}

impl Environment {
    /// Captures the process environment. `uid` is passed in because reading it is a system call,
    /// which this crate leaves to its callers.
    pub fn capture(uid: u32) -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        Self {
            rootsd_socket: var("ROOTSD_SOCKET"),
            rootsd_state_dir: var("ROOTSD_STATE_DIR"),
            xdg_runtime_dir: var("XDG_RUNTIME_DIR"),
            tmpdir: var("TMPDIR"),
            state_directory: var("STATE_DIRECTORY"),
            xdg_state_home: var("XDG_STATE_HOME"),
            home: var("HOME"),
            uid,
        }
    }
}

/// Why a path could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error(
        "cannot choose a state directory: none of --state-dir, ROOTSD_STATE_DIR, STATE_DIRECTORY, XDG_STATE_HOME or HOME is set; pass --state-dir DIR"
    )]
    NoStateDir,
}

/// The longest path a Unix socket can be bound at (`sun_path` holds 108 bytes with its NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// The socket path: `explicit` (`--socket`), else `ROOTSD_SOCKET`, else
/// `$XDG_RUNTIME_DIR/rootsd/rootsd.sock`, else `rootsd.sock` in the state directory (private to
/// the user and reachable from `HOME` alone), else, when that path is too long for a socket or
/// there is no state directory, `${TMPDIR:-/tmp}/rootsd-$UID/rootsd.sock`.
///
/// Relative values are kept as given; XDG requires absolute paths, so a relative
/// `XDG_RUNTIME_DIR` is ignored as the basedir specification says. This is where a daemon binds
/// and where a client looks first when no daemon has recorded another socket in the state
/// directory ([`crate::rendezvous`]).
pub fn socket_path(
    env: &Environment,
    explicit: Option<PathBuf>,
    state_dir: Option<&Path>,
) -> PathBuf {
    if let Some(path) = explicit.or_else(|| env.rootsd_socket.clone().map(PathBuf::from)) {
        return path;
    }
    if let Some(runtime) = absolute(&env.xdg_runtime_dir) {
        return runtime.join("rootsd").join(SOCKET_FILE_NAME);
    }
    if let Some(state) = state_dir {
        let in_state = state.join(SOCKET_FILE_NAME);
        if in_state.as_os_str().len() <= MAX_SOCKET_PATH {
            return in_state;
        }
    }
    let tmp = absolute(&env.tmpdir).unwrap_or_else(|| PathBuf::from("/tmp"));
    tmp.join(format!("rootsd-{}", env.uid))
        .join(SOCKET_FILE_NAME)
}

/// Where systemd's user socket unit listens when the session sets `XDG_RUNTIME_DIR` to the
/// usual `/run/user/$UID`: what a client without `XDG_RUNTIME_DIR` (as hosts start MCP servers)
/// should try when nothing else is recorded.
pub fn user_unit_socket(uid: u32) -> PathBuf {
    PathBuf::from(format!("/run/user/{uid}"))
        .join("rootsd")
        .join(SOCKET_FILE_NAME)
}

/// The state directory: `explicit` (`--state-dir`), else `ROOTSD_STATE_DIR`, else the first
/// entry of `STATE_DIRECTORY`, else `$XDG_STATE_HOME/rootsd`, else `$HOME/.local/state/rootsd`.
pub fn state_dir(env: &Environment, explicit: Option<PathBuf>) -> Result<PathBuf, PathError> {
    state_dir_and_source(env, explicit).map(|(dir, _)| dir)
}

/// What chose the state directory, so that a daemon knows whether a client that sees only
/// `HOME` would compute the same one ([`crate::rendezvous::Pointer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateDirSource {
    /// `--state-dir` or `ROOTSD_STATE_DIR`: a choice the user makes known to clients themselves.
    Explicit,
    /// systemd's `STATE_DIRECTORY`.
    Systemd,
    /// `XDG_STATE_HOME`, which hosts strip from the environment they give servers.
    XdgStateHome,
    /// `HOME` alone: what every client of the user computes.
    Home,
}

/// [`state_dir`], and what chose it.
pub fn state_dir_and_source(
    env: &Environment,
    explicit: Option<PathBuf>,
) -> Result<(PathBuf, StateDirSource), PathError> {
    if let Some(path) = explicit.or_else(|| env.rootsd_state_dir.clone().map(PathBuf::from)) {
        return Ok((path, StateDirSource::Explicit));
    }
    if let Some(dirs) = &env.state_directory {
        let first = dirs
            .to_string_lossy()
            .split(':')
            .next()
            .unwrap_or_default()
            .to_owned();
        if !first.is_empty() {
            return Ok((PathBuf::from(first), StateDirSource::Systemd));
        }
    }
    if let Some(state) = absolute(&env.xdg_state_home) {
        return Ok((state.join("rootsd"), StateDirSource::XdgStateHome));
    }
    home_state_dir(env)
        .map(|dir| (dir, StateDirSource::Home))
        .ok_or(PathError::NoStateDir)
}

/// `$HOME/.local/state/rootsd`: the state directory a client computes from `HOME` alone, as
/// every host's stripped environment allows. Where the daemon's state directory is elsewhere,
/// this is where it leaves a [`crate::rendezvous::Pointer`] to it.
pub fn home_state_dir(env: &Environment) -> Option<PathBuf> {
    absolute(&env.home).map(|home| home.join(".local").join("state").join("rootsd"))
}

/// Only what every host passes on to the servers it starts: `HOME` and the uid. What a client
/// started by a host with a stripped environment sees, for `rootsctl doctor` to ask where such
/// a client would go.
pub fn bare(env: &Environment) -> Environment {
    Environment {
        home: env.home.clone(),
        uid: env.uid,
        ..Environment::default()
    }
}

fn absolute(value: &Option<OsString>) -> Option<PathBuf> {
    value
        .as_ref()
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Environment {
        Environment {
            uid: 1000,
            ..Environment::default()
        }
    }

    #[test]
    fn socket_prefers_flag_then_env_then_runtime_dir_then_tmp() {
        let mut e = env();
        let state = Path::new("/home/u/.local/state/rootsd");
        assert_eq!(
            socket_path(&e, None, None),
            PathBuf::from("/tmp/rootsd-1000/rootsd.sock")
        );
        e.tmpdir = Some("/var/tmp".into());
        assert_eq!(
            socket_path(&e, None, None),
            PathBuf::from("/var/tmp/rootsd-1000/rootsd.sock")
        );
        assert_eq!(
            socket_path(&e, None, Some(state)),
            PathBuf::from("/home/u/.local/state/rootsd/rootsd.sock")
        );
        e.xdg_runtime_dir = Some("/run/user/1000".into());
        assert_eq!(
            socket_path(&e, None, Some(state)),
            PathBuf::from("/run/user/1000/rootsd/rootsd.sock")
        );
        e.rootsd_socket = Some("/s/env.sock".into());
        assert_eq!(
            socket_path(&e, None, Some(state)),
            PathBuf::from("/s/env.sock")
        );
        assert_eq!(
            socket_path(&e, Some("/s/flag.sock".into()), Some(state)),
            PathBuf::from("/s/flag.sock")
        );
    }

    #[test]
    fn relative_runtime_dir_is_ignored() {
        let mut e = env();
        e.xdg_runtime_dir = Some("relative".into());
        assert_eq!(
            socket_path(&e, None, None),
            PathBuf::from("/tmp/rootsd-1000/rootsd.sock")
        );
    }

    #[test]
    fn a_state_dir_too_deep_for_a_socket_falls_back_to_the_temporary_directory() {
        let deep = PathBuf::from("/").join("d".repeat(120));
        assert_eq!(
            socket_path(&env(), None, Some(&deep)),
            PathBuf::from("/tmp/rootsd-1000/rootsd.sock")
        );
    }

    #[test]
    fn the_state_directory_says_what_chose_it() {
        let mut e = env();
        e.home = Some("/home/u".into());
        let source = |e: &Environment| state_dir_and_source(e, None).unwrap().1;
        assert_eq!(source(&e), StateDirSource::Home);
        assert_eq!(
            home_state_dir(&e),
            Some(PathBuf::from("/home/u/.local/state/rootsd"))
        );
        e.xdg_state_home = Some("/xdg/state".into());
        assert_eq!(source(&e), StateDirSource::XdgStateHome);
        e.state_directory = Some("/var/lib/rootsd".into());
        assert_eq!(source(&e), StateDirSource::Systemd);
        e.rootsd_state_dir = Some("/s".into());
        assert_eq!(source(&e), StateDirSource::Explicit);
        let bare = bare(&e);
        assert_eq!(bare.home, e.home);
        assert_eq!(bare.uid, e.uid);
        assert_eq!(source(&bare), StateDirSource::Home);
        e.home = Some("relative".into());
        assert_eq!(home_state_dir(&e), None, "XDG paths must be absolute");
    }

    #[test]
    fn state_prefers_flag_then_systemd_then_xdg_then_home() {
        let mut e = env();
        assert_eq!(state_dir(&e, None), Err(PathError::NoStateDir));
        e.home = Some("/home/u".into());
        assert_eq!(
            state_dir(&e, None).unwrap(),
            PathBuf::from("/home/u/.local/state/rootsd")
        );
        e.xdg_state_home = Some("/xdg/state".into());
        assert_eq!(
            state_dir(&e, None).unwrap(),
            PathBuf::from("/xdg/state/rootsd")
        );
        e.state_directory = Some("/var/lib/rootsd:/var/lib/other".into());
        assert_eq!(
            state_dir(&e, None).unwrap(),
            PathBuf::from("/var/lib/rootsd")
        );
        assert_eq!(
            state_dir(&e, Some("/flag".into())).unwrap(),
            PathBuf::from("/flag")
        );
    }
}
