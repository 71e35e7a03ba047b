//! JSON and JSONC (comments, trailing commas), read into a [`Node`] tree with byte spans. The
//! same reader serves strict JSON files: it never adds a comment or a trailing comma, so a file
//! that was strict JSON stays so.

use super::tree::{Kind, Map, Member, Node};

/// Deeper than any host's file, shallow enough that the recursion cannot exhaust the stack.
const MAX_DEPTH: usize = 128;

/// Reads `text` as one JSONC value; the error says what is wrong and on which line.
pub fn parse(text: &str) -> Result<Node, String> {
    // A byte order mark, as some Windows editors write, is not part of the document.
    let mut reader = Reader {
        text: text.as_bytes(),
        pos: if text.starts_with('\u{feff}') { 3 } else { 0 },
    };
    reader.skip_blank()?;
    // A file holding only whitespace and comments is an empty configuration, as hosts read it.
    if reader.pos == reader.text.len() {
        return Ok(Node {
            span: 0..0,
            kind: Kind::Map(Map::default()),
        });
    }
    let node = reader.value(0)?;
    reader.skip_blank()?;
    if reader.pos != reader.text.len() {
        return Err(reader.error("unexpected text after the end of the document"));
    }
    Ok(node)
}

struct Reader<'t> {
    text: &'t [u8],
    pos: usize,
}

impl Reader<'_> {
    fn error(&self, what: &str) -> String {
        let line = 1 + self.text[..self.pos.min(self.text.len())]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        format!("line {line}: {what}")
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    /// Skips whitespace and comments.
    fn skip_blank(&mut self) -> Result<(), String> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.text.get(self.pos + 1) == Some(&b'/') => {
                    while self.peek().is_some_and(|b| b != b'\n') {
                        self.pos += 1;
                    }
                }
                Some(b'/') if self.text.get(self.pos + 1) == Some(&b'*') => {
                    let start = self.pos;
                    let close = memchr::memmem::find(&self.text[self.pos + 2..], b"*/");
                    match close {
                        Some(at) => self.pos += 2 + at + 2,
                        None => {
                            self.pos = start;
                            return Err(self.error("a /* comment is never closed"));
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        let start = self.pos;
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => {
                let s = self.string()?;
                Ok(Node {
                    span: start..self.pos,
                    kind: Kind::Str(s),
                })
            }
            Some(_) => {
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.'))
                {
                    self.pos += 1;
                }
                let word = &self.text[start..self.pos];
                let valid = matches!(word, b"true" | b"false" | b"null")
                    || serde_json::from_slice::<serde_json::Number>(word).is_ok();
                if !valid {
                    self.pos = start;
                    return Err(self.error("expected a value"));
                }
                Ok(Node {
                    span: start..self.pos,
                    kind: Kind::Other,
                })
            }
            None => Err(self.error("the document ends where a value was expected")),
        }
    }

    /// A string starting at its opening quote, decoded.
    fn string(&mut self) -> Result<String, String> {
        let start = self.pos;
        let mut i = self.pos + 1;
        let mut escaped = false;
        // Host files carry megabytes of history in single strings (`~/.claude.json`): find the
        // end with a vectorised search instead of a byte at a time.
        loop {
            let rest = self.text.get(i..).unwrap_or_default();
            match memchr::memchr3(b'"', b'\\', b'\n', rest).map(|at| (at, rest[at])) {
                Some((at, b'"')) => {
                    i += at;
                    break;
                }
                Some((at, b'\\')) => {
                    escaped = true;
                    i += at + 2;
                }
                _ => return Err(self.error("a string is never closed")),
            }
        }
        self.pos = i + 1;
        let inner = &self.text[start + 1..i];
        // Without escapes the text is the value, once it is known to be UTF-8 without control
        // characters (which JSON does not allow raw in a string).
        if !escaped
            && inner.iter().copied().min().unwrap_or(b' ') >= b' '
            && let Ok(text) = std::str::from_utf8(inner)
        {
            return Ok(text.to_owned());
        }
        serde_json::from_slice(&self.text[start..self.pos]).map_err(|e| {
            self.pos = start;
            self.error(&format!("invalid string: {e}"))
        })
    }

    fn object(&mut self, depth: usize) -> Result<Node, String> {
        let start = self.pos;
        self.pos += 1;
        let mut members = Vec::new();
        loop {
            self.skip_blank()?;
            match self.peek() {
                Some(b'}') => break,
                Some(b'"') => {}
                _ => return Err(self.error("expected a key in quotes or `}`")),
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = key_start..self.pos;
            self.skip_blank()?;
            if self.peek() != Some(b':') {
                return Err(self.error("expected `:` after a key"));
            }
            self.pos += 1;
            self.skip_blank()?;
            let value = self.value(depth + 1)?;
            members.push(Member {
                key,
                key_span,
                value,
            });
            self.skip_blank()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => break,
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
        self.pos += 1;
        Ok(Node {
            span: start..self.pos,
            kind: Kind::Map(Map {
                members,
                inline: true,
            }),
        })
    }

    fn array(&mut self, depth: usize) -> Result<Node, String> {
        let start = self.pos;
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_blank()?;
            if self.peek() == Some(b']') {
                break;
            }
            items.push(self.value(depth + 1)?);
            self.skip_blank()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => break,
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
        self.pos += 1;
        Ok(Node {
            span: start..self.pos,
            kind: Kind::Seq(items),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_trailing_commas_and_spans() {
        let text = "// top\n{ /* a */ \"a\": [1, \"x\",], \"b\": {\"c\": null,}, }\n";
        let node = parse(text).unwrap();
        let map = node.map().unwrap();
        let a = &map.get("a").unwrap().value;
        assert_eq!(&text[a.span.clone()], "[1, \"x\",]");
        assert_eq!(&text[map.get("b").unwrap().key_span.clone()], "\"b\"");
        assert_eq!(a.strings(), None);
        assert_eq!(&text[node.span.clone()], &text[7..text.len() - 1]);
    }

    #[test]
    fn what_does_not_parse_is_named_with_its_line() {
        for (text, expect) in [
            ("{\n\"a\": 1\n\"b\": 2}", "line 3: expected `,` or `}`"),
            ("{\"a\": tru}", "line 1: expected a value"),
            ("{\"a\": 1} x", "unexpected text after the end"),
            ("{\n/* open", "line 2: a /* comment is never closed"),
            ("{\"a\": \"b}", "a string is never closed"),
            (&"[".repeat(200), "nested too deeply"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(expect), "{text:?}: {error}");
        }
        assert_eq!(parse(" // nothing\n").unwrap().map(), Some(&Map::default()));
    }

    #[test]
    fn strings_read_the_same_with_and_without_escapes_and_raw_control_characters_are_refused() {
        let long = "x".repeat(1 << 20);
        for (text, expect) in [
            (format!("[\"{long}\"]"), long.clone()),
            (
                "[\"a\\\"b\\\\c\\n\\u00e9\"]".to_owned(),
                "a\"b\\c\né".to_owned(),
            ),
            ("[\"é ünï\"]".to_owned(), "é ünï".to_owned()),
            ("[\"\"]".to_owned(), String::new()),
        ] {
            let node = parse(&text).unwrap();
            assert_eq!(node.strings(), Some(vec![expect]), "{text:.40}");
        }
        for (text, expect) in [
            ("[\"a\tb\"]", "invalid string"),
            ("[\"a\\\"]", "a string is never closed"),
            ("[\"a\\", "a string is never closed"),
            ("[\"a\nb\"]", "a string is never closed"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(expect), "{text:?}: {error}");
        }
    }
}
