//! `rootsd-dist`: writes what the Debian package and `scripts/install` ship besides the binaries
//! and the unit files: man pages, shell completions and Debian's `copyright` file. Each is derived
//! from the source (the clap definitions, the licence texts), so nothing generated is committed
//! and a man page cannot drift from `--help`.
//!
//! It only writes files into the directory it is given: building, installing and packaging are
//! `scripts/install`'s and `scripts/deb`'s job.

mod completions;
mod copyright;
mod man;

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Parser as _;

/// Writes rootsd's man pages, shell completions and Debian copyright file into a directory
///
/// Layout: man/man8/rootsd.8, man/man1/rootsctl.1 and rootsctl-COMMAND.1 for every subcommand,
/// completions/rootsctl.bash, completions/_rootsctl (zsh), completions/rootsctl.fish, and
/// copyright. The man/ and completions/ directories are replaced, so that a page of a removed
/// subcommand does not linger. Prints the path of every file written.
#[derive(Debug, clap::Parser)]
#[command(name = "rootsd-dist", version)]
struct Args {
    /// Directory to write into (created if missing)
    #[arg(value_name = "DIR")]
    out: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    for path in write_all(&args.out)? {
        println!("{}", path.display());
    }
    Ok(())
}

/// Writes everything into `out` and returns the paths written.
fn write_all(out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();

    let man_dir = fresh_dir(&out.join("man"))?;
    for page in man::pages(&man_date()?)? {
        let dir = man_dir.join(format!("man{}", page.section));
        fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        written.push(write(&dir.join(page.file_name()), &page.roff)?);
    }

    let completions_dir = fresh_dir(&out.join("completions"))?;
    for (file_name, script) in completions::scripts() {
        written.push(write(&completions_dir.join(file_name), &script)?);
    }

    written.push(write(&out.join("copyright"), copyright::text().as_bytes())?);
    Ok(written)
}

/// The date in the man pages' footer: `SOURCE_DATE_EPOCH` (the reproducible-builds convention;
/// `scripts/deb` and `scripts/install` set it to the last commit's time) or else today, as
/// `YYYY-MM-DD` in UTC.
fn man_date() -> anyhow::Result<String> {
    let seconds = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(value) => value.trim().parse::<u64>().with_context(|| {
            format!("SOURCE_DATE_EPOCH={value:?} is not a number of seconds since 1970")
        })?,
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .context("the clock is before 1970")?
            .as_secs(),
    };
    Ok(civil_date(seconds / 86_400))
}

/// `YYYY-MM-DD` of the day `days` after 1970-01-01 (proleptic Gregorian calendar; Howard
/// Hinnant's `civil_from_days`).
fn civil_date(days: u64) -> String {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Removes `dir` if it exists and creates it empty.
fn fresh_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    match fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(err).with_context(|| format!("remove {}", dir.display())),
    }
    fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir.to_owned())
}

fn write(path: &Path, contents: &[u8]) -> anyhow::Result<PathBuf> {
    fs::write(path, contents).with_context(|| format!("write {}", path.display()))?;
    Ok(path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_match_the_calendar() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(20_513), "2026-03-01");
        assert_eq!(civil_date(1_764_460_800 / 86_400), "2025-11-30");
    }

    #[test]
    fn writes_the_documented_layout_and_replaces_stale_pages() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().to_owned();
        let stale = out.join("man/man1/rootsctl-gone.1");
        fs::create_dir_all(stale.parent().unwrap()).unwrap();
        fs::write(&stale, "stale").unwrap();

        let written = write_all(&out).unwrap();
        let relative: Vec<String> = written
            .iter()
            .map(|p| p.strip_prefix(&out).unwrap().display().to_string())
            .collect();
        for expected in [
            "man/man8/rootsd.8",
            "man/man1/rootsctl.1",
            "man/man1/rootsctl-proxy.1",
            "completions/rootsctl.bash",
            "completions/_rootsctl",
            "completions/rootsctl.fish",
            "copyright",
        ] {
            assert!(
                relative.iter().any(|r| r == expected),
                "{expected} missing from {relative:?}"
            );
        }
        assert!(!stale.exists(), "a stale page survived");
    }
}
