//! The checks every installed copy of rootsd must pass, whether dpkg put it in `/`, dpkg-deb
//! extracted it into a directory, or scripts/install placed or staged it: the binaries run, the
//! units pass `systemd-analyze verify` (man-page check included) without a word, every man page
//! renders without a warning and is found by name, and each completion script loads in its
//! shell and completes a subcommand.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use rootsd_tests::{PATIENCE, Sandbox};

use crate::support::{files_under, run_within, stderr_of, stdout_of, subcommands, tool};

/// Where an installation put things. Paths are as the installed system sees them; `root` is
/// where that system's `/` is in this test.
pub struct Installed {
    /// `/` after dpkg -i or a plain scripts/install; the extraction or staging directory else.
    pub root: PathBuf,
    pub bin_dir: String,
    pub user_units: String,
    pub system_units: Option<String>,
    pub man_dir: String,
    /// `.gz` for the package's pages, nothing for scripts/install's.
    pub man_suffix: &'static str,
    pub bash_file: String,
    pub zsh_dir: String,
    pub fish_dir: String,
    /// How the units' `ExecStart=` names rootsd: `/usr/bin/rootsd`, `%h/.local/bin/rootsd`.
    pub exec_start: String,
    /// The home directory a user manager expands `%h` to.
    pub home: Option<PathBuf>,
    /// `MANPATH` for finding the pages by name; `None`: man's own configuration (with the bin
    /// directory on PATH) must find them, as it will for the user.
    pub manpath: Option<PathBuf>,
}

impl Installed {
    /// Where a path of the installed system is in this test.
    pub fn at(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    pub fn check_all(&self) {
        self.binaries_run();
        self.units_verify();
        self.man_pages_render();
        self.completions_load();
    }

    /// PATH with the installed binaries first, as a user who installed them has it.
    fn path_env(&self) -> std::ffi::OsString {
        let mut dirs = vec![self.at(&self.bin_dir)];
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        std::env::join_paths(dirs).expect("PATH entries without colons")
    }

    pub fn binaries_run(&self) {
        for name in ["rootsd", "rootsctl"] {
            let binary = self.at(&self.bin_dir).join(name);
            let output = run_within(Command::new(&binary).arg("--version"), PATIENCE);
            let printed = stdout_of(&output);
            assert!(
                output.status.success()
                    && printed.trim() == format!("{name} {}", env!("CARGO_PKG_VERSION")),
                "{} --version: {}\n{printed}{}",
                binary.display(),
                output.status,
                stderr_of(&output)
            );
        }
    }

    /// `systemd-analyze [--user] verify` on the installed units, failing on any output. Where
    /// `ExecStart=` names a binary that exists as written (dpkg installed it in /, or `%h` is
    /// the test's HOME), the installed files are verified themselves; otherwise copies that
    /// name the staged binary instead.
    pub fn units_verify(&self) {
        let analyze = tool("systemd-analyze", "apt-get install systemd");
        assert!(
            Path::new("/bin/kill").is_file(),
            "/bin/kill (the units' ExecReload=) is missing: install it with `apt-get install procps`"
        );
        tool("man", "apt-get install man-db");
        let flavours = [(&self.user_units, true)]
            .into_iter()
            .chain(self.system_units.iter().map(|dir| (dir, false)));
        for (dir, user) in flavours {
            let units = [
                self.at(dir).join("rootsd.socket"),
                self.at(dir).join("rootsd.service"),
            ];
            for unit in &units {
                let text = fs::read_to_string(unit)
                    .unwrap_or_else(|e| panic!("read {}: {e}", unit.display()));
                // The man page, and no address: rootsd has no public one, and a placeholder
                // would send `systemctl help` to nowhere.
                let documentation: Vec<&str> = text
                    .lines()
                    .filter(|l| l.starts_with("Documentation="))
                    .collect();
                assert_eq!(
                    documentation,
                    ["Documentation=man:rootsd(8)"],
                    "{}: its Documentation=",
                    unit.display()
                );
            }
            let service = fs::read_to_string(&units[1]).unwrap();
            let exec = format!("ExecStart={} ", self.exec_start);
            assert!(
                service.lines().any(|l| l.starts_with(&exec)),
                "{} does not start with {exec:?}:\n{service}",
                units[1].display()
            );

            let staged = self.at(&self.bin_dir).join("rootsd");
            let home = self.home.as_ref().map(|h| h.display().to_string());
            let expanded = match &home {
                Some(home) => self.exec_start.replace("%h", home),
                None => self.exec_start.clone(),
            };
            let copies = Sandbox::new();
            let to_verify: Vec<PathBuf> = if Path::new(&expanded) == staged {
                units.to_vec()
            } else {
                units
                    .iter()
                    .map(|unit| {
                        let copy = copies.path().join(unit.file_name().unwrap());
                        let text = fs::read_to_string(unit)
                            .unwrap()
                            .replace(&exec, &format!("ExecStart={} ", staged.display()));
                        fs::write(&copy, text).unwrap();
                        copy
                    })
                    .collect()
            };

            let runtime = Sandbox::new();
            let mut cmd = Command::new(&analyze);
            if user {
                cmd.arg("--user");
            }
            cmd.arg("verify")
                .args(&to_verify)
                .env("XDG_RUNTIME_DIR", runtime.path())
                .env("PATH", self.path_env())
                .env_remove("SYSTEMD_LOG_LEVEL");
            if let Some(home) = &self.home {
                cmd.env("HOME", home);
            }
            match &self.manpath {
                Some(manpath) => cmd.env("MANPATH", manpath),
                None => cmd.env_remove("MANPATH"),
            };
            let output = run_within(&mut cmd, PATIENCE);
            let said = format!("{}{}", stdout_of(&output), stderr_of(&output));
            assert!(
                output.status.success() && said.trim().is_empty(),
                "systemd-analyze{} verify {to_verify:?}: {}\n{said}",
                if user { " --user" } else { "" },
                output.status
            );
        }
    }

    /// rootsd(8), rootsctl(1) and rootsctl-COMMAND(1) for each subcommand, and no other page of
    /// ours; each renders with every groff warning on and without a word on stderr, and
    /// `man -w NAME` finds it.
    pub fn man_pages_render(&self) {
        let man = tool("man", "apt-get install man-db");
        tool("groff", "apt-get install groff-base");
        let suffix = self.man_suffix;
        let mut expected = vec![
            format!("man8/rootsd.8{suffix}"),
            format!("man1/rootsctl.1{suffix}"),
        ];
        for sub in subcommands() {
            expected.push(format!("man1/rootsctl-{sub}.1{suffix}"));
        }
        expected.sort();
        let man_dir = self.at(&self.man_dir);
        let ours = |name: &str| {
            let file = name.rsplit('/').next().unwrap();
            file.starts_with("rootsd.") || file.starts_with("rootsctl")
        };
        let found: Vec<String> = files_under(&man_dir)
            .into_iter()
            .filter(|f| ours(f))
            .collect();
        assert_eq!(found, expected, "the man pages in {}", man_dir.display());

        for page in &expected {
            let file = man_dir.join(page);
            let name = page
                .trim_end_matches(suffix)
                .rsplit_once('/')
                .and_then(|(_, f)| f.rsplit_once('.'))
                .map(|(name, _)| name.to_owned())
                .unwrap();
            let output = run_within(
                Command::new(&man)
                    .args(["--warnings=w", "-l"])
                    .arg(&file)
                    .env("MANROFFSEQ", "")
                    .env("MANWIDTH", "80")
                    .env("LC_ALL", "C.UTF-8")
                    .env_remove("MANPAGER")
                    .env_remove("PAGER"),
                PATIENCE,
            );
            let rendered = stdout_of(&output);
            assert!(
                output.status.success() && output.stderr.is_empty(),
                "man -l {}: {}\n{}",
                file.display(),
                output.status,
                stderr_of(&output)
            );
            let name_line = rendered
                .lines()
                .skip_while(|l| l.trim() != "NAME")
                .nth(1)
                .unwrap_or_default();
            let words: Vec<&str> = name_line.split_whitespace().collect();
            assert!(
                words.len() > 2 && words[0] == name && words[1] == "-",
                "{} renders without the NAME line `{name} - …`:\n{rendered}",
                file.display()
            );

            let mut lookup = Command::new(&man);
            lookup.arg("-w").arg(&name).env("PATH", self.path_env());
            match &self.manpath {
                Some(manpath) => lookup.env("MANPATH", manpath),
                None => lookup.env_remove("MANPATH"),
            };
            if let Some(home) = &self.home {
                lookup.env("HOME", home);
            }
            let output = run_within(&mut lookup, PATIENCE);
            assert_eq!(
                stdout_of(&output).trim(),
                file.display().to_string(),
                "man -w {name} finds another page or none: {}",
                stderr_of(&output)
            );
        }
    }

    /// Each completion script loads the way its shell loads it, and completes `rootsctl pro`
    /// to `proxy`.
    pub fn completions_load(&self) {
        let bash = tool("bash", "apt-get install bash");
        let zsh = tool("zsh", "apt-get install zsh");
        let fish = tool("fish", "apt-get install fish");
        // The shells may write caches into HOME; keep them out of the real one.
        let scratch = Sandbox::new();

        let script = r#"source "$1" || exit 1
complete -p rootsctl || exit 1
function=$(complete -p rootsctl | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
COMP_WORDS=(rootsctl pro); COMP_CWORD=1; COMP_LINE='rootsctl pro'; COMP_POINT=${#COMP_LINE}
"$function" rootsctl pro rootsctl
printf '%s\n' "${COMPREPLY[@]}""#;
        let file = self.at(&self.bash_file);
        let output = run_within(
            Command::new(&bash)
                .args(["--norc", "--noprofile", "-c", script, "bash"])
                .arg(&file)
                .env("HOME", scratch.path()),
            PATIENCE,
        );
        let said = stdout_of(&output);
        assert!(
            output.status.success()
                && output.stderr.is_empty()
                && said.contains("complete ")
                && said.lines().any(|l| l == "proxy"),
            "bash completion {}: {}\n{said}{}",
            file.display(),
            output.status,
            stderr_of(&output)
        );

        // zsh finds `_rootsctl` through fpath, as it finds every completion function.
        let script = r#"fpath=("$1" $fpath)
autoload -U compinit && compinit -u -D || exit 1
print -r -- "rootsctl=$_comps[rootsctl]"
autoload -Uz +X _rootsctl || exit 1"#;
        let dir = self.at(&self.zsh_dir);
        let output = run_within(
            Command::new(&zsh)
                .args(["-f", "-c", script, "zsh"])
                .arg(&dir)
                .env("HOME", scratch.path()),
            PATIENCE,
        );
        let said = stdout_of(&output);
        assert!(
            output.status.success()
                && output.stderr.is_empty()
                && said.lines().any(|l| l == "rootsctl=_rootsctl"),
            "zsh completion in {}: {}\n{said}{}",
            dir.display(),
            output.status,
            stderr_of(&output)
        );

        // fish loads a command's completions from fish_complete_path once the command is on
        // PATH.
        let dir = self.at(&self.fish_dir);
        let output = run_within(
            Command::new(&fish)
                .args([
                    "--no-config",
                    "-c",
                    "set -p fish_complete_path $argv[1]; complete -C 'rootsctl pro'",
                ])
                .arg(&dir)
                .env("PATH", self.path_env())
                .env("HOME", scratch.path()),
            PATIENCE,
        );
        let said = stdout_of(&output);
        assert!(
            output.status.success()
                && output.stderr.is_empty()
                && said.lines().any(|l| l.starts_with("proxy\t")),
            "fish completion in {}: {}\n{said}{}",
            dir.display(),
            output.status,
            stderr_of(&output)
        );
    }
}
