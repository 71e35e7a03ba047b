//! rootsctl: the command-line client of rootsd.
//!
//! - [`args`]: the command line.
//! - [`client`]: a connection to the daemon (hello, calls, pushed notifications).
//! - [`autostart`]: finding the socket and starting rootsd when it is not running.
//! - [`config`]: the user's configuration file (`~/.config/rootsd/rootsd.conf`).
//! - [`locate`]: which socket to use, whatever the environment.
//! - [`resolve`]: turning the user's paths and URIs into roots, relative to their cwd.
//! - [`commands`]: one function per subcommand.
//! - [`wait`]: what `add|remove --wait` says about the sessions it waited for.
//! - [`log`]: `rootsctl log`, the history of changes, page by page.
//! - [`doctor`]: `rootsctl doctor`, which checks the setup and explains each fix.
//! - [`output`]: tables, JSON, and quiet exits on a closed pipe.
//! - [`presence`]: whether each root's directory is there (missing, not a directory, unreadable).
//! - [`reach`]: which directory or socket mode keeps this user from the socket, and the fix.
//! - [`proxy`]: `rootsctl proxy`, the MCP relay that gives any stdio server rootsd's roots.
//! - `rootsctl hosts`, which lists, wraps and unwraps the apps' MCP servers, is the crate
//!   `rootsd-hosts`: [`args::is_proxy`] is what it asks of rootsctl's own parser.
//! - [`errors`]: every error rootsctl reports, and the one map from an error to its documented
//!   exit status.
//!
//! rootsctl never opens the database: everything goes through the daemon's socket.

pub mod args;
pub mod autostart;
mod client;
pub mod commands;
mod config;
pub mod doctor;
pub mod errors;
mod locate;
pub mod log;
pub mod output;
mod presence;
pub mod proxy;
mod reach;
mod resolve;
mod wait;
