//! The label `rootsctl sessions` shows for a proxied server when `--name` is not given.

use std::ffi::OsString;
use std::path::Path;

/// A label for `rootsctl sessions` when `--name` is not given: the command's file name, plus the
/// script's for interpreters (`node server-filesystem`, not just `node`).
pub fn default_label(command: &[OsString]) -> String {
    let Some(program) = command.first() else {
        return String::new();
    };
    let program = file_name(Path::new(program));
    let interpreters = [
        "node", "python", "python3", "npx", "uvx", "uv", "deno", "bun", "bash", "sh",
    ];
    if interpreters.contains(&program.as_str())
        && let Some(script) = command[1..]
            .iter()
            .find(|a| !a.to_string_lossy().starts_with('-'))
    {
        return format!("{program} {}", script_name(Path::new(script)));
    }
    program
}

/// What a script is called: its file name without extension, or, for a generic entry point
/// (`node_modules/@scope/server-x/dist/index.js`), the package directory it belongs to.
fn script_name(script: &Path) -> String {
    let stem = script
        .file_stem()
        .map_or_else(|| file_name(script), |s| s.to_string_lossy().into_owned());
    if !["index", "main", "cli", "server", "__main__"].contains(&stem.as_str()) {
        return stem;
    }
    script
        .ancestors()
        .skip(1)
        .filter_map(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .find(|n| !["dist", "build", "lib", "bin", "src", "out"].contains(&n.as_str()))
        .unwrap_or(stem)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.to_string_lossy().into_owned(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(command: &[&str]) -> String {
        default_label(&command.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn labels_name_the_server_not_the_interpreter() {
        assert_eq!(
            label(&[
                "node",
                "/x/node_modules/@m/server-filesystem/dist/index.js",
                "/tmp"
            ]),
            "node server-filesystem"
        );
        assert_eq!(
            label(&["npx", "-y", "@modelcontextprotocol/server-memory"]),
            "npx server-memory"
        );
        assert_eq!(label(&["python3", "-u", "tools/scan.py"]), "python3 scan");
        assert_eq!(label(&["/usr/local/bin/mcp-git", "--repo", "."]), "mcp-git");
    }
}
