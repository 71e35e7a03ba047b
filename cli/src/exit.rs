//! rootsctl's exit statuses. They are part of its interface: scripts test them.

/// Success.
pub const OK: u8 = 0;
/// The daemon refused the operation, or rootsctl refused the input before asking (a missing
/// path, a URI of another scheme, …). Nothing was changed.
pub const REFUSED: u8 = 1;
/// Usage error: unknown flag, missing argument, invalid workspace name.
pub const USAGE: u8 = 2;
/// The daemon could not be reached (not running with autostart off, could not be started, or
/// went away).
pub const UNREACHABLE: u8 = 3;
/// `--wait` timed out: the change was made, but some sessions had not fetched it.
pub const WAIT_TIMEOUT: u8 = 4;
