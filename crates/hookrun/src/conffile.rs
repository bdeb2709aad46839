//! The `hookrun.conf` file: `key = value` lines, `#` comments, blank lines.
//!
//! This module only checks the syntax (known keys, no duplicates) and keeps the
//! line of each value so that the configuration (`config.rs`) can name it in an
//! error.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// The keys the file may set. Anything else is an error: a misspelt key that
/// silently does nothing is worse than a drained node with a clear message.
pub const KEYS: [&str; 7] = [
    "on_failure",
    "budget",
    "hook_timeout",
    "kill_grace",
    "scontrol",
    "scontrol_timeout",
    "textfile_dir",
];

/// One `key = value` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    pub text: String,
    pub line: usize,
}

/// A parsed configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfFile {
    /// Where it was read from; `None` when no file exists (all defaults).
    pub path: Option<PathBuf>,
    values: BTreeMap<&'static str, Value>,
}

/// A configuration file that cannot be used.
#[derive(Debug)]
pub enum ConfError {
    /// The file exists but this user may not open it (EACCES, EPERM): the
    /// TaskProlog, running as the job's user, then uses the defaults
    /// (`config.rs`); anyone else stops.
    Unreadable {
        path: PathBuf,
        error: io::Error,
    },
    Read {
        path: PathBuf,
        error: io::Error,
    },
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfError::Read { path, error } | ConfError::Unreadable { path, error } => {
                write!(f, "failed to read {}: {error}", path.display())
            }
            ConfError::Syntax {
                path,
                line,
                message,
            } => write!(f, "{}:{line}: {message}", path.display()),
        }
    }
}

impl std::error::Error for ConfError {}

impl ConfFile {
    /// Reads `path`; a missing file is an empty configuration, not an error.
    pub fn load(root: &Path, path: &Path) -> Result<ConfFile, ConfError> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                // It names a program hookrun runs (`scontrol`): whoever can
                // write it runs commands as root (crate::trust).
                crate::trust::check_file(root, path).map_err(|why| ConfError::Read {
                    path: path.to_owned(),
                    error: io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!("refusing to use it: {why}"),
                    ),
                })?;
                ConfFile::parse(path, &text)
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(ConfFile::default()),
            Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
                Err(ConfError::Unreadable {
                    path: path.to_owned(),
                    error,
                })
            }
            Err(error) => Err(ConfError::Read {
                path: path.to_owned(),
                error,
            }),
        }
    }

    /// Parses the text of a configuration file read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<ConfFile, ConfError> {
        let syntax = |line: usize, message: String| ConfError::Syntax {
            path: path.to_owned(),
            line,
            message,
        };
        let mut values = BTreeMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let Some((key, value)) = trimmed.split_once('=') else {
                return Err(syntax(
                    line,
                    format!("expected `key = value`, found {trimmed:?}"),
                ));
            };
            let key = key.trim();
            let Some(known) = KEYS.iter().copied().find(|k| *k == key) else {
                return Err(syntax(
                    line,
                    format!("unknown key {key:?} (known keys: {})", KEYS.join(", ")),
                ));
            };
            let value = Value {
                text: value.trim().to_owned(),
                line,
            };
            if let Some(first) = values.insert(known, value) {
                return Err(syntax(
                    line,
                    format!("duplicate key {key:?} (first set on line {})", first.line),
                ));
            }
        }
        Ok(ConfFile {
            path: Some(path.to_owned()),
            values,
        })
    }

    /// The value set for `key`, if any. `key` must be one of [`KEYS`].
    pub fn get(&self, key: &str) -> Option<&Value> {
        debug_assert!(KEYS.contains(&key), "unknown configuration key {key}");
        self.values.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ConfFile, ConfError> {
        ConfFile::parse(Path::new("/etc/slurm/hookrun.conf"), text)
    }

    #[test]
    fn reads_keys_comments_and_blank_lines() {
        let conf = parse("# policy\n\non_failure = requeue\n  budget=25s  \n").expect("valid");
        let on_failure = conf.get("on_failure").expect("set");
        assert_eq!(on_failure.text, "requeue");
        assert_eq!(on_failure.line, 3);
        assert_eq!(conf.get("budget").map(|v| v.text.as_str()), Some("25s"));
        assert_eq!(conf.get("hook_timeout"), None);
    }

    #[test]
    fn unknown_key_names_file_and_line() {
        let error = parse("on_failure = drain\nbugdet = 10s\n").expect_err("unknown key");
        let text = error.to_string();
        assert!(
            text.starts_with("/etc/slurm/hookrun.conf:2: unknown key \"bugdet\""),
            "{text}"
        );
    }

    #[test]
    fn duplicate_key_is_an_error() {
        let error = parse("budget = 1s\nbudget = 2s\n").expect_err("duplicate");
        assert_eq!(
            error.to_string(),
            "/etc/slurm/hookrun.conf:2: duplicate key \"budget\" (first set on line 1)"
        );
    }

    #[test]
    fn line_without_equals_is_an_error() {
        let error = parse("requeue\n").expect_err("no equals sign");
        assert!(error.to_string().contains(":1: expected `key = value`"));
    }

    #[test]
    fn missing_file_is_empty() {
        let conf = ConfFile::load(Path::new("/"), Path::new("/nonexistent/hookrun.conf"))
            .expect("missing is fine");
        assert_eq!(conf, ConfFile::default());
    }
}
