//! The crash matrix: SIGKILL (fault injection) at each transaction point of
//! prologs, epilogs and syncs, in several shared-node states; the next run
//! (recover, health, an orphan Epilog, sync) must restore exactly the
//! pre-transaction state, and a kill after the commit keeps the whole
//! transaction. Compiled with `--features fault-injection` only.

use super::*;

/// The points of the transaction where fault injection SIGKILLs (fault.rs).
const POINTS: [&str; 9] = [
    "locked",
    "journaled",
    "applied:0",
    "applied:1",
    "applied:2",
    "verified",
    "recorded",
    "node_state",
    "committed",
];

/// One row of the matrix: a node state, the run that gets killed, and
/// what Slurm (or the admin) does afterwards to finish the story.
struct Scenario {
    name: &'static str,
    setup: Vec<Op>,
    /// Mapping variant written after the setup (a sync scenario's edit).
    edit: Option<u8>,
    faulted: Op,
    /// Setting changes the transaction makes (from the model).
    changes: usize,
    /// Whether the run has a transaction at all (a journal).
    txn: bool,
    /// After the recovery: the runs that end every job (the node must
    /// be back on its initial values).
    story: Vec<Op>,
}

#[expect(
    clippy::too_many_lines,
    reason = "the matrix's rows, one literal each: a table read top to bottom"
)]
fn scenarios() -> Vec<Scenario> {
    use Op::*;
    vec![
        Scenario {
            name: "prolog mission-critical, idle node",
            setup: vec![],
            edit: None,
            faulted: Prolog(10, "mission-critical"),
            changes: 3,
            txn: true,
            story: vec![Epilog(10)],
        },
        Scenario {
            name: "prolog high, low running",
            setup: vec![Prolog(1, "low")],
            edit: None,
            faulted: Prolog(10, "high"),
            changes: 2,
            txn: true,
            story: vec![Epilog(10), Epilog(1)],
        },
        Scenario {
            name: "prolog mission-critical, low+bulk running",
            setup: vec![Prolog(1, "low"), Prolog(2, "bulk")],
            edit: None,
            faulted: Prolog(10, "mission-critical"),
            changes: 3,
            txn: true,
            story: vec![Epilog(2), Epilog(10), Epilog(1)],
        },
        Scenario {
            name: "prolog low, mission-critical running",
            setup: vec![Prolog(1, "mission-critical")],
            edit: None,
            faulted: Prolog(10, "low"),
            changes: 0,
            txn: true,
            story: vec![Epilog(1), Epilog(10)],
        },
        Scenario {
            name: "prolog normal (no settings), idle node",
            setup: vec![],
            edit: None,
            faulted: Prolog(10, "normal"),
            changes: 0,
            txn: true,
            story: vec![Epilog(10)],
        },
        Scenario {
            name: "prolog rerun, same job (no-op)",
            setup: vec![Prolog(10, "high")],
            edit: None,
            faulted: Prolog(10, "high"),
            changes: 0,
            txn: false,
            story: vec![Epilog(10)],
        },
        Scenario {
            name: "epilog mission-critical, last job",
            setup: vec![Prolog(10, "mission-critical")],
            edit: None,
            faulted: Epilog(10),
            changes: 3,
            txn: true,
            story: vec![Epilog(10)],
        },
        Scenario {
            name: "epilog mission-critical, low running",
            setup: vec![Prolog(1, "low"), Prolog(10, "mission-critical")],
            edit: None,
            faulted: Epilog(10),
            changes: 3,
            txn: true,
            story: vec![Epilog(10), Epilog(1)],
        },
        Scenario {
            name: "epilog low, mission-critical running",
            setup: vec![Prolog(1, "mission-critical"), Prolog(10, "low")],
            edit: None,
            faulted: Epilog(10),
            changes: 0,
            txn: true,
            story: vec![Epilog(10), Epilog(1)],
        },
        Scenario {
            name: "epilog high, bulk+low running",
            setup: vec![Prolog(1, "bulk"), Prolog(2, "low"), Prolog(10, "high")],
            edit: None,
            faulted: Epilog(10),
            changes: 2,
            txn: true,
            story: vec![Epilog(10), Epilog(1), Epilog(2)],
        },
        Scenario {
            name: "epilog, job never started (orphan)",
            setup: vec![Prolog(1, "high")],
            edit: None,
            faulted: Epilog(10),
            changes: 0,
            txn: false,
            story: vec![Epilog(1)],
        },
        Scenario {
            name: "sync, edited mapping, high+low running",
            setup: vec![Prolog(1, "high"), Prolog(2, "low")],
            edit: Some(1),
            faulted: Sync,
            changes: 2,
            txn: true,
            story: vec![Sync, Epilog(1), Epilog(2)],
        },
        Scenario {
            name: "sync, edited mapping, mission-critical+bulk",
            setup: vec![Prolog(1, "bulk"), Prolog(2, "mission-critical")],
            edit: Some(1),
            faulted: Sync,
            changes: 1,
            txn: true,
            story: vec![Sync, Epilog(2), Epilog(1)],
        },
        Scenario {
            name: "sync, unchanged mapping (no-op)",
            setup: vec![Prolog(1, "high")],
            edit: None,
            faulted: Sync,
            changes: 0,
            txn: false,
            story: vec![Epilog(1)],
        },
    ]
}

impl Scenario {
    fn prepare(&self) -> Node {
        let n = reliability_node(0);
        for op in &self.setup {
            let out = op.run(&n, &[]);
            assert!(
                out.status.success(),
                "{}: setup {op:?}: {}",
                self.name,
                show(&out)
            );
        }
        if let Some(v) = self.edit {
            n.write_mapping(&mapping_yaml(&levels(v)));
        }
        n
    }

    /// Whether a kill at `point` can happen in this run.
    fn reaches(&self, point: &str) -> bool {
        match point {
            "locked" => true,
            p => match p.strip_prefix("applied:") {
                Some(i) => i.parse::<usize>().unwrap() < self.changes,
                None => self.txn,
            },
        }
    }
}

/// The runs that may be the first after a crash, in turn: each must undo
/// the journal before anything else.
fn next_runs(scenario: &Scenario) -> Vec<Op> {
    let mut v = vec![Op::Recover, Op::Health, Op::Epilog(999)];
    if scenario.faulted != Op::Sync && scenario.edit.is_none() {
        v.push(Op::Sync);
    }
    v
}

/// SIGKILL at every point × every scenario: the next run of anything restores
/// exactly the pre-transaction state (settings, records byte for byte as
/// JSON, baseline), audits one `recover` line when there was a journal, and
/// the rest of the story (Slurm's Epilog, a retried sync) ends on the
/// initial values. A kill after the commit keeps the whole transaction.
#[test]
fn crash_matrix() {
    let scenarios = scenarios();
    let t0 = Instant::now();
    let rows: Vec<(String, Vec<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = scenarios
            .iter()
            .map(|sc| s.spawn(move || crash_row(sc)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let cells: usize = rows.iter().map(|(_, c)| c.len()).sum();
    let kills = rows
        .iter()
        .flat_map(|(_, c)| c)
        .filter(|c| !c.starts_with('·'))
        .count();
    let mut table = String::from("\n| scenario (setting changes) |");
    for p in POINTS {
        table.push_str(&format!(" {p} |"));
    }
    table.push_str("\n|---|");
    table.push_str(&"---|".repeat(POINTS.len()));
    for (name, row) in &rows {
        table.push_str(&format!("\n| {name} |"));
        for c in row {
            table.push_str(&format!(" {c} |"));
        }
    }
    eprintln!(
        "{table}\n\ncrash matrix: {} scenarios x {} points = {cells} cells, {kills} kills, all \
         recovered as expected, in {:.1} s\nR = killed, pre-transaction state restored exactly \
         by the next run (named); C = killed after the commit, the completed transaction kept; \
         · = point not reached (nothing to do there), the run completed\n",
        rows.len(),
        POINTS.len(),
        t0.elapsed().as_secs_f64()
    );
}

/// A twin: an identical node the faulted run ran on without a fault, and
/// its state afterwards, the expected post-transaction state (the model's
/// change count checked on the way).
fn unfaulted_twin(sc: &Scenario) -> (Node, Snapshot) {
    let twin = sc.prepare();
    let out = sc.faulted.run(&twin, &[]);
    assert!(out.status.success(), "{}: twin: {}", sc.name, show(&out));
    let committed = twin.snapshot(&PATHS).timeless();
    let twin_changes = twin.last_audit(sc.faulted.event())["changes"]
        .as_array()
        .expect("the audit's changes")
        .len();
    assert_eq!(
        twin_changes, sc.changes,
        "{}: the model's change count",
        sc.name
    );
    (twin, committed)
}

fn crash_row(sc: &Scenario) -> (String, Vec<String>) {
    let (twin, committed) = unfaulted_twin(sc);
    let runners = next_runs(sc);
    let mut row = Vec::new();
    for (i, point) in POINTS.iter().enumerate() {
        let runner = &runners[i % runners.len()];
        let n = sc.prepare();
        let before = n.snapshot(&PATHS);
        let audit_before = n.audit().len();
        let out = sc.faulted.run(&n, &[("QOSLANE_FAULT", point)]);
        let ctx = format!(
            "{} / kill at {point} / next run {}",
            sc.name,
            runner.short()
        );
        if !sc.reaches(point) {
            assert!(
                out.status.success(),
                "{ctx}: should complete: {}",
                show(&out)
            );
            assert_eq!(n.snapshot(&PATHS).timeless(), committed, "{ctx}");
            row.push("·".to_owned());
            continue;
        }
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{ctx}: not killed: {}",
            show(&out)
        );
        // The killed run wrote no audit line of its own (a mapping_changed
        // line from before its transaction may be there).
        let own = |n: &Node| n.audit_events(sc.faulted.event()).len();
        assert_eq!(own(&n), own(&twin) - 1, "{ctx}: a killed run audited");
        let journaled = !matches!(*point, "locked" | "committed");
        assert_eq!(
            n.journal_exists(),
            journaled,
            "{ctx}: journal after the kill"
        );

        // What a writer killed inside an atomic write leaves, in every
        // state directory: the next run removes it (checked below).
        let leftovers = Leftovers::new();
        leftovers.plant(&n);
        let out = runner.run(&n, &[]);
        drop(leftovers);
        assert!(!killed(&out), "{ctx}: {}", show(&out));
        let after = n.snapshot(&PATHS);
        if *point == "committed" {
            assert_eq!(
                after.timeless(),
                committed,
                "{ctx}: completed transaction kept"
            );
        } else {
            assert_eq!(
                after, before,
                "{ctx}: pre-transaction state restored exactly"
            );
        }
        assert!(n.stray_files().is_empty(), "{ctx}: {:?}", n.stray_files());
        let recovers: Vec<_> = n.audit()[audit_before..]
            .iter()
            .filter(|e| e["event"] == "recover")
            .cloned()
            .collect();
        assert_eq!(
            recovers.len(),
            usize::from(journaled || *runner == Op::Recover),
            "{ctx}: one recover line per undone journal: {recovers:?}"
        );
        if journaled {
            assert_eq!(recovers[0]["outcome"], "reverted", "{ctx}");
            assert_eq!(
                recovers[0]["changes"].as_array().unwrap().len(),
                sc.changes,
                "{ctx}: the recover line lists the undone changes"
            );
        }
        if *runner == Op::Health {
            // Health rolls the interrupted transaction back (audited above)
            // and is healthy: only one that cannot be rolled back drains.
            assert_eq!(out.status.code(), Some(0), "{ctx}: {}", show(&out));
        } else {
            ok(&out);
        }

        // The rest of the story ends every job: the node is on its initial
        // values, nothing left behind.
        for op in &sc.story {
            let out = op.run(&n, &[]);
            assert!(out.status.success(), "{ctx}: story {op:?}: {}", show(&out));
        }
        let bad = inconsistencies(&n, &BTreeMap::new());
        assert!(bad.is_empty(), "{ctx}: after the story: {bad:?}");
        row.push(format!(
            "{} {}",
            if *point == "committed" { "C" } else { "R" },
            runner.short()
        ));
    }
    (format!("{} ({})", sc.name, sc.changes), row)
}

/// Temp files of atomic writes whose writers are gone, as killed runs leave
/// them, planted in every state directory (the journal's included): a pid
/// no process has, the pid of a zombie (killed, not yet reaped by its
/// parent: the first run after a kill comes exactly then), and a pid taken
/// since by a process that started after the file was made. The processes
/// end when it is dropped.
struct Leftovers {
    zombie: std::process::Child,
    reuser: std::process::Child,
}

impl Leftovers {
    fn new() -> Self {
        let sleep = || {
            std::process::Command::new("sleep")
                .arg("60")
                .stdin(std::process::Stdio::null())
                .spawn()
                .unwrap()
        };
        let mut zombie = sleep();
        zombie.kill().unwrap();
        // A zombie once the kill has landed.
        let stat = format!("/proc/{}/stat", zombie.id());
        let deadline = Instant::now() + Duration::from_secs(5);
        while !std::fs::read_to_string(&stat)
            .unwrap_or_default()
            .rsplit_once(')')
            .is_some_and(|(_, f)| f.trim_start().starts_with('Z'))
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        Self {
            zombie,
            reuser: sleep(),
        }
    }

    /// Plants the temp files into the node's state directories.
    fn plant(&self, n: &Node) {
        let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
        for (dir, name) in [
            ("/run/qoslane", "journal.json"),
            ("/run/qoslane", "node.json"),
            ("/run/qoslane/jobs", "10.json"),
            ("/var/lib/qoslane", "counters.json"),
        ] {
            for (pid, made) in [
                // Above the kernel's pid_max: never alive.
                (4_194_305, None),
                (self.zombie.id(), None),
                (self.reuser.id(), Some(an_hour_ago)),
            ] {
                let p = n.path(dir).join(format!(".{name}.tmp.{pid}.0"));
                std::fs::write(&p, "half").unwrap();
                if let Some(t) = made {
                    let f = std::fs::File::options().write(true).open(&p).unwrap();
                    f.set_modified(t).unwrap();
                }
            }
        }
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        let _ = self.reuser.kill();
        let _ = self.zombie.wait();
        let _ = self.reuser.wait();
    }
}

/// After a killed run, the first run — the one that rolls the interrupted
/// transaction back, a Prolog here, or `qoslane recover` — left the temp
/// files of dead writers whose pid was still taken (a zombie, a reused
/// pid): `kill(pid, 0)` called them alive, and only a later run removed
/// them. The node lock's taking removes them now, before the recovery.
#[test]
fn the_first_run_after_a_kill_removes_dead_writers_leftovers() {
    for next in [Op::Prolog(11, "low"), Op::Recover] {
        let n = reliability_node(0);
        ok(&Op::Prolog(1, "low").run(&n, &[]));
        let out = Op::Prolog(10, "high").run(&n, &[("QOSLANE_FAULT", "journaled")]);
        assert!(killed(&out), "{}", show(&out));
        assert!(n.journal_exists());
        let leftovers = Leftovers::new();
        leftovers.plant(&n);
        assert_eq!(n.stray_files().len(), 12, "{:?}", n.stray_files());
        let out = next.run(&n, &[]);
        ok(&out);
        assert!(!n.journal_exists(), "{next:?}: the journal is undone");
        assert!(
            n.stray_files().is_empty(),
            "{next:?} left {:?}",
            n.stray_files()
        );
        drop(leftovers);
    }
}
