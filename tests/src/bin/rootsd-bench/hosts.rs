//! The `rootsctl hosts wrap` row: the real binary, as a user runs it, wrapping every server of a
//! Claude Code configuration file with 200 stdio servers and the long history such files carry.
//! Timed from the process's start to its exit; the file is put back between runs. The limit is
//! the file I/O any safe edit needs, done by this benchmark itself: read the file, write the
//! backup and `fsync` it, write the new text beside the file, `fsync` it and rename it over.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use rootsd_tests::Sandbox;

use crate::Mode;
use crate::procs::median;
use crate::report::{Row, Target};

/// The target for wrapping 200 servers.
const WRAP_MS: f64 = 50.0;

/// Servers in the file.
const SERVERS: usize = 200;

/// Bytes of the history field: Claude Code keeps its project history in the same file, and
/// real ones run to megabytes.
const HISTORY: usize = 2 << 20;

pub fn measure(sandbox: &Sandbox, mode: Mode) -> Result<Row> {
    let samples = if mode.quick { 5 } else { 21 };
    eprintln!("  {samples} wraps of {SERVERS} servers, and {samples} of the limit's file I/O");
    let home = sandbox.configured_home();
    let file = home.join(".claude.json");
    let original = claude_json();
    let (mut wraps, mut limits) = (Vec::new(), Vec::new());
    for turn in 0..samples {
        // Taking turns, and which goes first alternates.
        for side in [turn % 2, 1 - turn % 2] {
            std::fs::write(&file, &original).context("write the configuration file")?;
            if side == 0 {
                wraps.push(wrap(&home)?);
                let wrapped = std::fs::read_to_string(&file)?;
                ensure!(
                    wrapped.matches("\"proxy\"").count() == SERVERS,
                    "rootsctl hosts wrap did not wrap all {SERVERS} servers"
                );
            } else {
                limits.push(same_io(&file, &home)?);
            }
        }
    }
    Ok(Row {
        id: "hosts_wrap_200".into(),
        what: format!("rootsctl hosts wrap, {SERVERS} servers in a {} MiB file, median", (original.len() + (1 << 19)) >> 20),
        unit: "ms",
        rootsd: median(&mut wraps),
        limit: Some(median(&mut limits)),
        limit_what: "the same file I/O by this benchmark: read, backup written and fsynced, new text written, fsynced and renamed over".into(),
        samples,
        target: Target::rootsd_at_most(WRAP_MS),
        note: Some(
            "the whole process: its start, finding the host's file, planning 200 edits with the format-preserving editor, the backup, the record of what was wrapped and the atomic write".into(),
        ),
    })
}

/// One `rootsctl hosts wrap claude-code`, in a bare environment as a user's shell would give.
fn wrap(home: &Path) -> Result<f64> {
    let started = Instant::now();
    let output = Command::new(rootsd_tests::bin("rootsctl"))
        .env_clear()
        .env("HOME", home)
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .current_dir(home)
        .args(["hosts", "wrap", "claude-code"])
        .stdin(Stdio::null())
        .output()
        .context("run rootsctl hosts wrap")?;
    let elapsed = started.elapsed().as_secs_f64() * 1e3;
    ensure!(
        output.status.success(),
        "rootsctl hosts wrap failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(elapsed)
}

/// The least a safe edit of `file` does, whoever does it.
fn same_io(file: &Path, home: &Path) -> Result<f64> {
    let started = Instant::now();
    let text = std::fs::read(file)?;
    let durable = |path: &Path, bytes: &[u8]| -> Result<()> {
        let mut out = std::fs::File::create(path)?;
        out.write_all(bytes)?;
        out.sync_all()?;
        Ok(())
    };
    durable(&home.join("limit.backup"), &text)?;
    let beside = home.join(".claude.json.limit");
    durable(&beside, &text)?;
    std::fs::rename(&beside, file)?;
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// A Claude Code `~/.claude.json`: 200 stdio servers, then a long history.
fn claude_json() -> String {
    let mut text = String::from("{\n  \"numStartups\": 12,\n  \"mcpServers\": {\n");
    for i in 0..SERVERS {
        let comma = if i + 1 == SERVERS { "" } else { "," };
        let _ = writeln!(
            text,
            "    \"server-{i}\": {{\"type\": \"stdio\", \"command\": \"npx\", \"args\": [\"-y\", \"@example/server-{i}\"], \"env\": {{\"TOKEN\": \"{i}\"}}}}{comma}"
        );
    }
    text.push_str("  },\n  \"history\": \"");
    text.push_str(&"x".repeat(HISTORY));
    text.push_str("\"\n}\n");
    text
}
