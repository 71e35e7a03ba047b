//! The history as `log` reads it: one entry per change, newest first, by workspace, across a
//! restart, and none for what changed nothing.

use super::check;

#[test]
fn every_change_is_logged_newest_first_with_what_it_added_renamed_and_removed() {
    check(
        r#"
        add default file:///a, file:///b
        add default file:///a "alpha"
        add work file:///w
        remove default "alpha", file:///b
        log
        log default
        log work
        log nowhere
        "#,
        r#"
        add default file:///a, file:///b
          added file:///a "a"
          added file:///b "b"
          total 2, revision 1
        add default file:///a "alpha"
          renamed file:///a "alpha"
          total 2, revision 2
        add work file:///w
          added file:///w "w"
          total 1, revision 3
        remove default "alpha", file:///b
          removed file:///a "alpha"
          removed file:///b "b"
          total 0, revision 4
        log
          4 default: -file:///a "alpha" -file:///b "b"
          3 work: +file:///w "w"
          2 default: ~file:///a "a" -> "alpha"
          1 default: +file:///a "a" +file:///b "b"
        log default
          4 default: -file:///a "alpha" -file:///b "b"
          2 default: ~file:///a "a" -> "alpha"
          1 default: +file:///a "a" +file:///b "b"
        log work
          3 work: +file:///w "w"
        log nowhere
        --
        store revision 4, 1 roots in 2 workspaces
        default @4
        work @3
          file:///w "w"
        "#,
    );
}

#[test]
fn what_changes_nothing_or_is_refused_is_not_logged_and_the_log_survives_a_restart() {
    check(
        r#"
        add default file:///a
        add default file:///a
        remove default file:///missing
        add default https://example.com/x
        reopen
        log
        add default file:///b
        log
        "#,
        r#"
        add default file:///a
          added file:///a "a"
          total 1, revision 1
        add default file:///a
          unchanged file:///a "a"
          total 1, revision 1
        remove default file:///missing
          error NOT_FOUND: "file:///missing" is not a root of workspace default
        add default https://example.com/x
          error INVALID_ROOT: "https://example.com/x" is not a file:// URI
        reopen
          loaded store revision 1, 1 roots in 1 workspaces
        log
          1 default: +file:///a "a"
        add default file:///b
          added file:///b "b"
          total 2, revision 2
        log
          2 default: +file:///b "b"
          1 default: +file:///a "a"
        --
        store revision 2, 2 roots in 1 workspaces
        default @2
          file:///a "a"
          file:///b "b"
        "#,
    );
}
