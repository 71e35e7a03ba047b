//! Real users and groups, for tests that need someone else on the other end of a socket: an
//! attacker who created a socket first, a member of the shared service's group, a stranger.
//!
//! Creating accounts and running commands as them takes root, which CI has; elsewhere these tests
//! fail saying so rather than pretend to pass. Accounts are created once per machine, under a lock
//! (several test processes may ask at once, and `useradd` refuses while another holds
//! `/etc/passwd`), and are left in place: they own nothing, cannot log in, and are named
//! `rootsd-test-*`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Sandbox, bin, output_within};

/// A user that exists on this machine.
#[derive(Clone, Debug)]
pub struct Account {
    pub name: String,
    pub uid: u32,
    /// Its primary group, named after it.
    pub gid: u32,
}

/// Fails the test unless it runs as root.
#[track_caller]
pub fn require_root(what: &str) {
    assert!(
        rustix::process::geteuid().is_root(),
        "{what} needs root (it creates users and groups and runs commands as them): run the suite as root, as CI does"
    );
}

/// Holds the machine-wide lock under which accounts are created.
fn lock() -> std::fs::File {
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/rootsd-test-accounts.lock")
        .expect("open the accounts lock");
    file.lock().expect("take the accounts lock");
    file
}

/// Runs an account-management command, failing the test with its output if it fails.
#[track_caller]
fn admin(program: &str, args: &[&str]) {
    let output = output_within(Command::new(program).args(args));
    assert!(
        output.status.success(),
        "{program} {args:?} failed with {}: {} (install the passwd package for useradd and groupadd)",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

fn exists(database: &str, name: &str) -> bool {
    output_within(Command::new("getent").args([database, name]))
        .status
        .success()
}

fn id(flag: &str, name: &str) -> u32 {
    let output = output_within(Command::new("id").args([flag, name]));
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("`id {flag} {name}` printed no number: {output:?}"))
}

/// The group `name`, created if missing; returns its gid.
#[track_caller]
pub fn group(name: &str) -> u32 {
    require_root("creating a group");
    let _lock = lock();
    if !exists("group", name) {
        admin("groupadd", &["--system", name]);
    }
    let output = output_within(Command::new("getent").args(["group", name]));
    String::from_utf8_lossy(&output.stdout)
        .split(':')
        .nth(2)
        .and_then(|gid| gid.trim().parse().ok())
        .unwrap_or_else(|| panic!("getent group {name} printed no gid: {output:?}"))
}

/// The user `name` (with a primary group of the same name), created if missing, and a member of
/// exactly `groups` besides: memberships from earlier runs that are not listed are dropped.
#[track_caller]
pub fn account(name: &str, groups: &[&str]) -> Account {
    require_root("creating a user");
    for group_name in groups {
        group(group_name);
    }
    let _lock = lock();
    if !exists("passwd", name) {
        admin(
            "useradd",
            &[
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                name,
            ],
        );
    }
    admin("usermod", &["--groups", &groups.join(","), name]);
    Account {
        name: name.to_owned(),
        uid: id("-u", name),
        gid: id("-g", name),
    }
}

impl Account {
    /// `program` run as this user, with its groups from the group database and an empty
    /// environment but for `PATH`.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(setpriv());
        cmd.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .arg("--init-groups")
            .arg(program)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin");
        cmd
    }
}

/// util-linux's setpriv, which runs a command as another user with chosen groups.
pub fn setpriv() -> PathBuf {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("setpriv is missing: install it with `apt-get install util-linux`")
}

/// Makes the sandbox enterable by other users (mode 0711: they may reach what they are told
/// about, not list it) and copies the binary `name` into it, for them to run: the build's own
/// may sit under a directory only its owner can enter.
pub fn share_binary(sandbox: &Sandbox, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::Permissions::from_mode;
    std::fs::set_permissions(sandbox.path(), mode(0o711)).expect("open the sandbox");
    let dir = sandbox.path().join("bin");
    std::fs::create_dir_all(&dir).expect("create the sandbox's bin");
    std::fs::set_permissions(&dir, mode(0o755)).expect("open the sandbox's bin");
    let copy = dir.join(name);
    if !copy.exists() {
        std::fs::copy(bin(name), &copy).expect("copy a binary into the sandbox");
        std::fs::set_permissions(&copy, mode(0o755)).expect("make the copy executable");
    }
    copy
}

/// Creates `dir` owned by `account` with `mode`, as if they had made it themselves.
pub fn dir_of(account: &Account, dir: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).expect("create the directory");
    std::os::unix::fs::chown(dir, Some(account.uid), Some(account.gid)).expect("chown it");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).expect("chmod it");
}
