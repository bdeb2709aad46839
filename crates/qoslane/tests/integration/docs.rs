//! The docs by reader. What the packages install (packaging/build.sh's
//! `DOCS`) is for admins: it cites no test suite (`tests/`), no rig
//! (`rigs/`) and no `cargo`, but inside a part marked `<!-- not for admins
//! -->` … `<!-- /not for admins -->`; developer material lives in
//! CONTRIBUTING.md and docs/dev/, which are not installed. Every path
//! README's tree names exists. The admin guide's §10 and docs/metrics.md
//! name every family `qoslane metrics` writes, and no other.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::util::Node;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The docs the packages install: `DOCS="…"` of packaging/build.sh (from
/// docs/), and `PLUGIN_DOCS="…"` (from smplugin/: the OpenSM plugin's package).
fn shipped_docs() -> Vec<String> {
    let build = read(&repo().join("packaging/build.sh"));
    let listed = |var: &str, dir: &str| -> Vec<String> {
        let prefix = format!("{var}=\"");
        let line = build
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("packaging/build.sh sets {var}=\"…\""));
        let list = line.split('"').next().expect("a closing quote");
        list.split_whitespace()
            .map(|d| format!("{dir}/{d}"))
            .collect()
    };
    let docs = listed("DOCS", "docs");
    assert!(docs.len() >= 5, "{docs:?}");
    let plugin = listed("PLUGIN_DOCS", "smplugin");
    assert!(
        plugin.contains(&"smplugin/README.md".to_owned()),
        "{plugin:?}"
    );
    [docs, plugin].concat()
}

/// What an admin's doc must not cite: the word, and whether it is a
/// directory (`tests/`: cited when it follows no letter, digit, `_` or
/// `-`) or a word (`cargo`: standing alone).
const DEVELOPER_WORDS: &[&str] = &["tests/", "rigs/", "cargo"];

fn cites(line: &str, word: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let part = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    lower.match_indices(word).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + word.len()..].chars().next();
        !part(before) && before != Some('-') && (word.ends_with('/') || !part(after))
    })
}

/// Each `LINE: text` of `text` that cites developer material outside a
/// part marked not for admins.
fn developer_citations(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut marked = false;
    for (i, line) in text.lines().enumerate() {
        match line.trim() {
            "<!-- not for admins -->" => marked = true,
            "<!-- /not for admins -->" => marked = false,
            _ if marked => {}
            _ => {
                for word in DEVELOPER_WORDS.iter().filter(|w| cites(line, w)) {
                    found.push(format!("{}: `{word}`: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(!marked, "a `<!-- not for admins -->` part without its end");
    found
}

#[test]
fn developer_citations_are_found_where_they_are() {
    let text = "a tests/e2e/x.sh\nthe `cargo test` run\nCargo.toml\n\
                e2e-tests/ and cargoes and scargo\n<!-- not for admins -->\nrigs/x\n\
                <!-- /not for admins -->\nrigs/y\n";
    assert_eq!(
        developer_citations(text),
        [
            "1: `tests/`: a tests/e2e/x.sh",
            "2: `cargo`: the `cargo test` run",
            "3: `cargo`: Cargo.toml",
            "8: `rigs/`: rigs/y",
        ]
    );
}

#[test]
fn shipped_docs_cite_no_test_rig_or_cargo_outside_a_part_not_for_admins() {
    let mut found = Vec::new();
    for doc in shipped_docs() {
        for c in developer_citations(&read(&repo().join(&doc))) {
            found.push(format!("{doc}:{c}"));
        }
    }
    assert!(
        found.is_empty(),
        "a shipped doc (packaging/build.sh DOCS) cites developer material: move it to \
         CONTRIBUTING.md or docs/dev/, or mark its part `<!-- not for admins -->` … \
         `<!-- /not for admins -->`:\n{}",
        found.join("\n")
    );
}

/// The paths README's tree names: each line's first column, and every word
/// of it that starts with a top-level directory of the repository.
fn readme_tree_paths() -> Vec<String> {
    let readme = read(&repo().join("README.md"));
    let from = readme
        .find("## The tree")
        .expect("README has `## The tree`");
    let rest = &readme[from..];
    let open = rest.find("```").expect("the tree's block") + 3;
    let body = &rest[open..];
    let body = &body[body.find('\n').expect("the fence's line") + 1..];
    let body = &body[..body.find("```").expect("the block's end")];
    let tops: Vec<&str> = body
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut paths: BTreeSet<String> = tops.iter().map(|t| (*t).to_owned()).collect();
    for word in body.split(|c: char| c.is_whitespace() || "(),;`".contains(c)) {
        if tops
            .iter()
            .any(|t| word.len() > t.len() && word.starts_with(t))
        {
            paths.insert(word.trim_end_matches(['.', ':']).to_owned());
        }
    }
    paths.into_iter().collect()
}

#[test]
fn every_path_readmes_tree_names_exists() {
    let paths = readme_tree_paths();
    assert!(paths.len() >= 10, "{paths:?}");
    let missing: Vec<&String> = paths.iter().filter(|p| !repo().join(p).exists()).collect();
    assert!(
        missing.is_empty(),
        "README.md's tree names paths that do not exist: {missing:?}"
    );
}

/// The families a fresh node's `qoslane metrics` writes (`# TYPE NAME`).
fn families() -> BTreeSet<String> {
    let n = Node::new();
    let out = n.run(&["metrics"], &[]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let names: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect();
    assert!(names.len() >= 16, "{names:?}");
    names
}

/// The `qoslane_*` names of the rows of `text`'s tables (`` | `NAME` | ``),
/// but the fabric audit's own (`qoslane_fabric_audit_*`).
fn table_families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("| `qoslane_"))
        .filter_map(|l| l.split('`').next())
        .map(|n| format!("qoslane_{n}"))
        .filter(|n| !n.starts_with("qoslane_fabric_audit_"))
        .collect()
}

#[test]
fn the_admin_guide_and_metrics_md_list_every_family_qoslane_writes() {
    let families = families();
    let guide = read(&repo().join("docs/admin-guide.md"));
    let from = guide.find("## 10. Metrics").expect("§10");
    let to = guide.find("## 11. ").expect("§11");
    let metrics = read(&repo().join("docs/metrics.md"));
    let from_m = metrics
        .find("## The metric families")
        .expect("metrics.md's families");
    let to_m = from_m
        + metrics[from_m..]
            .find("\n## Setup")
            .expect("the next section");
    for (doc, listed) in [
        ("docs/admin-guide.md §10", table_families(&guide[from..to])),
        (
            "docs/metrics.md, The metric families",
            table_families(&metrics[from_m..to_m]),
        ),
    ] {
        assert_eq!(
            listed, families,
            "{doc}: its table (left) against the families `qoslane metrics` writes (right)"
        );
    }
}
