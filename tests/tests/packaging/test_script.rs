//! `scripts/test`, the README's test command, run as a user who cannot pass it: it must say so
//! at once, naming what needs root, instead of failing a dozen tests after minutes of building.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;

use rootsd_tests::{Sandbox, output_within, setpriv};

use crate::support::repo;

#[test]
fn scripts_test_run_as_another_user_than_root_stops_first_and_says_why() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test plays a user who is not root, which only root can do: run the suite as root (sudo scripts/test)"
    );
    // A copy nobody can read wherever the checkout is (CI's may be under /root); the refusal
    // must come before the script looks at anything beside itself.
    let sb = Sandbox::new();
    let scripts = sb.mkdir("scripts");
    std::fs::copy(repo().join("scripts/test"), scripts.join("test")).expect("copy scripts/test");
    for dir in [sb.path(), scripts.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
            .expect("open the copy to nobody");
    }
    // nobody: an account every Debian system has, with no rights to speak of.
    let mut cmd = Command::new(setpriv());
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg("bash")
        .arg(scripts.join("test"))
        .env("HOME", "/nonexistent")
        .current_dir("/");
    let output = output_within(&mut cmd);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("run it as root (sudo scripts/test)")
            && said.contains("useradd")
            && said.contains("dpkg"),
        "{said}"
    );
    assert!(
        output.stdout.is_empty(),
        "nothing ran before the refusal: {}",
        String::from_utf8_lossy(&output.stdout)
    );
}

/// `scripts/install-test-deps`, which `scripts/test` runs first, on a machine where the Debian
/// packages are missing and there is no apt-get to install them: it must name them and stop,
/// rather than leave a later step to fail on the first of them.
#[test]
fn install_test_deps_names_the_packages_it_cannot_install_without_apt_get() {
    let sb = Sandbox::new();
    // A PATH with bash, dirname and cargo, and none of the suite's other tools.
    let bin = sb.mkdir("bin");
    for tool in ["bash", "dirname", "cargo"] {
        let found = Command::new("bash")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .expect("run bash");
        let path = String::from_utf8_lossy(&found.stdout).trim().to_owned();
        assert!(!path.is_empty(), "{tool} is missing: install it");
        std::os::unix::fs::symlink(&path, bin.join(tool)).expect("link a tool into the PATH");
    }
    let mut cmd = Command::new(bin.join("bash"));
    cmd.arg(repo().join("scripts/install-test-deps"))
        .env("PATH", &bin)
        .current_dir("/");
    let output = output_within(&mut cmd);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("there is no apt-get")
            && ["systemd", "zsh", "fish", "strace", "nodejs", "python3"]
                .iter()
                .all(|package| said.contains(package)),
        "{said}"
    );
}
