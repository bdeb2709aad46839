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
