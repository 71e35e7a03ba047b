//! rootsctl: the command-line client of rootsd.
//!
//! - [`args`]: the command line.
//! - [`client`]: a connection to the daemon (hello, calls, pushed notifications).
//! - [`autostart`]: finding the socket and starting rootsd when it is not running.
//! - [`resolve`]: turning the user's paths and URIs into roots, relative to their cwd.
//! - [`commands`]: one function per subcommand.
//! - [`doctor`]: `rootsctl doctor`, which checks the setup and explains each fix.
//! - [`output`]: tables, JSON, and quiet exits on a closed pipe.
//! - [`proxy`]: `rootsctl proxy`, the MCP relay that gives any stdio server rootsd's roots.
//! - [`exit`]: the documented exit statuses.
//!
//! rootsctl never opens the database: everything goes through the daemon's socket.

pub mod args;
pub mod autostart;
pub mod client;
pub mod commands;
pub mod doctor;
pub mod exit;
pub mod output;
pub mod proxy;
pub mod resolve;

/// A usage error found after parsing (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// `--wait` ran out of time; the message lists the sessions that lag (exit status 4).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WaitTimeout(pub String);

/// The proxied server exited: pass its status on.
#[derive(Debug, thiserror::Error)]
#[error("the server exited with status {0}")]
pub struct ServerExit(pub u8);
