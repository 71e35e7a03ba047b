//! What a read-only member of the shared service may not do, with real users: publish its host's
//! roots into the workspace every admin's agents use (issue 16, item 1), or take the
//! connections the others need (item 8).

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;

use rootsd_tests::accounts::{Account, account, require_root, share_binary};
use rootsd_tests::{PATIENCE, Reaped, Sandbox, output_within};
use serde_json::{Value, json};

use crate::access::{ADMINS, MEMBERS, rootsctl_as, shared_service};
use crate::support::{assert_exit, text};

/// `rootsd-peer SOCKET LINES...` as `user`: the answer to hello and to each line.
fn raw_as(sb: &Sandbox, user: &Account, lines: &[Value]) -> Vec<Value> {
    let peer = share_binary(sb, "rootsd-peer");
    let mut cmd = user.command(peer);
    cmd.arg(&sb.socket).args(lines.iter().map(Value::to_string));
    let output = output_within(&mut cmd);
    assert_exit(&output, 0, "rootsd-peer");
    text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| json!(line)))
        .collect()
}

/// Every line `pipe` gives, on a channel.
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// The next line from `lines` that `matches`, within the harness's patience.
#[track_caller]
fn next_matching(
    lines: &mpsc::Receiver<String>,
    what: &str,
    matches: impl Fn(&str) -> bool,
) -> String {
    let deadline = std::time::Instant::now() + PATIENCE;
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(line) if matches(&line) => return line,
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    panic!("no line {what}; saw {seen:#?}")
}

fn uri_of(dir: &std::path::Path) -> String {
    format!("file://{}", dir.display())
}

#[test]
fn a_members_session_publish_is_refused_and_nothing_reaches_the_workspace() {
    require_root("real users and groups");
    let member = account("rootsd-test-member", &[MEMBERS]);
    let admin = account("rootsd-test-admin", &[MEMBERS, ADMINS]);
    let sb = Sandbox::new();
    let _daemon = shared_service(&sb);
    let rootsctl = share_binary(&sb, "rootsctl");
    let shared = sb.mkdir("shared");
    let etc = sb.mkdir("planted-etc");
    let run = |user: &Account, args: &[&str]| {
        output_within(&mut rootsctl_as(user, &rootsctl, &sb.socket, args))
    };
    assert_exit(
        &run(&admin, &["add", shared.to_str().unwrap()]),
        0,
        "an admin adds",
    );

    // The attack as the issue found it: a member registers a session and publishes.
    let answers = raw_as(
        &sb,
        &member,
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "session.register", "params": {"pid": 1, "label": "attacker"}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "session.publish", "params": {"roots": [{"uri": uri_of(&etc)}]}}),
        ],
    );
    assert!(answers[1]["result"]["session_id"].is_u64(), "{answers:?}");
    let refusal = &answers[2]["error"];
    assert_eq!(refusal["code"], json!(-32007), "{answers:?}");
    let message = refusal["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "uid {} may list, watch and attach sessions",
            member.uid
        )) && message.contains("nothing was changed"),
        "{message}"
    );

    // A member's proxy with --host-roots publish: told on its stderr, and the session is
    // still served (the server's lines still reach the host).
    let mut proxy = rootsctl_as(
        &member,
        &rootsctl,
        &sb.socket,
        &[
            "proxy",
            "--host-roots",
            "publish",
            "--name",
            "member-publisher",
            "--",
            "cat",
        ],
    );
    let mut child = proxy
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the member's proxy");
    let mut host = child.stdin.take().unwrap();
    let from_proxy = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    let _proxy = Reaped(child);
    let mut send = |message: Value| writeln!(host, "{message}").expect("write to the proxy");
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": true}}, "clientInfo": {"name": "host", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let asked = next_matching(&from_proxy, "asking the host for its roots", |l| {
        l.contains("\"roots/list\"") && l.contains("rootsd-roots")
    });
    let asked: Value = serde_json::from_str(&asked).unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": [{"uri": uri_of(&etc), "name": "etc"}]}}),
    );
    let told = next_matching(&stderr, "saying the publication was refused", |l| {
        l.contains("refused to publish")
    });
    assert!(
        told.contains("the session goes on with the workspace's roots")
            && told.contains(&format!("uid {} may list", member.uid)),
        "{told}"
    );
    send(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    next_matching(
        &from_proxy,
        "the host's ping relayed through the server",
        |l| l.contains("\"ping\""),
    );
    let sessions = sb.ctl_ok(&["sessions", "--json"]);
    assert!(sessions.contains("member-publisher"), "{sessions}");

    let roots = sb.ctl_ok(&["list", "--json"]);
    assert!(roots.contains(shared.to_str().unwrap()), "{roots}");
    assert!(
        !roots.contains("planted-etc"),
        "a member's roots reached the workspace: {roots}"
    );
    let log = sb.ctl_ok(&["log", "--json"]);
    assert!(!log.contains("planted-etc"), "{log}");
}

#[test]
fn a_member_holding_connections_gets_its_share_and_the_admin_and_the_owner_still_get_in() {
    require_root("real users and groups");
    const SHARE: usize = 2048;
    rootsd_tests::raise_fd_limit(2 * SHARE as u64 + 512).expect("raise the open-file limit");
    let member = account("rootsd-test-member", &[MEMBERS]);
    let admin = account("rootsd-test-admin", &[MEMBERS, ADMINS]);
    let sb = Sandbox::new();
    let _daemon = shared_service(&sb);
    let rootsctl = share_binary(&sb, "rootsctl");
    let peer = share_binary(&sb, "rootsd-peer");
    // The member opens as many greeted connections as it can, and holds them.
    let mut holder = member.command(&peer);
    holder
        .arg(&sb.socket)
        .args(["--hold", &(SHARE + 100).to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = holder.spawn().expect("start the member's holder");
    let _stdin = child.stdin.take();
    let said = lines_of(child.stdout.take().unwrap());
    let _holder = Reaped(child);
    let held = next_matching(&said, "saying how many it holds", |l| {
        l.starts_with("held ")
    });
    assert_eq!(held, format!("held {SHARE}"));
    let refused = next_matching(&said, "with the refusal", |l| l.starts_with("refused "));
    let refusal: Value = serde_json::from_str(refused.trim_start_matches("refused ")).unwrap();
    assert_eq!(refusal["error"]["code"], json!(-32009), "{refusal}");
    let message = refusal["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("uid {} holds {SHARE} connections", member.uid))
            && message.contains("CONNECTIONS_PER_UID"),
        "{message}"
    );
    // Meanwhile the admin and root (the owner's stand-in here) work as usual.
    let project = sb.mkdir("project");
    let added = output_within(&mut rootsctl_as(
        &admin,
        &rootsctl,
        &sb.socket,
        &["add", project.to_str().unwrap()],
    ));
    assert_exit(&added, 0, "the admin adds while the member holds its share");
    let status: Value = serde_json::from_str(&sb.ctl_ok(&["status", "--json"])).unwrap();
    assert!(
        status["clients"].as_u64().unwrap() > SHARE as u64,
        "{status}"
    );
}
