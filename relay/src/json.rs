//! JSON read and edited in place: the relay finds the members it cares about by their byte spans
//! and splices its changes into the original line, so everything it does not change reaches the
//! other side byte for byte (key order, number spelling, escapes, and even bytes a strict parser
//! would refuse, such as invalid UTF-8 inside a string or nesting deeper than serde_json allows).
//!
//! Nothing here recurses or allocates per nesting level: a value is skipped by counting brackets,
//! so a hostile line costs time linear in its length and nothing more.

use serde::de::DeserializeOwned;

/// A half-open byte range `start..end` of a line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn of<'a>(&self, text: &'a [u8]) -> &'a [u8] {
        &text[self.start..self.end]
    }
}

/// One member of an object: its key and the span of its value.
///
/// It holds only spans, so that reading a message allocates nothing per member; a key with
/// escapes (rare) is decoded when it is compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Member {
    /// The key's bytes between its quotes.
    key_raw: Span,
    /// The key holds an escape or bytes beyond ASCII, so its bytes are not its text.
    escaped: bool,
    /// From the key's opening quote to the end of the value.
    pub whole: Span,
    pub value: Span,
}

impl Member {
    /// Whether this member's key is `key`.
    pub fn is(&self, text: &[u8], key: &str) -> bool {
        if self.escaped {
            self.decoded(text) == key
        } else {
            self.key_raw.of(text) == key.as_bytes()
        }
    }

    /// The key's bytes, when they are its text (no escapes, nothing beyond ASCII).
    pub fn plain_key<'t>(&self, text: &'t [u8]) -> Option<&'t [u8]> {
        (!self.escaped).then(|| self.key_raw.of(text))
    }

    /// The key as text.
    pub fn key<'t>(&self, text: &'t [u8]) -> std::borrow::Cow<'t, str> {
        if self.escaped {
            std::borrow::Cow::Owned(self.decoded(text))
        } else {
            String::from_utf8_lossy(self.key_raw.of(text))
        }
    }

    fn decoded(&self, text: &[u8]) -> String {
        decode_string(&text[self.key_raw.start - 1..self.key_raw.end + 1])
    }
}

pub(super) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_ws(text: &[u8], mut pos: usize) -> usize {
    while pos < text.len() && is_ws(text[pos]) {
        pos += 1;
    }
    pos
}

/// The end of the string whose opening quote is at `pos` (one past the closing quote). Large
/// strings (file contents) are most of what passes, so the scan jumps between quotes and
/// backslashes instead of looking at every byte; the first bytes are looked at one by one,
/// because most strings (keys, methods, ids) end within them, sooner than a vector search starts.
pub(super) fn string_end(text: &[u8], pos: usize) -> Option<usize> {
    let mut i = pos + 1;
    let short_end = text.len().min(i + SHORT_STRING);
    while i < short_end {
        match text[i] {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    while i < text.len() {
        i += memchr::memchr2(b'"', b'\\', &text[i..])?;
        match text[i] {
            b'"' => return Some(i + 1),
            _ => i += 2,
        }
    }
    None
}

/// How many bytes of a string [`string_end`] looks at one by one before searching.
const SHORT_STRING: usize = 32;

/// The end of the value that starts at `pos` (which must not be whitespace). Containers are
/// skipped by counting brackets outside strings; scalars run to the next delimiter.
fn value_end(text: &[u8], pos: usize) -> Option<usize> {
    match *text.get(pos)? {
        b'"' => string_end(text, pos),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = pos;
            while i < text.len() {
                match text[i] {
                    b'"' => {
                        i = string_end(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        b',' | b':' | b'}' | b']' => None,
        _ => {
            let mut i = pos;
            while i < text.len() && !is_ws(text[i]) && !matches!(text[i], b',' | b'}' | b']') {
                i += 1;
            }
            Some(i)
        }
    }
}

/// The span of the one value `text` holds, surrounding whitespace excluded; `None` when the line
/// is empty, truncated, or holds anything after its value.
pub(super) fn root(text: &[u8]) -> Option<Span> {
    let start = skip_ws(text, 0);
    let end = value_end(text, start)?;
    (skip_ws(text, end) == text.len()).then_some(Span { start, end })
}

/// The span of `text` without the whitespace around it, for reading a line whose shape is
/// checked by whatever reads it next ([`members`], [`elements`]) instead of by a scan of its own.
pub(super) fn trimmed(text: &[u8]) -> Span {
    let start = skip_ws(text, 0);
    let mut end = text.len();
    while end > start && is_ws(text[end - 1]) {
        end -= 1;
    }
    Span { start, end }
}

/// Whether the value at `span` is an object (`{`) or an array (`[`).
pub(super) fn is_object(text: &[u8], span: Span) -> bool {
    text.get(span.start) == Some(&b'{')
}

pub(super) fn is_array(text: &[u8], span: Span) -> bool {
    text.get(span.start) == Some(&b'[')
}

/// The members of the object at `span`, in order; `None` if it is not a well-formed object.
pub(super) fn members(text: &[u8], span: Span) -> Option<Vec<Member>> {
    let mut out = Vec::new();
    each_member(text, span, |member| out.push(member))?;
    Some(out)
}

/// Hands each member of the object at `span` to `push`, in order; `None` if it is not a
/// well-formed object.
pub(super) fn each_member(text: &[u8], span: Span, mut push: impl FnMut(Member)) -> Option<()> {
    if !is_object(text, span) {
        return None;
    }
    let mut pos = skip_ws(text, span.start + 1);
    if text.get(pos) == Some(&b'}') {
        return (pos + 1 == span.end).then_some(());
    }
    loop {
        let member = member_at(text, pos)?;
        let end = member.whole.end;
        push(member);
        let next = skip_ws(text, end);
        match text.get(next) {
            Some(b',') => pos = skip_ws(text, next + 1),
            Some(b'}') if next + 1 == span.end => return Some(()),
            _ => return None,
        }
    }
}

/// The member (`"key": value`) whose key starts at `pos`; `None` if there is no complete one.
pub(super) fn member_at(text: &[u8], pos: usize) -> Option<Member> {
    if text.get(pos) != Some(&b'"') {
        return None;
    }
    let (key_end, escaped) = key_end(text, pos)?;
    let colon = skip_ws(text, key_end);
    if text.get(colon) != Some(&b':') {
        return None;
    }
    let value_start = skip_ws(text, colon + 1);
    let end = value_end(text, value_start)?;
    Some(Member {
        key_raw: Span {
            start: pos + 1,
            end: key_end - 1,
        },
        escaped,
        whole: Span { start: pos, end },
        value: Span {
            start: value_start,
            end,
        },
    })
}

/// The end of the key whose opening quote is at `pos` (one past the closing quote), and whether
/// its bytes are not its text: plain ASCII without a backslash is, so the one pass that finds
/// the end decides it, with no UTF-8 validation for the keys every message has.
fn key_end(text: &[u8], pos: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    let mut i = pos + 1;
    while let Some(&b) = text.get(i) {
        match b {
            b'"' => return Some((i + 1, escaped)),
            b'\\' => {
                escaped = true;
                i += 2;
            }
            _ => {
                escaped |= !b.is_ascii();
                i += 1;
            }
        }
    }
    None
}

/// The elements of the array at `span`, in order; `None` if it is not a well-formed array.
pub(super) fn elements(text: &[u8], span: Span) -> Option<Vec<Span>> {
    if !is_array(text, span) {
        return None;
    }
    let mut out = Vec::new();
    let mut pos = skip_ws(text, span.start + 1);
    if text.get(pos) == Some(&b']') {
        return (pos + 1 == span.end).then_some(out);
    }
    loop {
        let end = value_end(text, pos)?;
        out.push(Span { start: pos, end });
        let next = skip_ws(text, end);
        match text.get(next) {
            Some(b',') => pos = skip_ws(text, next + 1),
            Some(b']') if next + 1 == span.end => return Some(out),
            _ => return None,
        }
    }
}

/// A key as its decoded text. Keys with escapes go through serde_json; a key that does not
/// decode (invalid UTF-8, a bad escape) keeps its raw text, which no lookup asks for.
pub(super) fn decode_string(quoted: &[u8]) -> String {
    let inner = &quoted[1..quoted.len() - 1];
    if !inner.contains(&b'\\')
        && let Ok(text) = std::str::from_utf8(inner)
    {
        return text.to_owned();
    }
    serde_json::from_slice(quoted).unwrap_or_else(|_| String::from_utf8_lossy(inner).into_owned())
}

/// The value of member `key` of the object at `span` (the last one, if the key repeats, as
/// serde_json's maps keep the last).
pub(super) fn get(text: &[u8], span: Span, key: &str) -> Option<Span> {
    let mut found = None;
    each_member(text, span, |member| {
        if member.is(text, key) {
            found = Some(member.value);
        }
    })?;
    found
}

/// The value at `path`, one object member per step.
pub(super) fn at(text: &[u8], span: Span, path: &[&str]) -> Option<Span> {
    path.iter().try_fold(span, |span, key| get(text, span, key))
}

/// The value at `span` read as `T`; for the small values the relay inspects.
pub(super) fn parse<T: DeserializeOwned>(text: &[u8], span: Span) -> Option<T> {
    serde_json::from_slice(span.of(text)).ok()
}

/// The string at `span`, borrowed from `text` when it holds no escapes (most do not).
pub(super) fn str_at(text: &[u8], span: Span) -> Option<std::borrow::Cow<'_, str>> {
    let raw = span.of(text);
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if !inner.contains(&b'\\')
        && let Ok(plain) = std::str::from_utf8(inner)
    {
        return Some(std::borrow::Cow::Borrowed(plain));
    }
    parse::<String>(text, span).map(std::borrow::Cow::Owned)
}

/// The string at `span`, if it is one.
pub(super) fn string(text: &[u8], span: Span) -> Option<String> {
    (text.get(span.start) == Some(&b'"'))
        .then(|| parse::<String>(text, span))
        .flatten()
}

/// An id as a key that compares the way JSON-RPC peers mean it: strings by their decoded
/// text (so `"a"` and `"\u0061"` are one id), numbers by their spelling, and `1` never equal to
/// `"1"`.
pub(super) fn id_key(raw: &[u8]) -> Vec<u8> {
    id_key_ref(raw).into_owned()
}

/// [`id_key`], borrowed from `raw` when the key is `raw` itself: a number, or a string without
/// an escape (which decodes and encodes again to the same bytes, or does not decode and is kept
/// as it is). Only ids with escapes are rewritten, so looking up the common ones allocates
/// nothing.
pub(super) fn id_key_ref(raw: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if raw.first() != Some(&b'"') || !raw.contains(&b'\\') {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut key = Vec::new();
    id_key_into(raw, &mut key);
    std::borrow::Cow::Owned(key)
}

/// [`id_key`] written into `key` (cleared first), so that a buffer of an old key can be reused.
pub(super) fn id_key_into(raw: &[u8], key: &mut Vec<u8>) {
    key.clear();
    if raw.first() == Some(&b'"')
        && raw.contains(&b'\\')
        && let Ok(text) = serde_json::from_slice::<String>(raw)
    {
        serde_json::to_writer(&mut *key, &text).expect("strings always serialise");
        return;
    }
    key.extend_from_slice(raw);
}

/// Edits to one line, applied all at once: each replaces a span of the original with new bytes
/// (an insertion replaces an empty span). Spans must not overlap; insertions at one position
/// keep the order they were made in.
///
/// Which commas go with a removed or added member depends on which members stay, so member
/// removals and additions are only recorded, and [`Editor::finish`] resolves all of an object's
/// at once: removing neighbours, or emptying an object and adding to it, in any order, leaves
/// valid JSON.
pub(super) struct Editor<'a> {
    text: &'a [u8],
    edits: Vec<(Span, Vec<u8>)>,
    /// Members to remove: the object, and the key (every occurrence).
    removals: Vec<(Span, String)>,
    /// Members to add at the end of an object, as `"key":value`, without a comma.
    additions: Vec<(Span, Vec<u8>)>,
}

impl<'a> Editor<'a> {
    pub fn new(text: &'a [u8]) -> Self {
        Self {
            text,
            edits: Vec::new(),
            removals: Vec::new(),
            additions: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.edits.is_empty() && self.removals.is_empty() && self.additions.is_empty()
    }

    pub fn replace(&mut self, span: Span, bytes: impl Into<Vec<u8>>) {
        self.edits.push((span, bytes.into()));
    }

    /// Sets member `key` of the object at `object` to `value` (raw JSON): the old value is
    /// replaced, or the member is appended.
    pub fn set(&mut self, object: Span, key: &str, value: &[u8]) -> Option<()> {
        match get(self.text, object, key) {
            Some(old) => self.replace(old, value),
            None => self.append(object, key, value)?,
        }
        Some(())
    }

    /// Appends member `key` to the object at `object` without looking for an existing one.
    fn append(&mut self, object: Span, key: &str, value: &[u8]) -> Option<()> {
        members(self.text, object)?;
        let mut bytes = Vec::with_capacity(key.len() + value.len() + 3);
        bytes.extend_from_slice(&serde_json::to_vec(key).expect("strings always serialise"));
        bytes.push(b':');
        bytes.extend_from_slice(value);
        self.additions.push((object, bytes));
        Some(())
    }

    /// Removes member `key` (every occurrence) from the object at `object`, with its comma.
    pub fn remove(&mut self, object: Span, key: &str) -> Option<()> {
        members(self.text, object)?;
        self.removals.push((object, key.to_owned()));
        Some(())
    }

    /// Turns the recorded removals and additions of `object` into edits.
    fn resolve_members(&mut self, object: Span) {
        let Some(all) = members(self.text, object) else {
            return;
        };
        let removed: Vec<bool> = all
            .iter()
            .map(|m| {
                self.removals
                    .iter()
                    .any(|(o, key)| *o == object && m.is(self.text, key))
            })
            .collect();
        let mut i = 0;
        while i < all.len() {
            if !removed[i] {
                i += 1;
                continue;
            }
            // A run of removed members i..=j goes with the separators up to the next kept
            // member, or, at the end of the object, with the comma after the previous (kept)
            // one.
            let mut j = i;
            while j + 1 < all.len() && removed[j + 1] {
                j += 1;
            }
            let span = match (all.get(j + 1), i.checked_sub(1)) {
                (Some(next), _) => Span {
                    start: all[i].whole.start,
                    end: next.whole.start,
                },
                (None, Some(previous)) => Span {
                    start: all[previous].whole.end,
                    end: all[j].whole.end,
                },
                (None, None) => Span {
                    start: all[i].whole.start,
                    end: all[j].whole.end,
                },
            };
            self.edits.push((span, Vec::new()));
            i = j + 1;
        }
        let mut after_member = removed.iter().any(|r| !r);
        let at = object.end - 1;
        for (_, member) in self.additions.iter().filter(|(o, _)| *o == object) {
            let mut bytes = Vec::with_capacity(member.len() + 1);
            if after_member {
                bytes.push(b',');
            }
            bytes.extend_from_slice(member);
            self.edits.push((Span { start: at, end: at }, bytes));
            after_member = true;
        }
    }

    /// Makes `path` (object members, created as needed) lead to an object, and sets `key` in it
    /// to `value` unless `keep_existing` and it is already there. `None` when something on the
    /// way is not an object, in which case nothing was changed.
    pub fn ensure(
        &mut self,
        object: Span,
        path: &[&str],
        key: &str,
        value: &[u8],
        keep_existing: bool,
    ) -> Option<()> {
        let mut current = object;
        for (depth, step) in path.iter().enumerate() {
            match get(self.text, current, step) {
                Some(next) if is_object(self.text, next) => current = next,
                Some(_) => return None,
                None => {
                    let mut nested = format!(
                        "{{{}:",
                        serde_json::to_string(key).expect("strings always serialise")
                    )
                    .into_bytes();
                    nested.extend_from_slice(value);
                    nested.push(b'}');
                    for outer in path[depth + 1..].iter().rev() {
                        let mut wrapped = format!(
                            "{{{}:",
                            serde_json::to_string(outer).expect("strings always serialise")
                        )
                        .into_bytes();
                        wrapped.extend_from_slice(&nested);
                        wrapped.push(b'}');
                        nested = wrapped;
                    }
                    return self.append(current, step, &nested);
                }
            }
        }
        if keep_existing && get(self.text, current, key).is_some() {
            return Some(());
        }
        self.set(current, key, value)
    }

    /// The line with every edit applied.
    pub fn finish(mut self) -> Vec<u8> {
        let mut objects: Vec<Span> = self
            .removals
            .iter()
            .map(|(o, _)| *o)
            .chain(self.additions.iter().map(|(o, _)| *o))
            .collect();
        objects.sort_by_key(|o| (o.start, o.end));
        objects.dedup();
        for object in objects {
            self.resolve_members(object);
        }
        // Stable: insertions at one position keep the order they were made in.
        self.edits.sort_by_key(|(span, _)| (span.start, span.end));
        let mut out = Vec::with_capacity(self.text.len() + 64);
        let mut pos = 0;
        for (span, bytes) in self.edits {
            debug_assert!(span.start >= pos, "edits must not overlap");
            out.extend_from_slice(&self.text[pos..span.start.max(pos)]);
            out.extend_from_slice(&bytes);
            pos = span.end.max(pos);
        }
        out.extend_from_slice(&self.text[pos..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(text: &str) -> Span {
        root(text.as_bytes()).expect("one value")
    }

    fn edited(text: &str, edit: impl FnOnce(&mut Editor<'_>, Span)) -> String {
        let span = obj(text);
        let mut editor = Editor::new(text.as_bytes());
        edit(&mut editor, span);
        String::from_utf8(editor.finish()).unwrap()
    }

    #[test]
    fn members_are_found_with_their_spans_whatever_the_spacing() {
        let text = r#" { "a" : 1 , "b":{"c":[1,{"d":"}"}]}, "e\u0066":"x\"y" } "#;
        let span = obj(text);
        let keys: Vec<String> = members(text.as_bytes(), span)
            .unwrap()
            .into_iter()
            .map(|m| m.key(text.as_bytes()).into_owned())
            .collect();
        assert_eq!(keys, ["a", "b", "ef"]);
        let c = at(text.as_bytes(), span, &["b", "c"]).unwrap();
        assert_eq!(c.of(text.as_bytes()), br#"[1,{"d":"}"}]"#);
        assert_eq!(
            string(text.as_bytes(), get(text.as_bytes(), span, "ef").unwrap()).as_deref(),
            Some("x\"y")
        );
    }

    /// Every member is found and named, however many there are: keys with escapes, beyond
    /// ASCII, long strings and a malformed tail included; `get` finds each by its name.
    #[test]
    fn members_are_all_found_however_many_there_are() {
        for count in [0, 1, 4, 5, 6, 40] {
            let mut text = String::from("{");
            for i in 0..count {
                if i > 0 {
                    text.push(',');
                }
                match i % 4 {
                    0 => text.push_str(&format!(r#""k{i}":{i}"#)),
                    1 => text.push_str(&format!(r#""\u006b{i}":"{}""#, "v".repeat(100))),
                    2 => text.push_str(&format!(r#""é{i}":{{"a":"\"}}"}}"#)),
                    _ => text.push_str(&format!(r#""k\\{i}" : [ "x\\" ]"#)),
                }
            }
            text.push('}');
            let span = obj(&text);
            let text = text.as_bytes();
            let all = members(text, span).unwrap();
            assert_eq!(all.len(), count);
            for (i, member) in all.iter().enumerate() {
                let key = match i % 4 {
                    0 | 1 => format!("k{i}"),
                    2 => format!("é{i}"),
                    _ => format!("k\\{i}"),
                };
                assert!(member.is(text, &key), "member {i} of {count} is {key}");
                assert_eq!(member.key(text), key);
                assert_eq!(get(text, span, &key), Some(member.value), "{key}");
            }
            let mut cut = text.to_vec();
            cut.insert(cut.len() - 1, b',');
            assert!(members(&cut, obj_bytes(&cut)).is_none());
            assert!(get(&cut, obj_bytes(&cut), "k0").is_none());
        }
    }

    fn obj_bytes(text: &[u8]) -> Span {
        root(text).unwrap()
    }

    #[test]
    fn malformed_or_trailing_text_is_not_a_value() {
        for text in [
            "",
            "{",
            r#"{"a":1} x"#,
            r#"{"a" 1}"#,
            r#"{"a":1,}"#,
            "[1,,2]",
            "}",
        ] {
            let parsed = root(text.as_bytes()).and_then(|s| {
                if is_object(text.as_bytes(), s) {
                    members(text.as_bytes(), s).map(|_| ())
                } else {
                    elements(text.as_bytes(), s).map(|_| ())
                }
            });
            assert_eq!(parsed, None, "{text:?}");
        }
    }

    #[test]
    fn deep_nesting_and_invalid_utf8_are_skipped_not_refused() {
        let mut text = br#"{"id":"r-1","result":"#.to_vec();
        text.extend(std::iter::repeat_n(b'[', 100_000));
        text.extend_from_slice(b"\"\xff\xfe\"");
        text.extend(std::iter::repeat_n(b']', 100_000));
        text.push(b'}');
        let span = root(&text).unwrap();
        let id = get(&text, span, "id").unwrap();
        assert_eq!(id.of(&text), br#""r-1""#);
        let mut editor = Editor::new(&text);
        editor.replace(id, b"7".to_vec());
        let out = editor.finish();
        assert!(out.starts_with(br#"{"id":7,"result":[[["#));
        assert_eq!(out.len(), text.len() - 4);
    }

    #[test]
    fn set_replaces_or_appends_keeping_everything_else() {
        assert_eq!(
            edited(r#"{"b":1, "a":2.50}"#, |e, s| e
                .set(s, "a", b"true")
                .unwrap()),
            r#"{"b":1, "a":true}"#
        );
        assert_eq!(
            edited(r#"{"b":1 }"#, |e, s| e.set(s, "a", b"{}").unwrap()),
            r#"{"b":1 ,"a":{}}"#
        );
        assert_eq!(
            edited("{ }", |e, s| {
                e.set(s, "a", b"1").unwrap();
                e.set(s, "b", b"2").unwrap();
            }),
            r#"{ "a":1,"b":2}"#
        );
    }

    #[test]
    fn remove_takes_the_right_comma() {
        let cases = [
            (r#"{"a":1,"b":2,"c":3}"#, "a", r#"{"b":2,"c":3}"#),
            (r#"{"a":1,"b":2,"c":3}"#, "b", r#"{"a":1,"c":3}"#),
            (r#"{"a":1,"b":2,"c":3}"#, "c", r#"{"a":1,"b":2}"#),
            (r#"{"a":1}"#, "a", r#"{}"#),
            (r#"{"a":1,"a":2,"b":3}"#, "a", r#"{"b":3}"#),
            (r#"{"x":1,"a":1,"a":2}"#, "a", r#"{"x":1}"#),
            (
                r#"{"a":1,"x":1,"a":2,"y":2,"a":3}"#,
                "a",
                r#"{"x":1,"y":2}"#,
            ),
            (r#"{ "a" : 1 , "b" : 2 }"#, "b", r#"{ "a" : 1 }"#),
        ];
        for (text, key, expected) in cases {
            assert_eq!(
                edited(text, |e, s| e.remove(s, key).unwrap()),
                expected,
                "{text} - {key}"
            );
        }
    }

    #[test]
    fn removals_and_additions_in_one_object_agree_on_commas_in_any_order() {
        // Found by the property tests: each removal once chose its comma alone, so removing
        // neighbours claimed one comma twice, and emptying an object kept an addition's comma.
        let text = r#"{"k0":1,"k1":2,"k2":3}"#;
        assert_eq!(
            edited(text, |e, s| {
                e.remove(s, "k1").unwrap();
                e.remove(s, "k2").unwrap();
            }),
            r#"{"k0":1}"#
        );
        assert_eq!(
            edited(text, |e, s| {
                e.remove(s, "k2").unwrap();
                e.remove(s, "k0").unwrap();
            }),
            r#"{"k1":2}"#
        );
        assert_eq!(
            edited(r#"{"a":1}"#, |e, s| {
                e.set(s, "b", b"2").unwrap();
                e.remove(s, "a").unwrap();
            }),
            r#"{"b":2}"#
        );
        assert_eq!(
            edited(r#"{ "a":1 }"#, |e, s| {
                e.remove(s, "a").unwrap();
                e.set(s, "b", b"2").unwrap();
                e.set(s, "c", b"3").unwrap();
            }),
            r#"{  "b":2,"c":3}"#
        );
    }

    #[test]
    fn ensure_creates_the_missing_path_and_keeps_what_exists() {
        let caps = ["_meta", "caps"];
        assert_eq!(
            edited(r#"{"n":1}"#, |e, s| e
                .ensure(s, &caps, "roots", b"{}", true)
                .unwrap()),
            r#"{"n":1,"_meta":{"caps":{"roots":{}}}}"#
        );
        assert_eq!(
            edited(r#"{"_meta":{"v":"x"}}"#, |e, s| {
                e.ensure(s, &caps, "roots", b"{}", true).unwrap()
            }),
            r#"{"_meta":{"v":"x","caps":{"roots":{}}}}"#
        );
        assert_eq!(
            edited(r#"{"_meta":{"caps":{"roots":{"x":1}}}}"#, |e, s| {
                e.ensure(s, &caps, "roots", b"{}", true).unwrap()
            }),
            r#"{"_meta":{"caps":{"roots":{"x":1}}}}"#
        );
        let text = r#"{"_meta":5}"#;
        let mut editor = Editor::new(text.as_bytes());
        assert_eq!(editor.ensure(obj(text), &caps, "roots", b"{}", true), None);
        assert!(editor.is_empty());
    }

    #[test]
    fn ids_compare_by_meaning_not_spelling() {
        assert_eq!(id_key(br#""a""#), id_key(br#""\u0061""#));
        assert_ne!(id_key(b"1"), id_key(br#""1""#));
        assert_eq!(
            id_key(b"123456789012345678901234567890"),
            b"123456789012345678901234567890"
        );
    }

    /// Only ids with an escape are rewritten; every other id is its own key, and borrowed. The
    /// rewriting itself (a decode and an encode) is the reference both are checked against.
    #[test]
    fn ids_without_escapes_are_their_own_keys() {
        let reference = |raw: &[u8]| match serde_json::from_slice::<String>(raw) {
            Ok(text) if raw.first() == Some(&b'"') => serde_json::to_vec(&text).unwrap(),
            _ => raw.to_vec(),
        };
        let plain: [&[u8]; 7] = [
            b"7",
            b"-1.5e3",
            br#""abc""#,
            "\"\u{e9}t\u{e9} \u{1F600}\"".as_bytes(),
            b"\"\xff\xfe\"",
            b"\"a\tb\"",
            b"\"\"",
        ];
        for raw in plain {
            let key = id_key_ref(raw);
            assert!(matches!(key, std::borrow::Cow::Borrowed(_)), "{raw:?}");
            assert_eq!(&*key, &reference(raw)[..], "{raw:?}");
        }
        let escaped: [&[u8]; 3] = [br#""\u0061""#, br#""a\"b""#, br#""\/""#];
        for raw in escaped {
            assert_eq!(&*id_key_ref(raw), &reference(raw)[..], "{raw:?}");
            assert_eq!(id_key(raw), reference(raw), "{raw:?}");
        }
    }

    #[test]
    fn arrays_list_their_elements() {
        let text = br#"[ {"a":[1,2]} , 3,"x"]"#;
        let span = root(text).unwrap();
        let spans: Vec<&[u8]> = elements(text, span)
            .unwrap()
            .iter()
            .map(|s| s.of(text))
            .collect();
        assert_eq!(spans, [&br#"{"a":[1,2]}"#[..], b"3", br#""x""#]);
    }
}
