//! The workspace in a server's command line, environment and working directory, for servers
//! that take their directories as arguments instead of asking for roots.
//!
//! `rootsctl proxy --env NAME=TEMPLATE --cwd TEMPLATE -- COMMAND ARGS...` names the places the
//! workspace goes with placeholders, and [`LaunchTemplate::expand`] fills them from the roots the
//! server is shown (decoded to paths, after `--map`):
//!
//! - an argument that is exactly `{roots}` becomes one argument per root (none when the
//!   workspace is empty);
//! - an argument that is exactly `{roots:FLAG}` becomes `FLAG PATH` for each root, for servers
//!   that take a repeated flag and its value as two arguments (`{roots:--allow-dir}`);
//! - any other argument containing `{roots}` is repeated once per root, each copy with that
//!   root's path (`--allow={roots}`);
//! - `{root}` anywhere is the first root's path;
//! - in `--env`, `{roots}` is every path joined with `:`, as `PATH`-like variables are;
//! - `{{` and `}}` are literal braces.
//!
//! An argument with no placeholder passes exactly as written, braces and all: servers take JSON
//! and other braced text as arguments, and nothing the user did not mark is rewritten. So the
//! escapes only mean something inside an argument that also has a placeholder.
//!
//! This module is pure: paths in, argument vectors out. The proxy decides when to expand and
//! what a changed expansion means (a restart).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::PathBuf;

/// One piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(Vec<u8>),
    /// `{root}`.
    Root,
    /// `{roots}`.
    Roots,
}

/// A text with placeholders, or one passed as written.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Template {
    pieces: Vec<Piece>,
}

impl Template {
    /// Parses `text`; `None` when it has no placeholder, and so passes as written.
    fn parse(text: &OsStr) -> Result<Option<Self>, TemplateError> {
        let bytes = text.as_bytes();
        let mut pieces = Vec::new();
        let mut literal = Vec::new();
        let mut placeholders = 0;
        let mut at = 0;
        while at < bytes.len() {
            let rest = &bytes[at..];
            if rest.starts_with(b"{{") || rest.starts_with(b"}}") {
                literal.push(rest[0]);
                at += 2;
            } else if let Some(piece) = [(&b"{root}"[..], Piece::Root), (b"{roots}", Piece::Roots)]
                .into_iter()
                .find_map(|(name, piece)| rest.starts_with(name).then_some((name.len(), piece)))
            {
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(piece.1);
                placeholders += 1;
                at += piece.0;
            } else {
                literal.push(rest[0]);
                at += 1;
            }
        }
        if placeholders == 0 {
            return Ok(None);
        }
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        let roots = pieces.iter().filter(|p| **p == Piece::Roots).count();
        if roots > 1 {
            return Err(TemplateError::TwoRoots(text.to_owned()));
        }
        Ok(Some(Self { pieces }))
    }

    fn has(&self, wanted: &Piece) -> bool {
        self.pieces.contains(wanted)
    }

    /// The text with `{root}` as `first` and `{roots}` as `each`.
    fn fill(&self, first: &[u8], each: &[u8]) -> OsString {
        let mut out = Vec::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.extend_from_slice(text),
                Piece::Root => out.extend_from_slice(first),
                Piece::Roots => out.extend_from_slice(each),
            }
        }
        OsString::from_vec(out)
    }
}

/// One argument of the server's command line.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Arg {
    /// Passed as written.
    Plain(OsString),
    /// Exactly `{roots}`: one argument per root.
    EachRoot,
    /// Exactly `{roots:FLAG}`: `FLAG PATH` per root.
    FlagPerRoot(OsString),
    /// Anything else with placeholders: one argument, or one per root with `{roots}`.
    Template(Template),
}

impl Arg {
    fn parse(text: &OsStr) -> Result<Self, TemplateError> {
        let bytes = text.as_bytes();
        if bytes == b"{roots}" {
            return Ok(Self::EachRoot);
        }
        if let Some(flag) = bytes
            .strip_prefix(b"{roots:")
            .and_then(|rest| rest.strip_suffix(b"}"))
            .filter(|flag| !flag.is_empty() && !flag.contains(&b'}'))
        {
            return Ok(Self::FlagPerRoot(OsStr::from_bytes(flag).to_owned()));
        }
        Ok(match Template::parse(text)? {
            Some(template) => Self::Template(template),
            None => Self::Plain(text.to_owned()),
        })
    }

    fn uses_workspace(&self) -> bool {
        !matches!(self, Self::Plain(_))
    }

    fn needs_a_root(&self) -> bool {
        matches!(self, Self::Template(t) if t.has(&Piece::Root))
    }
}

/// Why a template cannot be used; each message names the text and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error(
        "{0:?} holds {{roots}} twice: an argument is repeated once per root, so it can hold {{roots}} once (write {{{{ and }}}} for literal braces)"
    )]
    TwoRoots(OsString),
    #[error(
        "the command {0:?} cannot be {{roots}}: the program is one argument; use {{root}} for the first root, or put {{roots}} among its arguments"
    )]
    ProgramRoots(OsString),
    #[error("--env {0:?} is not NAME=TEMPLATE: give a variable name, then =, then its value")]
    EnvSyntax(OsString),
    #[error(
        "--cwd {0:?} holds {{roots}}: a working directory is one path; use {{root}} for the first root"
    )]
    CwdRoots(OsString),
}

/// A text that is either passed as written or filled from the workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Value {
    Plain(OsString),
    Template(Template),
}

impl Value {
    fn parse(text: &OsStr) -> Result<Self, TemplateError> {
        Ok(match Template::parse(text)? {
            Some(template) => Self::Template(template),
            None => Self::Plain(text.to_owned()),
        })
    }

    fn template(&self) -> Option<&Template> {
        match self {
            Self::Template(t) => Some(t),
            Self::Plain(_) => None,
        }
    }

    fn fill(&self, first: &[u8], each: &[u8]) -> OsString {
        match self {
            Self::Plain(text) => text.clone(),
            Self::Template(t) => t.fill(first, each),
        }
    }
}

/// What the server is started with: the command line, the variables set for it and its working
/// directory, before the workspace fills them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchTemplate {
    args: Vec<Arg>,
    /// `--env` settings in the order given, so that a later one of the same name wins as the
    /// user expects.
    env: Vec<(OsString, Value)>,
    cwd: Option<Value>,
}

/// A filled [`LaunchTemplate`]: exactly what to start. Two launches that are equal start the
/// same server, so a change of roots that leaves the launch alone restarts nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The program, then its arguments.
    pub argv: Vec<OsString>,
    /// Variables set for the server on top of the proxy's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Its working directory; the proxy's own when `None`.
    pub cwd: Option<PathBuf>,
}

/// `{root}` is used but the workspace has no root to fill it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeedsARoot;

impl LaunchTemplate {
    /// Parses `COMMAND ARGS...`, the `--env NAME=TEMPLATE` settings and `--cwd TEMPLATE`.
    pub fn parse(
        command: &[OsString],
        env: &[OsString],
        cwd: Option<&OsStr>,
    ) -> Result<Self, TemplateError> {
        let args = command
            .iter()
            .map(|arg| Arg::parse(arg))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(Arg::EachRoot | Arg::FlagPerRoot(_)) = args.first() {
            return Err(TemplateError::ProgramRoots(command[0].clone()));
        }
        if let Some(Arg::Template(t)) = args.first()
            && t.has(&Piece::Roots)
        {
            return Err(TemplateError::ProgramRoots(command[0].clone()));
        }
        let mut settings = Vec::with_capacity(env.len());
        for setting in env {
            let bytes = setting.as_bytes();
            let at = bytes
                .iter()
                .position(|b| *b == b'=')
                .filter(|at| *at > 0)
                .ok_or_else(|| TemplateError::EnvSyntax(setting.clone()))?;
            let name = OsStr::from_bytes(&bytes[..at]).to_owned();
            settings.push((name, Value::parse(OsStr::from_bytes(&bytes[at + 1..]))?));
        }
        let cwd = match cwd {
            None => None,
            Some(text) => {
                let value = Value::parse(text)?;
                if value.template().is_some_and(|t| t.has(&Piece::Roots)) {
                    return Err(TemplateError::CwdRoots(text.to_owned()));
                }
                Some(value)
            }
        };
        Ok(Self {
            args,
            env: settings,
            cwd,
        })
    }

    /// Whether anything depends on the workspace: only then can a change of roots change what
    /// the server is started with.
    pub fn uses_workspace(&self) -> bool {
        self.args.iter().any(Arg::uses_workspace)
            || self.env.iter().any(|(_, v)| v.template().is_some())
            || self.cwd.as_ref().is_some_and(|v| v.template().is_some())
    }

    /// Whether the launch cannot be made without at least one root.
    fn needs_a_root(&self) -> bool {
        let root = |v: &Value| v.template().is_some_and(|t| t.has(&Piece::Root));
        self.args.iter().any(Arg::needs_a_root)
            || self.env.iter().any(|(_, v)| root(v))
            || self.cwd.as_ref().is_some_and(root)
    }

    /// The launch for a workspace whose roots the server sees at `paths`, in order.
    pub fn expand(&self, paths: &[PathBuf]) -> Result<Launch, NeedsARoot> {
        let first = match paths.first() {
            Some(first) => first.as_os_str().as_bytes(),
            None if self.needs_a_root() => return Err(NeedsARoot),
            None => b"",
        };
        let mut argv = Vec::new();
        for arg in &self.args {
            match arg {
                Arg::Plain(text) => argv.push(text.clone()),
                Arg::EachRoot => argv.extend(paths.iter().map(|p| p.as_os_str().to_owned())),
                Arg::FlagPerRoot(flag) => {
                    for path in paths {
                        argv.push(flag.clone());
                        argv.push(path.as_os_str().to_owned());
                    }
                }
                Arg::Template(t) if t.has(&Piece::Roots) => {
                    argv.extend(
                        paths
                            .iter()
                            .map(|p| t.fill(first, p.as_os_str().as_bytes())),
                    );
                }
                Arg::Template(t) => argv.push(t.fill(first, b"")),
            }
        }
        let joined = paths
            .iter()
            .map(|p| p.as_os_str().as_bytes())
            .collect::<Vec<_>>()
            .join(&b':');
        let env = self
            .env
            .iter()
            .map(|(name, value)| (name.clone(), value.fill(first, &joined)))
            .collect();
        let cwd = self
            .cwd
            .as_ref()
            .map(|value| PathBuf::from(value.fill(first, b"")));
        Ok(Launch { argv, env, cwd })
    }
}

#[cfg(test)]
mod tests;
