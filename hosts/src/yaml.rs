//! YAML (Goose's `config.yaml`, Continue's `config.yaml`) read into a [`Node`] tree with byte
//! spans, from the positions `saphyr-parser`'s events carry. Only the first document is read:
//! hosts' files have one.
//!
//! A value's span is its content alone: an anchor or a tag written before it (`&common [..]`,
//! `!!seq`) stays outside, so that a value spliced in keeps them and the file still parses. An
//! alias is read two ways. For the planner ([`parse`]), an alias of a string or of a list of
//! strings reads as that value, spanning the alias itself, so that an entry whose `args` are
//! `*common` is edited by writing its own list in place of the alias; an alias of anything
//! larger stays unread ([`Kind::Other`]), so no entry is ever edited through another's bytes.
//! For the check after a plan ([`values`]), every alias reads as what it names, so that an edit
//! of an anchored value shows wherever that value is used. A mapping with a merge key (`<<`) is
//! left unread by the planner: hosts' readers disagree on what it holds.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

use super::tree::{Kind, Map, Member, Node};

/// Deeper than any host's file, shallow enough that the recursion cannot exhaust the stack.
const MAX_DEPTH: usize = 128;

/// How many values all of a file's aliases may stand for: far more than any host's file holds,
/// few enough to read in well under a second.
const MAX_EXPANDED: usize = 1 << 20;

/// How many values `node` holds, itself included.
fn size(node: &Node) -> usize {
    match &node.kind {
        Kind::Map(map) => {
            1 + map
                .members
                .iter()
                .map(|m| 1 + size(&m.value))
                .sum::<usize>()
        }
        Kind::Seq(items) => 1 + items.iter().map(size).sum::<usize>(),
        Kind::Str(_) | Kind::Other => 1,
    }
}

/// The planner's view: spans for splicing, aliases of larger values left unread.
pub fn parse(text: &str) -> Result<Node, String> {
    read(text, false)
}

/// What the file means: every alias read as the value it names.
pub fn values(text: &str) -> Result<Node, String> {
    read(text, true)
}

fn read(text: &str, resolve_all: bool) -> Result<Node, String> {
    printable(text)?;
    // The parser counts characters; the planner splices bytes.
    let mut offsets: Vec<usize> = text.char_indices().map(|(at, _)| at).collect();
    offsets.push(text.len());
    let mut builder = Builder {
        events: Parser::new_from_str(text),
        offsets,
        text,
        anchors: HashMap::new(),
        resolve_all,
        expanded: 0,
    };
    loop {
        match builder.next()? {
            None | Some((Event::StreamEnd, _)) => {
                return Ok(Node {
                    span: 0..0,
                    kind: Kind::Map(Map::default()),
                });
            }
            Some((Event::StreamStart | Event::DocumentStart(_), _)) => continue,
            Some((event, span)) => return builder.node(event, span, 0),
        }
    }
}

/// Refuses a character YAML does not allow unescaped (a C0 or C1 control but tab and line
/// breaks, DEL, U+FFFE, U+FFFF), as the hosts' own readers (libyaml, js-yaml) do: a file that
/// holds one is not one they read, and a plan that would write one is refused by the check
/// that reads it back.
fn printable(text: &str) -> Result<(), String> {
    let allowed = |c: char| {
        matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}')
            || ('\u{a0}'..='\u{fffd}').contains(&c)
            || c >= '\u{10000}'
    };
    match text.char_indices().find(|(_, c)| !allowed(*c)) {
        None => Ok(()),
        Some((at, c)) => Err(format!(
            "line {}: the character U+{:04X} is not allowed unescaped in YAML; write it as \"\\u{:04X}\" in a double-quoted string",
            1 + text[..at].matches('\n').count(),
            c as u32,
            c as u32
        )),
    }
}

struct Builder<'t> {
    events: Parser<'t, saphyr_parser::StrInput<'t>>,
    offsets: Vec<usize>,
    text: &'t str,
    /// Each anchor's value, by the parser's id.
    anchors: HashMap<usize, Node>,
    resolve_all: bool,
    /// How many values the aliases read so far stand for.
    expanded: usize,
}

impl<'t> Builder<'t> {
    fn next(&mut self) -> Result<Option<(Event<'t>, Span)>, String> {
        match self.events.next_event() {
            None => Ok(None),
            Some(Ok(event)) => Ok(Some(event)),
            Some(Err(e)) => Err(format!(
                "line {} column {}: {}",
                e.marker().line(),
                e.marker().col() + 1,
                e.info()
            )),
        }
    }

    fn byte(&self, marker: saphyr_parser::Marker) -> usize {
        self.offsets[marker.index().min(self.offsets.len() - 1)]
    }

    fn expect_next(&mut self) -> Result<(Event<'t>, Span), String> {
        self.next()?
            .ok_or_else(|| "the document ends inside a collection".to_owned())
    }

    fn node(&mut self, event: Event<'t>, span: Span, depth: usize) -> Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(format!("line {}: nested too deeply", span.start.line()));
        }
        let anchor = match &event {
            Event::Scalar(_, _, anchor, tag) => (*anchor, tag.is_some()),
            Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag) => {
                (*anchor, tag.is_some())
            }
            _ => (0, false),
        };
        let mut start = self.byte(span.start);
        if anchor.0 > 0 || anchor.1 {
            start = after_properties(self.text, start);
        }
        let node = match event {
            Event::Alias(id) => {
                let node = self.alias(id, start..self.byte(span.end));
                // Aliases of aliases grow a file's values exponentially (the "billion laughs"):
                // what they may add in all is bounded.
                self.expanded += size(&node);
                if self.expanded > MAX_EXPANDED {
                    return Err(format!(
                        "line {}: its aliases name more than {MAX_EXPANDED} values in all; write the values out",
                        span.start.line()
                    ));
                }
                return Ok(node);
            }
            Event::Scalar(value, style, ..) => {
                if matches!(style, ScalarStyle::Literal | ScalarStyle::Folded) {
                    start = block_header(self.text, start);
                }
                Node {
                    span: start..scalar_end(self.text, start, self.byte(span.end), style),
                    kind: Kind::Str(value.into_owned()),
                }
            }
            Event::SequenceStart(..) => self.sequence(start, depth)?,
            Event::MappingStart(..) => self.mapping(start, depth)?,
            _ => Node {
                span: start..self.byte(span.end),
                kind: Kind::Other,
            },
        };
        if anchor.0 > 0 {
            self.anchors.insert(anchor.0, node.clone());
        }
        Ok(node)
    }

    /// An alias, read as [`parse`] and [`values`] say.
    fn alias(&self, id: usize, span: std::ops::Range<usize>) -> Node {
        let named = self.anchors.get(&id);
        let simple = |n: &Node| matches!(n.kind, Kind::Str(_) | Kind::Other);
        match named {
            Some(named) if self.resolve_all => named.clone(),
            Some(named) if simple(named) => Node {
                span,
                kind: named.kind.clone(),
            },
            Some(Node {
                kind: Kind::Seq(items),
                ..
            }) if items.iter().all(simple) => Node {
                span: span.clone(),
                kind: Kind::Seq(
                    items
                        .iter()
                        .map(|i| Node {
                            span: span.clone(),
                            kind: i.kind.clone(),
                        })
                        .collect(),
                ),
            },
            _ => Node {
                span,
                kind: Kind::Other,
            },
        }
    }

    fn sequence(&mut self, start: usize, depth: usize) -> Result<Node, String> {
        let inline = self.text.as_bytes().get(start) == Some(&b'[');
        let mut items = Vec::new();
        loop {
            let (event, span) = self.expect_next()?;
            if event == Event::SequenceEnd {
                let end = self.end(inline, span, items.last().map(|n: &Node| n.span.end), start);
                let start = match items.first() {
                    Some(first) if !inline => start.min(dash_before(self.text, first.span.start)),
                    _ => start,
                };
                return Ok(Node {
                    span: start..end.max(start),
                    kind: Kind::Seq(items),
                });
            }
            items.push(self.node(event, span, depth + 1)?);
        }
    }

    fn mapping(&mut self, start: usize, depth: usize) -> Result<Node, String> {
        let inline = self.text.as_bytes().get(start) == Some(&b'{');
        let mut members = Vec::new();
        loop {
            let (event, key_span) = self.expect_next()?;
            if event == Event::MappingEnd {
                let last = members.last().map(|m: &Member| m.value.span.end);
                let end = self.end(inline, key_span, last, start);
                // A merge key (`<<: *defaults`) is read by some hosts' readers and not by
                // others (serde_yaml does not merge), so what such a mapping's entry runs is not
                // known: the planner leaves it unread, and never edits it.
                let merges = members
                    .iter()
                    .any(|m| self.text.get(m.key_span.clone()) == Some("<<"));
                let kind = if merges && !self.resolve_all {
                    Kind::Other
                } else {
                    Kind::Map(Map { members, inline })
                };
                return Ok(Node {
                    span: start..end.max(start),
                    kind,
                });
            }
            let key = self.node(event, key_span, depth + 1)?;
            let (event, span) = self.expect_next()?;
            let value = self.node(event, span, depth + 1)?;
            members.push(Member {
                key: key.str().unwrap_or_default().to_owned(),
                key_span: key.span,
                value,
            });
        }
    }

    /// Where a collection ends: a flow one at its closing bracket, a block one with its last
    /// value (the parser places a block's end at whatever follows it, a flow one's after the
    /// comment on its closing line).
    fn end(&self, inline: bool, end: Span, last: Option<usize>, start: usize) -> usize {
        match (inline, last) {
            (false, Some(last)) => last,
            (true, _) => closing_bracket(self.text, last.unwrap_or(start + 1))
                .unwrap_or_else(|| self.byte(end.end)),
            (false, None) => self.byte(end.end),
        }
    }
}

/// Just after the `]` or `}` that closes a flow collection whose last item ends at `from`:
/// only blanks, commas and comments come between.
fn closing_bracket(text: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = from;
    loop {
        match bytes.get(at)? {
            b' ' | b'\t' | b'\r' | b'\n' | b',' => at += 1,
            b'#' => at += text[at..].find('\n')?,
            b']' | b'}' => return Some(at + 1),
            _ => return None,
        }
    }
}

/// Where the `-` before a block sequence's first item is: the parser starts a sequence written
/// without indentation under its key (`args:` then `- x` at the key's column, as PyYAML and
/// serde_yaml write it) at its first item instead, and a list spliced there would be nested.
fn dash_before(text: &str, item: usize) -> usize {
    let before = text[..item].trim_end_matches([' ', '\t']);
    match before.strip_suffix('-') {
        Some(rest) => rest.len(),
        None => item,
    }
}

/// Where a block scalar starts: at its `|` or `>`, which the parser places before its first
/// line of content; a string spliced at the content alone would be read as that content.
fn block_header(text: &str, content: usize) -> usize {
    if matches!(text.as_bytes().get(content), Some(b'|' | b'>')) {
        return content;
    }
    let Some(header) = text[..content].rfind(['|', '>']) else {
        return content;
    };
    let line_end = text[header..content]
        .find('\n')
        .map_or(content, |n| header + n);
    let indicators = text[header + 1..line_end]
        .trim_start_matches(|c: char| c == '+' || c == '-' || c.is_ascii_digit());
    let rest = indicators.trim_start();
    let blank_after = text[line_end..content].chars().all(char::is_whitespace);
    if (rest.is_empty() || rest.starts_with('#')) && blank_after {
        header
    } else {
        content
    }
}

/// Where a value's content starts, past the anchor and tag written before it (and the blanks,
/// line breaks and comments between them).
fn after_properties(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let mut at = start;
    let ends_token = |b: u8| {
        matches!(
            b,
            b' ' | b'\t' | b'\r' | b'\n' | b',' | b'[' | b']' | b'{' | b'}'
        )
    };
    loop {
        match bytes.get(at) {
            Some(b'!') if bytes.get(at + 1) == Some(&b'<') => {
                at += bytes[at..]
                    .iter()
                    .position(|b| *b == b'>')
                    .map_or(1, |p| p + 1);
            }
            Some(b'&' | b'!') => {
                at += 1;
                while bytes.get(at).is_some_and(|b| !ends_token(*b)) {
                    at += 1;
                }
            }
            Some(b' ' | b'\t' | b'\r' | b'\n') => at += 1,
            Some(b'#') => {
                while bytes.get(at).is_some_and(|b| *b != b'\n') {
                    at += 1;
                }
            }
            _ => return at,
        }
    }
}

/// Where a scalar ends: the parser's end runs on over the blanks and comment that follow it.
fn scalar_end(text: &str, start: usize, end: usize, style: ScalarStyle) -> usize {
    let bytes = text.as_bytes();
    match style {
        ScalarStyle::DoubleQuoted => {
            let mut i = start + 1;
            while i < end {
                match bytes[i] {
                    b'\\' => i += 2,
                    b'"' => return i + 1,
                    _ => i += 1,
                }
            }
            end
        }
        ScalarStyle::SingleQuoted => {
            let mut i = start + 1;
            while i < end {
                match (bytes[i], bytes.get(i + 1)) {
                    (b'\'', Some(b'\'')) => i += 2,
                    (b'\'', _) => return i + 1,
                    _ => i += 1,
                }
            }
            end
        }
        ScalarStyle::Literal | ScalarStyle::Folded => block_scalar_end(text, start, end),
        _ => {
            let written = &text[start..end];
            let written = [" #", "\t#"]
                .iter()
                .filter_map(|c| written.find(c))
                .min()
                .map_or(written, |cut| &written[..cut]);
            start + written.trim_end().len()
        }
    }
}

/// Where a block scalar (`|`, `>`) ends: with its last line of content. A `#` in its content is
/// content, but the parser's end may run on over blank lines and comment lines after it.
fn block_scalar_end(text: &str, start: usize, end: usize) -> usize {
    let header = text[start..end].find('\n').map_or(end, |n| start + n);
    let mut written = text[start..end].trim_end();
    while start + written.len() > header {
        let line_start = written.rfind('\n').map_or(0, |n| n + 1);
        if !written[line_start..].trim_start().starts_with('#') {
            break;
        }
        written = written[..line_start].trim_end();
    }
    start + written.len()
}

#[cfg(test)]
mod layouts;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_place() {
        let text = "# goose\nextensions:\n  fs:\n    cmd: \"npx\" # why\n    args:\n      - -y\n      - 'é x'\n    flow: [a, \"b\"]  # a comment\n    folded: >-\n      a\n      b\n    # after\n    anchored: &x !!seq [x] # and why\n    envs: {}\n";
        let node = parse(text).unwrap();
        let ext = &node.map().unwrap().get("extensions").unwrap().value;
        let fs = ext.map().unwrap().get("fs").unwrap();
        assert_eq!(&text[fs.key_span.clone()], "fs");
        let fs = fs.value.map().unwrap();
        assert_eq!(&text[fs.get("cmd").unwrap().value.span.clone()], "\"npx\"");
        let args = &fs.get("args").unwrap().value;
        assert_eq!(&text[args.span.clone()], "- -y\n      - 'é x'");
        assert_eq!(
            args.strings(),
            Some(vec!["-y".to_owned(), "é x".to_owned()])
        );
        let flow = &fs.get("flow").unwrap().value;
        let folded = &fs.get("folded").unwrap().value;
        assert_eq!(&text[folded.span.clone()], ">-\n      a\n      b");
        let anchored = &fs.get("anchored").unwrap().value;
        assert_eq!(&text[anchored.span.clone()], "[x]");
        assert_eq!(&text[flow.span.clone()], "[a, \"b\"]");
        assert_eq!(&text[fs.get("envs").unwrap().value.span.clone()], "{}");
        let error = parse("a:\n  - b\n c: [\n").unwrap_err();
        assert!(error.starts_with("line "), "{error}");
        let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (i, name) in "bcdefghij".chars().enumerate() {
            let prev = (b'a' + i as u8) as char;
            laughs.push_str(&format!(
                "{name}: &{name} [{}]\n",
                vec![format!("*{prev}"); 10].join(", ")
            ));
        }
        // The planner reads only aliases of strings and lists of strings, which stay small.
        parse(&laughs).unwrap();
        let error = values(&laughs).unwrap_err();
        assert!(error.contains("aliases name more than"), "{error}");
        let error = parse("a: \"ok\"\nb: x\u{80}\n").unwrap_err();
        assert!(error.starts_with("line 2: the character U+0080"), "{error}");
        assert!(error.starts_with("line "), "{error}");
    }
}
