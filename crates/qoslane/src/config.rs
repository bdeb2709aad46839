//! Loading the mapping for a run: the admin's file when it is valid, else the
//! last-known-good copy; hashing it; promoting a new valid file (the next run picks up an edited mapping).

use std::path::Path;

use nodeio::trusted::Symlink;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::mapping::{Mapping, validate_str};
use crate::paths::Paths;
use crate::state::fsutil;

/// Until when a hook may spend on validating the admin's mapping: half the
/// run's time, set once by the run (`Session::new`), so that a huge file
/// leaves the last-known-good fallback and the transaction their share.
/// Unset (commands such as `validate`): no bound.
static PARSE_UNTIL: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

pub fn bound_parsing(until: std::time::Instant) {
    if let Ok(mut u) = PARSE_UNTIL.lock() {
        *u = Some(until);
    }
}

fn parse_bound() -> Option<std::time::Instant> {
    PARSE_UNTIL.lock().ok().and_then(|u| *u)
}

/// A mapping file larger than this is refused unread.
pub const MAX_MAPPING_BYTES: u64 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The admin's file at `paths.config`.
    Config,
    /// The admin's file is missing or invalid; the last valid one is used.
    LastKnownGood,
}

#[derive(Debug)]
pub struct Loaded {
    pub mapping: Mapping,
    pub sha256: String,
    pub source: Source,
    /// Why the admin's file was not used, when it was not.
    pub problem: Option<String>,
    /// The hash of the admin's file as this run read it, used or not
    /// (`None`: it could not be read): what [`still_in_force`] compares.
    installed: Option<String>,
    text: String,
}

impl Loaded {
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// The SHA-256 of `data` in lower-case hex. A text the process validated
/// before ([`memo`]: the mapping a run reads several times) is not hashed
/// again: its hash was kept with it.
pub fn sha256_hex(data: &[u8]) -> String {
    if let Some(sha) = memo::sha256_of(data) {
        return sha;
    }
    hex(&Sha256::digest(data))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// Reads and validates a mapping file. The error for an invalid file carries
/// the first diagnostic's headline (`FILE:LINE:COL: error: …`).
pub fn read_valid(paths: &Paths, path: &Path) -> Result<(Mapping, String, String)> {
    let text = read_trusted_text(paths, path)?;
    if let Some((m, sha)) = memo::get(&text) {
        return Ok((m, sha, text));
    }
    // Only the admin's file is bounded: the last-known-good copy validated
    // before, and is what a run falls back to.
    let bound = parse_bound().filter(|_| path == paths.config);
    let Some(v) = bound.map_or_else(
        || Some(validate_str(&text)),
        |until| crate::mapping::validate_str_until(&text, until),
    ) else {
        return Err(Error::MappingInvalid {
            path: path.to_owned(),
            count: 1,
            first: format!(
                "{}: validation did not finish within the run's deadline (the file is too \
                 large or too complex for a hook)",
                path.display()
            ),
        });
    };
    if let Some(m) = v.mapping {
        let sha = hex(&Sha256::digest(text.as_bytes()));
        memo::put(&text, &m, &sha);
        Ok((m, sha, text))
    } else {
        Err(invalid(path, &v))
    }
}

/// The error for a file that did not validate: how many errors, the first
/// one located (`FILE:LINE:COL: …`; the error is its severity).
fn invalid(path: &Path, v: &crate::mapping::Validation) -> Error {
    let errors: Vec<_> = v.errors().collect();
    Error::MappingInvalid {
        path: path.to_owned(),
        count: errors.len(),
        first: errors
            .first()
            .map(|d| d.located(&path.display().to_string()))
            .unwrap_or_default(),
    }
}

/// The mapping decides which kernel files root writes (`node_settings`), so
/// it is read like the state files (nodeio's trusted read): opened once, the
/// descriptor judged — a regular file of root (or the user running qoslane),
/// not writable by group or others — in directories nobody else can write
/// from the root prefix down; a symlink only of root's, judged by its
/// target. What is validated is what was judged. `validate` does not ask
/// this: it only reads.
pub fn read_trusted_text(paths: &Paths, path: &Path) -> Result<String> {
    let refused = |p: &Path, why: String| {
        Error::state(
            path,
            if p == path {
                format!("{why}; refusing to use this mapping")
            } else {
                format!("{}: {why}; refusing to use this mapping", p.display())
            },
        )
    };
    let bytes =
        match nodeio::trusted::read(&paths.root, path, Symlink::FollowTrusted, MAX_MAPPING_BYTES) {
            Ok(Some(b)) => b,
            Ok(None) => {
                return Err(Error::MappingMissing {
                    path: path.to_owned(),
                    source: std::io::Error::from_raw_os_error(
                        rustix::io::Errno::NOENT.raw_os_error(),
                    ),
                });
            }
            Err(nodeio::Error::TooLarge { size, .. }) => return Err(too_large(path, size)),
            Err(nodeio::Error::Untrusted { path: p, why }) => return Err(refused(&p, why)),
            Err(nodeio::Error::Io { source, .. }) => {
                return Err(Error::MappingMissing {
                    path: path.to_owned(),
                    source,
                });
            }
            Err(e) => return Err(e.into()),
        };
    utf8(path, bytes)
}

fn too_large(path: &Path, size: u64) -> Error {
    Error::MappingInvalid {
        path: path.to_owned(),
        count: 1,
        first: format!(
            "{}: {size} bytes is too large for a mapping file (limit {MAX_MAPPING_BYTES})",
            path.display()
        ),
    }
}

fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| Error::MappingInvalid {
        path: path.to_owned(),
        count: 1,
        first: format!(
            "{}: not UTF-8 (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ),
    })
}

/// Reads a mapping file without judging who may write it (`validate`, and
/// messages about a rejected file).
pub fn read_text(path: &Path) -> Result<String> {
    let md = std::fs::metadata(path).map_err(|source| Error::MappingMissing {
        path: path.to_owned(),
        source,
    })?;
    if md.len() > MAX_MAPPING_BYTES {
        return Err(too_large(path, md.len()));
    }
    let bytes = std::fs::read(path).map_err(|source| Error::MappingMissing {
        path: path.to_owned(),
        source,
    })?;
    utf8(path, bytes)
}

/// A valid mapping that was not put in force, and why (`rejected.json`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rejected {
    pub sha256: String,
    pub why: String,
    pub time: String,
}

/// The mapping refused last (by `sync` or the first Prolog to see it).
pub fn rejected(paths: &Paths) -> Option<Rejected> {
    fsutil::read_json(paths, &paths.rejected_mapping())
        .ok()
        .flatten()
}

/// Records that the admin's mapping `sha256` is not put in force, and why.
pub fn reject(paths: &Paths, sha256: &str, why: &str) -> Result<()> {
    fsutil::ensure_dir(paths, &paths.lib_dir)?;
    fsutil::write_json(
        paths,
        &paths.rejected_mapping(),
        &Rejected {
            sha256: sha256.to_owned(),
            why: why.to_owned(),
            time: crate::time::now_rfc3339(),
        },
        crate::state::PUBLIC,
    )
}

/// Forgets a rejection (the mapping was put in force, or replaced).
pub fn clear_rejected(paths: &Paths) -> Result<()> {
    fsutil::remove(paths, &paths.rejected_mapping()).map(drop)
}

/// A mapping file for a dry run (`explain --config FILE`): read without the
/// trust rules (nothing is applied from it), validated; its first problem is
/// the error.
pub fn read_for_dry_run(path: &Path) -> Result<Loaded> {
    let text = read_text(path)?;
    let v = validate_str(&text);
    if let Some(mapping) = v.mapping {
        return Ok(Loaded {
            mapping,
            sha256: sha256_hex(text.as_bytes()),
            source: Source::Config,
            problem: None,
            installed: None,
            text,
        });
    }
    Err(invalid(path, &v))
}

/// The mapping this run uses: the admin's file if valid and not refused by
/// the fabric gate (see [`rejected`]), else last-known-good. With neither,
/// the admin's file (valid: its levels are refused one by one), or its error.
pub fn load(paths: &Paths) -> Result<Loaded> {
    match read_valid(paths, &paths.config) {
        Ok((mapping, sha256, text)) => {
            let refused = rejected(paths).filter(|r| r.sha256 == sha256);
            if let Some(r) = refused
                && let Ok((m, sha, t)) = read_valid(paths, &paths.last_known_good())
            {
                return Ok(Loaded {
                    mapping: m,
                    sha256: sha,
                    source: Source::LastKnownGood,
                    problem: Some(format!(
                        "mapping sha256 {sha256} is valid but was not put in force: {}",
                        r.why
                    )),
                    installed: Some(sha256),
                    text: t,
                });
            }
            Ok(Loaded {
                mapping,
                installed: Some(sha256.clone()),
                sha256,
                source: Source::Config,
                problem: None,
                text,
            })
        }
        Err(e) => match read_valid(paths, &paths.last_known_good()) {
            Ok((mapping, sha256, text)) => Ok(Loaded {
                mapping,
                sha256,
                source: Source::LastKnownGood,
                problem: Some(e.to_string()),
                installed: installed_sha(paths),
                text,
            }),
            Err(_) => Err(e),
        },
    }
}

/// The hash of the admin's file as it is now (read as the mapping is, not
/// validated), `None` when it cannot be read.
fn installed_sha(paths: &Paths) -> Option<String> {
    nodeio::trusted::read(
        &paths.root,
        &paths.config,
        Symlink::FollowTrusted,
        MAX_MAPPING_BYTES,
    )
    .ok()
    .flatten()
    .map(|b| sha256_hex(&b))
}

/// The `on_unknown_qos` of the installed file, read even when it is invalid
/// (`mapping::on_unknown_qos_of`): what a run with no usable mapping does.
/// An unreadable or untrusted file says nothing: `default_level`.
pub fn on_unknown_qos_of_installed(paths: &Paths) -> crate::mapping::OnUnknownQos {
    read_trusted_text(paths, &paths.config)
        .map_or(crate::mapping::OnUnknownQos::DefaultLevel, |text| {
            crate::mapping::on_unknown_qos_of(&text, parse_bound())
        })
}

/// What the installed mapping file is to this node — decided here once, for
/// the `qoslane_mapping_valid` gauge, `status` and `health`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Installed {
    /// It is the mapping in force (the last-known-good copy is it).
    InForce,
    /// There is no file (or it cannot be read).
    Absent,
    /// It is not the mapping in force, and why: invalid, refused by the
    /// fabric gate, or valid but not yet taken in force by a run.
    NotInForce(String),
}

/// Whether the installed file is the mapping in force: its hash is the
/// last-known-good copy's. The fact itself, cheap (two reads, no
/// validation): what every run's textfile and each scrape render.
pub fn installed_in_force(paths: &Paths) -> bool {
    installed_is(paths, last_known_good_sha(paths).as_deref())
}

/// [`installed_in_force`], the last-known-good copy's hash read already
/// (`lkg_sha`; `None`: no copy).
pub fn installed_is(paths: &Paths, lkg_sha: Option<&str>) -> bool {
    installed_sha(paths).is_some_and(|sha| lkg_sha == Some(sha.as_str()))
}

/// [`Installed`] now, with why when the file is not in force (judged only
/// then: `status`).
pub fn installed(paths: &Paths) -> Installed {
    let Some(sha) = installed_sha(paths) else {
        return Installed::Absent;
    };
    if installed_in_force(paths) {
        return Installed::InForce;
    }
    if let Some(r) = rejected(paths).filter(|r| r.sha256 == sha) {
        return Installed::NotInForce(format!("refused: {}", r.why));
    }
    Installed::NotInForce(match read_valid(paths, &paths.config) {
        Err(e) => format!("invalid: {e}"),
        Ok(_) => "valid, not yet in force (no run since it was installed: `qoslane sync`)".into(),
    })
}

/// The SHA-256 of the last-known-good copy, if any.
pub fn last_known_good_sha(paths: &Paths) -> Option<String> {
    fsutil::read_trusted(paths, &paths.last_known_good())
        .ok()
        .flatten()
        .map(|b| sha256_hex(&b))
}

/// A run reads the same mapping text several times (the admin's file, the
/// last-known-good copy, the metrics' view of it, the Epilog's policy): the
/// last valid text, with its mapping and hash, is kept for the process, so a
/// text identical byte for byte is validated and hashed once (the hashes of
/// the installed file and the last-known-good copy the run compares too:
/// [`sha256_hex`]). Keyed by
/// the content, never by the path or a timestamp: a changed file is always
/// read and validated anew.
mod memo {
    use std::sync::Mutex;

    use crate::mapping::Mapping;

    struct Validated {
        text: String,
        mapping: Mapping,
        sha256: String,
    }

    static LAST: Mutex<Option<Validated>> = Mutex::new(None);

    pub fn get(text: &str) -> Option<(Mapping, String)> {
        let last = LAST.lock().ok()?;
        let e = last.as_ref().filter(|e| e.text == text)?;
        Some((e.mapping.clone(), e.sha256.clone()))
    }

    /// The kept hash of `data`, when it is the kept text byte for byte.
    pub fn sha256_of(data: &[u8]) -> Option<String> {
        let last = LAST.lock().ok()?;
        let e = last.as_ref().filter(|e| e.text.as_bytes() == data)?;
        Some(e.sha256.clone())
    }

    pub fn put(text: &str, mapping: &Mapping, sha256: &str) {
        if let Ok(mut last) = LAST.lock() {
            *last = Some(Validated {
                text: text.to_owned(),
                mapping: mapping.clone(),
                sha256: sha256.to_owned(),
            });
        }
    }
}

/// What [`promote`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Promotion {
    /// Nothing to write: the run's mapping is already last-known-good, or
    /// is that copy.
    Unchanged,
    /// The admin's file is now last-known-good; the hash of the copy it
    /// replaced, if there was one.
    Promoted(Option<String>),
    /// The mapping in force is no longer the one the run loaded (a rollout
    /// landed between its reading and the lock: a new file, a `sync`):
    /// nothing written. The run re-loads under the lock or fails; it never
    /// puts the old text back.
    Stale,
}

/// Whether the mapping a run loaded is still the one a run loading now
/// would use: the installed file still the text it read (its hash, not
/// validated again) and, for a run on the last-known-good copy, that copy
/// still the one it used. Under the node lock no `sync` or Prolog can
/// promote another in between.
pub fn still_in_force(paths: &Paths, loaded: &Loaded) -> bool {
    installed_sha(paths) == loaded.installed
        && (loaded.source == Source::Config
            || last_known_good_sha(paths).as_deref() == Some(loaded.sha256.as_str()))
}

/// Makes a valid admin file the last-known-good copy when it differs —
/// only if it is still the installed text ([`Promotion::Stale`] else).
/// Call under the node lock.
pub fn promote(paths: &Paths, loaded: &Loaded) -> Result<Promotion> {
    if !still_in_force(paths, loaded) {
        return Ok(Promotion::Stale);
    }
    if loaded.source != Source::Config {
        return Ok(Promotion::Unchanged);
    }
    let previous = last_known_good_sha(paths);
    if previous.as_deref() == Some(loaded.sha256.as_str()) {
        return Ok(Promotion::Unchanged);
    }
    fsutil::ensure_dir(paths, &paths.lib_dir)?;
    fsutil::atomic_write(
        paths,
        &paths.last_known_good(),
        loaded.text.as_bytes(),
        crate::state::PUBLIC,
    )?;
    Ok(Promotion::Promoted(previous))
}
