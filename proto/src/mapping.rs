//! `rootsctl proxy --map HOST_DIR=SERVER_DIR`: showing a server the user's roots at the paths it
//! sees them under, for a server that runs in a container or VM that mounts the user's
//! directories elsewhere (`docker run -v ~/src:/src …`).
//!
//! A root is rewritten by the map with the longest `HOST_DIR` that contains it, matched by whole
//! path components (`/home/u/src` contains `/home/u/src/app` but not `/home/u/src2`). Roots
//! outside every `HOST_DIR` are withheld from the server, each with its reason, and the session
//! reports a bounded summary of them ([`Withheld`]). Paths are mapped as decoded bytes, so names
//! that are not UTF-8 or need percent-encoding come out encoded as every other root is
//! ([`crate::root`]).
//!
//! Everything here is pure: no filesystem access. `HOST_DIR` is made absolute against a working
//! directory the caller passes and normalised lexically; resolving it through symlinks, as
//! roots are, is the CLI's job. `SERVER_DIR` names a path as the server sees it, which need not
//! exist on this machine. Only roots are mapped: paths in a server's own results are not.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::root::{self, Root};

/// How many withheld roots a session lists by URI; past that, they are only counted.
pub const MAX_WITHHELD_LISTED: usize = 16;
/// A withheld root whose URI and name together are longer than this is counted but not listed,
/// so that the session's report stays far below the control protocol's line limit.
pub const MAX_WITHHELD_ENTRY_BYTES: usize = 4096;

/// One `HOST_DIR=SERVER_DIR`: roots at or below `host` reach the server below `server`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathMap {
    /// Absolute and lexically normal (no `.`, `..`, repeated or trailing slashes).
    pub host: PathBuf,
    /// Absolute and lexically normal, as the server sees it.
    pub server: PathBuf,
}

/// Why a `--map` argument, or a set of them, is not usable. Every message names the argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error(
        "--map {arg:?} is not HOST_DIR=SERVER_DIR with an absolute SERVER_DIR: write it as, for example, --map ~/src=/src (the first `=` followed by `/` separates the two)"
    )]
    NoSeparator { arg: String },
    #[error("--map {arg:?} has an empty HOST_DIR: write the host directory before the `=`")]
    EmptyHost { arg: String },
    #[error(
        "--map {arg:?}: HOST_DIR {host:?} starts with `~`, which is not expanded here (a shell expands it only at the start of a word, and host apps' configuration files not at all): write the home directory out, or ./{host} for a directory named so"
    )]
    Tilde { arg: String, host: String },
    #[error(
        "--map {first:?} and --map {second:?} both map the host directory {host:?}: give each HOST_DIR one SERVER_DIR"
    )]
    DuplicateHost {
        host: PathBuf,
        first: String,
        second: String,
    },
}

impl PathMap {
    /// Reads one `HOST_DIR=SERVER_DIR` argument; a relative `HOST_DIR` is taken relative to
    /// `cwd` (which must be absolute), as `rootsctl add` takes paths.
    ///
    /// The two are split at the first `=` followed by `/`, because `SERVER_DIR` is absolute:
    /// `/data/a=b=/srv` maps `/data/a=b` to `/srv`. A `HOST_DIR` with `=/` inside (a directory
    /// whose name ends in `=`) cannot be written, but a symlink to it can, since the CLI
    /// resolves `HOST_DIR` to its real path.
    pub fn parse(arg: &OsStr, cwd: &Path) -> Result<Self, MapError> {
        let bytes = arg.as_bytes();
        let shown = || arg.to_string_lossy().into_owned();
        let split = bytes
            .windows(2)
            .position(|pair| pair == b"=/")
            .ok_or_else(|| MapError::NoSeparator { arg: shown() })?;
        let host = Path::new(OsStr::from_bytes(&bytes[..split]));
        let server = Path::new(OsStr::from_bytes(&bytes[split + 1..]));
        if host.as_os_str().is_empty() {
            return Err(MapError::EmptyHost { arg: shown() });
        }
        if host.as_os_str().as_bytes().starts_with(b"~") {
            return Err(MapError::Tilde {
                arg: shown(),
                host: host.to_string_lossy().into_owned(),
            });
        }
        Ok(Self {
            host: normalise(&cwd.join(host)),
            server: normalise(server),
        })
    }

    /// The server's path for `path`, if it lies at or below `host`.
    fn server_path(&self, path: &Path) -> Option<PathBuf> {
        // `strip_prefix` compares whole components, so `/a/src` is no prefix of `/a/src2`.
        let rest = path.strip_prefix(&self.host).ok()?;
        Some(if rest.as_os_str().is_empty() {
            self.server.clone()
        } else {
            self.server.join(rest)
        })
    }
}

/// `path` with `.` dropped, `..` applied and slashes collapsed, without touching the filesystem.
/// `..` at the root stays at the root, as the kernel treats it.
fn normalise(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other.as_os_str()),
        }
    }
    normal
}

/// Every `--map` of one proxy, longest `HOST_DIR` first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    maps: Vec<PathMap>,
}

impl Mapping {
    /// The maps given, each with the argument it came from (for messages). The same `HOST_DIR`
    /// twice is refused, whatever the two `SERVER_DIR`s: which one wins would be a guess.
    pub fn new(maps: Vec<(PathMap, String)>) -> Result<Self, MapError> {
        for (i, (map, arg)) in maps.iter().enumerate() {
            if let Some((_, first)) = maps[..i].iter().find(|(m, _)| m.host == map.host) {
                return Err(MapError::DuplicateHost {
                    host: map.host.clone(),
                    first: first.clone(),
                    second: arg.clone(),
                });
            }
        }
        let mut maps: Vec<PathMap> = maps.into_iter().map(|(map, _)| map).collect();
        // Two different HOST_DIRs that both contain a path differ in depth, so ordering by depth
        // alone makes the first match the longest.
        maps.sort_by_key(|m| std::cmp::Reverse(m.host.components().count()));
        Ok(Self { maps })
    }

    pub fn maps(&self) -> &[PathMap] {
        &self.maps
    }

    /// The server's path for the host path `path`: by the longest `HOST_DIR` containing it.
    pub fn server_path(&self, path: &Path) -> Option<PathBuf> {
        self.maps.iter().find_map(|m| m.server_path(path))
    }

    /// The roots as the server is to see them, in order, names kept, and what was withheld.
    /// Two roots that map to the same server path reach it once, under the first one's name.
    pub fn apply(&self, roots: &[Root]) -> Mapped {
        let mut mapped = Mapped::default();
        for original in roots {
            let uri = match root::path_from_uri(&original.uri) {
                Err(_) => Err(WithheldReason::NotLocalFile),
                Ok(path) => match self.server_path(&path) {
                    None => Err(WithheldReason::OutsideMap),
                    Some(server) => {
                        root::uri_from_path(&server).map_err(|_| WithheldReason::NotLocalFile)
                    }
                },
            };
            match uri {
                Ok(uri) => {
                    if !mapped.roots.iter().any(|r| r.uri == uri) {
                        mapped.roots.push(Root {
                            uri,
                            name: original.name.clone(),
                        });
                    }
                }
                Err(reason) => mapped.withheld.add(original, reason),
            }
        }
        mapped
    }
}

/// A list of roots mapped for a server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mapped {
    pub roots: Vec<Root>,
    pub withheld: Withheld,
}

/// Why a root was not given to a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WithheldReason {
    /// It lies outside every `--map` `HOST_DIR`: the server cannot see it.
    OutsideMap,
    /// It is not a local `file://` URI, so it has no path to map (the daemon stores none such;
    /// this keeps an unexpected one from reaching the server unmapped).
    NotLocalFile,
}

/// One withheld root, as the session lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WithheldRoot {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub reason: WithheldReason,
}

/// What a session's server was not given, bounded: counts by reason, and the first
/// [`MAX_WITHHELD_LISTED`] roots with their reasons.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Withheld {
    /// Roots outside every `--map`.
    #[serde(default)]
    pub outside_map: u64,
    /// Roots that are not local `file://` URIs.
    #[serde(default)]
    pub not_local_file: u64,
    /// The first withheld roots, in the workspace's order (those too long to list skipped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<WithheldRoot>,
}

impl Withheld {
    /// How many roots were withheld.
    pub fn count(&self) -> u64 {
        self.outside_map + self.not_local_file
    }

    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    fn add(&mut self, root: &Root, reason: WithheldReason) {
        match reason {
            WithheldReason::OutsideMap => self.outside_map += 1,
            WithheldReason::NotLocalFile => self.not_local_file += 1,
        }
        let size = root.uri.len() + root.name.as_ref().map_or(0, String::len);
        if self.roots.len() < MAX_WITHHELD_LISTED && size <= MAX_WITHHELD_ENTRY_BYTES {
            self.roots.push(WithheldRoot {
                uri: root.uri.clone(),
                name: root.name.clone(),
                reason,
            });
        }
    }

    /// A short account for a table: `2 outside --map`, `1 not file://`, or both.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.outside_map > 0 {
            parts.push(format!("{} outside --map", self.outside_map));
        }
        if self.not_local_file > 0 {
            parts.push(format!("{} not local file://", self.not_local_file));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(arg: &str) -> PathMap {
        PathMap::parse(OsStr::new(arg), Path::new("/work")).unwrap()
    }

    fn mapping(args: &[&str]) -> Mapping {
        Mapping::new(args.iter().map(|a| (map(a), (*a).to_owned())).collect()).unwrap()
    }

    fn root(uri: &str, name: &str) -> Root {
        Root {
            uri: uri.to_owned(),
            name: Some(name.to_owned()),
        }
    }

    fn uris(mapped: &Mapped) -> Vec<&str> {
        mapped.roots.iter().map(|r| r.uri.as_str()).collect()
    }

    #[test]
    fn arguments_split_at_the_first_equals_before_a_slash() {
        assert_eq!(
            map("/home/u/src=/src"),
            PathMap {
                host: "/home/u/src".into(),
                server: "/src".into()
            }
        );
        let odd = map("/data/a=b=/srv/x=/y");
        assert_eq!(odd.host, Path::new("/data/a=b"));
        assert_eq!(odd.server, Path::new("/srv/x=/y"));
    }

    #[test]
    fn host_dirs_resolve_against_the_cwd_and_both_sides_are_normalised() {
        let rel = map("src/./app/../lib/=//srv//lib/");
        assert_eq!(rel.host, Path::new("/work/src/lib"));
        assert_eq!(rel.server, Path::new("/srv/lib"));
        assert_eq!(map(".=/src").host, Path::new("/work"));
        assert_eq!(map("/../a=/b/..").server, Path::new("/"));
    }

    #[test]
    fn bad_arguments_are_refused_naming_the_argument() {
        let parse = |arg: &str| PathMap::parse(OsStr::new(arg), Path::new("/w")).unwrap_err();
        for (arg, expected) in [
            ("/home/u/src", "is not HOST_DIR=SERVER_DIR"),
            ("/home/u/src=src", "is not HOST_DIR=SERVER_DIR"),
            ("=/src", "empty HOST_DIR"),
            ("~/src=/src", "starts with `~`"),
        ] {
            let message = parse(arg).to_string();
            assert!(message.contains(expected), "{arg}: {message}");
            assert!(message.contains(&format!("{arg:?}")), "{arg}: {message}");
        }
        let twice = Mapping::new(vec![
            (map("/a=/x"), "/a=/x".into()),
            (map("/a/=/y"), "/a/=/y".into()),
        ])
        .unwrap_err();
        assert!(matches!(twice, MapError::DuplicateHost { .. }), "{twice}");
        assert!(twice.to_string().contains("\"/a/=/y\""), "{twice}");
    }

    #[test]
    fn prefixes_match_whole_components_and_the_longest_wins() {
        let m = mapping(&["/home/u/src=/src", "/home/u/src/big=/mnt/big", "/opt=/opt"]);
        let mapped = m.apply(&[
            root("file:///home/u/src", "src"),
            root("file:///home/u/src/app", "app"),
            root("file:///home/u/src/big/data", "data"),
            root("file:///home/u/src2", "src2"),
            root("file:///home/u/srcx/app", "other"),
        ]);
        assert_eq!(
            uris(&mapped),
            ["file:///src", "file:///src/app", "file:///mnt/big/data"]
        );
        assert_eq!(mapped.roots[1].name.as_deref(), Some("app"), "names stay");
        assert_eq!(mapped.withheld.outside_map, 2);
        assert_eq!(
            mapped.withheld.roots,
            vec![
                WithheldRoot {
                    uri: "file:///home/u/src2".into(),
                    name: Some("src2".into()),
                    reason: WithheldReason::OutsideMap
                },
                WithheldRoot {
                    uri: "file:///home/u/srcx/app".into(),
                    name: Some("other".into()),
                    reason: WithheldReason::OutsideMap
                },
            ]
        );
        assert_eq!(mapped.withheld.summary(), "2 outside --map");
    }

    #[test]
    fn percent_encoded_and_non_utf8_names_survive_mapping() {
        let m = mapping(&["/h/a b=/srv/x y"]);
        let mapped = m.apply(&[
            root("file:///h/a%20b/%23c%3F%25d/%C3%BC", "special"),
            root("file:///h/a%20b/%FF%FE", "not utf-8"),
        ]);
        assert_eq!(
            uris(&mapped),
            [
                "file:///srv/x%20y/%23c%3F%25d/%C3%BC",
                "file:///srv/x%20y/%FF%FE"
            ]
        );
        let raw = root::path_from_uri(&mapped.roots[1].uri).unwrap();
        assert_eq!(raw.as_os_str().as_bytes(), b"/srv/x y/\xff\xfe");
        // A non-UTF-8 map argument works the same way.
        let arg = OsStr::from_bytes(b"/h/\xff=/s/\xfe");
        let m = Mapping::new(vec![(
            PathMap::parse(arg, Path::new("/")).unwrap(),
            "x".into(),
        )])
        .unwrap();
        assert_eq!(
            uris(&m.apply(&[root("file:///h/%FF/in", "n")])),
            ["file:///s/%FE/in"]
        );
    }

    #[test]
    fn unmappable_roots_are_withheld_with_their_reason() {
        let m = mapping(&["/=/host"]);
        let mapped = m.apply(&[
            root("https://example.com/x", "web"),
            root("file://server/share", "remote"),
            root("file:///etc", "etc"),
        ]);
        assert_eq!(uris(&mapped), ["file:///host/etc"]);
        assert_eq!(mapped.withheld.not_local_file, 2);
        assert!(
            mapped
                .withheld
                .roots
                .iter()
                .all(|r| r.reason == WithheldReason::NotLocalFile)
        );
        assert_eq!(mapped.withheld.summary(), "2 not local file://");
    }

    #[test]
    fn the_withheld_list_is_bounded_but_the_count_is_not() {
        let m = mapping(&["/in=/in"]);
        let mut roots: Vec<Root> = (0..40)
            .map(|i| root(&format!("file:///out/{i}"), "o"))
            .collect();
        roots.insert(
            0,
            root(&format!("file:///out/{}", "x".repeat(5000)), "long"),
        );
        let mapped = m.apply(&roots);
        assert!(mapped.roots.is_empty());
        assert_eq!(mapped.withheld.count(), 41);
        assert_eq!(mapped.withheld.roots.len(), MAX_WITHHELD_LISTED);
        assert_eq!(
            mapped.withheld.roots[0].uri, "file:///out/0",
            "too long to list"
        );
    }

    #[test]
    fn roots_mapping_to_one_server_path_reach_it_once() {
        let m = mapping(&["/a=/x", "/b=/x"]);
        let mapped = m.apply(&[root("file:///a", "first"), root("file:///b", "second")]);
        assert_eq!(mapped.roots, vec![root("file:///x", "first")]);
        assert!(mapped.withheld.is_empty());
    }

    #[test]
    fn an_empty_summary_serialises_to_zero_counts() {
        let empty: Withheld = serde_json::from_str("{}").unwrap();
        assert!(empty.is_empty());
        assert_eq!(
            serde_json::to_value(&empty).unwrap(),
            serde_json::json!({"outside_map": 0, "not_local_file": 0})
        );
    }
}
