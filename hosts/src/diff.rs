//! `--dry-run`'s unified diff of one file, built from the planner's splices rather than by
//! comparing whole files: it costs time linear in the file, however large, and shows exactly the
//! lines the splices touch, with three lines of context.

use std::ops::Range;

const CONTEXT: usize = 3;

/// A splice: the span it replaces and its text.
type Edit = (Range<usize>, String);

/// The diff of `old` with `edits` (sorted, not overlapping) applied, labelled `name`, the new
/// side `name (label)`: `wrapped` or `unwrapped`.
pub fn unified(name: &str, label: &str, old: &str, edits: &[Edit]) -> String {
    if edits.is_empty() {
        return String::new();
    }
    let starts: Vec<usize> = std::iter::once(0)
        .chain(old.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|s| *s < old.len() || old.is_empty())
        .collect();
    let line_of = |at: usize| starts.partition_point(|s| *s <= at).saturating_sub(1);
    let line_end = |line: usize| starts.get(line + 1).copied().unwrap_or(old.len());
    // Edits on the same or adjacent lines make one block of whole lines (removed, then added);
    // blocks whose contexts touch make one hunk.
    let mut blocks: Vec<(usize, usize, Vec<&Edit>)> = Vec::new();
    for edit in edits {
        let first = line_of(edit.0.start);
        let last = line_of(edit.0.end.saturating_sub(1).max(edit.0.start));
        match blocks.last_mut() {
            Some((_, end, members)) if first <= *end + 1 => {
                *end = (*end).max(last);
                members.push(edit);
            }
            _ => blocks.push((first, last, vec![edit])),
        }
    }
    let mut hunks: Vec<Vec<(usize, usize, Vec<&Edit>)>> = Vec::new();
    for block in blocks {
        match hunks.last_mut() {
            Some(hunk) if block.0 <= hunk.last().map_or(0, |b| b.1) + 2 * CONTEXT + 1 => {
                hunk.push(block)
            }
            _ => hunks.push(vec![block]),
        }
    }
    let lines = |text: &str| {
        text.split_inclusive('\n')
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let mut out = format!("--- {name}\n+++ {name} ({label})\n");
    let mut delta: isize = 0;
    for hunk in hunks {
        let first = hunk[0].0;
        let last = hunk[hunk.len() - 1].1;
        let from = first.saturating_sub(CONTEXT);
        let to = (last + CONTEXT).min(starts.len().saturating_sub(1));
        let mut body: Vec<(char, String)> = Vec::new();
        let mut at_line = from;
        for (block_first, block_last, members) in &hunk {
            let context = &old[starts[at_line]..starts[*block_first]];
            body.extend(lines(context).into_iter().map(|l| (' ', l)));
            let block = starts[*block_first]..line_end(*block_last);
            let mut new_block = String::new();
            let mut at = block.start;
            for (span, text) in members {
                new_block.push_str(&old[at..span.start]);
                new_block.push_str(text);
                at = span.end;
            }
            new_block.push_str(&old[at..block.end]);
            body.extend(lines(&old[block]).into_iter().map(|l| ('-', l)));
            body.extend(lines(&new_block).into_iter().map(|l| ('+', l)));
            at_line = block_last + 1;
        }
        let after = &old[starts.get(at_line).copied().unwrap_or(old.len())..line_end(to)];
        body.extend(lines(after).into_iter().map(|l| (' ', l)));
        let old_count = body.iter().filter(|(m, _)| *m != '+').count();
        let new_count = body.iter().filter(|(m, _)| *m != '-').count();
        out.push_str(&format!(
            "@@ -{},{old_count} +{},{new_count} @@\n",
            from + 1,
            from as isize + delta + 1
        ));
        for (mark, line) in &body {
            out.push(*mark);
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
        delta += new_count as isize - old_count as isize;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_touched_lines_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n";
        let at = |s: &str| old.find(s).unwrap();
        let edits = vec![
            (at("b")..at("b") + 1, "B\nB2".to_owned()),
            (at("l")..at("l") + 1, "L".to_owned()),
        ];
        let diff = unified("f.json", "wrapped", old, &edits);
        assert_eq!(
            diff,
            "--- f.json\n+++ f.json (wrapped)\n@@ -1,5 +1,6 @@\n a\n-b\n+B\n+B2\n c\n d\n e\n@@ -9,5 +10,5 @@\n i\n j\n k\n-l\n+L\n m\n"
        );
        assert_eq!(
            unified("f", "unwrapped", "x", &[(0..1, "y".to_owned())]),
            "--- f\n+++ f (unwrapped)\n@@ -1,1 +1,1 @@\n-x\n\\ No newline at end of file\n+y\n\\ No newline at end of file\n"
        );
        assert_eq!(unified("f", "wrapped", old, &[]), "");
        // Two edits three lines apart share a hunk; the lines between them stay context.
        let edits = vec![
            (at("b")..at("b") + 1, "B".to_owned()),
            (at("f")..at("f") + 1, "F".to_owned()),
        ];
        assert_eq!(
            unified("f", "wrapped", old, &edits),
            "--- f\n+++ f (wrapped)\n@@ -1,9 +1,9 @@\n a\n-b\n+B\n c\n d\n e\n-f\n+F\n g\n h\n i\n"
        );
    }
}
