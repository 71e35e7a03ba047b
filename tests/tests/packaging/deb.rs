//! The Debian package scripts/deb builds: exactly the files it should hold, maintainer scripts
//! that enable nothing and remove no data, and, installed with dpkg (as root, as in CI) or
//! extracted with dpkg-deb (elsewhere), every check of `checks.rs`. As root it also goes through
//! install, upgrade and removal with a user's roots on the machine, which survive all three.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use rootsd_tests::Sandbox;

use crate::checks::Installed;
use crate::support::{
    User, assert_same_tree, build_deb, built_dir, dpkg_lock, run_ok, snapshot, stdout_of,
    subcommands, tool,
};

/// Every file the package holds, without the leading `./`.
fn expected_files() -> Vec<String> {
    let mut files: Vec<String> = [
        "usr/bin/rootsctl",
        "usr/bin/rootsd",
        "usr/lib/systemd/system/rootsd.service",
        "usr/lib/systemd/system/rootsd.socket",
        "usr/lib/systemd/user/rootsd.service",
        "usr/lib/systemd/user/rootsd.socket",
        "usr/lib/sysusers.d/rootsd.conf",
        "usr/share/bash-completion/completions/rootsctl",
        "usr/share/doc/rootsd/README.md",
        "usr/share/doc/rootsd/copyright",
        "usr/share/fish/vendor_completions.d/rootsctl.fish",
        "usr/share/man/man1/rootsctl.1.gz",
        "usr/share/man/man8/rootsd.8.gz",
        "usr/share/zsh/vendor-completions/_rootsctl",
    ]
    .map(str::to_owned)
    .into();
    for sub in subcommands() {
        files.push(format!("usr/share/man/man1/rootsctl-{sub}.1.gz"));
    }
    files.sort();
    files
}

/// `(mode, owner, path)` of every non-directory entry, from `dpkg-deb -c`.
fn listing(deb: &Path) -> Vec<(String, String, String)> {
    let output = run_ok(
        Command::new(tool("dpkg-deb", "apt-get install dpkg"))
            .arg("-c")
            .arg(deb),
        "dpkg-deb -c",
    );
    let mut entries: Vec<(String, String, String)> = stdout_of(&output)
        .lines()
        .filter(|line| !line.starts_with('d'))
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let path = fields.last().expect("a path").trim_start_matches("./");
            (fields[0].to_owned(), fields[1].to_owned(), path.to_owned())
        })
        .collect();
    entries.sort_by(|a, b| a.2.cmp(&b.2));
    entries
}

/// The lines of a shell script that run, without the bodies of here-documents (the messages
/// that tell the administrator what to type) and comments.
fn executed_lines(script: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut heredoc_end: Option<String> = None;
    for line in script.lines() {
        if let Some(end) = &heredoc_end {
            if line.trim() == end {
                heredoc_end = None;
            }
            continue;
        }
        let code = line.trim();
        if code.is_empty() || code.starts_with('#') {
            continue;
        }
        if let Some((_, marker)) = code.split_once("<<") {
            let marker = marker.trim().trim_start_matches('-');
            heredoc_end = Some(marker.trim_matches(['\'', '"']).to_owned());
        }
        lines.push(code);
    }
    lines
}

#[test]
fn the_package_holds_exactly_its_files_and_scripts_that_enable_nothing_and_remove_no_data() {
    let out = Sandbox::new();
    let deb = build_deb(out.path(), 1);

    let entries = listing(&deb);
    let paths: Vec<String> = entries.iter().map(|(_, _, path)| path.clone()).collect();
    assert_eq!(paths, expected_files(), "the package's files");
    for (mode, owner, path) in &entries {
        let expected = if path.starts_with("usr/bin/") {
            "-rwxr-xr-x"
        } else {
            "-rw-r--r--"
        };
        assert_eq!(mode, expected, "mode of {path}");
        assert_eq!(owner, "0/0", "owner of {path}");
    }

    let dpkg_deb = tool("dpkg-deb", "apt-get install dpkg");
    let fields = run_ok(
        Command::new(&dpkg_deb)
            .arg("--field")
            .arg(&deb)
            .args(["Package", "Version"]),
        "dpkg-deb --field",
    );
    assert_eq!(
        stdout_of(&fields),
        format!(
            "Package: rootsd\nVersion: {}-1\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    // No placeholder addresses: rootsd has none, so the package names its maintainers without
    // one and has no Homepage.
    let fields = run_ok(
        Command::new(&dpkg_deb)
            .arg("--field")
            .arg(&deb)
            .args(["Maintainer", "Homepage"]),
        "dpkg-deb --field Maintainer Homepage",
    );
    assert_eq!(stdout_of(&fields), "Maintainer: The rootsd developers\n");
    let contents = out.path().join("contents");
    run_ok(
        Command::new(&dpkg_deb).arg("-x").arg(&deb).arg(&contents),
        "dpkg-deb -x",
    );
    // Every text the package ships (the binaries' strings are their help, which the man pages
    // carry).
    for path in expected_files()
        .into_iter()
        .filter(|p| !p.starts_with("usr/bin/"))
    {
        let bytes = fs::read(contents.join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(
            !bytes.windows(8).any(|w| w == b".invalid"),
            "{path} ships a placeholder address (.invalid)"
        );
    }

    let control = out.path().join("control");
    run_ok(
        Command::new(&dpkg_deb).arg("-e").arg(&deb).arg(&control),
        "dpkg-deb -e",
    );
    for name in ["postinst", "prerm", "postrm"] {
        let path = control.join(name);
        let script = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        run_ok(Command::new("sh").arg("-n").arg(&path), "sh -n");
        for line in executed_lines(&script) {
            // Neither the system nor the user units are enabled, and no preset is applied.
            for word in ["enable", "preset", "rm ", "rmdir", "deluser", "userdel"] {
                assert!(
                    !line.contains(word),
                    "{name} runs `{line}`, which it must not ({word})"
                );
            }
        }
    }
    assert!(
        !control.join("preinst").exists(),
        "the package needs no preinst"
    );
}

/// The package's paths, for [`Installed`], with its `/` at `root`.
fn package_layout(root: &Path, manpath: Option<PathBuf>) -> Installed {
    Installed {
        root: root.to_owned(),
        bin_dir: "/usr/bin".into(),
        user_units: "/usr/lib/systemd/user".into(),
        system_units: Some("/usr/lib/systemd/system".into()),
        man_dir: "/usr/share/man".into(),
        man_suffix: ".gz",
        bash_file: "/usr/share/bash-completion/completions/rootsctl".into(),
        zsh_dir: "/usr/share/zsh/vendor-completions".into(),
        fish_dir: "/usr/share/fish/vendor_completions.d".into(),
        exec_start: "/usr/bin/rootsd".into(),
        home: None,
        manpath,
    }
}

/// Removes the package however the test ends, so that a failure does not leave it installed.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = dpkg().args(["--purge", "rootsd"]).output();
    }
}

/// dpkg with the PATH it needs (it looks for ldconfig and start-stop-daemon in the sbin
/// directories, which a test's environment may lack).
fn dpkg() -> Command {
    let mut cmd = Command::new(tool("dpkg", "apt-get install dpkg"));
    cmd.env(
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    )
    .env("DEBIAN_FRONTEND", "noninteractive");
    cmd
}

/// Every link that enables a rootsd unit system-wide: `*.wants/rootsd.*` and
/// `*.requires/rootsd.*` under /etc/systemd/{system,user}.
fn enablement_links() -> Vec<PathBuf> {
    let mut links = Vec::new();
    for dir in ["/etc/systemd/system", "/etc/systemd/user"] {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !(name.ends_with(".wants") || name.ends_with(".requires")) {
                continue;
            }
            for unit in fs::read_dir(entry.path()).into_iter().flatten().flatten() {
                if unit.file_name().to_string_lossy().starts_with("rootsd.") {
                    links.push(unit.path());
                }
            }
        }
    }
    links.sort();
    links
}

fn installed_version() -> Option<String> {
    let output = Command::new(tool("dpkg-query", "apt-get install dpkg"))
        .args(["--show", "--showformat=${Status} ${Version}", "rootsd"])
        .output()
        .expect("run dpkg-query");
    let shown = stdout_of(&output);
    shown
        .strip_prefix("install ok installed ")
        .map(str::to_owned)
}

#[test]
fn the_package_installs_upgrades_and_removes_with_dpkg_passing_every_check_and_keeping_a_users_roots()
 {
    let out = Sandbox::new();
    let deb = build_deb(&out.path().join("1"), 1);

    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "not root: dpkg -i and -r need root, so the package was extracted with dpkg-deb -x and checked there; CI runs this as root"
        );
        let root = out.path().join("root");
        run_ok(
            Command::new(tool("dpkg-deb", "apt-get install dpkg"))
                .arg("-x")
                .arg(&deb)
                .arg(&root),
            "dpkg-deb -x",
        );
        package_layout(&root, Some(root.join("usr/share/man"))).check_all();
        return;
    }

    let upgrade = build_deb(&out.path().join("2"), 2);
    let _lock = dpkg_lock();
    if let Some(version) = installed_version() {
        panic!(
            "rootsd {version} is already installed on this machine; this test installs and removes it, so remove it first: dpkg -r rootsd"
        );
    }
    let _purge = Purge;
    let tool_dir = built_dir();
    let bin_dir = Path::new("/usr/bin");

    // A user who already keeps roots, from before the package.
    let home = Sandbox::new();
    let user = User::new(home.path());
    let project = home.mkdir("project");
    let daemon = user.start(&tool_dir);
    user.ctl_ok(&tool_dir, &["add", project.to_str().unwrap()]);
    User::stop(daemon);
    let roots = user.roots_from_a_fresh_daemon(&tool_dir);
    assert_eq!(roots.len(), 1, "{roots:?}");

    let enabled_before = enablement_links();
    let installing = run_ok(dpkg().arg("-i").arg(&deb), "dpkg -i");
    let said = stdout_of(&installing);
    assert!(
        said.contains("systemctl --user enable --now rootsd.socket"),
        "the first install says how to start rootsd:\n{said}"
    );
    assert_eq!(
        installed_version(),
        Some(format!("{}-1", env!("CARGO_PKG_VERSION")))
    );
    package_layout(Path::new("/"), None).check_all();
    // postinst created the shared service's user, so that an administrator can just enable it.
    let passwd = fs::read_to_string("/etc/passwd").unwrap();
    assert!(
        passwd.lines().any(|l| l.starts_with("rootsd:")),
        "postinst did not create the rootsd user"
    );
    // And the admin group the shared service's ExecStart= names, without which it cannot start.
    let group = fs::read_to_string("/etc/group").unwrap();
    assert!(
        group.lines().any(|l| l.starts_with("rootsd-admin:")),
        "postinst did not create the rootsd-admin group"
    );
    assert_eq!(
        enablement_links(),
        enabled_before,
        "the package enabled a unit"
    );

    // The packaged binaries serve the roots the user had.
    let daemon = user.start(bin_dir);
    assert_eq!(user.roots(bin_dir), roots);
    let second = home.mkdir("second");
    user.ctl_ok(bin_dir, &["add", second.to_str().unwrap()]);
    User::stop(daemon);

    let upgrading = run_ok(dpkg().arg("-i").arg(&upgrade), "dpkg -i (upgrade)");
    let said = stdout_of(&upgrading);
    for told in [
        format!("upgraded from {}-1", env!("CARGO_PKG_VERSION")),
        "systemctl --user daemon-reload && systemctl --user restart rootsd.service".into(),
    ] {
        assert!(
            said.contains(&told),
            "the upgrade does not say {told:?}:\n{said}"
        );
    }
    assert_eq!(
        installed_version(),
        Some(format!("{}-2", env!("CARGO_PKG_VERSION")))
    );
    let daemon = user.start(bin_dir);
    let both = user.roots(bin_dir);
    assert_eq!(both.len(), 2, "the roots after the upgrade: {both:?}");
    User::stop(daemon);

    let state = snapshot(&user.state_dir());
    let removing = run_ok(dpkg().args(["-r", "rootsd"]), "dpkg -r");
    let said = stdout_of(&removing);
    assert!(said.contains("Roots are kept"), "{said}");
    for file in expected_files() {
        let path = Path::new("/").join(&file);
        assert!(
            fs::symlink_metadata(&path).is_err(),
            "{} is still there after dpkg -r",
            path.display()
        );
    }
    assert!(!Path::new("/usr/share/doc/rootsd").exists());
    run_ok(dpkg().args(["--purge", "rootsd"]), "dpkg --purge");
    assert_eq!(installed_version(), None);
    assert_same_tree(
        &state,
        &snapshot(&user.state_dir()),
        "the user's state directory",
    );
    // And the roots are all there for the next rootsd.
    assert_eq!(user.roots_from_a_fresh_daemon(&tool_dir), both);
}
