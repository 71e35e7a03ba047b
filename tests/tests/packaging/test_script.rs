//! `scripts/test`, the README's test command, run as a user who cannot pass it: it must say so
//! at once, naming what needs root, instead of failing a dozen tests after minutes of building.

use std::process::Command;

use rootsd_tests::{output_within, setpriv};

use crate::support::repo;

#[test]
fn scripts_test_run_as_another_user_than_root_stops_first_and_says_why() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test plays a user who is not root, which only root can do: run the suite as root (sudo scripts/test)"
    );
    // nobody: an account every Debian system has, with no rights to speak of.
    let mut cmd = Command::new(setpriv());
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg("bash")
        .arg(repo().join("scripts/test"))
        .env("HOME", "/nonexistent");
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
