//! The audit's check of the SM's QoS policy: for every entry of a level's
//! `sm_traffic` (`fabric/judge/sm_policy.rs`'s `classes`), one SA path
//! record query carrying it (its QoS class, service ID or PKey) between two
//! HCAs of the fabric, through the [`Reader`] (`Reader::class_sls`); the
//! SL the SA answers must be the level's. A different SL is a finding on
//! the level (the SM's policy is not the mapping's: a policy edited by
//! hand, an old one, none loaded); a query the SA does not answer is said,
//! never a finding (a PKey without a partition has no path at all; the
//! SM's log says why). An SRP target port GUID is not asked: its path is
//! to that target's port only.

use serde::Serialize;

use crate::deadline::Deadline;
use crate::fabric::judge::sm_policy::{self, PolicyClass};
use crate::fabric::read::mad::PathKey;
use crate::fabric::read::reader::Reader;
use crate::fabric::tables::{NodeType, Topology};
use crate::mapping::Mapping;

/// One declared entry as the SA answered it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClassAnswer {
    #[serde(flatten)]
    pub class: PolicyClass,
    /// The SL the SA answered with (`None`: not asked or not answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub got: Option<u8>,
    pub verdict: ClassVerdict,
    /// Why not asked or not answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassVerdict {
    /// The level's SL.
    Ok,
    /// Another SL: the level's SM traffic does not land on it.
    Mismatch,
    Unanswered,
    NotAsked,
}

impl ClassAnswer {
    /// `level gold (SL 3): qos-class 106 gets SL 3 from the SA`, or what
    /// went wrong.
    pub fn words(&self) -> String {
        let c = &self.class;
        let what = format!("level {} (SL {}): {}", c.level, c.sl, c.traffic);
        match (self.verdict, self.got) {
            (ClassVerdict::Ok, _) => format!("{what} gets SL {} from the SA", c.sl),
            (ClassVerdict::Mismatch, Some(got)) => format!(
                "{what}: the SA answers its path record with SL {got}, not the level's {}: \
                 the SM's QoS policy is not the mapping's (load `qoslane fabric sm-config \
                 --qos-policy`'s)",
                c.sl
            ),
            _ => format!(
                "{what}: not checked ({})",
                self.why.as_deref().unwrap_or("?")
            ),
        }
    }
}

/// What the check found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClassCheck {
    pub classes: Vec<ClassAnswer>,
    /// The path the queries asked for (source LID, destination LID).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub between: Option<(u16, u16)>,
    pub ms: u64,
}

impl ClassCheck {
    pub fn any_mismatch(&self) -> bool {
        self.classes
            .iter()
            .any(|c| c.verdict == ClassVerdict::Mismatch)
    }

    /// The level has a class the SA answers with another SL.
    pub fn mismatch(&self, level: &str) -> bool {
        self.classes
            .iter()
            .any(|c| c.verdict == ClassVerdict::Mismatch && c.class.level == level)
    }
}

/// The key a path record query carries for `class`, or why none.
pub fn key_of(class: &PolicyClass) -> Result<PathKey, &'static str> {
    match class.field {
        "qos-class" => u16::try_from(class.value)
            .map(PathKey::QosClass)
            .map_err(|_| "a QoS class past 12 bits"),
        "service-id" => Ok(PathKey::ServiceId(class.value)),
        // A query carries the full member's PKey.
        "pkey" => u16::try_from(class.value | 0x8000)
            .map(PathKey::Pkey)
            .map_err(|_| "a PKey past 15 bits"),
        _ => Err("a target port GUID: its path is to that port only"),
    }
}

/// Asks the SA for every declared class between the first two HCA ports
/// of `topo`.
pub fn check(
    topo: &Topology,
    reader: &dyn Reader,
    mapping: &Mapping,
    deadline: &Deadline,
) -> ClassCheck {
    let started = std::time::Instant::now();
    let classes = sm_policy::classes(mapping);
    if classes.is_empty() {
        return ClassCheck::default();
    }
    let mut lids: Vec<u16> = topo
        .connected(NodeType::Hca)
        .map(|p| p.end.lid)
        .filter(|&l| l != 0)
        .collect();
    lids.dedup();
    let between = match lids.as_slice() {
        [a, b, ..] => Some((*a, *b)),
        _ => None,
    };
    let mut answers: Vec<ClassAnswer> = classes
        .into_iter()
        .map(|class| ClassAnswer {
            class,
            got: None,
            verdict: ClassVerdict::NotAsked,
            why: None,
        })
        .collect();
    let mut asked = Vec::new();
    let mut queries = Vec::new();
    for (i, a) in answers.iter_mut().enumerate() {
        match (key_of(&a.class), between) {
            (Ok(key), Some((s, d))) => {
                asked.push(i);
                queries.push((s, d, key));
            }
            (Err(why), _) => a.why = Some(why.to_owned()),
            (Ok(_), None) => a.why = Some("fewer than two HCA ports with a LID".to_owned()),
        }
    }
    for (i, r) in asked.into_iter().zip(reader.class_sls(&queries, deadline)) {
        let a = &mut answers[i];
        match r {
            Ok(sl) => {
                a.got = Some(sl);
                a.verdict = if sl == a.class.sl {
                    ClassVerdict::Ok
                } else {
                    ClassVerdict::Mismatch
                };
            }
            Err(e) => {
                a.verdict = ClassVerdict::Unanswered;
                a.why = Some(e.to_string());
            }
        }
    }
    ClassCheck {
        classes: answers,
        between,
        ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, Result};
    use crate::fabric::sweep::reach::tests::rig;
    use crate::mapping::validate_str;
    use std::cell::RefCell;

    /// An SA that answers each key with the SL it was given, else an error;
    /// the queries it was asked.
    struct Sa {
        answers: Vec<(PathKey, u8)>,
        asked: RefCell<Vec<(u16, u16, PathKey)>>,
    }

    impl Reader for Sa {
        fn class_sls(&self, q: &[(u16, u16, PathKey)], _: &Deadline) -> Vec<Result<u8>> {
            self.asked.borrow_mut().extend_from_slice(q);
            q.iter()
                .map(|(_, _, k)| {
                    self.answers
                        .iter()
                        .find(|(a, _)| a == k)
                        .map(|(_, sl)| *sl)
                        .ok_or_else(|| Error::Fabric("MAD status 0x0c".into()))
                })
                .collect()
        }
    }

    const SRC: &str = "default_level: bulk\nlevels:\n  - name: gold\n    qos: [gold]\n    \
        service_level: 5\n    sm_traffic: [\"srp target-port-guid 0x2c903\", \"qos-class 7-9\", \
        \"service-id 0x10603db\"]\n  - name: bulk\n    qos: [bulk]\n    service_level: 1\n    \
        sm_traffic: [ipoib]\n";

    fn check_with(answers: Vec<(PathKey, u8)>) -> (ClassCheck, Vec<(u16, u16, PathKey)>) {
        let m = validate_str(SRC).mapping.unwrap();
        let sa = Sa {
            answers,
            asked: RefCell::new(Vec::new()),
        };
        let deadline = Deadline::after(std::time::Duration::from_secs(5));
        let c = check(&rig("net.2level"), &sa, &m, &deadline);
        (c, sa.asked.into_inner())
    }

    #[test]
    fn each_class_is_asked_with_its_key_and_the_level_sl_passes() {
        let (c, asked) = check_with(vec![
            (PathKey::QosClass(7), 5),
            (PathKey::ServiceId(0x0106_03db), 5),
            (PathKey::Pkey(0xffff), 1),
        ]);
        let keys: Vec<PathKey> = asked.iter().map(|q| q.2).collect();
        assert_eq!(
            keys,
            [
                PathKey::QosClass(7),
                PathKey::ServiceId(0x0106_03db),
                PathKey::Pkey(0xffff)
            ]
        );
        assert!(asked.iter().all(|q| Some((q.0, q.1)) == c.between));
        let v: Vec<ClassVerdict> = c.classes.iter().map(|a| a.verdict).collect();
        assert_eq!(
            v,
            [
                ClassVerdict::NotAsked,
                ClassVerdict::Ok,
                ClassVerdict::Ok,
                ClassVerdict::Ok
            ]
        );
        assert!(!c.any_mismatch());
        assert!(
            c.classes[1].words().contains("gets SL 5"),
            "{:?}",
            c.classes[1]
        );
    }

    #[test]
    fn another_sl_is_a_mismatch_of_the_level_and_no_answer_is_said() {
        let (c, _) = check_with(vec![(PathKey::QosClass(7), 0), (PathKey::Pkey(0xffff), 1)]);
        assert!(c.mismatch("gold") && !c.mismatch("bulk"));
        let w = c.classes[1].words();
        assert!(
            w.contains("qos-class 7-9") && w.contains("SL 0, not the level's 5"),
            "{w}"
        );
        assert_eq!(c.classes[2].verdict, ClassVerdict::Unanswered);
        let w = c.classes[2].words();
        assert!(
            w.contains("not checked (") && w.contains("MAD status 0x0c"),
            "{w}"
        );
    }

    #[test]
    fn a_mapping_without_sm_traffic_asks_nothing() {
        let m = validate_str(
            "default_level: a\nlevels:\n  - name: a\n    qos: [a]\n    service_level: 0\n",
        )
        .mapping
        .unwrap();
        let sa = Sa {
            answers: Vec::new(),
            asked: RefCell::new(Vec::new()),
        };
        let deadline = Deadline::after(std::time::Duration::from_secs(5));
        let c = check(&rig("net.2level"), &sa, &m, &deadline);
        assert!(c.classes.is_empty() && sa.asked.borrow().is_empty());
    }
}
