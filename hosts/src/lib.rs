//! `rootsctl hosts`: the MCP servers of the apps on this machine, listed, wrapped behind
//! `rootsctl proxy` and unwrapped, by editing each app's own file in place.
//!
//! - [`table`]: the hosts, their files on Linux and macOS, and the shape of their entries.
//! - [`tree`], [`format`](mod@format), [`jsonc`], [`toml`], [`yaml`]: one editor per format,
//!   reading a file into values with byte spans.
//! - [`plan`]: the wrap and unwrap planner, pure: text in, text and what to remember out.
//! - [`write`](mod@write): bounded reads, backups, and the atomic replacement made only if the
//!   file is unchanged since it was read.
//! - [`record`]: what was wrapped, for an exact unwrap. [`lock`]: one command at a time.
//! - [`diff`]: `--dry-run`'s unified diff. [`running`]: whether Claude Code runs.
//!
//! No host file is written without a backup, nor without re-reading it first; a file that does
//! not parse is named and left untouched.

mod args;
mod diff;
mod errors;
mod format;
mod jsonc;
mod lock;
mod plan;
mod record;
mod running;
mod table;
#[cfg(test)]
mod tests;
mod toml;
mod tree;
mod verify;
mod write;
mod yaml;

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

pub use args::{HostsAction, HostsArgs, UnwrapArgs, WrapArgs};
pub use errors::{HostsRefused, UsageError};
pub use plan::IsProxy;
use plan::{Outcome, Transport};
use record::Record;
use rootsd_proto::text::escape;
use table::{Env, Host, Os};

/// Where the user's things are, from the environment once.
struct Context {
    home: PathBuf,
    env: Env,
    os: Os,
    /// Which entries are behind rootsd already: rootsctl's parser, given by the binary.
    proxy: IsProxy,
    /// Whether Claude Code runs, found in /proc on a thread of its own once asked for
    /// ([`Context::look_for_claude`]).
    claude: RefCell<Option<running::Scan>>,
}

impl Context {
    fn new(proxy: IsProxy) -> anyhow::Result<Self> {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .ok_or_else(|| UsageError("HOME is not set to an absolute path: rootsctl hosts finds every app's configuration from it; set it".to_owned()))?;
        let codex_home = std::env::var_os("CODEX_HOME")
            .filter(|c| !c.is_empty())
            .map(PathBuf::from);
        Ok(Self {
            home,
            env: Env { codex_home },
            os: Os::current(),
            proxy,
            claude: RefCell::new(None),
        })
    }

    fn state(&self) -> PathBuf {
        record::dir(&self.home)
    }

    /// Starts looking for running Claude Code sessions, if `hosts` include it, so that /proc is
    /// read while the files are read and planned: reading every process's name costs about as
    /// much as planning a large file.
    fn look_for_claude(&self, hosts: &[&Host]) {
        if hosts.iter().any(|host| host.id == "claude-code") {
            self.claude
                .borrow_mut()
                .get_or_insert_with(|| running::Scan::start(&self.home));
        }
    }

    /// Whether `file` is Claude Code's `~/.claude.json`, which running sessions rewrite.
    fn claude_busy(&self, host: &Host, file: &Path) -> Option<Vec<u32>> {
        if host.id != "claude-code" || file != self.home.join(".claude.json") {
            return None;
        }
        let mut claude = self.claude.borrow_mut();
        let pids = claude
            .get_or_insert_with(|| running::Scan::start(&self.home))
            .pids();
        (!pids.is_empty()).then(|| pids.to_vec())
    }
}

/// `rootsctl hosts [wrap|unwrap]`. `socket` is `--socket` (or `ROOTSD_SOCKET`) when given;
/// `proxy` tells which entries already run `rootsctl proxy`.
pub fn run(
    args: HostsArgs,
    socket: Option<PathBuf>,
    proxy: IsProxy,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let context = Context::new(proxy)?;
    let writes = match &args.action {
        None => false,
        Some(HostsAction::Wrap(wrap)) => !wrap.dry_run,
        Some(HostsAction::Unwrap(unwrap)) => !unwrap.dry_run,
    };
    // Held until the command ends: the record and the files are read, changed and written
    // under it.
    let _lock = if writes {
        refuse_foreign_home(&context.home)?;
        Some(lock::take(&context.state(), lock::WAIT)?)
    } else {
        None
    };
    match args.action {
        None => list(&context, &args.project, args.json, out),
        Some(HostsAction::Wrap(mut wrap)) => {
            wrap.project = one_project(wrap.project, args.project)?;
            wrap_hosts(&context, wrap, socket, out)
        }
        Some(HostsAction::Unwrap(_)) if args.project.is_some() => Err(UsageError(
            "unwrap restores every file rootsctl recorded, a project's included, so it takes no --project; run `rootsctl hosts unwrap`".to_owned(),
        )
        .into()),
        Some(HostsAction::Unwrap(unwrap)) => unwrap_hosts(&context, unwrap, out),
    }
}

/// `--project` given before `wrap` (`hosts --project DIR wrap`) or after it.
fn one_project(after: Option<PathBuf>, before: Option<PathBuf>) -> anyhow::Result<Option<PathBuf>> {
    match (after, before) {
        (Some(a), Some(b)) if a != b => Err(UsageError(format!(
            "--project is given twice, as {} and {}; give it once",
            a.display(),
            b.display()
        ))
        .into()),
        (after, before) => Ok(after.or(before)),
    }
}

/// Refuses root's changes in another user's home (`sudo -E rootsctl hosts wrap`): the state
/// directory, its lock and backups would be root's, and lock that user out of every later
/// command. Running as that user is the one way that leaves everything theirs.
fn refuse_foreign_home(home: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    match std::fs::metadata(home) {
        Ok(meta) if meta.uid() != 0 => Err(UsageError(format!(
            "rootsctl hosts runs as root, but HOME ({}) belongs to user {}: the state it keeps there would be root's and lock that user out of later commands; run it as that user, without sudo",
            home.display(),
            meta.uid()
        ))
        .into()),
        _ => Ok(()),
    }
}

/// The hosts the user named, or every host.
fn chosen(ids: &[String]) -> anyhow::Result<Vec<&'static Host>> {
    if ids.is_empty() {
        return Ok(table::HOSTS.iter().collect());
    }
    ids.iter()
        .map(|id| {
            table::find(id).ok_or_else(|| {
                UsageError(format!(
                    "unknown host {id:?}; the hosts are {}",
                    table::ids()
                ))
                .into()
            })
        })
        .collect()
}

/// A host's file, read and parsed; `None` when the file does not exist.
struct Found {
    host: &'static Host,
    file: PathBuf,
    text: Result<String, String>,
}

fn found(context: &Context, hosts: &[&'static Host], project: &Option<PathBuf>) -> Vec<Found> {
    let project = project
        .as_ref()
        .map(|p| std::path::absolute(p).unwrap_or(p.clone()));
    let mut all = Vec::new();
    for host in hosts {
        for file in host.files(&context.home, context.os, &context.env, project.as_deref()) {
            let text = match write::read_host(&file) {
                Ok(None) => continue,
                Ok(Some(bytes)) => {
                    String::from_utf8(bytes).map_err(|_| "it is not UTF-8".to_owned())
                }
                Err(e) => Err(format!("cannot read it: {e}")),
            };
            all.push(Found { host, file, text });
        }
    }
    all
}

#[derive(serde::Serialize)]
struct Listed {
    host: &'static str,
    file: PathBuf,
    format: format::Format,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    servers: Vec<plan::Server>,
}

fn list(
    context: &Context,
    project: &Option<PathBuf>,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut listed = Vec::new();
    for f in found(context, &chosen(&[])?, project) {
        let parsed = f.text.and_then(|t| plan::parse(&t, f.host.format.editor()));
        let (servers, error) = match parsed {
            Ok(root) => (plan::servers(&root, &f.host.shape, context.proxy), None),
            Err(e) => (Vec::new(), Some(e)),
        };
        listed.push(Listed {
            host: f.host.id,
            file: f.file,
            format: f.host.format,
            error,
            servers,
        });
    }
    if json {
        return Ok(rootsd_proto::text::json(out, &listed)?);
    }
    let mut rows = vec![
        ["HOST", "FILE", "SERVER", "TRANSPORT", "BEHIND ROOTSD"]
            .map(String::from)
            .to_vec(),
    ];
    for l in &listed {
        let file = escape(&l.file.to_string_lossy()).into_owned();
        if let Some(error) = &l.error {
            rows.push(vec![
                l.host.to_owned(),
                file.clone(),
                format!("({})", escape(error)),
                "-".into(),
                "-".into(),
            ]);
        }
        for s in &l.servers {
            let (transport, wrapped) = match &s.transport {
                Transport::Stdio { wrapped, .. } => {
                    ("stdio".to_owned(), if *wrapped { "yes" } else { "no" })
                }
                Transport::Remote { r#type } | Transport::Builtin { r#type } => {
                    (escape(r#type).into_owned(), "-")
                }
                Transport::Unusable { why } => (format!("unreadable: {}", escape(why)), "-"),
            };
            rows.push(vec![
                l.host.to_owned(),
                file.clone(),
                escape(&s.name).into_owned(),
                transport,
                wrapped.to_owned(),
            ]);
        }
    }
    if listed.is_empty() {
        writeln!(
            out,
            "No host configuration found under {}.",
            escape(&context.home.to_string_lossy())
        )?;
        return Ok(());
    }
    Ok(rootsd_proto::text::table(out, &rows)?)
}

/// What a wrapped entry runs: this rootsctl, by an absolute path so that a host with a short PATH
/// finds it.
fn wrapping(
    args: &WrapArgs,
    socket: Option<PathBuf>,
    proxy: IsProxy,
) -> anyhow::Result<plan::Wrapping> {
    let exe = installed()
        .context("cannot find this rootsctl's own path to write into the hosts' files")?;
    let rootsctl = exe
        .to_str()
        .ok_or_else(|| UsageError(format!("this rootsctl's path {exe:?} is not UTF-8, which no host's file can hold; install it elsewhere")))?
        .to_owned();
    let mut options = Vec::new();
    if let Some(workspace) = &args.workspace {
        options.extend(["--workspace".to_owned(), workspace.to_string()]);
    }
    // A socket given here reaches this rootsctl only: hosts strip ROOTSD_SOCKET, so it is
    // written into the entry. Without one the proxy finds the daemon as any rootsctl does.
    if let Some(socket) = socket {
        let socket = std::path::absolute(&socket)?;
        let socket = socket
            .to_str()
            .ok_or_else(|| UsageError(format!("the socket path {socket:?} is not UTF-8")))?;
        options.extend(["--socket".to_owned(), socket.to_owned()]);
    }
    Ok(plan::Wrapping {
        rootsctl,
        options,
        merge_host_roots: false,
        proxy,
    })
}

/// This rootsctl's path as the user installed it: the one they ran (from PATH, or as typed), made
/// absolute but not resolved through symbolic links. A versioned install (Homebrew's Cellar,
/// nix's store) links a stable path to a versioned one that an upgrade removes, so the stable
/// path is the one to write. Falls back to the resolved path when the one run cannot be found.
fn installed() -> std::io::Result<PathBuf> {
    let exe = std::fs::canonicalize(std::env::current_exe()?)?;
    let Some(argv0) = std::env::args_os().next().map(PathBuf::from) else {
        return Ok(exe);
    };
    let candidates: Vec<PathBuf> = if argv0.components().count() > 1 {
        vec![std::path::absolute(&argv0)?]
    } else {
        std::env::var_os("PATH")
            .map(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join(&argv0))
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(candidates
        .into_iter()
        .filter(|c| c.is_absolute())
        .find(|c| std::fs::canonicalize(c).is_ok_and(|c| c == exe))
        .unwrap_or(exe))
}

fn wrap_hosts(
    context: &Context,
    args: WrapArgs,
    socket: Option<PathBuf>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let hosts = chosen(&args.hosts)?;
    let base = wrapping(&args, socket, context.proxy)?;
    let state = context.state();
    let mut record = if args.dry_run {
        Record::default()
    } else {
        Record::load(&state).map_err(UsageError)?
    };
    let mut refused = 0;
    context.look_for_claude(&hosts);
    let files = found(context, &hosts, &args.project);
    if files.is_empty() {
        writeln!(
            out,
            "No host configuration found under {}.",
            escape(&context.home.to_string_lossy())
        )?;
    }
    for f in files {
        let shown = escape(&f.file.to_string_lossy()).into_owned();
        let wrapping = plan::Wrapping {
            merge_host_roots: f.host.gives_roots,
            ..base.clone()
        };
        let editor = f.host.format.editor();
        // A file that could not be read says why itself, and so does one that does not parse
        // (`plan::parse`) or whose planned edit was refused (`verify`).
        let planned = f
            .text
            .and_then(|t| plan::wrap(&t, editor, &f.host.shape, &wrapping).map(|p| (t, p)));
        let (text, planned) = match planned {
            Ok(ok) => ok,
            Err(e) => {
                eprintln!(
                    "rootsctl: {shown}: {}; it was left untouched: fix it and retry",
                    escape(&e)
                );
                refused += 1;
                continue;
            }
        };
        let names: Vec<String> = planned
            .remembered
            .iter()
            .map(|r| escape(r.path.last().map_or("", |s| s)).into_owned())
            .collect();
        if names.is_empty() {
            writeln!(out, "{}: {shown}: nothing to wrap", f.host.id)?;
            continue;
        }
        if args.dry_run {
            out.write_all(diff::unified(&shown, "wrapped", &text, &planned.edits).as_bytes())?;
            if let Some(pids) = context.claude_busy(f.host, &f.file) {
                writeln!(
                    out,
                    "note: Claude Code runs (pid {}): quit it before wrapping for real",
                    join(&pids)
                )?;
            }
            continue;
        }
        if let Some(pids) = context.claude_busy(f.host, &f.file) {
            eprintln!(
                "rootsctl: {shown}: Claude Code is running (pid {}) and rewrites this file from memory, which would undo the change or tear the file; it was left untouched: quit every Claude Code session and retry",
                join(&pids)
            );
            refused += 1;
            continue;
        }
        match commit(
            &state,
            &mut record,
            f.host,
            &f.file,
            &text,
            &planned.text,
            planned.remembered,
        ) {
            Ok(backup) => {
                writeln!(
                    out,
                    "{}: {shown}: wrapped {} ({}); backup: {}",
                    f.host.id,
                    names.len(),
                    names.join(", "),
                    escape(&backup.to_string_lossy())
                )?;
                writeln!(out, "  next: {}", f.host.after)?;
            }
            Err(e) => {
                eprintln!("rootsctl: {shown}: {}", escape(&format!("{e:#}")));
                refused += 1;
            }
        }
    }
    if refused > 0 {
        return Err(HostsRefused(refused).into());
    }
    Ok(())
}

/// Backs `file` up, remembers `entries`, then replaces the file if it still holds `old`; a
/// replacement that fails forgets them again. Returns the backup's path.
fn commit(
    state: &Path,
    record: &mut Record,
    host: &Host,
    file: &Path,
    old: &str,
    new: &str,
    entries: Vec<plan::Remembered>,
) -> anyhow::Result<PathBuf> {
    let before = record.clone();
    write::writable(file)?;
    let backup =
        write::backup(&state.join("backups"), file, old.as_bytes()).with_context(|| {
            format!(
                "cannot back it up in {}; it was left untouched",
                state.display()
            )
        })?;
    record.add(host.id, file, entries);
    record.save(state).with_context(|| {
        format!(
            "cannot record the change in {}; it was left untouched",
            state.display()
        )
    })?;
    if let Err(e) = write::replace(file, old.as_bytes(), new.as_bytes()) {
        *record = before;
        record.save(state)?;
        return Err(e.into());
    }
    Ok(backup)
}

fn unwrap_hosts(context: &Context, args: UnwrapArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let hosts = chosen(&args.hosts)?;
    let state = context.state();
    let mut record = Record::load(&state).map_err(UsageError)?;
    let mut refused = 0;
    let files: Vec<_> = record
        .files
        .iter()
        .filter(|f| hosts.iter().any(|h| h.id == f.host))
        .cloned()
        .collect();
    if files.is_empty() {
        writeln!(
            out,
            "Nothing to unwrap: rootsctl has no record of wrapping these hosts' servers."
        )?;
    }
    for f in files {
        let shown = escape(&f.file.to_string_lossy()).into_owned();
        let Some(host) = table::find(&f.host) else {
            continue;
        };
        let text = match write::read_host(&f.file) {
            Ok(Some(bytes)) => String::from_utf8(bytes).map_err(|_| "it is not UTF-8".to_owned()),
            Ok(None) => {
                // A host saving the file by removing it first is in the middle of a save; the
                // record is all that is left to restore from, so it is kept.
                eprintln!(
                    "rootsctl: {shown}: the file is not there, so its {} wrapped server(s) stay recorded: if its host is saving it, retry; if it is gone for good, so are they (backups in {})",
                    f.entries.len(),
                    escape(&state.join("backups").to_string_lossy())
                );
                refused += 1;
                continue;
            }
            Err(e) => Err(format!("cannot read it: {e}")),
        };
        let planned = text.and_then(|t| {
            plan::unwrap(
                &t,
                host.format.editor(),
                &host.shape,
                &f.entries,
                context.proxy,
            )
            .map(|p| (t, p))
        });
        let (text, (planned, outcomes)) = match planned {
            Ok(ok) => ok,
            Err(e) => {
                eprintln!(
                    "rootsctl: {shown}: {}; it was left untouched: fix it and retry",
                    escape(&e)
                );
                refused += 1;
                continue;
            }
        };
        let name = |e: &plan::Remembered| escape(e.path.last().map_or("", |s| s)).into_owned();
        let mut restored = Vec::new();
        for (entry, outcome) in f.entries.iter().zip(&outcomes) {
            match outcome {
                Outcome::Restored => restored.push(name(entry)),
                Outcome::EditedSince => {
                    eprintln!(
                        "rootsctl: {shown}: {} was edited since rootsctl wrapped it, so it is left as it is (and still remembered): undo that edit, or unwrap it by hand (backups in {})",
                        name(entry),
                        escape(&state.join("backups").to_string_lossy())
                    );
                    refused += 1;
                }
                Outcome::Missing => {
                    eprintln!(
                        "rootsctl: {shown}: {} is not in the file, so it stays recorded: if its host is saving the file, retry; if you removed it, put it back or leave it (backups in {})",
                        name(entry),
                        escape(&state.join("backups").to_string_lossy())
                    );
                    refused += 1;
                }
                Outcome::Gone => writeln!(
                    out,
                    "{}: {shown}: {} is no longer wrapped there; forgotten",
                    host.id,
                    name(entry)
                )?,
            }
        }
        let keep: Vec<plan::Remembered> = f
            .entries
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| matches!(o, Outcome::EditedSince | Outcome::Missing))
            .map(|(e, _)| e.clone())
            .collect();
        if args.dry_run {
            out.write_all(diff::unified(&shown, "unwrapped", &text, &planned.edits).as_bytes())?;
            continue;
        }
        if !restored.is_empty() {
            if let Some(pids) = context.claude_busy(host, &f.file) {
                eprintln!(
                    "rootsctl: {shown}: Claude Code is running (pid {}) and rewrites this file from memory; it was left untouched: quit every Claude Code session and retry",
                    join(&pids)
                );
                refused += 1;
                continue;
            }
            let written = write::backup(&state.join("backups"), &f.file, text.as_bytes())
                .map_err(anyhow::Error::from)
                .and_then(|backup| {
                    write::replace(&f.file, text.as_bytes(), planned.text.as_bytes())
                        .map(|()| backup)
                        .map_err(Into::into)
                });
            match written {
                Ok(backup) => {
                    writeln!(
                        out,
                        "{}: {shown}: restored {} ({}); backup: {}",
                        host.id,
                        restored.len(),
                        restored.join(", "),
                        escape(&backup.to_string_lossy())
                    )?;
                    writeln!(out, "  next: {}", host.after)?;
                }
                Err(e) => {
                    eprintln!("rootsctl: {shown}: {}", escape(&format!("{e:#}")));
                    refused += 1;
                    continue;
                }
            }
        }
        record.retain(&f.file, |e| keep.contains(e));
        record.save(&state)?;
    }
    if refused > 0 {
        return Err(HostsRefused(refused).into());
    }
    Ok(())
}

fn join(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
