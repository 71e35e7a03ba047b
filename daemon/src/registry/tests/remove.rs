//! The rules of `remove`, and revisions and workspaces across changes and restarts.

use super::check;

#[test]
fn remove_by_uri_in_any_spelling_by_name_or_by_both() {
    check(
        r#"
        add default file:///a, file:///b, file:///c "sea", file:///w/app
        remove default file://localhost/a/
        remove default "b"
        remove default file:///c "sea"
        remove default file:///w/app "app"
        "#,
        r#"
        add default file:///a, file:///b, file:///c "sea", file:///w/app
          added file:///a "a"
          added file:///b "b"
          added file:///c "sea"
          added file:///w/app "app"
          total 4, revision 1
        remove default file://localhost/a/
          removed file:///a "a"
          total 3, revision 2
        remove default "b"
          removed file:///b "b"
          total 2, revision 3
        remove default file:///c "sea"
          removed file:///c "sea"
          total 1, revision 4
        remove default file:///w/app "app"
          removed file:///w/app "app"
          total 0, revision 5
        --
        store revision 5, 0 roots in 1 workspaces
        default @5
        "#,
    );
}

/// `rootsctl remove app`, run in /elsewhere, sends the URI of /elsewhere/app and the name "app":
/// the root named "app" is removed even though it lives in /w.
#[test]
fn a_target_whose_uri_matches_nothing_falls_back_to_its_name() {
    check(
        r#"
        add default file:///w/app
        remove default file:///elsewhere/app "app"
        "#,
        r#"
        add default file:///w/app
          added file:///w/app "app"
          total 1, revision 1
        remove default file:///elsewhere/app "app"
          removed file:///w/app "app"
          total 0, revision 2
        --
        store revision 2, 0 roots in 1 workspaces
        default @2
        "#,
    );
}

#[test]
fn a_uri_match_wins_over_a_name_match() {
    check(
        r#"
        add default file:///a "b", file:///b "a"
        remove default file:///a "a"
        "#,
        r#"
        add default file:///a "b", file:///b "a"
          added file:///a "b"
          added file:///b "a"
          total 2, revision 1
        remove default file:///a "a"
          removed file:///a "b"
          total 1, revision 2
        --
        store revision 2, 1 roots in 1 workspaces
        default @2
          file:///b "a"
        "#,
    );
}

#[test]
fn one_root_named_twice_in_a_remove_is_removed_once() {
    check(
        r#"
        add default file:///a, file:///b
        remove default file:///a, "a", file:///a/ "a"
        "#,
        r#"
        add default file:///a, file:///b
          added file:///a "a"
          added file:///b "b"
          total 2, revision 1
        remove default file:///a, "a", file:///a/ "a"
          removed file:///a "a"
          total 1, revision 2
        --
        store revision 2, 1 roots in 1 workspaces
        default @2
          file:///b "b"
        "#,
    );
}

#[test]
fn several_targets_are_removed_as_one_change() {
    check(
        r#"
        add default file:///a, file:///b, file:///c
        remove default "c", file:///a
        "#,
        r#"
        add default file:///a, file:///b, file:///c
          added file:///a "a"
          added file:///b "b"
          added file:///c "c"
          total 3, revision 1
        remove default "c", file:///a
          removed file:///c "c"
          removed file:///a "a"
          total 1, revision 2
        --
        store revision 2, 1 roots in 1 workspaces
        default @2
          file:///b "b"
        "#,
    );
}

#[test]
fn an_unknown_target_removes_nothing_even_when_the_others_exist() {
    check(
        r#"
        add default file:///a, file:///b
        remove default "a", "nope", file:///b
        remove default file:///nope
        remove default file:///nope "nope"
        remove elsewhere "a"
        "#,
        r#"
        add default file:///a, file:///b
          added file:///a "a"
          added file:///b "b"
          total 2, revision 1
        remove default "a", "nope", file:///b
          error NOT_FOUND: "nope" is not a root of workspace default
        remove default file:///nope
          error NOT_FOUND: "file:///nope" is not a root of workspace default
        remove default file:///nope "nope"
          error NOT_FOUND: "nope" is not a root of workspace default
        remove elsewhere "a"
          error NOT_FOUND: "a" is not a root of workspace elsewhere
        --
        store revision 1, 2 roots in 1 workspaces
        default @1
          file:///a "a"
          file:///b "b"
        "#,
    );
}

#[test]
fn a_name_shared_by_several_roots_is_refused_but_their_uris_still_remove_them() {
    check(
        r#"
        add default file:///one/app, file:///two/app, file:///other
        remove default file:///other, "app"
        remove default file:///two/app
        remove default "app"
        "#,
        r#"
        add default file:///one/app, file:///two/app, file:///other
          added file:///one/app "app"
          added file:///two/app "app"
          added file:///other "other"
          total 3, revision 1
        remove default file:///other, "app"
          error AMBIGUOUS: "app" is the name of 2 roots in workspace default (file:///one/app, file:///two/app)
        remove default file:///two/app
          removed file:///two/app "app"
          total 2, revision 2
        remove default "app"
          removed file:///one/app "app"
          total 1, revision 3
        --
        store revision 3, 1 roots in 1 workspaces
        default @3
          file:///other "other"
        "#,
    );
}

#[test]
fn an_empty_remove_changes_nothing() {
    check(
        r#"
        add default file:///a
        remove default
        "#,
        r#"
        add default file:///a
          added file:///a "a"
          total 1, revision 1
        remove default
          total 1, revision 1
        --
        store revision 1, 1 roots in 1 workspaces
        default @1
          file:///a "a"
        "#,
    );
}

#[test]
fn each_workspace_keeps_the_revision_of_its_last_change_and_the_store_counts_them_all() {
    check(
        r#"
        add default file:///a
        add work file:///b
        add default file:///c
        add work file:///b
        add default file:///a
        remove work file:///b
        "#,
        r#"
        add default file:///a
          added file:///a "a"
          total 1, revision 1
        add work file:///b
          added file:///b "b"
          total 1, revision 2
        add default file:///c
          added file:///c "c"
          total 2, revision 3
        add work file:///b
          unchanged file:///b "b"
          total 1, revision 2
        add default file:///a
          unchanged file:///a "a"
          total 2, revision 3
        remove work file:///b
          removed file:///b "b"
          total 0, revision 4
        --
        store revision 4, 2 roots in 2 workspaces
        default @3
          file:///a "a"
          file:///c "c"
        work @4
        "#,
    );
}

#[test]
fn workspaces_are_independent() {
    check(
        r#"
        add default file:///a
        add work file:///a "work-a"
        remove default "work-a"
        remove work "a"
        remove work "work-a"
        "#,
        r#"
        add default file:///a
          added file:///a "a"
          total 1, revision 1
        add work file:///a "work-a"
          added file:///a "work-a"
          total 1, revision 2
        remove default "work-a"
          error NOT_FOUND: "work-a" is not a root of workspace default
        remove work "a"
          error NOT_FOUND: "a" is not a root of workspace work
        remove work "work-a"
          removed file:///a "work-a"
          total 0, revision 3
        --
        store revision 3, 1 roots in 2 workspaces
        default @1
          file:///a "a"
        work @3
        "#,
    );
}

#[test]
fn roots_names_and_revisions_survive_reopening_the_store() {
    check(
        r#"
        add default file:///a "alpha", file:///b
        add work file:///c
        remove work file:///c
        reopen
        add default file:///a
        add default file:///d
        reopen
        "#,
        r#"
        add default file:///a "alpha", file:///b
          added file:///a "alpha"
          added file:///b "b"
          total 2, revision 1
        add work file:///c
          added file:///c "c"
          total 1, revision 2
        remove work file:///c
          removed file:///c "c"
          total 0, revision 3
        reopen
          loaded store revision 3, 2 roots in 2 workspaces
        add default file:///a
          unchanged file:///a "alpha"
          total 2, revision 1
        add default file:///d
          added file:///d "d"
          total 3, revision 4
        reopen
          loaded store revision 4, 3 roots in 2 workspaces
        --
        store revision 4, 3 roots in 2 workspaces
        default @4
          file:///a "alpha"
          file:///b "b"
          file:///d "d"
        work @3
        "#,
    );
}
