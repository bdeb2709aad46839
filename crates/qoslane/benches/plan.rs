//! In-process benches for the parts of a run whose cost grows with its
//! inputs (bench/run.sh runs them; docs/PERFORMANCE.md shows the results):
//! mapping validation and hashing by mapping size, the QoS -> level lookup,
//! `txn::desired` (the shared-node plan) by active jobs, the fabric check by
//! levels x ports, and rendering the metrics.
//!
//! `cargo bench -p qoslane --bench plan`

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use qoslane::fabric::judge::check;
use qoslane::fabric::policy::Alignment;
use qoslane::fabric::{PortId, PortTables, Sl2Vl, VlArb, VlArbEntry, VlArbState, VlRange};
use qoslane::job::JobId;
use qoslane::job::qos::QosSource;
use qoslane::mapping::validate_str;
use qoslane::metrics::{Counters, Gauges, Run, render};
use qoslane::state::JobRecord;

const TOS: &str = "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos";
const RMEM: &str = "/proc/sys/net/core/rmem_max";
/// The SL2VL table OpenSM programs by default on ibsim: SL0-7 -> VL7..0.
const REVERSED: [u8; 16] = [7, 6, 5, 4, 3, 2, 1, 0, 0, 1, 2, 3, 4, 5, 6, 7];

/// A valid mapping of `levels` levels (at most 16: SLs are 4 bits and
/// distinct) and `qos` QoS names spread over them, like bench/lib.sh's.
fn mapping(levels: usize, qos: usize) -> String {
    assert!(levels <= 16, "service levels are 0..=15 and distinct");
    let mut s = format!(
        "default_level: tier-{:02}\nfabric_check: enforce\non_failure: continue\ndevices: []\nlevels:\n",
        levels - 1
    );
    for (i, vl) in REVERSED.iter().enumerate().take(levels) {
        let n = qos / levels + usize::from(i < qos % levels);
        let names: Vec<String> = (0..n).map(|k| format!("q{i:02}-{k:04}")).collect();
        s += &format!(
            "  - name: tier-{i:02}\n    qos: [{}]\n    service_level: {i}\n    virtual_lane: {vl}\n",
            names.join(", "),
        );
        if i < 2 || i == levels - 1 {
            let tos = match i {
                0 => 106,
                1 => 74,
                _ => 26,
            };
            s += &format!("    node_settings:\n      - path: {TOS}\n        value: \"{tos}\"\n");
        }
    }
    s
}

const SIZES: [(usize, usize); 4] = [(4, 4), (16, 16), (16, 64), (16, 1024)];

fn bench_validate(c: &mut Criterion) {
    let mut g = c.benchmark_group("validate");
    let example = include_str!("../../../examples/qos-network.yml");
    g.bench_function("examples/qos-network.yml", |b| {
        b.iter(|| validate_str(black_box(example)));
    });
    for (levels, qos) in SIZES {
        let text = mapping(levels, qos);
        assert!(
            validate_str(&text).mapping.is_some(),
            "generated mapping is valid"
        );
        g.bench_with_input(
            BenchmarkId::new("levels x qos", format!("{levels}x{qos}")),
            &text,
            |b, t| b.iter(|| validate_str(black_box(t))),
        );
        g.bench_with_input(
            BenchmarkId::new("sha256", format!("{levels}x{qos} ({} bytes)", text.len())),
            &text,
            |b, t| b.iter(|| qoslane::config::sha256_hex(black_box(t.as_bytes()))),
        );
    }
    g.finish();
}

fn bench_lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("level_for_qos");
    for (levels, qos) in SIZES {
        let m = validate_str(&mapping(levels, qos))
            .mapping
            .expect("valid mapping");
        let last = m
            .levels()
            .last()
            .and_then(|l| l.qos.last())
            .cloned()
            .expect("a QoS");
        g.bench_with_input(
            BenchmarkId::new("last QoS of the last level", format!("{levels}x{qos}")),
            &last,
            |b, q| b.iter(|| m.level_for_qos(black_box(Some(q.as_str()))).0.name.len()),
        );
    }
    g.finish();
}

fn record(job: u32, rank: usize) -> JobRecord {
    let (tos, rmem) = match rank {
        0 => (Some("106"), Some("16777216")),
        1 => (Some("74"), Some("8388608")),
        3 => (None, Some("1048576")),
        _ => (None, None),
    };
    let mut settings = Vec::new();
    if let Some(v) = tos {
        settings.push((TOS.to_owned(), v.to_owned()));
    }
    if let Some(v) = rmem {
        settings.push((RMEM.to_owned(), v.to_owned()));
    }
    JobRecord {
        job_id: JobId::parse(&job.to_string()).expect("job id"),
        time: "2026-11-30T00:00:00.000Z".into(),
        user: Some("alice".into()),
        qos: Some("high".into()),
        qos_source: QosSource::Env,
        level: format!("level-{rank}"),
        rank,
        service_level: u8::try_from(rank % 16).unwrap_or(0),
        virtual_lane: Some(REVERSED[rank]),
        traffic_class: None,
        settings,
        exports: vec![("UCX_IB_SL".into(), rank.to_string())],
        unset: Vec::new(),
        mapping_sha256: "0".repeat(64),
    }
}

fn bench_desired(c: &mut Criterion) {
    let mut g = c.benchmark_group("desired");
    let baseline: BTreeMap<String, String> = [(TOS, "0"), (RMEM, "212992")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for n in [1u32, 8, 64] {
        let active: BTreeMap<JobId, JobRecord> = (1..=n)
            .map(|j| {
                let r = record(j, (j as usize) % 4);
                (r.job_id, r)
            })
            .collect();
        let active = qoslane::state::claims_of(&active);
        g.bench_with_input(BenchmarkId::new("active jobs", n), &active, |b, a| {
            b.iter(|| qoslane::txn::desired(black_box(a), black_box(&baseline)));
        });
    }
    g.finish();
}

fn tables() -> PortTables {
    PortTables {
        sl2vl: Sl2Vl::new(REVERSED).expect("table"),
        oper_vls: VlRange::from_code(4).expect("VL0-7"),
        vl_cap: VlRange::from_code(4).expect("VL0-7"),
        link_state: "Active".into(),
        vlarb: VlArbState::Read(VlArb {
            low: (0..8).map(|vl| VlArbEntry { vl, weight: 32 }).collect(),
            high: vec![VlArbEntry { vl: 0, weight: 4 }],
        }),
    }
}

fn bench_check(c: &mut Criterion) {
    let mut g = c.benchmark_group("fabric_check");
    let m = validate_str(&mapping(16, 16))
        .mapping
        .expect("valid mapping");
    let t = tables();
    for ports in [1u32, 4, 16] {
        let ids: Vec<PortId> = (0..ports)
            .map(|p| PortId::new(format!("mlx5_{p}"), 1))
            .collect();
        g.bench_with_input(
            BenchmarkId::new("16 levels x ports", ports),
            &ids,
            |b, ids| {
                b.iter(|| {
                    ids.iter()
                        .flat_map(|id| m.levels().iter().map(|l| check::check(id, &t, l)))
                        .filter(|v| v.aligned)
                        .count()
                });
            },
        );
    }
    g.finish();
}

fn bench_render(c: &mut Criterion) {
    let mut g = c.benchmark_group("render_metrics");
    let mut counters = Counters::default();
    for (i, event) in ["prolog", "epilog", "health"]
        .iter()
        .cycle()
        .take(300)
        .enumerate()
    {
        counters.record(&Run {
            log_lines_dropped: 0,
            settings_gone: 0,
            event,
            outcome: qoslane::report::Outcome::Applied,
            seconds: 0.001 * (i % 50) as f64,
            rolled_back: false,
            fabric: None,
            first_hop: None,
            succeeded: true,
            qos_fallback: None,
            health_warnings: None,
            node_lock_held_seconds: None,
            job_sent: None,
            live_jobs: None,
            xmit_wait: Vec::new(),
            xmit_wait_read_at_ms: None,
        });
    }
    for ports in [1u32, 16] {
        let mut c2 = counters.clone();
        c2.fabric = (0..ports)
            .flat_map(|p| {
                (0..16).map(move |l| Alignment {
                    device: format!("mlx5_{p}"),
                    port: 1,
                    level: format!("tier-{l:02}"),
                    aligned: true,
                })
            })
            .collect();
        let gauges = Gauges {
            active_jobs: (0..16).map(|l| (format!("tier-{l:02}"), 4)).collect(),
            mapping_sha256: Some("0".repeat(64)),
            granted: (0..16).map(|l| (format!("tier-{l:02}"), true)).collect(),
            on_failure: (0..16)
                .map(|l| (format!("tier-{l:02}"), "fail_job"))
                .collect(),
            mapping_valid: true,
            vl_levels: (0..15).map(|v| (v, format!("tier-{v:02}"))).collect(),
        };
        g.bench_function(BenchmarkId::new("16 levels x ports", ports), |b| {
            b.iter(|| render(black_box(&c2), black_box(&gauges)).len());
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_validate,
    bench_lookup,
    bench_desired,
    bench_check,
    bench_render
);
criterion_main!(benches);
