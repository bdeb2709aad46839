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

/// A job still running can be told in its `AdminComment` (slurmctld takes
/// the update then): read, what was there kept, ours after it; not written
/// twice; a failed call is said, not raised.
#[test]
fn a_running_job_is_told_in_its_admin_comment_after_what_was_there() {
    use qoslane::job::JobId;
    use qoslane::paths::{Overrides, Paths};
    use qoslane::run::notice::tell_job;

    let n = Node::new();
    let earlier = "qoslane: level high (QoS high) refused on n2: why";
    let paths = Paths::new(Overrides {
        root: Some(n.root().to_owned()),
        scontrol: Some(n.fake_scontrol(&[("FAKE_SCONTROL_ADMIN_COMMENT", earlier)])),
        ..Overrides::default()
    });
    let deadline = qoslane::deadline::Deadline::after(std::time::Duration::from_secs(10));
    let job = JobId::parse("600").expect("a job id");
    let note = tell_job(
        &paths,
        &deadline,
        job,
        "qoslane: 4096 bytes of this job left on SL 0",
    );
    assert_eq!(
        note.as_deref(),
        Some("the job's user is told in its AdminComment")
    );
    assert_eq!(
        n.scontrol_calls(),
        [
            "show job 600".to_owned(),
            format!(
                "update JobId=600 AdminComment={earlier} | qoslane: 4096 bytes of this job left on SL 0"
            ),
        ]
    );

    // What it says already: read, nothing written.
    n.fake_scontrol(&[(
        "FAKE_SCONTROL_ADMIN_COMMENT",
        &format!("{earlier} | qoslane: 4096 bytes of this job left on SL 0"),
    )]);
    let note = tell_job(
        &paths,
        &deadline,
        job,
        "qoslane: 4096 bytes of this job left on SL 0",
    );
    assert_eq!(
        note.as_deref(),
        Some("the job's AdminComment already tells its user")
    );
    assert_eq!(n.scontrol_calls().len(), 3);

    n.fake_scontrol(&[("FAKE_SCONTROL_FAIL", "1")]);
    let note = tell_job(&paths, &deadline, job, "x").expect("a note");
    assert!(
        note.starts_with("the job's user was not told (AdminComment)"),
        "{note}"
    );

    let without = Paths::new(Overrides {
        root: Some(n.root().to_owned()),
        ..Overrides::default()
    });
    assert_eq!(tell_job(&without, &deadline, job, "x"), None);
}
