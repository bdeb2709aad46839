//! A shared node: read-only runs (`status`) beside running Prologs of other
//! jobs disturb none of them.

use super::*;

/// `qoslane status` (read-only, no lock) beside running Prologs disturbs
/// none of them. Regression: listing the records used to delete every temp
/// file in the jobs directory, a live Prolog's half-written record included;
/// its rename then failed and the Prolog rolled back.
#[test]
fn status_beside_running_prologs_disturbs_nothing() {
    let n = reliability_node(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut statuses = 0;
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut count = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = Op::Status.run(&n, &[]);
                count += 1;
            }
            count
        });
        for j in 1..=80 {
            let out = Op::Prolog(j, "low").run(&n, &[]);
            ok(&out);
            let a = n.last_audit("prolog");
            *outcomes
                .entry(a["outcome"].as_str().unwrap().to_owned())
                .or_default() += 1;
            ok(&Op::Epilog(j).run(&n, &[]));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        statuses = watcher.join().unwrap();
    });
    eprintln!("status beside prologs: {statuses} status runs, prolog outcomes {outcomes:?}");
    assert_eq!(outcomes.get("applied"), Some(&80), "{outcomes:?}");
    assert!(inconsistencies(&n, &BTreeMap::new()).is_empty());
}

/// The planner reads the active jobs' claims from the node state, not every
/// record; the claims still follow the records where something other than a
/// transaction changed them. A record removed by hand releases its job's
/// settings at the next transaction, as when the planner read the records.
#[test]
fn a_record_removed_by_hand_releases_its_claim() {
    let n = reliability_node(0);
    ok(&Op::Prolog(1, "high").run(&n, &[]));
    assert_eq!(n.get(RMEM), "8388608");
    std::fs::remove_file(n.path("/run/qoslane/jobs/1.json")).unwrap();
    ok(&Op::Prolog(2, "normal").run(&n, &[]));
    assert_eq!(
        n.get(RMEM),
        "212992",
        "job 1's setting stayed after its record went"
    );
    let mut active = BTreeMap::new();
    active.insert(2, Want::of(&levels(0), "normal"));
    assert_eq!(inconsistencies(&n, &active), Vec::<String>::new());
}

/// A node state written before qoslane kept claims (an upgrade while jobs
/// run): the next transaction builds them from the records, and the running
/// job's settings keep winning over a lower level's.
#[test]
fn a_node_state_without_claims_is_completed_from_the_records() {
    let n = reliability_node(0);
    ok(&Op::Prolog(1, "high").run(&n, &[]));
    let p = n.path("/run/qoslane/node.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert!(v.as_object_mut().unwrap().remove("claims").is_some(), "{v}");
    std::fs::write(&p, v.to_string()).unwrap();
    ok(&Op::Prolog(2, "low").run(&n, &[]));
    assert_eq!(
        n.get(RMEM),
        "8388608",
        "high's rmem_max must still win over low's"
    );
    let mut active = BTreeMap::new();
    active.insert(1, Want::of(&levels(0), "high"));
    active.insert(2, Want::of(&levels(0), "low"));
    assert_eq!(inconsistencies(&n, &active), Vec::<String>::new());
}
