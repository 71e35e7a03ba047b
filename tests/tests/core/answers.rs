//! The answers to changes, which the daemon's commit thread writes once each change is durable:
//! in the order of their requests, never overtaken by a push, delivered to a client that stopped
//! sending, and counting the sessions told of the change.

use std::net::Shutdown;
use std::os::unix::net::UnixStream;

use rootsd_tests::{RawClient, Sandbox};
use serde_json::{Value, json};

fn add_line(id: &str, uri: &str, name: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"roots.add","params":{{"roots":[{{"uri":"{uri}","name":"{name}"}}]}}}}"#
    )
}

#[test]
fn changes_sent_at_once_on_one_connection_are_answered_in_order_each_after_its_change() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut client = sb.connect();
    // One write holding four requests: three changes and a read between them, with ids that
    // must come back as they were spelt.
    let lines = [
        add_line("\"a\"", "file:///one", "one"),
        add_line("1.50", "file:///two", "two"),
        r#"{"jsonrpc":"2.0","id":3,"method":"roots.list","params":{}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":"four","method":"roots.remove","params":{"targets":[{"input":"one","uri":"file:///one"}]}}"#.to_owned(),
    ];
    client.send_line(&lines.join("\n"));
    let answers: Vec<String> = (0..4)
        .map(|_| client.read_line().expect("an answer"))
        .collect();
    let ids: Vec<&str> = answers
        .iter()
        .map(|a| &a[r#"{"jsonrpc":"2.0","id":"#.len()..a.find(r#","result""#).expect(a)])
        .collect();
    assert_eq!(ids, ["\"a\"", "1.50", "3", "\"four\""], "{answers:?}");
    let answers: Vec<Value> = answers
        .iter()
        .map(|a| serde_json::from_str(a).expect("JSON"))
        .collect();
    assert_eq!(answers[0]["result"]["revision"], json!(1), "{answers:?}");
    assert_eq!(answers[1]["result"]["revision"], json!(2), "{answers:?}");
    // The read between the changes saw the second, which was durable before it was answered.
    let listed: Vec<&str> = answers[2]["result"]["roots"]
        .as_array()
        .expect("roots")
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["file:///one", "file:///two"], "{answers:?}");
    assert_eq!(answers[3]["result"]["revision"], json!(3), "{answers:?}");
    assert_eq!(
        answers[3]["result"]["removed"][0]["uri"],
        json!("file:///one")
    );
    for answer in &answers {
        assert!(answer["result"].is_object(), "{answer}");
    }
    assert_eq!(answers[0]["result"]["notified_sessions"], json!(0));
}

#[test]
fn a_client_that_stops_sending_still_gets_the_answer_to_its_change() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let stream = UnixStream::connect(&sb.socket).expect("connect");
    let mut client = RawClient::from_stream(stream.try_clone().expect("clone"));
    client.send_line(&rootsd_tests::hello_line(1));
    client.send_line(&add_line("2", "file:///half", "half"));
    // As `printf … | nc -U` does: nothing more will be sent, but the answers are still read.
    stream
        .shutdown(Shutdown::Write)
        .expect("shut down the write side");
    let hello = client.read_json();
    assert!(hello["result"].is_object(), "{hello}");
    let added = client.read_json();
    assert_eq!(added["id"], json!(2), "{added}");
    assert_eq!(added["result"]["revision"], json!(1), "{added}");
    assert_eq!(
        client.read_line(),
        None,
        "then the daemon closes the connection"
    );
    let listed = sb.roots("default");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["uri"], json!("file:///half"));
}

#[test]
fn a_watcher_that_makes_a_change_reads_its_answer_before_the_push_it_causes() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut client = sb.connect();
    let watching = client.request("watch", json!({}));
    assert!(watching["result"].is_object(), "{watching}");
    for k in 1..=20 {
        client.send_line(&add_line(&k.to_string(), &format!("file:///w{k}"), "w"));
        let answer = client.read_json();
        assert_eq!(answer["id"], json!(k), "the answer comes first: {answer}");
        assert_eq!(answer["result"]["revision"], json!(k), "{answer}");
        let push = client.read_json();
        assert_eq!(push["method"], json!("roots.changed"), "{push}");
        assert_eq!(push["params"]["revision"], json!(k), "{push}");
    }
}

#[test]
fn the_answer_to_a_change_counts_the_sessions_told_of_it() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    // Two sessions whose servers hold a list and were promised `listChanged`, and one whose
    // server was not: only the first two are told of changes.
    let mut sessions: Vec<RawClient> = (0..3)
        .map(|k| {
            let mut session = sb.connect();
            let state = json!({"list_changed": k != 2, "initialized": true, "fetched_revision": 0});
            let registered = session.request(
                "session.register",
                json!({"workspace": "counted", "label": "s", "pid": 100 + k, "state": state}),
            );
            assert!(registered["result"].is_object(), "{registered}");
            session
        })
        .collect();
    let mut client = sb.connect();
    let change =
        json!({"workspace": "counted", "roots": [{"uri": "file:///told", "name": "told"}]});
    let added = client.request("roots.add", change.clone());
    assert_eq!(
        added["result"]["notified_sessions"],
        json!(2),
        "the two sessions that declared listChanged: {added}"
    );
    // Asked again, nothing changes, nobody is told, and the answer comes at once.
    let again = client.request("roots.add", change);
    assert_eq!(again["result"]["revision"], added["result"]["revision"]);
    assert_eq!(again["result"]["notified_sessions"], json!(0), "{again}");
    let removed = client.request(
        "roots.remove",
        json!({"workspace": "counted", "targets": [{"input": "told", "uri": "file:///told"}]}),
    );
    assert_eq!(
        removed["result"]["notified_sessions"],
        json!(2),
        "{removed}"
    );
    // The told sessions heard of both changes.
    for session in &mut sessions[..2] {
        for revision in [1, 2] {
            let push = session.read_json();
            assert_eq!(push["method"], json!("roots.changed"), "{push}");
            assert_eq!(push["params"]["revision"], json!(revision), "{push}");
        }
    }
}
