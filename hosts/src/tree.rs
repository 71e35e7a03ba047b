//! What every format's editor reads a host's file into: a tree of the values the planner looks
//! at, each with the byte span it occupies in the file. The planner decides from the tree and
//! edits by splicing bytes at those spans, so every byte outside a wrapped entry's `command` and
//! `args` is left as it was, whatever the format.

use std::ops::Range;

/// One value of the file and where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The value's bytes in the file (a string's quotes included).
    pub span: Range<usize>,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Map(Map),
    Seq(Vec<Node>),
    Str(String),
    /// A number, a boolean, a null, a date: nothing the planner reads.
    Other,
}

/// A JSON object, a TOML table or a YAML mapping.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Map {
    pub members: Vec<Member>,
    /// Written inline (`{…}` in JSON, a TOML inline table, a YAML flow mapping) rather than one
    /// member per line.
    pub inline: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub key: String,
    /// The key's bytes in the file.
    pub key_span: Range<usize>,
    pub value: Node,
}

impl Map {
    pub fn get(&self, key: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.key == key)
    }
}

impl Node {
    pub fn map(&self) -> Option<&Map> {
        match &self.kind {
            Kind::Map(map) => Some(map),
            _ => None,
        }
    }

    pub fn str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The strings of a sequence of strings; `None` when it is not one.
    pub fn strings(&self) -> Option<Vec<String>> {
        match &self.kind {
            Kind::Seq(items) => items.iter().map(|i| i.str().map(str::to_owned)).collect(),
            _ => None,
        }
    }
}

/// `s` as a double-quoted string that JSON, TOML's basic strings and YAML's double-quoted
/// scalars all read back as `s`: quotes, backslashes and control characters (DEL, the C1
/// controls U+0080 to U+009F and U+FFFE/U+FFFF included, which YAML does not allow raw) are
/// escaped as `\"`, `\\` and `\uXXXX`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20
                || (0x7f..=0x9f).contains(&(c as u32))
                || matches!(c, '\u{fffe}' | '\u{ffff}') =>
            {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A bracketed list of `items` (already quoted) laid out as `original` was: one per line with
/// its indentation when it had one element per line, else on one line.
pub fn bracketed(items: &[String], original: Option<(&Node, &str)>) -> String {
    if let Some((
        Node {
            span,
            kind: Kind::Seq(old),
        },
        text,
    )) = original
        && let (Some(first), Some(last)) = (old.first(), old.last())
    {
        let lead = &text[span.start + 1..first.span.start];
        let tail = &text[last.span.end..span.end - 1];
        let trailing_comma = tail.trim_start().starts_with(',');
        // What follows the last item (after its trailing comma, if any) is kept as it is: the
        // newline and indentation before `]` of a list laid out one item per line.
        let closing = if trailing_comma {
            tail.trim_start().trim_start_matches(',')
        } else {
            tail
        };
        let plain = |t: &str| t.chars().all(char::is_whitespace);
        if lead.contains('\n') && plain(lead) && plain(closing) {
            let mut out = format!("[{lead}{}", items.join(&format!(",{lead}")));
            if trailing_comma {
                out.push(',');
            }
            out.push_str(closing);
            out.push(']');
            return out;
        }
    }
    format!("[{}]", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_read_back_alike_by_every_format() {
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("tab\tdel\x7f"), r#""tab\u0009del\u007f""#);
        assert_eq!(
            quote("\u{80}\u{85}\u{9f}\u{a0}\u{ffff}"),
            "\"\\u0080\\u0085\\u009f\u{a0}\\uffff\""
        );
        assert_eq!(quote("${workspaceFolder}/é"), "\"${workspaceFolder}/é\"");
        let read: String = serde_json::from_str(&quote("x\n\u{1}\"\\")).unwrap();
        assert_eq!(read, "x\n\u{1}\"\\");
    }
}
