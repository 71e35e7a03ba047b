//! User names from `/etc/passwd`, to name who made a change in the history.
//!
//! Only the local password file is read (no NSS, which would take a C library call and
//! `unsafe`), as [`crate::groups`] reads `/etc/group`: a user that lives elsewhere (LDAP, say)
//! is recorded by uid alone. The file is read once per connection that makes a change, never
//! on the path of a connection that only reads. This module only reads that file.

use std::io::Read as _;
use std::path::Path;

/// The local user database.
pub const PASSWD_FILE: &str = "/etc/passwd";

/// How much of the file is read: far more than any machine's local users need, and a bound on
/// what a strange file can make a connection read.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// The name of user `uid` in `file` (normally [`PASSWD_FILE`]); `None` if it has no entry or
/// the file cannot be read.
pub fn name_of(uid: u32, file: &Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(file)
        .ok()?
        .take(MAX_FILE_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    name_in(&text, uid)
}

/// The name of user `uid` in the text of a password file: `name:password:uid:gid:gecos:home:shell`,
/// one a line. The first entry with that uid wins, as it does for `getpwuid`.
pub fn name_in(entries: &str, uid: u32) -> Option<String> {
    entries.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?.trim();
        let id: u32 = fields.nth(1)?.trim().parse().ok()?;
        (id == uid && !name.is_empty() && !name.starts_with('#') && !name.starts_with('+'))
            .then(|| name.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "root:x:0:0:root:/root:/bin/bash\n# alice:x:1000:1000::/home/alice:/bin/sh\n\
        broken line\nbob:x:notanumber:1:::\n+ldap:::::\nana:x:1000:1000:Ana,,,:/home/ana:/bin/bash\n\
        ana-again:x:1000:1000::/:/bin/sh\nrootsd:x:998:998::/var/lib/rootsd:/usr/sbin/nologin\n";

    #[test]
    fn a_uid_is_named_by_its_first_entry_skipping_comments_and_broken_lines() {
        assert_eq!(name_in(FILE, 0).as_deref(), Some("root"));
        assert_eq!(name_in(FILE, 1000).as_deref(), Some("ana"));
        assert_eq!(name_in(FILE, 998).as_deref(), Some("rootsd"));
        assert_eq!(name_in(FILE, 4242), None);
        assert_eq!(name_in("", 0), None);
    }

    #[test]
    fn the_file_is_read_and_a_missing_one_names_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("passwd");
        std::fs::write(&file, FILE).unwrap();
        assert_eq!(name_of(1000, &file).as_deref(), Some("ana"));
        assert_eq!(name_of(1000, &dir.path().join("missing")), None);
    }
}
