//! Start-up: the store opened and checked before anything is served ([`reconcile`]), or rebuilt
//! by `rootsd --recover` ([`recovery`]).

mod opened;
mod reconcile;
mod recovery;
mod state_dir;

pub use opened::{Opened, Outcome};
pub(crate) use reconcile::{open, withdraw_sessions};
pub(crate) use recovery::recover;
