//! End-to-end tests of rootsd's systemd integration, on a machine where systemd is installed but
//! need not be PID 1: the unit files pass `systemd-analyze verify` without a single warning,
//! socket activation goes through `systemd-socket-activate`, and `Type=notify` and the watchdog
//! are emulated with a datagram socket in `NOTIFY_SOCKET`. Also `rootsctl doctor`, and the
//! `--allow-group` access mode of the system-wide units.
//!
//! Every test drives the real binaries (build them first: `cargo build --workspace --bins`) and
//! systemd's tools (`apt-get install systemd`).

mod support;

mod access;
mod activation;
mod doctor;
mod members;
mod units;
