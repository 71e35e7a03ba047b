//! Writing to stdout: aligned tables for people, JSON for programs, and a quiet exit when the
//! reader goes away (`rootsctl list | head -1`).
//!
//! Everything shown to people passes through an escape here, because names, paths, labels and
//! server identities come from users, directories and MCP servers: a directory named
//! `x\nevil  /etc` must not print as a second row, nor a server name move the terminal's cursor.
//! [`escape`] and [`escape_bytes`] show one piece of such data unambiguously; [`escape_controls`]
//! is the net under whole lines (tables, error messages, doctor's report) that may quote it.
//! JSON output needs none of this: JSON escapes control characters itself.

use std::os::unix::ffi::OsStrExt as _;

use rootsd_proto::Root;
pub use rootsd_proto::text::{escape, escape_bytes, escape_controls, json, table};

/// The path a root's URI names, escaped for display ([`escape_bytes`]); the URI itself if it
/// cannot be decoded.
pub fn display_path(root: &Root) -> String {
    match rootsd_proto::root::path_from_uri(&root.uri) {
        Ok(path) => escape_bytes(path.as_os_str().as_bytes()).into_owned(),
        Err(_) => escape(&root.uri).into_owned(),
    }
}

/// A root's name, escaped for display; `-` when it has none.
pub fn display_name(root: &Root) -> String {
    root.name
        .as_deref()
        .map_or_else(|| "-".to_owned(), |name| escape(name).into_owned())
}

/// A root for humans: `path (name)`, leaving out a name that only repeats the base name (as
/// the daemon names a root by default). Both are escaped.
pub fn describe(root: &Root) -> String {
    let path = display_path(root);
    let default = rootsd_proto::root::path_from_uri(&root.uri)
        .ok()
        .map(|p| rootsd_proto::root::default_name(&p));
    match &root.name {
        Some(name) if Some(name) != default.as_ref() => format!("{path} ({})", escape(name)),
        _ => path,
    }
}

/// A renamed root, as `log` and `watch` show it: `renamed /dir (old → new)`, with the path and
/// both names already escaped. The word, not a sign: `~/dir` would read as a home directory.
pub fn renamed(path: &str, old: &str, new: &str) -> String {
    format!("renamed {path} ({old} → {new})")
}

/// A duration in seconds, the way `ps` and `systemctl` show one.
pub fn duration(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        3600..86400 => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
        _ => format!("{}d{:02}h", secs / 86400, (secs % 86400) / 3600),
    }
}

/// Seconds since the Unix epoch as a UTC time, `2026-11-30T17:01:07Z`.
pub fn unix_time(secs: u64) -> String {
    let days = secs / 86_400;
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_times_are_utc_dates() {
        assert_eq!(unix_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(unix_time(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(unix_time(1_796_037_667), "2026-11-30T11:21:07Z");
    }

    #[test]
    fn a_root_is_described_by_its_escaped_path_and_a_name_that_adds_something() {
        let root = |uri: &str, name: Option<&str>| Root {
            uri: uri.into(),
            name: name.map(str::to_owned),
        };
        assert_eq!(describe(&root("file:///srv/app", Some("app"))), "/srv/app");
        assert_eq!(
            describe(&root("file:///srv/app", Some("main"))),
            "/srv/app (main)"
        );
        assert_eq!(describe(&root("file:///", Some("/"))), "/");
        assert_eq!(
            describe(&root("file:///srv/a%0Ab", Some("a\nb"))),
            "/srv/a\\nb"
        );
        assert_eq!(
            describe(&root("file:///srv/%FF", Some("\u{fffd}"))),
            "/srv/\\xff"
        );
        assert_eq!(display_name(&root("file:///x", None)), "-");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(5), "5s");
        assert_eq!(duration(125), "2m05s");
        assert_eq!(duration(7300), "2h01m");
        assert_eq!(duration(90000), "1d01h");
    }
}
