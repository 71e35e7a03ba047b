//! One function per subcommand. Each talks to the daemon through [`Client`] and prints through
//! [`crate::output`]; none opens the database.

use std::io::Write;

use anyhow::{Context as _, bail};
use rootsd_proto::root::ListRootsResult;
use rootsd_proto::wire::{
    AddParams, AddRoots, ChangeResult, EmptyParams, Era, FetchBehaviour, ListRoots, ListSessions,
    ListWorkspaces, ListedRoot, RemoveParams, RemoveRoots, RootOrigin, RootsChanged, RootsListing,
    RootsSnapshot, SessionsParams, SessionsResult, Status, StoreState, Watch, WatchParams,
    WorkspaceParams, WorkspaceVia,
};
use rootsd_proto::workspace::DEFAULT_WORKSPACE;
use rootsd_proto::{Root, WorkspaceName};
use serde_json::json;

use crate::args::{AddArgs, JsonArg, ListArgs, RemoveArgs, WatchArgs, refuse_blank_arguments};
use crate::autostart::Target;
use crate::errors::{ResolveError, UsageError};
use crate::output::{self, describe, display_name, display_path, escape, table};
use crate::presence::{self, Gone, Presence};
use crate::resolve::{gone_uri, remove_target, resolve_root};

pub async fn add(target: &Target, args: AddArgs, out: &mut impl Write) -> anyhow::Result<()> {
    refuse_blank_arguments("PATH|URI", &args.paths)?;
    if args.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        bail!(UsageError(
            "--name is empty: give a name, or leave --name out to name the root after its directory"
                .into()
        ));
    }
    if args.name.is_some() && args.paths.len() > 1 {
        bail!(UsageError(
            "--name names a single root, but several paths were given: add them one at a time"
                .into()
        ));
    }
    let cwd = current_dir()?;
    // Without --name the daemon names a new root after its directory and leaves an existing
    // root's name alone: only an explicit --name renames.
    let mut uris = Vec::with_capacity(args.paths.len());
    let mut gone = Vec::new();
    for (index, input) in args.paths.iter().enumerate() {
        match resolve_root(input, &cwd, args.allow_missing) {
            Ok(resolved) => uris.push(Some(resolved.uri)),
            Err(
                err @ (ResolveError::Missing { .. }
                | ResolveError::NotDirectory { .. }
                | ResolveError::Io { .. }),
            ) => {
                uris.push(None);
                gone.push((index, err));
            }
            Err(other) => return Err(other.into()),
        }
    }
    let mut client = target.connect().await?;
    if !gone.is_empty() {
        // A path whose directory is gone may be a root already (`list` marks it): it is renamed,
        // or found unchanged, whatever its directory, since the daemon never looks at one. Only
        // a path that is not a root yet must exist to be added.
        let listing = client
            .call::<ListRoots>(&WorkspaceParams {
                workspace: args.workspace.workspace.clone(),
            })
            .await?;
        for (index, err) in gone {
            let input = &args.paths[index];
            match gone_uri(input, &cwd) {
                Some(uri) if listing.roots.iter().any(|r| r.root.uri == uri) => {
                    uris[index] = Some(uri);
                }
                _ => match err {
                    ResolveError::Missing { input } => bail!(ResolveError::NewMissing {
                        input,
                        workspace: args.workspace.workspace.clone(),
                    }),
                    other => bail!(other),
                },
            }
        }
    }
    let roots = uris
        .into_iter()
        .map(|uri| Root {
            uri: uri.expect("every path resolved or refused"),
            name: args.name.clone(),
        })
        .collect();
    let result = client
        .call::<AddRoots>(&AddParams {
            workspace: args.workspace.workspace,
            roots,
        })
        .await?;
    print_change(out, &result, args.json.json)?;
    if args.wait.wait {
        crate::wait::wait_for_sessions(&mut client, &result, args.wait.timeout, out).await?;
    }
    Ok(())
}

pub async fn remove(target: &Target, args: RemoveArgs, out: &mut impl Write) -> anyhow::Result<()> {
    refuse_blank_arguments("PATH|URI|NAME", &args.targets)?;
    let cwd = current_dir()?;
    let targets = args
        .targets
        .iter()
        .map(|input| remove_target(input, &cwd))
        .collect::<Result<Vec<_>, _>>()?;
    let mut client = target.connect().await?;
    let result = client
        .call::<RemoveRoots>(&RemoveParams {
            workspace: args.workspace.workspace,
            targets,
        })
        .await?;
    if result.total == 0 && !result.removed.is_empty() {
        eprintln!(
            "rootsctl: warning: workspace {} has no roots left; some servers (the reference filesystem server among them) keep their previous roots when sent an empty list",
            result.workspace
        );
    }
    print_change(out, &result, args.json.json)?;
    if args.wait.wait {
        crate::wait::wait_for_sessions(&mut client, &result, args.wait.timeout, out).await?;
    }
    Ok(())
}

pub async fn list(target: &Target, args: ListArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let mut client = target.connect().await?;
    let names: Vec<WorkspaceName> = if args.all {
        client
            .call::<ListWorkspaces>(&EmptyParams {})
            .await?
            .workspaces
            .into_iter()
            .map(|w| w.name)
            .collect()
    } else {
        vec![args.workspace.unwrap_or_default()]
    };
    let mut listings = Vec::with_capacity(names.len());
    for workspace in names {
        listings.push(
            client
                .call::<ListRoots>(&WorkspaceParams { workspace })
                .await?,
        );
    }
    // Done with the daemon before looking at the directories, which may take seconds.
    drop(client);
    if args.json.json && !args.long {
        // Exactly MCP's shapes: roots are `{"uri","name"}`; nothing is looked at on disk.
        if args.all {
            let workspaces: Vec<_> = listings
                .iter()
                .map(|l| json!({"name": l.workspace, "revision": l.revision, "roots": bare_roots(l)}))
                .collect();
            return Ok(output::json(out, &json!({ "workspaces": workspaces }))?);
        }
        let only = listings.pop().expect("one workspace was listed");
        return Ok(output::json(
            out,
            &ListRootsResult {
                roots: bare_roots(&only),
            },
        )?);
    }
    let found = look_at_roots(&listings);
    if args.json.json {
        // Written from structs, not `json!`, so that each root keeps MCP's key order.
        let mut lists = listings
            .iter()
            .zip(&found)
            .map(|(listing, found)| LongList {
                name: args.all.then_some(&listing.workspace),
                revision: args.all.then_some(listing.revision),
                roots: LongRoot::all(listing, found),
            });
        if args.all {
            let workspaces: Vec<LongList<'_>> = lists.collect();
            return Ok(output::json(out, &LongWorkspaces { workspaces })?);
        }
        let only = lists.next().expect("one workspace was listed");
        return Ok(output::json(out, &only)?);
    }
    if listings.is_empty() {
        writeln!(
            out,
            "no workspaces yet (add a root with `rootsctl add PATH`)"
        )?;
    }
    for (index, (listing, found)) in listings.iter().zip(&found).enumerate() {
        if args.all {
            if index > 0 {
                writeln!(out)?;
            }
            writeln!(out, "{}:", listing.workspace)?;
        }
        print_roots(out, listing, found, args.long)?;
    }
    Ok(())
}

fn bare_roots(listing: &RootsListing) -> Vec<Root> {
    listing.roots.iter().map(|r| r.root.clone()).collect()
}

/// `rootsctl list --all --long --json`: `{"workspaces":[…]}`, as without `--long`.
#[derive(serde::Serialize)]
struct LongWorkspaces<'a> {
    workspaces: Vec<LongList<'a>>,
}

/// One workspace's roots as `rootsctl list --long --json` prints them: `{"roots":[…]}`, a
/// `ListRootsResult` whose roots say more; with `--all`, also the workspace's `name` and
/// `revision` first, as without `--long`.
#[derive(serde::Serialize)]
struct LongList<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a WorkspaceName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<u64>,
    roots: Vec<LongRoot<'a>>,
}

/// A root as `rootsctl list --long --json` prints it: MCP's `Root` (so that any reader of a
/// `ListRootsResult` still reads it), then what rootsd and rootsctl know about it, each field
/// absent when there is nothing to say.
#[derive(serde::Serialize)]
struct LongRoot<'a> {
    #[serde(flatten)]
    root: &'a Root,
    /// Who holds it: by hand, and/or sessions that publish it.
    #[serde(skip_serializing_if = "<[RootOrigin]>::is_empty")]
    origin: &'a [RootOrigin],
    /// Why its directory is not there for servers; absent when it is (or was not looked at:
    /// not a local file:// URI).
    #[serde(skip_serializing_if = "Option::is_none")]
    gone: Option<&'a Gone>,
}

impl<'a> LongRoot<'a> {
    /// The roots of `listing`, each with what was `found` about it.
    fn all(listing: &'a RootsListing, found: &'a [Presence]) -> Vec<Self> {
        listing
            .roots
            .iter()
            .zip(found)
            .map(|(listed, presence)| Self {
                root: &listed.root,
                origin: &listed.origin,
                gone: presence.gone(),
            })
            .collect()
    }
}

/// Whether each root's directory is there, per workspace, in the listings' order. All are
/// looked at together, so one time limit bounds the whole list.
fn look_at_roots(listings: &[RootsListing]) -> Vec<Vec<Presence>> {
    let roots: Vec<&Root> = listings
        .iter()
        .flat_map(|l| l.roots.iter().map(|r| &r.root))
        .collect();
    let mut found = presence::check(&roots).into_iter();
    listings
        .iter()
        .map(|l| found.by_ref().take(l.roots.len()).collect())
        .collect()
}

fn print_roots(
    out: &mut impl Write,
    listing: &RootsListing,
    found: &[Presence],
    long: bool,
) -> anyhow::Result<()> {
    if listing.roots.is_empty() {
        // The hint is a command to copy: outside the default workspace it must name the
        // workspace, or it would add the root to another one.
        let workspace = if listing.workspace.as_str() == DEFAULT_WORKSPACE {
            String::new()
        } else {
            format!("-w {} ", listing.workspace)
        };
        writeln!(
            out,
            "no roots in workspace {} (add one with `rootsctl add {workspace}PATH`)",
            listing.workspace
        )?;
        return Ok(());
    }
    // Published roots go when their session ends, so the table says so whenever there are any.
    let origins = long
        || listing.roots.iter().any(|r| {
            r.origin
                .iter()
                .any(|o| matches!(o, RootOrigin::Session { .. }))
        });
    let mut header = vec!["NAME".to_owned(), "PATH".to_owned()];
    if origins {
        header.push("ORIGIN".to_owned());
    }
    header.push("STATUS".to_owned());
    let mut rows = vec![header];
    rows.extend(listing.roots.iter().zip(found).map(|(listed, presence)| {
        let mut row = vec![display_name(&listed.root), display_path(&listed.root)];
        if origins {
            row.push(describe_origin(listed));
        }
        row.push(presence.status());
        row
    }));
    Ok(table(out, &rows)?)
}

/// `hand`, `session 3 (code, pid 4242)`, or both, for the ORIGIN column.
fn describe_origin(listed: &ListedRoot) -> String {
    if listed.origin.is_empty() {
        return "-".to_owned();
    }
    listed
        .origin
        .iter()
        .map(|origin| match origin {
            RootOrigin::Hand => "hand".to_owned(),
            RootOrigin::Session {
                session,
                label,
                pid,
            } => {
                let label = if label.is_empty() {
                    "-".into()
                } else {
                    escape(label)
                };
                format!("session {session} ({label}, pid {pid})")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub async fn workspaces(
    target: &Target,
    args: JsonArg,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut client = target.connect().await?;
    let result = client.call::<ListWorkspaces>(&EmptyParams {}).await?;
    if args.json {
        return Ok(output::json(out, &result)?);
    }
    if result.workspaces.is_empty() {
        writeln!(
            out,
            "no workspaces yet (add a root with `rootsctl add PATH`)"
        )?;
        return Ok(());
    }
    let mut rows = vec![vec!["WORKSPACE".into(), "ROOTS".into(), "SESSIONS".into()]];
    rows.extend(result.workspaces.iter().map(|w| {
        vec![
            w.name.to_string(),
            w.roots.to_string(),
            w.sessions.to_string(),
        ]
    }));
    Ok(table(out, &rows)?)
}

pub async fn status(target: &Target, args: JsonArg, out: &mut impl Write) -> anyhow::Result<()> {
    let mut client = target.connect().await?;
    let s = client.call::<Status>(&EmptyParams {}).await?;
    if args.json {
        return Ok(output::json(out, &s)?);
    }
    let socket = if s.socket_activated {
        format!("{} (from systemd)", escape(&s.socket))
    } else {
        escape(&s.socket).into_owned()
    };
    let rows = vec![
        vec![
            "version:".into(),
            format!("{} (protocol {})", s.daemon_version, s.protocol_version),
        ],
        vec!["pid:".into(), s.pid.to_string()],
        vec!["uptime:".into(), output::duration(s.uptime_secs)],
        vec!["socket:".into(), socket],
        vec!["state dir:".into(), escape(&s.state_dir).into_owned()],
        vec!["revision:".into(), s.revision.to_string()],
        vec!["roots:".into(), s.roots.to_string()],
        vec!["workspaces:".into(), s.workspaces.to_string()],
        vec!["clients:".into(), s.clients.to_string()],
        vec!["sessions:".into(), s.sessions.to_string()],
        vec![
            "store:".into(),
            match s.store.state {
                StoreState::Ok => "ok".to_owned(),
                StoreState::Degraded => format!(
                    "DEGRADED{}: {}",
                    s.store
                        .since_unix
                        .map(|t| format!(" since {}", output::unix_time(t)))
                        .unwrap_or_default(),
                    s.store.problem.as_deref().unwrap_or("a write failed")
                ),
            },
        ],
    ];
    Ok(table(out, &rows)?)
}

pub async fn watch(target: &Target, args: WatchArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let mut client = target.connect().await?;
    let mut previous: std::collections::HashMap<WorkspaceName, Vec<Root>> = Default::default();
    let workspaces = match &args.workspace {
        Some(w) => vec![w.clone()],
        None => client
            .call::<ListWorkspaces>(&EmptyParams {})
            .await?
            .workspaces
            .into_iter()
            .map(|w| w.name)
            .collect(),
    };
    for workspace in workspaces {
        let snapshot = client
            .call::<ListRoots>(&WorkspaceParams {
                workspace: workspace.clone(),
            })
            .await?;
        previous.insert(
            workspace,
            snapshot.roots.into_iter().map(|r| r.root).collect(),
        );
    }
    let start = client
        .call::<Watch>(&WatchParams {
            workspace: args.workspace.clone(),
        })
        .await?;
    if !args.json.json {
        let scope = args
            .workspace
            .as_ref()
            .map_or("every workspace".to_owned(), |w| format!("workspace {w}"));
        eprintln!(
            "watching {scope} from revision {} (Ctrl-C to stop)",
            start.revision
        );
    }
    loop {
        let snapshot = client.next_push::<RootsChanged>().await?;
        if args.json.json {
            output::json(out, &snapshot)?;
        } else {
            let before = previous
                .get(&snapshot.workspace)
                .cloned()
                .unwrap_or_default();
            writeln!(out, "{}", change_line(&before, &snapshot))?;
        }
        out.flush()?;
        previous.insert(snapshot.workspace.clone(), snapshot.roots);
    }
}

/// `revision 7  default  2 roots  +/new/dir  renamed /dir (old → new)  -/old/dir`
fn change_line(before: &[Root], after: &RootsSnapshot) -> String {
    let mut parts = vec![
        format!("revision {}", after.revision),
        after.workspace.to_string(),
        match after.roots.len() {
            1 => "1 root".to_owned(),
            n => format!("{n} roots"),
        },
    ];
    for root in &after.roots {
        match before.iter().find(|b| b.uri == root.uri) {
            None => parts.push(format!("+{}", describe(root))),
            Some(old) if old.name != root.name => parts.push(output::renamed(
                &display_path(root),
                &display_name(old),
                &display_name(root),
            )),
            Some(_) => {}
        }
    }
    for root in before {
        if !after.roots.iter().any(|a| a.uri == root.uri) {
            parts.push(format!("-{}", describe(root)));
        }
    }
    parts.join("  ")
}

pub async fn sessions(target: &Target, args: JsonArg, out: &mut impl Write) -> anyhow::Result<()> {
    let mut client = target.connect().await?;
    // The daemon answers in pages that fit one line; ask for the next until none follow.
    let mut result = SessionsResult {
        sessions: Vec::new(),
        more: false,
    };
    loop {
        let after = result.sessions.last().map(|s| s.id);
        let page = client
            .call::<ListSessions>(&SessionsParams { after })
            .await?;
        let got_none = page.sessions.is_empty();
        result.sessions.extend(page.sessions);
        if !page.more || got_none {
            break;
        }
    }
    if args.json {
        return Ok(output::json(out, &result)?);
    }
    if result.sessions.is_empty() {
        writeln!(
            out,
            "no MCP sessions (put `rootsctl proxy --` in front of a server command to add one)"
        )?;
        return Ok(());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut rows = vec![
        [
            "ID",
            "LABEL",
            "PID",
            "SERVER",
            "PROTOCOL",
            "ERA",
            "WORKSPACE",
            "LISTCHANGED",
            "FETCHES",
            "FETCHED",
            "REVISION",
            "NOTIFIED",
            "VIA",
            "RESTARTS",
            "WITHHELD",
            "HOSTROOTS",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for s in &result.sessions {
        // The server's name and version and the protocol it chose are the server's own words.
        let server = s.server.as_ref().map_or("-".to_owned(), |i| {
            format!("{} {}", escape(&i.name), escape(&i.version))
                .trim()
                .to_owned()
        });
        rows.push(vec![
            s.id.to_string(),
            if s.label.is_empty() {
                "-".into()
            } else {
                escape(&s.label).into_owned()
            },
            s.pid.to_string(),
            server,
            s.protocol_version
                .as_deref()
                .map_or_else(|| "-".into(), |v| escape(v).into_owned()),
            serde_json::to_value(s.era)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            if s.workspace_missing {
                format!("{} (no such workspace)", s.workspace)
            } else {
                s.workspace.to_string()
            },
            match (s.era, s.list_changed) {
                // 2026-07-28 has no notifications at all.
                (Era::Stateless, _) => "n/a",
                (_, true) => "yes",
                (_, false) => "no",
            }
            .into(),
            match s.fetch_behaviour {
                FetchBehaviour::Unknown => "-",
                FetchBehaviour::AfterNotification => "when told",
                FetchBehaviour::OnUse => "on use",
            }
            .into(),
            s.last_fetch_unix.map_or("never".into(), |t| {
                format!("{} ago", output::duration(now.saturating_sub(t)))
            }),
            s.fetched_revision.map_or("-".into(), |r| r.to_string()),
            s.notifications_sent.to_string(),
            // How the server gets the workspace: it asks for roots, or `rootsctl proxy` starts it
            // with the workspace in its arguments, environment or working directory, or both.
            match s.workspace_via {
                WorkspaceVia::Roots => "roots",
                WorkspaceVia::Arguments => "arguments",
                WorkspaceVia::Both => "both",
            }
            .into(),
            // Restarts for a change of the workspace, and why none runs now if it failed.
            match &s.launch_failure {
                None => s.restarts.to_string(),
                Some(failure) => format!("{} (down: {})", s.restarts, escape(failure)),
            },
            // `rootsctl proxy --map`: the roots this server was not given, and why.
            if s.withheld.is_empty() {
                "-".into()
            } else {
                s.withheld.summary()
            },
            // `rootsctl proxy --host-roots`: what it does with its host's roots, and how many.
            s.host_roots.summary(),
        ]);
    }
    table(out, &rows)?;
    let missing: std::collections::BTreeSet<&WorkspaceName> = result
        .sessions
        .iter()
        .filter(|s| s.workspace_missing)
        .map(|s| &s.workspace)
        .collect();
    for workspace in missing {
        eprintln!(
            "rootsctl: note: workspace {workspace} does not exist, so its sessions' servers are given no roots: create it with `rootsctl add -w {workspace} PATH`, or restart them with a --workspace that exists"
        );
    }
    Ok(())
}

fn print_change(out: &mut impl Write, result: &ChangeResult, json: bool) -> anyhow::Result<()> {
    if json {
        return Ok(output::json(out, result)?);
    }
    let ws = &result.workspace;
    for root in &result.added {
        writeln!(out, "added {} to {ws}", describe(root))?;
    }
    for root in &result.renamed {
        writeln!(out, "renamed {} in {ws}", describe(root))?;
    }
    for root in &result.unchanged {
        writeln!(out, "{} is already in {ws}", describe(root))?;
    }
    for root in &result.removed {
        writeln!(out, "removed {} from {ws}", describe(root))?;
    }
    for root in &result.adopted {
        writeln!(
            out,
            "kept {} in {ws}: a session published it, and now it stays when the session ends",
            describe(root)
        )?;
    }
    Ok(())
}

fn current_dir() -> anyhow::Result<std::path::PathBuf> {
    std::env::current_dir().context("cannot read the current directory to resolve relative paths")
}
