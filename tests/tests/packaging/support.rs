//! Helpers shared by the packaging tests: finding the tools (failing with what to install),
//! running the repository's scripts with a generous deadline, locks that keep concurrent
//! package builds and dpkg runs apart, snapshots of directory trees, and a user's environment
//! (a private HOME and runtime directory) for running installed binaries the way a user would.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use rootsd_tests::{Daemon, PATIENCE, bin};
pub use rootsd_tests::{run_within, stderr_of, stdout_of};
use rustix::process::Signal;

/// Building a package or running dpkg can take minutes on a loaded 2-core machine.
const SLOW: Duration = Duration::from_secs(600);

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .to_owned()
}

/// The directory holding the built binaries (`target/debug` when the tests are a debug build).
pub fn built_dir() -> PathBuf {
    bin("rootsd")
        .parent()
        .expect("a binary lives in a directory")
        .to_owned()
}

/// The Cargo profile the binaries were built with, for the scripts' `--profile`.
pub fn profile() -> String {
    let dir = built_dir();
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_owned(),
        Some(name) => name.to_owned(),
        None => panic!("cannot tell the profile of {}", dir.display()),
    }
}

/// The path of a tool on PATH; fails the test, saying how to install it, if it is missing.
pub fn tool(name: &str, install: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| panic!("{name} is missing: install it with `{install}`"))
}

/// Fails the test, saying how to install it, unless cargo-deb is installed.
pub fn require_cargo_deb() {
    let ok = Command::new("cargo")
        .args(["deb", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "cargo-deb is missing: install it with `cargo install cargo-deb --locked`"
    );
}

/// Runs a slow command (a build, dpkg) and asserts that it succeeded.
#[track_caller]
pub fn run_ok(cmd: &mut Command, what: &str) -> Output {
    let output = run_within(cmd, SLOW);
    assert!(
        output.status.success(),
        "{what} failed with {}\nstdout: {}\nstderr: {}",
        output.status,
        stdout_of(&output),
        stderr_of(&output)
    );
    output
}

/// One of the repository's scripts, with the target directory of these tests' binaries.
pub fn script(name: &str) -> Command {
    let mut cmd = Command::new(repo().join("scripts").join(name));
    let target = built_dir()
        .parent()
        .expect("the profile directory lives in the target directory")
        .to_owned();
    cmd.current_dir(repo()).env("CARGO_TARGET_DIR", target);
    cmd
}

/// An exclusive `flock` on a file, released when dropped.
pub struct Lock {
    _file: fs::File,
}

impl Lock {
    pub fn take(path: &Path) -> Self {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).expect("create the lock's directory");
        }
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap_or_else(|e| panic!("open the lock {}: {e}", path.display()));
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
        Self { _file: file }
    }
}

/// scripts/deb writes the generated pages into dist/generated/ of this checkout: one build at
/// a time.
pub fn build_lock() -> Lock {
    Lock::take(&repo().join("dist/generated/.lock"))
}

/// Installing and removing the package changes the whole machine: one test at a time, from any
/// checkout on it.
pub fn dpkg_lock() -> Lock {
    Lock::take(&std::env::temp_dir().join("rootsd-tests-dpkg.lock"))
}

/// Builds the package from the tests' own binaries (no second, release build: the package's
/// contents are the subject here, not the optimiser's output) into `out`, and returns its path.
pub fn build_deb(out: &Path, revision: u32) -> PathBuf {
    require_cargo_deb();
    tool("dpkg-deb", "apt-get install dpkg");
    tool("dpkg-shlibdeps", "apt-get install dpkg-dev");
    let _lock = build_lock();
    let output = run_ok(
        script("deb")
            .args(["--profile", &profile(), "--no-build", "--"])
            .arg("--output")
            .arg(out)
            .args(["--deb-revision", &revision.to_string(), "--fast"]),
        "scripts/deb",
    );
    let printed = stdout_of(&output);
    let deb = PathBuf::from(printed.lines().last().unwrap_or_default().trim());
    assert!(
        deb.is_file() && deb.starts_with(out),
        "scripts/deb did not print the package it wrote in {}: {printed}",
        out.display()
    );
    deb
}

/// The commands `rootsctl --help` lists, without `help`, then each nested one its own `--help`
/// lists as `COMMAND-NESTED` (`hosts-wrap`): each has a man page, `rootsctl-NAME.1`.
pub fn subcommands() -> Vec<String> {
    fn listed(args: &[&str]) -> Vec<String> {
        let output = run_ok(
            Command::new(bin("rootsctl")).args(args).arg("--help"),
            &format!("rootsctl {} --help", args.join(" ")),
        );
        stdout_of(&output)
            .lines()
            .skip_while(|l| l.trim_end() != "Commands:")
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.split_whitespace().next())
            .filter(|name| *name != "help")
            .map(str::to_owned)
            .collect()
    }
    let top = listed(&[]);
    assert!(top.len() > 5, "no subcommands found in rootsctl --help");
    let mut all = Vec::new();
    for sub in top {
        let nested = listed(&[&sub]);
        all.push(sub.clone());
        all.extend(nested.into_iter().map(|n| format!("{sub}-{n}")));
    }
    all
}

/// What a path in a tree is, for comparing trees before and after.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File { mode: u32, contents: Vec<u8> },
    Link(PathBuf),
}

/// Every path under `root` (relative), with what it is.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Entry> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<PathBuf, Entry>) {
        let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let relative = path.strip_prefix(root).unwrap().to_owned();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                into.insert(relative, Entry::Dir);
                walk(root, &path, into);
            } else if meta.file_type().is_symlink() {
                into.insert(relative, Entry::Link(fs::read_link(&path).unwrap()));
            } else {
                let contents = fs::read(&path).unwrap_or_default();
                let mode = meta.permissions().mode() & 0o7777;
                into.insert(relative, Entry::File { mode, contents });
            }
        }
    }
    let mut tree = BTreeMap::new();
    walk(root, root, &mut tree);
    tree
}

/// The regular files under `root`, relative and sorted.
pub fn files_under(root: &Path) -> Vec<String> {
    snapshot(root)
        .into_iter()
        .filter(|(_, entry)| !matches!(entry, Entry::Dir))
        .map(|(path, _)| path.display().to_string())
        .collect()
}

/// Asserts that two snapshots are equal, naming the paths that differ.
#[track_caller]
pub fn assert_same_tree(
    before: &BTreeMap<PathBuf, Entry>,
    after: &BTreeMap<PathBuf, Entry>,
    what: &str,
) {
    let differ: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .map(|path| {
            let state = |e: Option<&Entry>| match e {
                None => "absent",
                Some(Entry::Dir) => "a directory",
                Some(Entry::File { .. }) => "a file",
                Some(Entry::Link(_)) => "a symlink",
            };
            format!(
                "{}: {} before, {} after",
                path.display(),
                state(before.get(path)),
                state(after.get(path))
            )
        })
        .collect();
    assert!(differ.is_empty(), "{what} changed:\n{}", differ.join("\n"));
}

/// A user of the machine: a private HOME and runtime directory, with rootsd's paths left to
/// their defaults, as they are for someone who just installed it.
pub struct User {
    pub home: PathBuf,
    pub runtime: PathBuf,
}

impl User {
    /// A user whose home and runtime directory live under `dir` (keep it short: the socket path
    /// must fit in a socket address).
    pub fn new(dir: &Path) -> Self {
        let home = dir.join("home");
        let runtime = dir.join("run");
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(&runtime).unwrap();
        fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700)).unwrap();
        Self { home, runtime }
    }

    /// Where the roots are kept by default: `~/.local/state/rootsd`.
    pub fn state_dir(&self) -> PathBuf {
        self.home.join(".local/state/rootsd")
    }

    pub fn socket(&self) -> PathBuf {
        self.runtime.join("rootsd/rootsd.sock")
    }

    /// `cmd` with this user's environment and none of the variables that would move rootsd's
    /// socket or state away from their defaults.
    pub fn env<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("HOME", &self.home)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("RUST_LOG", "info");
        for var in [
            "XDG_STATE_HOME",
            "XDG_DATA_HOME",
            "XDG_CONFIG_HOME",
            "ROOTSD_SOCKET",
            "ROOTSD_STATE_DIR",
            "ROOTSD_BIN",
            "STATE_DIRECTORY",
            "NOTIFY_SOCKET",
            "LISTEN_FDS",
            "LISTEN_PID",
            "BASH_COMPLETION_USER_DIR",
        ] {
            cmd.env_remove(var);
        }
        cmd
    }

    /// Starts `bin_dir/rootsd` with default paths and waits until it answers.
    pub fn start(&self, bin_dir: &Path) -> Daemon {
        let mut cmd = Command::new(bin_dir.join("rootsd"));
        self.env(&mut cmd);
        rootsd_tests::start_daemon_at(cmd, &self.socket())
    }

    /// Stops a daemon the way systemd would, and waits for it.
    pub fn stop(mut daemon: Daemon) {
        daemon.signal(Signal::TERM);
        let status = daemon.wait();
        assert!(
            status.success(),
            "rootsd exited with {status}: {}",
            daemon.stderr()
        );
    }

    /// `bin_dir/rootsctl ARGS` against this user's rootsd; never starts one.
    #[track_caller]
    pub fn ctl_ok(&self, bin_dir: &Path, args: &[&str]) -> String {
        let output = run_within(
            self.env(&mut Command::new(bin_dir.join("rootsctl")))
                .env("ROOTSD_NO_AUTOSTART", "1")
                .args(args),
            PATIENCE,
        );
        assert!(
            output.status.success(),
            "rootsctl {args:?} failed with {}: {}",
            output.status,
            stderr_of(&output)
        );
        stdout_of(&output)
    }

    /// The URIs of the default workspace's roots, as `bin_dir/rootsctl` lists them.
    pub fn roots(&self, bin_dir: &Path) -> Vec<String> {
        let listed: serde_json::Value =
            serde_json::from_str(&self.ctl_ok(bin_dir, &["list", "--json"]))
                .expect("list --json prints JSON");
        listed["roots"]
            .as_array()
            .expect("a roots array")
            .iter()
            .map(|root| root["uri"].as_str().expect("a uri").to_owned())
            .collect()
    }

    /// The roots as a freshly started `bin_dir/rootsd` serves them; it is stopped again.
    pub fn roots_from_a_fresh_daemon(&self, bin_dir: &Path) -> Vec<String> {
        let daemon = self.start(bin_dir);
        let roots = self.roots(bin_dir);
        Self::stop(daemon);
        roots
    }
}
