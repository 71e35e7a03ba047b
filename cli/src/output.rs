//! Writing to stdout: aligned tables for people, JSON for programs, and a quiet exit when the
//! reader goes away (`rootsctl list | head -1`).
//!
//! Everything shown to people passes through an escape here, because names, paths, labels and
//! server identities come from users, directories and MCP servers: a directory named
//! `x\nevil  /etc` must not print as a second row, nor a server name move the terminal's cursor.
//! [`escape`] and [`escape_bytes`] show one piece of such data unambiguously; [`escape_controls`]
//! is the net under whole lines (tables, error messages, doctor's report) that may quote it.
//! JSON output needs none of this: JSON escapes control characters itself.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt as _;

use rootsd_proto::Root;

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

/// The path a root's URI names, escaped for display ([`escape_bytes`]); the URI itself if it
/// cannot be decoded.
pub fn display_path(root: &Root) -> String {
    match rootsd_proto::root::path_from_uri(&root.uri) {
        Ok(path) => escape_bytes(path.as_os_str().as_bytes()).into_owned(),
        Err(_) => escape(&root.uri).into_owned(),
    }
}

/// A root's name, escaped for display; `-` when it has none.
pub fn display_name(root: &Root) -> String {
    root.name
        .as_deref()
        .map_or_else(|| "-".to_owned(), |name| escape(name).into_owned())
}

/// A root for humans: `path (name)`, leaving out a name that only repeats the base name (as
/// the daemon names a root by default). Both are escaped.
pub fn describe(root: &Root) -> String {
    let path = display_path(root);
    let default = rootsd_proto::root::path_from_uri(&root.uri)
        .ok()
        .map(|p| rootsd_proto::root::default_name(&p));
    match &root.name {
        Some(name) if Some(name) != default.as_ref() => format!("{path} ({})", escape(name)),
        _ => path,
    }
}

/// A renamed root, as `log` and `watch` show it: `renamed /dir (old → new)`, with the path and
/// both names already escaped. The word, not a sign: `~/dir` would read as a home directory.
pub fn renamed(path: &str, old: &str, new: &str) -> String {
    format!("renamed {path} ({old} → {new})")
}

/// A duration in seconds, the way `ps` and `systemctl` show one.
pub fn duration(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        3600..86400 => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
        _ => format!("{}d{:02}h", secs / 86400, (secs % 86400) / 3600),
    }
}

/// Seconds since the Unix epoch as a UTC time, `2026-11-30T17:01:07Z`.
pub fn unix_time(secs: u64) -> String {
    let days = secs / 86_400;
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
    fn unix_times_are_utc_dates() {
        assert_eq!(unix_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(unix_time(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(unix_time(1_796_037_667), "2026-11-30T11:21:07Z");
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

    #[test]
    fn a_root_is_described_by_its_escaped_path_and_a_name_that_adds_something() {
        let root = |uri: &str, name: Option<&str>| Root {
            uri: uri.into(),
            name: name.map(str::to_owned),
        };
        assert_eq!(describe(&root("file:///srv/app", Some("app"))), "/srv/app");
        assert_eq!(
            describe(&root("file:///srv/app", Some("main"))),
            "/srv/app (main)"
        );
        assert_eq!(describe(&root("file:///", Some("/"))), "/");
        assert_eq!(
            describe(&root("file:///srv/a%0Ab", Some("a\nb"))),
            "/srv/a\\nb"
        );
        assert_eq!(
            describe(&root("file:///srv/%FF", Some("\u{fffd}"))),
            "/srv/\\xff"
        );
        assert_eq!(display_name(&root("file:///x", None)), "-");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(5), "5s");
        assert_eq!(duration(125), "2m05s");
        assert_eq!(duration(7300), "2h01m");
        assert_eq!(duration(90000), "1d01h");
    }
}
