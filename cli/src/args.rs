//! The command line, as clap parses it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use clap::builder::TypedValueParser as _;
use clap::parser::ValueSource;
use clap::{Args, Parser, Subcommand};
use rootsd_proto::WorkspaceName;

use crate::errors::UsageError;

const ENVIRONMENT: &str = "\
Environment:
  ROOTSD_SOCKET         socket path (same as --socket)
  ROOTSD_NO_AUTOSTART   set to 1 to never start rootsd (same as --no-autostart)
  ROOTSD_BIN            the rootsd binary to autostart (default: next to rootsctl, else PATH)
  ROOTSD_STATE_DIR      state directory an autostarted rootsd uses
  ROOTSD_TIMEOUT        seconds to wait for rootsd to accept and to answer (same as --daemon-timeout)
Set but empty, ROOTSD_SOCKET, ROOTSD_STATE_DIR and ROOTSD_BIN are refused: unset them instead.

Files:
  ~/.config/rootsd/rootsd.conf   `socket = PATH` and `autostart = yes|no`, for every rootsctl of
                                 yours, proxies started by hosts with a bare environment included";

/// The exit statuses, from the one table that decides them, then the environment.
fn after_help() -> String {
    format!("{}\n\n{ENVIRONMENT}", crate::errors::exit_status_help())
}

/// Control rootsd, the keeper of your MCP workspace roots.
///
/// Roots are the directories you put in scope for MCP servers. They are advisory: a server is
/// told where to work, but rootsd does not enforce it.
#[derive(Debug, Parser)]
#[command(name = "rootsctl", version, after_help = after_help())]
pub struct Cli {
    /// Socket path [default: the one ~/.config/rootsd/rootsd.conf names, else the running
    /// rootsd's (recorded in its state directory), else $XDG_RUNTIME_DIR/rootsd/rootsd.sock, else
    /// rootsd.sock in the state directory]
    // Parsed without clap's own check for an empty value, whose message would not say where the
    // empty value came from: `refuse_empty_settings` names the flag or the variable.
    #[arg(
        long,
        global = true,
        env = "ROOTSD_SOCKET",
        value_name = "PATH",
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from)
    )]
    pub socket: Option<PathBuf>,
    /// Fail with exit status 3 instead of starting rootsd when it is not running
    #[arg(
        long,
        global = true,
        env = "ROOTSD_NO_AUTOSTART",
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub no_autostart: bool,
    /// How many seconds to wait for rootsd to accept the connection, and then for each answer
    /// (a `--wait` gets its own timeout on top); past it, rootsctl exits with status 3
    #[arg(
        long,
        global = true,
        env = "ROOTSD_TIMEOUT",
        value_name = "SECS",
        default_value = "10",
        value_parser = parse_timeout
    )]
    pub daemon_timeout: std::time::Duration,
    #[command(subcommand)]
    pub command: Command,
}

/// A positive number of seconds, fractions allowed.
fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    text.parse::<f64>()
        .ok()
        .filter(|secs| secs.is_finite() && *secs > 0.0 && *secs <= 86_400.0)
        .map(std::time::Duration::from_secs_f64)
        .ok_or_else(|| format!("{text:?} is not a number of seconds between 0 and 86400"))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add directories (paths or file:// URIs) as roots; adding an existing root is a no-op
    Add(AddArgs),
    /// Remove roots, named by path, file:// URI or name; if any is unknown, nothing is removed
    #[command(visible_alias = "rm")]
    Remove(RemoveArgs),
    /// List roots, marking those whose directory is gone (--json prints MCP's ListRootsResult)
    ///
    /// Each root's directory is looked at as you would reach it: missing (deleted, renamed, or
    /// not mounted), not a directory, unreadable (you may not list or enter it), or unknown (its
    /// filesystem did not answer within 2 seconds). Such roots stay in the workspace, and
    /// servers are still given them: they check for themselves. `--json` prints exactly MCP's
    /// ListRootsResult; `--long --json` adds a `gone` object to each root that is gone.
    #[command(visible_alias = "ls")]
    List(ListArgs),
    /// List workspaces with their root and session counts
    Workspaces(JsonArg),
    /// Show the daemon's version, pid, uptime, socket, state and counts
    Status(JsonArg),
    /// Print a line for every change until interrupted
    Watch(WatchArgs),
    /// List the live MCP sessions (rootsctl proxy instances)
    Sessions(JsonArg),
    /// Show who changed the roots, and when: every change, newest first
    ///
    /// Each change is shown with its time (UTC), store revision, workspace, who made it and what
    /// it added (+), renamed (~) or removed (-). Who: the user and the process (name[pid]), as the
    /// kernel described the connection that asked for the change. rootsd keeps the last 1,000
    /// changes, across restarts.
    Log(LogArgs),
    /// Run a stdio MCP server behind rootsd: `rootsctl proxy [OPTIONS] [--] COMMAND ARGS...`
    ///
    /// Put this in front of the server command in any host's configuration. The server is told
    /// the workspace's roots and hears about every change; everything else passes untouched.
    Proxy(rootsd_proxy::ProxyArgs),
    /// Check the socket, the daemon, the state directory, the systemd units and the roots, and
    /// explain how to fix each problem
    ///
    /// Exits 0 when all is well and 1 when any check fails; notes (a root whose directory is
    /// gone, or a rootsd not started yet that rootsctl will start on demand) do not fail. It only
    /// looks: it never starts rootsd, changes a permission, or opens the database.
    Doctor(JsonArg),
    /// List the MCP servers of the apps on this machine (hosts), and put them behind rootsd
    ///
    /// Without a subcommand, lists each host's file, its servers, whether each is stdio and
    /// whether it already runs behind rootsd. `wrap` and `unwrap` edit the files in place, with a
    /// backup, touching only the wrapped entries' command and arguments.
    Hosts(rootsd_hosts::HostsArgs),
    /// Print a shell completion script
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct WorkspaceArg {
    /// Workspace to act on
    #[arg(long, short = 'w', default_value = "default", value_name = "NAME")]
    pub workspace: WorkspaceName,
}

#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// Directories to add: paths (relative to the current directory) or file:// URIs
    #[arg(required = true, value_name = "PATH|URI")]
    pub paths: Vec<OsString>,
    /// Display name [default: the directory's base name]; only with a single PATH
    #[arg(long, short = 'n')]
    pub name: Option<String>,
    /// Accept a path that does not exist yet
    #[arg(long)]
    pub allow_missing: bool,
    #[command(flatten)]
    pub workspace: WorkspaceArg,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub json: JsonArg,
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// Return only once every notified session of the workspace has fetched the new list
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up after this many seconds (exit status 4)
    #[arg(long, value_name = "SECS", default_value_t = 10.0, requires = "wait")]
    pub timeout: f64,
}

/// The proxy's arguments when `rootsctl ARGS` is a `rootsctl proxy` that rootsctl's parser
/// accepts: what a host's entry must run to be behind rootsd. Read without the environment,
/// which is the host's and not this shell's.
pub fn proxy_args(args: &[String]) -> Option<rootsd_proxy::ProxyArgs> {
    use clap::{CommandFactory as _, FromArgMatches as _};
    thread_local! {
        // Building the parser costs about as much as reading a large file's entries: it is built
        // once per thread, not once per entry.
        static PARSER: std::cell::RefCell<clap::Command> = std::cell::RefCell::new(
            Cli::command().mut_args(|arg| arg.env(None::<&'static str>)),
        );
    }
    let words = std::iter::once("rootsctl").chain(args.iter().map(String::as_str));
    PARSER
        .with_borrow_mut(|parser| parser.try_get_matches_from_mut(words))
        .ok()
        .and_then(|matches| Cli::from_arg_matches(&matches).ok())
        .and_then(|cli| match cli.command {
            Command::Proxy(proxy) => Some(proxy),
            _ => None,
        })
}

/// Whether `rootsctl ARGS` runs a server behind rootsd: a `rootsctl proxy` that rootsctl's parser
/// accepts, whose templates and `--map`s the proxy accepts too, checked as the proxy checks them
/// before it starts anything. `rootsctl hosts` asks this of every entry (it cannot parse
/// rootsctl's command line itself), so an entry the proxy would refuse is never called wrapped.
pub fn is_proxy(args: &[String]) -> bool {
    proxy_args(args).is_some_and(|proxy| {
        // A relative HOST_DIR is taken from the host's directory, unknown here: any will do to
        // check the form.
        let maps =
            proxy.map.is_empty() || crate::resolve::path_maps(&proxy.map, Path::new("/")).is_ok();
        maps && rootsd_relay::template::LaunchTemplate::parse(
            &proxy.command,
            &proxy.env,
            proxy.cwd.as_deref(),
        )
        .is_ok()
    })
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// Roots to remove: paths, file:// URIs or display names
    #[arg(required = true, value_name = "PATH|URI|NAME")]
    pub targets: Vec<OsString>,
    #[command(flatten)]
    pub workspace: WorkspaceArg,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub json: JsonArg,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Workspace to list
    #[arg(long, short = 'w', value_name = "NAME", conflicts_with = "all")]
    pub workspace: Option<WorkspaceName>,
    /// List every workspace
    #[arg(long)]
    pub all: bool,
    /// Say more about each root: with --json, each root gains `origin` (who holds it) and, when its
    /// directory is missing, not a directory, unreadable or not answering, `gone`; the table
    /// always shows ORIGIN (without --long, only when a session publishes a root)
    #[arg(long, short = 'l')]
    pub long: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only changes of this workspace [default: every workspace]
    #[arg(long, short = 'w', value_name = "NAME")]
    pub workspace: Option<WorkspaceName>,
    /// Show at most N changes, the newest
    #[arg(
        long = "max-count",
        short = 'n',
        value_name = "N",
        default_value_t = 20,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub count: u32,
    #[command(flatten)]
    pub json: JsonArg,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Only this workspace [default: every workspace]
    #[arg(long, short = 'w', value_name = "NAME")]
    pub workspace: Option<WorkspaceName>,
    #[command(flatten)]
    pub json: JsonArg,
}

/// rootsctl's variables that name a path, and what leaving each unset means.
const PATH_VARIABLES: [(&str, &str); 3] = [
    (
        "ROOTSD_SOCKET",
        "to use the running rootsd's socket, or set it to a socket path",
    ),
    (
        "ROOTSD_STATE_DIR",
        "to use the default state directory, or set it to a directory",
    ),
    (
        "ROOTSD_BIN",
        "to start the rootsd next to rootsctl or on PATH, or set it to a rootsd binary",
    ),
];

/// Refuses a path setting that is present but empty. Ignoring it, as an unset variable is
/// ignored, would quietly reach another daemon than the one meant (`ROOTSD_SOCKET=$UNSET_VAR`);
/// the message names the flag or the variable. `socket` is `--socket` as parsed and
/// `socket_source` where clap found it; `var` reads the environment.
pub fn refuse_empty_settings(
    socket: Option<&Path>,
    socket_source: Option<ValueSource>,
    var: impl Fn(&str) -> Option<OsString>,
) -> Result<(), UsageError> {
    if socket.is_some_and(|s| s.as_os_str().is_empty())
        && socket_source == Some(ValueSource::CommandLine)
    {
        return Err(UsageError(
            "--socket is empty: give the socket's path, or leave --socket out to use the running rootsd's"
                .to_owned(),
        ));
    }
    for (name, unset_means) in PATH_VARIABLES {
        // A command-line --socket wins over ROOTSD_SOCKET, which then does not matter.
        let overridden = name == "ROOTSD_SOCKET" && socket_source == Some(ValueSource::CommandLine);
        if !overridden && var(name).is_some_and(|v| v.is_empty()) {
            return Err(UsageError(format!(
                "{name} is set but empty: unset it (`unset {name}`) {unset_means}"
            )));
        }
    }
    Ok(())
}

/// Refuses an empty or blank path argument, naming its position: an empty argument (often an
/// unset shell variable, `rootsctl add "$DIR"`) would otherwise mean the current directory.
/// A directory whose name really is blank can still be named as `./NAME`.
pub fn refuse_blank_arguments(what: &str, inputs: &[OsString]) -> Result<(), UsageError> {
    for (position, input) in inputs.iter().enumerate() {
        let position = position + 1;
        if input.is_empty() {
            return Err(UsageError(format!(
                "{what} argument {position} is empty: give a path (`.` for the current directory)"
            )));
        }
        if is_blank(input) {
            return Err(UsageError(format!(
                "{what} argument {position} is only whitespace ({input:?}): to name a directory called that, write it as ./{input:?}"
            )));
        }
    }
    Ok(())
}

fn is_blank(input: &OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    input.as_bytes().iter().all(u8::is_ascii_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `gemini mcp add NAME rootsctl proxy -- SERVER` stores the entry without its `--`.
    #[test]
    fn the_proxy_takes_its_server_with_or_without_dashes_and_refuses_unknown_options() {
        use clap::Parser as _;
        let command = |words: &[&str]| -> Result<Vec<String>, String> {
            let cli = Cli::try_parse_from(words).map_err(|e| e.to_string())?;
            let Command::Proxy(proxy) = cli.command else {
                return Err("not proxy".to_owned());
            };
            Ok(proxy
                .command
                .iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect())
        };
        for (words, expect) in [
            (&["r", "proxy", "--", "node", "-y"][..], &["node", "-y"][..]),
            (
                &["r", "proxy", "node", "x.js", "--name", "n"],
                &["node", "x.js", "--name", "n"],
            ),
            (
                &["r", "proxy", "-n", "n", "--host-roots", "merge", "node"],
                &["node"],
            ),
            (&["r", "proxy", "node", "--", "x"], &["node", "--", "x"]),
        ] {
            let expect: Vec<String> = expect.iter().map(|w| w.to_string()).collect();
            assert_eq!(command(words), Ok(expect), "{words:?}");
        }
        for words in [&["r", "proxy"][..], &["r", "proxy", "--bogus", "node"]] {
            assert!(command(words).is_err(), "{words:?}");
        }
        assert!(proxy_args(&["proxy".into(), "node".into()]).is_some());
        assert!(proxy_args(&["proxy".into(), "--help".into()]).is_none());
    }
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn invalid_workspace_names_are_usage_errors() {
        let err = Cli::try_parse_from(["rootsctl", "list", "--workspace", "a b"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("may only contain"), "{err}");
    }

    #[test]
    fn blank_arguments_are_refused_by_position() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(refuse_blank_arguments("PATH|URI", &args(&[".", "a b", "./ "])).is_ok());
        let err = refuse_blank_arguments("PATH|URI", &args(&["a", ""])).unwrap_err();
        assert_eq!(
            err.0,
            "PATH|URI argument 2 is empty: give a path (`.` for the current directory)"
        );
        let err = refuse_blank_arguments("PATH|URI|NAME", &args(&[" \t"])).unwrap_err();
        assert!(
            err.0
                .starts_with("PATH|URI|NAME argument 1 is only whitespace (\" \\t\")"),
            "{}",
            err.0
        );
    }

    #[test]
    fn an_empty_path_setting_is_refused_naming_where_it_came_from() {
        let env = |empty: &'static str| move |name: &str| (name == empty).then(OsString::new);
        let none = |_: &str| None;
        assert!(refuse_empty_settings(None, None, none).is_ok());
        for name in ["ROOTSD_SOCKET", "ROOTSD_STATE_DIR", "ROOTSD_BIN"] {
            let err = refuse_empty_settings(None, None, env(name)).unwrap_err();
            assert!(
                err.0
                    .starts_with(&format!("{name} is set but empty: unset it")),
                "{}",
                err.0
            );
        }
        // clap hands an empty ROOTSD_SOCKET over as the --socket value.
        let empty = Path::new("");
        let err = refuse_empty_settings(
            Some(empty),
            Some(ValueSource::EnvVariable),
            env("ROOTSD_SOCKET"),
        )
        .unwrap_err();
        assert!(
            err.0.starts_with("ROOTSD_SOCKET is set but empty"),
            "{}",
            err.0
        );
        let err =
            refuse_empty_settings(Some(empty), Some(ValueSource::CommandLine), none).unwrap_err();
        assert!(err.0.starts_with("--socket is empty"), "{}", err.0);
        // An explicit --socket makes ROOTSD_SOCKET irrelevant.
        let given = Path::new("/s.sock");
        assert!(
            refuse_empty_settings(
                Some(given),
                Some(ValueSource::CommandLine),
                env("ROOTSD_SOCKET")
            )
            .is_ok()
        );
    }

    /// The README's first screen is where a newcomer starts: it must come first, and every
    /// rootsctl command it shows must be one this rootsctl takes.
    #[test]
    fn the_readme_quick_start_comes_first_and_its_commands_parse() {
        use clap::Parser as _;
        let readme = include_str!("../../README.md");
        let start = readme
            .find("\n## Quick start\n")
            .expect("README.md has a '## Quick start' section");
        let first_section = readme.find("\n## ").unwrap();
        assert_eq!(
            start, first_section,
            "the quick start is the README's first section"
        );
        assert!(
            readme[..start].lines().count() < 40,
            "the quick start begins on the first screen"
        );
        let section = &readme[start + 1..];
        let section = &section[..section.find("\n## ").unwrap_or(section.len())];
        let mut shown = 0;
        for line in section.lines() {
            let Some(command) = line.strip_prefix("rootsctl ") else {
                continue;
            };
            let command = command.split('#').next().unwrap_or_default();
            let words = std::iter::once("rootsctl").chain(command.split_whitespace());
            if let Err(err) = Cli::try_parse_from(words) {
                panic!("README's quick start shows {line:?}, which rootsctl refuses: {err}");
            }
            shown += 1;
        }
        assert!(
            shown >= 4,
            "the quick start shows add, list, sessions and doctor"
        );
        for needed in [
            "scripts/install",
            "rootsctl add",
            "\"command\"",
            "rootsctl proxy --",
        ] {
            assert!(section.contains(needed), "the quick start shows {needed}");
        }
    }
}
