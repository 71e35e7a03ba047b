//! `rootsctl log`: every change, newest first, with who made it, kept in the store, bounded, and
//! surviving restarts, crashes, `--recover` and the journal's compaction.

use std::process::Output;
use std::time::{SystemTime, UNIX_EPOCH};

use rootsd_tests::{Daemon, RawClient, Sandbox, output_within};
use rustix::process::Signal;
use serde_json::{Value, json};

use crate::support::{assert_exit, ctl_json, plain_uri, stderr_of, stdout_of};

/// Runs `rootsctl ARGS`, which must succeed; returns its pid and stdout.
fn ctl_with_pid(sb: &Sandbox, args: &[&str]) -> (u32, String) {
    let child = sb
        .rootsctl()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run rootsctl");
    let pid = child.id();
    let output: Output = child.wait_with_output().expect("wait for rootsctl");
    assert_exit(&output, 0, &format!("rootsctl {args:?}"));
    (pid, stdout_of(&output))
}

/// The name of uid `uid` in /etc/passwd, as `id` finds it.
fn user_name(uid: u32) -> String {
    let output = output_within(std::process::Command::new("id").args(["-nu", &uid.to_string()]));
    assert_exit(&output, 0, "id -nu");
    stdout_of(&output).trim().to_owned()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn revisions(log: &Value) -> Vec<u64> {
    log["entries"]
        .as_array()
        .expect("an entries array")
        .iter()
        .map(|e| e["revision"].as_u64().expect("a revision"))
        .collect()
}

fn stop(mut daemon: Daemon) {
    daemon.signal(Signal::TERM);
    let status = daemon.wait();
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr());
}

#[test]
fn log_lists_every_change_newest_first_naming_the_user_and_the_rootsctl_process_that_made_it() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let [a, b, c] = ["a", "b", "c"].map(|name| sb.mkdir(name));
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let started = now_ms();
    let (first, _) = ctl_with_pid(&sb, &["add", &path(&a), &path(&b)]);
    let (second, _) = ctl_with_pid(&sb, &["add", &path(&a), "--name", "alpha"]);
    let (third, _) = ctl_with_pid(&sb, &["add", "-w", "work", &path(&c)]);
    let (fourth, _) = ctl_with_pid(&sb, &["remove", &path(&b)]);
    // Nothing changes, so nothing is logged.
    ctl_with_pid(&sb, &["add", &path(&a)]);
    let finished = now_ms();
    let uid = rustix::process::geteuid().as_raw();
    let user = user_name(uid);

    let table = sb.ctl_ok(&["log"]);
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 5, "{table}");
    for header in ["TIME", "REV", "WORKSPACE", "WHO", "CHANGE"] {
        assert!(rows[0].contains(header), "{table}");
    }
    let who = |pid: u32| format!("  {user} (uid {uid}), rootsctl[{pid}]  ");
    let expected = [
        ("4", "default", fourth, format!("-{}", path(&b))),
        ("3", "work", third, format!("+{}", path(&c))),
        (
            "2",
            "default",
            second,
            format!("renamed {} (a → alpha)", path(&a)),
        ),
        (
            "1",
            "default",
            first,
            format!("+{}  +{}", path(&a), path(&b)),
        ),
    ];
    for (row, (revision, workspace, pid, change)) in rows[1..].iter().zip(&expected) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1..3], [*revision, *workspace], "{row}");
        assert!(row.contains(&who(*pid)), "{row} names {}", who(*pid));
        assert!(row.ends_with(change.as_str()), "{row} ends with {change}");
        assert!(cells[0].ends_with('Z') && cells[0].len() == 20, "{row}");
    }

    let log = ctl_json(&sb, &["log", "--json"]);
    assert_eq!(revisions(&log), [4, 3, 2, 1]);
    assert_eq!(
        (&log["more"], &log["recorded_from"], &log["capacity"]),
        (&json!(false), &json!(1), &json!(1000))
    );
    let newest = &log["entries"][0];
    assert_eq!(newest["workspace"], json!("default"));
    assert_eq!(
        newest["removed"],
        json!([{"uri": plain_uri(&b), "name": "b"}])
    );
    assert_eq!(newest["who"]["kind"], json!("peer"));
    assert_eq!(newest["who"]["uid"], json!(uid));
    assert_eq!(newest["who"]["user"], json!(user));
    assert_eq!(newest["who"]["pid"], json!(fourth));
    assert_eq!(newest["who"]["process"], json!("rootsctl"));
    assert!(
        newest["who"]["client"]
            .as_str()
            .is_some_and(|c| c.starts_with("rootsctl ")),
        "{newest}"
    );
    let renamed = &log["entries"][2]["renamed"];
    assert_eq!(
        renamed,
        &json!([{"uri": plain_uri(&a), "name": "alpha", "previous_name": "a"}])
    );
    for entry in log["entries"].as_array().unwrap() {
        let time = entry["time_unix_ms"].as_u64().unwrap();
        assert!((started..=finished).contains(&time), "{entry}");
    }

    // -w and -n select; --json says whether older ones remain.
    assert_eq!(
        revisions(&ctl_json(&sb, &["log", "--json", "-w", "work"])),
        [3]
    );
    let two = ctl_json(&sb, &["log", "--json", "-n", "2"]);
    assert_eq!((revisions(&two), &two["more"]), (vec![4, 3], &json!(true)));
    let default = ctl_json(&sb, &["log", "--json", "-n", "2", "-w", "default"]);
    assert_eq!(revisions(&default), [4, 2]);
    let one = sb.ctl_ok(&["log", "-n", "1", "-w", "work"]);
    assert_eq!(one.lines().count(), 2, "{one}");
    assert!(one.contains(&format!("+{}", path(&c))), "{one}");
    assert_eq!(
        sb.ctl_ok(&["log", "-w", "elsewhere"]),
        "no changes recorded for workspace elsewhere\n"
    );
    for bad in [
        &["log", "-n", "0"][..],
        &["log", "-n", "x"],
        &["log", "-w", "a b"],
    ] {
        assert_exit(&sb.ctl(bad), 2, &format!("rootsctl {bad:?}"));
    }
}

#[test]
fn a_log_limit_of_zero_is_refused_rather_than_answered_with_more_and_nothing_to_page_from() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    sb.ctl_ok(&["add", sb.mkdir("one").to_str().unwrap()]);
    let mut client = RawClient::connect(&sb.socket);
    client.request(
        "hello",
        json!({"protocol_version": rootsd_tests::PROTOCOL_VERSION, "client": "test"}),
    );
    let answer = client.request("log", json!({"limit": 0}));
    assert_eq!(answer["error"]["code"], json!(-32602), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("at least 1"), "{message}");
    // A limit of one pages as before.
    let page = client.request("log", json!({"limit": 1}));
    assert_eq!(
        page["result"]["entries"].as_array().unwrap().len(),
        1,
        "{page}"
    );
    assert_eq!(page["result"]["more"], json!(false), "{page}");
}

#[test]
fn a_clients_claimed_name_is_recorded_apart_from_what_the_kernel_says() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let mut client = RawClient::connect(&sb.socket);
    let hello = client.request(
        "hello",
        json!({"protocol_version": rootsd_tests::PROTOCOL_VERSION, "client": "rootsctl 0.1.0 (honest, really)"}),
    );
    assert!(hello.get("result").is_some(), "{hello}");
    let added = client.request("roots.add", json!({"roots": [{"uri": "file:///claimed"}]}));
    assert!(added.get("result").is_some(), "{added}");
    let log = ctl_json(&sb, &["log", "--json"]);
    let who = &log["entries"][0]["who"];
    assert_eq!(who["client"], json!("rootsctl 0.1.0 (honest, really)"));
    // What the kernel knows: this test process, not rootsctl.
    assert_eq!(who["pid"], json!(std::process::id()));
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    assert_eq!(who["process"], json!(comm.trim_end()));
    assert_ne!(who["process"], json!("rootsctl"));
    // The table shows what the kernel said, not the claim.
    let table = sb.ctl_ok(&["log"]);
    assert!(
        table.contains(&format!("{}[{}]", comm.trim_end(), std::process::id())),
        "{table}"
    );
    assert!(!table.contains("honest"), "{table}");
}

#[test]
fn the_history_survives_a_restart_a_kill_9_before_the_checkpoint_and_recover() {
    let sb = Sandbox::new();
    let mut daemon = sb.start_daemon();
    let mut client = sb.connect();
    for i in 0..6 {
        let (method, params) = if i % 3 == 2 {
            let uri = format!("file:///kept/{}", i - 1);
            (
                "roots.remove",
                json!({"targets": [{"input": uri, "uri": uri}]}),
            )
        } else {
            (
                "roots.add",
                json!({"roots": [{"uri": format!("file:///kept/{i}")}]}),
            )
        };
        let reply = client.request(method, params);
        assert!(reply.get("result").is_some(), "{reply}");
    }
    let before = client.request("log", json!({}))["result"].clone();
    assert_eq!(revisions(&before), [6, 5, 4, 3, 2, 1]);
    // At once, before the idle checkpoint: only the journal holds these changes.
    daemon.signal(Signal::KILL);
    daemon.wait();
    drop(daemon);

    let daemon = sb.start_daemon();
    let after_crash = ctl_json(&sb, &["log", "--json"]);
    assert_eq!(after_crash, before, "after kill -9");
    stop(daemon);
    let daemon = sb.start_daemon();
    assert_eq!(
        ctl_json(&sb, &["log", "--json"]),
        before,
        "after a clean restart"
    );
    stop(daemon);

    // A lost database is refused, and --recover rebuilds it, history included, from the journal.
    std::fs::remove_dir_all(sb.state.join("db")).unwrap();
    let refused = output_within(&mut sb.rootsd());
    assert_ne!(refused.status.code(), Some(0), "{}", stderr_of(&refused));
    let recovered = output_within(sb.rootsd().arg("--recover"));
    assert_exit(&recovered, 0, "rootsd --recover");
    let _daemon = sb.start_daemon();
    assert_eq!(ctl_json(&sb, &["log", "--json"]), before, "after --recover");
}

/// The first record of the journal: its snapshot.
fn journal_snapshot(sb: &Sandbox) -> Value {
    let journal = std::fs::read_to_string(sb.state.join("roots.journal")).unwrap();
    let first = journal
        .lines()
        .next()
        .expect("a journal starts with a snapshot");
    serde_json::from_str(&first[9..]).expect("a record is a checksum and JSON")
}

#[test]
fn the_history_keeps_the_newest_1000_changes_through_compaction_paging_and_restarts() {
    let sb = Sandbox::new();
    let daemon = sb.start_daemon();
    let mut client = sb.connect();
    // Ten roots with long paths, renamed to long names: a change's journal record holds the
    // root it renames (about 1.3 KB), so 1,010 changes take the journal past its compaction
    // threshold.
    let long = "d".repeat(200);
    let uri = |k: usize| format!("file:///history/{long}/{k}");
    let name = |i: u64| format!("n{i}-{}", "x".repeat(1000));
    let roots: Vec<Value> = (0..10).map(|k| json!({"uri": uri(k)})).collect();
    let reply = client.request("roots.add", json!({"roots": roots}));
    assert!(reply.get("result").is_some(), "{reply}");
    let total: u64 = 1 + 1010;
    for i in 1..total {
        let rename = json!({"roots": [{"uri": uri(i as usize % 10), "name": name(i)}]});
        let reply = client.request("roots.add", rename);
        assert_eq!(reply["result"]["revision"], json!(i + 1), "{reply}");
    }

    // One response holds as many as fit in a page; rootsctl asks for the rest.
    let page = client.request("log", json!({}))["result"].clone();
    let first_page = revisions(&page).len();
    assert!(
        page["more"] == json!(true) && first_page < 1000,
        "{first_page}"
    );
    let log = ctl_json(&sb, &["log", "--json", "-n", "5000"]);
    let oldest = total - 999;
    assert_eq!(revisions(&log), (oldest..=total).rev().collect::<Vec<_>>());
    assert_eq!(
        (&log["more"], &log["recorded_from"]),
        (&json!(false), &json!(oldest))
    );
    let newest = &log["entries"][0]["renamed"][0];
    assert_eq!(newest["name"], json!(name(total - 1)));
    assert_eq!(newest["previous_name"], json!(name(total - 11)));
    let table = sb.ctl(&["log", "-n", "5000"]);
    assert_exit(&table, 0, "rootsctl log -n 5000");
    assert_eq!(stdout_of(&table).lines().count(), 1001);
    assert!(
        stderr_of(&table).contains(&format!(
            "changes before revision {oldest} are not recorded: rootsd keeps the last 1000 changes"
        )),
        "{}",
        stderr_of(&table)
    );

    // The journal was rewritten as one snapshot meanwhile, and the snapshot kept the history.
    let snapshot = journal_snapshot(&sb);
    assert_eq!(snapshot["kind"], json!("snapshot"));
    assert!(
        snapshot["revision"].as_u64().unwrap() > 1,
        "{}",
        snapshot["revision"]
    );
    assert!(!snapshot["history"].as_array().unwrap().is_empty());

    stop(daemon);
    let _daemon = sb.start_daemon();
    assert_eq!(
        ctl_json(&sb, &["log", "--json", "-n", "5000"]),
        log,
        "after a restart"
    );
}
