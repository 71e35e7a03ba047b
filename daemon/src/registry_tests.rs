//! The registry's roots rules as data: a list of operations in, a transcript out.
//!
//! Each test hands [`check`] a few operations, one per line, and the transcript it expects: every
//! operation with what it did (or the error it was refused with), then the final state of the
//! store. The operations run against a real [`Registry`] on a sled store in a temporary
//! directory, so a change of the rules shows up as a readable difference in the transcript, and a
//! change of the registry's API touches only [`check`].
//!
//! Operations:
//!
//! - `add WORKSPACE ROOT, ROOT, …` where a root is `URI` or `URI "NAME"`;
//! - `remove WORKSPACE TARGET, TARGET, …` where a target is `URI`, `"NAME"` or `URI "NAME"` (both,
//!   as `rootsctl remove PATH` sends: the path's URI, and the path as typed as a name);
//! - `reopen`: drops the registry and loads a new one from the same store directory, as a
//!   restarted daemon does.
//!
//! Besides the transcript, [`check`] asserts what must hold after every operation whatever the
//! rule: a change publishes exactly one snapshot on the `watch` feed, equal to the new state at
//! the reported revision, and an operation that changes nothing (or is refused) publishes nothing
//! and leaves every workspace and the store revision as they were.
//!
//! These tests cover only the roots half of the registry (`add`, `remove`, `snapshot`, `totals`,
//! `workspaces`, `subscribe_feed`); sessions are tested end to end.

use std::fmt::Write as _;
use std::time::Duration;

use rootsd_proto::wire::{ChangeResult, RemoveTarget, RootsSnapshot, code};
use rootsd_proto::{Root, WorkspaceName};
use tokio::sync::broadcast::{self, error::TryRecvError};

use super::Registry;
use crate::error::RequestError;
use crate::store::Store;

/// Runs `ops` against a registry on a fresh store and compares the transcript with `expect`.
///
/// Both texts may be indented as the test source is: common leading whitespace and blank lines
/// at either end are ignored.
#[track_caller]
fn check(ops: &str, expect: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build a runtime");
    let actual = runtime.block_on(transcript(ops));
    let expect = dedent(expect);
    if actual != expect {
        let (expected_lines, actual_lines): (Vec<&str>, Vec<&str>) =
            (expect.lines().collect(), actual.lines().collect());
        let first = (0..)
            .find(|&i| expected_lines.get(i) != actual_lines.get(i))
            .expect("the texts differ somewhere");
        let at = |lines: &[&str]| {
            lines
                .get(first)
                .map_or("(end)".to_owned(), |l| format!("{l:?}"))
        };
        panic!(
            "the registry's transcript differs from the expected one at line {}:\n\
             expected {}\n  actual {}\n\
             \n--- expected\n{expect}\n\n--- actual\n{actual}\n",
            first + 1,
            at(&expected_lines),
            at(&actual_lines),
        );
    }
}

async fn transcript(ops: &str) -> String {
    let dir = tempfile::tempdir().expect("create a temp dir");
    let mut registry = Registry::new(Store::open(dir.path()).expect("open the store"))
        .expect("load the new store");
    let (_, mut feed) = registry.subscribe_feed().await;
    let mut out = String::new();
    for line in ops.lines().map(str::trim).filter(|l| !l.is_empty()) {
        writeln!(out, "{line}").unwrap();
        let before = State::of(&registry).await;
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        let (workspace, items) = rest.split_once(' ').unwrap_or((rest, ""));
        let outcome = match verb {
            "add" => {
                let roots = parse_items(items).map(|(uri, name)| Root {
                    uri: uri.unwrap_or_else(|| panic!("`{line}`: every root needs a URI")),
                    name,
                });
                registry.add(&ws(workspace), roots.collect()).await
            }
            "remove" => {
                let targets = parse_items(items).map(|(uri, name)| RemoveTarget {
                    input: name.clone().or_else(|| uri.clone()).unwrap_or_default(),
                    uri,
                    name,
                });
                registry.remove(&ws(workspace), targets.collect()).await
            }
            "reopen" => {
                drop(feed);
                drop(registry);
                let store = Store::reopen(dir.path(), Duration::from_secs(10)).expect("reopen");
                registry = Registry::new(store).expect("load the reopened store");
                feed = registry.subscribe_feed().await.1;
                let (revision, roots, workspaces) = registry.totals().await;
                writeln!(
                    out,
                    "  loaded store revision {revision}, {roots} roots in {workspaces} workspaces"
                )
                .unwrap();
                continue;
            }
            _ => panic!("unknown operation `{line}`: expected add, remove or reopen"),
        };
        let after = State::of(&registry).await;
        let published = drain(&mut feed);
        match &outcome {
            Ok(result) => {
                assert_eq!(result.workspace.as_str(), workspace, "`{line}`");
                render_result(&mut out, result);
                let changed = !(result.added.is_empty()
                    && result.renamed.is_empty()
                    && result.removed.is_empty());
                if changed {
                    let now = registry.snapshot(&result.workspace).await;
                    assert_eq!(now.revision, result.revision, "`{line}`: {now:?}");
                    assert_eq!(after.revision, result.revision, "`{line}`");
                    assert_eq!(published, [now], "`{line}` must publish its change once");
                } else {
                    assert_unchanged(line, &before, &after, &published);
                }
            }
            Err(error) => {
                render_error(&mut out, error);
                assert_unchanged(line, &before, &after, &published);
            }
        }
    }
    writeln!(out, "--").unwrap();
    State::of(&registry).await.render(&mut out);
    out.trim_end().to_owned()
}

/// Everything a test can observe about the roots, for the final state and the no-change checks.
#[derive(Debug, PartialEq)]
struct State {
    revision: u64,
    roots: usize,
    workspaces: Vec<RootsSnapshot>,
}

impl State {
    async fn of(registry: &Registry) -> Self {
        let (revision, roots, count) = registry.totals().await;
        let mut workspaces = Vec::new();
        for summary in registry.workspaces().await {
            let snapshot = registry.snapshot(&summary.name).await;
            assert_eq!(summary.roots, snapshot.roots.len(), "{summary:?}");
            workspaces.push(snapshot);
        }
        assert_eq!(count, workspaces.len(), "totals count every workspace");
        Self {
            revision,
            roots,
            workspaces,
        }
    }

    fn render(&self, out: &mut String) {
        let Self {
            revision,
            roots,
            workspaces,
        } = self;
        let count = workspaces.len();
        writeln!(
            out,
            "store revision {revision}, {roots} roots in {count} workspaces"
        )
        .unwrap();
        for snapshot in workspaces {
            writeln!(out, "{} @{}", snapshot.workspace, snapshot.revision).unwrap();
            for root in &snapshot.roots {
                writeln!(out, "  {}", show_root(root)).unwrap();
            }
        }
    }
}

#[track_caller]
fn assert_unchanged(line: &str, before: &State, after: &State, published: &[RootsSnapshot]) {
    assert_eq!(
        before, after,
        "`{line}` changed nothing, yet the state moved"
    );
    assert!(
        published.is_empty(),
        "`{line}` changed nothing, yet published {published:?}"
    );
}

fn render_result(out: &mut String, result: &ChangeResult) {
    let groups = [
        ("added", &result.added),
        ("renamed", &result.renamed),
        ("unchanged", &result.unchanged),
        ("removed", &result.removed),
    ];
    for (label, roots) in groups {
        for root in roots {
            writeln!(out, "  {label} {}", show_root(root)).unwrap();
        }
    }
    writeln!(
        out,
        "  total {}, revision {}",
        result.total, result.revision
    )
    .unwrap();
}

/// An error as its code's name and the message's gist: the part before the first `": "`, which
/// names what was wrong. The rest (what to do) is worded for people and may change freely.
fn render_error(out: &mut String, error: &RequestError) {
    let name = match error.code {
        code::NOT_FOUND => "NOT_FOUND",
        code::INVALID_ROOT => "INVALID_ROOT",
        code::AMBIGUOUS => "AMBIGUOUS",
        code::STORAGE => "STORAGE",
        other => panic!("unexpected error code {other}: {}", error.message),
    };
    let gist = error
        .message
        .split_once(": ")
        .map_or(error.message.as_str(), |(gist, _)| gist);
    writeln!(out, "  error {name}: {gist}").unwrap();
}

fn show_root(root: &Root) -> String {
    match &root.name {
        Some(name) => format!("{} {name:?}", root.uri),
        None => root.uri.clone(),
    }
}

/// `URI "NAME", "NAME", URI` → `(Some(URI), Some(NAME))`, `(None, Some(NAME))`, `(Some(URI), None)`.
fn parse_items(items: &str) -> impl Iterator<Item = (Option<String>, Option<String>)> + '_ {
    items
        .split(", ")
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| match item.split_once('"') {
            Some((uri, quoted)) => {
                let name = quoted
                    .strip_suffix('"')
                    .unwrap_or_else(|| panic!("unterminated name in `{item}`"));
                let uri = uri.trim();
                (
                    (!uri.is_empty()).then(|| uri.to_owned()),
                    Some(name.to_owned()),
                )
            }
            None => (Some(item.to_owned()), None),
        })
}

fn drain(feed: &mut broadcast::Receiver<std::sync::Arc<RootsSnapshot>>) -> Vec<RootsSnapshot> {
    let mut published = Vec::new();
    loop {
        match feed.try_recv() {
            Ok(snapshot) => published.push((*snapshot).clone()),
            Err(TryRecvError::Empty) => return published,
            Err(other) => panic!("the change feed failed: {other}"),
        }
    }
}

fn ws(name: &str) -> WorkspaceName {
    WorkspaceName::new(name).unwrap_or_else(|e| panic!("{e}"))
}

/// Strips the indentation common to all non-blank lines, and blank lines at either end.
fn dedent(text: &str) -> String {
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect::<Vec<_>>()
        .join("\n")
        .trim_matches('\n')
        .to_owned()
}

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
