//! The resolved configuration: every value hookrun runs with, and where it came
//! from.
//!
//! Precedence, highest first: command-line flag, `HOOKRUN_*` environment
//! variable, `hookrun.conf`, built-in default. Default paths live under the root
//! prefix; a path given explicitly (flag, variable, config file) is used as given.
//!
//! The TaskProlog runs with the job user's environment, so for that phase the
//! `HOOKRUN_*` variables are ignored ([`EnvSnapshot`] is built untrusted). It
//! also runs as the job's user: a `hookrun.conf` that user may not read
//! (mode 0600) gives it the defaults, never a failed task; `hookrun list` and
//! the health check report such a file ([`Config::task_prolog_problem`]).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::conffile::{ConfError, ConfFile};
use crate::options::{OnFailure, Options, parse_duration};
use crate::phase::Phase;

pub const ENV_ROOT: &str = "HOOKRUN_ROOT";
pub const ENV_HOOK_DIR: &str = "HOOKRUN_HOOK_DIR";
pub const ENV_CONFIG: &str = "HOOKRUN_CONFIG";
pub const ENV_ON_FAILURE: &str = "HOOKRUN_ON_FAILURE";
pub const ENV_BUDGET: &str = "HOOKRUN_BUDGET";
pub const ENV_HOOK_TIMEOUT: &str = "HOOKRUN_HOOK_TIMEOUT";
pub const ENV_KILL_GRACE: &str = "HOOKRUN_KILL_GRACE";
pub const ENV_SCONTROL: &str = "HOOKRUN_SCONTROL";
pub const ENV_SCONTROL_TIMEOUT: &str = "HOOKRUN_SCONTROL_TIMEOUT";
pub const ENV_TEXTFILE_DIR: &str = "HOOKRUN_TEXTFILE_DIR";

/// Slurm's variables hookrun reads.
pub const ENV_SCRIPT_CONTEXT: &str = "SLURM_SCRIPT_CONTEXT";
pub const ENV_JOB_ID: &str = "SLURM_JOB_ID";
pub const ENV_NODENAME: &str = "SLURMD_NODENAME";

pub const DEFAULT_HOOK_DIR: &str = "/etc/slurm";
pub const CONFIG_FILE_NAME: &str = "hookrun.conf";
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(20);
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(500);
pub const DEFAULT_SCONTROL: &str = "/usr/bin/scontrol";
pub const DEFAULT_SCONTROL_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_STATE_DIR: &str = "/var/lib/hookrun";
pub const DEFAULT_TEXTFILE_DIR: &str = "/var/lib/prometheus/node-exporter";

/// The variables hookrun looks at, captured once.
#[derive(Debug, Clone, Default)]
pub struct EnvSnapshot {
    vars: BTreeMap<String, OsString>,
}

impl EnvSnapshot {
    /// Captures the `HOOKRUN_*` variables and the Slurm variables hookrun reads.
    pub fn from_process() -> EnvSnapshot {
        EnvSnapshot::from_vars(std::env::vars_os())
    }

    /// Builds a snapshot from name/value pairs, keeping only relevant names.
    pub fn from_vars<I, K, V>(vars: I) -> EnvSnapshot
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let vars = vars
            .into_iter()
            .filter_map(|(name, value)| {
                let name = name.into().into_string().ok()?;
                let relevant = name.starts_with("HOOKRUN_")
                    || [ENV_SCRIPT_CONTEXT, ENV_JOB_ID, ENV_NODENAME].contains(&name.as_str());
                relevant.then(|| (name, value.into()))
            })
            .collect();
        EnvSnapshot { vars }
    }

    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(name).map(OsString::as_os_str)
    }

    /// A variable that must be UTF-8 text when set. Empty counts as unset:
    /// `VAR= hookrun` is how people unset things in a shell line.
    pub fn text(&self, name: &str) -> Result<Option<&str>, ConfigError> {
        match self.get(name) {
            None => Ok(None),
            Some(value) if value.is_empty() => Ok(None),
            Some(value) => value
                .to_str()
                .map(Some)
                .ok_or_else(|| ConfigError::usage(format!("{name} is not valid UTF-8"))),
        }
    }

    /// Names of the `HOOKRUN_*` variables that are set.
    pub fn hookrun_names(&self) -> Vec<&str> {
        self.vars
            .keys()
            .map(String::as_str)
            .filter(|name| name.starts_with("HOOKRUN_"))
            .collect()
    }
}

/// A value that cannot be used: the message, and whether it is
/// `hookrun.conf`'s (exit 2, the configuration file is invalid) or the
/// command line's or the environment's (exit 64, usage), as qoslane tells
/// its mapping from its command line (docs/admin-guide.md, "Exit codes").
#[derive(Debug)]
pub struct ConfigError {
    pub message: String,
    pub in_file: bool,
}

impl ConfigError {
    /// A flag's or a variable's value.
    pub fn usage(message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            message,
            in_file: false,
        }
    }

    /// A value found at `place`, wherever that is.
    fn at(place: &Place, problem: impl fmt::Display) -> Self {
        let message = format!("{}: {problem}", place.name);
        Self {
            message,
            in_file: place.in_file,
        }
    }

    /// The exit class of this error.
    pub fn exit_class(&self) -> crate::exit::ExitClass {
        use crate::exit::ExitClass::{BadConfig, Usage};
        if self.in_file { BadConfig } else { Usage }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

impl From<ConfError> for ConfigError {
    fn from(error: ConfError) -> Self {
        let message = error.to_string();
        Self {
            message,
            in_file: true,
        }
    }
}

/// Where a value came from: a flag, a variable, or a line of `hookrun.conf`.
struct Place {
    /// How an error names it: `--budget`, `HOOKRUN_BUDGET`, `FILE:LINE: budget`.
    name: String,
    /// The value is the configuration file's (a bad one is a configuration
    /// error, not a usage error).
    in_file: bool,
}

impl Place {
    /// A flag or a variable: the command line's.
    fn given(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            in_file: false,
        }
    }
}

/// Everything a run needs to know, validated.
#[derive(Debug, Clone)]
pub struct Config {
    pub root: PathBuf,
    /// Holds `prolog.d/`, `epilog.d/`, `task-prolog.d/`, `health.d/`.
    pub hook_dir: PathBuf,
    /// The configuration file consulted (it may not exist).
    pub config_path: PathBuf,
    pub config_found: bool,
    pub on_failure: OnFailure,
    pub budget: Duration,
    pub hook_timeout: Duration,
    pub kill_grace: Duration,
    pub scontrol: PathBuf,
    pub scontrol_timeout: Duration,
    /// `metrics.json` and its lock live here.
    pub state_dir: PathBuf,
    /// `hookrun.prom` is written here (only if the directory exists).
    pub textfile_dir: PathBuf,
    /// `HOOKRUN_*` variables that were set but not trusted (task-prolog).
    pub ignored_env: Vec<String>,
    /// Why the configuration file could not be read by this (task-prolog)
    /// run, which then runs with the defaults.
    pub unreadable: Option<String>,
}

/// Joins an absolute default path under the root prefix.
pub fn reroot(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// The environment as `resolve` may read it: nothing when it is not trusted.
#[derive(Clone, Copy)]
struct TrustedEnv<'a> {
    env: &'a EnvSnapshot,
    trust: bool,
}

impl TrustedEnv<'_> {
    fn text(&self, name: &str) -> Result<Option<&str>, ConfigError> {
        if self.trust {
            self.env.text(name)
        } else {
            Ok(None)
        }
    }

    fn path(&self, name: &str) -> Option<PathBuf> {
        if !self.trust {
            return None;
        }
        self.env
            .get(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    }
}

/// Where a non-path key is looked up, in order: flag, variable, file.
struct Sources<'a> {
    env: TrustedEnv<'a>,
    conf: &'a ConfFile,
    config_path: &'a Path,
}

/// How a flag names itself in a message: `--hook-timeout`.
fn flag_place(key: &str) -> Place {
    Place::given(format!("--{}", key.replace('_', "-")))
}

impl Sources<'_> {
    /// A key's text and the place it came from, the first source that sets it.
    fn pick(
        &self,
        flag: Option<String>,
        var: &str,
        key: &str,
    ) -> Result<Option<(String, Place)>, ConfigError> {
        if let Some(value) = flag {
            return Ok(Some((value, flag_place(key))));
        }
        if let Some(value) = self.env.text(var)? {
            let place = Place::given(var);
            return Ok(Some((value.to_owned(), place)));
        }
        Ok(self.conf.get(key).map(|value| {
            let place = Place {
                name: format!("{}:{}: {key}", self.config_path.display(), value.line),
                in_file: true,
            };
            (value.text.clone(), place)
        }))
    }

    /// A duration key, `default` when no source sets it; zero is refused unless `allow_zero`.
    fn duration(
        &self,
        flag: Option<Duration>,
        var: &str,
        key: &str,
        default: Duration,
        allow_zero: bool,
    ) -> Result<Duration, ConfigError> {
        let value = match flag {
            Some(value) => Some((value, flag_place(key))),
            None => match self.pick(None, var, key)? {
                Some((text, place)) => Some((
                    parse_duration(&text).map_err(|e| ConfigError::at(&place, e))?,
                    place,
                )),
                None => None,
            },
        };
        match value {
            Some((value, place)) if value.is_zero() && !allow_zero => {
                Err(ConfigError::at(&place, "must be longer than zero"))
            }
            Some((value, _)) => Ok(value),
            None => Ok(default),
        }
    }

    /// A path key and the place it came from; a path variable is taken as bytes, not text.
    fn path(
        &self,
        flag: Option<&PathBuf>,
        var: &str,
        key: &str,
    ) -> Result<Option<(PathBuf, Place)>, ConfigError> {
        if let Some(path) = flag {
            return Ok(Some((path.clone(), flag_place(key))));
        }
        if let Some(path) = self.env.path(var) {
            let place = Place::given(var);
            return Ok(Some((path, place)));
        }
        Ok(self
            .pick(None, var, key)?
            .map(|(text, place)| (PathBuf::from(text), place)))
    }

    fn on_failure(&self, options: &Options) -> Result<OnFailure, ConfigError> {
        match self.pick(
            options.on_failure.map(|p| p.name().to_owned()),
            ENV_ON_FAILURE,
            "on_failure",
        )? {
            Some((text, place)) => OnFailure::parse(&text).map_err(|e| ConfigError::at(&place, e)),
            None => Ok(OnFailure::Drain),
        }
    }

    /// `scontrol` must be absolute: Slurm hooks run without PATH.
    fn scontrol(&self, options: &Options) -> Result<PathBuf, ConfigError> {
        match self.path(options.scontrol.as_ref(), ENV_SCONTROL, "scontrol")? {
            Some((path, place)) => {
                if !path.is_absolute() {
                    return Err(ConfigError::at(
                        &place,
                        format_args!(
                            "scontrol must be an absolute path (Slurm hooks run without PATH), got {}",
                            path.display()
                        ),
                    ));
                }
                Ok(path)
            }
            None => Ok(PathBuf::from(DEFAULT_SCONTROL)),
        }
    }
}

impl Config {
    /// Resolves flags, environment (when `trust_env`), config file and defaults.
    /// `trust_env` false is the TaskProlog, running as the job's user: a
    /// configuration file it may not open is read as empty (`unreadable`
    /// says why) rather than failing every task of every job.
    pub fn resolve(
        options: &Options,
        env: &EnvSnapshot,
        trust_env: bool,
    ) -> Result<Config, ConfigError> {
        let trusted = TrustedEnv {
            env,
            trust: trust_env,
        };
        let root = options
            .root
            .clone()
            .or_else(|| trusted.path(ENV_ROOT))
            .unwrap_or_else(|| PathBuf::from("/"));
        let hook_dir = options
            .hook_dir
            .clone()
            .or_else(|| trusted.path(ENV_HOOK_DIR))
            .unwrap_or_else(|| reroot(&root, DEFAULT_HOOK_DIR));
        let config_path = options
            .config
            .clone()
            .or_else(|| trusted.path(ENV_CONFIG))
            .unwrap_or_else(|| hook_dir.join(CONFIG_FILE_NAME));
        let (conf, unreadable) = match ConfFile::load(&root, &config_path) {
            Err(error @ ConfError::Unreadable { .. }) if !trust_env => {
                (ConfFile::default(), Some(error.to_string()))
            }
            loaded => (loaded?, None),
        };
        let sources = Sources {
            env: trusted,
            conf: &conf,
            config_path: &config_path,
        };

        let on_failure = sources.on_failure(options)?;
        let budget =
            sources.duration(options.budget, ENV_BUDGET, "budget", DEFAULT_BUDGET, false)?;
        let hook_timeout = sources.duration(
            options.hook_timeout,
            ENV_HOOK_TIMEOUT,
            "hook_timeout",
            DEFAULT_HOOK_TIMEOUT,
            false,
        )?;
        let kill_grace = sources.duration(
            options.kill_grace,
            ENV_KILL_GRACE,
            "kill_grace",
            DEFAULT_KILL_GRACE,
            true,
        )?;
        let scontrol_timeout = sources.duration(
            options.scontrol_timeout,
            ENV_SCONTROL_TIMEOUT,
            "scontrol_timeout",
            DEFAULT_SCONTROL_TIMEOUT,
            false,
        )?;
        let scontrol = sources.scontrol(options)?;
        let textfile_dir = sources
            .path(
                options.textfile_dir.as_ref(),
                ENV_TEXTFILE_DIR,
                "textfile_dir",
            )?
            .map_or_else(|| reroot(&root, DEFAULT_TEXTFILE_DIR), |(path, _)| path);

        let ignored_env = if trust_env {
            Vec::new()
        } else {
            env.hookrun_names().into_iter().map(str::to_owned).collect()
        };

        Ok(Config {
            state_dir: reroot(&root, DEFAULT_STATE_DIR),
            root,
            hook_dir,
            config_found: conf.path.is_some(),
            config_path,
            on_failure,
            budget,
            hook_timeout,
            kill_grace,
            scontrol,
            scontrol_timeout,
            textfile_dir,
            ignored_env,
            unreadable,
        })
    }

    /// Why the TaskProlog (the job's user) could not read the configuration
    /// file this run read: its settings would not apply to tasks. `None` when
    /// there is no file or every user may read it.
    pub fn task_prolog_problem(&self) -> Option<String> {
        if !self.config_found {
            return None;
        }
        crate::trust::check_readable_by_all(&self.root, &self.config_path)
            .err()
            .map(|why| {
                format!(
                    "{why}: the TaskProlog runs as the job's user and would ignore it (make it 0644)"
                )
            })
    }

    /// The directory a phase runs.
    pub fn phase_dir(&self, phase: Phase) -> PathBuf {
        self.hook_dir.join(phase.dir_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn env(vars: &[(&str, &str)]) -> EnvSnapshot {
        EnvSnapshot::from_vars(vars.iter().map(|(k, v)| (*k, *v)))
    }

    fn temp_root(conf: Option<&str>) -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("temp dir");
        if let Some(text) = conf {
            let dir = root.path().join("etc/slurm");
            fs::create_dir_all(&dir).expect("mkdir");
            fs::write(dir.join("hookrun.conf"), text).expect("write conf");
        }
        root
    }

    fn options(root: &Path) -> Options {
        Options {
            root: Some(root.to_owned()),
            ..Options::default()
        }
    }

    #[test]
    fn defaults_live_under_the_root() {
        let root = temp_root(None);
        let config = Config::resolve(&options(root.path()), &env(&[]), true).expect("defaults");
        assert_eq!(config.hook_dir, root.path().join("etc/slurm"));
        assert_eq!(
            config.config_path,
            root.path().join("etc/slurm/hookrun.conf")
        );
        assert!(!config.config_found);
        assert_eq!(config.state_dir, root.path().join("var/lib/hookrun"));
        assert_eq!(
            config.textfile_dir,
            root.path().join("var/lib/prometheus/node-exporter")
        );
        assert_eq!(config.on_failure, OnFailure::Drain);
        assert_eq!(config.budget, DEFAULT_BUDGET);
        assert_eq!(config.hook_timeout, DEFAULT_HOOK_TIMEOUT);
        assert_eq!(config.kill_grace, DEFAULT_KILL_GRACE);
        assert_eq!(config.scontrol, PathBuf::from("/usr/bin/scontrol"));
    }

    #[test]
    fn flag_beats_env_beats_config_file() {
        let root = temp_root(Some(
            "on_failure = requeue\nbudget = 7s\nhook_timeout = 3s\n",
        ));
        let vars = env(&[(ENV_BUDGET, "6s"), (ENV_ON_FAILURE, "drain")]);
        let mut opts = options(root.path());
        opts.on_failure = Some(OnFailure::Requeue);
        let config = Config::resolve(&opts, &vars, true).expect("valid");
        assert_eq!(config.on_failure, OnFailure::Requeue, "flag wins");
        assert_eq!(config.budget, Duration::from_secs(6), "env beats file");
        assert_eq!(
            config.hook_timeout,
            Duration::from_secs(3),
            "file beats default"
        );
        assert!(config.config_found);
    }

    #[test]
    fn untrusted_env_is_ignored_and_reported() {
        let root = temp_root(Some("budget = 7s\n"));
        let vars = env(&[(ENV_BUDGET, "1h"), (ENV_HOOK_DIR, "/home/user/hooks")]);
        let config = Config::resolve(&options(root.path()), &vars, false).expect("valid");
        assert_eq!(config.budget, Duration::from_secs(7));
        assert_eq!(config.hook_dir, root.path().join("etc/slurm"));
        assert_eq!(config.ignored_env, ["HOOKRUN_BUDGET", "HOOKRUN_HOOK_DIR"]);
    }

    #[test]
    fn explicit_paths_are_not_rerooted() {
        let root = temp_root(None);
        let vars = env(&[
            (ENV_HOOK_DIR, "/opt/hooks"),
            (ENV_TEXTFILE_DIR, "/srv/prom"),
        ]);
        let config = Config::resolve(&options(root.path()), &vars, true).expect("valid");
        assert_eq!(config.hook_dir, PathBuf::from("/opt/hooks"));
        assert_eq!(config.config_path, PathBuf::from("/opt/hooks/hookrun.conf"));
        assert_eq!(config.textfile_dir, PathBuf::from("/srv/prom"));
    }

    #[test]
    fn errors_name_where_the_value_came_from() {
        let root = temp_root(Some("# site policy\nbudget = soon\n"));
        let error =
            Config::resolve(&options(root.path()), &env(&[]), true).expect_err("invalid duration");
        let text = error.to_string();
        assert!(
            text.contains("hookrun.conf:2: budget: invalid duration \"soon\""),
            "{text}"
        );

        let error = Config::resolve(
            &options(root.path()),
            &env(&[(ENV_ON_FAILURE, "reboot")]),
            true,
        )
        .expect_err("invalid policy");
        assert_eq!(
            error.to_string(),
            "HOOKRUN_ON_FAILURE: invalid policy \"reboot\"; expected `drain` or `requeue`"
        );
    }

    #[test]
    fn scontrol_must_be_absolute() {
        let root = temp_root(Some("scontrol = scontrol\n"));
        let error =
            Config::resolve(&options(root.path()), &env(&[]), true).expect_err("relative scontrol");
        assert!(
            error.to_string().contains("must be an absolute path"),
            "{error}"
        );
    }

    #[test]
    fn zero_budget_is_rejected_but_zero_grace_is_allowed() {
        let root = temp_root(None);
        let mut opts = options(root.path());
        opts.budget = Some(Duration::ZERO);
        let error = Config::resolve(&opts, &env(&[]), true).expect_err("zero budget");
        assert_eq!(error.to_string(), "--budget: must be longer than zero");

        let mut opts = options(root.path());
        opts.kill_grace = Some(Duration::ZERO);
        let config = Config::resolve(&opts, &env(&[]), true).expect("zero grace");
        assert_eq!(config.kill_grace, Duration::ZERO);
    }
}
