//! What a newcomer meets first: hints that can be copied as they are, errors that say what to do,
//! and a README reference that agrees with `--help`.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use rootsd_tests::{Sandbox, bin, output_within, without_privilege};

use crate::support::{assert_exit, stderr_of, stdout_of};

#[test]
fn the_hint_for_an_empty_workspace_names_it_unless_it_is_the_default() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();

    let scratch = sb.ctl(&["list", "-w", "scratch"]);
    assert_exit(&scratch, 0, "list of an empty workspace");
    assert_eq!(
        stdout_of(&scratch),
        "no roots in workspace scratch (add one with `rootsctl add -w scratch PATH`)\n"
    );

    let default = sb.ctl(&["list"]);
    assert_exit(&default, 0, "list of the empty default workspace");
    assert_eq!(
        stdout_of(&default),
        "no roots in workspace default (add one with `rootsctl add PATH`)\n"
    );
}

/// `rootsctl ARGS`, which must succeed, as text: help needs no daemon.
fn help(args: &[&str]) -> String {
    let output = output_within(Command::new(bin("rootsctl")).args(args));
    assert_exit(&output, 0, &format!("rootsctl {args:?}"));
    stdout_of(&output)
}

/// The long and short options a `--help` text lists (`-w`, `--workspace`, …).
fn options_in_help(help: &str) -> BTreeSet<String> {
    help.lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .flat_map(|line| {
            line.split([' ', ','])
                .take_while(|word| word.is_empty() || word.starts_with('-'))
                .filter(|word| !word.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The options a README entry mentions: every word that starts with `-` followed by a letter.
fn options_in_entry(entry: &str) -> BTreeSet<String> {
    entry
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|word| {
            word.strip_prefix("--")
                .or_else(|| word.strip_prefix('-'))
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_lowercase()))
        })
        .map(str::to_owned)
        .collect()
}

/// README.md's CLI reference: its synopsis line, then each entry (a line starting in the first
/// column with the lines indented under it), keyed by the command's first name.
fn readme_reference() -> (String, Vec<(String, String)>) {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("read README.md");
    let section = &readme[readme.find("## CLI reference").expect("a CLI reference")..];
    let block = section
        .split("```")
        .nth(1)
        .expect("the reference is a code block");
    let mut lines = block.lines().filter(|l| !l.trim().is_empty());
    let synopsis = lines.next().expect("a synopsis").to_owned();
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in lines {
        match entries.last_mut() {
            Some((_, text)) if line.starts_with(' ') => {
                text.push('\n');
                text.push_str(line);
            }
            _ => {
                let name = line.split(['|', ' ']).next().unwrap().to_owned();
                entries.push((name, line.to_owned()));
            }
        }
    }
    (synopsis, entries)
}

#[test]
fn the_readme_cli_reference_has_one_entry_per_command_true_to_its_help() {
    let (synopsis, entries) = readme_reference();
    let top = help(&["--help"]);
    let global: BTreeSet<String> = options_in_help(&top)
        .into_iter()
        .filter(|o| o.starts_with("--") && !["--help", "--version"].contains(&o.as_str()))
        .collect();
    assert!(!global.is_empty(), "{top}");
    for option in &global {
        assert!(
            synopsis.contains(option.as_str()),
            "the synopsis `{synopsis}` lacks {option}"
        );
    }
    let commands: Vec<String> = top
        .split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .expect("--help lists the commands")
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect();
    let named: Vec<&str> = entries.iter().map(|(name, _)| name.as_str()).collect();
    for command in &commands {
        let count = named.iter().filter(|n| **n == command.as_str()).count();
        assert_eq!(
            count, 1,
            "README has {count} entries for `{command}`: {named:?}"
        );
    }
    for (name, entry) in &entries {
        assert!(
            commands.contains(name),
            "README's entry `{name}` is no command of rootsctl ({commands:?})"
        );
        let known = options_in_help(&help(&[name, "--help"]));
        for option in options_in_entry(entry) {
            assert!(
                known.contains(&option),
                "README's `{name}` entry names {option}, which `rootsctl {name} --help` does not list ({known:?}):\n{entry}"
            );
        }
    }
}

#[test]
fn a_socket_directory_that_cannot_be_searched_is_named_with_its_fix() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    let dir = sb.socket.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o000)).unwrap();

    // Root searches any directory: rootsctl runs as a user whom the mode stops.
    let mut list = sb.rootsctl();
    list.arg("list");
    let output = output_within(&mut without_privilege(list));
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_exit(&output, 3, "list with a 0000 socket directory");
    assert_eq!(
        stderr_of(&output),
        format!(
            "rootsctl: error: cannot connect to rootsd at {}: permission denied: you may not search the directory {} (mode 0000), so nothing inside it can be reached; fix: chmod 700 {}\n",
            sb.socket.display(),
            dir.display(),
            dir.display()
        )
    );
}
