//! rootsd: the daemon that keeps a machine's MCP workspace roots.
//!
//! `main.rs` only wires things together; everything it wires is here so tests can start a
//! daemon in-process on a temporary socket with [`server::run`]. Only what another crate uses
//! (`main.rs`, `dist/`'s man pages, the daemon's tests and the fuzz targets) is `pub`; the rest
//! is private, so the dead-code lint sees it.
//!
//! - [`store`]: the durability stack behind one face: the stored types and the history, the
//!   journal, sled (named in one file of it), group commit, and opening, checking and recovering
//!   a state directory.
//! - `provenance`: who holds each root (by hand, sessions that publish their host's roots),
//!   and the changes sessions make.
//! - `author`: who a connection is (kernel credentials, process and user names), for the
//!   history.
//! - `users`: user names from `/etc/passwd`.
//! - [`registry`]: the in-memory state (roots, sessions) and change propagation.
//! - [`reconnect`]: the advisory record of live sessions, and after a start, the previous run's
//!   sessions `wait` expects back.
//! - [`server`]: the accept loop and shutdown drain.
//! - `connection`: one client connection: the hello gate, dispatch, pushes.
//! - `framing`: reading a connection's lines within their bounds (length, time, budget).
//! - [`envelope`]: the JSON-RPC envelope: requests read in one pass, responses with the id
//!   echoed byte for byte.
//! - `json_text`: JSON written by hand, exactly as serde writes it, for what every change
//!   writes (a journal record, a change's answer).
//! - `limits`: every bound the daemon keeps on what peers make it hold or wait for.
//! - `workspace_bounds`: what a change may make a workspace, checked on the one commit path.
//! - `session_bounds`: what one session may make the daemon hold; `sessions.list` in pages.
//! - `shares`: each user's share of the connections.
//! - [`info`]: where the daemon lives, whom it admits and in which role, shared by the two above.
//! - [`groups`]: group names and ids from `/etc/group`, for `--admin-group` and messages.
//! - [`socket`] and [`instance`]: binding or adopting the socket; one daemon per state directory.
//! - [`systemd`]: readiness, status and watchdog notifications.
//! - [`error`]: every error the daemon reports, and how a request's failure becomes a wire error.
//! - [`args`]: the command line, shared with the man-page generator in `dist/`.
//! - `clock`: the wall clock as the daemon records it.

pub mod args;
mod author;
mod clock;
mod connection;
pub mod envelope;
pub mod error;
mod framing;
pub mod groups;
pub mod info;
pub mod instance;
mod json_text;
mod limits;
mod provenance;
pub mod reconnect;
pub mod registry;
pub mod server;
mod session_bounds;
mod shares;
pub mod socket;
pub mod store;
pub mod systemd;
mod users;
mod workspace_bounds;
