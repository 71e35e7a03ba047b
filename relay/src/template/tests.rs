//! Every expansion rule as data: the template (command line, `--env`, `--cwd`), the roots as the
//! server sees them, and exactly what the server is started with.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::PathBuf;

use super::*;

fn os(text: &str) -> OsString {
    OsString::from(text)
}

fn paths(list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(PathBuf::from).collect()
}

struct Case {
    what: &'static str,
    command: &'static [&'static str],
    env: &'static [&'static str],
    cwd: Option<&'static str>,
    roots: &'static [&'static str],
    argv: &'static [&'static str],
    expect_env: &'static [(&'static str, &'static str)],
    expect_cwd: Option<&'static str>,
}

const NONE: &[&str] = &[];

const CASES: &[Case] = &[
    Case {
        what: "exactly {roots} is one argument per root",
        command: &["server-filesystem", "{roots}"],
        env: NONE,
        cwd: None,
        roots: &["/a", "/b c"],
        argv: &["server-filesystem", "/a", "/b c"],
        expect_env: &[],
        expect_cwd: None,
    },
    Case {
        what: "exactly {roots} is no argument for an empty workspace",
        command: &["server-filesystem", "{roots}", "--verbose"],
        env: NONE,
        cwd: None,
        roots: &[],
        argv: &["server-filesystem", "--verbose"],
        expect_env: &[],
        expect_cwd: None,
    },
    Case {
        what: "an argument containing {roots} is repeated per root",
        command: &["mcp-ripgrep", "--allow={roots}"],
        env: NONE,
        cwd: None,
        roots: &["/a", "/with=equals"],
        argv: &["mcp-ripgrep", "--allow=/a", "--allow=/with=equals"],
        expect_env: &[],
        expect_cwd: None,
    },
    Case {
        what: "{roots:FLAG} is the flag and a path, per root",
        command: &["mcp-ripgrep", "{roots:--allow-dir}", "--x"],
        env: NONE,
        cwd: None,
        roots: &["/a", "/b"],
        argv: &[
            "mcp-ripgrep",
            "--allow-dir",
            "/a",
            "--allow-dir",
            "/b",
            "--x",
        ],
        expect_env: &[],
        expect_cwd: None,
    },
    Case {
        what: "{root} is the first root, anywhere in an argument",
        command: &[
            "mcp-server-git",
            "--repository",
            "{root}",
            "--x={root}/.git",
        ],
        env: NONE,
        cwd: None,
        roots: &["/repo", "/other"],
        argv: &["mcp-server-git", "--repository", "/repo", "--x=/repo/.git"],
        expect_env: &[],
        expect_cwd: None,
    },
    Case {
        what: "{root} may start the command itself",
        command: &["{root}/bin/server", "--stdio"],
        env: NONE,
        cwd: None,
        roots: &["/opt/tool"],
        argv: &["/opt/tool/bin/server", "--stdio"],
        expect_env: &[],
        expect_cwd: None,
    },
    Case {
        what: "{root} with {roots} in one argument: each copy has the first root too",
        command: &["s", "{root}:{roots}"],
        env: NONE,
        cwd: None,
        roots: &["/a", "/b"],
        argv: &["s", "/a:/a", "/a:/b"],
        expect_env: &[],
        expect_cwd: None,
    },
    Case {
        what: "{{ and }} are braces in an argument that expands",
        command: &["s", "{{{root}}}", "{{roots}}={roots}"],
        env: NONE,
        cwd: None,
        roots: &["/a"],
        argv: &["s", "{/a}", "{roots}=/a"],
        expect_env: &[],
        expect_cwd: None,
    },
    Case {
        what: "an argument without a placeholder passes as written, braces and all",
        command: &["s", r#"{"a":{"b":1}}"#, "{{", "{rooty}", "{ROOT}"],
        env: NONE,
        cwd: None,
        roots: &["/a"],
        argv: &["s", r#"{"a":{"b":1}}"#, "{{", "{rooty}", "{ROOT}"],
        expect_env: &[],
        expect_cwd: None,
    },
    Case {
        what: "paths with braces are never read as placeholders",
        command: &["s", "{roots}", "--first={root}"],
        env: NONE,
        cwd: None,
        roots: &["/{root}", "/}}{{"],
        argv: &["s", "/{root}", "/}}{{", "--first=/{root}"],
        expect_env: &[],
        expect_cwd: None,
    },
    Case {
        what: "--env: {roots} joined with ':', {root} the first, plain values as written",
        command: &["mcp-gopls"],
        env: &[
            "MCP_GOPLS_WORKSPACE={root}",
            "ALL={roots}",
            "PLAIN={\"x\":1}",
            "EMPTY=",
        ],
        cwd: None,
        roots: &["/go/a", "/go/b"],
        argv: &["mcp-gopls"],
        expect_env: &[
            ("MCP_GOPLS_WORKSPACE", "/go/a"),
            ("ALL", "/go/a:/go/b"),
            ("PLAIN", "{\"x\":1}"),
            ("EMPTY", ""),
        ],
        expect_cwd: None,
    },
    Case {
        what: "--env keeps the order given, and a value may hold =",
        command: &["s"],
        env: &["A=x=y", "A={root}"],
        cwd: None,
        roots: &["/r"],
        argv: &["s"],
        expect_env: &[("A", "x=y"), ("A", "/r")],
        expect_cwd: None,
    },
    Case {
        what: "--env {roots} of an empty workspace is empty",
        command: &["s"],
        env: &["ALL={roots}"],
        cwd: None,
        roots: &[],
        argv: &["s"],
        expect_env: &[("ALL", "")],
        expect_cwd: None,
    },
    Case {
        what: "--cwd {root}",
        command: &["serena", "start-mcp-server", "--project", "{root}"],
        env: NONE,
        cwd: Some("{root}"),
        roots: &["/proj"],
        argv: &["serena", "start-mcp-server", "--project", "/proj"],
        expect_env: &[],
        expect_cwd: Some("/proj"),
    },
    Case {
        what: "--cwd without a placeholder is a fixed directory",
        command: &["s"],
        env: NONE,
        cwd: Some("/srv"),
        roots: &[],
        argv: &["s"],
        expect_env: &[],
        expect_cwd: Some("/srv"),
    },
];

#[test]
fn every_expansion_rule() {
    for case in CASES {
        let command: Vec<OsString> = case.command.iter().map(|a| os(a)).collect();
        let env: Vec<OsString> = case.env.iter().map(|a| os(a)).collect();
        let template = LaunchTemplate::parse(&command, &env, case.cwd.map(OsStr::new))
            .unwrap_or_else(|e| panic!("{}: {e}", case.what));
        let launch = template
            .expand(&paths(case.roots))
            .unwrap_or_else(|_| panic!("{}: needs a root", case.what));
        assert_eq!(
            launch.argv,
            case.argv.iter().map(|a| os(a)).collect::<Vec<_>>(),
            "{}",
            case.what
        );
        assert_eq!(
            launch.env,
            case.expect_env
                .iter()
                .map(|(n, v)| (os(n), os(v)))
                .collect::<Vec<_>>(),
            "{}",
            case.what
        );
        assert_eq!(
            launch.cwd,
            case.expect_cwd.map(PathBuf::from),
            "{}",
            case.what
        );
    }
}

#[test]
fn paths_that_are_not_utf8_pass_byte_for_byte() {
    let root = PathBuf::from(OsString::from_vec(b"/caf\xe9 dir".to_vec()));
    let template = LaunchTemplate::parse(
        &[os("s"), os("{roots}"), os("--d={root}")],
        &[os("DIR={roots}")],
        Some(OsStr::new("{root}")),
    )
    .unwrap();
    let launch = template.expand(std::slice::from_ref(&root)).unwrap();
    assert_eq!(launch.argv[1].as_bytes(), b"/caf\xe9 dir");
    assert_eq!(launch.argv[2].as_bytes(), b"--d=/caf\xe9 dir");
    assert_eq!(launch.env[0].1.as_bytes(), b"/caf\xe9 dir");
    assert_eq!(launch.cwd, Some(root));
}

#[test]
fn a_template_argument_that_is_not_utf8_keeps_its_other_bytes() {
    let arg = OsString::from_vec(b"--\xff={root}".to_vec());
    let template = LaunchTemplate::parse(&[os("s"), arg], &[], None).unwrap();
    let launch = template.expand(&paths(&["/r"])).unwrap();
    assert_eq!(launch.argv[1].as_bytes(), b"--\xff=/r");
}

#[test]
fn root_needs_a_root_and_roots_does_not() {
    let needs = |command: &[&str], env: &[&str], cwd: Option<&str>| {
        let command: Vec<OsString> = command.iter().map(|a| os(a)).collect();
        let env: Vec<OsString> = env.iter().map(|a| os(a)).collect();
        let template = LaunchTemplate::parse(&command, &env, cwd.map(OsStr::new)).unwrap();
        assert_eq!(template.needs_a_root(), template.expand(&[]).is_err());
        template.needs_a_root()
    };
    assert!(needs(&["git", "--repository", "{root}"], &[], None));
    assert!(needs(&["s"], &["W={root}"], None));
    assert!(needs(&["s"], &[], Some("{root}")));
    assert!(!needs(
        &["s", "{roots}", "--a={roots}", "{roots:-d}"],
        &["A={roots}"],
        None
    ));
    assert!(!needs(&["s", "plain"], &[], Some("/fixed")));
}

#[test]
fn only_templates_that_use_the_workspace_can_change_with_it() {
    let uses = |command: &[&str], env: &[&str], cwd: Option<&str>| {
        let command: Vec<OsString> = command.iter().map(|a| os(a)).collect();
        let env: Vec<OsString> = env.iter().map(|a| os(a)).collect();
        LaunchTemplate::parse(&command, &env, cwd.map(OsStr::new))
            .unwrap()
            .uses_workspace()
    };
    assert!(!uses(&["s", "{{x}}", r#"{"a":1}"#], &["A=b"], Some("/srv")));
    assert!(uses(&["s", "{roots}"], &[], None));
    assert!(uses(&["s"], &["A={roots}"], None));
    assert!(uses(&["s"], &[], Some("{root}")));
    let template = LaunchTemplate::parse(&[os("s"), os("{root}")], &[], None).unwrap();
    assert_eq!(
        template.expand(&paths(&["/a", "/b"])),
        template.expand(&paths(&["/a", "/c"])),
        "a change after the first root leaves a {{root}} launch alone"
    );
    assert_ne!(
        template.expand(&paths(&["/a"])),
        template.expand(&paths(&["/b"]))
    );
}

#[test]
fn templates_that_cannot_work_are_refused_saying_what_to_write() {
    let refused = |command: &[&str], env: &[&str], cwd: Option<&str>| {
        let command: Vec<OsString> = command.iter().map(|a| os(a)).collect();
        let env: Vec<OsString> = env.iter().map(|a| os(a)).collect();
        LaunchTemplate::parse(&command, &env, cwd.map(OsStr::new))
            .unwrap_err()
            .to_string()
    };
    let message = refused(&["s", "{roots}:{roots}"], &[], None);
    assert!(message.contains("{roots} twice"), "{message}");
    let message = refused(&["{roots}", "x"], &[], None);
    assert!(
        message.contains("use {root} for the first root"),
        "{message}"
    );
    let message = refused(&["{roots:-d}"], &[], None);
    assert!(message.contains("cannot be {roots}"), "{message}");
    let message = refused(&["s"], &["NOEQUALS"], None);
    assert!(message.contains("is not NAME=TEMPLATE"), "{message}");
    let message = refused(&["s"], &["=value"], None);
    assert!(message.contains("is not NAME=TEMPLATE"), "{message}");
    let message = refused(&["s"], &[], Some("{roots}"));
    assert!(message.contains("--cwd \"{roots}\""), "{message}");
}
