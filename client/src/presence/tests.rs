//! The judgement of each kind of look, real looks at temporary directories, and the time limit
//! with a look that hangs.

use std::os::unix::fs::PermissionsExt as _;
use std::sync::atomic::AtomicUsize;

use super::*;

fn root(path: &Path) -> Root {
    Root {
        uri: rootsd_proto::root::uri_from_path(path).unwrap(),
        name: None,
    }
}

/// The real look at `path`, judged.
fn presence_of(path: &Path) -> Presence {
    check(&[&root(path)]).remove(0)
}

#[track_caller]
fn assert_gone(presence: &Presence, reason: Reason, detail: &str) {
    assert_eq!(
        presence,
        &Presence::Gone(Gone::new(reason, detail)),
        "{presence:?}"
    );
}

fn os_error(kind: io::ErrorKind) -> io::Error {
    io::Error::from(kind)
}

#[test]
fn an_existing_directory_is_present() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(presence_of(dir.path()), Presence::Present);
    assert_eq!(Presence::Present.status(), "ok");
}

#[test]
fn a_deleted_directory_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("deleted");
    fs::create_dir(&gone).unwrap();
    fs::remove_dir(&gone).unwrap();
    let presence = presence_of(&gone);
    assert_gone(&presence, Reason::Missing, "no such file or directory");
    assert_eq!(presence.status(), "missing: no such file or directory");
}

#[test]
fn a_path_through_a_file_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("file"), "x").unwrap();
    assert_gone(
        &presence_of(&dir.path().join("file/sub")),
        Reason::Missing,
        "something on its path is not a directory",
    );
}

#[test]
fn a_file_or_a_socket_is_not_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    fs::write(&file, "x").unwrap();
    assert_gone(
        &presence_of(&file),
        Reason::NotADirectory,
        "it is a regular file",
    );
    let socket = dir.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    assert_gone(
        &presence_of(&socket),
        Reason::NotADirectory,
        "it is a socket",
    );
    // A symlink is followed, as servers follow it.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    assert_gone(
        &presence_of(&link),
        Reason::NotADirectory,
        "it is a regular file",
    );
    std::os::unix::fs::symlink(dir.path(), dir.path().join("dirlink")).unwrap();
    assert_eq!(presence_of(&dir.path().join("dirlink")), Presence::Present);
}

#[test]
fn permission_denied_is_unreadable_and_other_errors_are_unknown() {
    use io::ErrorKind::{NotFound, PermissionDenied};
    let judged = |list: io::Result<()>, enter: io::Result<()>| {
        classify(Observation::Directory { list, enter })
    };
    assert_gone(
        &judged(Err(os_error(PermissionDenied)), Ok(())),
        Reason::Unreadable,
        "cannot list it: permission denied (no read permission)",
    );
    assert_gone(
        &judged(Ok(()), Err(os_error(PermissionDenied))),
        Reason::Unreadable,
        "cannot enter it: permission denied (no search permission)",
    );
    assert_gone(
        &judged(
            Err(os_error(PermissionDenied)),
            Err(os_error(PermissionDenied)),
        ),
        Reason::Unreadable,
        "cannot list or enter it: permission denied",
    );
    assert_gone(
        &classify(Observation::Unreachable(io::Error::from_raw_os_error(
            rustix::io::Errno::ACCESS.raw_os_error(),
        ))),
        Reason::Unreadable,
        "cannot reach it: permission denied on a directory above it",
    );
    // Deleted between stat and access.
    assert_gone(
        &judged(Ok(()), Err(os_error(NotFound))),
        Reason::Missing,
        "no such file or directory",
    );
    let stale = io::Error::from_raw_os_error(rustix::io::Errno::STALE.raw_os_error());
    let shown = stale.to_string();
    assert_gone(&judged(Err(stale), Ok(())), Reason::Unknown, &shown);
    let looped = io::Error::from_raw_os_error(rustix::io::Errno::LOOP.raw_os_error());
    let shown = looped.to_string();
    assert_gone(
        &classify(Observation::Unreachable(looped)),
        Reason::Unknown,
        &shown,
    );
}

/// The look agrees with what the kernel does when a process of this user opens the
/// directory. Where the tests run as root, permission bits stop nothing and every mode is
/// present; elsewhere the modes without read or search permission are unreadable. (The
/// end-to-end tests drop root's privileges to see the refusals there too.)
#[test]
fn the_look_agrees_with_opening_for_every_permission() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    fs::create_dir(&target).unwrap();
    fs::write(target.join("inside"), "x").unwrap();
    for mode in [0o700, 0o600, 0o300, 0o100, 0o000] {
        fs::set_permissions(&target, fs::Permissions::from_mode(mode)).unwrap();
        let can_list = fs::read_dir(&target).is_ok();
        let can_enter = fs::metadata(target.join("inside")).is_ok();
        let presence = presence_of(&target);
        fs::set_permissions(&target, fs::Permissions::from_mode(0o700)).unwrap();
        let expected = match (can_list, can_enter) {
            (true, true) => Presence::Present,
            (false, true) => Presence::Gone(Gone::new(
                Reason::Unreadable,
                "cannot list it: permission denied (no read permission)",
            )),
            (true, false) => Presence::Gone(Gone::new(
                Reason::Unreadable,
                "cannot enter it: permission denied (no search permission)",
            )),
            (false, false) => Presence::Gone(Gone::new(
                Reason::Unreadable,
                "cannot list or enter it: permission denied",
            )),
        };
        assert_eq!(presence, expected, "mode {mode:o}");
    }
}

#[test]
fn gone_serialises_as_a_reason_and_a_detail() {
    let gone = Gone::new(Reason::NotADirectory, "it is a regular file");
    assert_eq!(
        serde_json::to_value(&gone).unwrap(),
        serde_json::json!({"reason": "not_a_directory", "detail": "it is a regular file"})
    );
    for (reason, word) in [
        (Reason::Missing, "missing"),
        (Reason::Unreadable, "unreadable"),
        (Reason::Unknown, "unknown"),
    ] {
        assert_eq!(
            serde_json::to_value(reason).unwrap(),
            serde_json::json!(word)
        );
    }
}

/// A look that never returns for `hung` paths, as `stat` on a dead NFS server's hard mount.
fn hanging_on(hung: &'static [&'static str]) -> impl Fn(&Path) -> Observation + Send + Sync {
    move |path: &Path| {
        if hung.iter().any(|h| path.ends_with(h)) {
            loop {
                std::thread::park();
            }
        }
        Observation::Directory {
            list: Ok(()),
            enter: Ok(()),
        }
    }
}

#[test]
fn a_hung_filesystem_is_unknown_after_the_time_limit_and_holds_up_nothing_else() {
    let roots: Vec<Root> = ["/srv/a", "/mnt/dead/x", "/srv/b"]
        .iter()
        .map(|p| root(Path::new(p)))
        .collect();
    let refs: Vec<&Root> = roots.iter().collect();
    let started = Instant::now();
    let found = check_with(&refs, Duration::from_millis(200), hanging_on(&["dead/x"]));
    // Bounded: it returned at all, with everything that did answer.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(found[0], Presence::Present);
    assert_eq!(found[2], Presence::Present);
    assert_gone(
        &found[1],
        Reason::Unknown,
        "its filesystem did not answer within 200ms (a hung network mount?)",
    );
}

#[test]
fn roots_left_unlooked_behind_hung_helpers_say_so() {
    let mut paths: Vec<String> = (0..MAX_HELPERS).map(|i| format!("/dead/{i}")).collect();
    paths.push("/srv/fine".to_owned());
    let roots: Vec<Root> = paths.iter().map(|p| root(Path::new(p))).collect();
    let refs: Vec<&Root> = roots.iter().collect();
    let found = check_with(&refs, Duration::from_millis(100), |path: &Path| {
        if path.starts_with("/dead") {
            loop {
                std::thread::park();
            }
        }
        Observation::NotDirectory(Kind::File)
    });
    for hung in &found[..MAX_HELPERS] {
        assert_eq!(
            hung.gone().map(|g| g.reason),
            Some(Reason::Unknown),
            "{hung:?}"
        );
    }
    assert_gone(
        &found[MAX_HELPERS],
        Reason::Unknown,
        "not checked: other roots' filesystems were still not answering after 100ms",
    );
}

#[test]
fn each_directory_is_looked_at_once_and_other_uris_not_at_all() {
    let looks = Arc::new(AtomicUsize::new(0));
    let counted = looks.clone();
    let a = root(Path::new("/srv/a"));
    let other = Root {
        uri: "https://example.com/x".to_owned(),
        name: None,
    };
    let found = check_with(
        &[&a, &other, &a],
        Duration::from_secs(5),
        move |_: &Path| {
            counted.fetch_add(1, Ordering::SeqCst);
            Observation::Unreachable(os_error(io::ErrorKind::NotFound))
        },
    );
    assert_eq!(looks.load(Ordering::SeqCst), 1);
    assert_eq!(found[0], found[2]);
    assert_eq!(found[0].gone().map(|g| g.reason), Some(Reason::Missing));
    assert_eq!(found[1], Presence::NotChecked);
    assert_eq!(found[1].status(), "not checked (not a local file:// URI)");
    assert!(check(&[]).is_empty());
}
