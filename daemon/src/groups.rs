//! Group names and ids, from `/etc/group`: resolving `--admin-group`, and naming groups in the
//! messages that tell a refused peer whom the daemon admits.
//!
//! Only the local group file is read (no NSS, which would take a C library call and `unsafe`):
//! a group that lives elsewhere (LDAP, say) is given by its numeric id instead. This module only
//! reads that file; whom to admit is `server.rs`'s decision.

use std::path::Path;

/// The local group database.
pub const GROUP_FILE: &str = "/etc/group";

/// A group the daemon names in its decisions and messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub gid: u32,
    pub name: String,
}

impl std::fmt::Display for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (gid {})", self.name, self.gid)
    }
}

/// Why `--admin-group` names no group.
#[derive(Debug, thiserror::Error)]
#[error(
    "there is no group {name:?} in {file}: create it (groupadd {name}, or systemd-sysusers with the package's rootsd.conf), or give its numeric id"
)]
pub struct UnknownGroup {
    pub name: String,
    pub file: String,
}

/// Resolves a group given by name or numeric id, from `file` (normally [`GROUP_FILE`]). A
/// numeric id needs no entry; its name is then the number, unless the file names it.
pub fn resolve(given: &str, file: &Path) -> Result<Group, UnknownGroup> {
    let entries = std::fs::read_to_string(file).unwrap_or_default();
    let found = parse(&entries).find(|g| g.name == given);
    if let Some(group) = found {
        return Ok(group);
    }
    match given.parse::<u32>() {
        Ok(gid) => Ok(Group {
            gid,
            name: name_in(&entries, gid).unwrap_or_else(|| given.to_owned()),
        }),
        Err(_) => Err(UnknownGroup {
            name: given.to_owned(),
            file: file.display().to_string(),
        }),
    }
}

/// The group with id `gid`, named from [`GROUP_FILE`] when it has an entry there.
pub fn by_gid(gid: u32) -> Group {
    let entries = std::fs::read_to_string(GROUP_FILE).unwrap_or_default();
    Group {
        gid,
        name: name_in(&entries, gid).unwrap_or_else(|| gid.to_string()),
    }
}

fn name_in(entries: &str, gid: u32) -> Option<String> {
    parse(entries).find(|g| g.gid == gid).map(|g| g.name)
}

/// The entries of a group file: `name:password:gid:members`, one a line.
fn parse(entries: &str) -> impl Iterator<Item = Group> + '_ {
    entries.lines().filter_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?.trim();
        let gid = fields.nth(1)?.trim().parse().ok()?;
        (!name.is_empty() && !name.starts_with('#')).then(|| Group {
            gid,
            name: name.to_owned(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str =
        "root:x:0:\n# a comment:x:5:\nrootsd:x:998:alice,bob\nrootsd-admin:x:997:bob\nbroken\n";

    fn resolve_in(given: &str) -> Result<Group, UnknownGroup> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("group");
        std::fs::write(&file, FILE).unwrap();
        resolve(given, &file)
    }

    #[test]
    fn groups_resolve_by_name_or_id() {
        let admin = Group {
            gid: 997,
            name: "rootsd-admin".into(),
        };
        assert_eq!(resolve_in("rootsd-admin").unwrap(), admin);
        assert_eq!(resolve_in("997").unwrap(), admin);
        assert_eq!(resolve_in("4242").unwrap().name, "4242");
        let err = resolve_in("wheel").unwrap_err().to_string();
        assert!(err.contains("no group \"wheel\""), "{err}");
        assert!(err.contains("groupadd wheel"), "{err}");
    }

    #[test]
    fn comments_and_broken_lines_are_no_groups() {
        let names: Vec<String> = parse(FILE).map(|g| g.name).collect();
        assert_eq!(names, ["root", "rootsd", "rootsd-admin"]);
    }
}
