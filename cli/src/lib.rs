//! rootsctl: the command-line client of rootsd.
//!
//! - [`args`]: the command line.
//! - [`commands`]: one function per subcommand.
//! - [`wait`]: what `add|remove --wait` says about the sessions it waited for.
//! - [`log`]: `rootsctl log`, the history of changes, page by page.
//! - [`doctor`]: `rootsctl doctor`, which checks the setup and explains each fix.
//! - [`output`]: tables, JSON, and quiet exits on a closed pipe.
//! - [`errors`]: every error rootsctl reports, and the one map from an error to its documented
//!   exit status.
//!
//! Finding, reaching and starting the daemon, and the control connection, are the crate
//! `rootsd-client` (imported here under its modules' names). `rootsctl proxy`, the MCP relay that
//! gives any stdio server rootsd's roots, is the crate `rootsd-proxy`. `rootsctl hosts`, which lists, wraps
//! and unwraps the apps' MCP servers, is the crate `rootsd-hosts`: [`args::is_proxy`] is what it
//! asks of rootsctl's own parser.
//!
//! rootsctl never opens the database: everything goes through the daemon's socket.

pub mod args;
pub mod commands;
pub mod doctor;
pub mod errors;
pub mod log;
pub mod output;
mod wait;

use rootsd_client::{autostart, client, config, locate, presence, reach, resolve};
