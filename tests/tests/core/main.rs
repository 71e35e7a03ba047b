//! End-to-end tests of rootsd's core: roots in and out through `rootsctl`, roots whose directory
//! is gone, persistence across restarts and crashes, the history of changes (`rootsctl log`), one
//! daemon per state directory, the socket's safety rules, the control
//! protocol's handling of bad input, autostart, and rootsctl's exit statuses.
//!
//! Every test drives the real binaries (build them first: `cargo build --workspace --bins`).

mod support;

mod answers;
mod bounds;
mod cli;
mod crash;
mod daemon;
mod gone;
mod growth;
mod history;
mod input;
mod limits;
mod newcomer;
mod protocol;
mod recovery;
mod roots;
mod soak;
mod store;
mod trust;
