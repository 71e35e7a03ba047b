//! End-to-end tests of `rootsctl proxy`: a stdio MCP server behind rootsd, driven by a test that
//! plays the host. Interop tests run real servers from npm, the reference filesystem server and
//! server-everything (node, installed with `npm ci --prefix tests/interop`); the others run a
//! scripted fake server (tests/fixtures/fake_mcp_server.py, Python 3) that logs every line it
//! receives, byte for byte.
//!
//! Every test drives the real binaries (build them first: `cargo build --workspace --bins`).

#[path = "proxy/host.rs"]
mod host;
#[path = "proxy/messages.rs"]
mod messages;
#[path = "proxy/support.rs"]
mod support;

#[path = "proxy/backpressure.rs"]
mod backpressure;
#[path = "proxy/bare_env.rs"]
mod bare_env;
#[path = "proxy/batch.rs"]
mod batch;
#[path = "proxy/eras.rs"]
mod eras;
#[path = "proxy/everything.rs"]
mod everything;
#[path = "proxy/fake.rs"]
mod fake;
#[path = "proxy/gone.rs"]
mod gone;
#[path = "proxy/host_clis.rs"]
mod host_clis;
#[path = "proxy/host_roots.rs"]
mod host_roots;
#[path = "proxy/hosts.rs"]
mod hosts;
#[path = "proxy/interop.rs"]
mod interop;
#[path = "proxy/lifecycle.rs"]
mod lifecycle;
#[path = "proxy/lines.rs"]
mod lines;
#[path = "proxy/map.rs"]
mod map;
#[path = "proxy/modern.rs"]
mod modern;
#[path = "proxy/passthrough.rs"]
mod passthrough;
#[path = "proxy/restart.rs"]
mod restart;
#[path = "proxy/sessions.rs"]
mod sessions;
#[path = "proxy/workspace_args.rs"]
mod workspace_args;
