//! JSON written by hand, for the few values the daemon writes on every change: a journal
//! record's strings and numbers, and the answer to a change. serde's generic path walks a
//! value's fields through its serializer and visits every string a byte at a time through
//! its escape table; for a line of a handful of short fields that is most of the cost of
//! making it (about 3,400 instructions for a change's answer, 1,500 for a record's origin).
//!
//! Everything here writes exactly what `serde_json::to_string` writes for the same value, down
//! to the escapes (the tests compare the two byte for byte), so that a reader cannot tell which
//! wrote a line.

use rootsd_proto::Root;
use rootsd_proto::wire::ChangeResult;

/// Where JSON text goes: a line being built (`String`) or a journal's buffer (`Vec<u8>`).
/// Only whole `&str` pieces and ASCII bytes are written, so a `String` stays UTF-8.
pub trait Out {
    fn put(&mut self, text: &str);
    /// `bytes`, which are ASCII (digits, an escape).
    fn put_ascii(&mut self, bytes: &[u8]);
}

impl Out for String {
    fn put(&mut self, text: &str) {
        self.push_str(text);
    }

    fn put_ascii(&mut self, bytes: &[u8]) {
        // An ASCII byte is the char of the same number.
        self.extend(bytes.iter().map(|&byte| char::from(byte)));
    }
}

impl Out for Vec<u8> {
    fn put(&mut self, text: &str) {
        self.extend_from_slice(text.as_bytes());
    }

    fn put_ascii(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// `text` as a JSON string, escaped as serde_json escapes it: `"` and `\`, the control
/// characters with a short escape as that (`\b`, `\t`, `\n`, `\f`, `\r`), the others as
/// `\u00XX` in lowercase hex, and everything else, UTF-8 included, as it is.
pub fn string(out: &mut impl Out, text: &str) {
    out.put("\"");
    // Most texts (paths, names) need no escape. Looking at every byte without stopping at the
    // first that does lets the compiler compare many at once.
    let plain = text.bytes().fold(true, |plain, byte| {
        plain & (byte >= 0x20) & (byte != b'"') & (byte != b'\\')
    });
    if plain {
        out.put(text);
        out.put("\"");
        return;
    }
    let mut start = 0;
    for (k, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0x00..=0x1f => "",
            _ => continue,
        };
        // Every escaped byte is ASCII, so both slices end on a character's boundary.
        out.put(&text[start..k]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.put_ascii(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]);
        } else {
            out.put(escape);
        }
        start = k + 1;
    }
    out.put(&text[start..]);
    out.put("\"");
}

/// `value` in decimal.
pub fn number(out: &mut impl Out, value: u64) {
    let mut digits = [0u8; 20];
    let mut k = digits.len();
    let mut rest = value;
    loop {
        k -= 1;
        digits[k] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.put_ascii(&digits[k..]);
}

/// A change's answer, `ChangeResult` as serde writes it: every list, even empty, but
/// `adopted` only when it holds a root.
pub fn change_result(out: &mut impl Out, result: &ChangeResult) {
    // Every field by name, without `..`: a field added to `ChangeResult` (or to `Root`, below)
    // fails the build here until it is written too (ARCHITECTURE.md, "Where to start").
    let ChangeResult {
        workspace,
        revision,
        added,
        renamed,
        unchanged,
        removed,
        adopted,
        total,
        notified_sessions,
    } = result;
    out.put("{\"workspace\":");
    string(out, workspace.as_str());
    out.put(",\"revision\":");
    number(out, *revision);
    out.put(",\"added\":");
    roots_list(out, added);
    out.put(",\"renamed\":");
    roots_list(out, renamed);
    out.put(",\"unchanged\":");
    roots_list(out, unchanged);
    out.put(",\"removed\":");
    roots_list(out, removed);
    if !adopted.is_empty() {
        out.put(",\"adopted\":");
        roots_list(out, adopted);
    }
    out.put(",\"total\":");
    number(out, *total as u64);
    out.put(",\"notified_sessions\":");
    number(out, *notified_sessions as u64);
    out.put("}");
}

/// Roots as MCP's `Root` is written: `uri`, then `name` when there is one.
fn roots_list(out: &mut impl Out, roots: &[Root]) {
    out.put("[");
    for (k, root) in roots.iter().enumerate() {
        let Root { uri, name } = root;
        if k > 0 {
            out.put(",");
        }
        out.put("{\"uri\":");
        string(out, uri);
        if let Some(name) = name {
            out.put(",\"name\":");
            string(out, name);
        }
        out.put("}");
    }
    out.put("]");
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;
    use rootsd_proto::WorkspaceName;

    use super::*;

    /// Text with every kind of byte serde escapes, and text it keeps: quotes, backslashes,
    /// every control character, DEL, and characters beyond ASCII of two, three and four bytes.
    pub(crate) fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                (0u8..0x20).prop_map(char::from),
                Just('"'),
                Just('\\'),
                Just('\u{7f}'),
                Just('é'),
                Just('€'),
                Just('𝄞'),
                prop::char::range('a', 'z'),
                prop::char::range(' ', '~'),
            ],
            0..12,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    fn root() -> impl Strategy<Value = Root> {
        (text(), prop::option::of(text())).prop_map(|(uri, name)| Root { uri, name })
    }

    fn roots() -> impl Strategy<Value = Vec<Root>> {
        prop::collection::vec(root(), 0..3)
    }

    fn result() -> impl Strategy<Value = ChangeResult> {
        (
            (roots(), roots(), roots(), roots(), roots()),
            any::<u64>(),
            any::<usize>(),
            any::<usize>(),
        )
            .prop_map(
                |((added, renamed, unchanged, removed, adopted), revision, total, notified)| {
                    ChangeResult {
                        workspace: WorkspaceName::new("work-1").expect("a valid name"),
                        revision,
                        added,
                        renamed,
                        unchanged,
                        removed,
                        adopted,
                        total,
                        notified_sessions: notified,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn strings_are_written_as_serde_writes_them(text in text()) {
            let mut ours = String::new();
            string(&mut ours, &text);
            prop_assert_eq!(ours, serde_json::to_string(&text).unwrap());
            let mut bytes = Vec::new();
            string(&mut bytes, &text);
            prop_assert_eq!(bytes, serde_json::to_vec(&text).unwrap());
        }

        #[test]
        fn a_change_result_is_written_as_serde_writes_it(result in result()) {
            let mut ours = String::new();
            change_result(&mut ours, &result);
            prop_assert_eq!(ours, serde_json::to_string(&result).unwrap());
        }
    }

    #[test]
    fn every_byte_alone_is_escaped_as_serde_escapes_it() {
        for byte in 0u8..0x80 {
            let text = char::from(byte).to_string();
            let mut ours = String::new();
            string(&mut ours, &text);
            assert_eq!(
                ours,
                serde_json::to_string(&text).unwrap(),
                "byte {byte:#04x}"
            );
        }
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for value in [0, 7, 10, 99, 100, 12_345, u64::MAX] {
            let mut ours = String::new();
            number(&mut ours, value);
            assert_eq!(ours, value.to_string());
        }
    }
}
