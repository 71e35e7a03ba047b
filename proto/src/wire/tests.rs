//! The wire types as the protocol writes them.

use super::*;

#[test]
fn requests_serialise_to_one_line_with_the_method_name() {
    let req = Request::new::<AddRoots>(
        7,
        &AddParams {
            workspace: WorkspaceName::default(),
            roots: vec![Root {
                uri: "file:///a%0Ab".into(),
                name: Some("line\nbreak".into()),
            }],
        },
    );
    let line = serde_json::to_string(&req).unwrap();
    assert!(!line.contains('\n'));
    assert!(line.starts_with(r#"{"jsonrpc":"2.0","id":7,"method":"roots.add","params":"#));
}

#[test]
fn notifications_have_no_id() {
    let state = SessionState {
        fetched_revision: Some(3),
        ..SessionState::default()
    };
    let n = Request::notification::<UpdateSession>(&state);
    let v = serde_json::to_value(&n).unwrap();
    assert!(v.get("id").is_none());
    assert_eq!(v["params"]["fetched_revision"], 3);
}

#[test]
fn a_listed_root_is_mcps_root_with_its_origin_beside() {
    let listed = ListedRoot {
        root: Root {
            uri: "file:///a".into(),
            name: Some("a".into()),
        },
        origin: vec![
            RootOrigin::Hand,
            RootOrigin::Session {
                session: 3,
                label: "code".into(),
                pid: 42,
            },
        ],
    };
    let value = serde_json::to_value(&listed).unwrap();
    assert_eq!(
        value,
        serde_json::json!({"uri":"file:///a","name":"a","origin":[{"by":"hand"},{"by":"session","session":3,"label":"code","pid":42}]})
    );
    assert_eq!(serde_json::from_value::<ListedRoot>(value).unwrap(), listed);
    let bare: ListedRoot = serde_json::from_str(r#"{"uri":"file:///b"}"#).unwrap();
    assert!(bare.origin.is_empty() && bare.root.name.is_none());
}

#[test]
fn missing_workspace_means_default() {
    let p: WorkspaceParams = serde_json::from_str("{}").unwrap();
    assert_eq!(p.workspace.as_str(), "default");
}

#[test]
fn responses_carry_result_or_error() {
    let ok = Response::success(Value::from(1), Value::Null);
    assert!(
        serde_json::to_string(&ok)
            .unwrap()
            .contains("\"result\":null")
    );
    let err = Response::failure(Value::from("x"), ErrorObject::new(code::NOT_FOUND, "gone"));
    let text = serde_json::to_string(&err).unwrap();
    assert!(
        text.contains(r#""error":{"code":-32002,"message":"gone"}"#),
        "{text}"
    );
    assert!(!text.contains("result"));
}

#[test]
fn the_method_table_names_each_method_once_and_only_methods_clients_send() {
    let mut names: Vec<&str> = METHODS.iter().map(|m| m.name).collect();
    names.sort_unstable();
    let count = names.len();
    names.dedup();
    assert_eq!(names.len(), count, "a method is listed twice");
    assert!(
        method_named(RootsChanged::NAME).is_none(),
        "the daemon's push is served to nobody"
    );
    assert_eq!(
        method_named("session.publish").map(|m| m.effect),
        Some(Effect::ChangesRoots)
    );
}
