//! The proxy's line handling: generated sequences of host and server lines, daemon lists,
//! over-long lines and clock ticks driven into `Relay`, with the invariants of
//! `rootsd_relay::scenario` checked after every event.

#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use rootsd_relay::scenario::{self, Scenario};

fuzz_target!(|input: Scenario| {
    scenario::run(&input, Instant::now());
});
