//! The limits of issue 16: what sessions, publications and connections may make the daemon
//! hold, each refused or cut at a documented bound (`daemon/src/limits.rs`) with the
//! commands everyone else needs still working.

use rootsd_tests::{RawClient, Sandbox};
use serde_json::{Value, json};

/// A process's resident memory now, in MiB.
fn rss_mib(pid: i32) -> u64 {
    rootsd_tests::memory(pid as u32)
        .expect("read the daemon's memory")
        .rss_kib
        / 1024
}

/// A greeted raw connection.
fn greeted(sb: &Sandbox) -> RawClient {
    let mut client = RawClient::connect(&sb.socket);
    let hello = client.request(
        "hello",
        json!({"protocol_version": rootsd_tests::PROTOCOL_VERSION, "client": "test"}),
    );
    assert!(hello.get("result").is_some(), "{hello}");
    client
}

#[test]
fn huge_session_reports_are_cut_and_sessions_lists_every_session_in_pages_that_fit_a_line() {
    const SESSIONS: usize = 100;
    const HUGE: usize = 400 * 1024;
    rootsd_tests::raise_fd_limit(SESSIONS as u64 + 256).expect("raise the open-file limit");
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    let baseline = rss_mib(daemon.pid());
    let mut sessions = Vec::with_capacity(SESSIONS);
    for i in 0..SESSIONS {
        let mut client = greeted(&sb);
        let registered = client.request(
            "session.register",
            json!({"pid": 1, "label": format!("{i}:{}", "l".repeat(HUGE))}),
        );
        assert!(registered.get("result").is_some(), "{registered}");
        let withheld: Vec<Value> = (0..16)
            .map(|n| json!({"uri": format!("file:///{}{n}", "w".repeat(4000)), "reason": "outside_map"}))
            .collect();
        let updated = client.request(
            "session.update",
            json!({
                "protocol_version": "p".repeat(HUGE / 4),
                "server": {"name": "n".repeat(HUGE / 2), "version": "v".repeat(HUGE / 4)},
                "withheld": {"outside_map": 16, "roots": withheld},
            }),
        );
        assert!(updated.get("result").is_some(), "{updated}");
        sessions.push(client);
    }
    let held = rss_mib(daemon.pid());
    // Every session is listed, by rootsctl paging through answers that each fit a line.
    let listed: Value = serde_json::from_str(&sb.ctl_ok(&["sessions", "--json"])).unwrap();
    let listed = listed["sessions"].as_array().unwrap();
    assert_eq!(listed.len(), SESSIONS);
    for session in listed {
        assert_eq!(
            session["label"].as_str().unwrap().len(),
            256,
            "{}",
            session["id"]
        );
        assert_eq!(session["server"]["name"].as_str().unwrap().len(), 256);
        assert_eq!(session["server"]["version"].as_str().unwrap().len(), 256);
        assert_eq!(session["protocol_version"].as_str().unwrap().len(), 64);
        assert_eq!(session["withheld"]["outside_map"], json!(16));
        assert_eq!(session["withheld"]["roots"].as_array().unwrap().len(), 1);
    }
    let table = sb.ctl_ok(&["sessions"]);
    assert_eq!(
        table.lines().count(),
        SESSIONS + 1,
        "a header and a row each"
    );
    // The first page stops short of the line limit and says more follow.
    let mut client = greeted(&sb);
    let mut line_client = RawClient::connect(&sb.socket);
    line_client.send_line(&rootsd_tests::hello_line(1));
    line_client.read_line().unwrap();
    line_client.send_line(r#"{"jsonrpc":"2.0","id":2,"method":"sessions.list"}"#);
    let page = line_client.read_line().unwrap();
    assert!(page.len() < 1 << 20, "a page of {} bytes", page.len());
    let page: Value = serde_json::from_str(&page).unwrap();
    assert_eq!(
        page["result"]["more"],
        json!(true),
        "{}",
        page["result"]["sessions"].as_array().unwrap().len()
    );
    let last = page["result"]["sessions"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["id"]
        .clone();
    let next = client.request("sessions.list", json!({"after": last}));
    assert!(
        next["result"]["sessions"][0]["id"].as_u64() > last.as_u64(),
        "{next}"
    );
    eprintln!(
        "{SESSIONS} sessions each sending {} KiB of texts: RSS {baseline} MiB -> {held} MiB",
        (HUGE * 2 + 16 * 4000) / 1024
    );
    assert!(
        held <= baseline + 64,
        "{SESSIONS} sessions took the daemon from {baseline} to {held} MiB"
    );
}

/// `count` roots `file:///PREFIX/N` named with `name_bytes` bytes each.
fn roots(prefix: &str, count: usize, name_bytes: usize) -> Vec<Value> {
    (0..count)
        .map(|i| json!({"uri": format!("file:///{prefix}/{i}"), "name": format!("{i}{}", "n".repeat(name_bytes))}))
        .collect()
}

#[test]
fn no_source_of_roots_grows_a_workspace_past_its_bounds_and_every_list_still_fits_a_line() {
    const SESSIONS: usize = 24;
    rootsd_tests::raise_fd_limit(SESSIONS as u64 + 256).expect("raise the open-file limit");
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    let baseline = rss_mib(daemon.pid());
    let mut hand = greeted(&sb);

    // By hand: 4,096 roots is the limit, one more is refused whole.
    let added = hand.request(
        "roots.add",
        json!({"workspace": "many", "roots": roots("many", 4096, 0)}),
    );
    assert_eq!(added["result"]["total"], json!(4096), "{}", added["error"]);
    let refused = hand.request(
        "roots.add",
        json!({"workspace": "many", "roots": roots("more", 2, 0)}),
    );
    assert_eq!(refused["error"]["code"], json!(-32010), "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("MAX_WORKSPACE_ROOTS = 4096") && message.contains("nothing was changed"),
        "{message}"
    );
    assert_eq!(sb.roots("many").len(), 4096);

    // Publications: 24 sessions each publishing 1,024 roots of 400-byte names, as the issue's
    // attack did, into the workspace a watcher and a session that publishes nothing follow.
    let mut watcher = greeted(&sb);
    watcher.request("watch", json!({"workspace": "default"}));
    let mut follower = greeted(&sb);
    follower.request("session.register", json!({"pid": 1, "label": "follower"}));
    let mut publishers = Vec::new();
    let (mut published, mut limited) = (0, 0);
    for i in 0..SESSIONS {
        let mut session = greeted(&sb);
        session.request(
            "session.register",
            json!({"pid": 1, "label": format!("publisher {i}")}),
        );
        let answer = session.request(
            "session.publish",
            json!({"roots": roots(&format!("s{i}"), 1024, 400)}),
        );
        match answer["error"]["code"].as_i64() {
            None => published += 1,
            Some(-32010) => {
                limited += 1;
                let message = answer["error"]["message"].as_str().unwrap();
                assert!(
                    message.contains("MAX_WORKSPACE_BYTES = 524288"),
                    "{message}"
                );
            }
            Some(_) => panic!("{answer}"),
        }
        publishers.push(session);
    }
    assert!(
        published >= 1 && limited >= SESSIONS - 2,
        "{published} published, {limited} refused"
    );
    let held = rss_mib(daemon.pid());
    // Everyone else still gets whole lists, each within the line limit.
    let listed = sb.ctl_ok(&["list", "--json"]);
    assert!(
        listed.len() < 1 << 20,
        "list --json printed {} bytes",
        listed.len()
    );
    let listing = hand.request("roots.list", json!({}));
    assert!(listing["result"]["roots"].as_array().unwrap().len() <= 1024 * 2);
    for (who, client) in [
        ("the watcher", &mut watcher),
        ("the follower", &mut follower),
    ] {
        let mut pushes = 0;
        client.send_line(r#"{"jsonrpc":"2.0","id":99,"method":"status"}"#);
        loop {
            let line = client.read_line().expect("the daemon keeps the connection");
            assert!(
                line.len() <= 1 << 20,
                "{who} was pushed a line of {} bytes",
                line.len()
            );
            if line.contains(r#""id":99"#) {
                break;
            }
            pushes += 1;
        }
        assert!(pushes >= 1, "{who} was pushed nothing");
    }
    let table = sb.ctl_ok(&["sessions"]);
    assert_eq!(
        table.lines().count(),
        SESSIONS + 2,
        "every session is still attached"
    );
    eprintln!(
        "{SESSIONS} sessions x 1,024 roots of 400-byte names: {published} publications taken, {limited} refused; RSS {baseline} -> {held} MiB; list --json {} bytes",
        listed.len()
    );
}
