//! Finding the user's daemon, whatever part of the environment this rootsctl was started with.
//!
//! Hosts start MCP servers, and so `rootsctl proxy`, with little more than `HOME`, `PATH` and
//! `USER`. Computing the socket from the environment alone would then point a proxy at a
//! different path than the user's shell uses. So, in order, rootsctl uses: a socket given
//! explicitly (`--socket`, `ROOTSD_SOCKET`); the socket the user's configuration file names
//! ([`crate::config`], found from `HOME` alone); the socket a running daemon recorded in its
//! state directory's lock ([`rootsd_proto::rendezvous`]), looking in the directory this
//! environment leads to and then where the pointer from `~/.local/state/rootsd` leads; systemd's
//! user socket, which waits under `/run/user/$UID` even when `XDG_RUNTIME_DIR` was stripped; and
//! only then a computed path, in the state directory that holds the user's store.

use std::fs::File;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rootsd_proto::paths::{self, Environment};
use rootsd_proto::rendezvous::{LOCK_FILE, POINTER_FILE, Pointer, Record};

use crate::config::UserConfig;

/// How long a record may be missing while its daemon is writing it.
const RECORD_PATIENCE: Duration = Duration::from_millis(200);

/// Why rootsctl uses the socket it uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `--socket` or `ROOTSD_SOCKET`.
    Explicit,
    /// The user's configuration file names it.
    Configured { file: PathBuf },
    /// The running daemon recorded it in the state directory.
    Recorded { pid: u32, state_dir: PathBuf },
    /// systemd's user socket unit, found under `/run/user/$UID` without `XDG_RUNTIME_DIR`.
    UserUnit,
    /// Computed from this environment: nothing runs yet.
    Computed,
}

impl Source {
    /// The reason in words, for `doctor` and error messages.
    pub fn describe(&self) -> String {
        match self {
            Self::Explicit => "given by --socket or ROOTSD_SOCKET".to_owned(),
            Self::Configured { file } => format!("named by {}", file.display()),
            Self::Recorded { pid, state_dir } => format!(
                "recorded by the running rootsd (pid {pid}) in {}",
                state_dir.join(LOCK_FILE).display()
            ),
            Self::UserUnit => {
                "where systemd's user socket unit listens (XDG_RUNTIME_DIR is not set here)"
                    .to_owned()
            }
            Self::Computed => "computed from this environment; no rootsd is running".to_owned(),
        }
    }
}

/// Where to reach the daemon, and why there.
#[derive(Clone, Debug)]
pub struct Located {
    pub socket: PathBuf,
    pub source: Source,
    /// The state directory of this user's daemon, when one can be named: where a running daemon
    /// records its socket, and where an autostarted one keeps its store.
    pub state_dir: Option<PathBuf>,
    /// `state_dir` is where the pointer in `~/.local/state/rootsd` leads, not where this
    /// environment does: a daemon started from here must be told.
    pub pointed: bool,
}

/// Finds the socket, in the order this module's documentation gives.
pub fn locate(env: &Environment, explicit: Option<PathBuf>, config: &UserConfig) -> Located {
    let computed_dir = paths::state_dir(env, None).ok();
    let pointed_dir = computed_dir
        .as_deref()
        .filter(|dir| Some(*dir) == paths::home_state_dir(env).as_deref())
        .and_then(pointer_from);
    let (state_dir, pointed) = match &pointed_dir {
        Some(dir) => (Some(dir.clone()), true),
        None => (computed_dir.clone(), false),
    };
    let located = |socket, source| Located {
        socket,
        source,
        state_dir: state_dir.clone(),
        pointed,
    };
    if let Some(socket) = explicit.or_else(|| env.rootsd_socket.clone().map(PathBuf::from)) {
        return located(socket, Source::Explicit);
    }
    if let (Some(socket), Some(file)) = (&config.socket, &config.file) {
        return located(socket.clone(), Source::Configured { file: file.clone() });
    }
    for dir in computed_dir.iter().chain(pointed_dir.iter()) {
        if let Some(found) = recorded(dir) {
            return found;
        }
    }
    if env.xdg_runtime_dir.is_none() {
        let unit = paths::user_unit_socket(env.uid);
        if std::fs::symlink_metadata(&unit).is_ok_and(|m| m.file_type().is_socket()) {
            return located(unit, Source::UserUnit);
        }
    }
    located(
        paths::socket_path(env, None, state_dir.as_deref()),
        Source::Computed,
    )
}

/// The state directory the pointer in `home_dir` names, if it names one that exists: a pointer
/// to a directory since removed leads nowhere, and the home directory is then the user's again.
fn pointer_from(home_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(home_dir.join(POINTER_FILE)).ok()?;
    let pointer = Pointer::parse(&text)?;
    (pointer.state_dir != home_dir && pointer.state_dir.is_dir()).then_some(pointer.state_dir)
}

/// The socket the daemon holding `state_dir`'s lock recorded, if a daemon holds it.
pub fn recorded(state_dir: &Path) -> Option<Located> {
    let record = live_record(state_dir)?;
    Some(Located {
        socket: record.socket?,
        source: Source::Recorded {
            pid: record.pid,
            state_dir: state_dir.to_owned(),
        },
        state_dir: Some(state_dir.to_owned()),
        pointed: false,
    })
}

/// The record of the daemon that holds `state_dir`'s lock, if one does. A daemon that is still
/// writing its record gets a moment to finish.
pub fn live_record(state_dir: &Path) -> Option<Record> {
    let path = state_dir.join(LOCK_FILE);
    let file = File::open(&path).ok()?;
    if !held(&file) {
        return None;
    }
    let deadline = std::time::Instant::now() + RECORD_PATIENCE;
    loop {
        if let Some(record) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| Record::parse(&t))
        {
            return Some(record);
        }
        if std::time::Instant::now() >= deadline || !held(&file) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether someone holds the exclusive lock on `file`. The probe takes a shared lock for an
/// instant when nobody does; a daemon starting at that very instant retries its own lock for a
/// moment, so the probe never keeps it from starting.
fn held(file: &File) -> bool {
    use rustix::fs::{FlockOperation, flock};
    match flock(file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => {
            let _ = flock(file, FlockOperation::Unlock);
            false
        }
        Err(rustix::io::Errno::WOULDBLOCK) => true,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with_state(state: &Path) -> Environment {
        Environment {
            rootsd_state_dir: Some(state.as_os_str().to_owned()),
            uid: u32::MAX - 1,
            ..Environment::default()
        }
    }

    #[test]
    fn a_held_lock_with_a_record_wins_over_the_computed_path() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let env = env_with_state(&state);
        let computed = locate(&env, None, &UserConfig::default());
        assert_eq!(computed.source, Source::Computed);
        assert_eq!(computed.socket, state.join("rootsd.sock"));

        let lock = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(state.join(LOCK_FILE))
            .unwrap();
        let record = Record {
            pid: 7,
            socket: Some(PathBuf::from("/elsewhere/rootsd.sock")),
        };
        std::fs::write(state.join(LOCK_FILE), record.to_line()).unwrap();
        assert_eq!(
            locate(&env, None, &UserConfig::default()).source,
            Source::Computed,
            "a record whose lock nobody holds is stale"
        );
        lock.try_lock().unwrap();
        let found = locate(&env, None, &UserConfig::default());
        assert_eq!(found.socket, PathBuf::from("/elsewhere/rootsd.sock"));
        assert!(matches!(found.source, Source::Recorded { pid: 7, .. }));
        assert_eq!(
            locate(
                &env,
                Some(PathBuf::from("/given.sock")),
                &UserConfig::default()
            )
            .source,
            Source::Explicit
        );
    }

    /// A lock file in `state` held with a record of `socket`, for as long as it is kept.
    fn running_at(state: &Path, socket: &str) -> File {
        std::fs::create_dir_all(state).unwrap();
        let lock = File::create(state.join(LOCK_FILE)).unwrap();
        let record = Record {
            pid: 9,
            socket: Some(PathBuf::from(socket)),
        };
        std::fs::write(state.join(LOCK_FILE), record.to_line()).unwrap();
        lock.try_lock().unwrap();
        lock
    }

    #[test]
    fn the_configuration_file_names_the_socket_unless_one_is_given_explicitly() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_with_state(dir.path());
        let _lock = running_at(dir.path(), "/recorded.sock");
        let config = UserConfig {
            file: Some(PathBuf::from("/h/.config/rootsd/rootsd.conf")),
            socket: Some(PathBuf::from("/shared.sock")),
            autostart: None,
        };
        let found = locate(&env, None, &config);
        assert_eq!(found.socket, PathBuf::from("/shared.sock"));
        assert!(matches!(found.source, Source::Configured { .. }));
        assert!(
            found
                .source
                .describe()
                .contains("/h/.config/rootsd/rootsd.conf")
        );
        assert_eq!(
            locate(&env, Some(PathBuf::from("/given.sock")), &config).source,
            Source::Explicit
        );
        assert_eq!(
            locate(&env, None, &UserConfig::default()).socket,
            PathBuf::from("/recorded.sock")
        );
    }

    #[test]
    fn home_alone_follows_the_pointer_to_the_running_daemon_and_to_its_store() {
        let dir = tempfile::tempdir().unwrap();
        let env = Environment {
            home: Some(dir.path().join("home").into()),
            // A runtime directory keeps this test off the real /run/user socket.
            xdg_runtime_dir: Some(dir.path().join("run").into()),
            uid: u32::MAX - 1,
            ..Environment::default()
        };
        let home_dir = paths::home_state_dir(&env).unwrap();
        let xdg = dir.path().join("xdg/rootsd");
        std::fs::create_dir_all(&home_dir).unwrap();
        let pointer = Pointer {
            state_dir: xdg.clone(),
        };
        std::fs::write(home_dir.join(POINTER_FILE), pointer.to_line()).unwrap();
        let none = UserConfig::default();

        let away = locate(&env, None, &none);
        assert_eq!(
            away.state_dir,
            Some(home_dir.clone()),
            "a pointer to nothing is ignored"
        );
        assert!(!away.pointed);

        std::fs::create_dir_all(&xdg).unwrap();
        let stopped = locate(&env, None, &none);
        assert_eq!(stopped.source, Source::Computed);
        assert_eq!(stopped.state_dir, Some(xdg.clone()));
        assert!(
            stopped.pointed,
            "an autostarted daemon must be told where its store is"
        );

        let _lock = running_at(&xdg, "/xdg.sock");
        let running = locate(&env, None, &none);
        assert_eq!(running.socket, PathBuf::from("/xdg.sock"));
        assert!(matches!(running.source, Source::Recorded { .. }));

        let _home_lock = running_at(&home_dir, "/home.sock");
        assert_eq!(
            locate(&env, None, &none).socket,
            PathBuf::from("/home.sock"),
            "a daemon where HOME leads comes first"
        );
    }
}
