//! The body of the `scontrol_qos` fuzz target, apart from libFuzzer so the
//! stable test suite runs the same checks (`tests/integration/reliability/fuzz_on_stable.rs` includes
//! this file as a module).
//!
//! `qoslane::job::qos::parse_scontrol_qos` reads the job's QoS from
//! `scontrol show job -o ID` in the root Prolog. Two properties:
//!
//! - any output: no panic, no hang; a QoS that comes out is a QoS name
//!   (`[A-Za-z0-9_.-]{1,64}`) written as `QOS=<it>` in the output;
//! - spoofing: in a real Slurm 22.05 line whose user-controlled fields
//!   (`JobName=`, `Comment=`, `WorkDir=`) hold arbitrary text — spaces,
//!   newlines, fake `Account=… QOS=… JobState=…` included — the parser
//!   returns the job's real QoS or an error (the job then gets the default
//!   level), never a QoS the user wrote.

use qoslane::job::qos::parse_scontrol_qos;

/// The QoS of the template line.
pub const REAL_QOS: &str = "high";

/// `scontrol show job -o` on Slurm 22.05.8 with the user's fields filled in.
pub fn real_line(name: &str, comment: &str, workdir: &str) -> String {
    format!(
        "JobId=7 JobName={name} UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A \
         Priority=10000 Nice=0 Account=rigacct QOS={REAL_QOS} JobState=RUNNING Reason=None \
         Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 \
         RunTime=00:00:01 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-29T10:00:00 \
         Partition=debug AllocNode:Sid=node:1 NodeList=node BatchHost=node NumNodes=1 \
         NumCPUs=1 NumTasks=1 CPUs/Task=1 TRES=cpu=1,node=1,billing=1 Features=(null) \
         OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Comment={comment} \
         Command=/home/alice/job.sh WorkDir={workdir} StdErr={workdir}/slurm-7.out \
         StdIn=/dev/null StdOut={workdir}/slurm-7.out Power=\n"
    )
}

/// Any output: no panic; what comes out is a QoS name the output contains.
pub fn check_output(text: &str) {
    if let Ok(q) = parse_scontrol_qos(text) {
        assert!(
            !q.is_empty()
                && q.len() <= 64
                && q.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')),
            "not a QoS name: {q:?}"
        );
        assert!(
            text.contains(&format!("QOS={q}")),
            "{q:?} is not in the output"
        );
    }
}

/// The spoofing property for one choice of the user's fields.
pub fn check_spoof(name: &str, comment: &str, workdir: &str) {
    let line = real_line(name, comment, workdir);
    if let Ok(q) = parse_scontrol_qos(&line) {
        assert_eq!(
            q, REAL_QOS,
            "spoofed: the user's fields {name:?} / {comment:?} / {workdir:?} gave QoS {q:?}"
        );
    }
}

/// The fuzz entry: the bytes as output, and split at 0x1f (unit separator)
/// into the three user fields of a real line.
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    check_output(&text);
    let mut parts = text.splitn(3, '\u{1f}');
    let name = parts.next().unwrap_or("");
    let comment = parts.next().unwrap_or("");
    let workdir = parts.next().unwrap_or("");
    check_spoof(name, comment, workdir);
}
