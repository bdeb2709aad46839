//! What one hook costs the node it runs on, counted with `strace -f`: the
//! threads it starts, the fsyncs it makes, the programs it runs. On a node
//! whose cores are busy with jobs, each thread and each flush waits for a
//! time slice; these are the design's numbers, held as numbers (the time
//! they cost is measured by bench/cycle.sh, not asserted).
//!
//! The node is laid out as a real one: `/run` a tmpfs (job records, journal,
//! baseline, fabric cache), `/var` on disk (the audit log, counters).

#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::util::Within as _;
use std::path::Path;
use std::process::Command;

use crate::util::{self, Mount, Node, ok};

/// Per run: threads started, fsync/fdatasync calls, programs started (the
/// process's own, not those of the programs it runs).
#[derive(Debug, PartialEq, Eq)]
struct Cost {
    threads: usize,
    fsyncs: usize,
    programs: usize,
}

fn strace() -> Option<&'static str> {
    let p = "/usr/bin/strace";
    if Path::new(p).exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("QOSLANE_REQUIRE_TOOLS").is_none_or(|v| v != "1"),
        "strace is missing (QOSLANE_REQUIRE_TOOLS=1)"
    );
    eprintln!("SKIPPED: no strace");
    None
}

/// Runs `qoslane ARGS` under `strace -f` and counts what the qoslane process
/// and its threads did.
fn cost(n: &Node, args: &[&str], env: &[(&str, &str)]) -> Option<Cost> {
    let text = trace(n, args, env)?;
    Some(count(&text))
}

/// What `strace -f` saw of `qoslane ARGS`.
fn trace(n: &Node, args: &[&str], env: &[(&str, &str)]) -> Option<String> {
    trace_command(n, &n.cmd(args, env))
}

/// What `strace -f` saw of the command `c`.
fn trace_command(n: &Node, c: &Command) -> Option<String> {
    let strace = strace()?;
    let log = n.root().join("strace.txt");
    let bin = c.get_program().to_owned();
    let mut s = Command::new(strace);
    s.args(["-f", "-qq", "-o"])
        .arg(&log)
        .arg(&bin)
        .args(c.get_args());
    s.env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            s.env(k, v);
        }
    }
    let out = s.output_within();
    ok(&out);
    Some(std::fs::read_to_string(&log).unwrap())
}

fn count(text: &str) -> Cost {
    let main = text.split_whitespace().next().unwrap().to_owned();
    let mut ours = vec![main];
    let mut cost = Cost {
        threads: 0,
        fsyncs: 0,
        programs: 0,
    };
    for line in text.lines() {
        let (pid, call) = line.split_once(' ').unwrap();
        let call = call.trim_start();
        if !ours.iter().any(|p| p == pid) || call.starts_with("<...") || call.starts_with("+++") {
            continue;
        }
        if call.starts_with("clone") || call.starts_with("vfork") {
            let child = call.rsplit("= ").next().unwrap_or("").trim().to_owned();
            if call.contains("CLONE_THREAD") {
                cost.threads += 1;
                ours.push(child);
            } else {
                cost.programs += 1;
            }
        }
        if call.starts_with("fsync(") || call.starts_with("fdatasync(") {
            cost.fsyncs += 1;
        }
    }
    cost
}

/// A node with `/run` on a tmpfs, its first Prolog done (which promotes the
/// mapping to last-known-good: a once-per-mapping durable write).
fn node(mapping: &str, fabric: bool) -> Option<(Node, Mount)> {
    let n = Node::with_mapping(mapping);
    let run = Mount::tmpfs(&n.path("/run"), "mode=0755")?;
    let mut env = Vec::new();
    if fabric {
        n.add_hca("qos-identity");
        env.push(("QOSLANE_SMPQUERY", n.fake_smpquery().display().to_string()));
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut first = env.clone();
    first.extend([("SLURM_JOB_ID", "1"), ("FAKE_QOS", "low")]);
    ok(&n.run(&["prolog"], &first));
    assert_eq!(n.last_audit("prolog")["outcome"], "applied");
    let mut end = env.clone();
    end.push(("SLURM_JOB_ID", "1"));
    ok(&n.run(&["epilog"], &end));
    Some((n, run))
}

#[test]
fn a_prolog_and_an_epilog_start_one_thread_and_flush_once() {
    let Some((n, _run)) = node(util::MAPPING, false) else {
        return;
    };
    let prolog = cost(
        &n,
        &["prolog"],
        &[("SLURM_JOB_ID", "2"), ("FAKE_QOS", "high")],
    );
    let Some(prolog) = prolog else { return };
    // One program: squeue for the QoS (no SLURM_JOB_QOS before 26.05). One
    // thread: the run's watchdog (kernel I/O is inline). One flush: the
    // audit line; everything in /run is as volatile as the settings.
    assert_eq!(
        prolog,
        Cost {
            threads: 1,
            fsyncs: 1,
            programs: 1
        },
        "prolog"
    );
    assert_eq!(n.settings(), ("74".into(), "8388608".into()));
    let epilog = cost(&n, &["epilog"], &[("SLURM_JOB_ID", "2")]).unwrap();
    assert_eq!(
        epilog,
        Cost {
            threads: 1,
            fsyncs: 1,
            programs: 0
        },
        "epilog"
    );
    assert_eq!(
        n.settings(),
        (util::BASE_TOS.into(), util::BASE_RMEM.into())
    );
}

#[test]
fn probing_the_port_runs_its_three_queries_without_a_thread() {
    let mapping = util::MAPPING.replace("fabric_check: off", "fabric_check: enforce");
    let Some((n, _run)) = node(&mapping, true) else {
        return;
    };
    let smp = n.fake_smpquery().display().to_string();
    // No fabric cache: the Prolog probes (three SMP queries, at once).
    std::fs::remove_file(n.path("/run/qoslane/fabric.json")).unwrap();
    let Some(c) = cost(
        &n,
        &["prolog"],
        &[
            ("SLURM_JOB_ID", "3"),
            ("SLURM_SCRIPT_CONTEXT", "prolog_slurmd"),
            ("SLURM_JOB_QOS", "high"),
            ("QOSLANE_SMPQUERY", &smp),
        ],
    ) else {
        return;
    };
    assert_eq!(
        c,
        Cost {
            threads: 1,
            fsyncs: 1,
            programs: 3
        },
        "a probing prolog"
    );
    let a = n.last_audit("prolog");
    assert_eq!(a["outcome"], "applied", "{a}");
}

/// `sync` and `health` read the first hop too: its queries run as programs
/// on the run's own thread, in rounds (no reader threads; before, a pool
/// of three threads read the switch: 4 threads).
#[test]
fn sync_and_health_read_the_first_hop_without_a_reader_thread() {
    let mapping = util::MAPPING.replace("fabric_check: off", "fabric_check: enforce");
    let Some((n, _run)) = node(&mapping, true) else {
        return;
    };
    let smp = n.fake_smpquery().display().to_string();
    for command in ["sync", "health"] {
        let Some(c) = cost(&n, &[command], &[("QOSLANE_SMPQUERY", &smp)]) else {
            return;
        };
        // One thread: the run's watchdog. Three queries of the own port,
        // three of the first hop (the fake's neighbour is no switch: nothing
        // more to read).
        assert_eq!((c.threads, c.programs), (1, 6), "{command}: {c:?}");
    }
}

/// Thirty other jobs active on the node: a Prolog and an Epilog read none of
/// their records (the node state's claims hold what the planner and the
/// metrics need) and open the job directory once (the session resolves
/// each trusted directory once, the store's check of it included). Before, a run read every active record
/// twice, each through a walk from the root prefix.
#[test]
fn a_run_beside_many_jobs_reads_no_other_record_and_walks_to_the_jobs_once() {
    let Some((n, _run)) = node(util::MAPPING, false) else {
        return;
    };
    let others = 100..130;
    for j in others.clone() {
        let job = j.to_string();
        ok(&n.run(&["prolog"], &[("SLURM_JOB_ID", &job), ("FAKE_QOS", "low")]));
    }
    let runs: [(&str, &[(&str, &str)]); 2] = [
        ("prolog", &[("SLURM_JOB_ID", "2"), ("FAKE_QOS", "high")]),
        ("epilog", &[("SLURM_JOB_ID", "2")]),
    ];
    for (hook, env) in runs {
        let Some(text) = trace(&n, &[hook], env) else {
            return;
        };
        let opens: Vec<&str> = text.lines().filter(|l| l.contains("openat(")).collect();
        let read_others = opens
            .iter()
            .filter(|l| others.clone().any(|j| l.contains(&format!("\"{j}.json\""))))
            .count();
        assert_eq!(read_others, 0, "{hook} read other jobs' records");
        let walks: Vec<&&str> = opens
            .iter()
            .filter(|l| l.contains("\"jobs\"") && l.contains("O_PATH"))
            .collect();
        // One: the store's own check of the directory as it opens (owned by
        // root, not a symlink: nodeio::trusted::state_dir), which the run
        // remembers with the directories it judged (its walks reuse it).
        assert_eq!(
            walks.len(),
            1,
            "{hook} walked to the job directory: {walks:#?}"
        );
        assert_eq!(n.last_audit(hook)["job_id"], 2);
    }
    assert_eq!(n.records().len(), 30);
}

/// The lines of the traced process's own thread (the first pid strace
/// names), the watchdog's left out.
fn main_thread(text: &str) -> Vec<&str> {
    let main = text.split_whitespace().next().unwrap().to_owned();
    text.lines()
        .filter_map(|l| l.split_once(' ').filter(|(pid, _)| *pid == main))
        .map(|(_, call)| call.trim_start())
        .collect()
}

/// The descriptor a call names first (`fstat(5, …)`: 5), or that it
/// returned (`openat(…) = 5`).
fn first_fd(call: &str) -> Option<&str> {
    call.split_once('(')?.1.split([',', ')']).next()
}

fn returned_fd(call: &str) -> Option<&str> {
    let r = call.rsplit("= ").next()?.trim();
    r.parse::<u32>().is_ok().then_some(r)
}

/// The calls `what` (`fstat` of a directory, `fstatfs`) made again on a
/// descriptor that had been asked already since it was opened.
fn asked_again<'a>(calls: &[&'a str], what: impl Fn(&str) -> bool) -> Vec<&'a str> {
    let mut asked: Vec<&str> = Vec::new();
    let mut again = Vec::new();
    for call in calls {
        if call.starts_with("close(") {
            let fd = first_fd(call).unwrap_or("");
            asked.retain(|a| *a != fd);
        } else if what(call) {
            let fd = first_fd(call).unwrap_or("");
            if asked.contains(&fd) {
                again.push(*call);
            }
            asked.push(fd);
        } else if let Some(fd) = returned_fd(call) {
            asked.retain(|a| *a != fd);
        }
    }
    again
}

/// What a hook asks the kernel, each fact once (issue 38, session 16): a
/// directory's owner and mode by the one `fstat` of the walk that reached
/// it (not again as a read file's holder or as a state directory), its
/// filesystem by one `fstatfs` per directory, the audit log opened once
/// (made only when absent), the job directory listed once under the node
/// lock (the look for leftovers hands the transaction the records' ids), the
/// node state and the counters not read back after the run wrote them (a
/// `statat` each). Before: 5 and 7 directories `fstat`ed twice, 2 and 2
/// `fstatfs` asked again, the audit log opened twice, 12 and 12
/// `getdents64`, `node.json` and `counters.json` opened twice.
#[test]
fn a_hook_asks_the_kernel_each_fact_once() {
    let Some((n, _run)) = node(util::MAPPING, false) else {
        return;
    };
    for j in ["100", "101", "102"] {
        ok(&n.run(&["prolog"], &[("SLURM_JOB_ID", j), ("FAKE_QOS", "low")]));
    }
    let runs: [Hook<'_>; 2] = [
        (
            "prolog",
            &[("SLURM_JOB_ID", "2"), ("FAKE_QOS", "high")],
            PROLOG_GETDENTS,
        ),
        ("epilog", &[("SLURM_JOB_ID", "2")], EPILOG_GETDENTS),
    ];
    for (hook, env, getdents) in runs {
        let Some(text) = trace(&n, &[hook], env) else {
            return;
        };
        assert_eq!(n.last_audit(hook)["job_id"], 2);
        let calls = main_thread(&text);
        let dirs = asked_again(&calls, |c| c.starts_with("fstat(") && c.contains("S_IFDIR"));
        assert!(
            dirs.is_empty(),
            "{hook}: directories fstat'ed again: {dirs:#?}"
        );
        let fs = asked_again(&calls, |c| c.starts_with("fstatfs("));
        assert!(fs.is_empty(), "{hook}: fstatfs asked again: {fs:#?}");
        let opened = |name: &str, flag: &str| {
            calls
                .iter()
                .filter(|c| c.starts_with("openat(") && c.contains(&format!("\"{name}\"")))
                .filter(|c| c.contains(flag))
                .count()
        };
        assert_eq!(opened("audit.jsonl", ""), 1, "{hook}: the audit log opened");
        assert_eq!(opened("node.json", "O_RDONLY"), 1, "{hook}: node.json read");
        assert_eq!(
            opened("counters.json", "O_RDONLY"),
            1,
            "{hook}: counters.json read"
        );
        let listed = calls
            .iter()
            .filter(|c| c.starts_with("getdents64("))
            .count();
        assert_eq!(listed, getdents, "{hook}: getdents64 calls");
    }
}

/// A hook to trace: its name, its environment, the `getdents64` it makes.
type Hook<'a> = (&'a str, &'a [(&'a str, &'a str)], usize);

/// A Prolog's and an Epilog's `getdents64` on the cost node (two each per
/// directory listed): the state directories' looks for leftovers (`run`,
/// the job directory — whose listing the transaction's claims use —,
/// `lib`), the textfile directory's, and the gauges' listing of the job
/// records after the node lock. Before: one listing more under the lock.
const PROLOG_GETDENTS: usize = 10;
const EPILOG_GETDENTS: usize = 10;

/// `bench/tools/umad-answer.c` built as `libibumad.so.3` in a directory of
/// its own (for `LD_LIBRARY_PATH`): every Get answered at once. `None`
/// where this machine has no C compiler.
fn answering_libibumad() -> Option<tempfile::TempDir> {
    let gcc = util::tool(&["gcc", "cc"])?;
    let lib = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/tools/umad-answer.c");
    let built = Command::new(gcc)
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(lib.path().join("libibumad.so.3"))
        .arg(&source)
        .output_within();
    ok(&built);
    Some(lib)
}

/// `health` opens each of the node's ports once: its first hop and its
/// counters read through the one opening (before, each opened the port:
/// libibumad loaded twice, the agents registered twice). The port opens
/// through `bench/tools/umad-answer.c` built as libibumad (every Get
/// answered at once, in process: no HCA here), found by the dynamic
/// loader first; each load of the library is one `openat` of its file.
#[test]
fn health_opens_each_port_once_for_its_first_hop_and_its_counters() {
    let mapping = util::MAPPING.replace("fabric_check: off", "fabric_check: enforce");
    let Some((n, _run)) = node(&mapping, true) else {
        return;
    };
    let Some(lib) = answering_libibumad() else {
        return;
    };
    let smp = n.fake_smpquery().display().to_string();
    let dir = lib.path().display().to_string();
    let Some(text) = trace(
        &n,
        &["health"],
        &[("QOSLANE_SMPQUERY", &smp), ("LD_LIBRARY_PATH", &dir)],
    ) else {
        return;
    };
    let loads = text
        .lines()
        .filter(|l| l.contains("openat(") && l.contains("libibumad.so.3\""))
        .count();
    assert_eq!(loads, 1, "libibumad loaded {loads} times:\n{text}");
    // The counters were read through that opening: the port's wait counted.
    let prom = n.textfile();
    assert!(
        prom.lines().any(|l| l
            .starts_with("qoslane_xmit_wait_ticks_total{device=\"mlx5_0\",port=\"1\",vl=\"0\"")),
        "{prom}"
    );
}

/// A Prolog and an Epilog open each file that decides what they do once:
/// the mapping, its last-known-good copy and the grants were read two or
/// three times per hook (the mapping's gate, the promotion under the lock,
/// the metrics' gauges); a later read of the same, unchanged file is a
/// `statx` of its name (nodeio::trusted). The node state and the grants
/// the run replaced (its transaction, the grant it recorded) are not read
/// back either: the run remembers what it wrote (`atomic::write_read_again`;
/// before, each was opened and read again, twice per hook).
#[test]
fn a_hook_opens_the_mapping_and_the_copy_in_force_once() {
    let Some((n, _run)) = node(util::MAPPING, true) else {
        return;
    };
    let smp = n.fake_smpquery().display().to_string();
    let runs: [(&str, &[(&str, &str)]); 2] = [
        (
            "prolog",
            &[
                ("QOSLANE_SMPQUERY", &smp),
                ("SLURM_JOB_ID", "2"),
                ("FAKE_QOS", "high"),
            ],
        ),
        (
            "epilog",
            &[("QOSLANE_SMPQUERY", &smp), ("SLURM_JOB_ID", "2")],
        ),
    ];
    for (hook, env) in runs {
        let Some(text) = trace(&n, &[hook], env) else {
            return;
        };
        assert_eq!(n.last_audit(hook)["job_id"], 2);
        let opens = |name: &str| {
            text.lines()
                .filter(|l| {
                    l.contains("openat(")
                        && l.contains(&format!("\"{name}\""))
                        && l.contains("O_RDONLY")
                        && !l.contains("ENOENT")
                })
                .count()
        };
        for (file, most) in [
            ("qos-network.yml", 1),
            ("last-known-good.yml", 1),
            ("node.json", 1),
            ("grants.json", 1),
        ] {
            assert!(
                opens(file) <= most,
                "{hook} opened {file} {} times",
                opens(file)
            );
        }
    }
}

/// A job's hooks on a node without `ib_umad` (no
/// `sys/class/infiniband_mad/abi_version` under the root prefix, as the
/// kernel shows none without the module) do not load libibumad to find out
/// that no port opens (the loader's work, and libibumad's `ibwarn` on
/// stderr, at every hook); where the ABI file is, the Prolog loads it (here
/// `bench/tools/umad-answer.c` built as libibumad) and reads the port's
/// counters through it.
#[test]
fn a_job_s_counters_load_libibumad_only_where_ib_umad_is() {
    let Some((n, _run)) = node(util::MAPPING, true) else {
        return;
    };
    let Some(lib) = answering_libibumad() else {
        return;
    };
    let smp = n.fake_smpquery().display().to_string();
    let dir = lib.path().display().to_string();
    let loads = |hook: &str, job: &str| {
        let env = [
            ("QOSLANE_SMPQUERY", smp.as_str()),
            ("LD_LIBRARY_PATH", dir.as_str()),
            ("SLURM_JOB_ID", job),
            ("FAKE_QOS", "high"),
        ];
        let text = trace(&n, &[hook], &env)?;
        assert_eq!(n.last_audit(hook)["job_id"], job.parse::<u64>().unwrap());
        let loads = text
            .lines()
            .filter(|l| l.contains("openat(") && l.contains("libibumad.so.3\""))
            .count();
        assert!(
            !text.contains("ibwarn"),
            "{hook}: libibumad's warning:\n{text}"
        );
        Some(loads)
    };
    for hook in ["prolog", "epilog"] {
        let Some(n) = loads(hook, "2") else { return };
        assert_eq!(n, 0, "{hook} loaded libibumad on a node without ib_umad");
    }
    let abi = n.path("/sys/class/infiniband_mad/abi_version");
    std::fs::create_dir_all(abi.parent().unwrap()).unwrap();
    std::fs::write(&abi, "5\n").unwrap();
    assert_eq!(
        loads("prolog", "3"),
        Some(1),
        "where ib_umad is, it is used"
    );
    let counters = n.path("/run/qoslane/counters/3.json");
    assert!(
        counters.exists(),
        "the Prolog read the port's counters in process"
    );
}

/// Per process of a traced run (`strace -f`), in the order they appear: the
/// programs it exec'd, the processes it forked, the threads it started.
#[derive(Debug, Default, PartialEq, Eq)]
struct Process {
    execs: usize,
    forks: usize,
    threads: usize,
}

fn processes(text: &str) -> Vec<(String, Process)> {
    let lines: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(tid, call)| (tid, call.trim_start()))
        .collect();
    let result = |call: &str| call.rsplit("= ").next().unwrap_or("").trim().to_owned();
    // First every thread: its id and its creator's (a thread's clone may be
    // split, `clone3(… CLONE_THREAD … <unfinished ...>` then `<... clone3
    // resumed> …) = TID`, and the new thread may log before the resumption).
    let mut threads: Vec<(String, String)> = Vec::new();
    let mut pending: Vec<&str> = Vec::new();
    for &(tid, call) in &lines {
        if call.starts_with("<... clone") {
            if let Some(i) = pending.iter().position(|p| *p == tid) {
                pending.remove(i);
                threads.push((result(call), tid.to_owned()));
            }
        } else if call.contains("CLONE_THREAD") {
            if call.ends_with("<unfinished ...>") {
                pending.push(tid);
            } else {
                threads.push((result(call), tid.to_owned()));
            }
        }
    }
    let process_of = |tid: &str| -> String {
        let mut id = tid.to_owned();
        while let Some((_, creator)) = threads.iter().find(|(t, _)| *t == id) {
            id.clone_from(creator);
        }
        id
    };
    let mut all: Vec<(String, Process)> = Vec::new();
    for &(tid, call) in &lines {
        let pid = process_of(tid);
        if !all.iter().any(|(p, _)| *p == pid) {
            all.push((pid.clone(), Process::default()));
        }
        let Some((_, p)) = all.iter_mut().find(|(p, _)| *p == pid) else {
            continue;
        };
        if call.starts_with("execve(") && call.ends_with("= 0") {
            p.execs += 1;
        }
        if call.starts_with("clone") || call.starts_with("vfork") {
            if call.contains("CLONE_THREAD") {
                p.threads += 1;
            } else {
                p.forks += 1;
            }
        }
    }
    all
}

/// The calls of one process of a traced run (its first thread's lines, the
/// resumed halves left out): the call's name and its line.
fn calls_of<'t>(text: &'t str, pid: &str) -> Vec<(&'t str, &'t str)> {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(tid, _)| *tid == pid)
        .map(|(_, call)| call.trim_start())
        .filter(|call| !call.starts_with("<...") && !call.starts_with("+++"))
        .map(|call| (call.split('(').next().unwrap_or(call), call))
        .collect()
}

/// The entry's stop signals (SIGTERM, SIGINT, SIGHUP: slurmd's at
/// PrologEpilogTimeout) are blocked into one `signalfd` polled with the
/// hook's pipes: no handler installed for any of them, no self-pipe (a
/// socketpair, a `dup`, two `fcntl`s and a test `sendto` per signal, ~20
/// calls per run, until session 16). That SIGTERM still stops the hook's
/// group at once is hookrun's `deadlines` tests'.
fn entry_takes_its_stop_signals_from_one_fd(text: &str, entry: &str) {
    let calls = calls_of(text, entry);
    let named = |name: &str| calls.iter().filter(|(n, _)| *n == name).count();
    assert_eq!(named("signalfd4"), 1, "one signalfd\n{text}");
    assert_eq!(named("socketpair"), 0, "no self-pipe\n{text}");
    assert!(
        !calls
            .iter()
            .any(|(n, c)| *n == "sendto" && c.contains(", \"\", 0, ")),
        "no test send\n{text}"
    );
    for signal in ["SIGTERM", "SIGINT", "SIGHUP"] {
        assert!(
            !calls
                .iter()
                .any(|(n, c)| *n == "rt_sigaction"
                    && c.starts_with(&format!("rt_sigaction({signal},"))),
            "no handler for {signal}\n{text}"
        );
    }
}

/// The hooks as they ship: slurm.conf names the packaged entry
/// (`/usr/lib/qoslane/hookrun`, a link to the binary named `hookrun`), which
/// is hookrun; qoslane's hook link in the phase directory is the binary
/// itself, so it runs built in, in a fork of hookrun: **one program started
/// per hook** (the entry, by slurmd), none by hookrun, and the hook's
/// process is the fork, exec'ing nothing (QoS from `SLURM_JOB_QOS`: no
/// squeue) and starting the run's one watchdog thread. Its audit line says
/// what it did, as when exec'd.
#[test]
fn the_shipped_entry_runs_qoslane_s_hook_in_one_process_start() {
    let Some((n, _run)) = node(util::MAPPING, false) else {
        return;
    };
    let entry = n.path("/usr/lib/qoslane/hookrun");
    std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(util::BIN, &entry).unwrap();
    for hook in [
        "etc/slurm/prolog.d/10-qoslane",
        "etc/slurm/epilog.d/50-qoslane",
    ] {
        let hook = n.path(hook);
        std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(util::BIN, &hook).unwrap();
    }
    let slurmd = |env: &[(&str, &str)]| {
        let base = n.cmd(&[], env);
        let mut c = Command::new(&entry);
        // hookrun's own root prefix (its hook directories, its metrics);
        // qoslane's is QOSLANE_ROOT, which the hook inherits.
        c.arg("--root").arg(n.root());
        for (k, v) in base.get_envs() {
            if let Some(v) = v {
                c.env(k, v);
            }
        }
        c
    };
    let prolog = slurmd(&[
        ("SLURM_JOB_ID", "2"),
        ("SLURM_JOB_QOS", "high"),
        ("SLURM_SCRIPT_CONTEXT", "prolog_slurmd"),
    ]);
    let Some(text) = trace_command(&n, &prolog) else {
        return;
    };
    let procs = processes(&text);
    let hookrun = Process {
        execs: 1,
        forks: 1,
        threads: 0,
    };
    let hook = Process {
        execs: 0,
        forks: 0,
        threads: 1,
    };
    assert_eq!(
        procs.iter().map(|(_, p)| p).collect::<Vec<_>>(),
        [&hookrun, &hook],
        "the entry (one exec: slurmd's) and its built-in hook\n{text}"
    );
    entry_takes_its_stop_signals_from_one_fd(&text, &procs[0].0);
    let line = n.last_audit("prolog");
    assert_eq!(line["outcome"], "applied");
    assert_eq!(line["job_id"], 2);
    assert_eq!(line["qos_source"], "env");
    assert_eq!(n.settings(), ("74".into(), "8388608".into()));

    let epilog = slurmd(&[
        ("SLURM_JOB_ID", "2"),
        ("SLURM_SCRIPT_CONTEXT", "epilog_slurmd"),
    ]);
    let text = trace_command(&n, &epilog).unwrap();
    let procs = processes(&text);
    assert_eq!(
        procs.iter().map(|(_, p)| p).collect::<Vec<_>>(),
        [&hookrun, &hook],
        "{text}"
    );
    entry_takes_its_stop_signals_from_one_fd(&text, &procs[0].0);
    assert_eq!(n.last_audit("epilog")["outcome"], "reverted");
    assert_eq!(
        n.settings(),
        (util::BASE_TOS.into(), util::BASE_RMEM.into())
    );
}

/// A run that finds an interrupted transaction rolls it back under the node
/// lock and writes its `recover` line there (the journal is gone after the
/// rollback: that line is its only record), but counts it after giving the
/// lock back, as it counts itself: the counters' and the textfile's locks
/// are waited for, and nothing that waits runs under the node lock. Before:
/// the recovered run was counted at once, `counters.lock` and `publish.lock`
/// taken with the node lock held.
#[cfg(feature = "fault-injection")]
#[test]
fn a_recovered_transaction_is_counted_after_the_node_lock() {
    let n = Node::new();
    let out = n
        .cmd(
            &["prolog"],
            &[
                ("SLURM_JOB_ID", "7"),
                ("FAKE_QOS", "high"),
                ("QOSLANE_FAULT", "journaled"),
            ],
        )
        .output_within();
    assert!(out.status.code().is_none(), "killed at the fault point");
    assert!(n.journal_exists());
    let Some(text) = trace(
        &n,
        &["prolog"],
        &[("SLURM_JOB_ID", "8"), ("FAKE_QOS", "high")],
    ) else {
        return;
    };
    assert!(!n.journal_exists(), "the Prolog recovered the journal");
    assert_eq!(n.last_audit("recover")["outcome"], "reverted");
    let calls = main_thread(&text);
    let lock_fd = calls
        .iter()
        .find(|c| c.starts_with("openat(") && c.contains("\"lock\""))
        .and_then(|c| returned_fd(c))
        .expect("the node lock opened");
    let held = calls
        .iter()
        .position(|c| c.contains("\"lock\"") && returned_fd(c) == Some(lock_fd))
        .unwrap();
    let given_back = calls[held..]
        .iter()
        .position(|c| c.starts_with(&format!("close({lock_fd})")))
        .map(|i| held + i)
        .expect("the node lock closed");
    let under_lock: Vec<&&str> = calls[held..given_back]
        .iter()
        .filter(|c| c.contains("counters.lock") || c.contains("publish.lock"))
        .collect();
    assert!(
        under_lock.is_empty(),
        "metrics' locks taken under the node lock: {under_lock:#?}"
    );
    let counted = calls[given_back..]
        .iter()
        .filter(|c| c.starts_with("openat(") && c.contains("counters.lock"))
        .count();
    assert_eq!(counted, 2, "the Prolog and the recovery each counted");
}
