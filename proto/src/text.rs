//! How text from outside (names, paths, labels, what a daemon or server said) is shown to people
//! on one line, and rows and JSON values laid out for stdout: shared by every crate that prints.
//!
//! A directory named `x\nevil  /etc` must not print as a second row, nor a server name move the
//! terminal's cursor. [`escape`] and [`escape_bytes`] show one piece of such data unambiguously;
//! [`escape_controls`] is the net under whole lines (tables, error messages, reports) that may
//! quote it. JSON output needs none of this: JSON escapes control characters itself.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Shows one piece of text from outside (a name, a label, a server's identity) on one line,
/// unambiguously: a backslash becomes `\\`, newline, carriage return and tab become `\n`, `\r`,
/// `\t`, other control characters `\x1b` (C0 and DEL) or `\u{85}` (C1), and the invisible
/// characters that reorder or break lines (bidirectional overrides, U+2028, U+2029) `\u{202e}`.
/// Text without any of these is returned as it is.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c == '\\' || needs_escape(c)) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_escaped(&mut shown, c);
    }
    Cow::Owned(shown)
}

/// [`escape`] for bytes that need not be UTF-8 (a Unix file name): bytes that are not UTF-8 are
/// shown as `\xff`, so two names that differ only there look different.
pub fn escape_bytes(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return escape(text);
    }
    let mut shown = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_escaped(&mut shown, c);
        }
        for byte in chunk.invalid() {
            let _ = write!(shown, "\\x{byte:02x}");
        }
    }
    Cow::Owned(shown)
}

/// The safety net for a whole line that may quote outside text: control characters (and the
/// invisible ones [`escape`] names) are escaped, but backslashes are left alone, so text that
/// was already escaped, or quoted with Rust's `{:?}`, reads the same.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            push_escaped(&mut shown, c);
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

/// Control characters, and the format characters that can make a line read as something else:
/// bidirectional embeddings, overrides and isolates, and Unicode's line and paragraph
/// separators.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

fn push_escaped(shown: &mut String, c: char) {
    match c {
        '\\' => shown.push_str("\\\\"),
        '\n' => shown.push_str("\\n"),
        '\r' => shown.push_str("\\r"),
        '\t' => shown.push_str("\\t"),
        c if (c as u32) < 0x80 && needs_escape(c) => {
            let _ = write!(shown, "\\x{:02x}", c as u32);
        }
        c if needs_escape(c) => {
            let _ = write!(shown, "\\u{{{:x}}}", c as u32);
        }
        c => shown.push(c),
    }
}

/// Prints rows as left-aligned columns separated by two spaces; the last column is not padded.
/// Every cell passes through [`escape_controls`], so no cell can break its row.
pub fn table(out: &mut impl Write, rows: &[Vec<String>]) -> io::Result<()> {
    let rows: Vec<Vec<Cow<'_, str>>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| escape_controls(cell)).collect())
        .collect();
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(
                    ' ',
                    widths[c] - cell.chars().count() + 2,
                ));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// Prints one JSON value on one line.
pub fn json(out: &mut impl Write, value: &impl serde::Serialize) -> io::Result<()> {
    // Serialising to memory first keeps a write error an `io::Error`, so a closed pipe is
    // recognised as one.
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns() {
        let mut out = Vec::new();
        let rows = vec![
            vec!["NAME".into(), "PATH".into()],
            vec!["a-long-name".into(), "/x".into()],
        ];
        table(&mut out, &rows).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NAME         PATH\na-long-name  /x\n"
        );
    }

    #[test]
    fn outside_text_is_shown_on_one_line_unambiguously() {
        assert!(matches!(escape("plain ünï name"), Cow::Borrowed(_)));
        assert_eq!(escape("a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(escape("\x1b[31m\x07\x7f"), "\\x1b[31m\\x07\\x7f");
        assert_eq!(
            escape("\u{85}\u{9b}\u{202e}\u{2028}"),
            "\\u{85}\\u{9b}\\u{202e}\\u{2028}"
        );
        // A backslash is doubled, so a name spelt `a\nb` differs from one holding a newline.
        assert_eq!(escape("a\\nb"), "a\\\\nb");
        assert_ne!(escape("a\\nb"), escape("a\nb"));
        assert_eq!(escape_bytes(b"caf\xe9\n\xff"), "caf\\xe9\\n\\xff");
        assert_eq!(escape_bytes("é".as_bytes()), "é");
    }

    #[test]
    fn the_net_under_whole_lines_keeps_backslashes() {
        assert_eq!(
            escape_controls(r#""a\nb" is missing"#),
            r#""a\nb" is missing"#
        );
        assert_eq!(escape_controls("two\nlines\x1b"), "two\\nlines\\x1b");
    }

    #[test]
    fn a_cell_cannot_break_its_row() {
        let mut out = Vec::new();
        let rows = vec![
            vec!["NAME".into(), "PATH".into()],
            vec!["x\nevil".into(), "/etc\x1b".into()],
        ];
        table(&mut out, &rows).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NAME     PATH\nx\\nevil  /etc\\x1b\n"
        );
    }
}
