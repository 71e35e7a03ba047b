//! The hosts rootsctl knows: where each keeps its MCP servers on Linux and macOS, the key they
//! live under, the shape of an entry, whether the host gives its servers roots of its own, and
//! what it needs after its file changed. Paths are pure functions of the home directory, the
//! OS and `CODEX_HOME`, so the macOS ones are tested here as paths.

use std::path::{Path, PathBuf};

use super::format::Format;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Os {
    Linux,
    MacOs,
}

impl Os {
    pub fn current() -> Self {
        if cfg!(target_os = "macos") {
            Self::MacOs
        } else {
            Self::Linux
        }
    }
}

/// How a host writes one stdio server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Where the servers are, as paths of keys from the top; `*` is any key (Claude Code's
    /// `projects`). The container is a map of name to entry, or a list of entries with a `name`.
    pub containers: &'static [&'static [&'static str]],
    /// The key of the program (`command`, Goose's `cmd`).
    pub command: &'static str,
    /// The key of its arguments; `None` when `command` is a list of program and arguments
    /// (opencode).
    pub args: Option<&'static str>,
    /// The values of `type` that mean stdio; an entry without `type` is stdio when it has a
    /// command.
    pub stdio_types: &'static [&'static str],
    /// The values of `type` that mean an extension built into the host (Goose's `builtin` and
    /// `platform`): no server of its own, so nothing to wrap.
    pub builtin_types: &'static [&'static str],
}

const MCP_SERVERS: Shape = Shape {
    containers: &[&["mcpServers"]],
    command: "command",
    args: Some("args"),
    stdio_types: &["stdio"],
    builtin_types: &[],
};

#[derive(Clone, Copy, Debug)]
pub struct Host {
    /// What the user types: `rootsctl hosts wrap codex`.
    pub id: &'static str,
    pub format: Format,
    pub shape: Shape,
    /// The host answers `roots/list` with its own roots (its open folders), so its servers are
    /// wrapped with `--host-roots merge` and see no fewer roots than before.
    pub gives_roots: bool,
    /// What the host needs after its file changed.
    pub after: &'static str,
    /// The user's files, from the home directory.
    user_files: fn(&Path, Os, &Env) -> Vec<PathBuf>,
    /// A project's files, from its directory (`--project DIR`).
    project_files: &'static [&'static str],
}

/// What the paths depend on besides the home directory and the OS.
#[derive(Clone, Debug, Default)]
pub struct Env {
    pub codex_home: Option<PathBuf>,
}

impl Host {
    /// Every file of this host to look at, the user's and (with `project`) the project's.
    pub fn files(&self, home: &Path, os: Os, env: &Env, project: Option<&Path>) -> Vec<PathBuf> {
        let mut files = (self.user_files)(home, os, env);
        if let Some(project) = project {
            files.extend(self.project_files.iter().map(|f| project.join(f)));
        }
        files
    }
}

/// `~/.config/NAME` on Linux, `~/Library/Application Support/NAME` on macOS.
fn app_dir(home: &Path, os: Os, name: &str) -> PathBuf {
    match os {
        Os::Linux => home.join(".config").join(name),
        Os::MacOs => home.join("Library/Application Support").join(name),
    }
}

pub const HOSTS: &[Host] = &[
    Host {
        id: "claude-desktop", // Claude Desktop
        format: Format::Json,
        shape: MCP_SERVERS,
        gives_roots: false,
        after: "quit Claude Desktop completely and open it again",
        user_files: |home, os, _| {
            vec![app_dir(home, os, "Claude").join("claude_desktop_config.json")]
        },
        project_files: &[],
    },
    Host {
        id: "claude-code", // Claude Code
        format: Format::Json,
        shape: Shape {
            containers: &[&["mcpServers"], &["projects", "*", "mcpServers"]],
            ..MCP_SERVERS
        },
        gives_roots: true,
        after: "start a new Claude Code session (`/mcp` lists the servers); a project's .mcp.json servers ask for approval again",
        user_files: |home, _, _| vec![home.join(".claude.json")],
        project_files: &[".mcp.json"],
    },
    Host {
        id: "vscode", // VS Code
        format: Format::Json,
        shape: Shape {
            containers: &[&["servers"]],
            ..MCP_SERVERS
        },
        gives_roots: true,
        after: "restart each server (MCP: List Servers, then Restart) or reload the window; VS Code asks you to trust the changed servers",
        user_files: |home, os, _| vec![app_dir(home, os, "Code/User").join("mcp.json")],
        project_files: &[".vscode/mcp.json"],
    },
    Host {
        id: "cursor", // Cursor
        format: Format::Json,
        shape: MCP_SERVERS,
        gives_roots: true,
        after: "turn each server off and on in Cursor Settings > MCP, or restart Cursor",
        user_files: |home, _, _| vec![home.join(".cursor/mcp.json")],
        project_files: &[".cursor/mcp.json"],
    },
    Host {
        id: "windsurf", // Windsurf / Devin Desktop
        format: Format::Json,
        shape: MCP_SERVERS,
        gives_roots: false,
        after: "press Refresh in the MCP panel, or restart the app",
        user_files: |home, _, _| {
            vec![
                home.join(".codeium/windsurf/mcp_config.json"),
                home.join(".config/devin/mcp_config.json"),
            ]
        },
        project_files: &[".devin/mcp_config.json"],
    },
    Host {
        id: "zed", // Zed
        format: Format::Json,
        shape: Shape {
            containers: &[&["context_servers"]],
            ..MCP_SERVERS
        },
        gives_roots: false,
        after: "nothing: Zed reloads settings.json and restarts the changed servers itself",
        user_files: |home, _, _| vec![home.join(".config/zed/settings.json")],
        project_files: &[".zed/settings.json"],
    },
    Host {
        id: "gemini", // Gemini CLI
        format: Format::Json,
        shape: MCP_SERVERS,
        gives_roots: false,
        after: "start a new gemini session",
        user_files: |home, _, _| vec![home.join(".gemini/settings.json")],
        project_files: &[".gemini/settings.json"],
    },
    Host {
        id: "codex", // Codex CLI
        format: Format::Toml,
        shape: Shape {
            containers: &[&["mcp_servers"]],
            ..MCP_SERVERS
        },
        gives_roots: false,
        after: "start a new codex session",
        user_files: |home, _, env| {
            let dir = env
                .codex_home
                .clone()
                .unwrap_or_else(|| home.join(".codex"));
            vec![dir.join("config.toml")]
        },
        project_files: &[".codex/config.toml"],
    },
    Host {
        id: "goose", // Goose
        format: Format::Yaml,
        shape: Shape {
            containers: &[&["extensions"]],
            command: "cmd",
            args: Some("args"),
            stdio_types: &["stdio"],
            builtin_types: &["builtin", "platform"],
        },
        gives_roots: false,
        after: "start a new goose session",
        user_files: |home, _, _| vec![home.join(".config/goose/config.yaml")],
        project_files: &[],
    },
    Host {
        id: "opencode", // opencode
        format: Format::Json,
        shape: Shape {
            containers: &[&["mcp"]],
            command: "command",
            args: None,
            stdio_types: &["local"],
            builtin_types: &[],
        },
        gives_roots: true,
        after: "restart opencode",
        user_files: |home, _, _| {
            vec![
                home.join(".config/opencode/opencode.json"),
                home.join(".config/opencode/opencode.jsonc"),
            ]
        },
        project_files: &["opencode.json", "opencode.jsonc"],
    },
    Host {
        id: "continue", // Continue
        format: Format::Yaml,
        shape: MCP_SERVERS,
        gives_roots: false,
        after: "reload the editor window",
        user_files: |home, _, _| vec![home.join(".continue/config.yaml")],
        project_files: &[],
    },
    Host {
        id: "cline", // Cline
        format: Format::Json,
        shape: MCP_SERVERS,
        gives_roots: false,
        after: "nothing: Cline restarts the servers when the file changes",
        user_files: |home, os, _| {
            vec![
                app_dir(
                    home,
                    os,
                    "Code/User/globalStorage/saoudrizwan.claude-dev/settings",
                )
                .join("cline_mcp_settings.json"),
            ]
        },
        project_files: &[],
    },
    Host {
        id: "lmstudio", // LM Studio
        format: Format::Json,
        shape: MCP_SERVERS,
        gives_roots: false,
        after: "restart LM Studio",
        user_files: |home, _, _| vec![home.join(".lmstudio/mcp.json")],
        project_files: &[],
    },
];

pub fn find(id: &str) -> Option<&'static Host> {
    HOSTS.iter().find(|h| h.id == id)
}

/// The ids, for messages.
pub fn ids() -> String {
    HOSTS.iter().map(|h| h.id).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(id: &str, os: Os, env: &Env) -> Vec<String> {
        find(id)
            .unwrap()
            .files(Path::new("/h"), os, env, Some(Path::new("/p")))
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    }

    #[test]
    fn every_host_has_its_files_on_linux_and_macos() {
        let env = Env::default();
        for (id, linux, mac) in [
            (
                "claude-desktop",
                "/h/.config/Claude/claude_desktop_config.json",
                "/h/Library/Application Support/Claude/claude_desktop_config.json",
            ),
            ("claude-code", "/h/.claude.json", "/h/.claude.json"),
            (
                "vscode",
                "/h/.config/Code/User/mcp.json",
                "/h/Library/Application Support/Code/User/mcp.json",
            ),
            ("cursor", "/h/.cursor/mcp.json", "/h/.cursor/mcp.json"),
            (
                "windsurf",
                "/h/.codeium/windsurf/mcp_config.json",
                "/h/.codeium/windsurf/mcp_config.json",
            ),
            (
                "zed",
                "/h/.config/zed/settings.json",
                "/h/.config/zed/settings.json",
            ),
            (
                "gemini",
                "/h/.gemini/settings.json",
                "/h/.gemini/settings.json",
            ),
            ("codex", "/h/.codex/config.toml", "/h/.codex/config.toml"),
            (
                "goose",
                "/h/.config/goose/config.yaml",
                "/h/.config/goose/config.yaml",
            ),
            (
                "opencode",
                "/h/.config/opencode/opencode.json",
                "/h/.config/opencode/opencode.json",
            ),
            (
                "continue",
                "/h/.continue/config.yaml",
                "/h/.continue/config.yaml",
            ),
            (
                "cline",
                "/h/.config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
                "/h/Library/Application Support/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
            ),
            ("lmstudio", "/h/.lmstudio/mcp.json", "/h/.lmstudio/mcp.json"),
        ] {
            assert_eq!(files(id, Os::Linux, &env)[0], linux, "{id}");
            assert_eq!(files(id, Os::MacOs, &env)[0], mac, "{id}");
        }
        assert_eq!(
            files("windsurf", Os::Linux, &env)[1],
            "/h/.config/devin/mcp_config.json"
        );
        assert_eq!(files("claude-code", Os::Linux, &env)[1], "/p/.mcp.json");
        assert_eq!(files("vscode", Os::MacOs, &env)[1], "/p/.vscode/mcp.json");
        let codex_home = Env {
            codex_home: Some("/c".into()),
        };
        assert_eq!(files("codex", Os::Linux, &codex_home)[0], "/c/config.toml");
        assert_eq!(HOSTS.len(), 13);
    }

    #[test]
    fn hosts_that_give_roots_of_their_own_are_the_documented_ones() {
        let giving: Vec<&str> = HOSTS
            .iter()
            .filter(|h| h.gives_roots)
            .map(|h| h.id)
            .collect();
        assert_eq!(giving, ["claude-code", "vscode", "cursor", "opencode"]);
    }
}
