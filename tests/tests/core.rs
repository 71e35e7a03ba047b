//! End-to-end tests of rootsd's core: roots in and out through `rootsctl`, roots whose directory
//! is gone, persistence across restarts and crashes, the history of changes (`rootsctl log`), one
//! daemon per state directory, the socket's safety rules, the control
//! protocol's handling of bad input, autostart, and rootsctl's exit statuses.
//!
//! Every test drives the real binaries (build them first: `cargo build --workspace --bins`).

#[path = "core/support.rs"]
mod support;

#[path = "core/bounds.rs"]
mod bounds;
#[path = "core/cli.rs"]
mod cli;
#[path = "core/crash.rs"]
mod crash;
#[path = "core/daemon.rs"]
mod daemon;
#[path = "core/gone.rs"]
mod gone;
#[path = "core/growth.rs"]
mod growth;
#[path = "core/history.rs"]
mod history;
#[path = "core/input.rs"]
mod input;
#[path = "core/limits.rs"]
mod limits;
#[path = "core/newcomer.rs"]
mod newcomer;
#[path = "core/protocol.rs"]
mod protocol;
#[path = "core/recovery.rs"]
mod recovery;
#[path = "core/roots.rs"]
mod roots;
#[path = "core/soak.rs"]
mod soak;
#[path = "core/store.rs"]
mod store;
#[path = "core/trust.rs"]
mod trust;
