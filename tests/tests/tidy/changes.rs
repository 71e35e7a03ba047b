//! One rule, one place: a store `Change` is the revision after the pending one, with that
//! revision stamped on its state and who made it when. The daemon states that rule once, in
//! `Change::next` (`daemon/src/store/model.rs`); a struct literal anywhere else could state it
//! again, and differently. Reading a change back from the journal takes its parts as written
//! (`Change::recorded`), which only the journal, and tests, may do.

use std::path::{Path, PathBuf};

use super::{code_lines, relative, rust_files, workspace};

/// The one module that may build a `Change` field by field.
const CONSTRUCTOR_MODULE: &str = "daemon/src/store/model.rs";

/// Where product code may call `Change::recorded`: the journal, which reads changes back.
const RECORDED_ALLOWED_UNDER: &str = "daemon/src/store/journal/";

/// The words before a `Change {` that make it no struct literal: a definition, an impl, or the
/// return type of a function whose body follows.
const NOT_A_LITERAL_AFTER: [&str; 7] = ["struct", "enum", "union", "trait", "impl", "for", "->"];

/// `text` with comment lines blanked, so that line numbers stay and prose may name anything.
fn code(text: &str) -> String {
    let kept: Vec<(usize, &str)> = code_lines(text).collect();
    let mut out = String::with_capacity(text.len());
    let mut next = kept.iter().peekable();
    for (k, _) in text.lines().enumerate() {
        match next.peek() {
            Some((number, line)) if *number == k + 1 => {
                out.push_str(line);
                next.next();
            }
            _ => {}
        }
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The line numbers of `text` where a `Change { … }` struct literal starts. Not literals: enum
/// variants of that name (`RecordV1::Change {`), definitions and impls, a function's return type,
/// and patterns that end in `..` (`Change { revision, .. }`).
pub fn literals(text: &str) -> Vec<usize> {
    let code = code(text);
    let mut found = Vec::new();
    for (at, _) in code.match_indices("Change") {
        let before = &code[..at];
        let after = code[at + "Change".len()..].trim_start_matches([' ', '\t']);
        if !after.starts_with('{') || before.chars().next_back().is_some_and(is_ident) {
            continue;
        }
        if let Some(path) = before.strip_suffix("::") {
            // `Enum::Change {` is a variant; `store::Change {` is the struct.
            let segment: String = path.chars().rev().take_while(|c| is_ident(*c)).collect();
            if segment.chars().last().is_some_and(char::is_uppercase) {
                continue;
            }
        }
        let previous_word = before
            .trim_end()
            .rsplit(|c: char| c.is_whitespace() || c == '(')
            .next()
            .unwrap_or("");
        if NOT_A_LITERAL_AFTER.contains(&previous_word) || previous_word.ends_with("->") {
            continue;
        }
        if braced(after).trim_end().ends_with("..") || in_enum(before) {
            continue;
        }
        found.push(before.matches('\n').count() + 1);
    }
    found
}

/// Whether the code ending with `before` is inside an enum's body, where `Change {` is a
/// variant's definition.
fn in_enum(before: &str) -> bool {
    let mut depth = 0usize;
    for (k, c) in before.char_indices().rev() {
        match c {
            '}' => depth += 1,
            '{' if depth == 0 => {
                let line = before[..k].rsplit('\n').next().unwrap_or("");
                return line.split_whitespace().any(|word| word == "enum");
            }
            '{' => depth -= 1,
            _ => {}
        }
    }
    false
}

/// What the braces at the start of `text` hold, up to their matching close.
fn braced(text: &str) -> &str {
    let mut depth = 0usize;
    for (k, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[1..k];
                }
            }
            _ => {}
        }
    }
    text
}

/// The line numbers of `text` that call `Change::recorded` outside test code: inline
/// `#[cfg(test)] mod … { … }` modules (closed at column 0, as rustfmt writes them) are tests.
pub fn recorded_calls(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut test_attribute = false;
    let mut in_test_module = false;
    for (number, line) in code(text).lines().enumerate() {
        if in_test_module {
            in_test_module = line != "}";
            continue;
        }
        if line.starts_with("mod ") && line.ends_with('{') && test_attribute {
            in_test_module = true;
            continue;
        }
        test_attribute = line == "#[cfg(test)]";
        if line.contains("Change::recorded(") {
            found.push(number + 1);
        }
    }
    found
}

/// Whether `file` is test code as a whole: a `tests.rs`, or under a `tests` directory.
fn is_test_file(file: &Path) -> bool {
    file.ends_with("tests.rs") || file.components().any(|c| c.as_os_str() == "tests")
}

fn daemon_sources() -> Vec<PathBuf> {
    ["daemon/src", "daemon/tests"]
        .iter()
        .flat_map(|d| rust_files(&workspace().join(d)))
        .collect()
}

#[test]
fn a_change_is_built_in_one_place() {
    let files = daemon_sources();
    let model = files
        .iter()
        .find(|f| f.ends_with(CONSTRUCTOR_MODULE))
        .expect("the walk finds the constructor's module");
    let mut offenders = Vec::new();
    for file in &files {
        let name = relative(file);
        if name == CONSTRUCTOR_MODULE {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read a source file");
        for number in literals(&text) {
            offenders.push(format!("{name}:{number}: a `Change {{ … }}` literal"));
        }
        if !is_test_file(file) && !name.starts_with(RECORDED_ALLOWED_UNDER) {
            for number in recorded_calls(&text) {
                offenders.push(format!(
                    "{name}:{number}: `Change::recorded` outside the journal"
                ));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "a change is the revision after the pending one, stamped with who made it and when: make \
         it with `Change::next` ({CONSTRUCTOR_MODULE}); only the journal reads one back from its \
         parts (`Change::recorded`), and tests may use that too; found:\n{}",
        offenders.join("\n")
    );
    let model_text = std::fs::read_to_string(model).expect("read the model");
    assert!(
        model_text.contains("impl Change {") && model_text.contains("pub fn next("),
        "{CONSTRUCTOR_MODULE} holds `Change::next`, the one place that builds a change"
    );
}

#[test]
fn the_change_check_would_see_a_literal_and_a_recorded_change() {
    let sample = [
        "// Change { revision } in prose is no literal",
        "let change = Change {",
        "    revision,",
        "    state: Arc::new(StoredWorkspaceV1 { revision, roots }),",
        "};",
        "let other = crate::store::Change { revision, ..change };",
        "let record = RecordV1::Change { revision };",
        "if let Entry::Change(Change { revision, .. }) = entry {}",
        "fn change(revision: u64) -> Change {",
        "impl Change {",
        "pub struct Change {",
        "let not_it = StoredChange { revision };",
        "Some(Change {revision})",
        "pub enum RecordV1 {",
        "    Snapshot { revision: u64 },",
        "    Change {",
        "        revision: u64,",
        "    },",
        "}",
        "let read = Change::recorded(1, ws, state, None, 0);",
        "#[cfg(test)]",
        "mod tests {",
        "    let built = Change {",
        "    let read = Change::recorded(1, ws, state, None, 0);",
        "}",
    ]
    .join("\n");
    assert_eq!(literals(&sample), vec![2, 6, 13, 23]);
    assert_eq!(recorded_calls(&sample), vec![20]);
    assert!(is_test_file(Path::new("daemon/src/store/journal/tests.rs")));
    assert!(!is_test_file(Path::new("daemon/src/store/model.rs")));
}
