//! The daemon's limits as the documents quote them: every figure a page gives for a bound of
//! `daemon/src/limits.rs` (or the wire's `MAX_LINE_BYTES`) must be the constant's value, so that a
//! change of a limit that forgets a page fails here, naming the page, the phrase and both figures.
//!
//! A quote is found by its phrase: [`QUOTES`] pairs each constant with the words around the
//! figure as the pages write them (`"hello must come within {}"`). Pages are compared with their
//! whitespace collapsed, so a phrase wrapped across lines is still found. Every phrase must be
//! found at least once, so a page reworded without this table fails too, rather than go unchecked.

use std::collections::BTreeMap;
use std::path::Path;

/// What a figure measures, so that `30 s` and `30 KiB` are never compared with each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Count,
    Bytes,
    Millis,
}

/// A constant's value in its kind's unit (a count, bytes, milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value {
    pub kind: Kind,
    pub amount: u64,
}

/// Each constant with the phrases the pages quote it in; `{}` stands for the figure.
pub const QUOTES: &[(&str, &[&str])] = &[
    (
        "MAX_CONNECTIONS",
        &[
            "rootsd holds at most {} connections",
            "Connections are capped at {}.",
            "Connections are capped at {},",
        ],
    ),
    (
        "CONNECTIONS_PER_UID",
        &[
            "may hold at most {} of them",
            "root holds at most {} connections",
        ],
    ),
    (
        "CONNECTIONS_RESERVED",
        &["together stop {} short of the cap"],
    ),
    ("REFUSALS_AT_ONCE", &["At most {} refused connections"]),
    ("IDLE_TIMEOUT", &["sends no request for {} is told so"]),
    (
        "HELLO_TIMEOUT",
        &["hello must come within {}", "has not said hello within {}"],
    ),
    (
        "PARTIAL_LINE_TIMEOUT",
        &[
            "must be finished within {} of its first byte",
            "finished within {} of their first",
        ],
    ),
    (
        "READ_BUFFER_FREE",
        &[
            "for each, a {} read buffer",
            "Lines longer than {} share one budget",
            "read buffer is its own up to {};",
        ],
    ),
    (
        "INPUT_BUDGET",
        &[
            "a share of one {} budget",
            "share one budget of {} across",
            "charged to one {} budget",
        ],
    ),
    (
        "WRITE_TIMEOUT",
        &[
            "writes to it within {} is disconnected",
            "does not take a line within {} is disconnected",
            "must be taken within {}, else",
        ],
    ),
    (
        "SHUTDOWN_GRACE",
        &["does not read its last line {}, flushes"],
    ),
    ("REFUSAL_TIMEOUT", &["(at most 64 KiB, within {})"]),
    (
        "REFUSAL_DRAIN_BYTES",
        &["the peer sent (at most {}, within"],
    ),
    (
        "HISTORY_ENTRIES",
        &[
            "rootsd keeps the last {} changes",
            "keeps the changes of the last {} revisions",
        ],
    ),
    (
        "HISTORY_ENTRY_ROOT_BYTES",
        &["the entry lists at most {} of roots"],
    ),
    ("LOG_PAGE_BYTES", &["carries at most about {} of entries"]),
    (
        "SESSIONS_PAGE_BYTES",
        &["an answer carries at most {} of sessions"],
    ),
    ("MAX_SESSIONS", &["The daemon holds at most {} sessions"]),
    ("SESSIONS_PER_UID", &["root holds at most {} of them"]),
    (
        "SESSION_WITHHELD_BYTES",
        &["roots listed only as far as {} (the counts"],
    ),
    ("RECONNECT_WINDOW", &["For {} after a start"]),
    (
        "MAX_LINE_BYTES",
        &["A line may be at most {} (", "a line is at most {} and"],
    ),
];

/// The documents that quote limits.
pub fn documents(workspace: &Path) -> Vec<(String, String)> {
    let mut names = vec!["README.md".to_owned(), "ARCHITECTURE.md".to_owned()];
    let docs = workspace.join("docs");
    let mut pages: Vec<String> = std::fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", docs.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    pages.sort();
    names.extend(pages);
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(workspace.join(&name))
                .unwrap_or_else(|e| panic!("cannot read {name}: {e}"));
            (name, text)
        })
        .collect()
}

/// The `pub const` values of a Rust source, for the forms limits.rs writes: integer literals
/// (`16_384`, `1 << 20`), products (`64 * 1024 * 1024`), other constants of the same file, and
/// `Duration::from_secs(...)` / `from_millis(...)`.
pub fn constants(source: &str) -> BTreeMap<String, Value> {
    let mut found: BTreeMap<String, Value> = BTreeMap::new();
    for line in source.lines() {
        let Some(rest) = line.trim_start().strip_prefix("pub const ") else {
            continue;
        };
        let Some((name, rest)) = rest.split_once(':') else {
            continue;
        };
        let Some((_, expr)) = rest.split_once('=') else {
            continue;
        };
        let expr = expr.trim().trim_end_matches(';').trim();
        if let Some(value) = evaluate(expr, &found) {
            found.insert(name.trim().to_owned(), value);
        }
    }
    found
}

fn evaluate(expr: &str, known: &BTreeMap<String, Value>) -> Option<Value> {
    for (call, scale) in [
        ("Duration::from_secs(", 1000),
        ("Duration::from_millis(", 1),
    ] {
        if let Some(inner) = expr.strip_prefix(call) {
            let amount = integer(inner.strip_suffix(')')?, known)?;
            return Some(Value {
                kind: Kind::Millis,
                amount: amount * scale,
            });
        }
    }
    if let Some(value) = known.get(expr) {
        return Some(*value);
    }
    // Integers are counts unless a constant says bytes; the table below decides which.
    integer(expr, known).map(|amount| Value {
        kind: Kind::Count,
        amount,
    })
}

fn integer(expr: &str, known: &BTreeMap<String, Value>) -> Option<u64> {
    if let Some((a, b)) = expr.split_once("<<") {
        return Some(integer(a, known)? << integer(b, known)?);
    }
    expr.split('*').try_fold(1u64, |product, term| {
        let term = term.trim();
        let value = match known.get(term) {
            Some(v) => v.amount,
            None => term.replace('_', "").parse().ok()?,
        };
        Some(product * value)
    })
}

/// Whether a constant counts bytes: its name says so.
fn is_bytes(name: &str) -> bool {
    name.ends_with("_BYTES") || name.contains("BUFFER") || name == "INPUT_BUDGET"
}

/// A figure as written (`16,384`, `4 KiB`, `30 seconds`, `2 s`), in its kind's unit.
pub fn figure(text: &str) -> Option<Value> {
    let (number, unit) = match text.split_once(' ') {
        Some((n, u)) => (n, u.trim()),
        None => (text, ""),
    };
    let amount: u64 = number.replace(',', "").parse().ok()?;
    let (kind, scale) = match unit {
        "" => (Kind::Count, 1),
        "bytes" => (Kind::Bytes, 1),
        "KiB" => (Kind::Bytes, 1024),
        "MiB" => (Kind::Bytes, 1024 * 1024),
        "ms" => (Kind::Millis, 1),
        "s" | "second" | "seconds" => (Kind::Millis, 1000),
        _ => return None,
    };
    Some(Value {
        kind,
        amount: amount * scale,
    })
}

/// Every quote of `phrase` in `text` (whitespace collapsed): the figure as written.
pub fn quotes(text: &str, phrase: &str) -> Vec<String> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (before, after) = phrase
        .split_once("{}")
        .expect("a phrase has a {} for its figure");
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(before) {
        let start = from + at + before.len();
        from = start;
        let rest = &text[start..];
        // The number: digits, with commas only between digits (`16,384`, not `16,384,`).
        let bytes = rest.as_bytes();
        let mut end = 0;
        while end < bytes.len()
            && (bytes[end].is_ascii_digit()
                || (bytes[end] == b','
                    && end > 0
                    && bytes.get(end + 1).is_some_and(u8::is_ascii_digit)))
        {
            end += 1;
        }
        if end == 0 {
            continue;
        }
        // Then at most one unit word, if the phrase goes on after it.
        let unit_end = rest[end..].strip_prefix(' ').map(|u| {
            end + 1
                + u.find(|c: char| !c.is_ascii_alphabetic())
                    .unwrap_or(u.len())
        });
        let candidates = unit_end
            .filter(|&u| u > end + 1 && figure(&rest[..u]).is_some())
            .into_iter()
            .chain([end]);
        if let Some(figure_end) = candidates
            .into_iter()
            .find(|&e| rest[e..].starts_with(after))
        {
            found.push(rest[..figure_end].to_owned());
        }
    }
    found
}

/// Every disagreement between `docs` and `values`, and every phrase found in no document.
pub fn mismatches(docs: &[(String, String)], values: &BTreeMap<String, Value>) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, phrases) in QUOTES {
        let Some(value) = values.get(*name) else {
            problems.push(format!("{name} is no constant of limits.rs any more"));
            continue;
        };
        let value = if value.kind == Kind::Count && is_bytes(name) {
            Value {
                kind: Kind::Bytes,
                ..*value
            }
        } else {
            *value
        };
        for phrase in *phrases {
            let mut seen = false;
            for (page, text) in docs {
                for quoted in quotes(text, phrase) {
                    seen = true;
                    if figure(&quoted) != Some(value) {
                        problems.push(format!(
                            "{page}: \"{}\" says {quoted}, but {name} is {value:?}",
                            phrase.replace("{}", &quoted)
                        ));
                    }
                }
            }
            if !seen {
                problems.push(format!(
                    "no document quotes {name} as \"{phrase}\": the page was reworded; update QUOTES in tests/tests/tidy/limits.rs with it"
                ));
            }
        }
    }
    problems
}

#[test]
fn every_limit_the_documents_quote_is_the_constant() {
    let workspace = super::workspace();
    let mut values = constants(
        &std::fs::read_to_string(workspace.join("daemon/src/limits.rs"))
            .expect("read daemon/src/limits.rs"),
    );
    values.extend(constants(
        &std::fs::read_to_string(workspace.join("proto/src/wire/mod.rs"))
            .expect("read proto/src/wire/mod.rs"),
    ));
    assert_eq!(
        values.get("INPUT_BUDGET").map(|v| v.amount),
        Some(64 * 1024 * 1024),
        "limits.rs is read: {values:?}"
    );
    let problems = mismatches(&documents(&workspace), &values);
    assert!(
        problems.is_empty(),
        "the documents quote the daemon's limits (daemon/src/limits.rs) with other figures; change the page or the constant:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_limits_check_would_see_a_wrong_figure() {
    let source = "pub const HELLO_TIMEOUT: Duration = Duration::from_secs(30);\n\
                  pub const INPUT_BUDGET: usize = 64 * 1024 * 1024;\n\
                  pub const MAX_LINE_BYTES: usize = 1 << 20;\n\
                  pub const MAX_CONNECTIONS: usize = 16_384;\n\
                  pub const MAX_SESSIONS: usize = MAX_CONNECTIONS;\n";
    let values = constants(source);
    assert_eq!(values["MAX_SESSIONS"].amount, 16_384);
    assert_eq!(values["MAX_LINE_BYTES"].amount, 1 << 20);
    assert_eq!(
        values["HELLO_TIMEOUT"],
        Value {
            kind: Kind::Millis,
            amount: 30_000
        }
    );
    // The true figures, wrapped as a page wraps them, pass; a doctored one fails, naming it.
    let page = |hello: &str, budget: &str| {
        vec![(
            "doctored.md".to_owned(),
            format!(
                "hello must\ncome within {hello}, and lines share one budget of {budget} across all."
            ),
        )]
    };
    let problems_for = |docs: &[(String, String)]| -> Vec<String> {
        mismatches(docs, &values)
            .into_iter()
            .filter(|p| p.starts_with("doctored.md"))
            .collect()
    };
    assert!(problems_for(&page("30 s", "64 MiB")).is_empty());
    assert!(problems_for(&page("30 seconds", "64 MiB")).is_empty());
    let wrong = problems_for(&page("20 s", "32 MiB"));
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[0].contains("says 20 s") && wrong[0].contains("HELLO_TIMEOUT"));
    // A figure in the wrong unit is wrong too, and a phrase no page uses any more is named.
    assert_eq!(problems_for(&page("30 KiB", "64 MiB")).len(), 1);
    assert!(
        mismatches(&page("30 s", "64 MiB"), &values)
            .iter()
            .any(|p| p.contains("no document quotes MAX_CONNECTIONS"))
    );
}
