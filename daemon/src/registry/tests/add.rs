//! The rules of `add`: naming, renaming, canonical form, refusals, atomicity.

use super::check;

#[test]
fn a_new_root_is_named_after_its_directory_and_the_filesystem_root_is_named_slash() {
    check(
        r#"
        add default file:///work/app
        add default file:///
        add default file:///work/a%20b
        "#,
        r#"
        add default file:///work/app
          added file:///work/app "app"
          total 1, revision 1
        add default file:///
          added file:/// "/"
          total 2, revision 2
        add default file:///work/a%20b
          added file:///work/a%20b "a b"
          total 3, revision 3
        --
        store revision 3, 3 roots in 1 workspaces
        default @3
          file:///work/app "app"
          file:/// "/"
          file:///work/a%20b "a b"
        "#,
    );
}

#[test]
fn adding_an_existing_root_changes_nothing_and_takes_no_revision() {
    check(
        r#"
        add default file:///a
        add default file:///a
        "#,
        r#"
        add default file:///a
          added file:///a "a"
          total 1, revision 1
        add default file:///a
          unchanged file:///a "a"
          total 1, revision 1
        --
        store revision 1, 1 roots in 1 workspaces
        default @1
          file:///a "a"
        "#,
    );
}

#[test]
fn a_name_renames_an_existing_root_and_adding_it_again_without_a_name_keeps_the_name() {
    check(
        r#"
        add default file:///a
        add default file:///a "alpha"
        add default file:///a
        add default file:///a "alpha"
        "#,
        r#"
        add default file:///a
          added file:///a "a"
          total 1, revision 1
        add default file:///a "alpha"
          renamed file:///a "alpha"
          total 1, revision 2
        add default file:///a
          unchanged file:///a "alpha"
          total 1, revision 2
        add default file:///a "alpha"
          unchanged file:///a "alpha"
          total 1, revision 2
        --
        store revision 2, 1 roots in 1 workspaces
        default @2
          file:///a "alpha"
        "#,
    );
}

#[test]
fn a_new_root_keeps_the_name_it_is_given() {
    check(
        r#"
        add default file:///work/app "the app"
        "#,
        r#"
        add default file:///work/app "the app"
          added file:///work/app "the app"
          total 1, revision 1
        --
        store revision 1, 1 roots in 1 workspaces
        default @1
          file:///work/app "the app"
        "#,
    );
}

#[test]
fn an_empty_name_counts_as_no_name() {
    check(
        r#"
        add default file:///a ""
        add default file:///a "alpha"
        add default file:///a ""
        "#,
        r#"
        add default file:///a ""
          added file:///a "a"
          total 1, revision 1
        add default file:///a "alpha"
          renamed file:///a "alpha"
          total 1, revision 2
        add default file:///a ""
          unchanged file:///a "alpha"
          total 1, revision 2
        --
        store revision 2, 1 roots in 1 workspaces
        default @2
          file:///a "alpha"
        "#,
    );
}

#[test]
fn several_roots_in_one_call_are_one_change_at_one_revision() {
    check(
        r#"
        add default file:///a
        add default file:///a "alpha", file:///b, file:///c "sea"
        "#,
        r#"
        add default file:///a
          added file:///a "a"
          total 1, revision 1
        add default file:///a "alpha", file:///b, file:///c "sea"
          added file:///b "b"
          added file:///c "sea"
          renamed file:///a "alpha"
          total 3, revision 2
        --
        store revision 2, 3 roots in 1 workspaces
        default @2
          file:///a "alpha"
          file:///b "b"
          file:///c "sea"
        "#,
    );
}

#[test]
fn one_bad_root_refuses_the_whole_call() {
    check(
        r#"
        add default file:///a
        add default file:///b, https://example.com/c, file:///d
        "#,
        r#"
        add default file:///a
          added file:///a "a"
          total 1, revision 1
        add default file:///b, https://example.com/c, file:///d
          error INVALID_ROOT: "https://example.com/c" is not a file:// URI
        --
        store revision 1, 1 roots in 1 workspaces
        default @1
          file:///a "a"
        "#,
    );
}

#[test]
fn other_schemes_remote_hosts_queries_fragments_and_bare_paths_are_refused() {
    check(
        r#"
        add default https://example.com/x
        add default vscode-remote://ssh-remote+box/home
        add default file://server/share
        add default file:///a?version=2
        add default file:///a#top
        add default /home/a
        "#,
        r#"
        add default https://example.com/x
          error INVALID_ROOT: "https://example.com/x" is not a file:// URI
        add default vscode-remote://ssh-remote+box/home
          error INVALID_ROOT: "vscode-remote://ssh-remote+box/home" is not a file:// URI
        add default file://server/share
          error INVALID_ROOT: "file://server/share" names a file on host "server"
        add default file:///a?version=2
          error INVALID_ROOT: "file:///a?version=2" is not a valid URI
        add default file:///a#top
          error INVALID_ROOT: "file:///a#top" is not a valid URI
        add default /home/a
          error INVALID_ROOT: "/home/a" is not a valid URI
        --
        store revision 0, 0 roots in 0 workspaces
        "#,
    );
}

#[test]
fn spellings_of_one_directory_are_one_root_stored_in_canonical_form() {
    check(
        r#"
        add default file:///work/app/
        add default file://localhost/work/app
        add default FILE:///work/app
        add default File://LOCALHOST/work/./lib/../app//
        add default file:///work/%61pp
        add default file:///work/my app
        add default file:///work/my%20app
        add default file:///work/ünï
        add default file:///work/%C3%BCn%C3%AF
        "#,
        r#"
        add default file:///work/app/
          added file:///work/app "app"
          total 1, revision 1
        add default file://localhost/work/app
          unchanged file:///work/app "app"
          total 1, revision 1
        add default FILE:///work/app
          unchanged file:///work/app "app"
          total 1, revision 1
        add default File://LOCALHOST/work/./lib/../app//
          unchanged file:///work/app "app"
          total 1, revision 1
        add default file:///work/%61pp
          unchanged file:///work/app "app"
          total 1, revision 1
        add default file:///work/my app
          added file:///work/my%20app "my app"
          total 2, revision 2
        add default file:///work/my%20app
          unchanged file:///work/my%20app "my app"
          total 2, revision 2
        add default file:///work/ünï
          added file:///work/%C3%BCn%C3%AF "ünï"
          total 3, revision 3
        add default file:///work/%C3%BCn%C3%AF
          unchanged file:///work/%C3%BCn%C3%AF "ünï"
          total 3, revision 3
        --
        store revision 3, 3 roots in 1 workspaces
        default @3
          file:///work/app "app"
          file:///work/my%20app "my app"
          file:///work/%C3%BCn%C3%AF "ünï"
        "#,
    );
}

#[test]
fn encoded_special_characters_stay_part_of_the_name() {
    check(
        r#"
        add default file:///work/a%23b%3Fc%25d
        "#,
        r#"
        add default file:///work/a%23b%3Fc%25d
          added file:///work/a%23b%3Fc%25d "a#b?c%d"
          total 1, revision 1
        --
        store revision 1, 1 roots in 1 workspaces
        default @1
          file:///work/a%23b%3Fc%25d "a#b?c%d"
        "#,
    );
}

// A root given twice in one add is one change: listed once, as added, under the name it was
// stored with (the last one given), as `remove` lists a root named twice once.
#[test]
fn the_same_root_twice_in_one_add_is_one_root_reported_once() {
    check(
        r#"
        add default file:///a, file:///a/
        add default file:///b "first", file://localhost/b "second"
        "#,
        r#"
        add default file:///a, file:///a/
          added file:///a "a"
          total 1, revision 1
        add default file:///b "first", file://localhost/b "second"
          added file:///b "second"
          total 2, revision 2
        --
        store revision 2, 2 roots in 1 workspaces
        default @2
          file:///a "a"
          file:///b "second"
        "#,
    );
}

#[test]
fn an_empty_add_changes_nothing_and_creates_no_workspace() {
    check(
        r#"
        add fresh
        "#,
        r#"
        add fresh
          total 0, revision 0
        --
        store revision 0, 0 roots in 0 workspaces
        "#,
    );
}
