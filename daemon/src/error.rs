//! Errors the daemon reports to a client, each mapped to a wire error code.

use rootsd_proto::RootError;
use rootsd_proto::wire::{ErrorObject, code};

use crate::store::StoreError;

/// A request that failed; becomes a JSON-RPC error response and never closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    pub code: i64,
    pub message: String,
}

impl RequestError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn into_object(self) -> ErrorObject {
        ErrorObject::new(self.code, self.message)
    }
}

impl From<RootError> for RequestError {
    fn from(err: RootError) -> Self {
        Self::new(code::INVALID_ROOT, err.to_string())
    }
}

impl From<StoreError> for RequestError {
    fn from(err: StoreError) -> Self {
        tracing::error!(error = %err, "store failure; the change was not applied");
        Self::new(
            code::STORAGE,
            format!("{err}; nothing was changed, check the daemon's log and disk"),
        )
    }
}
