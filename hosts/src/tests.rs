//! The planner against real-shaped files of every host, as data: each case names the servers
//! that must be wrapped and those that must be left alone, and every case is held to the same
//! promises (only the wrapped entries' command and arguments change, the wrapped entry runs the
//! proxy in front of the original command, a second wrap changes nothing, unwrap gives back the
//! original bytes).

use super::format::Editor;
use super::plan::{self, Outcome, Transport, Wrapping};
use super::table::{self, Host};

/// What the binary gives `rootsctl hosts`: rootsctl's own parser decides which entries are behind
/// rootsd already.
const PROXY: plan::IsProxy = rootsctl::args::is_proxy;

const ROOTSCTL: &str = "/opt/rootsd/bin/rootsctl";

/// (host, file, servers wrapped, servers left alone)
const CASES: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "claude-desktop",
        include_str!("fixtures/claude-desktop.json"),
        &["filesystem", "memory"],
        &[],
    ),
    (
        "claude-code",
        include_str!("fixtures/claude-code.json"),
        &["git", "db"],
        &["sentry", "already"],
    ),
    (
        "vscode",
        include_str!("fixtures/vscode.jsonc"),
        &["fs", "py"],
        &["github"],
    ),
    (
        "cursor",
        include_str!("fixtures/cursor.json"),
        &["fs"],
        &["linear"],
    ),
    (
        "windsurf",
        include_str!("fixtures/windsurf.json"),
        &["puppeteer"],
        &["figma"],
    ),
    (
        "zed",
        include_str!("fixtures/zed.jsonc"),
        &["github"],
        &["remote"],
    ),
    (
        "gemini",
        include_str!("fixtures/gemini.json"),
        &["pythonTools"],
        &["httpServer"],
    ),
    (
        "codex",
        include_str!("fixtures/codex.toml"),
        &["fs", "plain", "inline", "dotted"],
        &["web", "wrapped"],
    ),
    (
        "goose",
        include_str!("fixtures/goose.yaml"),
        &["fs", "bare", "flow"],
        &["developer", "remote"],
    ),
    (
        "opencode",
        include_str!("fixtures/opencode.jsonc"),
        &["fs"],
        &["context7"],
    ),
    (
        "continue",
        include_str!("fixtures/continue.yaml"),
        &["Playwright", "sqlite"],
        &["remote"],
    ),
    (
        "cline",
        include_str!("fixtures/cline.json"),
        &["github.com/modelcontextprotocol/servers/tree/main/src/github"],
        &["remote"],
    ),
    (
        "lmstudio",
        include_str!("fixtures/lmstudio.json"),
        &["fetch"],
        &["hf"],
    ),
];

fn wrapping(host: &Host) -> Wrapping {
    Wrapping {
        rootsctl: ROOTSCTL.to_owned(),
        options: vec!["--workspace".to_owned(), "work".to_owned()],
        merge_host_roots: host.gives_roots,
        proxy: PROXY,
    }
}

/// `text` unwrapped by `host`'s editor with `remembered`, which must succeed.
fn unwrapped(
    host: &Host,
    text: &str,
    remembered: &[plan::Remembered],
) -> (plan::Plan, Vec<Outcome>) {
    plan::unwrap(text, host.format.editor(), &host.shape, remembered, PROXY).unwrap()
}

fn servers(host: &Host, text: &str) -> Vec<plan::Server> {
    plan::servers(
        &host.format.editor().parse(text).unwrap(),
        &host.shape,
        PROXY,
    )
}

/// `text` without the regions of the entries at `paths`.
fn outside(host: &Host, text: &str, paths: &[Vec<String>]) -> String {
    let root = host.format.editor().parse(text).unwrap();
    let mut regions: Vec<_> = paths
        .iter()
        .map(|p| plan::region_of(&root, &host.shape, p).unwrap())
        .collect();
    regions.sort_by_key(|r| r.start);
    let mut kept = String::new();
    let mut at = 0;
    for region in regions {
        kept.push_str(&text[at..region.start]);
        kept.push('§');
        at = region.end;
    }
    kept + &text[at..]
}

#[test]
fn every_host_file_is_wrapped_in_place_and_unwrapped_byte_for_byte() {
    assert_eq!(CASES.len(), table::HOSTS.len(), "a case for every host");
    for (id, text, wrapped, alone) in CASES {
        let host = table::find(id).unwrap();
        let editor: &dyn Editor = host.format.editor();
        let before = servers(host, text);
        let planned = plan::wrap(text, editor, &host.shape, &wrapping(host)).unwrap();
        let names: Vec<&str> = planned
            .remembered
            .iter()
            .map(|r| r.path.last().unwrap().as_str())
            .collect();
        assert_eq!(
            &names, wrapped,
            "{id}: the stdio servers not yet behind rootsd are wrapped"
        );

        // Each wrapped entry runs this rootsctl's proxy in front of exactly the original command.
        let after = servers(host, &planned.text);
        assert_eq!(after.len(), before.len(), "{id}");
        for (old, new) in before.iter().zip(&after) {
            assert_eq!(old.path, new.path, "{id}");
            if !wrapped.contains(&old.name.as_str()) {
                assert!(
                    alone.contains(&old.name.as_str()),
                    "{id}: {} is in the case",
                    old.name
                );
                assert_eq!(
                    old.transport, new.transport,
                    "{id}: {} is left alone",
                    old.name
                );
                continue;
            }
            let Transport::Stdio { command, .. } = &old.transport else {
                panic!("{id}: {old:?}")
            };
            let mut expected = vec![ROOTSCTL, "proxy", "--workspace", "work"];
            if host.gives_roots {
                expected.extend(["--host-roots", "merge"]);
            }
            expected.push("--");
            expected.extend(command.iter().map(String::as_str));
            assert_eq!(
                new.transport,
                Transport::Stdio {
                    command: expected.iter().map(|s| s.to_string()).collect(),
                    wrapped: true
                },
                "{id}: {}",
                old.name
            );
        }

        // Nothing outside the wrapped entries' command-to-arguments regions changed.
        let paths: Vec<Vec<String>> = planned.remembered.iter().map(|r| r.path.clone()).collect();
        assert_eq!(
            outside(host, text, &paths),
            outside(host, &planned.text, &paths),
            "{id}"
        );
        // A strict JSON file stays strict JSON.
        if serde_json::from_str::<serde_json::Value>(text).is_ok() {
            serde_json::from_str::<serde_json::Value>(&planned.text)
                .unwrap_or_else(|e| panic!("{id}: {e}\n{}", planned.text));
        }

        let again = plan::wrap(&planned.text, editor, &host.shape, &wrapping(host)).unwrap();
        assert!(
            again.edits.is_empty() && again.text == planned.text,
            "{id}: wrapping twice changes nothing"
        );

        let (restored, outcomes) = unwrapped(host, &planned.text, &planned.remembered);
        assert!(
            outcomes.iter().all(|o| *o == Outcome::Restored),
            "{id}: {outcomes:?}"
        );
        assert_eq!(
            restored.text, *text,
            "{id}: unwrap restores the original bytes"
        );
    }
}

#[test]
fn an_entry_edited_since_it_was_wrapped_is_left_alone_and_the_others_restored() {
    let host = table::find("codex").unwrap();
    let text = CASES.iter().find(|c| c.0 == "codex").unwrap().1;
    let planned = plan::wrap(text, host.format.editor(), &host.shape, &wrapping(host)).unwrap();
    let edited = planned
        .text
        .replacen("\"plain-srv-renamed\"", "", 0)
        .replacen("\"my-server\"]", "\"my-server\", \"--verbose\"]", 1);
    assert_ne!(edited, planned.text);
    let (restored, outcomes) = unwrapped(host, &edited, &planned.remembered);
    let plain = planned
        .remembered
        .iter()
        .position(|r| r.path.last().unwrap() == "plain")
        .unwrap();
    for (i, outcome) in outcomes.iter().enumerate() {
        let expect = if i == plain {
            Outcome::EditedSince
        } else {
            Outcome::Restored
        };
        assert_eq!(*outcome, expect, "{:?}", planned.remembered[i].path);
    }
    assert!(
        restored.text.contains("\"my-server\", \"--verbose\"]"),
        "{}",
        restored.text
    );
    assert!(
        restored.text.contains("command = \"npx\" # the runner"),
        "{}",
        restored.text
    );

    // An entry the user put back by hand, or removed, is simply forgotten.
    let (_, outcomes) = unwrapped(host, text, &planned.remembered);
    assert!(outcomes.iter().all(|o| *o == Outcome::Gone), "{outcomes:?}");
}

#[test]
fn windows_line_endings_and_a_byte_order_mark_are_kept() {
    for (id, text) in [
        (
            "codex",
            "[mcp_servers.a]\r\ncommand = \"srv\"\r\n\r\n[x]\r\n",
        ),
        (
            "goose",
            "extensions:\r\n  a:\r\n    type: stdio\r\n    cmd: srv\r\n    args:\r\n      - x\r\n      - y\r\n",
        ),
        (
            "cursor",
            "\u{feff}{\"mcpServers\": {\"a\": {\"command\": \"srv\"}}}\r\n",
        ),
    ] {
        let host = table::find(id).unwrap();
        let planned = plan::wrap(text, host.format.editor(), &host.shape, &wrapping(host)).unwrap();
        assert_eq!(planned.remembered.len(), 1, "{id}");
        let bare_newlines = planned.text.replace("\r\n", "").matches('\n').count();
        assert_eq!(bare_newlines, 0, "{id}: {:?}", planned.text);
        assert_eq!(
            text.starts_with('\u{feff}'),
            planned.text.starts_with('\u{feff}')
        );
        let (restored, _) = unwrapped(host, &planned.text, &planned.remembered);
        assert_eq!(restored.text, text, "{id}");
    }
}

#[test]
fn files_that_do_not_parse_are_refused_naming_the_line() {
    for (id, text, expect) in [
        (
            "claude-code",
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",,}\n  }\n}\n",
            "line 3",
        ),
        (
            "vscode",
            "{\n  \"servers\": {\n  /* unclosed\n}\n",
            "line 3: a /* comment is never closed",
        ),
        (
            "codex",
            "[mcp_servers.fs]\ncommand = \"npx\"\ncommand = \"again\"\n",
            "line 3",
        ),
        ("goose", "extensions:\n  fs:\n    cmd: [npx\n", "line "),
    ] {
        let host = table::find(id).unwrap();
        let error =
            plan::wrap(text, host.format.editor(), &host.shape, &wrapping(host)).unwrap_err();
        assert!(error.contains(expect), "{id}: {error}");
    }
}

#[test]
fn unwrap_needs_no_rootsctl_where_it_was() {
    // The record holds the wrapped text itself, so a rootsctl installed elsewhere since (or a
    // different one) unwraps what an old one wrapped, and does not wrap it again.
    let host = table::find("claude-desktop").unwrap();
    let text = CASES[0].1;
    let old = Wrapping {
        rootsctl: "/home/ana/.cargo/bin/rootsctl".to_owned(),
        ..wrapping(host)
    };
    let planned = plan::wrap(text, host.format.editor(), &host.shape, &old).unwrap();
    let again = plan::wrap(
        &planned.text,
        host.format.editor(),
        &host.shape,
        &wrapping(host),
    )
    .unwrap();
    assert!(again.edits.is_empty());
    let (restored, _) = unwrapped(host, &planned.text, &planned.remembered);
    assert_eq!(restored.text, text);
}

#[test]
fn a_large_claude_json_with_200_servers_is_wrapped_and_restored_byte_for_byte() {
    // How long this takes is the benchmark's business (`rootsd-bench --only hosts`), not a test's.
    use std::fmt::Write as _;
    let mut text = String::from("{\n  \"numStartups\": 1,\n  \"mcpServers\": {\n");
    for i in 0..200 {
        let comma = if i == 199 { "" } else { "," };
        writeln!(text, "    \"s{i}\": {{\"type\": \"stdio\", \"command\": \"npx\", \"args\": [\"-y\", \"server-{i}\"], \"env\": {{\"K\": \"{i}\"}}}}{comma}").unwrap();
    }
    text.push_str("  },\n  \"history\": \"");
    text.push_str(&"x".repeat(2 << 20));
    text.push_str("\"\n}\n");
    let host = table::find("claude-code").unwrap();
    let planned = plan::wrap(&text, host.format.editor(), &host.shape, &wrapping(host)).unwrap();
    assert_eq!(planned.remembered.len(), 200);
    let (restored, _) = unwrapped(host, &planned.text, &planned.remembered);
    assert_eq!(restored.text, text);
}

#[test]
fn wrap_help_names_every_host_of_the_table() {
    use clap::CommandFactory as _;
    let cli = rootsctl::args::Cli::command();
    let wrap = cli
        .find_subcommand("hosts")
        .and_then(|h| h.find_subcommand("wrap"))
        .unwrap();
    let help = wrap
        .get_arguments()
        .find(|a| a.get_id() == "hosts")
        .and_then(|a| a.get_help())
        .unwrap()
        .to_string();
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains(&table::ids()), "{help}");
}

/// Claude Code's own layout of `~/.claude.json`: `JSON.stringify(config, null, 2)`, which
/// serde_json's pretty printer matches.
fn as_claude_saves_it(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap()
}

#[test]
fn a_file_the_host_saved_again_in_its_own_layout_is_unwrapped_by_values_keeping_its_changes() {
    let host = table::find("claude-code").unwrap();
    let editor = host.format.editor();
    let text = "{\"mcpServers\": {\"fs\": {\"type\": \"stdio\", \"command\": \"node\", \"args\": [\"fs.js\", \"/src\"], \"env\": {}}, \"bare\": {\"command\": \"my-server\"}}}\n";
    let planned = plan::wrap(text, editor, &host.shape, &wrapping(host)).unwrap();
    // The host reads the file, changes something of its own and writes it all in its layout.
    let mut saved: serde_json::Value = serde_json::from_str(&planned.text).unwrap();
    saved["numStartups"] = 7.into();
    saved["mcpServers"]["fs"]["env"]["ADDED"] = "by the host".into();
    let resaved = as_claude_saves_it(&saved);
    assert_ne!(resaved, planned.text);

    let (restored, outcomes) = unwrapped(host, &resaved, &planned.remembered);
    assert_eq!(outcomes, vec![Outcome::Restored, Outcome::Restored]);
    let mut expected = saved.clone();
    expected["mcpServers"]["fs"]["command"] = "node".into();
    expected["mcpServers"]["fs"]["args"] = serde_json::json!(["fs.js", "/src"]);
    expected["mcpServers"]["bare"]["command"] = "my-server".into();
    // The args rootsctl added to an entry without any are taken away again.
    expected["mcpServers"]["bare"]
        .as_object_mut()
        .unwrap()
        .remove("args");
    assert_eq!(restored.text, as_claude_saves_it(&expected));
}

#[test]
fn a_multi_line_args_array_keeps_its_own_layout_when_wrapped() {
    let host = table::find("claude-code").unwrap();
    let text = "{\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"node\",\n      \"args\": [\n        \"fs.js\"\n      ]\n    }\n  }\n}";
    let planned = plan::wrap(text, host.format.editor(), &host.shape, &wrapping(host)).unwrap();
    let args = [
        "proxy",
        "--workspace",
        "work",
        "--host-roots",
        "merge",
        "--",
        "node",
        "fs.js",
    ];
    let expected = text
        .replace("\"node\"", &format!("\"{ROOTSCTL}\""))
        .replace(
            "\"fs.js\"",
            &args.map(|a| format!("\"{a}\"")).join(",\n        "),
        );
    assert_eq!(planned.text, expected);
}

#[test]
fn duplicate_keys_are_refused_naming_the_key_in_wrap_list_and_unwrap() {
    let json = table::find("claude-code").unwrap();
    let text = "{\"mcpServers\": {\n\"fs\": {\"command\": \"a\"},\n\"fs\": {\"command\": \"b\"}}}";
    let error = plan::wrap(text, json.format.editor(), &json.shape, &wrapping(json)).unwrap_err();
    assert!(
        error.contains("line 3") && error.contains("\"fs\""),
        "{error}"
    );
    let error = plan::parse(text, json.format.editor()).unwrap_err();
    assert!(error.contains("\"fs\""), "{error}");
    // A file wrapped once, then given a second entry of the same name.
    let once = "{\"mcpServers\": {\"fs\": {\"command\": \"a\"}}}";
    let planned = plan::wrap(once, json.format.editor(), &json.shape, &wrapping(json)).unwrap();
    let twice = planned.text.replacen("{\"fs\"", "{\"fs\": {}, \"fs\"", 1);
    let error = plan::unwrap(
        &twice,
        json.format.editor(),
        &json.shape,
        &planned.remembered,
        PROXY,
    )
    .unwrap_err();
    assert!(error.contains("\"fs\""), "{error}");
    // A record from before the refusal names the entry twice: unwrap restores it once.
    let mut remembered = planned.remembered.clone();
    remembered.extend(planned.remembered.clone());
    let (restored, outcomes) = unwrapped(json, &planned.text, &remembered);
    assert_eq!(outcomes, vec![Outcome::Restored, Outcome::Gone]);
    assert_eq!(restored.text, once);
    let codex = table::find("codex").unwrap();
    let error = plan::parse(
        "[mcp_servers.fs]\ncommand = \"a\"\ncommand = \"b\"\n",
        codex.format.editor(),
    )
    .unwrap_err();
    assert!(
        error.contains("line 3") && error.contains("command"),
        "{error}"
    );
}

#[test]
fn an_entry_wrapped_by_any_rootsctl_by_hand_or_without_dashes_is_recognised_by_its_shape() {
    let host = table::find("claude-code").unwrap();
    let entry = |command: &str, args: &str| {
        format!("{{\"mcpServers\": {{\"s\": {{\"command\": \"{command}\", \"args\": {args}}}}}}}")
    };
    for (command, args, wrapped) in [
        (
            "/nix/store/abc-rootsd-2.0/bin/.rootsctl-wrapped",
            "[\"proxy\", \"--\", \"node\", \"x\"]",
            true,
        ),
        (
            "/usr/local/bin/rootsctl",
            "[\"--socket\", \"/run/r.sock\", \"proxy\", \"-w\", \"w\", \"--\", \"node\"]",
            true,
        ),
        ("rootsctl", "[\"proxy\", \"node\", \"x\"]", true),
        (
            "rootsctl",
            "[\"proxy\", \"--name\", \"n\", \"node\", \"-y\"]",
            true,
        ),
        // What the proxy refuses is not behind rootsd.
        (
            "rootsctl",
            "[\"proxy\", \"--no-such-option\", \"node\"]",
            false,
        ),
        ("rootsctl", "[\"proxy\"]", false),
        (
            "rootsctl",
            "[\"proxy\", \"--env\", \"NOEQUALS\", \"--\", \"node\"]",
            false,
        ),
        ("rootsctl", "[\"proxy\", \"--\", \"{roots}\"]", false),
        (
            "rootsctl",
            "[\"proxy\", \"--map\", \"nothing\", \"node\"]",
            false,
        ),
        ("npx", "[\"-y\", \"proxy\", \"--\", \"node\"]", false),
        ("uvx", "[\"mcp-proxy\", \"--\", \"node\"]", false),
    ] {
        let text = entry(command, args);
        let listed = servers(host, &text);
        let Transport::Stdio { wrapped: is, .. } = listed[0].transport else {
            panic!("{text}")
        };
        assert_eq!(is, wrapped, "{text}");
        let planned =
            plan::wrap(&text, host.format.editor(), &host.shape, &wrapping(host)).unwrap();
        assert_eq!(planned.remembered.is_empty(), wrapped, "{text}");
    }
}

#[test]
fn toml_dotted_keys_out_of_order_are_all_restored_by_one_unwrap() {
    let host = table::find("codex").unwrap();
    let editor = host.format.editor();
    let text = "mcp_servers.a.command = \"node\"\nmcp_servers.b.command = \"python\"\nmcp_servers.a.args = [\"a.js\"]\nmcp_servers.b.args = [\"-m\", \"b\"]\nmcp_servers.c.command = \"c\"\n";
    let planned = plan::wrap(text, editor, &host.shape, &wrapping(host)).unwrap();
    assert_eq!(planned.remembered.len(), 3);
    let (restored, outcomes) = unwrapped(host, &planned.text, &planned.remembered);
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Restored),
        "{outcomes:?}"
    );
    assert_eq!(restored.text, text);
}

#[test]
fn codex_entries_rewritten_in_another_layout_are_restored_by_values_whatever_their_shape() {
    let host = table::find("codex").unwrap();
    let editor = host.format.editor();
    let text = CASES.iter().find(|c| c.0 == "codex").unwrap().1;
    let planned = plan::wrap(text, editor, &host.shape, &wrapping(host)).unwrap();
    // A host writing the same values its own way: literal strings, one more key of its own.
    let resaved = planned
        .text
        .replace(&format!("\"{ROOTSCTL}\""), &format!("'{ROOTSCTL}'"))
        .replacen("model = ", "added_by_host = true\nmodel = ", 1);
    let (restored, outcomes) = unwrapped(host, &resaved, &planned.remembered);
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Restored),
        "{outcomes:?}"
    );
    assert_eq!(servers(host, &restored.text), servers(host, text));
    assert!(restored.text.contains("added_by_host = true\n"));
    // The args rootsctl added to `plain` are gone again; the command, no longer as rootsctl
    // wrote it, is written anew.
    assert!(
        restored
            .text
            .contains("command = \"my-server\" # no arguments\n\n"),
        "{}",
        restored.text
    );
}

#[test]
fn yaml_entries_rewritten_in_another_layout_are_restored_by_values() {
    for id in ["goose", "continue"] {
        let host = table::find(id).unwrap();
        let editor = host.format.editor();
        let text = CASES.iter().find(|c| c.0 == id).unwrap().1;
        let planned = plan::wrap(text, editor, &host.shape, &wrapping(host)).unwrap();
        // The same values, the program as a plain scalar instead of a quoted one.
        let resaved = planned.text.replace(&format!("\"{ROOTSCTL}\""), ROOTSCTL);
        assert_ne!(resaved, planned.text, "{id}");
        let (restored, outcomes) = unwrapped(host, &resaved, &planned.remembered);
        assert!(
            outcomes.iter().all(|o| *o == Outcome::Restored),
            "{id}: {outcomes:?}"
        );
        assert_eq!(servers(host, &restored.text), servers(host, text), "{id}");
    }
}
