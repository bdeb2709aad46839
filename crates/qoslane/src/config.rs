//! Loading the mapping for a run: the admin's file when it is valid, else the
//! last-known-good copy; hashing it; promoting a new valid file (AC-007).

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::mapping::{Mapping, validate_str};
use crate::paths::Paths;
use crate::state::fsutil;

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
    text: String,
}

impl Loaded {
    pub fn text(&self) -> &str {
        &self.text
    }
}

pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads and validates a mapping file. The error for an invalid file carries
/// the first diagnostic's headline (`FILE:LINE:COL: error: …`).
pub fn read_valid(path: &Path) -> Result<(Mapping, String, String)> {
    check_trusted(path)?;
    let text = read_text(path)?;
    if let Some((m, sha)) = memo::get(&text) {
        return Ok((m, sha, text));
    }
    let v = validate_str(&text);
    match v.mapping {
        Some(m) => {
            let sha = sha256_hex(text.as_bytes());
            memo::put(&text, &m, &sha);
            Ok((m, sha, text))
        }
        None => {
            let errors: Vec<_> = v.errors().collect();
            Err(Error::MappingInvalid {
                path: path.to_owned(),
                count: errors.len(),
                first: errors
                    .first()
                    .map(|d| d.headline(&path.display().to_string()))
                    .unwrap_or_default(),
            })
        }
    }
}

/// The mapping decides which kernel files root writes (`node_settings`), so
/// it is trusted like the state files: the file (through symlinks) and its
/// directory must be owned by root (or the user running qoslane) and not be
/// writable by group or others. A missing file is left to the read to report.
/// `validate` does not ask this: it only reads.
pub fn check_trusted(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(real) = std::fs::canonicalize(path) else {
        return Ok(());
    };
    let me = rustix::process::geteuid().as_raw();
    for p in [Some(real.as_path()), real.parent()].into_iter().flatten() {
        let md = std::fs::metadata(p).map_err(Error::io("inspect", p))?;
        let why = if md.uid() != 0 && md.uid() != me {
            format!("is owned by uid {}", md.uid())
        } else if md.mode() & 0o022 != 0 {
            format!(
                "is writable by group or others (mode {:o})",
                md.mode() & 0o7777
            )
        } else {
            continue;
        };
        return Err(Error::state(
            path,
            if p == real {
                format!("{why}; refusing to use this mapping")
            } else {
                format!(
                    "{}: its directory {why}; refusing to use this mapping",
                    p.display()
                )
            },
        ));
    }
    Ok(())
}

pub fn read_text(path: &Path) -> Result<String> {
    let md = std::fs::metadata(path).map_err(|source| Error::MappingMissing {
        path: path.to_owned(),
        source,
    })?;
    if md.len() > MAX_MAPPING_BYTES {
        return Err(Error::MappingInvalid {
            path: path.to_owned(),
            count: 1,
            first: format!(
                "{}: {} bytes is too large for a mapping file (limit {MAX_MAPPING_BYTES})",
                path.display(),
                md.len()
            ),
        });
    }
    let bytes = std::fs::read(path).map_err(|source| Error::MappingMissing {
        path: path.to_owned(),
        source,
    })?;
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

/// The mapping this run uses: the admin's file if valid, else last-known-good.
/// With neither, the error of the admin's file.
pub fn load(paths: &Paths) -> Result<Loaded> {
    match read_valid(&paths.config) {
        Ok((mapping, sha256, text)) => Ok(Loaded {
            mapping,
            sha256,
            source: Source::Config,
            problem: None,
            text,
        }),
        Err(e) => match read_valid(&paths.last_known_good()) {
            Ok((mapping, sha256, text)) => Ok(Loaded {
                mapping,
                sha256,
                source: Source::LastKnownGood,
                problem: Some(e.to_string()),
                text,
            }),
            Err(_) => Err(e),
        },
    }
}

/// The SHA-256 of the last-known-good copy, if any.
pub fn last_known_good_sha(paths: &Paths) -> Option<String> {
    std::fs::read(paths.last_known_good())
        .ok()
        .map(|b| sha256_hex(&b))
}

/// A run reads the same mapping text several times (the admin's file, the
/// last-known-good copy, the metrics' view of it, the Epilog's policy): the
/// last valid text, with its mapping and hash, is kept for the process, so a
/// text identical byte for byte is validated and hashed once. Keyed by
/// the content, never by the path or a timestamp: a changed file is always
/// read and validated anew.
mod memo {
    use std::sync::Mutex;

    use crate::mapping::Mapping;

    struct Entry {
        text: String,
        mapping: Mapping,
        sha256: String,
    }

    static LAST: Mutex<Option<Entry>> = Mutex::new(None);

    pub fn get(text: &str) -> Option<(Mapping, String)> {
        let last = LAST.lock().ok()?;
        let e = last.as_ref().filter(|e| e.text == text)?;
        Some((e.mapping.clone(), e.sha256.clone()))
    }

    pub fn put(text: &str, mapping: &Mapping, sha256: &str) {
        if let Ok(mut last) = LAST.lock() {
            *last = Some(Entry {
                text: text.to_owned(),
                mapping: mapping.clone(),
                sha256: sha256.to_owned(),
            });
        }
    }
}

/// Makes a valid admin file the last-known-good copy when it differs.
/// Returns the previous hash when it changed. Call under the node lock.
pub fn promote(paths: &Paths, loaded: &Loaded) -> Result<Option<Option<String>>> {
    if loaded.source != Source::Config {
        return Ok(None);
    }
    let previous = last_known_good_sha(paths);
    if previous.as_deref() == Some(loaded.sha256.as_str()) {
        return Ok(None);
    }
    fsutil::ensure_dir(&paths.lib_dir)?;
    fsutil::atomic_write(
        &paths.last_known_good(),
        loaded.text.as_bytes(),
        crate::state::PUBLIC,
    )?;
    Ok(Some(previous))
}
