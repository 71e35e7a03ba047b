//! End-to-end tests of `rootsctl proxy`: a stdio MCP server behind rootsd, driven by a test that
//! plays the host. Interop tests run real servers from npm, the reference filesystem server,
//! server-everything and mcp-ripgrep (node, installed with `npm ci --prefix tests/interop`); the
//! others run a scripted fake server (tests/fixtures/fake_mcp_server.py, Python 3) that logs
//! every line it receives, byte for byte.
//!
//! Every test drives the real binaries (build them first: `cargo build --workspace --bins`).

mod host;
mod messages;
mod support;

mod backpressure;
mod bare_env;
mod batch;
mod eras;
mod everything;
mod fake;
mod gone;
mod host_clis;
mod host_roots;
mod host_saves;
mod hosts;
mod hosts_writes;
mod hosts_yaml;
mod interop;
mod lifecycle;
mod lines;
mod map;
mod modern;
mod orphans;
mod passthrough;
mod recipes;
mod restart;
mod sessions;
mod streaming;
mod workspace_args;
