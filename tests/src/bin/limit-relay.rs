//! `limit-relay COMMAND ARGS…`: the limit for `rootsctl proxy`'s relay in the benchmark.
//!
//! It sits exactly where the proxy sits (the host's stdio on one side, a spawned server's pipes
//! on the other) and does nothing but copy bytes both ways in one poll() loop
//! ([`rootsd_tests::limit_relay`]): no parsing, no lines, no runtime, no daemon. Whatever the
//! proxy costs beyond this program is the proxy's own work. It must stay that small: a cleverer
//! relay here would flatter nobody and mislead everyone.

fn main() {
    rootsd_tests::limit_relay::run("limit-relay", "COMMAND [ARGS...]", 0, |bytes, sides| {
        sides.to_host(bytes)
    });
}
