//! scripts/install: `--system --destdir` stages exactly the expected files, which pass every
//! check of `checks.rs`, and `--uninstall` leaves the staging directory as it was; `--prefix`
//! says where the files will live (`/usr` with a `--destdir`, for packagers); `--user` puts
//! everything where a user's systemd, man and shells look, and its uninstall keeps the user's
//! roots; files it did not install are never replaced without `--force`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use rootsd_tests::Sandbox;

use crate::checks::Installed;
use crate::support::{
    Entry, User, assert_same_tree, built_dir, profile, run_ok, run_within, script, snapshot,
    stderr_of, stdout_of, subcommands,
};

/// `scripts/install ARGS --profile P --no-build`: the binaries the tests already use.
fn install(args: &[&str]) -> Command {
    let mut cmd = script("install");
    cmd.args(args).args(["--profile", &profile(), "--no-build"]);
    cmd
}

fn uninstall(args: &[&str]) -> Command {
    let mut cmd = script("install");
    cmd.args(args).arg("--uninstall");
    cmd
}

/// The final paths of the files a manifest lists.
fn manifest_files(manifest: &Path) -> Vec<String> {
    let text =
        fs::read_to_string(manifest).unwrap_or_else(|e| panic!("read {}: {e}", manifest.display()));
    let mut files: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("file "))
        .map(|rest| rest.split_once(' ').expect("file SHA256 PATH").1.to_owned())
        .collect();
    files.sort();
    files
}

/// The man pages scripts/install writes under `man_dir`.
fn man_pages(man_dir: &str) -> Vec<String> {
    let mut pages = vec![
        format!("{man_dir}/man8/rootsd.8"),
        format!("{man_dir}/man1/rootsctl.1"),
    ];
    for sub in subcommands() {
        pages.push(format!("{man_dir}/man1/rootsctl-{sub}.1"));
    }
    pages
}

#[test]
fn install_system_stages_exactly_its_files_under_a_destdir_and_uninstall_restores_it() {
    let sb = Sandbox::new();
    let stage = sb.mkdir("stage");
    // What was there before must stay: a neighbour in the same directories.
    fs::create_dir_all(stage.join("usr/local/bin")).unwrap();
    fs::write(stage.join("usr/local/bin/other-tool"), "#!/bin/sh\n").unwrap();
    fs::create_dir_all(stage.join("etc/fish")).unwrap();
    fs::write(stage.join("etc/fish/config.fish"), "# mine\n").unwrap();
    let before = snapshot(&stage);
    let stage_arg = stage.to_str().unwrap();

    let output = run_ok(
        &mut install(&["--system", "--destdir", stage_arg]),
        "scripts/install --system --destdir",
    );
    assert!(
        stdout_of(&output).contains("install-manifest"),
        "{}",
        stdout_of(&output)
    );

    let mut expected: Vec<String> = [
        "/usr/local/bin/rootsd",
        "/usr/local/bin/rootsctl",
        "/usr/local/lib/systemd/user/rootsd.socket",
        "/usr/local/lib/systemd/user/rootsd.service",
        "/usr/local/lib/systemd/system/rootsd.socket",
        "/usr/local/lib/systemd/system/rootsd.service",
        "/usr/local/lib/sysusers.d/rootsd.conf",
        "/usr/local/share/bash-completion/completions/rootsctl",
        "/usr/local/share/zsh/site-functions/_rootsctl",
        "/etc/fish/completions/rootsctl.fish",
    ]
    .map(str::to_owned)
    .into();
    expected.extend(man_pages("/usr/local/share/man"));
    expected.sort();
    let manifest = stage.join("usr/local/share/rootsd/install-manifest");
    assert_eq!(manifest_files(&manifest), expected, "the manifest");

    // Exactly those files (and the manifest) are new in the staging directory.
    let after = snapshot(&stage);
    let mut new_files: Vec<String> = after
        .iter()
        .filter(|(path, entry)| !matches!(entry, Entry::Dir) && !before.contains_key(*path))
        .map(|(path, _)| format!("/{}", path.display()))
        .collect();
    new_files.sort();
    let mut with_manifest = expected.clone();
    with_manifest.push("/usr/local/share/rootsd/install-manifest".into());
    with_manifest.sort();
    assert_eq!(
        new_files, with_manifest,
        "the files new in the staging directory"
    );
    assert_eq!(
        fs::read(stage.join("usr/local/lib/sysusers.d/rootsd.conf")).unwrap(),
        fs::read(crate::support::repo().join("systemd/system/rootsd.sysusers.conf")).unwrap()
    );

    Installed {
        root: stage.clone(),
        bin_dir: "/usr/local/bin".into(),
        user_units: "/usr/local/lib/systemd/user".into(),
        system_units: Some("/usr/local/lib/systemd/system".into()),
        man_dir: "/usr/local/share/man".into(),
        man_suffix: "",
        bash_file: "/usr/local/share/bash-completion/completions/rootsctl".into(),
        zsh_dir: "/usr/local/share/zsh/site-functions".into(),
        fish_dir: "/etc/fish/completions".into(),
        exec_start: "/usr/local/bin/rootsd".into(),
        home: None,
        manpath: Some(stage.join("usr/local/share/man")),
    }
    .check_all();

    // Installing again replaces its own files without --force.
    run_ok(
        &mut install(&["--system", "--destdir", stage_arg]),
        "scripts/install again",
    );
    assert_eq!(manifest_files(&manifest), expected);

    run_ok(
        &mut uninstall(&["--system", "--destdir", stage_arg]),
        "scripts/install --uninstall",
    );
    assert_same_tree(&before, &snapshot(&stage), "the staging directory");
}

/// The paths of `tree` outside `excluded`.
fn outside(tree: BTreeMap<PathBuf, Entry>, excluded: &Path) -> BTreeMap<PathBuf, Entry> {
    tree.into_iter()
        .filter(|(path, _)| !path.starts_with(excluded))
        .collect()
}

#[test]
fn install_user_puts_everything_where_the_users_tools_look_and_uninstall_keeps_the_roots() {
    let sb = Sandbox::new();
    let user = User::new(sb.path());
    let project = sb.mkdir("project");
    let tests_bins = built_dir();
    let daemon = user.start(&tests_bins);
    user.ctl_ok(&tests_bins, &["add", project.to_str().unwrap()]);
    User::stop(daemon);
    let roots = user.roots_from_a_fresh_daemon(&tests_bins);
    let state = Path::new(".local/state/rootsd");
    let before = snapshot(&user.home);

    let output = run_ok(
        user.env(&mut install(&["--user"])),
        "scripts/install --user",
    );
    let said = stdout_of(&output);
    assert!(
        said.contains(
            "systemctl --user daemon-reload && systemctl --user enable --now rootsd.socket"
        ),
        "scripts/install does not print the next step:\n{said}"
    );

    let home = user.home.display().to_string();
    let mut expected: Vec<String> = [
        "/.local/bin/rootsd",
        "/.local/bin/rootsctl",
        "/.config/systemd/user/rootsd.socket",
        "/.config/systemd/user/rootsd.service",
        "/.local/share/bash-completion/completions/rootsctl",
        "/.local/share/zsh/site-functions/_rootsctl",
        "/.local/share/fish/vendor_completions.d/rootsctl.fish",
    ]
    .map(|p| format!("{home}{p}"))
    .into();
    expected.extend(man_pages(&format!("{home}/.local/share/man")));
    expected.sort();
    let manifest = user.home.join(".local/share/rootsd/install-manifest");
    assert_eq!(manifest_files(&manifest), expected, "the manifest");

    // Man pages found through PATH (man-db maps ~/.local/bin to ~/.local/share/man), %h in
    // ExecStart= expanded to HOME, completions where each shell looks for a user's own.
    Installed {
        root: PathBuf::from("/"),
        bin_dir: format!("{home}/.local/bin"),
        user_units: format!("{home}/.config/systemd/user"),
        system_units: None,
        man_dir: format!("{home}/.local/share/man"),
        man_suffix: "",
        bash_file: format!("{home}/.local/share/bash-completion/completions/rootsctl"),
        zsh_dir: format!("{home}/.local/share/zsh/site-functions"),
        fish_dir: format!("{home}/.local/share/fish/vendor_completions.d"),
        exec_start: "%h/.local/bin/rootsd".into(),
        home: Some(user.home.clone()),
        manpath: None,
    }
    .check_all();

    // The installed binaries serve the roots the user had.
    let installed_bins = user.home.join(".local/bin");
    assert_eq!(user.roots_from_a_fresh_daemon(&installed_bins), roots);

    // Installing again is an upgrade: no --force needed, and it says how to restart.
    let again = run_ok(user.env(&mut install(&["--user"])), "scripts/install again");
    let said = stdout_of(&again);
    assert!(
        said.contains("systemctl --user restart rootsd.service"),
        "an upgrade does not say how to restart:\n{said}"
    );
    assert_eq!(manifest_files(&manifest), expected);
    let state_before = snapshot(&user.state_dir());

    run_ok(
        user.env(&mut uninstall(&["--user"])),
        "scripts/install --user --uninstall",
    );
    assert_same_tree(
        &outside(before, state),
        &outside(snapshot(&user.home), state),
        "the home directory outside the state directory",
    );
    assert_same_tree(
        &state_before,
        &snapshot(&user.state_dir()),
        "the state directory",
    );
    assert_eq!(user.roots_from_a_fresh_daemon(&tests_bins), roots);
}

#[test]
fn install_refuses_to_replace_files_it_did_not_install_and_then_changes_nothing() {
    let sb = Sandbox::new();
    let user = User::new(sb.path());
    let units = user.home.join(".config/systemd/user");
    fs::create_dir_all(&units).unwrap();
    fs::write(units.join("rootsd.service"), "# copied by hand\n").unwrap();
    let before = snapshot(&user.home);

    let output = run_within(
        user.env(&mut install(&["--user"])),
        std::time::Duration::from_secs(600),
    );
    let complaint = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{complaint}");
    assert!(
        complaint.contains(&units.join("rootsd.service").display().to_string())
            && complaint.contains("--force"),
        "the refusal names the file and the way out: {complaint}"
    );
    assert_same_tree(&before, &snapshot(&user.home), "the home directory");

    let output = run_within(
        user.env(&mut uninstall(&["--user"])),
        rootsd_tests::PATIENCE,
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr_of(&output).contains("nothing to uninstall"),
        "{}",
        stderr_of(&output)
    );
    assert_same_tree(&before, &snapshot(&user.home), "the home directory");
}

#[test]
fn an_install_that_stops_part_way_is_listed_and_undone_by_uninstall() {
    let sb = Sandbox::new();
    let stage = sb.mkdir("stage");
    // A file where zsh's completion directory should go stops the install half-way through.
    fs::create_dir_all(stage.join("usr/local/share")).unwrap();
    fs::write(stage.join("usr/local/share/zsh"), "in the way\n").unwrap();
    let before = snapshot(&stage);
    let stage_arg = stage.to_str().unwrap();

    let output = run_within(
        &mut install(&["--system", "--destdir", stage_arg]),
        std::time::Duration::from_secs(600),
    );
    let said = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("stopped part-way"), "{said}");
    let manifest = stage.join("usr/local/share/rootsd/install-manifest");
    let listed = manifest_files(&manifest);
    assert!(
        listed.contains(&"/usr/local/bin/rootsd".to_owned()),
        "the manifest lists what was installed before the failure: {listed:?}"
    );

    run_ok(
        &mut uninstall(&["--system", "--destdir", stage_arg]),
        "scripts/install --uninstall after a failed install",
    );
    assert_same_tree(&before, &snapshot(&stage), "the staging directory");
}

#[test]
fn install_prefix_is_where_the_files_live_and_destdir_where_they_are_staged() {
    let sb = Sandbox::new();
    let stage = sb.mkdir("stage");
    let before = snapshot(&stage);
    let stage_arg = stage.to_str().unwrap();
    let options = ["--system", "--prefix", "/usr", "--destdir", stage_arg];

    let output = run_ok(
        &mut install(&options),
        "scripts/install --system --prefix /usr --destdir",
    );
    let said = stdout_of(&output);
    assert!(
        said.contains(&format!(
            "scripts/install --system --prefix /usr --destdir {stage_arg} --uninstall"
        )),
        "it says how to undo it: {said}"
    );
    let mut expected: Vec<String> = [
        "/usr/bin/rootsd",
        "/usr/bin/rootsctl",
        "/usr/lib/systemd/user/rootsd.socket",
        "/usr/lib/systemd/user/rootsd.service",
        "/usr/lib/systemd/system/rootsd.socket",
        "/usr/lib/systemd/system/rootsd.service",
        "/usr/lib/sysusers.d/rootsd.conf",
        "/usr/share/bash-completion/completions/rootsctl",
        "/usr/share/zsh/site-functions/_rootsctl",
        "/usr/share/fish/vendor_completions.d/rootsctl.fish",
    ]
    .map(str::to_owned)
    .into();
    expected.extend(man_pages("/usr/share/man"));
    expected.sort();
    let manifest = stage.join("usr/share/rootsd/install-manifest");
    assert_eq!(manifest_files(&manifest), expected, "the manifest");
    assert!(
        !stage.join("usr/local").exists(),
        "--prefix /usr put files under /usr/local"
    );

    Installed {
        root: stage.clone(),
        bin_dir: "/usr/bin".into(),
        user_units: "/usr/lib/systemd/user".into(),
        system_units: Some("/usr/lib/systemd/system".into()),
        man_dir: "/usr/share/man".into(),
        man_suffix: "",
        bash_file: "/usr/share/bash-completion/completions/rootsctl".into(),
        zsh_dir: "/usr/share/zsh/site-functions".into(),
        fish_dir: "/usr/share/fish/vendor_completions.d".into(),
        exec_start: "/usr/bin/rootsd".into(),
        home: None,
        manpath: Some(stage.join("usr/share/man")),
    }
    .check_all();

    // Uninstalling needs the same --prefix: without it, it looks for /usr/local's manifest.
    let output = run_within(
        &mut uninstall(&["--system", "--destdir", stage_arg]),
        rootsd_tests::PATIENCE,
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    assert!(
        stderr_of(&output).contains("--prefix and --destdir"),
        "{}",
        stderr_of(&output)
    );
    run_ok(
        &mut uninstall(&options),
        "scripts/install --prefix /usr --destdir --uninstall",
    );
    assert_same_tree(&before, &snapshot(&stage), "the staging directory");

    // A relative --prefix is refused, pointing at --destdir for staging.
    let output = run_within(
        &mut install(&["--system", "--prefix", "stage"]),
        rootsd_tests::PATIENCE,
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr_of(&output).contains("not an absolute path")
            && stderr_of(&output).contains("--destdir"),
        "{}",
        stderr_of(&output)
    );
}
