//! The layer tables in CONTRIBUTING.md are true for the code.
//!
//! Each `<!-- layers: CRATE -->` marker is followed by a Markdown table whose
//! rows run from the bottom layer (pure, first row) to the top (effectful,
//! last row); the first cell of a row names its modules in backticks, as
//! paths relative to the crate's `src/` (`report.rs`, `fabric/lane.rs`) or a
//! directory (`mapping/`: everything under it not listed in a row of its
//! own). `foo.rs` also covers `foo/…` unless those have rows of their own.
//!
//! For every crate under `crates/`, this reads its `src/**/*.rs` (test code
//! and comments stripped), collects each file's imports of other files of the
//! crate (`use` trees, `crate::`/`super::`/`self::` paths in expressions,
//! paths through a name a `use` or a `mod` bound) and fails, listing every
//! violation at once, on: an import of a module in a later row; an import
//! cycle between files; a file listed in no row; a row naming a module that
//! does not exist; a type name defined in two files of one crate; a crate
//! without a table (its cycles and type names are still checked).
//!
//! A file is one module: a path through a re-export (`crate::fabric::X`,
//! re-exported by `fabric/mod.rs`) imports the re-exporting file; to depend
//! on the defining file alone, name it (`crate::fabric::check::X`). Declaring
//! a child (`mod x;`) is not an import. Associated types (`type Item`) and
//! types local to a function are not type definitions of the crate.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_crate_keeps_its_layer_table() {
    let root = workspace();
    let contributing = fs::read_to_string(root.join("CONTRIBUTING.md"))
        .expect("CONTRIBUTING.md at the workspace root");
    let tables = tables(&contributing);
    let mut crates: Vec<String> = fs::read_dir(root.join("crates"))
        .expect("crates/")
        .map(|e| e.expect("crates/ entry").path())
        .filter(|p| p.join("Cargo.toml").is_file() && p.join("src").is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    let mut problems = Vec::new();
    for twice in &tables.twice {
        problems.push(format!(
            "CONTRIBUTING.md has two `<!-- layers: {twice} -->` tables: keep one (the test reads the last)"
        ));
    }
    for name in tables.rows.keys() {
        if !crates.contains(name) {
            problems.push(format!(
                "CONTRIBUTING.md has a `<!-- layers: {name} -->` table but there is no crates/{name}/src: \
                 remove the table or fix the crate's name in its marker"
            ));
        }
    }
    for name in &crates {
        // Without a table, the crate's cycles and type names are still checked.
        let rows = tables.rows.get(name).map(Vec::as_slice);
        if rows.is_none() {
            problems.push(format!(
                "crate {name}: CONTRIBUTING.md has no `<!-- layers: {name} -->` table: add one \
                 (a marker line, then a Markdown table whose first cells name crates/{name}/src's \
                 modules in backticks, bottom layer first)"
            ));
        }
        let dir = root.join("crates").join(name);
        let files = sources(&dir.join("src"));
        let package = fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
        problems.extend(check_crate(
            name,
            &package_name(&package).unwrap_or(name.clone()),
            rows,
            &files,
        ));
    }
    assert!(
        problems.is_empty(),
        "CONTRIBUTING.md's layer tables and the code disagree ({} problems):\n\n{}\n",
        problems.len(),
        problems.join("\n\n")
    );
}

/// The `[package]` name of a Cargo.toml (what a binary calls its library).
/// CONTRIBUTING's crate rule: hookrun knows nothing of qoslane, and of
/// qoslane only the binary (`main.rs`, hookrun with qoslane's hook built in)
/// uses hookrun's library; the library never does.
#[test]
fn only_qoslane_s_binary_uses_hookrun() {
    let root = workspace();
    let mut problems = Vec::new();
    for (krate, other, allowed) in [
        ("qoslane", "hookrun", Some("main.rs")),
        ("hookrun", "qoslane", None),
    ] {
        for (file, text) in sources(&root.join("crates").join(krate).join("src")) {
            if Some(file.as_str()) == allowed {
                continue;
            }
            let uses = text.lines().any(|l| {
                let l = l.trim_start();
                !l.starts_with("//")
                    && (l.contains(&format!("{other}::")) || l.contains(&format!("use {other}")))
            });
            if uses {
                problems.push(format!("crates/{krate}/src/{file} uses the crate {other}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "CONTRIBUTING.md's crate rule (only qoslane's main.rs uses hookrun; hookrun nothing of qoslane):\n{}",
        problems.join("\n")
    );
}

fn package_name(manifest: &str) -> Option<String> {
    let package = manifest
        .split("\n[")
        .find(|s| s.trim_start_matches('[').starts_with("package]"))?;
    package.lines().find_map(|l| {
        let (key, value) = l.split_once('=')?;
        (key.trim() == "name").then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// Every `.rs` file under `src`, as (path relative to `src` with `/`, text).
fn sources(src: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<String, String>) {
        for entry in fs::read_dir(dir).expect("read src dir") {
            let path = entry.expect("src entry").path();
            if path.is_dir() {
                walk(&path, src, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).expect("under src");
                let rel = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                out.insert(rel, fs::read_to_string(&path).expect("read source"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// The most lines of production code a source file holds (what comes before
/// its trailing `#[cfg(test)] mod tests`; a `tests.rs` of its own is test
/// code). Past it a file holds more than one concept: split it by role (a
/// folder of files, each one thing), never by squeezing lines together.
const FILE_BUDGET: usize = 600;

#[test]
fn no_source_file_holds_more_than_its_budget() {
    let root = workspace();
    let mut over = Vec::new();
    for krate in fs::read_dir(root.join("crates")).expect("crates/") {
        let dir = krate.expect("crates/ entry").path();
        if !dir.join("src").is_dir() {
            continue;
        }
        for (rel, text) in sources(&dir.join("src")) {
            if rel == "tests.rs" || rel.ends_with("/tests.rs") {
                continue;
            }
            let n = production_lines(&text);
            if n > FILE_BUDGET {
                over.push(format!(
                    "crates/{}/src/{rel}: {n} lines",
                    dir.file_name().unwrap_or_default().to_string_lossy()
                ));
            }
        }
    }
    assert!(
        over.is_empty(),
        "source files over {FILE_BUDGET} lines of production code (split each by role, \
         as CONTRIBUTING says; do not squeeze):\n{}",
        over.join("\n")
    );
}

/// The lines before a file's trailing test module (all of them without one).
fn production_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].starts_with("mod tests"))
        .unwrap_or(lines.len())
}

#[test]
fn the_budget_counts_production_lines_only() {
    assert_eq!(production_lines("a\nb\n#[cfg(test)]\nmod tests {\n}\n"), 2);
    assert_eq!(production_lines("a\nb\nc\n"), 3);
    // A test-only import is production text's neighbour, not the test module.
    assert_eq!(production_lines("#[cfg(test)]\nuse x::y;\nfn f() {}\n"), 3);
}

// ---------------------------------------------------------------- the tables

/// One row of a layer table: the modules its first cell names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    /// 1-based row number within the table (bottom layer = 1).
    number: usize,
    modules: Vec<String>,
}

/// The layer tables of a Markdown text.
#[derive(Debug, Default)]
struct Tables {
    /// Crate name -> its rows, from every `<!-- layers: CRATE -->` marker.
    rows: BTreeMap<String, Vec<Row>>,
    /// Crates with a second table (the last one is kept).
    twice: Vec<String>,
}

fn tables(markdown: &str) -> Tables {
    let mut out = Tables::default();
    let mut lines = markdown.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .trim()
            .strip_prefix("<!-- layers:")
            .and_then(|rest| rest.strip_suffix("-->"))
            .map(str::trim)
        else {
            continue;
        };
        while lines.peek().is_some_and(|l| l.trim().is_empty()) {
            lines.next();
        }
        let mut rows = Vec::new();
        let mut seen_separator = false;
        while let Some(l) = lines.peek() {
            let l = l.trim();
            if !l.starts_with('|') {
                break;
            }
            lines.next();
            if !seen_separator {
                // the header, then the `|---|---|` line
                seen_separator = l
                    .trim_matches(|c| c == '|' || c == '-' || c == ':' || c == ' ')
                    .is_empty();
                continue;
            }
            let first = first_cell(l);
            rows.push(Row {
                number: rows.len() + 1,
                modules: backticked(first),
            });
        }
        if out.rows.insert(name.to_owned(), rows).is_some() {
            out.twice.push(name.to_owned());
        }
    }
    out
}

/// The first cell of a table line (`\|` inside it does not end it).
fn first_cell(line: &str) -> &str {
    let body = line.strip_prefix('|').unwrap_or(line);
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i] == b'|' {
            return &body[..i];
        }
        i += 1;
    }
    body
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

// ------------------------------------------------------------------ checking

/// The module path of a file: `a/b.rs` -> `a::b`, `a/mod.rs` -> `a`,
/// `lib.rs`/`main.rs` -> the crate root (empty).
fn module_of(file: &str) -> Vec<String> {
    let stem = file.strip_suffix(".rs").unwrap_or(file);
    let mut parts: Vec<String> = stem.split('/').map(str::to_owned).collect();
    let last = parts.last().map(String::as_str);
    if last == Some("mod") || (parts.len() == 1 && matches!(last, Some("lib" | "main"))) {
        parts.pop();
    }
    parts
}

/// The row of `file`: the most specific module named in the table.
/// Returns (row index, the name that matched) or `None`.
fn row_of<'r>(rows: &'r [Row], file: &str) -> Option<(usize, &'r str)> {
    let mut best: Option<(usize, usize, &str)> = None;
    for (index, row) in rows.iter().enumerate() {
        for name in &row.modules {
            let score = if name == file {
                usize::MAX
            } else if let Some(dir) = name.strip_suffix('/') {
                if file.starts_with(&format!("{dir}/")) {
                    dir.len() + 1
                } else {
                    continue;
                }
            } else if let Some(stem) = name.strip_suffix(".rs") {
                if file.starts_with(&format!("{stem}/")) {
                    stem.len() + 1
                } else {
                    continue;
                }
            } else {
                continue;
            };
            if best.is_none_or(|(s, _, _)| score > s) {
                best = Some((score, index, name));
            }
        }
    }
    best.map(|(_, index, name)| (index, name))
}

/// Every violation of one crate's table, as messages that say what to do
/// (`rows`: `None` when the crate has no table: cycles and type names only).
/// `package`: the crate's package name, by which its binary imports its
/// library.
fn check_crate(
    krate: &str,
    package: &str,
    rows: Option<&[Row]>,
    files: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let ident = package.replace('-', "_");
    let table = format!("CONTRIBUTING.md's `<!-- layers: {krate} -->` table");
    let has_table = rows.is_some();
    let rows = rows.unwrap_or_default();
    if has_table && rows.is_empty() {
        problems.push(format!(
            "crate {krate}: {table} has no rows: list its modules, bottom layer first"
        ));
    }

    problems.extend(table_problems(krate, &table, rows, files));

    // Files -> rows.
    let mut rank = BTreeMap::new();
    for file in files.keys().filter(|_| !rows.is_empty()) {
        match row_of(rows, file) {
            Some((index, _)) => {
                rank.insert(file.as_str(), index);
            }
            None => problems.push(format!(
                "crate {krate}: crates/{krate}/src/{file} is in no row of {table}: add `{file}` (or its \
                 directory) to the row of its layer"
            )),
        }
    }

    let (graph, types) = import_graph(files, &ident);

    for (file, edges) in &graph {
        let Some(&from) = rank.get(file) else {
            continue;
        };
        for (target, line) in edges {
            let Some(&to) = rank.get(target) else {
                continue;
            };
            if to > from {
                let (r_from, r_to) = (rows[from].number, rows[to].number);
                problems.push(format!(
                    "crate {krate}: src/{file}:{line} (row {r_from}) imports src/{target} (row {r_to}), a \
                     later (higher) row: move {target} to row {r_from} or a row above it, or {file} to row \
                     {r_to} or below, or move what {file} needs from {target} into a module of row {r_from} \
                     or above"
                ));
            }
        }
    }

    for (cycle, rest) in cycles(&graph) {
        let mut chain: Vec<String> = cycle.iter().map(|f| format!("src/{f}")).collect();
        chain.push(format!("src/{}", cycle[0]));
        let hops: Vec<String> = cycle
            .iter()
            .zip(cycle.iter().cycle().skip(1))
            .map(|(a, b)| format!("{a}:{}", graph[a][b]))
            .collect();
        let knot = if rest.is_empty() {
            String::new()
        } else {
            let rest: Vec<String> = rest.iter().map(|f| format!("src/{f}")).collect();
            format!(" (the same knot also holds {})", rest.join(", "))
        };
        problems.push(format!(
            "crate {krate}: import cycle {} (imports at {}){knot}: cut one import — move what the lower \
             module needs from the higher one into the lower one or into a module below both",
            chain.join(" -> "),
            hops.join(", ")
        ));
    }

    for (name, defined) in &types {
        if defined.len() > 1 {
            let list: Vec<String> = defined.iter().map(|f| format!("src/{f}")).collect();
            problems.push(format!(
                "crate {krate}: the type name `{name}` is defined in {}: one name, one meaning — rename \
                 all but one so that each says what it is",
                list.join(" and ")
            ));
        }
    }
    problems
}

/// The table's own mistakes: a row that names no module, a module named
/// twice, a name that is no file or directory of the crate.
fn table_problems(
    krate: &str,
    table: &str,
    rows: &[Row],
    files: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut named: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, row) in rows.iter().enumerate() {
        if row.modules.is_empty() {
            problems.push(format!(
                "crate {krate}: row {} of {table} names no module in backticks in its first cell",
                row.number
            ));
        }
        for name in &row.modules {
            if let Some(other) = named.insert(name, index) {
                problems.push(format!(
                    "crate {krate}: `{name}` is named in rows {} and {} of {table}: keep it in one row",
                    rows[other].number, row.number
                ));
            }
            let exists = if let Some(dir) = name.strip_suffix('/') {
                files.keys().any(|f| f.starts_with(&format!("{dir}/")))
            } else {
                files.contains_key(name.as_str())
            };
            if !exists {
                problems.push(format!(
                    "crate {krate}: row {} of {table} names `{name}`, which is not a file or directory \
                     of crates/{krate}/src: fix the name or remove it from the row",
                    row.number
                ));
            }
        }
    }

    problems
}

/// Which file imports which: file -> (imported file -> line of the first
/// such import).
type ImportGraph<'f> = BTreeMap<&'f str, BTreeMap<&'f str, usize>>;

/// The import graph of the crate's files, and the files each type name is
/// defined in.
fn import_graph<'f>(
    files: &'f BTreeMap<String, String>,
    ident: &str,
) -> (ImportGraph<'f>, BTreeMap<String, BTreeSet<&'f str>>) {
    // The crate root is `lib.rs` when there is one (`main.rs` reaches it by
    // the crate's name).
    let mut modules: BTreeMap<Vec<String>, &str> = BTreeMap::new();
    for f in files.keys() {
        let entry = modules.entry(module_of(f)).or_insert(f.as_str());
        if f == "lib.rs" {
            *entry = "lib.rs";
        }
    }
    let mut graph: ImportGraph<'f> = BTreeMap::new();
    let mut types: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (file, text) in files {
        let parsed = parse(text, ident);
        let here = module_of(file);
        let edges = graph.entry(file.as_str()).or_default();
        for import in &parsed.imports {
            if let Some(target) = resolve(&here, &import.path, &modules)
                && target != file
            {
                edges.entry(target).or_insert(import.line);
            }
        }
        for ty in parsed.types {
            types.entry(ty).or_default().insert(file.as_str());
        }
    }
    (graph, types)
}

/// The file an import path names (the longest prefix of it that is a file's
/// module), or `None` when it is not a path into the crate.
fn resolve<'m>(
    here: &[String],
    path: &[String],
    modules: &BTreeMap<Vec<String>, &'m str>,
) -> Option<&'m str> {
    let mut segments = path.iter().map(String::as_str).peekable();
    let mut base: Vec<String> = match segments.next()? {
        "crate" => Vec::new(),
        "self" => here.to_vec(),
        "super" => {
            let mut base = here.to_vec();
            base.pop();
            while segments.peek() == Some(&"super") {
                segments.next();
                base.pop();
            }
            base
        }
        _ => return None,
    };
    let mut best = modules.get(&base).copied();
    for segment in segments {
        base.push(segment.to_owned());
        match modules.get(&base) {
            Some(found) => best = Some(*found),
            None => break,
        }
    }
    best
}

/// The import cycles of a graph: per strongly connected component of more
/// than one file, its shortest cycle through its first file (the files in
/// order) and the component's other files.
type Knot<'a> = (Vec<&'a str>, Vec<&'a str>);

fn cycles<'a>(graph: &BTreeMap<&'a str, BTreeMap<&'a str, usize>>) -> Vec<Knot<'a>> {
    // Tarjan's algorithm (recursive: a crate's import chains are short).
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(
        v: &'a str,
        graph: &BTreeMap<&'a str, BTreeMap<&'a str, usize>>,
        s: &mut State<'a>,
    ) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in graph.get(v).into_iter().flat_map(BTreeMap::keys) {
            if !s.index.contains_key(w) {
                visit(w, graph, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.components.push(component);
            }
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for &v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(v, graph, &mut s);
        }
    }
    // In each component, the shortest cycle through its first file (BFS).
    s.components
        .into_iter()
        .map(|component| {
            let members: BTreeSet<&str> = component.iter().copied().collect();
            let start = *members.iter().next().expect("a knot has files");
            let mut previous: BTreeMap<&str, &str> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            let mut last = start;
            'search: while let Some(v) = queue.pop_front() {
                for &w in graph[v].keys() {
                    if w == start {
                        last = v;
                        break 'search;
                    }
                    if members.contains(w) && !previous.contains_key(w) {
                        previous.insert(w, v);
                        queue.push_back(w);
                    }
                }
            }
            let mut cycle = vec![last];
            while let Some(&p) = cycle.last().and_then(|v| previous.get(v)) {
                cycle.push(p);
            }
            cycle.reverse();
            let rest = members
                .iter()
                .copied()
                .filter(|m| !cycle.contains(m))
                .collect();
            (cycle, rest)
        })
        .collect()
}

// -------------------------------------------------------------------- parsing

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    tok: Tok,
    line: usize,
}

/// The tokens of Rust source with comments, strings, chars and lifetimes
/// gone (what is left is enough to find items and paths).
#[expect(
    clippy::too_many_lines,
    reason = "one scanner: a branch per kind of lexeme, in the order that tells them apart"
)]
fn lex(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if let Some(skip) = raw_string_start(&chars, i) {
            // r"..", r#".."#, br#".."#: ends at `"` and as many `#`
            let hashes = skip.1;
            i += skip.0;
            while i < chars.len() {
                if chars[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                    i += 1 + hashes;
                    break;
                }
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
        } else if c == '"' || ((c == 'b' || c == 'c') && at(i + 1) == '"') {
            i += if c == '"' { 1 } else { 2 };
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if at(i) == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
        } else if c == '\'' || (c == 'b' && at(i + 1) == '\'') {
            let q = if c == '\'' { i } else { i + 1 };
            if at(q + 1) == '\\' {
                // an escaped char: to the closing quote
                i = q + 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(q + 2) == '\'' {
                i = q + 3;
            } else {
                // a lifetime or label: `'a`
                i = q + 1;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = if c == 'r' && at(i + 1) == '#' {
                i + 2
            } else {
                i
            };
            let mut end = start;
            while at(end).is_alphanumeric() || at(end) == '_' {
                end += 1;
            }
            out.push(Token {
                tok: Tok::Ident(chars[start..end].iter().collect()),
                line,
            });
            i = end;
        } else if c.is_ascii_digit() {
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
        } else if c == ':' && at(i + 1) == ':' {
            out.push(Token {
                tok: Tok::Path,
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(c),
                line,
            });
            i += 1;
        }
    }
    out
}

/// At a raw string literal: (chars up to and including the opening `"`,
/// number of `#`).
fn raw_string_start(chars: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if chars.get(j) == Some(&'b') || chars.get(j) == Some(&'c') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some((j + 1 - i, hashes))
}

/// The tokens without test code: every item under `#[cfg(test)]` (or
/// `#[cfg(all(test, …))]`) and every `#[test]` function.
fn strip_tests(tokens: &[Token]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i].tok == Tok::Punct('#')
            && tokens.get(i + 1).is_some_and(|t| t.tok == Tok::Punct('['))
        {
            let close = matching(tokens, i + 1);
            let inner: Vec<String> = tokens[i + 2..close].iter().map(text).collect();
            let inner = inner.join("");
            let test_only =
                inner == "test" || inner == "cfg(test)" || inner.starts_with("cfg(all(test,");
            if test_only {
                i = item_end(tokens, close + 1);
                continue;
            }
            out.extend_from_slice(&tokens[i..=close]);
            i = close + 1;
            continue;
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    out
}

fn text(t: &Token) -> String {
    match &t.tok {
        Tok::Ident(s) => s.clone(),
        Tok::Path => "::".to_owned(),
        Tok::Punct(c) => c.to_string(),
    }
}

/// The index of the bracket closing the one at `open` (or the last token).
fn matching(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        match t.tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    tokens.len().saturating_sub(1)
}

/// The index after the item starting at `start` (after its attributes):
/// after its `;` or the `}` closing its first block at depth 0.
fn item_end(tokens: &[Token], start: usize) -> usize {
    let mut k = start;
    let is_use = tokens.get(start..).is_some_and(|rest| {
        rest.iter()
            .find(|t| !matches!(&t.tok, Tok::Ident(s) if s == "pub") && t.tok != Tok::Punct('('))
            .is_some_and(|t| t.tok == Tok::Ident("use".to_owned()))
    });
    while k < tokens.len() {
        match tokens[k].tok {
            Tok::Punct('#') if tokens.get(k + 1).is_some_and(|t| t.tok == Tok::Punct('[')) => {
                k = matching(tokens, k + 1) + 1;
            }
            Tok::Punct(';') => return k + 1,
            Tok::Punct('{') if !is_use => return matching(tokens, k) + 1,
            Tok::Punct('(' | '[' | '{') => k = matching(tokens, k) + 1,
            _ => k += 1,
        }
    }
    k
}

/// One import: the path as written (`crate::a::B`, `super::x`, `child::y`)
/// and the line it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Import {
    path: Vec<String>,
    line: usize,
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Parsed {
    imports: Vec<Import>,
    /// Type names (struct, enum, union, type alias, trait) defined at module
    /// level (inline modules included, function bodies and impls not).
    types: Vec<String>,
}

fn ident(t: Option<&Token>) -> Option<&str> {
    match t {
        Some(Token {
            tok: Tok::Ident(s), ..
        }) => Some(s),
        _ => None,
    }
}

/// The imports and type definitions of one file's source. `krate` is the
/// crate's name as an identifier (a binary's `main.rs` imports the library
/// by it).
fn parse(src: &str, krate: &str) -> Parsed {
    let tokens = strip_tests(&lex(src));
    let mut parsed = Parsed::default();
    let depth = inline_depths(&tokens);

    // Child modules declared here (`mod x;`): `x::…` reaches them.
    let mut aliases: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for w in tokens.windows(3) {
        if let (Some("mod"), Some(name), Tok::Punct(';')) =
            (ident(w.first()), ident(w.get(1)), &w[2].tok)
        {
            aliases.insert(name.to_owned(), vec!["self".to_owned(), name.to_owned()]);
        }
    }

    // `use` trees: every leaf an import; names bound to crate paths become
    // aliases for paths in expressions.
    let mut in_use = vec![false; tokens.len()];
    let mut i = 0;
    while i < tokens.len() {
        if ident(tokens.get(i)) == Some("use") {
            let end = tokens[i..]
                .iter()
                .position(|t| t.tok == Tok::Punct(';'))
                .map_or(tokens.len(), |p| i + p);
            let mut leaves = Vec::new();
            use_tree(&tokens[i + 1..end], &mut Vec::new(), &mut leaves);
            for (path, bound) in leaves {
                let Some(path) = crate_path(unnest(path, depth[i]), &aliases, krate) else {
                    continue;
                };
                if let Some(bound) = bound {
                    aliases.insert(bound, path.clone());
                }
                parsed.imports.push(Import {
                    path,
                    line: tokens[i].line,
                });
            }
            for flag in &mut in_use[i..end.min(tokens.len())] {
                *flag = true;
            }
            i = end + 1;
            continue;
        }
        i += 1;
    }

    // Paths in expressions and types: `crate::a::b`, `super::x`, `alias::y`.
    let mut k = 0;
    while k < tokens.len() {
        let starts = !in_use[k]
            && tokens.get(k + 1).is_some_and(|t| t.tok == Tok::Path)
            && !(k > 0 && tokens[k - 1].tok == Tok::Path);
        let Some(first) = ident(tokens.get(k)).filter(|_| starts) else {
            k += 1;
            continue;
        };
        let known = matches!(first, "crate" | "super" | "self")
            || first == krate
            || aliases.contains_key(first);
        // `$crate::` in a macro
        if !known {
            k += 1;
            continue;
        }
        let mut path = vec![first.to_owned()];
        let mut j = k + 1;
        while tokens.get(j).is_some_and(|t| t.tok == Tok::Path) {
            match ident(tokens.get(j + 1)) {
                Some(s) => path.push(s.to_owned()),
                None => break,
            }
            j += 2;
        }
        if let Some(path) = crate_path(unnest(path, depth[k]), &aliases, krate) {
            parsed.imports.push(Import {
                path,
                line: tokens[k].line,
            });
        }
        k = j;
    }

    parsed.types = type_definitions(&tokens);
    parsed
}

/// For each token, how many inline modules (`mod name { … }`) enclose it.
fn inline_depths(tokens: &[Token]) -> Vec<usize> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut braces: Vec<bool> = Vec::new();
    for (k, t) in tokens.iter().enumerate() {
        match t.tok {
            Tok::Punct('{') => braces.push(
                k >= 2
                    && ident(tokens.get(k - 2)) == Some("mod")
                    && ident(tokens.get(k - 1)).is_some(),
            ),
            Tok::Punct('}') => {
                braces.pop();
            }
            _ => {}
        }
        out.push(braces.iter().filter(|m| **m).count());
    }
    out
}

/// A path written inside `depth` inline modules, as the file's module would
/// write it: each leading `super` climbs one inline module first (`super`
/// from `mod inner { … }` is the file itself).
fn unnest(mut path: Vec<String>, depth: usize) -> Vec<String> {
    let supers = path.iter().take_while(|s| *s == "super").count();
    let climbed = supers.min(depth);
    if climbed == 0 {
        return path;
    }
    path.drain(..climbed);
    if supers == climbed {
        path.insert(0, "self".to_owned());
    }
    path
}

/// A path rewritten to start at `crate`, `self` or `super`, or `None` when
/// it leaves the crate (std, another crate).
fn crate_path(
    path: Vec<String>,
    aliases: &BTreeMap<String, Vec<String>>,
    krate: &str,
) -> Option<Vec<String>> {
    let first = path.first()?.as_str();
    let mut out = match first {
        "crate" | "self" | "super" => return Some(path),
        _ if first == krate => vec!["crate".to_owned()],
        _ => aliases.get(first)?.clone(),
    };
    out.extend(path.into_iter().skip(1));
    Some(out)
}

/// The leaves of a `use` tree (tokens after `use`, before `;`): each full
/// path and the name it binds (`None` for a glob or `_`).
fn use_tree(
    tokens: &[Token],
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    // Split at top-level commas.
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (k, t) in tokens.iter().enumerate() {
        match t.tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth = depth.saturating_sub(1),
            Tok::Punct(',') if depth == 0 => {
                parts.push(&tokens[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    for part in parts {
        let before = prefix.len();
        let mut k = 0;
        // A leading `::` (2015 style absolute path): skip.
        if part.first().is_some_and(|t| t.tok == Tok::Path) {
            k = 1;
        }
        let mut bound = None;
        let mut leaf = true;
        let mut named = false;
        while k < part.len() {
            match &part[k].tok {
                Tok::Ident(s) if s == "as" => {
                    bound = ident(part.get(k + 1))
                        .filter(|b| *b != "_")
                        .map(str::to_owned);
                    k += 2;
                }
                Tok::Ident(s) => {
                    named = true;
                    if s == "self" && !prefix.is_empty() {
                        // `a::{self, …}`: `a` itself
                        bound = prefix.last().cloned();
                    } else {
                        prefix.push(s.clone());
                        bound = Some(s.clone());
                    }
                    k += 1;
                }
                Tok::Punct('{') => {
                    let close = part.len()
                        - 1
                        - part
                            .iter()
                            .rev()
                            .position(|t| t.tok == Tok::Punct('}'))
                            .unwrap_or(0);
                    use_tree(&part[k + 1..close], prefix, out);
                    leaf = false;
                    k = close + 1;
                }
                Tok::Punct('*') => {
                    named = true;
                    bound = None;
                    k += 1;
                }
                Tok::Path | Tok::Punct(_) => k += 1,
            }
        }
        if leaf && named && !prefix.is_empty() {
            out.push((prefix.clone(), bound));
        }
        prefix.truncate(before);
    }
}

/// Type names defined at module level of a token stream (inline `mod`
/// bodies included; function bodies, impls and traits' insides not).
fn type_definitions(tokens: &[Token]) -> Vec<String> {
    let mut out = Vec::new();
    // For each open `{`: does it open a module body?
    let mut braces: Vec<bool> = Vec::new();
    let mut k = 0;
    while k < tokens.len() {
        match &tokens[k].tok {
            Tok::Punct('{') => {
                let module = k >= 2
                    && ident(tokens.get(k - 2)) == Some("mod")
                    && ident(tokens.get(k - 1)).is_some();
                braces.push(module);
            }
            Tok::Punct('}') => {
                braces.pop();
            }
            Tok::Ident(kw)
                if matches!(kw.as_str(), "struct" | "enum" | "union" | "type" | "trait")
                    && braces.iter().all(|m| *m) =>
            {
                let previous = k.checked_sub(1).and_then(|p| ident(tokens.get(p)));
                // `impl Trait for` / `dyn Trait` are not definitions; a
                // `union` or `type` identifier used as a name is rare.
                if previous != Some("impl")
                    && previous != Some("dyn")
                    && let Some(name) = ident(tokens.get(k + 1))
                {
                    out.push(name.to_owned());
                }
            }
            _ => {}
        }
        k += 1;
    }
    out
}

// ---------------------------------------------------------- the parser's tests

fn paths(src: &str) -> Vec<String> {
    parse(src, "qoslane")
        .imports
        .into_iter()
        .map(|i| i.path.join("::"))
        .collect()
}

#[test]
fn use_trees_nested_renamed_and_multiline() {
    let src = "use crate::{a, b::{c::{self, D}, e as f}};\n\
               pub use super::g::*;\n\
               pub(crate) use self::h::{\n    I,\n    J as _,\n};\n\
               use std::fmt;\nuse nodeio::walk;\n";
    assert_eq!(
        paths(src),
        [
            "crate::a",
            "crate::b::c",
            "crate::b::c::D",
            "crate::b::e",
            "super::g",
            "self::h::I",
            "self::h::J"
        ]
    );
}

#[test]
fn paths_in_expressions_and_through_bound_names() {
    let src = "use crate::fabric::{self, policy};\nmod child;\n\
               fn f() { crate::log::warn(\"x\"); policy::judge(); fabric::probe::run(); \
               child::go(); std::mem::drop(1); other::thing(); x.y::<u8>(); Self::new(); }\n\
               mod inline { use super::super::up; use super::child::Thing; }";
    assert_eq!(
        paths(src),
        [
            "crate::fabric",
            "crate::fabric::policy",
            "super::up",
            "self::child::Thing",
            "crate::log::warn",
            "crate::fabric::policy::judge",
            "crate::fabric::probe::run",
            "self::child::go",
        ]
    );
}

#[test]
fn a_binary_imports_its_library_by_name() {
    assert_eq!(
        paths("use qoslane::cli::{Cli, Command};\nfn main() { qoslane::run(); }"),
        ["crate::cli::Cli", "crate::cli::Command", "crate::run"]
    );
}

#[test]
fn test_code_comments_and_strings_do_not_count() {
    let src = "// use crate::commented;\n/* use crate::block; /* nested */ crate::still::comment */\n\
               const S: &str = \"crate::in_string\"; const R: &str = r#\"use crate::raw;\"#;\n\
               fn f<'a>(x: &'a str) -> char { let _ = b'\\''; '{' }\n\
               #[cfg(test)]\nmod tests { use crate::only_in_tests; struct Helper; }\n\
               #[cfg(test)]\nuse crate::test_import;\n\
               #[test]\nfn t() { crate::in_test_fn(); }\n\
               use crate::real;\nstruct Real;";
    assert_eq!(paths(src), ["crate::real"]);
    assert_eq!(parse(src, "qoslane").types, ["Real"]);
}

#[test]
fn type_definitions_at_module_level_only() {
    let src = "pub struct A; enum B { X } type C = u8; pub(crate) trait D { type E; }\n\
               impl Iterator for A { type Item = u8; fn next(&mut self) -> Option<u8> { struct Local; None } }\n\
               mod inner { pub struct F; }\nfn g(x: &dyn D) -> impl D {}";
    assert_eq!(parse(src, "qoslane").types, ["A", "B", "C", "D", "F"]);
}

#[test]
fn tables_rows_and_the_most_specific_row() {
    let md = "text\n<!-- layers: demo -->\n\n| module | what |\n|---|---|\n\
              | `a.rs`, `b/` | x \\| y |\n| `b/c.rs` | z |\n| `lib.rs` | top |\n\nafter\n";
    let both = tables(&format!(
        "{md}<!-- layers: demo -->\n| m |\n|---|\n| `x.rs` |\n"
    ));
    assert_eq!(both.twice, ["demo"]);
    assert_eq!(
        both.rows["demo"][0].modules,
        ["x.rs"],
        "the last table is kept"
    );
    let tables = tables(md);
    assert!(tables.twice.is_empty());
    let rows = &tables.rows["demo"];
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].modules, ["a.rs", "b/"]);
    assert_eq!(row_of(rows, "a.rs").map(|r| r.0), Some(0));
    assert_eq!(row_of(rows, "a/sub.rs").map(|r| r.0), Some(0));
    assert_eq!(row_of(rows, "b/mod.rs").map(|r| r.0), Some(0));
    assert_eq!(row_of(rows, "b/c.rs").map(|r| r.0), Some(1));
    assert_eq!(row_of(rows, "lib.rs").map(|r| r.0), Some(2));
    assert_eq!(row_of(rows, "z.rs"), None);
}

#[test]
fn every_kind_of_violation_is_reported_at_once() {
    let rows = tables(
        "<!-- layers: demo -->\n| m |\n|---|\n| `low.rs`, `gone.rs` |\n| `mid.rs`, `dup.rs` |\n| `lib.rs` |\n",
    )
    .rows
    .remove("demo")
    .unwrap();
    let files: BTreeMap<String, String> = [
        ("lib.rs", "mod low; mod mid; mod dup; mod stray;"),
        ("low.rs", "use crate::mid::Thing; pub struct Same;"),
        ("mid.rs", "use crate::low::Same; pub struct Thing;"),
        ("dup.rs", "pub enum Same {}"),
        ("stray.rs", ""),
    ]
    .into_iter()
    .map(|(f, s)| (f.to_owned(), s.to_owned()))
    .collect();
    assert_eq!(
        package_name(
            "[workspace]\nname = \"no\"\n\n[package]\nname = \"demo-crate\"\nversion = \"1\"\n"
        )
        .as_deref(),
        Some("demo-crate")
    );
    let problems = check_crate("demo", "demo", Some(&rows), &files).join("\n");
    for expected in [
        "names `gone.rs`, which is not a file",
        "src/stray.rs is in no row",
        "src/low.rs:1 (row 1) imports src/mid.rs (row 2), a later (higher) row: move mid.rs to row 1",
        "import cycle src/low.rs -> src/mid.rs -> src/low.rs",
        "the type name `Same` is defined in src/dup.rs and src/low.rs",
    ] {
        assert!(
            problems.contains(expected),
            "missing {expected:?} in:\n{problems}"
        );
    }
    assert_eq!(problems.lines().count(), 5, "{problems}");
    // Without a table: the cycle and the type name still.
    let untabled = check_crate("demo", "demo", None, &files);
    assert_eq!(untabled.len(), 2, "{untabled:#?}");
    assert!(untabled[0].contains("import cycle src/low.rs -> src/mid.rs -> src/low.rs"));
    assert!(untabled[1].contains("the type name `Same`"));
}
