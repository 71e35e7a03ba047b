//! The soak command (`rootsd-soak`, docs/RELIABILITY.md) works: a few seconds of it, with fewer
//! sessions, pass every check it makes. Timing is not judged here; the full run is.

use std::process::Command;

use rootsd_tests::{bin, output_within};

use crate::support::{assert_exit, stdout_of};

#[test]
fn a_short_soak_passes_every_check() {
    let output = output_within(Command::new(bin("rootsd-soak")).args([
        "--seconds",
        "3",
        "--sessions",
        "50",
        "--rate",
        "10",
        "--proxies",
        "2",
        "--warm-up",
        "10",
    ]));
    assert_exit(&output, 0, "rootsd-soak");
    let summary = stdout_of(&output);
    assert!(summary.contains("50 of 50 converged"), "{summary}");
    assert!(
        summary.contains("came and went cleanly"),
        "proxies came and went: {summary}"
    );
    assert!(
        summary.ends_with("result:         every check held\n"),
        "{summary}"
    );
}

#[test]
fn the_soak_refuses_an_unknown_option() {
    let output = output_within(Command::new(bin("rootsd-soak")).args(["--hours", "3"]));
    assert_exit(&output, 2, "rootsd-soak --hours");
}
