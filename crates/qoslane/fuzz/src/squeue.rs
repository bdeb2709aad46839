//! The body of the `squeue_qos` fuzz target, apart from libFuzzer so the
//! stable test suite runs the same checks (`tests/integration/reliability/fuzz_on_stable.rs`
//! includes this file as a module).
//!
//! `qoslane::job::qos::parse_squeue_qos` reads the job's QoS from
//! `squeue -h -j ID -o "%A %q"` in the root Prolog. On any output: no panic,
//! no hang; a QoS that comes out is a QoS name (`[A-Za-z0-9_.-]{1,64}`) and
//! every line of the job's own id says exactly it (another component of a
//! heterogeneous job, its own id, cannot choose it), so nothing else in the
//! output can choose it.

use qoslane::job::qos::parse_squeue_qos;

/// The job the fuzzed output is asked for.
const JOB: &str = "1";

/// Any output: no panic; what comes out is what every line of the job says.
pub fn check_output(text: &str) {
    if let Ok(q) = parse_squeue_qos(JOB, text) {
        assert!(
            !q.is_empty()
                && q.len() <= 64
                && q.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')),
            "not a QoS name: {q:?}"
        );
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (job, qos) = line.split_once(' ').expect("every line is `JOBID QOS`");
            if job == JOB {
                assert_eq!(
                    qos.trim(),
                    q,
                    "a line of the job that is not the QoS: {line:?}"
                );
            }
        }
    }
}

/// The fuzz entry: the bytes as squeue's output.
pub fn check(data: &[u8]) {
    check_output(&String::from_utf8_lossy(data));
}
