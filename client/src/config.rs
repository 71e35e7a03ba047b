//! The user's own settings for every rootsctl they run: `~/.config/rootsd/rootsd.conf`.
//!
//! Hosts start MCP servers, and so `rootsctl proxy`, with a whitelisted environment (`HOME`,
//! `PATH`, `USER` and a few more): `ROOTSD_SOCKET` and `ROOTSD_NO_AUTOSTART` set in a shell never
//! reach them. A user of a shared service, or of a daemon at a socket of their choosing, says so
//! here instead, once, and every rootsctl reads it. The file is found from `HOME` alone, on
//! purpose: `XDG_CONFIG_HOME` is among what hosts strip, so honouring it would bring back the
//! very split this file exists to close.
//!
//! The format is one `key = value` per line; `#` starts a comment line. Values are taken as
//! written, without quotes. Anything else is refused with the line that is wrong, because a
//! setting silently ignored would send a proxy to the wrong daemon.

use std::path::{Path, PathBuf};

use rootsd_proto::paths::Environment;

pub use crate::errors::ConfigError;

/// Where the file is: `$HOME/.config/rootsd/rootsd.conf`.
pub fn path(env: &Environment) -> Option<PathBuf> {
    env.home
        .as_ref()
        .map(PathBuf::from)
        .filter(|home| home.is_absolute())
        .map(|home| home.join(".config").join("rootsd").join("rootsd.conf"))
}

/// What the file says; every setting is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserConfig {
    /// The file it was read from, when there was one.
    pub file: Option<PathBuf>,
    /// `socket = PATH`: the daemon to use, as `--socket` would say.
    pub socket: Option<PathBuf>,
    /// `autostart = yes|no`.
    pub autostart: Option<bool>,
}

impl UserConfig {
    /// Reads the file of `env`'s user; no file is no settings.
    pub fn load(env: &Environment) -> Result<Self, ConfigError> {
        let Some(path) = path(env) else {
            return Ok(Self::default());
        };
        match std::fs::read(&path) {
            Ok(bytes) => Self::parse(&bytes, &path),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(error) => Err(ConfigError::Unreadable { path, error }),
        }
    }

    /// Parses the file's bytes; `path` names it in errors.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self, ConfigError> {
        let wrong = |line: usize, problem: String| ConfigError::Invalid {
            path: path.to_owned(),
            line,
            problem,
        };
        let text = std::str::from_utf8(bytes)
            .map_err(|e| wrong(text_line(bytes, e.valid_up_to()), "is not UTF-8".to_owned()))?;
        let mut config = Self {
            file: Some(path.to_owned()),
            ..Self::default()
        };
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(wrong(number, format!("{line:?} is not `key = value`")));
            };
            let (key, value) = (key.trim(), value.trim());
            match key {
                "socket" => {
                    let socket = PathBuf::from(value);
                    if !socket.is_absolute() {
                        return Err(wrong(
                            number,
                            format!("socket {value:?} is not an absolute path"),
                        ));
                    }
                    config.socket = Some(socket);
                }
                "autostart" => {
                    config.autostart = Some(match value {
                        "yes" | "true" | "on" | "1" => true,
                        "no" | "false" | "off" | "0" => false,
                        _ => {
                            return Err(wrong(
                                number,
                                format!("autostart {value:?} is neither yes nor no"),
                            ));
                        }
                    })
                }
                _ => {
                    return Err(wrong(
                        number,
                        format!("unknown setting {key:?}; the settings are socket and autostart"),
                    ));
                }
            }
        }
        Ok(config)
    }

    /// Whether rootsctl may start a daemon: not when the user said no, nor, unless they said yes,
    /// when they named a socket, which is a daemon somebody else runs (a shared service, or one
    /// of their own started their own way).
    pub fn allows_autostart(&self) -> bool {
        self.autostart.unwrap_or(self.socket.is_none())
    }
}

/// The 1-based line holding byte `offset`.
fn text_line(bytes: &[u8], offset: usize) -> usize {
    1 + bytes[..offset].iter().filter(|b| **b == b'\n').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<UserConfig, String> {
        UserConfig::parse(text.as_bytes(), Path::new("/h/.config/rootsd/rootsd.conf"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_file_is_found_from_home_alone() {
        let env = Environment {
            home: Some("/home/ana".into()),
            ..Environment::default()
        };
        assert_eq!(
            path(&env),
            Some(PathBuf::from("/home/ana/.config/rootsd/rootsd.conf"))
        );
        assert_eq!(path(&Environment::default()), None);
    }

    #[test]
    fn settings_comments_and_blank_lines() {
        let config =
            parse("# the shared service\n\n  socket = /run/rootsd/rootsd.sock  \nautostart=no\n")
                .unwrap();
        assert_eq!(
            config.socket,
            Some(PathBuf::from("/run/rootsd/rootsd.sock"))
        );
        assert_eq!(config.autostart, Some(false));
        assert!(!config.allows_autostart());
        assert!(parse("").unwrap().allows_autostart());
    }

    #[test]
    fn a_named_socket_is_not_started_unless_the_user_says_so() {
        assert!(!parse("socket = /s.sock").unwrap().allows_autostart());
        assert!(
            parse("socket = /s.sock\nautostart = yes")
                .unwrap()
                .allows_autostart()
        );
        assert!(!parse("autostart = off").unwrap().allows_autostart());
    }

    #[test]
    fn every_mistake_names_the_file_and_the_line() {
        for (text, expect) in [
            (
                "socket /s.sock",
                "line 1: \"socket /s.sock\" is not `key = value`",
            ),
            (
                "\nsocket = run/s.sock",
                "line 2: socket \"run/s.sock\" is not an absolute path",
            ),
            (
                "autostart = maybe",
                "line 1: autostart \"maybe\" is neither yes nor no",
            ),
            (
                "sockt = /s",
                "line 1: unknown setting \"sockt\"; the settings are socket and autostart",
            ),
        ] {
            let message = parse(text).unwrap_err();
            assert!(
                message.contains("/h/.config/rootsd/rootsd.conf") && message.contains(expect),
                "{text:?}: {message}"
            );
        }
        let message = UserConfig::parse(b"socket = /a\n\xff", Path::new("/c"))
            .unwrap_err()
            .to_string();
        assert!(message.contains("line 2: is not UTF-8"), "{message}");
    }
}
