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
//!   restarted daemon does;
//! - `log` or `log WORKSPACE`: the recorded changes, newest first, as `REVISION WORKSPACE:` and
//!   what each did (`+` added, `~` renamed, `-` removed).
//!
//! Besides the transcript, [`check`] asserts what must hold after every operation whatever the
//! rule: a change publishes exactly one snapshot on the `watch` feed, equal to the new state at
//! the reported revision, and records exactly one history entry saying what the result said it
//! did; an operation that changes nothing (or is refused) publishes and records nothing and
//! leaves every workspace and the store revision as they were.
//!
//! These tests cover the roots half of the registry (`add`, `remove`, `snapshot`, `totals`,
//! `workspaces`, `subscribe_feed`); `publish.rs` covers the roots sessions publish, and the rest
//! of sessions is tested end to end.

use std::fmt::Write as _;

use rootsd_proto::testing::{assert_same_text, dedent};
use rootsd_proto::wire::{ChangeResult, LogEntry, LogParams, RemoveTarget, RootsSnapshot, code};
use rootsd_proto::{Root, WorkspaceName};
use tokio::sync::watch;

use super::Registry;
use crate::error::RequestError;
use crate::store::{Origin, PeerV1};

/// Who makes every change in these tests.
fn tester() -> Origin {
    Origin::Peer(PeerV1 {
        uid: 1000,
        user: Some("ana".into()),
        pid: Some(4242),
        process: Some("registry-test".into()),
        client: None,
    })
}

/// Runs `ops` against a registry on a fresh store and compares the transcript with `expect`.
///
/// Both texts may be indented as the test source is: common leading whitespace and blank lines
/// at either end are ignored.
#[track_caller]
pub(super) fn check(ops: &str, expect: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build a runtime");
    let actual = runtime.block_on(transcript(ops));
    let expect = dedent(expect);
    assert_same_text("the registry's transcript", &expect, &actual);
}

async fn transcript(ops: &str) -> String {
    let dir = tempfile::tempdir().expect("create a temp dir");
    let mut registry = Registry::new(crate::store::open(dir.path()).expect("open the store"))
        .expect("load the new store");
    let mut feed = Feed::subscribe(&registry).await;
    let mut out = String::new();
    for line in ops.lines().map(str::trim).filter(|l| !l.is_empty()) {
        writeln!(out, "{line}").unwrap();
        let before = State::of(&registry).await;
        let logged_before = registry.log(&LogParams::default()).entries;
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        let (workspace, items) = rest.split_once(' ').unwrap_or((rest, ""));
        let outcome = match verb {
            "add" => {
                let roots = parse_items(items).map(|(uri, name)| Root {
                    uri: uri.unwrap_or_else(|| panic!("`{line}`: every root needs a URI")),
                    name,
                });
                registry
                    .add(&ws(workspace), roots.collect(), tester())
                    .await
            }
            "remove" => {
                let targets = parse_items(items).map(|(uri, name)| RemoveTarget {
                    input: name.clone().or_else(|| uri.clone()).unwrap_or_default(),
                    uri,
                    name,
                });
                registry
                    .remove(&ws(workspace), targets.collect(), tester())
                    .await
            }
            "reopen" => {
                drop(feed);
                drop(registry);
                let opened = crate::store::open(dir.path()).expect("reopen");
                registry = Registry::new(opened).expect("load the reopened store");
                feed = Feed::subscribe(&registry).await;
                let (revision, roots, workspaces) = registry.totals().await;
                writeln!(
                    out,
                    "  loaded store revision {revision}, {roots} roots in {workspaces} workspaces"
                )
                .unwrap();
                continue;
            }
            "log" => {
                let workspace = (!workspace.is_empty()).then(|| ws(workspace));
                let log = registry.log(&LogParams {
                    workspace,
                    ..LogParams::default()
                });
                for entry in &log.entries {
                    render_entry(&mut out, entry);
                }
                continue;
            }
            _ => panic!("unknown operation `{line}`: expected add, remove, reopen or log"),
        };
        let logged = registry.log(&LogParams::default()).entries;
        let after = State::of(&registry).await;
        let published = feed.drain(&registry);
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
                    assert_logged(line, result, &logged_before, &logged);
                } else {
                    assert_unchanged(line, &before, &after, &published);
                    assert_eq!(
                        logged, logged_before,
                        "`{line}` changed nothing, yet logged"
                    );
                }
            }
            Err(error) => {
                render_error(&mut out, error);
                assert_unchanged(line, &before, &after, &published);
                assert_eq!(logged, logged_before, "`{line}` was refused, yet logged");
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

/// A change adds one entry to the history, newest first, saying what its result said.
#[track_caller]
fn assert_logged(line: &str, result: &ChangeResult, before: &[LogEntry], after: &[LogEntry]) {
    assert_eq!(after.len(), before.len() + 1, "`{line}` logs one entry");
    assert_eq!(&after[1..], before, "`{line}` leaves earlier entries alone");
    let entry = &after[0];
    assert_eq!(
        (&entry.workspace, entry.revision),
        (&result.workspace, result.revision),
        "`{line}`"
    );
    // The result lists roots in the order the request named them, the entry in the
    // workspace's order.
    let sorted = |roots: &[Root]| {
        let mut roots = roots.to_vec();
        roots.sort_by(|a, b| a.uri.cmp(&b.uri));
        roots
    };
    assert_eq!(sorted(&entry.added), sorted(&result.added), "`{line}`");
    assert_eq!(sorted(&entry.removed), sorted(&result.removed), "`{line}`");
    let renamed: Vec<Root> = entry
        .renamed
        .iter()
        .map(|r| Root {
            uri: r.uri.clone(),
            name: r.name.clone(),
        })
        .collect();
    assert_eq!(sorted(&renamed), sorted(&result.renamed), "`{line}`");
    assert_eq!(
        entry.who,
        rootsd_proto::wire::Who::Peer(rootsd_proto::wire::LoggedPeer {
            uid: 1000,
            user: Some("ana".into()),
            pid: Some(4242),
            process: Some("registry-test".into()),
            client: None,
        }),
        "`{line}`"
    );
}

/// `  3 default: +URI "NAME" ~URI "OLD" -> "NEW" -URI "NAME"`
fn render_entry(out: &mut String, entry: &LogEntry) {
    let mut line = format!("  {} {}:", entry.revision, entry.workspace);
    for root in &entry.added {
        write!(line, " +{}", show_root(root)).unwrap();
    }
    for renamed in &entry.renamed {
        let name = |n: &Option<String>| n.as_ref().map_or("-".to_owned(), |n| format!("{n:?}"));
        write!(
            line,
            " ~{} {} -> {}",
            renamed.uri,
            name(&renamed.previous_name),
            name(&renamed.name)
        )
        .unwrap();
    }
    for root in &entry.removed {
        write!(line, " -{}", show_root(root)).unwrap();
    }
    writeln!(out, "{line}").unwrap();
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

/// What a `watch` subscriber sees: woken after changes, it asks what changed since the last
/// revision it saw.
struct Feed {
    after: u64,
    changes: watch::Receiver<u64>,
}

impl Feed {
    async fn subscribe(registry: &Registry) -> Self {
        let (after, changes) = registry.subscribe_feed().await;
        Self { after, changes }
    }

    /// The states published since the last look.
    fn drain(&mut self, registry: &Registry) -> Vec<RootsSnapshot> {
        if !self
            .changes
            .has_changed()
            .expect("the registry holds the sender")
        {
            return Vec::new();
        }
        self.changes.borrow_and_update();
        let published = registry.changed_since(self.after, None);
        if let Some(last) = published.back() {
            self.after = last.revision;
        }
        published
            .iter()
            .map(|p| RootsSnapshot::clone(&p.snapshot()))
            .collect()
    }
}

fn ws(name: &str) -> WorkspaceName {
    WorkspaceName::new(name).unwrap_or_else(|e| panic!("{e}"))
}

mod add;
mod log;
mod publish;
mod remove;
