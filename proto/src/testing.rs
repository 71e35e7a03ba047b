//! Test scaffolding for the crates that keep transcripts (the registry's, the relay's): texts
//! written indented in the test source, and one way to say where two texts part. Compiled only
//! with the feature `testing`, which those crates enable as a dev-dependency.

/// `text` without the indentation common to all its non-blank lines, without trailing
/// whitespace on any line, and without blank lines at either end.
pub fn dedent(text: &str) -> String {
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect::<Vec<_>>()
        .join("\n")
        .trim_matches('\n')
        .to_owned()
}

/// Fails, naming `what` and the first line at which they part, unless `actual` is `expected`.
#[track_caller]
pub fn assert_same_text(what: &str, expected: &str, actual: &str) {
    if actual == expected {
        return;
    }
    let (expected_lines, actual_lines): (Vec<&str>, Vec<&str>) =
        (expected.lines().collect(), actual.lines().collect());
    let first = (0..)
        .find(|&i| expected_lines.get(i) != actual_lines.get(i))
        .unwrap_or(expected_lines.len());
    let at = |lines: &[&str]| {
        lines
            .get(first)
            .map_or("(end)".to_owned(), |l| format!("{l:?}"))
    };
    panic!(
        "{what} differs from the expected one at line {}:\n\
         expected {}\n  actual {}\n\
         \n--- expected\n{expected}\n\n--- actual\n{actual}\n",
        first + 1,
        at(&expected_lines),
        at(&actual_lines),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedent_strips_the_common_margin_and_the_blank_ends_only() {
        let text = "\n    one  \n\n      two\n    three\n  ";
        assert_eq!(dedent(text), "one\n\n  two\nthree");
    }

    #[test]
    #[should_panic(expected = "the transcript differs from the expected one at line 2")]
    fn texts_that_part_are_named_at_the_first_line_that_differs() {
        assert_same_text("the transcript", "a\nb\n", "a\nc\n");
    }
}
