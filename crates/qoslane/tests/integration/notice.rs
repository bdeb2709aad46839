//! The job's user is told (issue 35): what its Epilog counted that the user
//! should know — bytes sent on an SL other than its level's — appended to
//! the job's `AdminComment` through scontrol (the stand-in
//! `tests/fixtures/bin/scontrol`), never under the node lock, keeping what
//! was there (hookrun's refusal reason of an earlier run); no call when
//! there is nothing to tell.

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

fn epilog(n: &Node, job: &str, env: &[(&str, &str)]) {
    let scontrol = n.fake_scontrol(env);
    let scontrol = scontrol.to_str().expect("a UTF-8 temp path");
    let mut all = vec![("SLURM_JOB_ID", job), ("QOSLANE_SCONTROL", scontrol)];
    all.extend_from_slice(env);
    ok(&n.run(&["epilog"], &all));
}

#[test]
fn the_off_level_bytes_are_appended_to_the_jobs_admin_comment() {
    let n = node_with_counters();
    ok(&n.prolog(500, "mission-critical"));
    job_sent_off_its_level(&n);
    let earlier = "qoslane: level mission-critical (QoS mission-critical) refused on n2: why";
    epilog(&n, "500", &[("FAKE_SCONTROL_ADMIN_COMMENT", earlier)]);
    let calls = n.scontrol_calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0], "show job 500");
    let update = calls[1]
        .strip_prefix(&format!("update JobId=500 AdminComment={earlier} | "))
        .unwrap_or_else(|| panic!("the earlier reason kept, ours after it: {calls:?}"));
    assert!(
        update.starts_with(
            "qoslane: 4096 bytes of this job left on SL 0 instead of level mission-critical's SL 3"
        ),
        "{update}"
    );
    assert!(!calls.iter().any(|c| c.ends_with("LOCKED")), "{calls:?}");
    let notes = n.last_audit("epilog")["notes"].to_string();
    assert!(
        notes.contains("the job's user is told in its AdminComment"),
        "{notes}"
    );

    // Told already (an Epilog run twice): read, and nothing written again.
    let told = calls[1]
        .strip_prefix("update JobId=500 AdminComment=")
        .expect("the update")
        .to_owned();
    let n = node_with_counters();
    ok(&n.prolog(502, "mission-critical"));
    job_sent_off_its_level(&n);
    epilog(&n, "502", &[("FAKE_SCONTROL_ADMIN_COMMENT", &told)]);
    assert_eq!(n.scontrol_calls(), ["show job 502"]);
}

#[test]
fn nothing_to_tell_is_no_call_and_a_failed_call_is_a_note() {
    let n = node_with_counters();
    ok(&n.prolog(510, "mission-critical"));
    // Nothing moved: no off-level bytes.
    epilog(&n, "510", &[]);
    assert!(n.scontrol_calls().is_empty(), "{:?}", n.scontrol_calls());

    ok(&n.prolog(511, "mission-critical"));
    job_sent_off_its_level(&n);
    epilog(&n, "511", &[("FAKE_SCONTROL_FAIL", "1")]);
    let notes = n.last_audit("epilog")["notes"].to_string();
    assert!(
        notes.contains("the job's user was not told (AdminComment)"),
        "{notes}"
    );
}
