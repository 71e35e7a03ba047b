//! The wrap and unwrap planner, pure: a file's text in; the servers in it, the new text, and what
//! to remember out. It edits by splicing text at the spans of each wrapped entry's command and
//! arguments, so nothing outside them changes; an entry is remembered as the exact text of that
//! region before and after, which is what `unwrap` puts back.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::format::Editor;
use super::table::Shape;
use super::tree::{Kind, Map, Member, Node, quote};

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
    /// An extension built into the host (Goose's `builtin`), named by its `type`; left alone.
    Builtin { r#type: String },
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
    /// Which entries are behind rootsd already, and so left alone.
    pub proxy: IsProxy,
}

/// Whether `rootsctl ARGS` is a `rootsctl proxy` with a server to run that the proxy accepts:
/// rootsctl's own parser and checks, which live in the binary, so each function that reads
/// entries is given this one.
pub type IsProxy = fn(&[String]) -> bool;

/// What rootsctl remembers of one wrapped entry: the region of the file from its command to its
/// arguments, as it was and as rootsctl wrote it, and the values it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    pub path: Vec<String>,
    pub original: String,
    pub wrapped: String,
    /// Absent from records written before rootsctl matched entries by their values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Values>,
}

/// The command line of a wrapped entry as values, before and after, and the text of its two
/// values: what [`unwrap`] recognises the entry by once its host has saved the file again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Values {
    /// The program and its arguments before wrapping.
    pub original: Vec<String>,
    /// The program and its arguments rootsctl wrote.
    pub wrapped: Vec<String>,
    /// The text of the command's value.
    pub command: Piece,
    /// The text of the arguments' value; `None` when the host keeps program and arguments in one
    /// list (opencode).
    pub args: Option<Piece>,
}

/// The text of one value, as it was (`None`: the entry had no such key, rootsctl added it) and as
/// rootsctl wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    pub original: Option<String>,
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
pub fn servers(root: &Node, shape: &Shape, proxy: IsProxy) -> Vec<Server> {
    entries(root, shape)
        .into_iter()
        .map(|(path, entry)| Server {
            name: path.last().cloned().unwrap_or_default(),
            transport: transport(entry, shape, proxy),
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

fn transport(entry: &Node, shape: &Shape, proxy: IsProxy) -> Transport {
    let unusable = |why: &str| Transport::Unusable {
        why: why.to_owned(),
    };
    let Some(map) = entry.map() else {
        return unusable("not a table of settings");
    };
    match map.get("type").map(|t| t.value.str()) {
        Some(Some(t)) if shape.stdio_types.contains(&t) => {}
        Some(Some(t)) if shape.builtin_types.contains(&t) => {
            return Transport::Builtin {
                r#type: t.to_owned(),
            };
        }
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
            wrapped: is_wrapped(&command, proxy),
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

/// Already behind rootsd: a program, whatever its name or place (a versioned install renames and
/// moves it), whose arguments are ones `rootsctl` reads as `proxy` with a server to run:
/// `[global options] proxy [options] [--] SERVER ARGS…`. rootsctl's own parser decides, through
/// `proxy` ([`IsProxy`]), so an entry the proxy would refuse is never called behind rootsd.
pub fn is_wrapped(command: &[String], proxy: IsProxy) -> bool {
    let Some((_, args)) = command.split_first() else {
        return false;
    };
    args.iter().any(|a| a == "proxy") && proxy(args)
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
#[cfg(test)]
pub fn region_of(root: &Node, shape: &Shape, path: &[String]) -> Option<Range<usize>> {
    region(locate(root, path)?.map()?, shape)
}

/// `text` read by `editor`, refused when a table has a key twice: hosts read such a file each
/// their own way (the first or the last wins), so no entry of it can be told for sure. The error
/// says the file does not parse, which tells it from a planned edit that was refused.
pub fn parse(text: &str, editor: &dyn Editor) -> Result<Node, String> {
    parse_unique(text, editor).map_err(|e| format!("does not parse: {e}"))
}

fn parse_unique(text: &str, editor: &dyn Editor) -> Result<Node, String> {
    let root = editor.parse(text)?;
    let mut stack = vec![&root];
    while let Some(node) = stack.pop() {
        match &node.kind {
            Kind::Map(map) => {
                let mut seen = std::collections::HashSet::new();
                for member in &map.members {
                    if !seen.insert(member.key.as_str()) {
                        let line = 1 + text
                            .get(..member.key_span.start)
                            .map_or(0, |t| t.matches('\n').count());
                        return Err(format!(
                            "line {line}: the key {:?} is there twice in the same table; keep one of them",
                            member.key
                        ));
                    }
                    stack.push(&member.value);
                }
            }
            Kind::Seq(items) => stack.extend(items),
            _ => {}
        }
    }
    Ok(root)
}

/// Wraps every stdio entry of `text` not yet behind rootsd.
pub fn wrap(
    text: &str,
    editor: &dyn Editor,
    shape: &Shape,
    wrapping: &Wrapping,
) -> Result<Plan, String> {
    let root = parse(text, editor)?;
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut remembered = Vec::new();
    let mut lines = Vec::new();
    for (path, entry) in entries(&root, shape) {
        let Transport::Stdio {
            command,
            wrapped: false,
        } = transport(entry, shape, wrapping.proxy)
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
        new.extend(command.iter().cloned());
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
        let values = values(text, map, shape, command, &entry_edits, wrapping);
        remembered.push(Remembered {
            path,
            original: text[region].to_owned(),
            wrapped,
            values: Some(values),
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

/// The values of an entry rootsctl is wrapping, from its command line and its splices.
fn values(
    text: &str,
    map: &Map,
    shape: &Shape,
    original: Vec<String>,
    edits: &[(Range<usize>, String)],
    wrapping: &Wrapping,
) -> Values {
    let command = map.get(shape.command).map(|m| &m.value);
    let wrapped_text = |span: &Range<usize>| {
        edits
            .iter()
            .find(|(s, _)| s == span)
            .map_or_else(String::new, |(_, new)| new.clone())
    };
    let command_span = command.map_or(0..0, |c| c.span.clone());
    let piece = Piece {
        original: Some(text[command_span.clone()].to_owned()),
        wrapped: wrapped_text(&command_span),
    };
    let args = shape.args.map(|key| match map.get(key) {
        Some(args) => Piece {
            original: Some(text[args.value.span.clone()].to_owned()),
            wrapped: wrapped_text(&args.value.span),
        },
        None => Piece {
            original: None,
            wrapped: String::new(),
        },
    });
    let mut wrapped = vec![wrapping.rootsctl.clone(), "proxy".to_owned()];
    wrapped.extend(wrapping.options.iter().cloned());
    if wrapping.merge_host_roots {
        wrapped.extend(["--host-roots".to_owned(), "merge".to_owned()]);
    }
    wrapped.push("--".to_owned());
    wrapped.extend(original.iter().cloned());
    Values {
        original,
        wrapped,
        command: piece,
        args,
    }
}

/// What unwrapping one remembered entry came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Restored,
    /// It still runs behind rootsd but no longer as rootsctl wrote it: left as it is, and still
    /// remembered.
    EditedSince,
    /// The file has no entry there (a host may be half-way through saving it): left as it is,
    /// and still remembered.
    Missing,
    /// The entry is no longer behind rootsd (put back by hand): nothing to restore, and
    /// forgotten.
    Gone,
}

/// Restores every remembered entry of `text` that still holds what rootsctl wrote.
///
/// An entry is matched to its record in two ways. When the text from its command to its
/// arguments is byte for byte what rootsctl wrote (and no other entry's text is inside it), that
/// text is put back as it was. Otherwise, when its command line, as values, is exactly the one
/// rootsctl wrote (program and arguments; rootsctl writes nothing else, so the entry's env, cwd
/// and other keys are not looked at), the host has only saved the file again in its own layout:
/// the original program and arguments are put back in the file's current layout, and every
/// other change the host made stays.
pub fn unwrap(
    text: &str,
    editor: &dyn Editor,
    shape: &Shape,
    remembered: &[Remembered],
    proxy: IsProxy,
) -> Result<(Plan, Vec<Outcome>), String> {
    let root = parse(text, editor)?;
    let located: Vec<Option<&Node>> = remembered.iter().map(|e| locate(&root, &e.path)).collect();
    let regions: Vec<Option<Range<usize>>> = located
        .iter()
        .map(|n| n.and_then(Node::map).and_then(|m| region(m, shape)))
        .collect();
    let mut edits = Vec::new();
    let mut outcomes = Vec::new();
    for (i, entry) in remembered.iter().enumerate() {
        // A record an older rootsctl wrote of a file with a key twice names one entry twice: the
        // first of them restores it, the others are forgotten.
        if remembered[..i].iter().any(|e| e.path == entry.path) {
            outcomes.push(Outcome::Gone);
            continue;
        }
        let Some(node) = located[i] else {
            outcomes.push(Outcome::Missing);
            continue;
        };
        let (Some(map), Some(region)) = (node.map(), regions[i].clone()) else {
            outcomes.push(Outcome::Gone);
            continue;
        };
        // Dotted TOML keys out of order put one entry's values inside another's region.
        let alone = regions.iter().enumerate().all(|(j, other)| {
            j == i
                || other
                    .as_ref()
                    .is_none_or(|o| o.end <= region.start || region.end <= o.start)
        });
        let command = command_line(map, shape).ok();
        let outcome = if alone && text[region.clone()] == entry.wrapped {
            edits.push((region, entry.original.clone()));
            Outcome::Restored
        } else if let Some(values) = &entry.values
            && command.as_ref() == Some(&values.wrapped)
        {
            edits.extend(restore(text, editor, map, shape, values));
            Outcome::Restored
        } else if command.is_some_and(|c| is_wrapped(&c, proxy)) {
            Outcome::EditedSince
        } else {
            Outcome::Gone
        };
        outcomes.push(outcome);
    }
    edits.sort_by_key(|(span, _): &(Range<usize>, String)| span.start);
    if edits.windows(2).any(|pair| pair[0].0.end > pair[1].0.start) {
        return Err("two wrapped entries share their place in the file, which rootsctl cannot undo one by one; unwrap them by hand (the backups hold the originals)".to_owned());
    }
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

/// The splices that put `values.original` back into `map`, whose command line is
/// `values.wrapped`: a value whose text is still what rootsctl wrote gets its original text back,
/// any other is written anew in the layout it has now.
fn restore(
    text: &str,
    editor: &dyn Editor,
    map: &Map,
    shape: &Shape,
    values: &Values,
) -> Vec<(Range<usize>, String)> {
    let quoted = |items: &[String]| items.iter().map(|s| quote(s)).collect::<Vec<_>>();
    let again = |node: &Node, piece: &Piece, fresh: String| {
        let now = &text[node.span.clone()];
        match &piece.original {
            Some(original) if now == piece.wrapped => original.clone(),
            _ => fresh,
        }
    };
    let Some(command) = map.get(shape.command) else {
        return Vec::new();
    };
    let Some((program, args)) = values.original.split_first() else {
        return Vec::new();
    };
    let mut edits = Vec::new();
    match (shape.args.and_then(|k| map.get(k)), &values.args) {
        (Some(member), Some(piece)) => {
            let fresh = quote(program);
            edits.push((
                command.value.span.clone(),
                again(&command.value, &values.command, fresh),
            ));
            match &piece.original {
                Some(_) => {
                    let fresh = editor.list(&quoted(args), Some(&member.value), text);
                    edits.push((
                        member.value.span.clone(),
                        again(&member.value, piece, fresh),
                    ));
                }
                None => edits.push((removal(text, map, member), String::new())),
            }
        }
        _ => {
            let fresh = editor.list(&quoted(&values.original), Some(&command.value), text);
            edits.push((
                command.value.span.clone(),
                again(&command.value, &values.command, fresh),
            ));
        }
    }
    edits.sort_by_key(|(span, _)| span.start);
    edits
}

/// The text that holds `member` of `map`, to take it away: in a map written inline, with the
/// separator before it (or after it, when it comes first); in one written a member per line,
/// with the line break before it, so that what followed its value on its line (a comment that
/// was after the command before wrap added the member) stays on the line before.
fn removal(text: &str, map: &Map, member: &Member) -> Range<usize> {
    let end = member.value.span.end;
    if !map.inline {
        return match text[..member.key_span.start].rfind('\n') {
            Some(n) if text[..n].ends_with('\r') => n - 1..end,
            Some(n) => n..end,
            None => 0..text[end..].find('\n').map_or(text.len(), |n| end + n + 1),
        };
    }
    let at = map.members.iter().position(|m| std::ptr::eq(m, member));
    match at {
        Some(at) if at > 0 => map.members[at - 1].value.span.end..end,
        Some(at) => match map.members.get(at + 1) {
            Some(next) => member.key_span.start..next.key_span.start,
            None => member.key_span.start..end,
        },
        None => end..end,
    }
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
