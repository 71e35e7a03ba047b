//! Roots that sessions publish (`rootsctl proxy --host-roots publish`): their origins, withdrawal
//! when a session ends and at start-up, the roots a user also added by hand, and what a removal
//! by hand does to a session's publications. Sessions borrow the registry, so these are written
//! as code rather than as transcripts.

use std::time::Duration;

use rootsd_proto::wire::{RegisterParams, RemoveTarget, RootOrigin};
use rootsd_proto::{Root, WorkspaceName};

use super::super::Registry;
use crate::store::{Origin, PeerV1};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build a runtime")
}

fn open(dir: &std::path::Path) -> Registry {
    Registry::new(crate::store::open(dir).expect("open the store")).expect("serve the store")
}

fn params(label: &str) -> RegisterParams {
    RegisterParams {
        workspace: WorkspaceName::default(),
        label: label.to_owned(),
        pid: 4000,
        state: Default::default(),
        instance: String::new(),
    }
}

fn roots(names: &[&str]) -> Vec<Root> {
    names
        .iter()
        .map(|n| Root {
            uri: format!("file:///{n}"),
            name: None,
        })
        .collect()
}

/// The default workspace as `name(origin, …)` items: `hand`, or `s` and the session's id.
async fn shown(registry: &Registry) -> String {
    let listing = registry.listing(&WorkspaceName::default()).await;
    listing
        .roots
        .iter()
        .map(|r| {
            let origins: Vec<String> = r
                .origin
                .iter()
                .map(|o| match o {
                    RootOrigin::Hand => "hand".to_owned(),
                    RootOrigin::Session { session, label, .. } => format!("s{session}:{label}"),
                })
                .collect();
            format!(
                "{}({})",
                r.root.name.as_deref().unwrap_or("-"),
                origins.join(",")
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The connection of the proxies these tests play.
fn peer() -> PeerV1 {
    PeerV1 {
        uid: 1000,
        pid: Some(5150),
        process: Some("rootsctl".into()),
        ..Default::default()
    }
}

async fn add(registry: &Registry, names: &[&str]) -> rootsd_proto::wire::ChangeResult {
    registry
        .add(&WorkspaceName::default(), roots(names), super::tester())
        .await
        .expect("add")
}

async fn remove(registry: &Registry, name: &str) {
    registry
        .remove(
            &WorkspaceName::default(),
            vec![RemoveTarget {
                input: name.to_owned(),
                uri: Some(format!("file:///{name}")),
                name: None,
            }],
            super::tester(),
        )
        .await
        .expect("remove");
}

/// Waits for the next change the registry publishes: a session's withdrawal, which nobody
/// awaits, is published once it is durable.
async fn next_change(feed: &mut tokio::sync::watch::Receiver<u64>) {
    tokio::time::timeout(Duration::from_secs(10), feed.changed())
        .await
        .expect("a change within 10 s")
        .expect("the feed is open");
}

#[test]
fn published_roots_carry_their_session_and_go_with_it_but_a_hand_added_one_stays() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let registry = open(dir.path());
        add(&registry, &["mine"]).await;
        let editor = registry
            .register_session(params("editor"), peer())
            .await
            .unwrap();
        let other = registry
            .register_session(params("agent"), peer())
            .await
            .unwrap();
        let published = editor.publish(roots(&["a", "mine", "b"])).await.unwrap();
        assert_eq!((published.revision, published.published), (2, 3));
        other.publish(roots(&["b"])).await.unwrap();
        assert_eq!(
            shown(&registry).await,
            "mine(hand,s1:editor) a(s1:editor) b(s1:editor,s2:agent)"
        );

        let (_, mut feed) = registry.subscribe_feed().await;
        drop(editor);
        next_change(&mut feed).await;
        assert_eq!(shown(&registry).await, "mine(hand) b(s2:agent)");
        drop(other);
        next_change(&mut feed).await;
        assert_eq!(shown(&registry).await, "mine(hand)");
        registry.close().unwrap();
    });
}

#[test]
fn a_session_that_never_published_ends_without_a_change() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let registry = open(dir.path());
        add(&registry, &["mine"]).await;
        drop(
            registry
                .register_session(params("quiet"), peer())
                .await
                .unwrap(),
        );
        // A change by hand after it: had the session's end written one, this would be revision 3.
        assert_eq!(add(&registry, &["x"]).await.revision, 2);
    });
}

#[test]
fn adding_a_published_root_by_hand_adopts_it_and_it_outlives_the_session() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let registry = open(dir.path());
        let editor = registry
            .register_session(params("editor"), peer())
            .await
            .unwrap();
        editor.publish(roots(&["a"])).await.unwrap();
        let adopted = add(&registry, &["a"]).await;
        assert_eq!(adopted.adopted, roots_named(&["a"]));
        assert!(adopted.unchanged.is_empty() && adopted.added.is_empty());
        assert_eq!(adopted.revision, 2, "adopting is a change");
        assert_eq!(shown(&registry).await, "a(hand,s1:editor)");
        let again = add(&registry, &["a"]).await;
        assert_eq!((again.unchanged.len(), again.revision), (1, 2));

        let (_, mut feed) = registry.subscribe_feed().await;
        drop(editor);
        next_change(&mut feed).await;
        assert_eq!(shown(&registry).await, "a(hand)");
    });
}

#[test]
fn a_removal_by_hand_holds_until_the_host_drops_the_root_and_offers_it_again() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let registry = open(dir.path());
        add(&registry, &["both"]).await;
        let editor = registry
            .register_session(params("editor"), peer())
            .await
            .unwrap();
        editor.publish(roots(&["a", "both"])).await.unwrap();
        remove(&registry, "a").await;
        remove(&registry, "both").await;
        assert_eq!(shown(&registry).await, "");

        // The host still has both open, and opens b: only b is published.
        let result = editor.publish(roots(&["a", "both", "b"])).await.unwrap();
        assert_eq!(result.declined, ["file:///a", "file:///both"]);
        assert_eq!(result.published, 1, "what it publishes now");
        assert_eq!(shown(&registry).await, "b(s1:editor)");
        // It closes a, then opens it again: now a is published again.
        editor.publish(roots(&["both", "b"])).await.unwrap();
        let result = editor.publish(roots(&["both", "b", "a"])).await.unwrap();
        assert_eq!(result.declined, ["file:///both"]);
        assert_eq!(shown(&registry).await, "b(s1:editor) a(s1:editor)");
    });
}

#[test]
fn start_up_withdraws_what_sessions_of_the_previous_run_published() {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let registry = open(dir.path());
        add(&registry, &["mine"]).await;
        let editor = registry
            .register_session(params("editor"), peer())
            .await
            .unwrap();
        editor.publish(roots(&["mine", "a"])).await.unwrap();
        // The daemon dies with the session still registered: its end never runs.
        std::mem::forget(editor);
        registry.close().unwrap();
    });
    runtime().block_on(async {
        let registry = open(dir.path());
        assert_eq!(shown(&registry).await, "mine(hand)");
        assert_eq!(registry.totals().await, (3, 1, 1));
        registry.close().unwrap();
    });
    // Each change is journaled with who made it.
    let replay = crate::store::read_journal(&dir.path().join(crate::store::JOURNAL_FILE))
        .unwrap()
        .unwrap();
    let origins: Vec<String> = replay
        .changes()
        .iter()
        .map(|c| match &c.origin {
            Some(Origin::Peer(_)) => "hand".to_owned(),
            Some(Origin::Session { id, label, .. }) => format!("session {id} {label}"),
            Some(Origin::Daemon { reason }) if reason.starts_with("start-up") => {
                "startup".to_owned()
            }
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(origins, ["hand", "session 1 editor", "startup"]);
    // A second start finds nothing left to withdraw.
    runtime().block_on(async {
        let registry = open(dir.path());
        assert_eq!(registry.totals().await, (3, 1, 1));
    });
}

#[test]
fn a_publication_that_is_not_acceptable_changes_nothing() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let registry = open(dir.path());
        let editor = registry
            .register_session(params("editor"), peer())
            .await
            .unwrap();
        let error = editor
            .publish(vec![
                Root {
                    uri: "file:///ok".into(),
                    name: None,
                },
                Root {
                    uri: "https://example.com".into(),
                    name: None,
                },
            ])
            .await
            .unwrap_err();
        assert_eq!(error.code, rootsd_proto::wire::code::INVALID_ROOT);
        assert_eq!(shown(&registry).await, "");
        assert_eq!(registry.totals().await.0, 0);
    });
}

fn roots_named(names: &[&str]) -> Vec<Root> {
    names
        .iter()
        .map(|n| Root {
            uri: format!("file:///{n}"),
            name: Some((*n).to_owned()),
        })
        .collect()
}
