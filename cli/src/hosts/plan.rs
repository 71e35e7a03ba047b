//! The wrap and unwrap planner, pure: a file's text in; the servers in it, the new text, and what
//! to remember out. It edits by splicing text at the spans of each wrapped entry's command and
//! arguments, so nothing outside them changes; an entry is remembered as the exact text of that
//! region before and after, which is what `unwrap` puts back.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::format::Editor;
use super::table::Shape;
use super::tree::{Kind, Map, Node, quote};

/// One server entry of a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Server {
    pub name: String,
    /// The keys leading to the entry (a list's entry by its `name`, else `#INDEX`).
    pub path: Vec<String>,
    pub transport: Transport,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Transport {
    /// The program and its arguments, and whether they already run behind rootsd.
    Stdio { command: Vec<String>, wrapped: bool },
    /// HTTP, SSE or another transport, named by the entry's `type` (or `url`); left alone.
    Remote { r#type: String },
    /// An entry rootsctl cannot read as a server (no command, arguments that are not strings).
    Unusable { why: String },
}

/// What rootsctl writes into a wrapped entry.
#[derive(Clone, Debug)]
pub struct Wrapping {
    /// This rootsctl's absolute path.
    pub rootsctl: String,
    /// Options before `--`, without `--host-roots`.
    pub options: Vec<String>,
    /// Add `--host-roots merge` (the host gives roots of its own).
    pub merge_host_roots: bool,
}

/// What rootsctl remembers of one wrapped entry: the region of the file from its command to its
/// arguments, as it was and as rootsctl wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    pub path: Vec<String>,
    pub original: String,
    pub wrapped: String,
}

/// A planned change of one file.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub text: String,
    /// The splices, in order, as `(old span, new text)`: what `--dry-run`'s diff shows.
    pub edits: Vec<(Range<usize>, String)>,
    pub remembered: Vec<Remembered>,
}

/// Every server entry in `root`, in file order per container.
pub fn servers(root: &Node, shape: &Shape) -> Vec<Server> {
    entries(root, shape)
        .into_iter()
        .map(|(path, entry)| Server {
            name: path.last().cloned().unwrap_or_default(),
            transport: transport(entry, shape),
            path,
        })
        .collect()
}

fn entries<'n>(root: &'n Node, shape: &Shape) -> Vec<(Vec<String>, &'n Node)> {
    let mut found = Vec::new();
    for pattern in shape.containers {
        let mut at: Vec<(Vec<String>, &Node)> = vec![(Vec::new(), root)];
        for segment in *pattern {
            at = at
                .into_iter()
                .flat_map(|(path, node)| {
                    let members = node.map().map(|m| m.members.as_slice()).unwrap_or_default();
                    members
                        .iter()
                        .filter(|m| *segment == "*" || m.key == *segment)
                        .map(move |m| {
                            let mut path = path.clone();
                            path.push(m.key.clone());
                            (path, &m.value)
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
        }
        for (path, container) in at {
            for (name, entry) in children(container) {
                let mut path = path.clone();
                path.push(name);
                found.push((path, entry));
            }
        }
    }
    found
}

/// A container's entries by name: a map's members, or a list's items by their `name`.
fn children(container: &Node) -> Vec<(String, &Node)> {
    match &container.kind {
        Kind::Map(map) => map
            .members
            .iter()
            .map(|m| (m.key.clone(), &m.value))
            .collect(),
        Kind::Seq(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let name = item
                    .map()
                    .and_then(|m| m.get("name"))
                    .and_then(|n| n.value.str());
                (name.map_or_else(|| format!("#{i}"), str::to_owned), item)
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The entry at `path`, as [`entries`] named it.
fn locate<'n>(root: &'n Node, path: &[String]) -> Option<&'n Node> {
    let mut node = root;
    for segment in path {
        node = match &node.kind {
            Kind::Map(map) => &map.get(segment)?.value,
            Kind::Seq(_) => children(node).into_iter().find(|(n, _)| n == segment)?.1,
            _ => return None,
        };
    }
    Some(node)
}

fn transport(entry: &Node, shape: &Shape) -> Transport {
    let unusable = |why: &str| Transport::Unusable {
        why: why.to_owned(),
    };
    let Some(map) = entry.map() else {
        return unusable("not a table of settings");
    };
    match map.get("type").map(|t| t.value.str()) {
        Some(Some(t)) if shape.stdio_types.contains(&t) => {}
        Some(Some(t)) => {
            return Transport::Remote {
                r#type: t.to_owned(),
            };
        }
        Some(None) => return unusable("its type is not a string"),
        None if map.get(shape.command).is_none() => {
            return match ["url", "httpUrl", "serverUrl"]
                .iter()
                .find(|k| map.get(k).is_some())
            {
                Some(_) => Transport::Remote {
                    r#type: "url".to_owned(),
                },
                None => unusable("no command"),
            };
        }
        None => {}
    }
    match command_line(map, shape) {
        Ok(command) => Transport::Stdio {
            wrapped: is_wrapped(&command),
            command,
        },
        Err(why) => unusable(why),
    }
}

/// The program and its arguments.
fn command_line(map: &Map, shape: &Shape) -> Result<Vec<String>, &'static str> {
    let command = &map.get(shape.command).ok_or("no command")?.value;
    let Some(args_key) = shape.args else {
        return command
            .strings()
            .filter(|c| !c.is_empty())
            .ok_or("its command is not a list of strings");
    };
    let program = command.str().ok_or("its command is not a string")?;
    let args = match map.get(args_key) {
        Some(args) => args
            .value
            .strings()
            .ok_or("its args are not a list of strings")?,
        None => Vec::new(),
    };
    Ok(std::iter::once(program.to_owned()).chain(args).collect())
}

/// Already behind rootsd: a rootsctl (by file name, wherever it is) running `proxy`.
pub fn is_wrapped(command: &[String]) -> bool {
    let rootsctl = command
        .first()
        .and_then(|p| std::path::Path::new(p).file_name())
        .is_some_and(|f| f == "rootsctl");
    rootsctl && command.get(1).is_some_and(|a| a == "proxy")
}

/// The region of an entry from its command to its arguments, with the splices that wrap it.
fn region(map: &Map, shape: &Shape) -> Option<Range<usize>> {
    let command = &map.get(shape.command)?.value.span;
    let args = shape
        .args
        .and_then(|k| map.get(k))
        .map(|a| a.value.span.clone());
    let args = args.unwrap_or(command.clone());
    Some(command.start.min(args.start)..command.end.max(args.end))
}

/// The region (command to arguments) of the entry at `path`, where [`wrap`] splices.
pub fn region_of(root: &Node, shape: &Shape, path: &[String]) -> Option<Range<usize>> {
    region(locate(root, path)?.map()?, shape)
}

/// Wraps every stdio entry of `text` not yet behind rootsd.
pub fn wrap(
    text: &str,
    editor: &dyn Editor,
    shape: &Shape,
    wrapping: &Wrapping,
) -> Result<Plan, String> {
    let root = editor.parse(text)?;
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut remembered = Vec::new();
    let mut lines = Vec::new();
    for (path, entry) in entries(&root, shape) {
        let Transport::Stdio {
            command,
            wrapped: false,
        } = transport(entry, shape)
        else {
            continue;
        };
        let map = entry.map().expect("a stdio entry is a map");
        let mut new = vec!["proxy".to_owned()];
        new.extend(wrapping.options.iter().cloned());
        if wrapping.merge_host_roots {
            new.extend(["--host-roots".to_owned(), "merge".to_owned()]);
        }
        new.push("--".to_owned());
        new.extend(command);
        lines.push((
            path.clone(),
            [std::slice::from_ref(&wrapping.rootsctl), &new].concat(),
        ));
        let quoted = |items: &[String]| items.iter().map(|s| quote(s)).collect::<Vec<_>>();
        let command_member = map.get(shape.command).expect("a stdio entry has a command");
        let mut entry_edits = Vec::new();
        match shape.args {
            None => {
                let mut all = vec![wrapping.rootsctl.clone()];
                all.extend(new);
                let list = editor.list(&quoted(&all), Some(&command_member.value), text);
                entry_edits.push((command_member.value.span.clone(), list));
            }
            Some(args_key) => {
                entry_edits.push((command_member.value.span.clone(), quote(&wrapping.rootsctl)));
                match map.get(args_key) {
                    Some(args) => {
                        let list = editor.list(&quoted(&new), Some(&args.value), text);
                        entry_edits.push((args.value.span.clone(), list));
                    }
                    None => {
                        let list = editor.list(&quoted(&new), None, text);
                        let end = command_member.value.span.end;
                        let member =
                            editor.member_after(text, map, command_member, args_key, &list);
                        entry_edits.push((end..end, member));
                    }
                }
            }
        }
        entry_edits.sort_by_key(|(span, _)| span.start);
        let region = region(map, shape).expect("a stdio entry has a command");
        let wrapped = splice(&text[region.clone()], region.start, &entry_edits);
        remembered.push(Remembered {
            path,
            original: text[region].to_owned(),
            wrapped,
        });
        edits.extend(entry_edits);
    }
    edits.sort_by_key(|(span, _)| span.start);
    let new = splice(text, 0, &edits);
    super::verify::wrapped(editor, shape, text, &new, &lines)?;
    Ok(Plan {
        text: new,
        edits,
        remembered,
    })
}

/// What unwrapping one remembered entry came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Restored,
    /// Its region is no longer what rootsctl wrote: left as it is, and still remembered.
    EditedSince,
    /// The entry is gone, or no longer behind rootsd: nothing to restore, and forgotten.
    Gone,
}

/// Restores every remembered entry of `text` whose region is still what rootsctl wrote.
pub fn unwrap(
    text: &str,
    editor: &dyn Editor,
    shape: &Shape,
    remembered: &[Remembered],
) -> Result<(Plan, Vec<Outcome>), String> {
    let root = editor.parse(text)?;
    let mut edits = Vec::new();
    let mut outcomes = Vec::new();
    for entry in remembered {
        let found = locate(&root, &entry.path);
        let wrapped = found
            .is_some_and(|n| matches!(transport(n, shape), Transport::Stdio { wrapped: true, .. }));
        let region = found.and_then(Node::map).and_then(|m| region(m, shape));
        outcomes.push(match region {
            Some(region) if text[region.clone()] == entry.wrapped => {
                edits.push((region, entry.original.clone()));
                Outcome::Restored
            }
            Some(_) if wrapped => Outcome::EditedSince,
            _ => Outcome::Gone,
        });
    }
    edits.sort_by_key(|(span, _): &(Range<usize>, String)| span.start);
    let plan = Plan {
        text: splice(text, 0, &edits),
        edits,
        remembered: Vec::new(),
    };
    let restored = remembered.iter().zip(&outcomes);
    let restored: Vec<_> = restored
        .filter(|(_, o)| **o == Outcome::Restored)
        .map(|(e, _)| &e.path)
        .collect();
    super::verify::unwrapped(editor, shape, text, &plan.text, &restored)?;
    Ok((plan, outcomes))
}

/// `text` (which starts at `offset` of the file) with each edit's span replaced by its text;
/// the edits are sorted and do not overlap.
fn splice(text: &str, offset: usize, edits: &[(Range<usize>, String)]) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for (span, new) in edits {
        out.push_str(&text[at..span.start - offset]);
        out.push_str(new);
        at = span.end - offset;
    }
    out.push_str(&text[at..]);
    out
}
