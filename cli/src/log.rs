//! `rootsctl log`: the daemon's history of changes, newest first, fetched a page at a time, as
//! a table for people or as JSON.
//!
//! Everything in an entry that came from outside (paths, names, user and process names, the
//! client's claimed name, a session's label) is escaped in the table ([`crate::output`]);
//! `--json` prints the daemon's strings exactly.

use std::io::Write;

use rootsd_proto::wire::{self, Log, LogEntry, LogParams, LogResult, Who, code};

use crate::args::LogArgs;
use crate::autostart::Target;
use crate::errors::ClientError;
use crate::output::{self, describe, display_path, escape, table};

pub async fn run(target: &Target, args: LogArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let mut client = target.connect().await?;
    let wanted = args.count as usize;
    let mut log = LogResult {
        entries: Vec::new(),
        more: false,
        recorded_from: 1,
        capacity: 0,
    };
    // The daemon answers in pages that fit one line; ask for the next until there are enough.
    loop {
        let page = client
            .call::<Log>(&LogParams {
                workspace: args.workspace.clone(),
                limit: Some(wanted - log.entries.len()),
                before: log.entries.last().map(|e| e.revision),
            })
            .await
            .map_err(older_daemon)?;
        let got_none = page.entries.is_empty();
        log.entries.extend(page.entries);
        log.more = page.more;
        log.recorded_from = page.recorded_from;
        log.capacity = page.capacity;
        if !log.more || got_none || log.entries.len() >= wanted {
            break;
        }
    }
    if log.entries.len() > wanted {
        // A daemon that sent more than asked: show what was asked for.
        log.entries.truncate(wanted);
        log.more = true;
    }
    if args.json.json {
        return Ok(output::json(out, &log)?);
    }
    let scope = args
        .workspace
        .as_ref()
        .map(|w| format!(" for workspace {w}"))
        .unwrap_or_default();
    if log.entries.is_empty() {
        writeln!(out, "no changes recorded{scope}")?;
    } else {
        let mut rows = vec![
            ["TIME", "REV", "WORKSPACE", "WHO", "CHANGE"]
                .map(str::to_owned)
                .to_vec(),
        ];
        rows.extend(log.entries.iter().map(|entry| {
            vec![
                output::unix_time(entry.time_unix_ms / 1000),
                entry.revision.to_string(),
                entry.workspace.to_string(),
                who(&entry.who),
                change(entry),
            ]
        }));
        table(out, &rows)?;
    }
    // Reached the start of what is kept: say whether older changes exist that are not.
    if !log.more && log.recorded_from > 1 {
        out.flush()?;
        eprintln!(
            "changes before revision {} are not recorded: rootsd keeps the last {} changes, and none made before it kept a history",
            log.recorded_from, log.capacity
        );
    }
    Ok(())
}

/// A daemon from before the history knows no `log`: say so rather than list its methods.
fn older_daemon(error: ClientError) -> anyhow::Error {
    match &error {
        ClientError::Refused(refusal) if refusal.code == code::METHOD_NOT_FOUND => {
            anyhow::Error::new(error).context(
                "this rootsd keeps no history of changes: it is older than rootsctl; restart it after upgrading",
            )
        }
        _ => error.into(),
    }
}

/// Who made a change: `ana (uid 1000), rootsctl[5151]`; for a session,
/// `session 12 "label" of ana (uid 1000), rootsctl[5150]`; for the daemon, `rootsd: REASON`.
pub fn who(who: &Who) -> String {
    match who {
        Who::Peer(peer) => peer_of(peer),
        Who::Session { id, label, peer } => {
            let label = if label.is_empty() {
                String::new()
            } else {
                format!(" ({})", escape(label))
            };
            format!("session {id}{label} of {}", peer_of(peer))
        }
        Who::Daemon { reason } => format!("rootsd: {}", escape(reason)),
        Who::Unknown => "-".to_owned(),
    }
}

fn peer_of(peer: &wire::LoggedPeer) -> String {
    let user = match &peer.user {
        Some(name) => format!("{} (uid {})", escape(name), peer.uid),
        None => format!("uid {}", peer.uid),
    };
    let process = match (&peer.process, peer.pid) {
        (Some(name), Some(pid)) => format!(", {}[{pid}]", escape(name)),
        (Some(name), None) => format!(", {}", escape(name)),
        (None, Some(pid)) => format!(", pid {pid}"),
        (None, None) => String::new(),
    };
    format!("{user}{process}")
}

/// What a change did, as `rootsctl log` shows it: `+/new/dir  renamed /dir (old → new)  -/old/dir`,
/// then how many roots the entry does not list. A rename is spelled out: a `~` before a path
/// would read as a home directory.
pub fn change(entry: &LogEntry) -> String {
    let mut parts: Vec<String> = Vec::new();
    parts.extend(
        entry
            .added
            .iter()
            .map(|root| format!("+{}", describe(root))),
    );
    parts.extend(entry.renamed.iter().map(|renamed| {
        let root = rootsd_proto::Root {
            uri: renamed.uri.clone(),
            name: renamed.name.clone(),
        };
        let name = |n: &Option<String>| {
            n.as_deref()
                .map_or_else(|| "-".to_owned(), |n| escape(n).into_owned())
        };
        output::renamed(
            &display_path(&root),
            &name(&renamed.previous_name),
            &name(&renamed.name),
        )
    }));
    parts.extend(
        entry
            .removed
            .iter()
            .map(|root| format!("-{}", describe(root))),
    );
    let omitted = &entry.omitted;
    let unlisted = omitted.added + omitted.renamed + omitted.removed;
    if unlisted > 0 {
        parts.push(format!(
            "and {unlisted} more ({} added, {} renamed, {} removed)",
            omitted.added, omitted.renamed, omitted.removed
        ));
    }
    if parts.is_empty() {
        // The roots stayed as they were; who holds them changed (a root a session published
        // was added by hand too, and so adopted).
        return "(who holds the roots changed)".to_owned();
    }
    parts.join("  ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rootsd_proto::Root;
    use rootsd_proto::wire::{LoggedPeer, Omitted, Renamed};

    fn ana() -> LoggedPeer {
        LoggedPeer {
            uid: 1000,
            user: Some("ana".into()),
            pid: Some(5151),
            process: Some("rootsctl".into()),
            client: Some("rootsctl 0.1.0".into()),
        }
    }

    #[test]
    fn who_names_the_user_and_the_process_as_the_kernel_saw_them() {
        assert_eq!(who(&Who::Peer(ana())), "ana (uid 1000), rootsctl[5151]");
        let stranger = LoggedPeer {
            uid: 1002,
            ..LoggedPeer::default()
        };
        assert_eq!(who(&Who::Peer(stranger.clone())), "uid 1002");
        let gone = LoggedPeer {
            pid: Some(7),
            ..stranger
        };
        assert_eq!(who(&Who::Peer(gone)), "uid 1002, pid 7");
        let session = Who::Session {
            id: 12,
            label: "node\nserver".into(),
            peer: ana(),
        };
        assert_eq!(
            who(&session),
            "session 12 (node\\nserver) of ana (uid 1000), rootsctl[5151]"
        );
        let daemon = Who::Daemon {
            reason: "session 12 ended".into(),
        };
        assert_eq!(who(&daemon), "rootsd: session 12 ended");
        assert_eq!(who(&Who::Unknown), "-");
        let forged = LoggedPeer {
            user: Some("ana\x1b[2J".into()),
            process: Some("x\u{202e}".into()),
            ..ana()
        };
        assert_eq!(
            who(&Who::Peer(forged)),
            "ana\\x1b[2J (uid 1000), x\\u{202e}[5151]"
        );
    }

    #[test]
    fn a_change_shows_what_was_added_renamed_and_removed_escaped() {
        let root = |uri: &str, name: &str| Root {
            uri: uri.into(),
            name: Some(name.into()),
        };
        let entry = LogEntry {
            revision: 9,
            time_unix_ms: 1_796_037_667_123,
            workspace: Default::default(),
            added: vec![
                root("file:///srv/new", "new"),
                root("file:///srv/x%0Ay", "x\ny"),
            ],
            renamed: vec![Renamed {
                uri: "file:///srv/app".into(),
                name: Some("main app".into()),
                previous_name: Some("app".into()),
            }],
            removed: vec![root("file:///srv/old", "legacy")],
            omitted: Omitted::default(),
            who: Who::Peer(ana()),
        };
        assert_eq!(
            change(&entry),
            "+/srv/new  +/srv/x\\ny  renamed /srv/app (app → main app)  -/srv/old (legacy)"
        );
        let huge = LogEntry {
            added: vec![],
            renamed: vec![],
            removed: vec![root("file:///a", "a")],
            omitted: Omitted {
                added: 0,
                renamed: 0,
                removed: 40,
            },
            ..entry
        };
        assert_eq!(
            change(&huge),
            "-/a  and 40 more (0 added, 0 renamed, 40 removed)"
        );
    }
}
