//! The arguments of `rootsctl hosts`, parsed by clap in the binary: `Command::Hosts` flattens
//! [`HostsArgs`] into rootsctl's command line.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use rootsd_proto::WorkspaceName;

#[derive(Debug, Args)]
pub struct HostsArgs {
    #[command(subcommand)]
    pub action: Option<HostsAction>,
    /// Also a project's files (its .mcp.json, .vscode/mcp.json, .cursor/mcp.json, …)
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum HostsAction {
    /// Put every stdio server of these hosts (all found, by default) behind `rootsctl proxy`
    ///
    /// Each entry's command becomes this rootsctl's absolute path and its arguments `proxy
    /// [OPTIONS] -- COMMAND ARGS...`; hosts that give their servers roots of their own (Claude
    /// Code, VS Code, Cursor, opencode) get `--host-roots merge`. Entries already behind rootsd,
    /// and HTTP or SSE entries, are left alone. Each file is backed up in
    /// ~/.local/state/rootsctl/hosts/backups first.
    Wrap(WrapArgs),
    /// Restore every server rootsctl wrapped to exactly what it was
    Unwrap(UnwrapArgs),
}

#[derive(Debug, Args)]
pub struct WrapArgs {
    /// Hosts to wrap (claude-desktop, claude-code, vscode, cursor, windsurf, zed, gemini, codex,
    /// goose, opencode, continue, cline, lmstudio) [default: every host found]
    #[arg(value_name = "HOST")]
    pub hosts: Vec<String>,
    /// Print a unified diff of each file and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// The workspace the wrapped servers get [default: the proxy's, `default`]
    #[arg(long, short = 'w', value_name = "NAME")]
    pub workspace: Option<WorkspaceName>,
    /// Also a project's files (its .mcp.json, .vscode/mcp.json, .cursor/mcp.json, …)
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct UnwrapArgs {
    /// Hosts to unwrap [default: every host rootsctl wrapped]
    #[arg(value_name = "HOST")]
    pub hosts: Vec<String>,
    /// Print a unified diff of each file and change nothing
    #[arg(long)]
    pub dry_run: bool,
}
