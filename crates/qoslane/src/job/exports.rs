//! The environment a level gives a job's libraries, as TaskProlog lines:
//! the declared table ([`crate::libraries::TABLE`]) with the site's
//! `exports:` edits (entries dropped, entries added), each variable given
//! the level's SL or traffic class, and only on a node whose job's ports
//! are of the link layers it belongs on (a traffic class on RoCE ports
//! only, never on native InfiniBand). What is held back for the link layer
//! is unset, so that a task never keeps one another node exported (srun
//! passes the batch step's environment to every node of the job).

use crate::libraries::{self, Carries, Layers, PortLayers};
use crate::mapping::{ExportsEdit, Level};

/// One variable of the table in force: the declared table, edited by the
/// mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    pub carries: Carries,
    pub layers: Layers,
}

/// The table in force under `edit`: the declared entries not dropped, in
/// their order, then the site's additions in theirs.
pub fn table(edit: &ExportsEdit) -> Vec<Variable> {
    libraries::TABLE
        .iter()
        .filter(|e| !edit.drop.iter().any(|d| d == e.variable))
        .map(|e| Variable {
            name: e.variable.to_owned(),
            carries: e.carries,
            layers: e.layers,
        })
        .chain(edit.add.iter().map(|a| Variable {
            name: a.variable.clone(),
            carries: a.carries,
            layers: a.layers,
        }))
        .collect()
}

/// What the TaskProlog prints for a granted level on a node whose job's
/// ports are `ports`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exports {
    /// `(NAME, VALUE)`: the service levels, `QOSLANE_LEVEL`, then the
    /// traffic classes (when the level has one).
    pub set: Vec<(String, String)>,
    /// The table's variables held back for the node's link layer.
    pub unset: Vec<String>,
}

/// The exports of `level` under `edit` on a node whose job's ports are
/// `ports`; `path_record`: the level takes each path record's SL (its
/// grant says so: `grant::Grant::path_record_sl`), so the SL variables are
/// unset and the path-record switches set to `1` instead.
pub fn for_level(
    level: &Level,
    edit: &ExportsEdit,
    ports: PortLayers,
    path_record: bool,
) -> Exports {
    let mut out = Exports::default();
    let vars = table(edit);
    let push = |carries: Carries, value: Option<String>, out: &mut Exports| {
        for v in vars.iter().filter(|v| v.carries == carries) {
            match &value {
                Some(value) if v.layers.fit(ports) => {
                    out.set.push((v.name.clone(), value.clone()));
                }
                _ if !v.layers.fit(ports) => out.unset.push(v.name.clone()),
                _ => {}
            }
        }
    };
    if path_record {
        out.unset.extend(
            vars.iter()
                .filter(|v| v.carries == Carries::ServiceLevel)
                .map(|v| v.name.clone()),
        );
    } else {
        push(
            Carries::ServiceLevel,
            Some(level.service_level.to_string()),
            &mut out,
        );
    }
    out.set
        .push((libraries::LEVEL_VARIABLE.to_owned(), level.name.clone()));
    push(
        Carries::TrafficClass,
        level.traffic_class.map(|tc| tc.to_string()),
        &mut out,
    );
    if path_record {
        push(Carries::PathRecord, Some("1".to_owned()), &mut out);
    }
    out
}

/// Every variable the TaskProlog may set or unset under `edit`:
/// `QOSLANE_LEVEL` and the table in force.
pub fn ours(edit: &ExportsEdit) -> Vec<String> {
    let vars = table(edit);
    let (sl, rest): (Vec<_>, Vec<_>) = vars
        .into_iter()
        .partition(|v| v.carries == Carries::ServiceLevel);
    sl.into_iter()
        .map(|v| v.name)
        .chain(std::iter::once(libraries::LEVEL_VARIABLE.to_owned()))
        .chain(rest.into_iter().map(|v| v.name))
        .collect()
}

/// Renders pairs as Slurm's TaskProlog protocol: `export NAME=VALUE` lines.
/// Values are validated names and numbers: no quoting is needed (Slurm takes
/// the value verbatim).
pub fn render(pairs: &[(impl AsRef<str>, impl AsRef<str>)]) -> String {
    let mut s = String::new();
    for (k, v) in pairs {
        s.push_str("export ");
        s.push_str(k.as_ref());
        s.push('=');
        s.push_str(v.as_ref());
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::SiteExport;
    use crate::mapping::validate::validate_str;

    fn level(tc: Option<u8>) -> Level {
        let tc = tc.map_or_else(String::new, |t| format!("    traffic_class: {t}\n"));
        let m = validate_str(&format!(
            "default_level: a\nlevels:\n  - name: a\n    qos: [a]\n    service_level: 3\n{tc}"
        ))
        .mapping
        .expect("valid");
        m.levels()[0].clone()
    }

    const IB: PortLayers = PortLayers {
        infiniband: true,
        roce: false,
    };
    const ROCE: PortLayers = PortLayers {
        infiniband: false,
        roce: true,
    };

    fn names(pairs: &[(String, String)]) -> Vec<&str> {
        pairs.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn an_infiniband_node_gets_no_traffic_class_and_unsets_them() {
        let x = for_level(&level(Some(106)), &ExportsEdit::default(), IB, false);
        assert!(
            x.set
                .iter()
                .all(|(k, _)| !k.contains("TC") && !k.contains("TRAFFIC")),
            "{x:?}"
        );
        assert!(
            x.set
                .contains(&("NVSHMEM_IB_SL".to_owned(), "3".to_owned()))
        );
        assert!(
            x.set
                .contains(&("EP_OVERRIDE_RDMA_SL".to_owned(), "3".to_owned()))
        );
        assert!(x.unset.contains(&"NVSHMEM_IB_TRAFFIC_CLASS".to_owned()));
        assert!(x.unset.contains(&"NCCL_IB_TC".to_owned()));
        assert!(!x.unset.contains(&"UCX_IB_SL".to_owned()));
    }

    /// A level switched to each path record's SL: no SL exported (every SL
    /// variable unset, so that none another node exported survives), the
    /// path-record switches `1` on InfiniBand; a pinned level sets none.
    #[test]
    fn a_level_on_path_record_sls_exports_the_switches_and_no_sl() {
        let x = for_level(&level(None), &ExportsEdit::default(), IB, true);
        assert_eq!(
            x.set,
            [
                ("QOSLANE_LEVEL".to_owned(), "a".to_owned()),
                ("MV2_PATH_SL_QUERY".to_owned(), "1".to_owned()),
                (
                    "OMPI_MCA_btl_openib_ib_path_record_service_level".to_owned(),
                    "1".to_owned()
                ),
            ]
        );
        for v in ["UCX_IB_SL", "NCCL_IB_SL", "MV2_DEFAULT_SERVICE_LEVEL"] {
            assert!(x.unset.contains(&v.to_owned()), "{v}: {x:?}");
        }
        let pinned = for_level(&level(None), &ExportsEdit::default(), IB, false);
        assert!(!names(&pinned.set).contains(&"MV2_PATH_SL_QUERY"));
        assert!(
            !pinned.unset.iter().any(|v| v.contains("PATH")),
            "{pinned:?}"
        );
        // On RoCE the switches belong nowhere: unset.
        let roce = for_level(&level(None), &ExportsEdit::default(), ROCE, true);
        assert!(roce.unset.contains(&"MV2_PATH_SL_QUERY".to_owned()));
        assert!(ours(&ExportsEdit::default()).contains(&"MV2_PATH_SL_QUERY".to_owned()));
    }

    #[test]
    fn a_roce_node_gets_the_traffic_class_and_no_infiniband_only_sl() {
        let x = for_level(&level(Some(106)), &ExportsEdit::default(), ROCE, false);
        for v in [
            "UCX_IB_TRAFFIC_CLASS",
            "NCCL_IB_TC",
            "NVSHMEM_IB_TRAFFIC_CLASS",
            "MC_IB_TC",
            "NIC_TRAFFIC_CLASS",
        ] {
            assert!(
                x.set.contains(&(v.to_owned(), "106".to_owned())),
                "{v}: {x:?}"
            );
        }
        assert!(!names(&x.set).contains(&"EP_OVERRIDE_RDMA_SL"));
        assert_eq!(x.unset, ["EP_OVERRIDE_RDMA_SL"]);
        // Service levels, the level, then traffic classes.
        let at = |n: &str| names(&x.set).iter().position(|k| *k == n).unwrap();
        assert!(at("UCX_IB_SL") < at("QOSLANE_LEVEL") && at("QOSLANE_LEVEL") < at("NCCL_IB_TC"));
    }

    #[test]
    fn a_level_without_a_traffic_class_exports_none_and_unsets_none_on_roce() {
        let x = for_level(&level(None), &ExportsEdit::default(), ROCE, false);
        assert!(
            !names(&x.set)
                .iter()
                .any(|k| k.contains("TRAFFIC") || k.ends_with("_TC"))
        );
        assert_eq!(x.unset, ["EP_OVERRIDE_RDMA_SL"]);
    }

    #[test]
    fn a_node_without_known_ports_exports_the_whole_table() {
        let x = for_level(
            &level(Some(7)),
            &ExportsEdit::default(),
            PortLayers::default(),
            false,
        );
        // All but the path-record switches, which only a level on path
        // record SLs sets.
        let switches = libraries::TABLE
            .iter()
            .filter(|e| e.carries == Carries::PathRecord)
            .count();
        assert_eq!(switches, 2);
        assert_eq!(x.set.len(), libraries::TABLE.len() + 1 - switches);
        assert!(x.unset.is_empty());
        let all = ours(&ExportsEdit::default());
        assert_eq!(names(&x.set), all[..all.len() - switches]);
    }

    #[test]
    fn a_site_drops_and_adds_entries() {
        let edit = ExportsEdit {
            add: vec![
                SiteExport {
                    variable: "MY_SL".into(),
                    carries: Carries::ServiceLevel,
                    layers: Layers::Both,
                },
                SiteExport {
                    variable: "MY_TC".into(),
                    carries: Carries::TrafficClass,
                    layers: Layers::Roce,
                },
            ],
            drop: vec!["NIC_SERVICE_LEVEL".into(), "NCCL_IB_TC".into()],
        };
        let x = for_level(&level(Some(9)), &edit, ROCE, false);
        assert!(x.set.contains(&("MY_SL".to_owned(), "3".to_owned())));
        assert!(x.set.contains(&("MY_TC".to_owned(), "9".to_owned())));
        assert!(!names(&x.set).contains(&"NIC_SERVICE_LEVEL"));
        assert!(!names(&x.set).contains(&"NCCL_IB_TC"));
        let x = for_level(&level(Some(9)), &edit, IB, false);
        assert!(x.unset.contains(&"MY_TC".to_owned()));
        assert!(
            !x.unset.contains(&"NCCL_IB_TC".to_owned()),
            "dropped: not ours"
        );
        let ours = ours(&edit);
        assert!(ours.contains(&"MY_TC".to_owned()) && !ours.contains(&"NCCL_IB_TC".to_owned()));
    }
}
