//! The fuzz bodies on stable: the libFuzzer targets of `fuzz/` (squeue_qos,
//! smpquery, job_record) check what `fuzz/src/*.rs` says; the same checks run
//! here on every test run, fed by proptest and by mutations of captured real
//! outputs (fuzz/README.md). proptest's saved failures are in
//! `fuzz_on_stable.proptest-regressions` beside this file (replayed first).

#[path = "../../../fuzz/src/job_record.rs"]
mod fuzz_job_record;
#[path = "../../../fuzz/src/smpquery.rs"]
mod fuzz_smpquery;
#[path = "../../../fuzz/src/squeue.rs"]
mod fuzz_squeue;

use proptest::prelude::*;

/// Pieces a user would put in their job's name, comment or directory to
/// spoof a QoS: fake fields, newlines, the real field names.
fn spoof_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just(" Account=a QOS=mission-critical JobState=R".to_owned()),
        Just("\n".to_owned()),
        Just(" ".to_owned()),
        Just("QOS=low".to_owned()),
        Just(" QOS=".to_owned()),
        Just("JobId=8 ".to_owned()),
        Just(" JobState=RUNNING".to_owned()),
        Just("Account=rigacct".to_owned()),
        Just("QOS=high".to_owned()),
        Just("\t".to_owned()),
        "[a-z=()_.\\- ]{0,8}",
    ];
    prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
}

/// Every captured output of the fabric tools: the node's own tables, a
/// switch's (first hop, sweep), the topology.
fn captured() -> Vec<String> {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut v: Vec<String> = ["smpquery", "smpquery-switch", "ibnetdiscover"]
        .iter()
        .flat_map(|d| std::fs::read_dir(fixtures.join(d)).expect("fixtures"))
        .map(|e| std::fs::read_to_string(e.expect("entry").path()).expect("read"))
        .collect();
    v.sort();
    v
}

/// A captured output with lines deleted, duplicated, truncated, or a
/// character replaced.
fn mutated_output() -> impl Strategy<Value = String> {
    let outputs = captured();
    (0..outputs.len(), any::<u64>(), 0..4u8, any::<char>()).prop_map(move |(i, r, kind, c)| {
        let text = &outputs[i];
        let lines: Vec<&str> = text.lines().collect();
        let at = usize::try_from(r % lines.len().max(1) as u64).expect("below len");
        match kind {
            0 => {
                let mut l = lines.clone();
                l.remove(at);
                l.join("\n")
            }
            1 => {
                let mut l = lines.clone();
                l.insert(at, lines[at]);
                l.join("\n")
            }
            2 => text
                .chars()
                .take(usize::try_from(r % (text.len() + 1) as u64).expect("below len"))
                .collect(),
            _ => {
                let mut chars: Vec<char> = text.chars().collect();
                let n = chars.len();
                chars[usize::try_from(r % n as u64).expect("below len")] = c;
                chars.into_iter().collect()
            }
        }
    })
}

fn variable_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("UCX_IB_SL".to_owned()),
        Just("QOSLANE_LEVEL".to_owned()),
        Just("NCCL_IB_TC".to_owned()),
        Just("LD_PRELOAD".to_owned()),
        Just("PATH".to_owned()),
        "[A-Z_]{0,12}",
        any::<String>(),
    ]
}

fn record_json() -> impl Strategy<Value = String> {
    let name = variable_name();
    let value = prop_oneof![
        Just("3".to_owned()),
        Just("3\nexport LD_PRELOAD=/tmp/x.so".to_owned()),
        Just(String::new()),
        "[a-z0-9._\\- ;$`]{0,10}",
        any::<String>(),
    ];
    (
        prop::collection::vec((name, value), 0..6),
        prop::collection::vec(variable_name(), 0..3),
        1..5u32,
    )
        .prop_map(|(exports, unset, job)| {
            serde_json::json!({
                "job_id": job, "time": "t", "user": "alice", "qos": "high",
                "qos_source": "squeue", "level": "high", "rank": 1,
                "service_level": 2, "virtual_lane": 2, "traffic_class": null,
                "settings": [], "exports": exports, "unset": unset,
                "mapping_sha256": "x"
            })
            .to_string()
        })
}

proptest! {
    // Saved failures beside this file: the default (`SourceParallel`) would
    // look in tests/proptest-regressions/ once the binary has a main.rs.
    #![proptest_config(ProptestConfig {
        cases: 4000,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    })]

    /// Whatever text a user could write, squeue's output of `JOBID QOS`
    /// lines is believed only when every line of the job's own id (1; 2 is
    /// another component of a heterogeneous job) is the same name.
    #[test]
    fn squeue_output_is_the_qos_or_nothing(
        lines in prop::collection::vec((1u8..3, spoof_text()), 0..4)
    ) {
        let text: Vec<String> = lines.iter().map(|(job, t)| format!("{job} {t}")).collect();
        fuzz_squeue::check_output(&text.join("\n"));
    }

    #[test]
    fn squeue_any_output(s in any::<String>()) {
        fuzz_squeue::check(s.as_bytes());
    }

    #[test]
    fn smpquery_mutated_real_outputs(s in mutated_output()) {
        fuzz_smpquery::check(s.as_bytes());
    }

    #[test]
    fn smpquery_any_bytes_and_roundtrip(b in prop::collection::vec(any::<u8>(), 0..300)) {
        fuzz_smpquery::check(&b);
    }

    #[test]
    fn job_record_any_exports(j in record_json()) {
        fuzz_job_record::check(j.as_bytes());
    }

    #[test]
    fn job_record_any_bytes(b in prop::collection::vec(any::<u8>(), 0..200)) {
        fuzz_job_record::check(&b);
    }
}

/// Every `pub fn` of `fabric/read/parse/` (every file of it) is a parser
/// named in `PARSERS`, and the fuzz body knows every name of `PARSERS` (it
/// panics on one it does not know): a parser added without its fuzz check
/// fails here.
#[test]
fn every_parser_of_parse_rs_is_fuzzed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/fabric/read/parse");
    let mut sources: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("parse/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect();
    assert!(sources.len() >= 4, "the parsers' files: {}", sources.len());
    sources.sort();
    let mut pub_fns: Vec<&str> = sources
        .iter()
        .flat_map(|s| s.lines())
        .filter_map(|l| l.strip_prefix("pub fn "))
        .map(|rest| rest.split(['(', '<']).next().unwrap_or(rest))
        .collect();
    pub_fns.sort_unstable();
    let mut listed = qoslane::fabric::read::parse::PARSERS.to_vec();
    listed.sort_unstable();
    assert_eq!(pub_fns, listed, "fabric/read/parse/: pub fns vs PARSERS");
    assert_eq!(
        listed.len(),
        11,
        "the parsers of smpquery, ibnetdiscover, perfquery, saquery and ibroute"
    );
    for name in qoslane::fabric::read::parse::PARSERS {
        fuzz_smpquery::check_parser(name, "");
    }
    let unknown = std::panic::catch_unwind(|| fuzz_smpquery::check_parser("parse_new", ""));
    assert!(
        unknown.is_err(),
        "a parser the fuzz body does not know fails"
    );
}

/// Each parser accepts at least one captured output: the fuzz bodies are fed
/// something every parser reads, not only garbage.
#[test]
fn every_parser_reads_a_captured_output() {
    use qoslane::fabric::read::parse::{
        parse_lid, parse_nodedesc, parse_nodeinfo, parse_portinfo, parse_sl2vl, parse_switch_sl2vl,
        parse_topology, parse_vlarb,
    };
    let all = captured();
    let any = |f: &dyn Fn(&str) -> bool| all.iter().any(|t| f(t));
    assert!(any(&|t| parse_sl2vl(t).is_ok()));
    assert!(any(&|t| parse_switch_sl2vl(t, 7).is_ok_and(|r| r.len() > 1)));
    assert!(any(&|t| parse_portinfo(t).is_ok()));
    assert!(any(&|t| parse_vlarb(t).is_ok()));
    assert!(any(&|t| parse_nodeinfo(t).is_ok()));
    assert!(any(&|t| parse_lid(t).is_ok()));
    assert!(any(&|t| parse_topology(t).is_ok()));
    assert!(parse_nodedesc("Node Description:...........................leaf1\n").is_ok());
}

#[test]
fn captured_outputs_parse_and_roundtrip() {
    for text in captured() {
        fuzz_smpquery::check_text(&text);
    }
    fuzz_smpquery::check_roundtrip(&[0xff; 200]);
    fuzz_smpquery::check_roundtrip(&[]);
}

/// What scontrol's newline spoof became: two squeue lines that disagree
/// are no QoS at all (the job gets the default level).
#[test]
fn regression_two_lines_that_disagree_are_no_qos() {
    fuzz_squeue::check(b"1 low\n1 mission-critical\n");
    assert!(qoslane::job::qos::parse_squeue_qos("1", "1 low\n1 mission-critical\n").is_err());
}

/// Issue 24 (suspected case, confirmed on 22.05): `squeue -j LEADER` of a
/// heterogeneous job lists every component, each with its own QoS; the
/// leader's Prolog got "components disagree" and the default level. Only
/// the lines of the job's own id count.
#[test]
fn regression_a_heterogeneous_leader_reads_its_own_component() {
    use qoslane::job::qos::parse_squeue_qos;
    fuzz_squeue::check(b"1 high\n2 low\n");
    assert_eq!(
        parse_squeue_qos("264", "264 high\n265 low\n"),
        Ok("high".into())
    );
    assert_eq!(parse_squeue_qos("265", "265 low\n"), Ok("low".into()));
    assert!(parse_squeue_qos("266", "264 high\n265 low\n").is_err());
    assert!(
        parse_squeue_qos("264", "high\n").is_err(),
        "not `JOBID QOS`"
    );
}
