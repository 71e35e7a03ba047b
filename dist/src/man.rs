//! Man pages from the clap definitions: `rootsd(8)`, `rootsctl(1)`, and `rootsctl-COMMAND(1)` for
//! every visible subcommand, so a page says exactly what `--help` says.
//!
//! clap_mangen renders the standard sections. Two things are done here instead: a command's
//! `after_help` (rootsctl's "Exit status:" and "Environment:" blocks) becomes one man section per
//! block with a tagged paragraph per entry, where clap_mangen would run it together into a single
//! filled "EXTRA" paragraph; and every page gets a SEE ALSO section. This module only renders; it
//! writes no files.

use clap::{Command, CommandFactory as _};
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

/// One rendered page.
#[derive(Debug)]
pub struct Page {
    /// `rootsctl-proxy`: the name `man` is given, and the page's NAME.
    pub name: String,
    /// `1` or `8`.
    pub section: &'static str,
    pub roff: Vec<u8>,
}

impl Page {
    pub fn file_name(&self) -> String {
        format!("{}.{}", self.name, self.section)
    }
}

/// Every page: rootsd's, rootsctl's, and one per rootsctl subcommand (recursively). `date`
/// (`YYYY-MM-DD`) goes in each page's footer.
pub fn pages(date: &str) -> std::io::Result<Vec<Page>> {
    let mut pages = Vec::new();
    let rootsd = rootsd::args::Args::command();
    let rootsctl = rootsctl::args::Cli::command();
    let page = PageInfo { section: "8", date };
    tree(rootsd, page, &[("rootsctl", "1")], &mut pages)?;
    let page = PageInfo { section: "1", date };
    tree(rootsctl, page, &[("rootsd", "8")], &mut pages)?;
    Ok(pages)
}

/// What every page of one program shares.
#[derive(Clone, Copy)]
struct PageInfo<'a> {
    section: &'static str,
    date: &'a str,
}

/// Renders `cmd` and its visible subcommands. `see_also` names the other program's page; a
/// subcommand's page also points back at its parent's.
fn tree(
    cmd: Command,
    info: PageInfo<'_>,
    see_also: &[(&str, &str)],
    pages: &mut Vec<Page>,
) -> std::io::Result<()> {
    // `help` is not a command of its own; building gives each subcommand its display name
    // (`rootsctl-proxy`) and bin name (`rootsctl proxy`).
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    walk(&cmd, info, see_also, pages)
}

fn walk(
    cmd: &Command,
    info: PageInfo<'_>,
    see_also: &[(&str, &str)],
    pages: &mut Vec<Page>,
) -> std::io::Result<()> {
    let name = page_name(cmd).to_owned();
    pages.push(Page {
        roff: render(cmd, info.section, info.date, see_also)?,
        name: name.clone(),
        section: info.section,
    });
    let mut parent_too = see_also.to_vec();
    parent_too.insert(0, (name.as_str(), info.section));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        walk(sub, info, &parent_too, pages)?;
    }
    Ok(())
}

/// `rootsctl-proxy` for a built subcommand, `rootsctl` for the top.
fn page_name(cmd: &Command) -> &str {
    cmd.get_display_name().unwrap_or_else(|| cmd.get_name())
}

/// The page: clap_mangen's NAME, SYNOPSIS, DESCRIPTION, OPTIONS and SUBCOMMANDS, then the
/// `after_help` blocks, VERSION and SEE ALSO.
fn render(
    cmd: &Command,
    section: &str,
    date: &str,
    see_also: &[(&str, &str)],
) -> std::io::Result<Vec<u8>> {
    let name = page_name(cmd);
    let man = Man::new(cmd.clone())
        .title(name.to_uppercase())
        .section(section)
        .date(date)
        .source(format!("rootsd {}", env!("CARGO_PKG_VERSION")))
        .manual("rootsd manual");
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut part = |render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| {
        let mut out = Vec::new();
        render(&mut out).map(|()| parts.push(out))
    };
    // Paths and option names must not be hyphenated or stretched: `~/.lo-cal/state` and
    // `${TM-PDIR}` read as typos, so no hyphenation and a ragged right margin.
    part(&|w| {
        Roff::new()
            .control("nh", [])
            .control("ad", ["l"])
            .to_writer(w)
    })?;
    part(&|w| man.render_name_section(w))?;
    part(&|w| man.render_synopsis_section(w))?;
    part(&|w| man.render_description_section(w))?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        part(&|w| man.render_options_section(w))?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        part(&|w| man.render_subcommands_section(w))?;
    }
    part(&|w| after_help(cmd).to_writer(w))?;
    if cmd.get_version().is_some() {
        part(&|w| man.render_version_section(w))?;
    }
    part(&|w| see_also_section(see_also).to_writer(w))?;
    for part in parts {
        page.extend_from_slice(strip_preamble(&part));
    }
    Ok(page)
}

/// Each rendered part starts with the same two-line preamble (it defines the apostrophe string
/// the text uses); the title part already has it, so later copies are dropped. Should the
/// preamble ever change, a part is kept whole: repeating it is harmless.
fn strip_preamble(part: &[u8]) -> &[u8] {
    const PREAMBLE: &[u8] = b".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";
    part.strip_prefix(PREAMBLE).unwrap_or(part)
}

/// A command's `after_help` as man sections. A line at the left margin ending in `:` starts a
/// section ("Exit status:" becomes EXIT STATUS); an indented line `TAG  text` (two or more
/// spaces after the tag) starts a tagged paragraph; a line indented further continues the
/// previous one; anything else is a plain line of text.
fn after_help(cmd: &Command) -> Roff {
    let mut roff = Roff::new();
    let Some(text) = cmd.get_after_long_help().or_else(|| cmd.get_after_help()) else {
        return roff;
    };
    let text = text.to_string();
    let mut entry_indent = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.is_empty() {
            continue;
        }
        if indent == 0 && trimmed.ends_with(':') {
            let heading = trimmed.trim_end_matches(':').to_uppercase();
            roff.control("SH", [heading.as_str()]);
            entry_indent = None;
            continue;
        }
        let starts_entry = indent > 0 && entry_indent.is_none_or(|first| indent <= first);
        match trimmed.split_once("  ") {
            Some((tag, rest)) if starts_entry => {
                entry_indent = Some(indent);
                roff.control("TP", []);
                roff.text([bold(tag.trim())]);
                roff.text([roman(rest.trim())]);
            }
            _ => {
                roff.text([roman(trimmed)]);
            }
        }
    }
    roff
}

fn see_also_section(pages: &[(&str, &str)]) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["SEE ALSO"]);
    let mut line = Vec::new();
    for (i, (name, section)) in pages.iter().enumerate() {
        let separator = if i + 1 < pages.len() { ", " } else { "" };
        line.push(bold(*name));
        line.push(roman(format!("({section}){separator}")));
    }
    roff.text(line);
    roff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page<'a>(pages: &'a [Page], file: &str) -> &'a str {
        let page = pages
            .iter()
            .find(|p| p.file_name() == file)
            .unwrap_or_else(|| panic!("no page {file}"));
        std::str::from_utf8(&page.roff).unwrap()
    }

    #[test]
    fn there_is_a_page_per_program_and_per_visible_subcommand_and_none_for_help() {
        let pages = pages("2026-01-02").unwrap();
        let mut names: Vec<String> = pages.iter().map(Page::file_name).collect();
        names.sort();
        let mut expected = vec!["rootsd.8".to_owned(), "rootsctl.1".to_owned()];
        // Nested subcommands (`rootsctl hosts wrap`) get a page of their own too.
        for sub in rootsctl::args::Cli::command().get_subcommands() {
            expected.push(format!("rootsctl-{}.1", sub.get_name()));
            for nested in sub.get_subcommands().filter(|n| n.get_name() != "help") {
                expected.push(format!(
                    "rootsctl-{}-{}.1",
                    sub.get_name(),
                    nested.get_name()
                ));
            }
        }
        expected.sort();
        assert_eq!(names, expected);
    }

    #[test]
    fn a_subcommand_page_is_named_after_the_page_and_shows_the_real_invocation() {
        let pages = pages("2026-01-02").unwrap();
        let proxy = page(&pages, "rootsctl-proxy.1");
        assert!(proxy.contains(".TH ROOTSCTL-PROXY 1"), "{proxy}");
        // whatis/apropos read the NAME line: `rootsctl-proxy \- Run a stdio MCP server …`.
        assert!(
            proxy.contains(".SH NAME\nrootsctl\\-proxy \\- Run a stdio MCP server"),
            "{proxy}"
        );
        // The command people type is `rootsctl proxy`, as git's pages show `git commit`.
        assert!(
            proxy.contains(".SH SYNOPSIS\n\\fBrootsctl proxy\\fR"),
            "{proxy}"
        );
        assert!(
            proxy.contains("\\fBrootsctl\\fR(1), \\fBrootsd\\fR(8)"),
            "{proxy}"
        );
    }

    #[test]
    fn the_after_help_blocks_become_sections_with_an_entry_per_line() {
        let pages = pages("2026-01-02").unwrap();
        let rootsctl = page(&pages, "rootsctl.1");
        assert!(rootsctl.contains(".SH \"EXIT STATUS\""), "{rootsctl}");
        assert!(rootsctl.contains(".SH ENVIRONMENT"), "{rootsctl}");
        assert!(
            rootsctl.contains(".TP\n\\fBROOTSD_SOCKET\\fR\n"),
            "{rootsctl}"
        );
        assert!(!rootsctl.contains(".SH EXTRA"), "{rootsctl}");
        assert_eq!(
            rootsctl.matches(".ds Aq").count(),
            2,
            "one preamble: {rootsctl}"
        );
    }

    #[test]
    fn after_help_parsing_keeps_continuations_and_prose() {
        let cmd = Command::new("x").after_help(
            "Exit status:\n  0  fine\n  1  bad, or\n     worse\nSome prose line.\n\nNotes:\nfree text",
        );
        let text = after_help(&cmd).to_roff();
        assert_eq!(
            text,
            ".SH \"EXIT STATUS\"\n.TP\n\\fB0\\fR\nfine\n.TP\n\\fB1\\fR\nbad, or\nworse\nSome prose line.\n.SH NOTES\nfree text\n"
        );
    }

    #[test]
    fn rootsd_is_a_section_8_page_pointing_at_rootsctl() {
        let pages = pages("2026-01-02").unwrap();
        let rootsd = page(&pages, "rootsd.8");
        assert!(
            rootsd.contains(".TH ROOTSD 8 2026-01-02 \"rootsd 0.1.0\" \"rootsd manual\"\n"),
            "{rootsd}"
        );
        assert!(rootsd.contains("\\-\\-allow\\-group"), "{rootsd}");
        assert!(
            rootsd.contains(".SH \"SEE ALSO\"\n\\fBrootsctl\\fR(1)\n"),
            "{rootsd}"
        );
    }
}
