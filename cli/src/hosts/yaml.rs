//! YAML (Goose's `config.yaml`, Continue's `config.yaml`) read into a [`Node`] tree with byte
//! spans, from the positions `saphyr-parser`'s events carry. Only the first document is read:
//! hosts' files have one.

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

use super::tree::{Kind, Map, Member, Node};

/// Deeper than any host's file, shallow enough that the recursion cannot exhaust the stack.
const MAX_DEPTH: usize = 128;

pub fn parse(text: &str) -> Result<Node, String> {
    // The parser counts characters; the planner splices bytes.
    let mut offsets: Vec<usize> = text.char_indices().map(|(at, _)| at).collect();
    offsets.push(text.len());
    let mut builder = Builder {
        events: Parser::new_from_str(text),
        offsets,
        text,
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

struct Builder<'t> {
    events: Parser<'t, saphyr_parser::StrInput<'t>>,
    offsets: Vec<usize>,
    text: &'t str,
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
        let start = self.byte(span.start);
        let inline = matches!(self.text.as_bytes().get(start), Some(b'{' | b'['));
        match event {
            Event::Scalar(value, style, ..) => Ok(Node {
                span: start..scalar_end(self.text, start, self.byte(span.end), style),
                kind: Kind::Str(value.into_owned()),
            }),
            Event::SequenceStart(..) => {
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.expect_next()?;
                    if event == Event::SequenceEnd {
                        let end = self.end(inline, span, items.last().map(|n: &Node| n.span.end));
                        return Ok(Node {
                            span: start..end.max(start),
                            kind: Kind::Seq(items),
                        });
                    }
                    items.push(self.node(event, span, depth + 1)?);
                }
            }
            Event::MappingStart(..) => {
                let mut members = Vec::new();
                loop {
                    let (event, key_span) = self.expect_next()?;
                    if event == Event::MappingEnd {
                        let last = members.last().map(|m: &Member| m.value.span.end);
                        let end = self.end(inline, key_span, last);
                        return Ok(Node {
                            span: start..end.max(start),
                            kind: Kind::Map(Map { members, inline }),
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
            _ => Ok(Node {
                span: start..self.byte(span.end),
                kind: Kind::Other,
            }),
        }
    }

    /// Where a collection ends: a flow one at its closing bracket, a block one with its last
    /// value (the parser places a block's end at whatever follows it).
    fn end(&self, inline: bool, end: Span, last: Option<usize>) -> usize {
        match (inline, last) {
            (false, Some(last)) => last,
            _ => self.byte(end.end),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_place() {
        let text = "# goose\nextensions:\n  fs:\n    cmd: \"npx\" # why\n    args:\n      - -y\n      - 'é x'\n    flow: [a, \"b\"]\n    envs: {}\n";
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
        assert_eq!(&text[flow.span.clone()], "[a, \"b\"]");
        assert_eq!(&text[fs.get("envs").unwrap().value.span.clone()], "{}");
        let error = parse("a:\n  - b\n c: [\n").unwrap_err();
        assert!(error.starts_with("line "), "{error}");
    }
}
