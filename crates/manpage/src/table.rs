//! The admin guide's command table (docs/admin-guide.md, §11) held to the
//! programs' `--help`: each row names a command, how it gives JSON, how it
//! is given a mapping, and its exit codes; each program's tests compare the
//! rows of their program with what its `-h` says ([`problems`]). Pure.

use std::collections::BTreeSet;

/// One command's facts, as a row of the table or its help says them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// `--format json`, or `—`.
    pub json: String,
    /// `--config FILE`, or `—`.
    pub mapping: String,
    /// The codes: `0`, `64`, `128+N`.
    pub exits: BTreeSet<String>,
}

/// The rows of `markdown`'s tables whose first cell is `` `PROGRAM …` ``:
/// (the command's words after the program, its facts), from the columns
/// command | what | JSON | mapping | exit status.
pub fn rows(markdown: &str, program: &str) -> Vec<(Vec<String>, Facts)> {
    let lead = format!("| `{program}");
    markdown
        .lines()
        .filter(|l| l.starts_with(&lead))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            let [command, _, json, mapping, exits] = cells[..] else {
                return None;
            };
            let words = command
                .trim_matches('`')
                .split_whitespace()
                .skip(1)
                .map(str::to_owned)
                .collect();
            Some((
                words,
                Facts {
                    json: json.trim_matches('`').to_owned(),
                    mapping: mapping.trim_matches('`').to_owned(),
                    exits: exits.split_whitespace().map(str::to_owned).collect(),
                },
            ))
        })
        .collect()
}

/// What a command's `-h` says: `--format` with `json` among its values; a
/// `Mapping: --config FILE` line; the codes of its `Exit status:` text (each
/// comma-separated item that starts with one).
pub fn of_help(help: &str) -> Facts {
    let json = help
        .lines()
        .any(|l| l.trim_start().starts_with("--format <FORMAT>"))
        && help
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains("possible values: human, json");
    let mapping = help
        .lines()
        .any(|l| l.starts_with("Mapping: --config FILE"));
    let exits = help
        .split_once("\nExit status: ")
        .map(|(_, rest)| {
            let text = rest.split("\nGlobal options").next().unwrap_or(rest);
            text.replace('\n', " ")
                .split(", ")
                .filter_map(|item| item.split_whitespace().next())
                .filter(|code| code.chars().next().is_some_and(|c| c.is_ascii_digit()))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Facts {
        json: if json { "--format json" } else { "—" }.to_owned(),
        mapping: if mapping { "--config FILE" } else { "—" }.to_owned(),
        exits,
    }
}

/// Every difference between the table's rows of `program` and the
/// commands' help (`help` of the words after the program): a command
/// without a row, a row without a command, a fact the help does not say.
pub fn problems(
    markdown: &str,
    program: &str,
    commands: &[Vec<String>],
    help: &dyn Fn(&[String]) -> String,
) -> Vec<String> {
    let table = rows(markdown, program);
    let mut out = Vec::new();
    for words in commands {
        if !table.iter().any(|(w, _)| w == words) {
            out.push(format!("`{program} {}` has no row", words.join(" ")));
        }
    }
    for (words, facts) in &table {
        let name = format!("`{program} {}`", words.join(" "));
        if !commands.contains(words) {
            out.push(format!("{name}: a row without a command"));
            continue;
        }
        let said = of_help(&help(words));
        if said != *facts {
            out.push(format!(
                "{name}: the table says {facts:?}, -h says {said:?}"
            ));
        }
    }
    out
}

/// The words of every visible command that takes no subcommand, below
/// `cmd`: `["fabric", "audit"]`.
pub fn leaf_commands(cmd: &clap::Command) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name().to_owned();
        if sub.get_subcommands().any(|s| !s.is_hide_set()) {
            for mut words in leaf_commands(sub) {
                words.insert(0, name.clone());
                out.push(words);
            }
        } else {
            out.push(vec![name]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_and_a_help_read_alike() {
        let md = "| command | what | JSON | mapping | exit status |\n|---|---|---|---|---|\n\
                  | `prog log` | the log | `--format json` | — | 0 64 66 |\n";
        let help = "Usage: prog log\n\nOptions:\n      --format <FORMAT>  [possible values: human, json]\n\n\
                    Exit status: 0 read (also when nothing matched), 64 a bad filter, 66 no\naudit log\n\
                    Global options (--root): see `prog --help`.\n";
        let rows = rows(md, "prog");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].0, ["log"]);
        assert_eq!(of_help(help), rows[0].1);
        let commands = vec![vec!["log".to_owned()], vec!["sync".to_owned()]];
        let found = problems(md, "prog", &commands, &|_| help.replace("66 no", "74 no"));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("`prog sync` has no row"), "{found:?}");
        assert!(found[1].contains("-h says"), "{found:?}");
    }
}
