//! Turning what the user typed into roots: done here, in the CLI, because only the CLI knows the
//! caller's working directory.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};

use rootsd_proto::RootError;
use rootsd_proto::mapping::{Mapping, PathMap};
use rootsd_proto::root::{self, looks_like_uri};
use rootsd_proto::wire::RemoveTarget;

use crate::errors::{ResolveError, UsageError};

/// A root argument resolved to a real absolute path and its canonical URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub path: PathBuf,
    pub uri: String,
}

/// Resolves `input` (a path, relative to `cwd`, or a `file://` URI) to a root. A path need not
/// be UTF-8: its bytes are percent-encoded in the URI.
///
/// Symlinks are followed to the real path, because servers check tool paths against the real
/// path of each root. The target must be an existing directory unless `allow_missing`, in which
/// case the longest existing ancestor is resolved and the rest appended as written.
pub fn resolve_root(
    input: &OsStr,
    cwd: &Path,
    allow_missing: bool,
) -> Result<Resolved, ResolveError> {
    let path = to_path(input, cwd)?;
    let real = match std::fs::canonicalize(&path) {
        Ok(real) => {
            if !real.is_dir() {
                return Err(ResolveError::NotDirectory {
                    input: input.to_owned(),
                    path: real,
                });
            }
            real
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            if !allow_missing {
                return Err(ResolveError::Missing {
                    input: input.to_owned(),
                });
            }
            resolve_missing(&path)
        }
        Err(error) => {
            return Err(ResolveError::Io {
                input: input.to_owned(),
                path,
                error,
            });
        }
    };
    let uri = root::uri_from_path(&real).map_err(|reason| ResolveError::Root {
        input: input.to_owned(),
        reason,
    })?;
    Ok(Resolved { path: real, uri })
}

/// What `remove` sends for one argument: the URI it could mean, and the name it could be.
///
/// A URI argument is only a URI. A path argument is resolved like `add` resolves it, without
/// requiring it to be a directory this user can reach: a root's directory may have been
/// deleted, replaced by a file, or locked away (`rootsctl list` shows such roots as gone), and
/// the root must still be removable by the path it shows. It is also offered as a name, so
/// `rootsctl remove app` removes the root named `app`.
///
/// An argument that is not UTF-8 can only be a path: root names are UTF-8, and so is every URI.
pub fn remove_target(input: &OsStr, cwd: &Path) -> Result<RemoveTarget, ResolveError> {
    let text = input.to_str();
    if let Some(uri) = text.filter(|t| looks_like_uri(t)) {
        let uri = root::canonical_uri(uri).map_err(|reason| ResolveError::Root {
            input: input.to_owned(),
            reason,
        })?;
        return Ok(RemoveTarget {
            input: input_text(input),
            uri: Some(uri),
            name: None,
        });
    }
    let uri = gone_uri(input, cwd);
    Ok(RemoveTarget {
        input: input_text(input),
        uri,
        name: text.map(str::to_owned),
    })
}

/// The URI a path argument names whatever is at the path now: resolved like `add` resolves it,
/// and if it is not a directory this user can reach (deleted, replaced by a file, locked away),
/// resolved as far as it exists, as a missing path is. This is how a root whose directory is
/// gone is still found by the path it shows, to remove or to rename it.
pub fn gone_uri(input: &OsStr, cwd: &Path) -> Option<String> {
    match resolve_root(input, cwd, true) {
        Ok(resolved) => Some(resolved.uri),
        Err(_) => to_path(input, cwd)
            .ok()
            .and_then(|path| root::uri_from_path(&resolve_missing(&path)).ok()),
    }
}

/// The `--map HOST_DIR=SERVER_DIR` arguments of a proxy.
///
/// `HOST_DIR` is resolved like a root (relative to `cwd`, then through symlinks as far as it
/// exists), because roots are stored as real paths: a map of a symlink must still match them.
/// `SERVER_DIR` is the server's, and never looked up here.
pub fn path_maps(args: &[OsString], cwd: &Path) -> Result<Mapping, UsageError> {
    let usage = |err: rootsd_proto::mapping::MapError| UsageError(err.to_string());
    let maps = args
        .iter()
        .map(|arg| {
            let map = PathMap::parse(arg, cwd).map_err(usage)?;
            let map = PathMap {
                host: resolve_missing(&map.host),
                ..map
            };
            Ok((map, arg.to_string_lossy().into_owned()))
        })
        .collect::<Result<Vec<_>, UsageError>>()?;
    Mapping::new(maps).map_err(usage)
}

/// What the daemon quotes back in its messages for an argument.
fn input_text(input: &OsStr) -> String {
    input.to_string_lossy().into_owned()
}

fn to_path(input: &OsStr, cwd: &Path) -> Result<PathBuf, ResolveError> {
    let root_err = |reason| ResolveError::Root {
        input: OsString::from(input),
        reason,
    };
    if let Some(uri) = input.to_str().filter(|t| looks_like_uri(t)) {
        return root::path_from_uri(uri).map_err(root_err);
    }
    if input.as_bytes().contains(&0) {
        return Err(root_err(RootError::NulByte {
            path: PathBuf::from(input),
        }));
    }
    Ok(cwd.join(input))
}

/// Resolves a path that may not exist: `.` and `..` are applied lexically, then the longest
/// existing ancestor (the whole path, if it exists) is resolved through symlinks and the missing
/// rest appended.
fn resolve_missing(path: &Path) -> PathBuf {
    let mut lexical = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other.as_os_str()),
        }
    }
    let mut existing = lexical.clone();
    let mut missing = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            return missing
                .into_iter()
                .rev()
                .fold(real, |acc, name| acc.join(name));
        }
        match existing.file_name() {
            Some(name) => {
                missing.push(name.to_owned());
                existing.pop();
            }
            None => return lexical,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_resolve_against_cwd_and_through_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real dir#1");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let resolved = resolve_root("link".as_ref(), dir.path(), false).unwrap();
        assert_eq!(resolved.path, real.canonicalize().unwrap());
        assert!(
            resolved.uri.ends_with("/real%20dir%231"),
            "{}",
            resolved.uri
        );
    }

    #[test]
    fn missing_paths_and_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "x").unwrap();
        assert!(matches!(
            resolve_root("nope".as_ref(), dir.path(), false),
            Err(ResolveError::Missing { .. })
        ));
        assert!(matches!(
            resolve_root("f".as_ref(), dir.path(), false),
            Err(ResolveError::NotDirectory { .. })
        ));
    }

    #[test]
    fn allow_missing_resolves_the_existing_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let resolved = resolve_root("a/b/../c".as_ref(), dir.path(), true).unwrap();
        assert_eq!(resolved.path, base.join("a").join("c"));
    }

    #[test]
    fn other_schemes_are_refused_with_the_reason() {
        let err =
            resolve_root("https://example.com/x".as_ref(), Path::new("/"), false).unwrap_err();
        assert!(err.to_string().contains("must be file:// URIs"), "{err}");
    }

    #[test]
    fn map_host_dirs_resolve_through_symlinks_and_duplicates_are_usage_errors() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let args: Vec<OsString> = vec!["link=/src".into(), "link/not-yet=/later".into()];
        let mapping = path_maps(&args, dir.path()).unwrap();
        assert_eq!(
            mapping.server_path(&real.join("app")),
            Some(PathBuf::from("/src/app"))
        );
        assert_eq!(
            mapping.server_path(&real.join("not-yet/x")),
            Some(PathBuf::from("/later/x"))
        );
        let twice: Vec<OsString> = vec!["link=/a".into(), "real=/b".into()];
        let err = path_maps(&twice, dir.path()).unwrap_err();
        assert!(err.0.contains("\"link=/a\" and --map \"real=/b\""), "{err}");
    }

    #[test]
    fn remove_targets_offer_the_name_too() {
        let target = remove_target("app".as_ref(), Path::new("/srv")).unwrap();
        assert_eq!(target.name.as_deref(), Some("app"));
        assert!(target.uri.is_some());
        let target = remove_target("file:///srv/x/".as_ref(), Path::new("/")).unwrap();
        assert_eq!(target.uri.as_deref(), Some("file:///srv/x"));
        assert_eq!(target.name, None);
    }

    #[test]
    fn a_root_whose_directory_became_a_file_or_vanished_is_removable_by_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::write(base.join("was-a-dir"), "x").unwrap();
        for (input, path) in [
            ("was-a-dir", base.join("was-a-dir")),
            ("gone/deeper", base.join("gone/deeper")),
        ] {
            let target = remove_target(input.as_ref(), dir.path()).unwrap();
            assert_eq!(
                target.uri,
                Some(root::uri_from_path(&path).unwrap()),
                "{input}"
            );
        }
    }

    #[test]
    fn a_path_that_is_not_utf8_resolves_to_a_percent_encoded_uri() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let name = OsStr::from_bytes(b"caf\xe9 \xff");
        std::fs::create_dir(dir.path().join(name)).unwrap();
        let resolved = resolve_root(name, dir.path(), false).unwrap();
        assert!(resolved.uri.ends_with("/caf%E9%20%FF"), "{}", resolved.uri);
        assert_eq!(root::path_from_uri(&resolved.uri).unwrap(), resolved.path);
        let target = remove_target(name, dir.path()).unwrap();
        assert_eq!(target.uri, Some(resolved.uri));
        assert_eq!(target.name, None, "no root name can be anything but UTF-8");
    }
}
