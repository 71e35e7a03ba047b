//! The arguments of `rootsctl proxy`, parsed by clap in the binary: `Command::Proxy` holds
//! [`ProxyArgs`] in rootsctl's command line.

use clap::Args;
use rootsd_proto::WorkspaceName;

#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// Workspace to act on
    #[arg(long, short = 'w', default_value = "default", value_name = "NAME")]
    pub workspace: WorkspaceName,
    /// Label shown by `rootsctl sessions` [default: the command's name]
    #[arg(long, short = 'n', value_name = "LABEL")]
    pub name: Option<String>,
    /// Declare roots to the server without listChanged: it is never notified of changes
    #[arg(long)]
    pub no_list_changed: bool,
    /// Show the server roots under HOST_DIR at SERVER_DIR, as a container or VM mounts them
    /// (repeatable; the longest HOST_DIR containing a root wins). Roots outside every HOST_DIR
    /// are withheld from the server, and `rootsctl sessions` counts them. A relative HOST_DIR is
    /// taken from the current directory; SERVER_DIR is the server's path and need not exist here
    #[arg(long = "map", value_name = "HOST_DIR=SERVER_DIR")]
    pub map: Vec<std::ffi::OsString>,
    /// What the server sees of the host's own roots (an editor's open folders): replace (the
    /// workspace's instead), merge (both; the host is asked for its roots, and again when it says
    /// they changed), or publish (the host's join the workspace, for every session, while this
    /// one lasts)
    #[arg(long, value_enum, value_name = "MODE", default_value_t = HostRootsArg::Replace)]
    pub host_roots: HostRootsArg,
    /// Set a variable for the server (repeatable): {root} is the first root's path, {roots}
    /// every path joined with ':' (after --map). A change that alters it restarts the server
    #[arg(long = "env", value_name = "NAME=TEMPLATE")]
    pub env: Vec<std::ffi::OsString>,
    /// Start the server in this directory, such as {root} (the first root's path, after --map).
    /// A change that alters it restarts the server
    #[arg(long, value_name = "TEMPLATE")]
    pub cwd: Option<std::ffi::OsString>,
    /// The MCP server to run, after `--`. In its arguments, {roots} is one argument per root,
    /// {roots:FLAG} is FLAG and a root's path per root, an argument containing {roots} (such as
    /// --allow={roots}) is repeated per root, {root} is the first root's path, and {{ }} are
    /// literal braces; the paths are the roots the server is shown (after --map). A change that
    /// alters the command line restarts the server without the host noticing. The `--` may be
    /// left out (hosts such as Gemini CLI drop it): the first argument that is not an option
    /// starts the command, and everything after it is the server's
    #[arg(
        required = true,
        trailing_var_arg = true,
        num_args = 1..,
        value_name = "COMMAND"
    )]
    pub command: Vec<std::ffi::OsString>,
}

/// `rootsctl proxy --host-roots MODE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HostRootsArg {
    /// The server sees the workspace's roots only
    Replace,
    /// The server sees the workspace's roots and the host's
    Merge,
    /// The host's roots join the workspace while the session lasts
    Publish,
}

impl From<HostRootsArg> for rootsd_proto::host_roots::HostRootsMode {
    fn from(arg: HostRootsArg) -> Self {
        match arg {
            HostRootsArg::Replace => Self::Replace,
            HostRootsArg::Merge => Self::Merge,
            HostRootsArg::Publish => Self::Publish,
        }
    }
}
