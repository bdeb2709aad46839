//! Which build this is, as both binaries print it (`--version`, the man
//! pages' footer) and export it (`qoslane_build_info`, `hookrun_build_info`):
//! the package version and revision and the commit, when `packaging/build.sh`
//! compiled it (it sets `QOSLANE_BUILD` for the compiler, e.g.
//! `0.2.0-2 (git 1a2b3c4d5e6f)`); else the crate's version (a `cargo build`
//! in a checkout), with no revision and no commit.

/// The build's name: `QOSLANE_BUILD` at compile time, else the crate version.
pub const VERSION: &str = match option_env!("QOSLANE_BUILD") {
    Some(v) => v,
    None => env!("CARGO_PKG_VERSION"),
};

/// The build's labels in the `*_build_info` gauges: `version` (the release,
/// e.g. `0.2.0`), `revision` (the package revision, e.g. `2`) and `commit`
/// (12 hex digits, `+dirty` when built from a changed tree). A rebuild of the
/// same release on another revision or commit is a new series. Revision and
/// commit are empty (Prometheus: the label absent) outside a package build.
pub fn labels() -> [(&'static str, &'static str); 3] {
    let (version, revision, commit) = parts(VERSION);
    [
        ("version", version),
        ("revision", revision),
        ("commit", commit),
    ]
}

/// `VERSION-REVISION (git COMMIT)` into its three parts; anything else is a
/// version alone.
fn parts(build: &str) -> (&str, &str, &str) {
    let Some((package, rest)) = build.split_once(" (git ") else {
        return (build, "", "");
    };
    let commit = rest.strip_suffix(')').unwrap_or(rest);
    match package.rsplit_once('-') {
        Some((version, revision)) => (version, revision, commit),
        None => (package, "", commit),
    }
}

#[cfg(test)]
mod tests {
    use super::parts;

    #[test]
    fn names_at_least_the_crate_version() {
        assert!(super::VERSION.starts_with(env!("CARGO_PKG_VERSION")));
        assert_eq!(super::labels()[0], ("version", env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn a_package_build_splits_into_version_revision_and_commit() {
        assert_eq!(
            parts("0.2.0-2 (git 1a2b3c4d5e6f)"),
            ("0.2.0", "2", "1a2b3c4d5e6f")
        );
        assert_eq!(
            parts("0.2.0-1 (git 1a2b3c4d5e6f+dirty)"),
            ("0.2.0", "1", "1a2b3c4d5e6f+dirty")
        );
        // A pre-release version keeps its own hyphen: the revision is the last part.
        assert_eq!(
            parts("0.3.0-rc.1-1 (git 0123456789ab)"),
            ("0.3.0-rc.1", "1", "0123456789ab")
        );
    }

    #[test]
    fn a_checkout_build_is_the_version_alone() {
        assert_eq!(parts("0.2.0"), ("0.2.0", "", ""));
    }
}
