//! The site options file, `/etc/default/qoslane` (Debian, Ubuntu) or
//! `/etc/sysconfig/qoslane` (RHEL, Rocky: where the .rpm installs it) under
//! the root prefix: the `QOSLANE_*` variables a site sets for the hooks
//! (links to qoslane: no shell reads it). qoslane reads the file
//! whenever it runs outside a TaskProlog, so a manual `sync`, `health`,
//! `explain --fabric`, `fabric audit`, `log` or `status` uses exactly the
//! programs and paths the hooks use. Precedence: a flag, then the
//! environment, then this file, then the default.
//!
//! Trusted like the mapping's state (nodeio's trusted read: a regular file,
//! never a symlink, of root — or the user running qoslane — not writable by
//! group or others, in directories nobody else can write): it names the
//! programs root runs. Parsed, never run: `NAME=VALUE` lines of the
//! [`NAMES`], blank lines and `#` comments; a value may be in double quotes.
//! Anything else is refused naming the file and the line.

use std::path::Path;

use nodeio::trusted::Symlink;

use crate::error::{Error, Result};

/// Where the file may be, under the root prefix: the first that exists is
/// the site's (the .deb installs the first, the .rpm the second).
pub const FILES: &[&str] = &["etc/default/qoslane", "etc/sysconfig/qoslane"];

/// The variables the file may set.
pub const NAMES: &[&str] = &[
    "QOSLANE_CONFIG",
    "QOSLANE_AUDIT_LOG",
    "QOSLANE_TEXTFILE_DIR",
    "QOSLANE_TIMEOUT_MS",
    "QOSLANE_SMPQUERY",
    "QOSLANE_IBNETDISCOVER",
    "QOSLANE_IBROUTE",
    "QOSLANE_SQUEUE",
    "QOSLANE_PERFQUERY",
    "QOSLANE_COUNTERS",
    "QOSLANE_SCONTROL",
    "QOSLANE_FABRIC_VERDICT",
    "QOSLANE_FABRIC_VERDICT_MAX_AGE",
    "QOSLANE_SACCTMGR",
    "QOSLANE_NO_JOURNAL",
];

/// Larger than any real options file: refused unread.
const MAX_BYTES: u64 = 64 * 1024;

/// The options the file sets, in the order written (a later line wins).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SiteOptions(Vec<(&'static str, String)>);

impl SiteOptions {
    /// The value the file gives `name`, if any (the last line that sets it).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads the first of [`FILES`] under `root` that exists. None is no
/// options.
pub fn read(root: &Path) -> Result<SiteOptions> {
    // No file is no options (whatever the
    // directories: a file made later is judged when it is read).
    let Some(path) = FILES.iter().map(|f| root.join(f)).find(|p| {
        !std::fs::symlink_metadata(p).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    }) else {
        return Ok(SiteOptions::default());
    };
    let bytes = match nodeio::trusted::read(root, &path, Symlink::Refuse, MAX_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(SiteOptions::default()),
        Err(e) => {
            return Err(Error::state(
                &path,
                format!("{e}; refusing the site options"),
            ));
        }
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::state(&path, "is not UTF-8; refusing the site options"))?;
    parse(&text).map_err(|(line, why)| {
        Error::state(
            &path,
            format!("line {line}: {why}; refusing the site options"),
        )
    })
}

/// The options of `text`, or the first bad line (1-based) and why.
pub fn parse(text: &str) -> std::result::Result<SiteOptions, (usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            return Err((i + 1, format!("no `=` in `{}`", line.escape_debug())));
        };
        let Some(name) = NAMES.iter().find(|n| **n == name) else {
            return Err((
                i + 1,
                format!(
                    "`{}` is not a qoslane site option (one of {})",
                    name.escape_debug(),
                    NAMES.join(", ")
                ),
            ));
        };
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        out.push((*name, value.to_owned()));
    }
    Ok(SiteOptions(out))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn lines_are_name_value_of_a_known_option_or_refused_by_number() {
        let o = parse(
            "# comment\n\nQOSLANE_SMPQUERY=/opt/ib/smpquery\nQOSLANE_AUDIT_LOG=\"/x/a.jsonl\"\n\
             QOSLANE_SMPQUERY=/opt/ib2/smpquery\n",
        )
        .unwrap();
        assert_eq!(o.get("QOSLANE_SMPQUERY"), Some("/opt/ib2/smpquery"));
        assert_eq!(o.get("QOSLANE_AUDIT_LOG"), Some("/x/a.jsonl"));
        assert_eq!(o.get("QOSLANE_SQUEUE"), None);
        assert_eq!(parse("\nPATH=/tmp\n").unwrap_err().0, 2);
        assert_eq!(parse("QOSLANE_SQUEUE\n").unwrap_err().0, 1);
        assert!(
            parse("export QOSLANE_SQUEUE=/x\n")
                .unwrap_err()
                .1
                .contains("not a qoslane site option")
        );
        assert!(parse(" QOSLANE_SQUEUE=/x\n").is_err(), "no shell syntax");
    }
}
