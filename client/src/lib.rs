//! rootsd's client library: finding the daemon's socket, trusting and reaching it, starting it
//! when it is not running, and the control connection, for rootsctl's commands and its proxy.
//!
//! - [`client`]: a connection to the daemon (hello, calls, pushed notifications).
//! - [`autostart`]: finding the socket and starting rootsd when it is not running.
//! - [`config`]: the user's configuration file (`~/.config/rootsd/rootsd.conf`).
//! - [`locate`]: which socket to use, whatever the environment.
//! - [`reach`]: which directory or socket mode keeps this user from the socket, and the fix.
//! - [`presence`]: whether each root's directory is there (missing, not a directory, unreadable).
//! - [`resolve`]: turning the user's paths and URIs into roots, relative to their cwd.
//! - [`errors`]: the errors of all of these, which rootsctl maps to its exit statuses.
//!
//! It never opens the database: everything goes through the daemon's socket.

pub mod autostart;
pub mod client;
pub mod config;
pub mod errors;
pub mod locate;
pub mod presence;
pub mod reach;
pub mod resolve;
