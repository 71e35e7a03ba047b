//! What a newcomer meets first: hints that can be copied as they are, errors that say what to do,
//! and a README reference that agrees with `--help`.

use rootsd_tests::Sandbox;

use crate::support::{assert_exit, ctl, stdout_of};

#[test]
fn the_hint_for_an_empty_workspace_names_it_unless_it_is_the_default() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();

    let scratch = ctl(&sb, &["list", "-w", "scratch"]);
    assert_exit(&scratch, 0, "list of an empty workspace");
    assert_eq!(
        stdout_of(&scratch),
        "no roots in workspace scratch (add one with `rootsctl add -w scratch PATH`)\n"
    );

    let default = ctl(&sb, &["list"]);
    assert_exit(&default, 0, "list of the empty default workspace");
    assert_eq!(
        stdout_of(&default),
        "no roots in workspace default (add one with `rootsctl add PATH`)\n"
    );
}
