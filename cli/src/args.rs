//! The command line, as clap parses it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use rootsd_proto::WorkspaceName;

const ENVIRONMENT: &str = "\
Environment:
  ROOTSD_SOCKET         socket path (same as --socket)
  ROOTSD_NO_AUTOSTART   set to 1 to never start rootsd (same as --no-autostart)
  ROOTSD_BIN            the rootsd binary to autostart (default: next to rootsctl, else PATH)
  ROOTSD_STATE_DIR      state directory an autostarted rootsd uses
  ROOTSD_TIMEOUT        seconds to wait for rootsd to accept and to answer (same as --daemon-timeout)";

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
    /// Socket path [default: $XDG_RUNTIME_DIR/rootsd/rootsd.sock, else ${TMPDIR:-/tmp}/rootsd-$UID/rootsd.sock]
    #[arg(long, global = true, env = "ROOTSD_SOCKET", value_name = "PATH")]
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
    /// List the roots of a workspace (--json prints MCP's ListRootsResult)
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
    /// Run a stdio MCP server behind rootsd: `rootsctl proxy [OPTIONS] -- COMMAND ARGS...`
    ///
    /// Put this in front of the server command in any host's configuration. The server is told
    /// the workspace's roots and hears about every change; everything else passes untouched.
    Proxy(ProxyArgs),
    /// Check the socket, the daemon, the state directory and the systemd units, and explain
    /// how to fix each problem
    ///
    /// Exits 0 when all is well and 1 when any check fails. It only looks: it never starts
    /// rootsd, changes a permission, or opens the database.
    Doctor(JsonArg),
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
    pub paths: Vec<String>,
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

#[derive(Debug, Args)]
pub struct ProxyArgs {
    #[command(flatten)]
    pub workspace: WorkspaceArg,
    /// Label shown by `rootsctl sessions` [default: the command's name]
    #[arg(long, short = 'n', value_name = "LABEL")]
    pub name: Option<String>,
    /// Declare roots to the server without listChanged: it is never notified of changes
    #[arg(long)]
    pub no_list_changed: bool,
    /// The MCP server to run, after `--`
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// Roots to remove: paths, file:// URIs or display names
    #[arg(required = true, value_name = "PATH|URI|NAME")]
    pub targets: Vec<String>,
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

#[cfg(test)]
mod tests {
    use super::*;
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
}
