//! The mapping's QoS names against Slurm's (`sacctmgr -n -P show qos
//! format=name`, run by the command): a QoS the mapping lists that Slurm
//! does not know is a mistake (no job can have it; a misspelt name leaves
//! the real QoS's jobs on the default level), a Slurm QoS no level lists is
//! said (its jobs get the default level). Pure; Slurm stores QoS names in
//! lower case and compares them so: so does this.

use std::collections::BTreeSet;

use crate::mapping::Mapping;

/// What the comparison found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QosCheck {
    /// (level, QoS as the mapping writes it) that Slurm does not know.
    pub missing: Vec<(String, String)>,
    /// Slurm's QoS names that no level lists, sorted.
    pub unlisted: Vec<String>,
    /// The level those get.
    pub default_level: String,
}

/// The QoS names of `sacctmgr -n -P show qos format=name`'s output: one a
/// line, blank lines skipped, in lower case.
pub fn slurm_qos_names(output: &str) -> Vec<String> {
    output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// The mapping's QoS names against `slurm`'s.
pub fn compare_qos(mapping: &Mapping, slurm: &[String]) -> QosCheck {
    let known: BTreeSet<String> = slurm.iter().map(|q| q.to_ascii_lowercase()).collect();
    let mut listed = BTreeSet::new();
    let mut missing = Vec::new();
    for l in mapping.levels() {
        for q in &l.qos {
            let lower = q.to_ascii_lowercase();
            if !known.contains(&lower) {
                missing.push((l.name.clone(), q.clone()));
            }
            listed.insert(lower);
        }
    }
    QosCheck {
        missing,
        unlisted: known.difference(&listed).cloned().collect(),
        default_level: mapping.default_level().name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping() -> Mapping {
        let src = "default_level: normal\nlevels:\n  - name: gold\n    qos: [gold, Platinum]\n    \
                   service_level: 3\n    on_failure: fail_job\n  - name: normal\n    qos: [normal]\n    \
                   service_level: 0\n";
        crate::mapping::validate_str(src).mapping.unwrap()
    }

    #[test]
    fn sacctmgr_lines_are_names_in_lower_case() {
        assert_eq!(
            slurm_qos_names("normal\nGold\n\n  high  \n"),
            ["normal", "gold", "high"]
        );
        assert!(slurm_qos_names("").is_empty());
    }

    #[test]
    fn a_mapping_qos_slurm_lacks_is_missing_and_a_slurm_qos_no_level_lists_is_unlisted() {
        let slurm = slurm_qos_names("normal\ngold\nhigh\nscavenger\n");
        let c = compare_qos(&mapping(), &slurm);
        assert_eq!(c.missing, [("gold".to_owned(), "Platinum".to_owned())]);
        assert_eq!(c.unlisted, ["high", "scavenger"]);
        assert_eq!(c.default_level, "normal");
    }

    #[test]
    fn names_match_in_any_case_and_all_known_is_clean() {
        let slurm = slurm_qos_names("NORMAL\nplatinum\nGold\n");
        let c = compare_qos(&mapping(), &slurm);
        assert!(c.missing.is_empty() && c.unlisted.is_empty(), "{c:?}");
    }

    #[test]
    fn slurm_without_qos_lacks_every_one() {
        let c = compare_qos(&mapping(), &[]);
        assert_eq!(c.missing.len(), 3);
        assert!(c.unlisted.is_empty());
    }
}
