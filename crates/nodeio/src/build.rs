//! Which build this is, as both binaries print it (`--version`, the man
//! pages' footer) and export it (`qoslane_build_info`): the package version
//! and revision and the commit, when `packaging/build.sh` compiled it (it sets
//! `QOSLANE_BUILD` for the compiler, e.g. `0.1.0-2 (git 1a2b3c4d5e6f)`); else
//! the crate's version (a `cargo build` in a checkout).

/// The build's name: `QOSLANE_BUILD` at compile time, else the crate version.
pub const VERSION: &str = match option_env!("QOSLANE_BUILD") {
    Some(v) => v,
    None => env!("CARGO_PKG_VERSION"),
};

#[cfg(test)]
mod tests {
    #[test]
    fn names_at_least_the_crate_version() {
        assert!(super::VERSION.starts_with(env!("CARGO_PKG_VERSION")));
    }
}
