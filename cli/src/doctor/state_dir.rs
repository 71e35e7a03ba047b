//! The state directory check.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use rootsd_proto::paths::{self, Environment};
use rootsd_proto::wire::StatusResult;

use super::{Check, Me, Outcome, mode_of};

/// The state directory: the daemon's own if it answered (under systemd, `StateDirectory=`
/// decides it), else the one a rootsd started by rootsctl would use.
pub(super) fn check(
    env: &Environment,
    status: Option<&StatusResult>,
    me: &Me,
    shared: bool,
) -> Check {
    const NAME: &str = "state dir";
    const NEVER: &str = "rootsctl never opens the database; only rootsd does";
    let (dir, whose) = match status {
        Some(status) => (PathBuf::from(&status.state_dir), "the running rootsd's"),
        None => match paths::state_dir(env, None) {
            Ok(dir) => (dir, "where a rootsd started by rootsctl keeps its state"),
            Err(err) => {
                return Check::new(NAME, Outcome::Fail, err.to_string())
                    .fix("set HOME, XDG_STATE_HOME or ROOTSD_STATE_DIR");
            }
        },
    };
    let d = dir.display();
    let meta = match fs::metadata(&dir) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound && status.is_none() => {
            return Check::new(
                NAME,
                Outcome::Ok,
                format!(
                    "{d} ({whose}) does not exist yet; rootsd creates it when it first starts ({NEVER})"
                ),
            );
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return Check::new(
                NAME,
                Outcome::Fail,
                format!("{d}, the running rootsd's state directory, is gone: what it stores from now on is lost at restart"),
            )
            .fix("restart rootsd, which recreates it; then re-add your roots");
        }
        Err(err) if shared && err.kind() == io::ErrorKind::PermissionDenied => {
            return Check::new(
                NAME,
                Outcome::Ok,
                format!("{d} belongs to the shared rootsd and is private to it ({NEVER})"),
            );
        }
        Err(err) => {
            return Check::new(NAME, Outcome::Fail, format!("cannot inspect {d}: {err}"))
                .fix("make sure the directories above it are searchable by you");
        }
    };
    if !meta.is_dir() {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!("{d} ({whose}) is not a directory"),
        )
        .fix("move it away, or point ROOTSD_STATE_DIR (or --state-dir) at a directory");
    }
    if meta.uid() != me.uid {
        if shared {
            return Check::new(
                NAME,
                Outcome::Ok,
                format!(
                    "{d} belongs to the shared rootsd (uid {}), as it should ({NEVER})",
                    meta.uid()
                ),
            );
        }
        return Check::new(
            NAME,
            Outcome::Fail,
            format!(
                "{d} ({whose}) belongs to uid {}, not to you (uid {})",
                meta.uid(),
                me.uid
            ),
        )
        .fix(format!(
            "give it back to yourself (chown -R {} {d}), or point ROOTSD_STATE_DIR at a directory you own",
            me.uid
        ));
    }
    let writable = rustix::fs::access(
        &dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    );
    if writable.is_err() {
        return Check::new(
            NAME,
            Outcome::Fail,
            format!("{d} ({whose}) is not writable, so rootsd cannot store anything"),
        )
        .fix(format!("chmod 700 {d}"));
    }
    let mode = mode_of(&meta);
    if mode & 0o077 != 0 {
        return Check::new(
            NAME,
            Outcome::Note,
            format!(
                "{d} ({whose}) is mode {mode:04o}: other users can look at your roots ({NEVER})"
            ),
        )
        .fix(format!("chmod 700 {d}"));
    }
    Check::new(
        NAME,
        Outcome::Ok,
        format!("{d} ({whose}) exists, is yours and writable, mode {mode:04o} ({NEVER})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::test_support::{chmod, me};

    #[test]
    fn the_state_dir_may_be_missing_only_before_the_first_start() {
        let tmp = tempfile::tempdir().unwrap();
        let env = Environment {
            rootsd_state_dir: Some(tmp.path().join("state").into_os_string()),
            ..Environment::default()
        };
        let check = super::check(&env, None, &me(), false);
        assert_eq!(check.outcome, Outcome::Ok, "{check:?}");
        assert!(check.summary.contains("does not exist yet"), "{check:?}");
        assert!(check.summary.contains("never opens the database"));

        fs::create_dir(tmp.path().join("state")).unwrap();
        chmod(&tmp.path().join("state"), 0o700);
        let check = super::check(&env, None, &me(), false);
        assert_eq!(check.outcome, Outcome::Ok, "{check:?}");
        assert!(check.summary.contains("writable"), "{check:?}");
    }
}
