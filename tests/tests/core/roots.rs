//! Adding, listing and removing roots through rootsctl.

use std::collections::BTreeSet;

use rootsd_tests::{Sandbox, output_within};
use serde_json::{Value, json};

use crate::support::{assert_exit, ctl_json, decode, plain_uri, status, stderr_of, uris};

#[test]
fn list_json_prints_exactly_the_mcp_roots_result() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    assert_eq!(ctl_json(&sb, &["list", "--json"]), json!({"roots": []}));
    let app = sb.mkdir("app");
    sb.ctl_ok(&["add", app.to_str().unwrap()]);
    assert_eq!(
        ctl_json(&sb, &["list", "--json"]),
        json!({"roots": [{"uri": plain_uri(&app), "name": "app"}]})
    );
}

#[test]
fn adding_an_existing_root_is_idempotent_and_name_renames() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let dir = sb.mkdir("proj");
    let path = dir.to_str().unwrap();

    let first = ctl_json(&sb, &["add", path, "--json"]);
    assert_eq!(first["added"].as_array().unwrap().len(), 1, "{first}");
    let revision = first["revision"].as_u64().unwrap();

    // The same directory, however it is spelt, is the same root.
    let trailing = format!("{path}/");
    let dotted = format!("{path}/./../proj");
    for spelling in [path, trailing.as_str(), dotted.as_str(), "proj", "./proj/"] {
        let again = ctl_json(&sb, &["add", spelling, "--json"]);
        assert_eq!(again["revision"], json!(revision), "{spelling}: {again}");
        assert_eq!(again["added"], json!([]), "{spelling}: {again}");
        assert_eq!(again["unchanged"].as_array().unwrap().len(), 1, "{again}");
        assert_eq!(again["total"], json!(1), "{again}");
    }
    let roots = sb.roots("default");
    assert_eq!(roots, vec![json!({"uri": plain_uri(&dir), "name": "proj"})]);
    assert_eq!(status(&sb)["revision"], json!(revision));

    // --name renames the existing root in place.
    let renamed = ctl_json(&sb, &["add", path, "--name", "My Project", "--json"]);
    assert_eq!(renamed["renamed"].as_array().unwrap().len(), 1, "{renamed}");
    assert_eq!(renamed["revision"], json!(revision + 1), "{renamed}");
    // Adding it again without --name keeps the new name.
    let kept = ctl_json(&sb, &["add", path, "--json"]);
    assert_eq!(kept["revision"], json!(revision + 1), "{kept}");
    assert_eq!(
        sb.roots("default"),
        vec![json!({"uri": plain_uri(&dir), "name": "My Project"})]
    );
}

#[test]
fn relative_paths_resolve_against_the_working_directory() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let here = sb.mkdir("work/here");
    let sibling = sb.mkdir("work/sibling");
    let output = output_within(
        sb.rootsctl()
            .current_dir(&here)
            .args(["add", ".", "../sibling"]),
    );
    assert_exit(&output, 0, "add . ../sibling");
    assert_eq!(
        sb.roots("default"),
        vec![
            json!({"uri": plain_uri(&here), "name": "here"}),
            json!({"uri": plain_uri(&sibling), "name": "sibling"}),
        ]
    );
}

/// Directory names that need percent-encoding, with the exact encoding rootsd must store.
const AWKWARD_NAMES: &[(&str, &str)] = &[
    ("a b#c%d?ü", "a%20b%23c%25d%3F%C3%BC"),
    ("%41", "%2541"),
    ("100% done", "100%25%20done"),
    ("#", "%23"),
    ("?", "%3F"),
    ("日本 語", "%E6%97%A5%E6%9C%AC%20%E8%AA%9E"),
];

#[test]
fn awkward_paths_round_trip_to_the_same_percent_encoded_uri() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let base = sb.mkdir("odd");
    let mut expected = Vec::new();
    for (index, (name, encoded)) in AWKWARD_NAMES.iter().enumerate() {
        let dir = sb.mkdir(&format!("odd/{name}"));
        // Alternate absolute and relative spellings.
        let arg = if index % 2 == 0 {
            dir.to_str().unwrap().to_owned()
        } else {
            format!("odd/{name}")
        };
        let output = sb.ctl(&["add", &arg]);
        assert_exit(&output, 0, &format!("add {arg:?}"));
        expected.push(json!({
            "uri": format!("{}/{encoded}", plain_uri(&base)),
            "name": name,
        }));
    }
    let roots = sb.roots("default");
    assert_eq!(roots, expected);
    for (root, (name, _)) in roots.iter().zip(AWKWARD_NAMES) {
        let uri = root["uri"].as_str().unwrap();
        assert_eq!(
            decode(uri),
            base.join(name),
            "{uri} decodes to the real path"
        );
        assert!(decode(uri).is_dir(), "{uri}");
    }
    // The URIs survive a second look unchanged: no double encoding on re-add.
    for (name, _) in AWKWARD_NAMES {
        sb.ctl_ok(&["add", base.join(name).to_str().unwrap()]);
    }
    assert_eq!(sb.roots("default"), expected);
}

#[test]
fn file_uris_get_the_same_checks_and_canonical_form_as_paths() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let base = sb.mkdir("uris");
    let dir = sb.mkdir("uris/a b#c%d?ü");
    let canonical = format!("{}/a%20b%23c%25d%3F%C3%BC", plain_uri(&base));
    let base_path = base.to_str().unwrap();

    // localhost, lower-case escapes, an upper-case scheme and a trailing slash all canonicalise.
    let sloppy = format!("FILE://localhost{base_path}/a%20b%23c%25d%3f%c3%bc/");
    let added = ctl_json(&sb, &["add", &sloppy, "--json"]);
    assert_eq!(
        added["added"],
        json!([{"uri": canonical, "name": "a b#c%d?ü"}]),
        "{added}"
    );
    // The canonical URI and the plain path are the same root.
    for same in [canonical.as_str(), dir.to_str().unwrap()] {
        let again = ctl_json(&sb, &["add", same, "--json"]);
        assert_eq!(again["added"], json!([]), "{same}: {again}");
    }
    assert_eq!(
        sb.roots("default"),
        vec![json!({"uri": canonical, "name": "a b#c%d?ü"})]
    );
    let revision = status(&sb)["revision"].clone();

    // The checks a path gets: it must exist and be a directory.
    std::fs::write(base.join("file.txt"), "not a directory").unwrap();
    let refused = [
        (format!("file://{base_path}/missing"), "does not exist"),
        (format!("file://{base_path}/file.txt"), "not a directory"),
        // And what only a URI can get wrong.
        ("file://example.com/srv/x".to_owned(), "example.com"),
        (format!("file://{base_path}/a?b"), "query"),
        (format!("file://{base_path}/a#b"), "fragment"),
    ];
    for (uri, reason) in &refused {
        let output = sb.ctl(&["add", uri]);
        assert_exit(&output, 1, &format!("add {uri}"));
        let err = stderr_of(&output);
        assert!(err.contains(uri.as_str()), "the message names {uri}: {err}");
        assert!(err.contains(reason), "the message says {reason:?}: {err}");
    }
    assert_eq!(sb.roots("default").len(), 1);
    assert_eq!(status(&sb)["revision"], revision, "nothing was stored");
}

#[test]
fn a_symlink_is_stored_as_its_target() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let real = sb.mkdir("targets/real");
    let links = sb.mkdir("links");
    std::os::unix::fs::symlink("../targets/real", links.join("rel-link")).unwrap();
    std::os::unix::fs::symlink(&real, links.join("abs-link")).unwrap();
    std::os::unix::fs::symlink(links.join("abs-link"), links.join("chain")).unwrap();

    sb.ctl_ok(&["add", "links/rel-link"]);
    assert_eq!(uris(&sb.roots("default")), vec![plain_uri(&real)]);
    // Every way to the same directory is the same root.
    let chain = ctl_json(
        &sb,
        &["add", links.join("chain").to_str().unwrap(), "--json"],
    );
    assert_eq!(chain["added"], json!([]), "{chain}");
    let via_uri = format!("{}/abs-link", plain_uri(&links));
    let by_uri = ctl_json(&sb, &["add", &via_uri, "--json"]);
    assert_eq!(by_uri["added"], json!([]), "{by_uri}");
    sb.ctl_ok(&["add", real.to_str().unwrap()]);
    assert_eq!(uris(&sb.roots("default")), vec![plain_uri(&real)]);

    // Removing through the link removes the target.
    sb.ctl_ok(&["remove", "links/abs-link"]);
    assert_eq!(sb.roots("default"), Vec::<Value>::new());
}

#[test]
fn missing_paths_files_and_other_schemes_are_refused_and_nothing_is_stored() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let good = sb.mkdir("good");
    std::fs::write(sb.path().join("notes.txt"), "hello").unwrap();
    let cases = [
        ("no-such-dir", "does not exist"),
        ("notes.txt", "not a directory"),
        ("https://example.com/repo", "file://"),
    ];
    for (input, reason) in cases {
        // Alone, and next to an acceptable directory: either way nothing is added.
        for args in [
            vec!["add", input],
            vec!["add", good.to_str().unwrap(), input],
        ] {
            let output = sb.ctl(&args);
            assert_exit(&output, 1, &format!("{args:?}"));
            let err = stderr_of(&output);
            assert!(err.contains(input), "the message names {input:?}: {err}");
            assert!(err.contains(reason), "the message says {reason:?}: {err}");
            assert!(output.stdout.is_empty(), "{args:?} printed to stdout");
        }
    }
    assert_eq!(sb.roots("default"), Vec::<Value>::new());
    let status = status(&sb);
    assert_eq!(status["revision"], json!(0), "{status}");
    assert_eq!(status["roots"], json!(0), "{status}");
}

#[test]
fn allow_missing_accepts_a_path_that_does_not_exist_yet() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let base = sb.mkdir("later");
    let output = sb.ctl(&["add", "--allow-missing", "later/not/yet"]);
    assert_exit(&output, 0, "add --allow-missing");
    assert_eq!(
        sb.roots("default"),
        vec![json!({"uri": format!("{}/not/yet", plain_uri(&base)), "name": "yet"})]
    );
}

#[test]
fn removing_an_unknown_root_changes_nothing() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let keep = sb.mkdir("keep");
    let other = sb.mkdir("other");
    sb.ctl_ok(&["add", keep.to_str().unwrap(), other.to_str().unwrap()]);
    let before = sb.roots("default");
    let revision = status(&sb)["revision"].clone();

    let unknown = sb.mkdir("never-added");
    for args in [
        vec!["remove", unknown.to_str().unwrap()],
        vec!["remove", "no-such-name"],
        // A known root next to an unknown one: the known one is kept too.
        vec!["remove", keep.to_str().unwrap(), unknown.to_str().unwrap()],
        vec!["remove", "keep", "no-such-name"],
    ] {
        let output = sb.ctl(&args);
        assert_exit(&output, 1, &format!("{args:?}"));
        let err = stderr_of(&output);
        let named = args.last().unwrap();
        assert!(err.contains(named), "the message names {named:?}: {err}");
        assert_eq!(sb.roots("default"), before, "{args:?} changed the roots");
    }
    assert_eq!(status(&sb)["revision"], revision);
}

#[test]
fn remove_accepts_a_path_a_uri_or_a_name() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let by_path = sb.mkdir("by-path");
    let by_uri = sb.mkdir("by-uri");
    let by_name = sb.mkdir("by-name");
    let last = sb.mkdir("last");
    for dir in [&by_path, &by_uri, &by_name, &last] {
        sb.ctl_ok(&["add", dir.to_str().unwrap()]);
    }
    sb.ctl_ok(&["add", by_name.to_str().unwrap(), "--name", "nickname"]);

    let removed = sb.ctl_ok(&["remove", "by-path"]);
    assert!(removed.contains("removed"), "{removed}");
    sb.ctl_ok(&["remove", &plain_uri(&by_uri)]);
    // Run from elsewhere so the name cannot be mistaken for a path.
    let output = output_within(
        sb.rootsctl()
            .current_dir(sb.mkdir("elsewhere"))
            .args(["remove", "nickname"]),
    );
    assert_exit(&output, 0, "remove nickname");
    assert_eq!(uris(&sb.roots("default")), vec![plain_uri(&last)]);

    // Removing the last root works, with a warning about servers that ignore empty lists.
    let output = sb.ctl(&["remove", "last"]);
    assert_exit(&output, 0, "remove the last root");
    let warning = stderr_of(&output);
    assert!(warning.contains("warning"), "{warning}");
    assert!(
        warning.contains("keep their previous roots") && warning.contains("empty list"),
        "{warning}"
    );
    assert_eq!(sb.roots("default"), Vec::<Value>::new());
}

#[test]
fn workspaces_stay_separate() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let a = sb.mkdir("a");
    let b = sb.mkdir("b");
    let shared = sb.mkdir("shared");
    sb.ctl_ok(&["add", "a", "shared", "--workspace", "alpha"]);
    sb.ctl_ok(&["add", "b", "shared", "-w", "beta"]);

    assert_eq!(
        uris(&sb.roots("alpha")),
        vec![plain_uri(&a), plain_uri(&shared)]
    );
    assert_eq!(
        uris(&sb.roots("beta")),
        vec![plain_uri(&b), plain_uri(&shared)]
    );
    assert_eq!(sb.roots("default"), Vec::<Value>::new());
    assert_eq!(
        ctl_json(&sb, &["workspaces", "--json"]),
        json!({"workspaces": [
            {"name": "alpha", "roots": 2, "sessions": 0},
            {"name": "beta", "roots": 2, "sessions": 0},
        ]})
    );

    // A root of one workspace is unknown in another.
    let output = sb.ctl(&["remove", "a", "--workspace", "beta"]);
    assert_exit(&output, 1, "remove alpha's root from beta");
    // Removing a shared directory from one workspace leaves the other alone.
    sb.ctl_ok(&["remove", "shared", "--workspace", "alpha"]);
    assert_eq!(uris(&sb.roots("alpha")), vec![plain_uri(&a)]);
    assert_eq!(
        uris(&sb.roots("beta")),
        vec![plain_uri(&b), plain_uri(&shared)]
    );

    let all = ctl_json(&sb, &["list", "--all", "--json"]);
    let names: Vec<&str> = all["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta"], "{all}");
}

#[test]
fn fifty_concurrent_adds_leave_exactly_fifty_roots() {
    const N: usize = 50;
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let dirs: Vec<_> = (0..N).map(|i| sb.mkdir(&format!("many/d{i:02}"))).collect();
    let runs: Vec<_> = dirs
        .iter()
        .map(|dir| {
            let mut cmd = sb.rootsctl();
            cmd.arg("add").arg(dir);
            std::thread::spawn(move || output_within(&mut cmd))
        })
        .collect();
    for (run, dir) in runs.into_iter().zip(&dirs) {
        let output = run.join().expect("a rootsctl thread");
        assert_exit(&output, 0, &format!("add {}", dir.display()));
    }
    let listed = uris(&sb.roots("default"));
    assert_eq!(listed.len(), N, "{listed:#?}");
    let listed: BTreeSet<String> = listed.into_iter().collect();
    let expected: BTreeSet<String> = dirs.iter().map(|d| plain_uri(d)).collect();
    assert_eq!(listed, expected);
    let status = status(&sb);
    assert_eq!(status["roots"], json!(N), "{status}");
    assert_eq!(
        status["revision"],
        json!(N),
        "one revision per add: {status}"
    );
}

#[test]
fn one_root_named_twice_in_a_remove_is_removed_once() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let app = sb.mkdir("app");
    let keep = sb.mkdir("keep");
    sb.ctl_ok(&["add", app.to_str().unwrap(), keep.to_str().unwrap()]);
    let output = sb.ctl(&["remove", "--json", "app", &plain_uri(&app)]);
    assert_exit(&output, 0, "remove one root by name and by URI");
    let change: serde_json::Value = serde_json::from_slice(&output.stdout).expect("remove --json");
    assert_eq!(
        change["removed"].as_array().map(Vec::len),
        Some(1),
        "{change}"
    );
    assert_eq!(uris(&sb.roots("default")), vec![plain_uri(&keep)]);
}
