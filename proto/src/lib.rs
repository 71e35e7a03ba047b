//! Everything `rootsd` and `rootsctl` must agree on, and nothing that does I/O on their behalf.
//!
//! - [`wire`]: the control protocol spoken on the local socket (newline-delimited JSON-RPC 2.0).
//! - [`history`]: the change history clients read with `log`, and who made each change.
//! - [`root`]: what a root is, and the one way to turn a path into a `file://` URI and back.
//! - [`mapping`]: `rootsctl proxy --map`, rewriting roots to the paths a server sees them under.
//! - [`session`]: an MCP session's state, and the one rule for who hears of a change.
//! - [`host_roots`]: `rootsctl proxy --host-roots`, what a session does with its host's roots.
//! - [`workspace`]: what a valid workspace name is.
//! - [`rendezvous`]: the record by which every client of a user finds the running daemon.
//! - [`paths`]: where the socket and the state directory live, as a pure function of the
//!   environment.
//! - [`modes`]: who may own the socket and its directory, and with which permissions.
//! - [`text`]: outside text shown on one line (escaped), tables and JSON lines: what rootsctl and
//!   its crates print.
//!
//! This crate must not depend on tokio's runtime or on sled: the CLI links it, and tests use it
//! without starting anything.

pub mod history;
pub mod host_roots;
pub mod mapping;
pub mod modes;
pub mod paths;
pub mod rendezvous;
pub mod root;
pub mod session;
#[cfg(feature = "testing")]
pub mod testing;
pub mod text;
pub mod wire;
pub mod workspace;

pub use root::{Root, RootError};
pub use workspace::{WorkspaceName, WorkspaceNameError};
