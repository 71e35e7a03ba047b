//! The errors of `rootsctl hosts` that decide its exit status: rootsctl's `errors::exit_status`
//! maps each of them, and anything else is a refusal (exit status 1).

/// A usage error found after parsing (exit status 2, like rootsctl's own).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// `rootsctl hosts wrap|unwrap` left files or servers as they were; each is named above
/// (exit status 1).
#[derive(Debug, thiserror::Error)]
#[error("{0} file(s) or server(s) were left as they were; the messages above say why")]
pub struct HostsRefused(pub usize);
