//! The dispatch's role check, driven through `handle_line` on a real store: every method of the
//! table is served, and every one that changes roots is refused to a read-only member.

use std::sync::Arc;

use rootsd_proto::wire::{self, Effect, code};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::ConnectionState;
use crate::info::{Access, AdmittedPeer, DaemonInfo, Role};
use crate::registry::Registry;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn info() -> DaemonInfo {
    DaemonInfo {
        socket: "/nonexistent/rootsd.sock".into(),
        state_dir: "/nonexistent".into(),
        socket_activated: true,
        access: Access::OwnerOrSocketGroup,
        admin_group: None,
    }
}

/// Params that each method accepts, so that what answers is the method itself.
fn params_for(method: &str, dir: &std::path::Path) -> Value {
    let root = json!({"uri": format!("file://{}", dir.display())});
    match method {
        "hello" => json!({"protocol_version": wire::PROTOCOL_VERSION, "client": "test"}),
        "roots.add" => json!({"roots": [root]}),
        "roots.remove" => json!({"targets": [{"input": "x", "uri": root["uri"]}]}),
        "session.register" => json!({"pid": 1}),
        "session.publish" => json!({"roots": [root]}),
        "wait" => json!({"revision": 0, "timeout_ms": 0}),
        _ => json!({}),
    }
}

/// One connection of `role` on `registry`: greets, registers a session, then sends each method
/// of the table; returns each method's answer.
async fn answers(registry: &Registry, role: Role, dir: &std::path::Path) -> Vec<(String, Value)> {
    let info = info();
    let shutdown = CancellationToken::new();
    // A socket for the session's outbox; nothing is pushed to it in these tests.
    let (socket, _peer_end) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
    let mut connection = ConnectionState {
        socket: Arc::new(socket),
        peer: AdmittedPeer {
            uid: 4242,
            pid: Some(1),
            role,
        },
        registry,
        info: &info,
        shutdown: &shutdown,
        author: None,
        session: None,
        feed: None,
        pending: None,
    };
    let mut out = Vec::new();
    let mut send = async |method: &str| {
        let line =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params_for(method, dir)});
        let answer = connection
            .handle_line(&line.to_string())
            .await
            .expect("a request is answered");
        serde_json::from_str::<Value>(&answer).expect("the answer is JSON")
    };
    send("hello").await;
    send("session.register").await;
    for info in wire::METHODS {
        out.push((info.name.to_owned(), send(info.name).await));
    }
    out
}

fn with_registry(test: impl AsyncFnOnce(&Registry, &std::path::Path)) {
    let dir = tempfile::tempdir().expect("a temp dir");
    // A state directory exists before its store is opened, as main.rs makes sure.
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("the state directory");
    let registry = Arc::new(
        Registry::new(crate::store::open(&state).expect("open the store")).expect("load the store"),
    );
    let root = dir.path().join("project");
    std::fs::create_dir(&root).unwrap();
    runtime().block_on(test(&registry, &root));
}

#[test]
fn every_method_that_changes_roots_is_refused_to_a_member_and_changes_nothing() {
    with_registry(async |registry, dir| {
        let answers = answers(registry, Role::Member, dir).await;
        for (method, answer) in &answers {
            let effect = wire::method_named(method).unwrap().effect;
            let code = answer["error"]["code"].as_i64();
            match effect {
                Effect::ChangesRoots => {
                    assert_eq!(code, Some(code::FORBIDDEN), "{method}: {answer}");
                    let message = answer["error"]["message"].as_str().unwrap();
                    assert!(message.contains("nothing was changed"), "{message}");
                }
                Effect::Reads => assert_ne!(code, Some(code::FORBIDDEN), "{method}: {answer}"),
            }
        }
        let changing: Vec<&str> = wire::METHODS
            .iter()
            .filter(|m| m.effect == Effect::ChangesRoots)
            .map(|m| m.name)
            .collect();
        assert_eq!(
            changing,
            ["roots.add", "roots.remove", "session.publish"],
            "the methods that change what sessions see"
        );
        let listing = registry.listing(&Default::default()).await;
        assert!(listing.roots.is_empty(), "{listing:?}");
        assert_eq!(registry.totals().await.0, 0, "no revision was made");
    });
}

#[test]
fn every_method_in_the_table_is_served_and_an_owner_may_change_roots() {
    with_registry(async |registry, dir| {
        for (method, answer) in answers(registry, Role::Owner, dir).await {
            let code = answer["error"]["code"].as_i64();
            assert_ne!(code, Some(code::METHOD_NOT_FOUND), "{method}: {answer}");
            assert_ne!(code, Some(code::FORBIDDEN), "{method}: {answer}");
        }
        assert!(
            registry.totals().await.0 > 0,
            "the owner's changes were made"
        );
    });
}
