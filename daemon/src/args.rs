//! rootsd's command line, as clap parses it.
//!
//! It lives in the library rather than in `main.rs` so that the packaging tool (`dist/`) renders
//! the man page from the very definition `--help` prints. It only describes arguments: resolving
//! the socket and state paths is `rootsd_proto::paths`' job.

use std::path::PathBuf;

use clap::Parser;

/// The rootsd daemon: keeps MCP workspace roots and serves them over a local socket.
///
/// Runs in the foreground and logs to stderr (RUST_LOG filters, info by default). Under systemd
/// it adopts the socket from rootsd.socket and reports readiness; otherwise it binds its own.
/// rootsctl starts it on demand when it is not running.
///
/// Signals: SIGTERM or SIGINT stop it gracefully (a second one at once); SIGHUP re-checks the
/// socket file, binds it anew if it is gone (a socket rootsd bound itself, not systemd's), and
/// never stops it.
#[derive(Debug, Parser)]
#[command(name = "rootsd", version)]
pub struct Args {
    /// Socket path [default: $XDG_RUNTIME_DIR/rootsd/rootsd.sock, else rootsd.sock in the state directory]
    #[arg(long, env = "ROOTSD_SOCKET", value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// State directory holding the database [env: ROOTSD_STATE_DIR] [default: $STATE_DIRECTORY, else $XDG_STATE_HOME/rootsd, else ~/.local/state/rootsd]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Also admit root and users in the socket file's group, not only rootsd's own user
    ///
    /// For a system-wide rootsd shared by several users (systemd/system/ in the source tree):
    /// systemd creates the socket with SocketGroup= and SocketMode=0660, so the socket's group
    /// decides who may connect, and rootsd admits peers whose group or supplementary groups
    /// include it. They all share one set of roots, which they may list and watch and attach MCP
    /// sessions to; changing them takes --admin-group. Needs the socket from systemd: a socket
    /// rootsd binds itself is 0600, which only its own user can open.
    #[arg(long)]
    pub allow_group: bool,
    /// Rebuild a damaged store, say what was done, and exit
    ///
    /// rootsd refuses to start when its database and its journal (which holds every
    /// acknowledged change) disagree in a way no crash explains, or one of them is damaged. Stop
    /// any running rootsd and run this once: it rebuilds the store from everything sound in
    /// both (every journal record whose checksum holds), says what it could not keep, keeps the
    /// replaced files beside the new ones (db.damaged-TIME, roots.journal.damaged-TIME), and
    /// exits; then start rootsd as usual. Interrupted, it can simply be run again.
    #[arg(long)]
    pub recover: bool,

    /// With --allow-group: members of GROUP (a name or a numeric id) may change roots too
    ///
    /// Members of the socket's group may list roots, watch them and attach MCP sessions, but
    /// changing roots, which every member's agents work in, takes rootsd's own user, root, or a
    /// member of this group. Without it, only rootsd's own user and root may. The group is looked
    /// up in /etc/group when rootsd starts.
    #[arg(long, value_name = "GROUP", requires = "allow_group")]
    pub admin_group: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Args::command().debug_assert();
    }
}
