//! One editor per file format behind one small trait: read the file into a [`Node`] tree with
//! spans, and write the few pieces of text a wrap splices in (a list, a new member) the way that
//! format and that file lay them out. Everything else is spliced by the planner, byte for byte.

use super::tree::{Map, Member, Node, bracketed};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// JSON, and JSONC (comments, trailing commas).
    Json,
    Toml,
    Yaml,
}

pub trait Editor {
    /// The file's values with their spans; the error names the line that does not parse.
    fn parse(&self, text: &str) -> Result<Node, String>;
    /// What the file means, for the check after a plan: as [`Editor::parse`], but with every
    /// reference to another value (a YAML alias) read as that value.
    fn values(&self, text: &str) -> Result<Node, String> {
        self.parse(text)
    }
    /// A list of already quoted strings, laid out as `original` (the list it replaces) was.
    fn list(&self, items: &[String], original: Option<&Node>, text: &str) -> String;
    /// The text that, inserted right after `after`'s value, adds `key` with `value` to `map`.
    fn member_after(&self, text: &str, map: &Map, after: &Member, key: &str, value: &str)
    -> String;
}

impl Format {
    pub fn editor(self) -> &'static dyn Editor {
        match self {
            Self::Json => &Json,
            Self::Toml => &Toml,
            Self::Yaml => &Yaml,
        }
    }
}

/// The file's line ending: a file written on Windows keeps its `\r\n`.
fn newline(text: &str) -> &'static str {
    if text.contains("\r\n") { "\r\n" } else { "\n" }
}

/// The text between the start of `at`'s line and `at`.
fn line_prefix(text: &str, at: usize) -> &str {
    let start = text[..at].rfind('\n').map_or(0, |n| n + 1);
    &text[start..at]
}

struct Json;

impl Editor for Json {
    fn parse(&self, text: &str) -> Result<Node, String> {
        super::jsonc::parse(text)
    }

    fn list(&self, items: &[String], original: Option<&Node>, text: &str) -> String {
        bracketed(items, original.map(|n| (n, text)))
    }

    fn member_after(&self, _: &str, _: &Map, _: &Member, key: &str, value: &str) -> String {
        format!(", {}: {value}", super::tree::quote(key))
    }
}

struct Toml;

impl Editor for Toml {
    fn parse(&self, text: &str) -> Result<Node, String> {
        super::toml::parse(text)
    }

    fn list(&self, items: &[String], original: Option<&Node>, text: &str) -> String {
        bracketed(items, original.map(|n| (n, text)))
    }

    fn member_after(
        &self,
        text: &str,
        map: &Map,
        after: &Member,
        key: &str,
        value: &str,
    ) -> String {
        if map.inline {
            format!(", {key} = {value}")
        } else {
            // A dotted key (`mcp_servers.fs.command = …`) needs the same dotted prefix.
            let prefix = line_prefix(text, after.key_span.start);
            format!("{}{prefix}{key} = {value}", newline(text))
        }
    }
}

struct Yaml;

impl Editor for Yaml {
    fn parse(&self, text: &str) -> Result<Node, String> {
        super::yaml::parse(text)
    }

    fn values(&self, text: &str) -> Result<Node, String> {
        super::yaml::values(text)
    }

    fn list(&self, items: &[String], original: Option<&Node>, text: &str) -> String {
        match original {
            // An alias (`*common`) is replaced by a list of this entry's own, on its line.
            Some(Node { span, .. }) if text[span.clone()].starts_with('*') => {
                format!("[{}]", items.join(", "))
            }
            Some(node @ Node { span, .. })
                if !text[span.clone()].starts_with('[')
                    && node.strings().is_some_and(|s| !s.is_empty()) =>
            {
                let indent = " ".repeat(line_prefix(text, span.start).chars().count());
                let items: Vec<String> = items.iter().map(|i| format!("- {i}")).collect();
                items.join(&format!("{}{indent}", newline(text)))
            }
            _ => bracketed(items, original.map(|n| (n, text))),
        }
    }

    fn member_after(
        &self,
        text: &str,
        map: &Map,
        after: &Member,
        key: &str,
        value: &str,
    ) -> String {
        if map.inline {
            format!(", {key}: {value}")
        } else {
            let column = line_prefix(text, after.key_span.start).chars().count();
            format!("{}{}{key}: {value}", newline(text), " ".repeat(column))
        }
    }
}
