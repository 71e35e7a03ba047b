//! Roots: a canonical `file://` URI plus an optional display name, exactly as MCP's `Root`.
//!
//! The conversions here are pure: they never touch the filesystem. Resolving a user's path
//! (relative to their working directory, through symlinks) is the CLI's job, because only the CLI
//! knows the caller's working directory; the CLI then hands the real path to [`uri_from_path`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use url::Url;

/// One root as MCP's `ListRootsResult` carries it: `{"uri": "file:///…", "name": "…"}`.
///
/// `name` is omitted from the JSON when absent, as the MCP schema makes it optional.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Root {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// MCP's `ListRootsResult`, the exact shape servers receive and `rootsctl list --json` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRootsResult {
    pub roots: Vec<Root>,
}

/// Why a path or URI cannot be a root.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RootError {
    #[error(
        "{uri:?} is not a file:// URI: MCP roots must be file:// URIs, and one root of another scheme makes real servers reject the whole list"
    )]
    NotFileScheme { uri: String },
    #[error("{uri:?} is not a valid URI: {reason}")]
    InvalidUri { uri: String, reason: String },
    #[error(
        "{uri:?} names a file on host {host:?}: only local roots (file:///… or file://localhost/…) are supported"
    )]
    RemoteHost { uri: String, host: String },
    #[error("{path:?} is not an absolute path: resolve it against the working directory first")]
    RelativePath { path: PathBuf },
    #[error("{path:?} contains a NUL byte, which no file name can hold")]
    NulByte { path: PathBuf },
}

/// Does `text` look like a URI with a scheme (as opposed to a path)?
///
/// A scheme is `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` followed by `:`. Requiring at least
/// two characters keeps Windows-style `C:\…` paths out, and a path never starts with a scheme
/// followed by `//` by accident, so `./a:b` and `a:b` stay paths unless they carry `://`.
pub fn looks_like_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    let starts_alpha = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    starts_alpha
        && scheme.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && (rest.starts_with("//") || scheme.eq_ignore_ascii_case("file"))
}

/// Builds the canonical `file://` URI of an absolute path.
///
/// Spaces, `#`, `?`, `%` and non-ASCII bytes are percent-encoded, so the URI round-trips to the
/// same path through [`path_from_uri`]. A trailing slash is dropped so that `/a/` and `/a` name
/// the same root.
pub fn uri_from_path(path: &Path) -> Result<String, RootError> {
    use std::os::unix::ffi::OsStrExt;
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(RootError::NulByte {
            path: path.to_owned(),
        });
    }
    if !path.is_absolute() {
        return Err(RootError::RelativePath {
            path: path.to_owned(),
        });
    }
    let normalised: PathBuf = path.components().collect();
    let url = Url::from_file_path(&normalised).map_err(|()| RootError::RelativePath {
        path: path.to_owned(),
    })?;
    Ok(url.into())
}

/// Decodes a `file://` URI into the absolute path it names.
///
/// The scheme is matched without regard to case and `localhost` is accepted as the host, as
/// RFC 8089 allows; any other scheme or host is refused with the reason.
pub fn path_from_uri(uri: &str) -> Result<PathBuf, RootError> {
    let url = Url::parse(uri).map_err(|e| RootError::InvalidUri {
        uri: uri.to_owned(),
        reason: e.to_string(),
    })?;
    if url.scheme() != "file" {
        return Err(RootError::NotFileScheme {
            uri: uri.to_owned(),
        });
    }
    if let Some(host) = url
        .host_str()
        .filter(|h| !h.eq_ignore_ascii_case("localhost"))
    {
        return Err(RootError::RemoteHost {
            uri: uri.to_owned(),
            host: host.to_owned(),
        });
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(RootError::InvalidUri {
            uri: uri.to_owned(),
            reason: "a root URI may not carry a query (?…) or fragment (#…); percent-encode '?' and '#' in file names as %3F and %23".to_owned(),
        });
    }
    let path = url.to_file_path().map_err(|()| RootError::InvalidUri {
        uri: uri.to_owned(),
        reason: "it does not name a local absolute path".to_owned(),
    })?;
    use std::os::unix::ffi::OsStrExt;
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(RootError::NulByte { path });
    }
    Ok(path)
}

/// Re-encodes any accepted `file://` URI in the one canonical form rootsd stores and sends.
pub fn canonical_uri(uri: &str) -> Result<String, RootError> {
    canonical(uri).map(|(_, uri)| uri)
}

/// The path a `file://` URI names and its canonical form, as [`path_from_uri`] and then
/// [`uri_from_path`] give them.
///
/// A URI already in canonical form with nothing to decode, as rootsctl and the proxy send them,
/// is recognised by a scan of its bytes and taken as it is: the full parse and re-encoding cost
/// a quarter of the daemon's work on each `roots.add` (about 8,700 instructions of 37,000).
pub fn canonical(uri: &str) -> Result<(PathBuf, String), RootError> {
    if let Some(path) = plainly_canonical(uri) {
        return Ok((PathBuf::from(path), uri.to_owned()));
    }
    let path = path_from_uri(uri)?;
    let uri = uri_from_path(&path)?;
    Ok((path, uri))
}

/// [`canonical_uri`] of a URI the caller owns: one already canonical is given back as it is,
/// neither copied nor parsed. [`default_name_of`] names it.
pub fn canonical_owned(uri: String) -> Result<String, RootError> {
    if plainly_canonical(&uri).is_some() {
        return Ok(uri);
    }
    uri_from_path(&path_from_uri(&uri)?)
}

/// The path of `uri` when the URI is certainly canonical: `file:///` followed by segments of
/// bytes that are neither encoded nor decoded on the way to a path and back (no `%`, no
/// byte the encoder escapes, no `\`, which a `file:` URL reads as `/`, no `|`, which it may read
/// as a drive letter's `:`), none empty (`//`, a trailing `/`) and none `.` or `..`. Anything
/// else takes the full parse, which is the definition; a test checks the two agree.
fn plainly_canonical(uri: &str) -> Option<&str> {
    let path = uri.strip_prefix("file://")?;
    if path == "/" {
        return Some(path);
    }
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return None;
    }
    // One pass over the bytes: each segment ends at a `/` or at the end.
    let mut segment_start = 1;
    for k in 1..=bytes.len() {
        match bytes.get(k) {
            Some(&byte) if byte != b'/' => {
                if !PLAIN[usize::from(byte)] {
                    return None;
                }
            }
            _ => {
                if matches!(&bytes[segment_start..k], b"" | b"." | b"..") {
                    return None;
                }
                segment_start = k + 1;
            }
        }
    }
    Some(path)
}

/// RFC 3986's unreserved and sub-delimiter bytes, and `:` and `@`: what a path segment holds
/// as it is.
const PLAIN: [bool; 256] = {
    let mut plain = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        plain[byte] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'@'
            );
        byte += 1;
    }
    plain
};

/// The name a root of the canonical `uri` gets when the user gives none, as [`default_name`]
/// of its path: taken from the URI's last segment when the URI needs no decoding.
pub fn default_name_of(uri: &str) -> Result<String, RootError> {
    match plainly_canonical(uri) {
        Some("/") => Ok("/".to_owned()),
        Some(path) => Ok(path.rsplit('/').next().unwrap_or(path).to_owned()),
        None => Ok(default_name(&path_from_uri(uri)?)),
    }
}

/// The name a root gets when the user gives none: the directory's base name, or `/` for the
/// filesystem root.
pub fn default_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(path: &str) -> String {
        let uri = uri_from_path(Path::new(path)).unwrap();
        assert_eq!(path_from_uri(&uri).unwrap(), Path::new(path), "via {uri}");
        uri
    }

    #[test]
    fn the_scan_for_canonical_uris_agrees_with_the_full_parse() {
        // Every URI the scan takes must be exactly what the full parse makes of it; URIs built
        // from an alphabet of the bytes that matter (separators, dots, escapes, a drive letter's
        // `|`, spaces, non-ASCII) in every arrangement up to a small length, behind the prefixes
        // a peer may send.
        let alphabet = [
            "a", "/", ".", "%", "%2e", "%41", " ", "\\", "|", ":", "?", "#", "é", "~", "C",
        ];
        let prefixes = [
            "file://",
            "file:///",
            "FILE:///",
            "file://localhost/",
            "file:////",
        ];
        // The definition: the full parse, then the encoding of the path it gives. Returns
        // whether the scan took `uri`.
        let check = |uri: &str| {
            let slow = path_from_uri(uri).and_then(|p| Ok((p.clone(), uri_from_path(&p)?)));
            let taken = plainly_canonical(uri);
            if let Some(path) = taken {
                assert_eq!(
                    slow,
                    Ok((PathBuf::from(path), uri.to_owned())),
                    "{uri:?} was taken as canonical"
                );
            }
            assert_eq!(
                canonical(uri),
                slow,
                "canonical({uri:?}) and the full parse differ"
            );
            assert_eq!(
                canonical_owned(uri.to_owned()),
                slow.clone().map(|(_, canonical)| canonical),
                "canonical_owned({uri:?}) and the full parse differ"
            );
            if let Ok((path, canonical)) = &slow {
                assert_eq!(
                    default_name_of(canonical),
                    Ok(default_name(path)),
                    "the default name of {canonical:?}"
                );
            }
            taken.is_some()
        };
        let mut taken = 0;
        let mut texts = vec![String::new()];
        for _ in 0..4 {
            let mut next = Vec::new();
            for text in &texts {
                for piece in alphabet {
                    next.push(format!("{text}{piece}"));
                }
            }
            for tail in &next {
                for prefix in prefixes {
                    taken += usize::from(check(&format!("{prefix}{tail}")));
                }
            }
            texts = next;
        }
        assert!(taken > 1000, "the scan took only {taken} URIs");
        // Every printable byte, alone, between letters and doubled: the alphabet above holds
        // only the bytes thought to matter.
        for byte in 0x21u8..0x7f {
            let c = char::from(byte);
            check(&format!("file:///{c}"));
            check(&format!("file:///a{c}b"));
            check(&format!("file:///a/{c}{c}"));
        }
        assert_eq!(plainly_canonical("file:///"), Some("/"));
        assert_eq!(
            plainly_canonical("file:///home/ana/src/rootsd"),
            Some("/home/ana/src/rootsd")
        );
    }

    #[test]
    fn special_characters_are_percent_encoded_and_round_trip() {
        assert_eq!(
            round_trip("/tmp/a b#c?d%e/ünï"),
            "file:///tmp/a%20b%23c%3Fd%25e/%C3%BCn%C3%AF"
        );
        assert_eq!(round_trip("/x/%41"), "file:///x/%2541");
        assert_eq!(round_trip("/"), "file:///");
    }

    #[test]
    fn trailing_slashes_and_dots_are_normalised() {
        assert_eq!(uri_from_path(Path::new("/a/b/")).unwrap(), "file:///a/b");
        assert_eq!(uri_from_path(Path::new("/a/./b")).unwrap(), "file:///a/b");
    }

    #[test]
    fn other_schemes_are_refused_with_the_reason() {
        let err = path_from_uri("https://example.com/x").unwrap_err();
        assert!(matches!(err, RootError::NotFileScheme { .. }));
        assert!(err.to_string().contains("must be file:// URIs"));
    }

    #[test]
    fn localhost_and_uppercase_schemes_are_canonicalised() {
        assert_eq!(
            canonical_uri("file://localhost/tmp/x").unwrap(),
            "file:///tmp/x"
        );
        assert_eq!(canonical_uri("FILE:///tmp/x/").unwrap(), "file:///tmp/x");
    }

    #[test]
    fn remote_hosts_queries_and_relative_paths_are_refused() {
        assert!(matches!(
            path_from_uri("file://server/share"),
            Err(RootError::RemoteHost { .. })
        ));
        assert!(matches!(
            path_from_uri("file:///tmp/x?y"),
            Err(RootError::InvalidUri { .. })
        ));
        assert!(matches!(
            uri_from_path(Path::new("rel")),
            Err(RootError::RelativePath { .. })
        ));
        assert!(matches!(
            path_from_uri("file:///a%00b"),
            Err(RootError::NulByte { .. })
        ));
    }

    #[test]
    fn uri_detection_keeps_paths_paths() {
        assert!(looks_like_uri("file:///tmp"));
        assert!(looks_like_uri("https://example.com"));
        assert!(looks_like_uri("file:/tmp"));
        assert!(!looks_like_uri("/tmp/a:b"));
        assert!(!looks_like_uri("notes:draft"));
        assert!(!looks_like_uri("C:\\x"));
    }

    #[test]
    fn name_is_omitted_when_absent() {
        let root = Root {
            uri: "file:///a".into(),
            name: None,
        };
        assert_eq!(
            serde_json::to_string(&root).unwrap(),
            r#"{"uri":"file:///a"}"#
        );
    }
}
