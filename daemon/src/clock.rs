//! The wall clock, as the daemon records it: seconds for `status` and `sessions`, milliseconds
//! for the history. A clock before 1970 reads as 0 rather than failing anything.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in seconds since the Unix epoch.
pub fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Now, in milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
