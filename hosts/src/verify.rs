//! The last check before a planned file is written: its new text, read back by the same reader,
//! must mean what the old text meant with only the intended values changed. The planner splices
//! bytes, and a splice that is right in one layout can be wrong in another (a list laid out for
//! one indentation, a value after an anchor or a tag, a character one format cannot hold raw);
//! this check does not trust the splice, only the values read back, so whatever the layout, a
//! file that would mean something else is refused, naming where, and never written.

use super::format::Editor;
use super::table::Shape;
use super::tree::{Kind, Node};

/// A value of a file, without where it is: what a host reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Members in file order; compared as a set of keys.
    Map(Vec<(String, Value)>),
    Seq(Vec<Value>),
    Str(String),
    /// A number, a boolean, a null: compared as written.
    Other(String),
}

impl Value {
    fn of(node: &Node, text: &str) -> Self {
        match &node.kind {
            Kind::Map(map) => Self::Map(
                map.members
                    .iter()
                    .map(|m| (m.key.clone(), Self::of(&m.value, text)))
                    .collect(),
            ),
            Kind::Seq(items) => Self::Seq(items.iter().map(|i| Self::of(i, text)).collect()),
            Kind::Str(s) => Self::Str(s.clone()),
            Kind::Other => Self::Other(
                text.get(node.span.clone())
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            ),
        }
    }

    /// A list of strings.
    pub fn strings(items: &[String]) -> Self {
        Self::Seq(items.iter().cloned().map(Self::Str).collect())
    }

    fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Self::Map(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The item of a list that the planner calls `segment`: the first whose `name` is it, else
    /// `#INDEX` (as `plan` names a list's entries).
    fn child(&self, segment: &str) -> Option<&Self> {
        match self {
            Self::Map(_) => self.get(segment),
            Self::Seq(items) => items
                .iter()
                .find(|i| matches!(i.get("name"), Some(Self::Str(n)) if n == segment))
                .or_else(|| {
                    let index: usize = segment.strip_prefix('#')?.parse().ok()?;
                    items.get(index)
                }),
            _ => None,
        }
    }

    fn at(&self, path: &[String]) -> Option<&Self> {
        path.iter()
            .try_fold(self, |value, segment| value.child(segment))
    }

    /// The name `plan` gives the item `index` of a list.
    fn item_name(&self, index: usize) -> String {
        match self.get("name") {
            Some(Self::Str(name)) => name.clone(),
            _ => format!("#{index}"),
        }
    }
}

/// One value a plan means to change: the member `key` of the entry at `entry` (a path as `plan`
/// names it). `to` is what it must read as afterwards; `None` when any value (or none) will do,
/// as when unwrap puts back text whose values it does not know.
#[derive(Clone, Debug)]
pub struct Intended {
    pub entry: Vec<String>,
    pub key: String,
    pub to: Option<Value>,
}

/// Checks a wrap: each entry at `wrapped`'s paths now runs its command line (the program
/// first), and nothing else changed.
pub fn wrapped(
    editor: &dyn Editor,
    shape: &Shape,
    old: &str,
    new: &str,
    wrapped: &[(Vec<String>, Vec<String>)],
) -> Result<(), String> {
    let mut intended = Vec::new();
    for (entry, line) in wrapped {
        let mut change = |key: &str, to: Value| {
            intended.push(Intended {
                entry: entry.clone(),
                key: key.to_owned(),
                to: Some(to),
            });
        };
        match (shape.args, line.split_first()) {
            (Some(args), Some((program, rest))) => {
                change(shape.command, Value::Str(program.clone()));
                change(args, Value::strings(rest));
            }
            _ => change(shape.command, Value::strings(line)),
        }
    }
    check(editor, old, new, &intended)
}

/// Checks an unwrap: nothing changed but the command and arguments of the entries at
/// `restored`, whose values are the text rootsctl remembered.
pub fn unwrapped(
    editor: &dyn Editor,
    shape: &Shape,
    old: &str,
    new: &str,
    restored: &[&Vec<String>],
) -> Result<(), String> {
    let keys = std::iter::once(shape.command).chain(shape.args);
    let intended: Vec<Intended> = restored
        .iter()
        .flat_map(|entry| {
            keys.clone().map(|key| Intended {
                entry: (*entry).clone(),
                key: key.to_owned(),
                to: None,
            })
        })
        .collect();
    check(editor, old, new, &intended)
}

/// Reads `new` back and checks that it differs from `old` exactly where `intended` says; the
/// error names the first place it does not, and what the user can do.
pub fn check(
    editor: &dyn Editor,
    old: &str,
    new: &str,
    intended: &[Intended],
) -> Result<(), String> {
    let before = Value::of(&editor.values(old)?, old);
    let after = editor.values(new).map_err(|e| {
        format!(
            "the edit planned for it would leave a file that does not parse ({e}); it was not made"
        )
    })?;
    let after = Value::of(&after, new);
    let mut differences = Vec::new();
    differ(&before, &after, &mut Vec::new(), &mut differences);
    for path in &differences {
        let allowed = intended.iter().any(|i| {
            path.len() > i.entry.len()
                && path[..i.entry.len()] == i.entry[..]
                && path[i.entry.len()] == i.key
        });
        if !allowed {
            return Err(refusal(path, &before, &after, old, editor));
        }
    }
    for i in intended {
        let Some(to) = &i.to else { continue };
        let mut path = i.entry.clone();
        path.push(i.key.clone());
        if after.at(&path) != Some(to) {
            return Err(refusal(&path, &before, &after, old, editor));
        }
    }
    Ok(())
}

fn refusal(
    path: &[String],
    before: &Value,
    after: &Value,
    old: &str,
    editor: &dyn Editor,
) -> String {
    let shown = |v: Option<&Value>| v.map_or_else(|| "nothing".to_owned(), describe);
    let written = editor
        .parse(old)
        .ok()
        .and_then(|root| written_at(&root, path, old))
        .map(|line| format!(" (written there as `{line}`)"))
        .unwrap_or_default();
    format!(
        "the edit planned for it would change {} from {} to {}{written}, which is not what was meant; it was not made: write that value, and the command and arguments of the servers to wrap, out in full (no anchor, alias or merge key tying them together) and retry",
        path.join("."),
        shown(before.at(path)),
        shown(after.at(path)),
    )
}

/// The line of `text` where the value at `path` (or the nearest value above it) starts, as
/// written: what names the construct (an alias, an anchor, a tag) the user must change.
fn written_at(root: &Node, path: &[String], text: &str) -> Option<String> {
    let mut node = root;
    for segment in path {
        let next = match &node.kind {
            Kind::Map(map) => map.get(segment).map(|m| &m.value),
            Kind::Seq(items) => items
                .iter()
                .find(|i| {
                    i.map()
                        .and_then(|m| m.get("name"))
                        .and_then(|n| n.value.str())
                        == Some(segment.as_str())
                })
                .or_else(|| items.get(segment.strip_prefix('#')?.parse::<usize>().ok()?)),
            _ => None,
        };
        match next {
            Some(next) => node = next,
            None => break,
        }
    }
    let start = text
        .get(..node.span.start)?
        .rfind('\n')
        .map_or(0, |n| n + 1);
    let end = text[node.span.start..]
        .find('\n')
        .map_or(text.len(), |n| node.span.start + n);
    let line = text[start..end].trim();
    Some(describe(&Value::Other(line.to_owned())))
}

/// A short rendering of a value for an error message.
fn describe(value: &Value) -> String {
    let text = match value {
        Value::Map(members) => format!(
            "{{{}}}",
            members
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Seq(items) => format!(
            "[{}]",
            items.iter().map(describe).collect::<Vec<_>>().join(", ")
        ),
        Value::Str(s) => format!("{s:?}"),
        Value::Other(written) => written.clone(),
    };
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// Every place where `old` and `new` differ, each as the path of the outermost differing value.
fn differ(old: &Value, new: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match (old, new) {
        (Value::Map(a), Value::Map(b)) => {
            let found = out.len();
            let keys = a.iter().chain(b).map(|(k, _)| k);
            let mut seen: Vec<&String> = Vec::new();
            for key in keys {
                if seen.contains(&key) {
                    continue;
                }
                seen.push(key);
                let (x, y) = (old.get(key), new.get(key));
                path.push(key.clone());
                match (x, y) {
                    (Some(x), Some(y)) => differ(x, y, path, out),
                    _ => out.push(path.clone()),
                }
                path.pop();
            }
            if a.len() != b.len() && out.len() == found {
                // A duplicated key came or went: the keys alone do not show it.
                out.push(path.clone());
            }
        }
        (Value::Seq(a), Value::Seq(b)) if a.len() == b.len() => {
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                path.push(x.item_name(index));
                differ(x, y, path, out);
                path.pop();
            }
        }
        _ if old == new => {}
        _ => out.push(path.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;

    #[test]
    fn only_the_intended_values_may_change_in_every_format() {
        let one = |entry: &[&str], line: &[&str]| {
            vec![(
                entry.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                line.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )]
        };
        let claude = crate::table::find("claude-code").unwrap();
        let codex = crate::table::find("codex").unwrap();
        let json = Format::Json.editor();
        let old = r#"{"mcpServers": {"a": {"command": "x", "args": ["1"]}, "b": {"command": "y"}}, "n": 1}"#;
        let good = r#"{"mcpServers": {"a": {"command": "r", "args": ["proxy", "x", "1"]}, "b": {"command": "y"}}, "n": 1}"#;
        let line = ["r", "proxy", "x", "1"];
        let a = one(&["mcpServers", "a"], &line);
        wrapped(json, &claude.shape, old, good, &a).unwrap();
        // Another value changed, a value other than the intended one written, a file broken.
        for (bad, names) in [
            (good.replace("\"n\": 1", "\"n\": 2"), "n from 1 to 2"),
            (good.replace("\"y\"", "\"z\""), "mcpServers.b.command"),
            (good.replace("\"1\"]", "\"2\"]"), "mcpServers.a.args"),
            (good.replace(']', ""), "does not parse"),
        ] {
            let error = wrapped(json, &claude.shape, old, &bad, &a).unwrap_err();
            assert!(error.contains(names), "{error}");
            assert!(error.contains("it was not made"), "{error}");
        }
        let toml = Format::Toml.editor();
        let old = "[mcp_servers.a]\ncommand = \"x\"\n[other]\nk = true\n";
        let good =
            "[mcp_servers.a]\ncommand = \"r\"\nargs = [\"proxy\", \"x\"]\n[other]\nk = true\n";
        let a = one(&["mcp_servers", "a"], &["r", "proxy", "x"]);
        wrapped(toml, &codex.shape, old, good, &a).unwrap();
        let error =
            wrapped(toml, &codex.shape, old, &good.replace("true", "false"), &a).unwrap_err();
        assert!(error.contains("other.k from true to false"), "{error}");
        // Unwrap may give the entry any command back, but nothing else.
        let entry = vec!["mcp_servers".to_owned(), "a".to_owned()];
        unwrapped(toml, &codex.shape, good, old, &[&entry]).unwrap();
        let error = unwrapped(
            toml,
            &codex.shape,
            good,
            &old.replace("true", "1"),
            &[&entry],
        )
        .unwrap_err();
        assert!(error.contains("other.k"), "{error}");
    }

    #[test]
    fn a_yaml_alias_is_compared_as_the_value_it_names() {
        let yaml = Format::Yaml.editor();
        let old = "x: &c [a]\ny: *c\n";
        // Changing the anchored value is meant; what its alias names changes with it.
        let x = Intended {
            entry: Vec::new(),
            key: "x".to_owned(),
            to: None,
        };
        let error = check(yaml, old, "x: &c [b]\ny: *c\n", &[x]).unwrap_err();
        assert!(error.contains("y.#0 from \"a\" to \"b\""), "{error}");
        assert!(error.contains("written there as `y: *c`"), "{error}");
        check(yaml, old, "x: &c [a]\ny: [a]\n", &[]).unwrap();
    }
}
