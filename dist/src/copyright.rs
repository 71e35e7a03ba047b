//! Debian's machine-readable `copyright` file (DEP-5), built from the licence texts in the
//! repository so that it cannot disagree with them. Only renders.

/// The copyright line of LICENSE-MIT, without its "Copyright (c) " prefix.
const HOLDERS: &str = "2026 The rootsd developers";
const MIT: &str = include_str!("../../LICENSE-MIT");
const APACHE: &str = include_str!("../../LICENSE-APACHE");
/// The database crate rootsd carries a mended copy of (`vendor/sled`, see its ROOTSD.md): its
/// own copyright lines, under the same two licences.
const SLED_MIT: &str = include_str!("../../vendor/sled/LICENSE-MIT");

pub fn text() -> String {
    let mut out = format!(
        // No `Source:` (optional in DEP-5): rootsd has no public address to name.
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
         Upstream-Name: rootsd\n\
         \n\
         Files: *\n\
         Copyright: {HOLDERS}\n\
         License: MIT or Apache-2.0\n"
    );
    out.push_str("\nFiles: vendor/sled/*\nCopyright:");
    for holder in SLED_MIT
        .lines()
        .filter_map(|l| l.strip_prefix("Copyright (c) "))
    {
        out.push_str(&format!(" {holder}\n"));
    }
    out.push_str("License: MIT or Apache-2.0\n");
    for (name, text) in [("MIT", MIT), ("Apache-2.0", APACHE)] {
        out.push_str(&format!("\nLicense: {name}\n"));
        out.push_str(&indented(text));
    }
    out
}

/// A licence text as a DEP-5 continuation: every line indented by one space, empty lines as
/// ` .`.
fn indented(text: &str) -> String {
    text.lines()
        .map(|line| {
            if line.trim().is_empty() {
                " .\n".to_owned()
            } else {
                format!(" {}\n", line.trim_end())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_placeholder_address_is_given_as_the_source() {
        let text = text();
        assert!(!text.contains("Source:"), "{text}");
        assert!(!text.contains(".invalid"), "{text}");
    }

    #[test]
    fn the_vendored_database_crate_has_its_own_holders() {
        let text = text();
        let stanza = text
            .split("\n\n")
            .find(|p| p.starts_with("Files: vendor/sled/*\n"))
            .expect("a stanza for vendor/sled");
        assert!(
            stanza.contains("Copyright: 2018 Tyler Neely\n 2019 Tyler Neely\n"),
            "{stanza}"
        );
        assert!(stanza.ends_with("License: MIT or Apache-2.0"), "{stanza}");
    }

    #[test]
    fn the_holders_are_those_of_the_mit_licence() {
        assert!(MIT.starts_with(&format!("Copyright (c) {HOLDERS}\n")));
    }

    #[test]
    fn both_licence_texts_are_carried_whole_as_continuation_lines() {
        let text = text();
        assert!(text.contains("License: MIT or Apache-2.0\n"));
        for (name, licence) in [("MIT", MIT), ("Apache-2.0", APACHE)] {
            let paragraph = text
                .split("\n\n")
                .find(|p| p.starts_with(&format!("License: {name}\n")))
                .expect("a stand-alone licence paragraph");
            let first = licence.lines().find(|l| !l.trim().is_empty()).unwrap();
            assert!(paragraph.contains(first.trim_end()), "{name}");
            assert!(
                paragraph.lines().skip(1).all(|l| l.starts_with(' ')),
                "{name}: a line is not a continuation line"
            );
        }
    }
}
