//! Writing to stdout: aligned tables for people, JSON for programs, and a quiet exit when the
//! reader goes away (`rootsctl list | head -1`).

use std::io::{self, Write};
use std::path::PathBuf;

use rootsd_proto::Root;

/// Prints rows as left-aligned columns separated by two spaces; the last column is not padded.
pub fn table(out: &mut impl Write, rows: &[Vec<String>]) -> io::Result<()> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(
                    ' ',
                    widths[c] - cell.chars().count() + 2,
                ));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// Prints one JSON value on one line.
pub fn json(out: &mut impl Write, value: &impl serde::Serialize) -> io::Result<()> {
    // Serialising to memory first keeps a write error an `io::Error`, so a closed pipe is
    // recognised as one.
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)
}

/// The path a root's URI names, for display; the URI itself if it cannot be decoded.
pub fn display_path(root: &Root) -> String {
    rootsd_proto::root::path_from_uri(&root.uri)
        .map(|p: PathBuf| p.display().to_string())
        .unwrap_or_else(|_| root.uri.clone())
}

/// A root for humans: `path (name)`, leaving out a name that only repeats the base name.
pub fn describe(root: &Root) -> String {
    let path = display_path(root);
    match &root.name {
        Some(name) if !path.ends_with(&format!("/{name}")) => format!("{path} ({name})"),
        _ => path,
    }
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
    fn tables_align_columns() {
        let mut out = Vec::new();
        let rows = vec![
            vec!["NAME".into(), "PATH".into()],
            vec!["a-long-name".into(), "/x".into()],
        ];
        table(&mut out, &rows).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NAME         PATH\na-long-name  /x\n"
        );
    }

    #[test]
    fn unix_times_are_utc_dates() {
        assert_eq!(unix_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(unix_time(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(unix_time(1_796_037_667), "2026-11-30T11:21:07Z");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(5), "5s");
        assert_eq!(duration(125), "2m05s");
        assert_eq!(duration(7300), "2h01m");
        assert_eq!(duration(90000), "1d01h");
    }
}
