//! Workspace names: the named sets that roots live in.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The workspace used when none is named.
pub const DEFAULT_WORKSPACE: &str = "default";

/// The longest workspace name accepted, in bytes.
pub const MAX_WORKSPACE_NAME_LEN: usize = 64;

/// A validated workspace name: 1 to 64 ASCII letters, digits, `.`, `_` or `-`, not starting with
/// `.` or `-`.
///
/// Names are restricted so that they are safe in store keys, file names, unit instance names and
/// shell completions without any quoting.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct WorkspaceName(String);

/// Why a string is not a workspace name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceNameError {
    #[error("workspace name is empty: name a workspace such as \"default\"")]
    Empty,
    #[error(
        "workspace name {0:?} is longer than {MAX_WORKSPACE_NAME_LEN} bytes: choose a shorter name"
    )]
    TooLong(String),
    #[error(
        "workspace name {0:?} may only contain ASCII letters, digits, '.', '_' and '-', and may not start with '.' or '-'"
    )]
    InvalidCharacters(String),
}

impl WorkspaceName {
    /// Checks `name` and wraps it.
    pub fn new(name: impl Into<String>) -> Result<Self, WorkspaceNameError> {
        let name = name.into();
        if name.is_empty() {
            return Err(WorkspaceNameError::Empty);
        }
        if name.len() > MAX_WORKSPACE_NAME_LEN {
            return Err(WorkspaceNameError::TooLong(name));
        }
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if !name.chars().all(allowed) || name.starts_with(['.', '-']) {
            return Err(WorkspaceNameError::InvalidCharacters(name));
        }
        Ok(Self(name))
    }

    /// The `default` workspace.
    pub fn default_workspace() -> Self {
        Self(DEFAULT_WORKSPACE.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for WorkspaceName {
    fn default() -> Self {
        Self::default_workspace()
    }
}

impl fmt::Display for WorkspaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for WorkspaceName {
    type Error = WorkspaceNameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<WorkspaceName> for String {
    fn from(value: WorkspaceName) -> Self {
        value.0
    }
}

impl std::str::FromStr for WorkspaceName {
    type Err = WorkspaceNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        for name in ["default", "work", "client-a", "v1.2_x", "A"] {
            assert_eq!(WorkspaceName::new(name).unwrap().as_str(), name);
        }
    }

    #[test]
    fn refuses_names_that_would_need_quoting() {
        for name in [
            "",
            "a b",
            "../x",
            ".hidden",
            "-flag",
            "a/b",
            "é",
            &"x".repeat(65),
        ] {
            assert!(WorkspaceName::new(name).is_err(), "{name:?} was accepted");
        }
    }

    #[test]
    fn deserialising_validates() {
        assert!(serde_json::from_str::<WorkspaceName>("\"a b\"").is_err());
        assert_eq!(
            serde_json::from_str::<WorkspaceName>("\"ok\"")
                .unwrap()
                .as_str(),
            "ok"
        );
    }
}
