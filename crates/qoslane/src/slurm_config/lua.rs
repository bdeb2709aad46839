//! The Lua side of placement: the module `qoslane_placement.lua` (from
//! `deploy/slurm/qoslane_placement.lua.in`: the QoS → feature table its only
//! generated part), `job_submit.lua` for a site without a script of its own
//! (from `deploy/slurm/job_submit.lua.in`: the module inlined), the lines a
//! site's own script adds to call the module, and what a script found in
//! place is (qoslane's, a site's that calls the module, a site's that does
//! not).

use std::fmt::Write as _;

use super::levels::{ANY_NODE_FEATURE, PlacedLevel};

/// The template of the module.
pub const MODULE_TEMPLATE: &str = include_str!("../../../../deploy/slurm/qoslane_placement.lua.in");
/// The template of the standalone script.
pub const LUA_TEMPLATE: &str = include_str!("../../../../deploy/slurm/job_submit.lua.in");
/// The first line of every `job_submit.lua` qoslane writes: how a script of
/// qoslane's is told from a site's own.
pub const LUA_FIRST_LINE: &str = "-- job_submit.lua: qoslane placement.";
/// The first line of the module.
pub const MODULE_FIRST_LINE: &str = "-- qoslane_placement.lua: qoslane placement, the module.";
/// The file names `--output DIR` writes.
pub const LUA_FILE: &str = "job_submit.lua";
pub const MODULE_FILE: &str = "qoslane_placement.lua";

/// The module's text for `levels`.
pub fn module_text(levels: &[PlacedLevel]) -> String {
    let mut table = String::new();
    for l in levels {
        for q in &l.qos {
            let _ = writeln!(table, "   [\"{q}\"] = \"{}\",", l.feature);
        }
    }
    let table = table.trim_end_matches('\n');
    let mut out = String::with_capacity(MODULE_TEMPLATE.len() + table.len());
    for line in MODULE_TEMPLATE.lines() {
        if line == "@QOS_FEATURES@" {
            out.push_str(table);
        } else {
            out.push_str(&line.replace("@ANY_NODE_FEATURE@", ANY_NODE_FEATURE));
        }
        out.push('\n');
    }
    out
}

/// `job_submit.lua` for a site without one: `module` inlined, without its
/// header (the comment lines before its first blank line: the script's own
/// header says what it is).
pub fn standalone_text(module: &str) -> String {
    let body: String = module
        .lines()
        .skip_while(|l| l.starts_with("--"))
        .skip_while(|l| l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let mut out = String::with_capacity(LUA_TEMPLATE.len() + module.len());
    for line in LUA_TEMPLATE.lines() {
        if line == "@MODULE@" {
            out.push_str(body.trim_end_matches('\n'));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The lines a site's own `job_submit.lua` adds to call the module written
/// at `module_path` (as slurmctld sees it): one at the top, one in each of
/// its two functions (with the function's own argument names).
pub fn site_lines(module_path: &str) -> [String; 3] {
    [
        format!(
            "local qoslane = dofile(\"{}\")",
            module_path.escape_default()
        ),
        "qoslane.job_submit(job_desc, part_list, submit_uid)".to_owned(),
        "qoslane.job_modify(job_desc, job_rec, part_list, modify_uid)".to_owned(),
    ]
}

/// What a `job_submit.lua` found in place is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SiteScript {
    /// One qoslane wrote: replaced.
    Ours,
    /// The site's, calling the module from both functions: left as it is.
    CallsTheModule,
    /// The site's, without (some of) the calls: what it lacks.
    Lacks(Vec<&'static str>),
}

/// What `text`, a `job_submit.lua` in place, is. Lua comments count too: a
/// call commented out is the site's business, not recognised here.
pub fn site_script(text: &str) -> SiteScript {
    if text.starts_with(LUA_FIRST_LINE) {
        return SiteScript::Ours;
    }
    let lacks: Vec<&'static str> = [
        (
            MODULE_FILE,
            "the module loaded (dofile of qoslane_placement.lua)",
        ),
        (".job_submit(", "its job_submit called in slurm_job_submit"),
        (".job_modify(", "its job_modify called in slurm_job_modify"),
    ]
    .into_iter()
    .filter(|(needle, _)| !text.contains(needle))
    .map(|(_, what)| what)
    .collect();
    if lacks.is_empty() {
        SiteScript::CallsTheModule
    } else {
        SiteScript::Lacks(lacks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels() -> Vec<PlacedLevel> {
        vec![PlacedLevel {
            level: "mc".into(),
            feature: "qoslane_mc".into(),
            qos: vec!["mission-critical".into(), "urgent".into()],
        }]
    }

    #[test]
    fn the_templates_have_the_placeholders_this_module_fills() {
        assert!(MODULE_TEMPLATE.starts_with(MODULE_FIRST_LINE));
        assert!(LUA_TEMPLATE.starts_with(LUA_FIRST_LINE));
        let once = |t: &str, p: &str| t.lines().filter(|l| *l == p).count() == 1;
        assert!(once(MODULE_TEMPLATE, "@QOS_FEATURES@"));
        assert!(once(LUA_TEMPLATE, "@MODULE@"));
        assert!(MODULE_TEMPLATE.contains("\"@ANY_NODE_FEATURE@\""));
        assert!(MODULE_TEMPLATE.trim_end().ends_with("return M"));
    }

    #[test]
    fn the_standalone_script_is_the_module_inlined_and_both_functions() {
        let module = module_text(&levels());
        assert!(module.contains(
            "   [\"mission-critical\"] = \"qoslane_mc\",\n   [\"urgent\"] = \"qoslane_mc\",\n}"
        ));
        let lua = standalone_text(&module);
        assert!(lua.starts_with(LUA_FIRST_LINE));
        let body = &module[module.find("local M = {}").unwrap()..];
        assert!(lua.contains(&format!("local qoslane = (function()\n{body}end)()\n")));
        assert!(
            !lua.contains(MODULE_FIRST_LINE),
            "the module's header left out"
        );
        assert!(
            !lua.contains('@') && !module.contains('@'),
            "every placeholder filled"
        );
        assert_eq!(site_script(&lua), SiteScript::Ours);
    }

    #[test]
    fn a_site_script_is_told_by_its_calls_of_the_module() {
        let [load, submit, modify] = site_lines("/etc/slurm/qoslane_placement.lua");
        assert_eq!(
            load,
            "local qoslane = dofile(\"/etc/slurm/qoslane_placement.lua\")"
        );
        let site = format!(
            "{load}\nfunction slurm_job_submit(job_desc, part_list, submit_uid)\n  {submit}\n  \
             return slurm.SUCCESS\nend\nfunction slurm_job_modify(job_desc, job_rec, part_list, \
             modify_uid)\n  {modify}\n  return slurm.SUCCESS\nend\n"
        );
        assert_eq!(site_script(&site), SiteScript::CallsTheModule);
        assert_eq!(
            site_script(&site.replace(&modify, "")),
            SiteScript::Lacks(vec!["its job_modify called in slurm_job_modify"])
        );
        assert_eq!(
            site_script("function slurm_job_submit() return 0 end"),
            SiteScript::Lacks(vec![
                "the module loaded (dofile of qoslane_placement.lua)",
                "its job_submit called in slurm_job_submit",
                "its job_modify called in slurm_job_modify",
            ])
        );
    }
}
