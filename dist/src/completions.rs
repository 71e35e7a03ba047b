//! rootsctl's shell completions for bash, zsh and fish, exactly as `rootsctl completions SHELL`
//! prints them, under the file names each shell's completion directory expects. Only renders.

use clap::CommandFactory as _;
use clap_complete::{Generator as _, Shell};

/// `(file name, script)` for bash (`rootsctl.bash`), zsh (`_rootsctl`) and fish
/// (`rootsctl.fish`). The installers rename the bash one to `rootsctl`, the name
/// bash-completion looks up when `rootsctl` is first completed.
pub fn scripts() -> Vec<(String, Vec<u8>)> {
    [Shell::Bash, Shell::Zsh, Shell::Fish]
        .into_iter()
        .map(|shell| {
            let mut script = Vec::new();
            let mut cmd = rootsctl::args::Cli::command();
            clap_complete::generate(shell, &mut cmd, "rootsctl", &mut script);
            (shell.file_name("rootsctl"), script)
        })
        .collect()
}
