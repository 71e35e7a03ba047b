//! Who holds each root, and the changes sessions make: a session that runs `rootsctl proxy
//! --host-roots publish` puts its host's roots into its workspace for as long as it lasts.
//!
//! A stored root is held by hand (`rootsctl add`), by the sessions that publish it, or both, and
//! leaves the workspace when nobody holds it any more. A publication is the host's whole list and
//! replaces what the session published before; a session that ends withdraws everything it
//! published; a root that a user also added by hand stays. These are ordinary changes: journaled
//! and synced before they are acknowledged, each with its `Origin`.
//!
//! The functions here only plan, against the writers' pending view; the registry commits what
//! they decide. Nothing here does I/O or knows about connections.

use std::sync::Arc;

use rootsd_proto::root;
use rootsd_proto::wire::{PublishResult, RootOrigin, code};
use rootsd_proto::{Root, WorkspaceName};

use crate::error::RequestError;
use crate::store::Plan;
use crate::store::{Change, Contents, Origin, StoredPublisherV1, StoredRootV1, StoredWorkspaceV1};

/// A host's list as a session publishes it: every URI canonical, named, once. Refused whole, as
/// `roots.add` is, if any root is not an acceptable local `file://` URI or there are too many.
pub fn canonical_publication(roots: Vec<Root>) -> Result<Vec<Root>, RequestError> {
    if roots.len() > rootsd_proto::host_roots::MAX_HOST_ROOTS {
        return Err(RequestError::new(
            code::INVALID_PARAMS,
            format!(
                "session.publish carries {} roots, more than the {} a session may publish: send at most that many",
                roots.len(),
                rootsd_proto::host_roots::MAX_HOST_ROOTS
            ),
        ));
    }
    let mut canonical: Vec<Root> = Vec::with_capacity(roots.len());
    for host_root in roots {
        let (path, uri) = root::canonical(&host_root.uri)?;
        if canonical.iter().any(|r| r.uri == uri) {
            continue;
        }
        let name = host_root
            .name
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| root::default_name(&path));
        canonical.push(Root {
            uri,
            name: Some(name),
        });
    }
    Ok(canonical)
}

/// The change making `roots` (canonical, each once) everything `me` publishes in `workspace`:
/// roots it no longer publishes are withdrawn, new ones join the end of the list. A root that is
/// already there keeps its name and place, unless `me` alone holds it, when the name follows the
/// host's.
pub fn plan_publish(
    pending: &Contents,
    workspace: &WorkspaceName,
    me: &StoredPublisherV1,
    roots: &[Root],
    origin: Origin,
) -> Plan<PublishResult> {
    let current = pending
        .workspaces
        .get(workspace)
        .cloned()
        .unwrap_or_default();
    let mut next = StoredWorkspaceV1::clone(&current);
    for stored in &mut next.roots {
        if !roots.iter().any(|r| *r.uri == *stored.uri) {
            withdraw_from(stored, me.session);
        }
    }
    next.roots.retain(|r| r.is_held());
    for root in roots {
        match next.roots.iter_mut().find(|r| *r.uri == *root.uri) {
            Some(stored) => {
                if !stored.published_by.iter().any(|p| p.session == me.session) {
                    Arc::make_mut(stored).published_by.push(me.clone());
                }
                if !stored.by_hand
                    && stored.published_by.len() == 1
                    && stored.name.as_deref() != root.name.as_deref()
                {
                    Arc::make_mut(stored).name = root.name.as_deref().map(Arc::from);
                }
            }
            None => next.roots.push(Arc::new(StoredRootV1 {
                uri: root.uri.as_str().into(),
                name: root.name.as_deref().map(Arc::from),
                by_hand: false,
                published_by: vec![me.clone()],
            })),
        }
    }
    let result = |revision| PublishResult {
        workspace: workspace.clone(),
        revision,
        published: roots.len(),
        declined: Vec::new(),
    };
    match next_change(pending, workspace, &current, next, origin) {
        Some(change) => {
            let revision = change.revision;
            Plan::Write(change, result(revision))
        }
        None => Plan::Unchanged {
            revision: current.revision,
            reply: result(current.revision),
        },
    }
}

/// The change withdrawing everything session `session` publishes in `workspace`, when it ends.
pub fn plan_withdraw(
    pending: &Contents,
    workspace: &WorkspaceName,
    me: &StoredPublisherV1,
    origin: Origin,
) -> Plan<()> {
    let current = pending
        .workspaces
        .get(workspace)
        .cloned()
        .unwrap_or_default();
    let mut next = StoredWorkspaceV1::clone(&current);
    for stored in &mut next.roots {
        withdraw_from(stored, me.session);
    }
    next.roots.retain(|r| r.is_held());
    match next_change(pending, workspace, &current, next, origin) {
        Some(change) => Plan::Write(change, ()),
        None => Plan::Unchanged {
            revision: current.revision,
            reply: (),
        },
    }
}

/// Takes `session` off the publishers of `stored`, copying the root only if it was one: the
/// roots it did not publish stay shared with the state before.
fn withdraw_from(stored: &mut Arc<StoredRootV1>, session: u64) {
    if stored.published_by.iter().any(|p| p.session == session) {
        Arc::make_mut(stored)
            .published_by
            .retain(|p| p.session != session);
    }
}

/// `next` as the next revision of `workspace`, unless it is `current` unchanged.
fn next_change(
    pending: &Contents,
    workspace: &WorkspaceName,
    current: &StoredWorkspaceV1,
    next: StoredWorkspaceV1,
    origin: Origin,
) -> Option<Change> {
    if next.roots == current.roots {
        return None;
    }
    Some(Change::next(pending, workspace.clone(), next, origin))
}

/// Who holds `root`, as `roots.list` shows it: by hand first, then the sessions.
pub fn origins(root: &StoredRootV1) -> Vec<RootOrigin> {
    let hand = root.by_hand.then_some(RootOrigin::Hand);
    hand.into_iter()
        .chain(root.published_by.iter().map(|p| RootOrigin::Session {
            session: p.session,
            label: p.label.clone(),
            pid: p.pid,
        }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> WorkspaceName {
        WorkspaceName::default()
    }

    /// The origin of the changes `session` makes.
    fn by(session: &StoredPublisherV1) -> Origin {
        Origin::session(
            session.session,
            &session.label,
            crate::store::PeerV1 {
                uid: 1000,
                pid: Some(session.pid),
                ..Default::default()
            },
        )
    }

    fn session(id: u64) -> StoredPublisherV1 {
        StoredPublisherV1 {
            session: id,
            label: format!("s{id}"),
            pid: 100 + id as u32,
        }
    }

    fn roots(uris: &[&str]) -> Vec<Root> {
        uris.iter()
            .map(|u| Root {
                uri: format!("file:///{u}"),
                name: Some((*u).to_owned()),
            })
            .collect()
    }

    /// Applies a plan's change, if any, and returns the workspace as `uri(hand,s1,…)` items.
    fn apply<T>(contents: &mut Contents, plan: Plan<T>) -> String {
        if let Plan::Write(change, _) = plan {
            contents.apply(&change);
        }
        show(contents)
    }

    fn show(contents: &Contents) -> String {
        contents
            .workspaces
            .get(&ws())
            .map(|w| {
                w.roots
                    .iter()
                    .map(|r| {
                        let mut holders: Vec<String> = Vec::new();
                        if r.by_hand {
                            holders.push("hand".into());
                        }
                        holders.extend(r.published_by.iter().map(|p| format!("s{}", p.session)));
                        format!(
                            "{}={}({})",
                            r.uri.trim_start_matches("file:///"),
                            r.name.as_deref().unwrap_or("-"),
                            holders.join(",")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    }

    fn hand(contents: &mut Contents, uris: &[&str]) {
        let state = contents.workspaces.entry(ws()).or_default();
        Arc::make_mut(state)
            .roots
            .extend(roots(uris).iter().map(|r| Arc::new(StoredRootV1::from(r))));
    }

    #[test]
    fn publications_replace_what_the_session_published_and_share_with_others() {
        let mut contents = Contents::default();
        hand(&mut contents, &["mine"]);
        let s1 = session(1);
        let s2 = session(2);
        let plan = plan_publish(&contents, &ws(), &s1, &roots(&["a", "mine", "b"]), by(&s1));
        assert_eq!(
            apply(&mut contents, plan),
            "mine=mine(hand,s1) a=a(s1) b=b(s1)"
        );
        let plan = plan_publish(&contents, &ws(), &s2, &roots(&["b", "c"]), by(&s2));
        assert_eq!(
            apply(&mut contents, plan),
            "mine=mine(hand,s1) a=a(s1) b=b(s1,s2) c=c(s2)"
        );
        // s1's host closed `a` and `b`: `b` stays for s2, `mine` for the user.
        let plan = plan_publish(&contents, &ws(), &s1, &roots(&["mine"]), by(&s1));
        assert_eq!(
            apply(&mut contents, plan),
            "mine=mine(hand,s1) b=b(s2) c=c(s2)"
        );
        let plan = plan_withdraw(&contents, &ws(), &s1, by(&s1));
        assert_eq!(
            apply(&mut contents, plan),
            "mine=mine(hand) b=b(s2) c=c(s2)"
        );
        let plan = plan_withdraw(&contents, &ws(), &s2, by(&s2));
        assert_eq!(apply(&mut contents, plan), "mine=mine(hand)");
        assert_eq!(contents.revision, 5, "each change is one revision");
    }

    #[test]
    fn the_same_publication_twice_changes_nothing() {
        let mut contents = Contents::default();
        let plan = plan_publish(
            &contents,
            &ws(),
            &session(1),
            &roots(&["a"]),
            by(&session(1)),
        );
        apply(&mut contents, plan);
        assert!(matches!(
            plan_publish(
                &contents,
                &ws(),
                &session(1),
                &roots(&["a"]),
                by(&session(1))
            ),
            Plan::Unchanged { revision: 1, .. }
        ));
        assert!(matches!(
            plan_withdraw(&contents, &ws(), &session(9), by(&session(9))),
            Plan::Unchanged { revision: 1, .. }
        ));
    }

    #[test]
    fn a_name_follows_the_host_only_where_the_session_alone_holds_the_root() {
        let mut contents = Contents::default();
        hand(&mut contents, &["kept"]);
        let plan = plan_publish(
            &contents,
            &ws(),
            &session(1),
            &roots(&["a", "kept"]),
            by(&session(1)),
        );
        apply(&mut contents, plan);
        let renamed = vec![
            Root {
                uri: "file:///a".into(),
                name: Some("A!".into()),
            },
            Root {
                uri: "file:///kept".into(),
                name: Some("host's".into()),
            },
        ];
        let plan = plan_publish(&contents, &ws(), &session(1), &renamed, by(&session(1)));
        assert_eq!(apply(&mut contents, plan), "kept=kept(hand,s1) a=A!(s1)");
    }

    #[test]
    fn start_up_withdraws_every_session_and_keeps_what_was_added_by_hand() {
        let mut contents = Contents::default();
        hand(&mut contents, &["mine"]);
        let plan = plan_publish(
            &contents,
            &ws(),
            &session(1),
            &roots(&["mine", "a"]),
            by(&session(1)),
        );
        apply(&mut contents, plan);
        let withdrawn = contents.without_sessions();
        assert_eq!(withdrawn.len(), 1);
        let (name, state) = &withdrawn[0];
        assert_eq!(name, &ws());
        assert_eq!(
            state.roots,
            vec![Arc::new(StoredRootV1::from(&roots(&["mine"])[0]))]
        );
        assert!(Contents::default().without_sessions().is_empty());
    }

    #[test]
    fn a_publication_is_canonical_and_refused_whole_for_one_bad_root() {
        let canonical = canonical_publication(vec![
            Root {
                uri: "FILE://localhost/a/b/".into(),
                name: None,
            },
            Root {
                uri: "file:///a/b".into(),
                name: Some("again".into()),
            },
        ])
        .unwrap();
        assert_eq!(
            canonical,
            vec![Root {
                uri: "file:///a/b".into(),
                name: Some("b".into())
            }]
        );
        let bad = canonical_publication(vec![Root {
            uri: "https://example.com".into(),
            name: None,
        }])
        .unwrap_err();
        assert_eq!(bad.code, code::INVALID_ROOT);
        let many = (0..=rootsd_proto::host_roots::MAX_HOST_ROOTS)
            .map(|i| Root {
                uri: format!("file:///r/{i}"),
                name: None,
            })
            .collect();
        assert_eq!(
            canonical_publication(many).unwrap_err().code,
            code::INVALID_PARAMS
        );
    }

    #[test]
    fn origins_list_the_hand_first() {
        let mut root = StoredRootV1::from(&roots(&["a"])[0]);
        root.published_by.push(session(4));
        assert_eq!(
            origins(&root),
            vec![
                RootOrigin::Hand,
                RootOrigin::Session {
                    session: 4,
                    label: "s4".into(),
                    pid: 104
                }
            ]
        );
    }
}
