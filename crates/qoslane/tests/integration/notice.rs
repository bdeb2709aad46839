//! The job's user is told (issue 35): what its Epilog counted that the user
//! should know — bytes sent on an SL other than its level's, and the SLs —
//! left in a file the user owns and alone reads
//! (`/run/qoslane/told/JOBID`, mode 0400, in a directory of root's), not
//! only in the root-only audit log; no file with nothing to tell; the old
//! ones removed by the next write. (A job's `AdminComment` cannot carry it:
//! slurmctld refuses to update a job whose Epilog runs — tests/e2e/notice.sh.)

use std::os::unix::fs::MetadataExt as _;
use std::process::Command;

use crate::util::{Node, ok};

/// The HCA and the counters before a job (SL 0 and SL 3 have sent before).
fn node_with_counters() -> Node {
    let n = Node::new();
    n.add_fabric("mlx5-quirks");
    n.answer_perfquery("xmtsl", "xmtsl-before.txt", 0);
    n.answer_perfquery("rcvsl", "rcvsl-before.txt", 0);
    n.answer_perfquery("vlxmit", "vlxmit-before.txt", 0);
    n
}

/// The job sent 4096 bytes on SL 0 besides its level's SL 3.
fn job_sent_off_its_level(n: &Node) {
    n.answer_perfquery("xmtsl", "xmtsl-after.txt", 0);
    n.answer_perfquery("rcvsl", "rcvsl-after.txt", 0);
    n.answer_perfquery("vlxmit", "vlxmit-ibsim.txt", 0);
}

/// The Epilog of `job`, its user `nobody` (65534), with scontrol at hand.
fn epilog(n: &Node, job: &str) {
    let scontrol = n.fake_scontrol(&[]);
    let scontrol = scontrol.to_str().expect("a UTF-8 temp path");
    ok(&n.run(
        &["epilog"],
        &[
            ("SLURM_JOB_ID", job),
            ("SLURM_JOB_UID", "65534"),
            ("SLURM_JOB_GID", "65534"),
            ("QOSLANE_SCONTROL", scontrol),
        ],
    ));
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn the_off_level_bytes_are_left_in_a_file_of_the_jobs_user() {
    if !is_root() {
        eprintln!("skipped: giving a file to the job's user needs root");
        return;
    }
    let n = node_with_counters();
    ok(&n.prolog(500, "mission-critical"));
    job_sent_off_its_level(&n);
    epilog(&n, "500");
    let told = n.path("/run/qoslane/told/500");
    let md = std::fs::symlink_metadata(&told).expect("the notice");
    assert_eq!(
        (md.uid(), md.gid(), md.mode() & 0o777),
        (65534, 65534, 0o400)
    );
    let dir = std::fs::metadata(n.path("/run/qoslane/told")).expect("its directory");
    assert_eq!((dir.uid(), dir.mode() & 0o777), (0, 0o755));
    let text = n.read("/run/qoslane/told/500");
    assert!(
        text.starts_with(
            "qoslane: 4096 bytes of this job left on SL 0 instead of level mission-critical's SL 3"
        ) && text.ends_with(")\n")
            && text.lines().count() == 1,
        "{text}"
    );
    let notes = n.last_audit("epilog")["notes"].to_string();
    assert!(
        notes.contains("the job's user is told in /run/qoslane/told/500"),
        "{notes}"
    );
    // At the Epilog, slurmctld takes no update of the job: no RPC.
    assert!(n.scontrol_calls().is_empty(), "{:?}", n.scontrol_calls());
    // Its user reads it; another user does not.
    let read_as = |user: &str| {
        Command::new("/usr/sbin/runuser")
            .args(["-u", user, "--", "/bin/cat"])
            .arg(&told)
            .output()
            .expect("runuser")
    };
    assert!(read_as("nobody").status.success());
    assert!(!read_as("daemon").status.success());
}

#[test]
fn nothing_to_tell_leaves_no_file_and_old_notices_go_with_the_next() {
    if !is_root() {
        eprintln!("skipped: giving a file to the job's user needs root");
        return;
    }
    let n = node_with_counters();
    ok(&n.prolog(510, "mission-critical"));
    // Nothing moved: no off-level bytes, no notice.
    epilog(&n, "510");
    assert!(!n.path("/run/qoslane/told/510").exists());

    // A notice of eight days ago, and one of yesterday.
    n.write("/run/qoslane/told/400", "old\n");
    n.write("/run/qoslane/told/401", "recent\n");
    for (job, when) in [("400", "8 days ago"), ("401", "1 day ago")] {
        let st = Command::new("/usr/bin/touch")
            .args(["-d", when])
            .arg(n.path(&format!("/run/qoslane/told/{job}")))
            .status()
            .expect("touch");
        assert!(st.success());
    }
    ok(&n.prolog(511, "mission-critical"));
    job_sent_off_its_level(&n);
    epilog(&n, "511");
    assert!(n.path("/run/qoslane/told/511").exists());
    assert!(
        !n.path("/run/qoslane/told/400").exists(),
        "past a week: gone"
    );
    assert!(
        n.path("/run/qoslane/told/401").exists(),
        "within a week: kept"
    );
    let notes = n.last_audit("epilog")["notes"].to_string();
    assert!(notes.contains("old notices removed: 400"), "{notes}");
}
