//! Goose's and Continue's files in every layout their writers produce: the files PyYAML,
//! js-yaml and serde_yaml write (`fixtures/yaml/`, whose README says how each was made), and
//! hand-written ones with the constructs those writers do not use. Each is held to the same
//! promises as every host's file: the stdio servers are wrapped, each runs the proxy in front of
//! exactly its original command, nothing else in the file means anything new (as rootsctl reads
//! it, and as serde_yaml, Goose's own reader, does), and unwrap gives back the original bytes. Where an edit cannot keep those promises, wrap refuses, naming
//! where.

use crate::plan::{self, Outcome, Transport, Wrapping};
use crate::table::{self, Host};
use crate::tree::{Kind, Node};

const ROOTSCTL: &str = "/opt/rootsd/bin/rootsctl";

/// The files the real writers wrote, by name.
const WRITTEN: &[(&str, &str)] = &[
    (
        "pyyaml-goose.yaml",
        include_str!("../fixtures/yaml/pyyaml-goose.yaml"),
    ),
    (
        "pyyaml-goose-anchors.yaml",
        include_str!("../fixtures/yaml/pyyaml-goose-anchors.yaml"),
    ),
    (
        "pyyaml-goose-flow.yaml",
        include_str!("../fixtures/yaml/pyyaml-goose-flow.yaml"),
    ),
    (
        "pyyaml-continue.yaml",
        include_str!("../fixtures/yaml/pyyaml-continue.yaml"),
    ),
    (
        "pyyaml-continue-anchors.yaml",
        include_str!("../fixtures/yaml/pyyaml-continue-anchors.yaml"),
    ),
    (
        "pyyaml-continue-flow.yaml",
        include_str!("../fixtures/yaml/pyyaml-continue-flow.yaml"),
    ),
    (
        "js-yaml-4.1.0-goose.yaml",
        include_str!("../fixtures/yaml/js-yaml-4.1.0-goose.yaml"),
    ),
    (
        "js-yaml-4.1.0-goose-anchors.yaml",
        include_str!("../fixtures/yaml/js-yaml-4.1.0-goose-anchors.yaml"),
    ),
    (
        "js-yaml-4.1.0-goose-noarrayindent.yaml",
        include_str!("../fixtures/yaml/js-yaml-4.1.0-goose-noarrayindent.yaml"),
    ),
    (
        "js-yaml-4.1.0-continue.yaml",
        include_str!("../fixtures/yaml/js-yaml-4.1.0-continue.yaml"),
    ),
    (
        "js-yaml-4.1.0-continue-anchors.yaml",
        include_str!("../fixtures/yaml/js-yaml-4.1.0-continue-anchors.yaml"),
    ),
    (
        "js-yaml-4.1.0-continue-noarrayindent.yaml",
        include_str!("../fixtures/yaml/js-yaml-4.1.0-continue-noarrayindent.yaml"),
    ),
    (
        "js-yaml-5.5.0-goose.yaml",
        include_str!("../fixtures/yaml/js-yaml-5.5.0-goose.yaml"),
    ),
    (
        "js-yaml-5.5.0-goose-anchors.yaml",
        include_str!("../fixtures/yaml/js-yaml-5.5.0-goose-anchors.yaml"),
    ),
    (
        "js-yaml-5.5.0-goose-noarrayindent.yaml",
        include_str!("../fixtures/yaml/js-yaml-5.5.0-goose-noarrayindent.yaml"),
    ),
    (
        "js-yaml-5.5.0-continue.yaml",
        include_str!("../fixtures/yaml/js-yaml-5.5.0-continue.yaml"),
    ),
    (
        "js-yaml-5.5.0-continue-anchors.yaml",
        include_str!("../fixtures/yaml/js-yaml-5.5.0-continue-anchors.yaml"),
    ),
    (
        "js-yaml-5.5.0-continue-noarrayindent.yaml",
        include_str!("../fixtures/yaml/js-yaml-5.5.0-continue-noarrayindent.yaml"),
    ),
    (
        "serde_yaml-0.9.34-goose.yaml",
        include_str!("../fixtures/yaml/serde_yaml-0.9.34-goose.yaml"),
    ),
    (
        "serde_yaml-0.9.34-continue.yaml",
        include_str!("../fixtures/yaml/serde_yaml-0.9.34-continue.yaml"),
    ),
];

fn host_of(name: &str) -> &'static Host {
    let id = if name.contains("goose") {
        "goose"
    } else {
        "continue"
    };
    table::find(id).unwrap()
}

fn wrapping(host: &Host) -> Wrapping {
    Wrapping {
        rootsctl: ROOTSCTL.to_owned(),
        options: vec!["--workspace".to_owned(), "work".to_owned()],
        merge_host_roots: host.gives_roots,
        proxy: rootsctl::args::is_proxy,
    }
}

fn servers(host: &Host, text: &str) -> Vec<plan::Server> {
    let root = host
        .format
        .editor()
        .parse(text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    plan::servers(&root, &host.shape, rootsctl::args::is_proxy)
}

/// What the file says, as text, with aliases written out and the command and arguments of the
/// entries at `skip` left out: two files whose meanings are equal but for those are equal here.
fn meaning(host: &Host, text: &str, skip: &[Vec<String>]) -> String {
    let root = host
        .format
        .editor()
        .parse(text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut out = String::new();
    let keys = [Some(host.shape.command), host.shape.args];
    render(&root, text, &mut Vec::new(), skip, &keys, &mut out);
    out
}

fn render(
    node: &Node,
    text: &str,
    path: &mut Vec<String>,
    skip: &[Vec<String>],
    keys: &[Option<&str>],
    out: &mut String,
) {
    match &node.kind {
        Kind::Map(map) => {
            let mut members: Vec<_> = map.members.iter().collect();
            members.sort_by(|a, b| a.key.cmp(&b.key));
            out.push('{');
            for m in members {
                if skip.contains(path) && keys.contains(&Some(m.key.as_str())) {
                    continue;
                }
                out.push_str(&format!("{:?}:", m.key));
                path.push(m.key.clone());
                render(&m.value, text, path, skip, keys, out);
                path.pop();
                out.push(',');
            }
            out.push('}');
        }
        Kind::Seq(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                let name = item
                    .map()
                    .and_then(|m| m.get("name"))
                    .and_then(|n| n.value.str())
                    .map_or_else(|| format!("#{i}"), str::to_owned);
                path.push(name);
                render(item, text, path, skip, keys, out);
                path.pop();
                out.push(',');
            }
            out.push(']');
        }
        Kind::Str(s) => out.push_str(&format!("{s:?}")),
        Kind::Other => out.push_str(text[node.span.clone()].trim()),
    }
}

/// The value at `path` as `plan` names it (a list's item by its `name`, else `#INDEX`).
fn serde_at<'v>(
    value: &'v mut serde_yaml::Value,
    path: &[String],
) -> Option<&'v mut serde_yaml::Value> {
    let mut value = value;
    for segment in path {
        value = match value {
            serde_yaml::Value::Mapping(map) => map.get_mut(segment.as_str())?,
            serde_yaml::Value::Sequence(items) => {
                let index = items
                    .iter()
                    .position(|i| i.get("name").and_then(|n| n.as_str()) == Some(segment))
                    .or_else(|| segment.strip_prefix('#')?.parse().ok())?;
                items.get_mut(index)?
            }
            _ => return None,
        };
    }
    Some(value)
}

/// Goose's own reader, serde_yaml (libyaml's parser), reads the wrapped file as meant: each
/// wrapped entry runs the proxy in front of its command, and nothing else differs from the
/// original as it reads that.
fn as_serde_yaml_reads(name: &str, host: &Host, old: &str, new: &str, after: &[plan::Server]) {
    let read = |text: &str| -> serde_yaml::Value {
        serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{name}: serde_yaml: {e}\n{text}"))
    };
    let (mut old, mut new) = (read(old), read(new));
    let args = host.shape.args.unwrap();
    for server in after {
        let Transport::Stdio { command, .. } = &server.transport else {
            continue;
        };
        let entry = serde_at(&mut new, &server.path)
            .unwrap()
            .as_mapping_mut()
            .unwrap();
        let program = entry.remove(host.shape.command).unwrap();
        let rest = entry
            .remove(args)
            .unwrap_or(serde_yaml::Value::Sequence(Vec::new()));
        let line: Vec<String> = std::iter::once(program)
            .chain(rest.as_sequence().unwrap().iter().cloned())
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(&line, command, "{name}: serde_yaml reads {}", server.name);
        let entry = serde_at(&mut old, &server.path)
            .unwrap()
            .as_mapping_mut()
            .unwrap();
        entry.remove(host.shape.command);
        entry.remove(args);
    }
    assert_eq!(old, new, "{name}: serde_yaml reads nothing else changed");
}

/// Wraps `text` as `host`'s file and holds the result to every promise; returns the new text.
fn wrapped_as_promised(name: &str, host: &Host, text: &str, expect: &[&str]) -> String {
    let editor = host.format.editor();
    let planned = plan::wrap(text, editor, &host.shape, &wrapping(host))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let names: Vec<&str> = planned
        .remembered
        .iter()
        .map(|r| r.path.last().unwrap().as_str())
        .collect();
    assert_eq!(
        names, expect,
        "{name}: the stdio servers are wrapped\n{}",
        planned.text
    );
    let before = servers(host, text);
    let after = servers(host, &planned.text);
    assert_eq!(before.len(), after.len(), "{name}\n{}", planned.text);
    for (old, new) in before.iter().zip(&after) {
        assert_eq!(old.path, new.path, "{name}");
        let Transport::Stdio {
            command,
            wrapped: false,
        } = &old.transport
        else {
            assert_eq!(
                old.transport, new.transport,
                "{name}: {} is left alone",
                old.name
            );
            continue;
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
            "{name}: {}\n{}",
            old.name,
            planned.text
        );
    }
    let paths: Vec<Vec<String>> = planned.remembered.iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        meaning(host, text, &paths),
        meaning(host, &planned.text, &paths),
        "{name}: nothing but the wrapped commands changed\n{}",
        planned.text
    );
    // YAML cannot hold a C1 control character raw; a host's reader refuses the whole file.
    assert!(
        !planned
            .text
            .chars()
            .any(|c| ('\u{80}'..='\u{9f}').contains(&c)),
        "{name}: a control character written raw\n{}",
        planned.text
    );
    as_serde_yaml_reads(name, host, text, &planned.text, &after);
    let again = plan::wrap(&planned.text, editor, &host.shape, &wrapping(host)).unwrap();
    assert!(
        again.edits.is_empty(),
        "{name}: wrapping twice changes nothing"
    );
    let (restored, outcomes) = plan::unwrap(
        &planned.text,
        editor,
        &host.shape,
        &planned.remembered,
        rootsctl::args::is_proxy,
    )
    .unwrap();
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Restored),
        "{name}: {outcomes:?}"
    );
    assert_eq!(
        restored.text, text,
        "{name}: unwrap restores the original bytes"
    );
    planned.text
}

#[test]
fn files_the_real_writers_wrote_are_wrapped_as_promised() {
    for (name, text) in WRITTEN {
        let host = host_of(name);
        let expect: &[&str] = if host.id == "goose" {
            &["filesystem", "filesystem2", "git", "odd", "bare"]
        } else {
            &["fs", "fs2", "git", "odd", "bare"]
        };
        wrapped_as_promised(name, host, text, expect);
    }
}

/// (name, host, file, servers wrapped)
const HAND_WRITTEN: &[(&str, &str, &str, &[&str])] = &[
    (
        "indentless args, as published Goose configs have them",
        "goose",
        "extensions:\n  fs:\n    args:\n    - -y\n    - '@modelcontextprotocol/server-filesystem'\n    cmd: npx\n    enabled: true\n    type: stdio\n  after:\n    cmd: srv\n    type: stdio\n",
        &["fs", "after"],
    ),
    (
        "indentless args last in the entry and the file",
        "goose",
        "extensions:\n  fs:\n    type: stdio\n    cmd: npx\n    args:\n    - a\n    - b",
        &["fs"],
    ),
    (
        "an anchored flow list and its alias",
        "goose",
        "extensions:\n  a:\n    type: stdio\n    cmd: npx\n    args: &common [-y, srv]\n  b:\n    type: stdio\n    cmd: npx\n    args: *common\n",
        &["a", "b"],
    ),
    (
        "a tag before args",
        "goose",
        "extensions:\n  a:\n    type: stdio\n    cmd: npx\n    args: !!seq [-y, srv]\n  b:\n    type: stdio\n    cmd: !!str npx\n    args: !!seq\n      - x\n",
        &["a", "b"],
    ),
    (
        "an anchor on cmd that nothing else names",
        "goose",
        "extensions:\n  a:\n    type: stdio\n    cmd: &c npx\n    args: [x]\n",
        &["a"],
    ),
    (
        "an anchor on cmd named by another server's cmd",
        "goose",
        "extensions:\n  a:\n    type: stdio\n    cmd: &c npx\n    args: [x]\n  b:\n    type: stdio\n    cmd: *c\n    args: [y]\n",
        &["a", "b"],
    ),
    (
        "a folded cmd",
        "goose",
        "extensions:\n  a:\n    type: stdio\n    cmd: >-\n      /opt/My Tools/bin/a long\n      server\n    args: [x]\n    enabled: true\n",
        &["a"],
    ),
    (
        "a literal cmd last in the file",
        "goose",
        "extensions:\n  a:\n    type: stdio\n    cmd: |-\n      srv # not a comment\n",
        &["a"],
    ),
    (
        "a comment after cmd and no args",
        "goose",
        "extensions:\n  a:\n    type: stdio\n    cmd: srv  # the runner\n    enabled: true\n  b:\n    type: stdio\n    cmd: # the runner\n      srv\n  c:\n    type: stdio\n    cmd: srv # last\n",
        &["a", "b", "c"],
    ),
    (
        "a C1 control character, written escaped",
        "goose",
        "extensions:\n  a:\n    type: stdio\n    cmd: srv\n    args: [\"\\x80\", \"\\u0085\", \"\\x9f\"]\n",
        &["a"],
    ),
    (
        "Continue's list indentless, args indentless",
        "continue",
        "name: c\nmcpServers:\n- name: fs\n  command: npx\n  args:\n  - -y\n  - srv\n- name: git\n  command: uvx\n",
        &["fs", "git"],
    ),
    (
        "Continue's anchored args, its alias and a folded command",
        "continue",
        "mcpServers:\n  - name: a\n    command: npx\n    args: &common\n      - -y\n      - srv\n  - name: b\n    command: >-\n      npx\n    args: *common\n",
        &["a", "b"],
    ),
];

#[test]
fn hand_written_layouts_are_wrapped_as_promised() {
    for (name, id, text, expect) in HAND_WRITTEN {
        let host = table::find(id).unwrap();
        wrapped_as_promised(name, host, text, expect);
    }
}

/// (name, host, file, what the refusal must name)
const REFUSED: &[(&str, &str, &str, &str)] = &[
    (
        "an anchored cmd named by a value that is not a server's",
        "goose",
        "extensions:\n  a:\n    type: stdio\n    cmd: &c npx\n    args: [x]\ndefault_runner: *c\n",
        "default_runner",
    ),
    (
        "anchored args named by a server left alone",
        "continue",
        "mcpServers:\n  - name: a\n    command: npx\n    args: &common [x]\n  - name: r\n    type: sse\n    url: https://x\n    args: *common\n",
        "mcpServers.r.args",
    ),
];

#[test]
fn an_edit_that_would_change_another_value_is_refused_naming_it() {
    for (name, id, text, names) in REFUSED {
        let host = table::find(id).unwrap();
        let error = plan::wrap(text, host.format.editor(), &host.shape, &wrapping(host))
            .map(|p| p.text)
            .expect_err(name);
        assert!(error.contains(names), "{name}: {error}");
        assert!(error.contains("it was not made"), "{name}: {error}");
    }
}

#[test]
fn an_entry_with_a_merge_key_is_left_alone_and_its_neighbours_wrapped() {
    // PyYAML and js-yaml merge `<<`, serde_yaml (Goose) does not: what the entry runs depends
    // on the host, so it is never edited.
    let host = table::find("goose").unwrap();
    let text = "defaults: &d\n  type: stdio\n  args: [-y]\nextensions:\n  merged:\n    <<: *d\n    cmd: npx\n  plain:\n    type: stdio\n    cmd: srv\n  quoted:\n    \"<<\": not a merge\n    type: stdio\n    cmd: srv\n";
    let planned = plan::wrap(text, host.format.editor(), &host.shape, &wrapping(host)).unwrap();
    let names: Vec<&str> = planned
        .remembered
        .iter()
        .map(|r| r.path.last().unwrap().as_str())
        .collect();
    assert_eq!(names, ["plain", "quoted"], "{}", planned.text);
    assert!(
        planned
            .text
            .contains("  merged:\n    <<: *d\n    cmd: npx\n"),
        "{}",
        planned.text
    );
    let merged = servers(host, text)
        .into_iter()
        .find(|s| s.name == "merged")
        .unwrap();
    assert!(
        matches!(merged.transport, Transport::Unusable { .. }),
        "{merged:?}"
    );
}
