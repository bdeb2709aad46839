//! The deadlock check's SA path records: which pairs it asks (from the
//! first HCAs to every other, known before the egress read, beside which
//! they are sent) and what their SLs say.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::fabric::judge::deadlock::Fabric;

/// Sources of the path records asked: the first HCAs of the fabric.
const PATH_SOURCES: usize = 2;

/// The pairs whose path records the deadlock check asks (before the
/// egress read, beside which they are sent): from the first HCAs of the
/// fabric (as the forwarding tables' read) to every other.
pub fn path_pairs(f: &Fabric) -> Vec<(u16, u16)> {
    f.hcas
        .iter()
        .take(PATH_SOURCES)
        .flat_map(|s| {
            f.hcas
                .iter()
                .filter(move |d| d.lid != s.lid)
                .map(move |d| (s.lid, d.lid))
        })
        .collect()
}

/// The SLs of the SA's path records (of [`path_pairs`]), counted, and why
/// some were not answered.
pub(super) fn path_sls(answers: Vec<Result<u8>>) -> (BTreeMap<u8, usize>, Option<String>) {
    let asked = answers.len();
    let mut sls = BTreeMap::new();
    let mut unread = None;
    let mut failed = 0usize;
    for r in answers {
        match r {
            Ok(sl) => *sls.entry(sl).or_default() += 1,
            Err(e) => {
                failed += 1;
                unread.get_or_insert_with(|| e.to_string());
            }
        }
    }
    let unread = unread.map(|e| format!("{failed} of {asked} path records: {e}"));
    (sls, unread)
}
