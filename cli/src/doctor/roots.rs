//! The roots check: names every root whose directory is gone (missing, not a directory,
//! unreadable, or on a filesystem that does not answer), workspace by workspace, with the
//! command that removes it if it will not come back.
//!
//! A gone root is a note, not a failure: it may come back (a drive not mounted yet, a network
//! share that is down), servers skip it by themselves, and nothing about rootsd is broken. Like
//! every check it only looks: it asks the daemon that already answered for the roots (never
//! starting one) and looks at each directory through [`crate::presence`], within its time
//! limit.

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use rootsd_proto::Root;
use rootsd_proto::wire::{EmptyParams, ListRoots, ListWorkspaces, RootsSnapshot, WorkspaceParams};

use super::daemon::ANSWER_TIMEOUT;
use super::{Check, Outcome};
use crate::client::{Client, ClientError};
use crate::output::{describe, display_path};
use crate::presence::{self, Gone, Presence, Reason};

const NAME: &str = "roots";

/// Checks the roots of every workspace; `answered` says whether the daemon answered the daemon
/// check.
pub(super) async fn check(socket: &Path, client_name: &str, answered: bool) -> Vec<Check> {
    if !answered {
        return vec![Check::new(
            NAME,
            Outcome::Skip,
            "not checked: the daemon did not answer",
        )];
    }
    let workspaces =
        match tokio::time::timeout(ANSWER_TIMEOUT, every_workspace(socket, client_name)).await {
            Ok(Ok(workspaces)) => workspaces,
            Ok(Err(err)) => {
                return vec![Check::new(
                    NAME,
                    Outcome::Skip,
                    format!("not checked: the daemon did not list the roots: {err}"),
                )];
            }
            Err(_elapsed) => {
                return vec![Check::new(
                    NAME,
                    Outcome::Skip,
                    format!(
                        "not checked: the daemon did not list the roots within {}s",
                        ANSWER_TIMEOUT.as_secs()
                    ),
                )];
            }
        };
    let roots: Vec<&Root> = workspaces.iter().flat_map(|w| &w.roots).collect();
    let found = presence::check(&roots);
    judge(&workspaces, &found)
}

/// The roots of every workspace, from a daemon that is already running.
async fn every_workspace(
    socket: &Path,
    client_name: &str,
) -> Result<Vec<RootsSnapshot>, ClientError> {
    let mut client = Client::connect(socket, client_name, ANSWER_TIMEOUT).await?;
    let names = client.call::<ListWorkspaces>(&EmptyParams {}).await?;
    let mut workspaces = Vec::with_capacity(names.workspaces.len());
    for workspace in names.workspaces {
        workspaces.push(
            client
                .call::<ListRoots>(&WorkspaceParams {
                    workspace: workspace.name,
                })
                .await?
                .into(),
        );
    }
    Ok(workspaces)
}

/// The verdicts: one `ok` when no root is gone, else one note per workspace that has gone
/// roots. `found` holds what was found for every root of `workspaces`, in order.
fn judge(workspaces: &[RootsSnapshot], found: &[Presence]) -> Vec<Check> {
    let mut found = found.iter();
    let mut notes = Vec::new();
    for workspace in workspaces {
        let gone: Vec<(&Root, &Gone)> = workspace
            .roots
            .iter()
            .zip(found.by_ref())
            .filter_map(|(root, presence)| presence.gone().map(|gone| (root, gone)))
            .collect();
        if !gone.is_empty() {
            notes.push(note(workspace, &gone));
        }
    }
    if !notes.is_empty() {
        return notes;
    }
    let roots: usize = workspaces.iter().map(|w| w.roots.len()).sum();
    let summary = match roots {
        0 => "no roots yet".to_owned(),
        1 => "the one root's directory is there".to_owned(),
        n => format!(
            "the directories of all {n} roots are there ({} workspace(s))",
            workspaces.iter().filter(|w| !w.roots.is_empty()).count()
        ),
    };
    vec![Check::new(NAME, Outcome::Ok, summary)]
}

/// `workspace default: 1 of 3 roots is gone: /srv/old (missing: no such file or directory)`,
/// and the command that removes them.
fn note(workspace: &RootsSnapshot, gone: &[(&Root, &Gone)]) -> Check {
    let w = &workspace.workspace;
    let listed = gone
        .iter()
        .map(|(root, gone)| format!("{} ({gone})", describe(root)))
        .collect::<Vec<_>>()
        .join("; ");
    let verb = if gone.len() == 1 { "is" } else { "are" };
    let arguments = gone
        .iter()
        .map(|(root, gone)| remove_argument(root, gone))
        .collect::<Vec<_>>()
        .join(" ");
    Check::new(
        NAME,
        Outcome::Note,
        format!(
            "workspace {w}: {} of {} roots {verb} gone: {listed}",
            gone.len(),
            workspace.roots.len()
        ),
    )
    .fix(format!(
        "nothing to do for a directory that will come back (a drive or network share not mounted yet); if it will not, remove it: `rootsctl remove -w {w} {arguments}`"
    ))
}

/// How to name `root` to `rootsctl remove` in a command a user can paste: its path, quoted for
/// the shell where needed. Its URI instead when the path cannot be shown exactly (control
/// characters, a backslash, bytes that are not UTF-8, which the display escapes), or when its
/// filesystem did not answer: remove resolves a path on disk, but never looks a URI up.
fn remove_argument(root: &Root, gone: &Gone) -> String {
    let shown = display_path(root);
    let exact = rootsd_proto::root::path_from_uri(&root.uri)
        .is_ok_and(|path| shown.as_bytes() == path.as_os_str().as_bytes());
    if exact && gone.reason != Reason::Unknown {
        shell_word(&shown)
    } else {
        shell_word(&root.uri)
    }
}

/// `text` as one shell word: as it is when no shell treats any of its characters specially,
/// else in single quotes.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:,=@%".contains(&b));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(workspace: &str, paths: &[&str]) -> RootsSnapshot {
        RootsSnapshot {
            workspace: workspace.parse().unwrap(),
            revision: 1,
            roots: paths
                .iter()
                .map(|p| Root {
                    uri: rootsd_proto::root::uri_from_path(Path::new(p)).unwrap(),
                    name: Some(rootsd_proto::root::default_name(Path::new(p))),
                })
                .collect(),
        }
    }

    fn gone(reason: Reason, detail: &str) -> Presence {
        Presence::Gone(Gone {
            reason,
            detail: detail.to_owned(),
        })
    }

    #[test]
    fn all_present_is_ok_and_counts_the_roots() {
        let workspaces = [snapshot("default", &["/a", "/b"]), snapshot("w", &["/c"])];
        let checks = judge(
            &workspaces,
            &[Presence::Present, Presence::Present, Presence::NotChecked],
        );
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0].outcome, Outcome::Ok);
        assert_eq!(
            checks[0].summary,
            "the directories of all 3 roots are there (2 workspace(s))"
        );
        assert_eq!(judge(&[], &[])[0].summary, "no roots yet");
        assert_eq!(
            judge(&[snapshot("default", &["/a"])], &[Presence::Present])[0].summary,
            "the one root's directory is there"
        );
    }

    #[test]
    fn each_workspace_with_gone_roots_gets_a_note_naming_them_and_how_to_remove_them() {
        let workspaces = [
            snapshot("default", &["/srv/app", "/srv/old stuff", "/home/it's"]),
            snapshot("fine", &["/srv/app"]),
            snapshot("nfs", &["/mnt/share/x"]),
        ];
        let found = [
            Presence::Present,
            gone(Reason::Missing, "no such file or directory"),
            gone(Reason::NotADirectory, "it is a regular file"),
            Presence::Present,
            gone(Reason::Unknown, "its filesystem did not answer within 2s"),
        ];
        let checks = judge(&workspaces, &found);
        assert_eq!(checks.len(), 2, "{checks:?}");
        assert!(
            checks
                .iter()
                .all(|c| c.outcome == Outcome::Note && c.name == "roots")
        );
        assert_eq!(
            checks[0].summary,
            "workspace default: 2 of 3 roots are gone: /srv/old stuff (missing: no such file or directory); /home/it's (not a directory: it is a regular file)"
        );
        let fix = checks[0].fix.as_deref().unwrap();
        assert!(
            fix.ends_with(
                r"remove it: `rootsctl remove -w default '/srv/old stuff' '/home/it'\''s'`"
            ),
            "{fix}"
        );
        assert_eq!(
            checks[1].summary,
            "workspace nfs: 1 of 1 roots is gone: /mnt/share/x (unknown: its filesystem did not answer within 2s)"
        );
        // Removing by path would look the path up on the filesystem that does not answer.
        let fix = checks[1].fix.as_deref().unwrap();
        assert!(
            fix.ends_with("`rootsctl remove -w nfs file:///mnt/share/x`"),
            "{fix}"
        );
    }

    #[test]
    fn a_path_the_display_escapes_is_removed_by_its_uri() {
        let workspace = snapshot("default", &["/srv/a\nb", "/srv/back\\slash"]);
        let missing = gone(Reason::Missing, "no such file or directory");
        let checks = judge(
            std::slice::from_ref(&workspace),
            &[missing.clone(), missing],
        );
        assert!(
            checks[0].summary.contains(r"/srv/a\nb (missing"),
            "{}",
            checks[0].summary
        );
        assert!(!checks[0].summary.contains('\n'));
        let fix = checks[0].fix.as_deref().unwrap();
        assert!(
            fix.ends_with(&format!(
                "`rootsctl remove -w default {} {}`",
                workspace.roots[0].uri, workspace.roots[1].uri
            )),
            "{fix}"
        );
    }
}
