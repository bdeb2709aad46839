//! Where things live. Every system path is resolved under a root prefix
//! (`--root`/`QOSLANE_ROOT`, default `/`) so tests run in temp trees; this is
//! the only module that knows the default locations.

use std::path::{Path, PathBuf};

/// Default locations, relative to the root.
pub mod defaults {
    pub const CONFIG: &str = "etc/qoslane/qos-network.yml";
    pub const RUN_DIR: &str = "run/qoslane";
    pub const LIB_DIR: &str = "var/lib/qoslane";
    pub const AUDIT_LOG: &str = "var/log/qoslane/audit.jsonl";
    pub const TEXTFILE_DIR: &str = "var/lib/prometheus/node-exporter";
    pub const SYSFS_IB: &str = "sys/class/infiniband";
    /// The OpenSM event plugin's spool (`smplugin/`: `qoslane_spool`'s default).
    pub const SM_SPOOL: &str = "run/qoslane-sm";
    /// Programs are absolute and never rerooted: Slurm hooks have no PATH.
    pub const SMPQUERY: &str = "/usr/sbin/smpquery";
    pub const IBNETDISCOVER: &str = "/usr/sbin/ibnetdiscover";
    pub const IBROUTE: &str = "/usr/sbin/ibroute";
    pub const SQUEUE: &str = "/usr/bin/squeue";
    /// How old the fabric audit's verdict may be and still stand: four
    /// runs of the Omnia role's 15-minute audit timer (three missed runs
    /// and then some).
    pub const FABRIC_VERDICT_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(3600);
    pub const SACCTMGR: &str = "/usr/bin/sacctmgr";
}

/// The node lock's name in the run directory.
pub const LOCK_FILE: &str = "lock";

/// Resolved locations for one run.
#[derive(Clone, Debug)]
pub struct Paths {
    pub root: PathBuf,
    /// The mapping file (not rerooted when given explicitly).
    pub config: PathBuf,
    /// tmpfs state: journal, lock, per-job records, fabric cache.
    pub run_dir: PathBuf,
    /// Persistent state: last-known-good mapping, metric counters.
    pub lib_dir: PathBuf,
    pub audit_log: PathBuf,
    pub textfile_dir: PathBuf,
    pub smpquery: PathBuf,
    /// `ibnetdiscover`: the topology, for `fabric audit`.
    pub ibnetdiscover: PathBuf,
    /// `ibroute`: the switches' forwarding tables, for `fabric audit`'s
    /// deadlock check by the smpquery reader.
    pub ibroute: PathBuf,
    /// `squeue`: where the QoS comes from when slurmd does not pass it.
    pub squeue: PathBuf,
    /// `perfquery`: the node's ports' counters where a port does not open
    /// in process (`QOSLANE_PERFQUERY`, the fallback); none configured,
    /// such a port is not read.
    pub perfquery: Option<PathBuf>,
    /// Whether the hooks and `health` read the node's ports' counters (a
    /// job's evidence, the live wait and off-level bytes): on unless the
    /// site turns it off (`QOSLANE_COUNTERS=off`).
    pub counters_on: bool,
    /// `scontrol`: placement on (`QOSLANE_SCONTROL`): `health` keeps the
    /// node's qoslane features active in slurmctld as its grants say; none
    /// configured, placement off (slurm.conf must list the features first:
    /// `qoslane slurm-config`).
    pub scontrol: Option<PathBuf>,
    /// The fabric audit's verdict (`QOSLANE_FABRIC_VERDICT`: a file on a
    /// filesystem the nodes share, `qoslane fabric audit --verdict` writes
    /// it): `sync` and `health` read it for the `fabric path` scope of the
    /// grants. None configured, none read.
    pub fabric_verdict: Option<PathBuf>,
    /// How old that verdict may be and still stand
    /// (`QOSLANE_FABRIC_VERDICT_MAX_AGE`, seconds).
    pub fabric_verdict_max_age: std::time::Duration,
    /// `sacctmgr`: Slurm's QoS names, for `slurm-config --check-qos`
    /// (`QOSLANE_SACCTMGR`).
    pub sacctmgr: PathBuf,
}

/// Explicit overrides, from flags or the environment.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub root: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub audit_log: Option<PathBuf>,
    pub textfile_dir: Option<PathBuf>,
    pub smpquery: Option<PathBuf>,
    pub ibnetdiscover: Option<PathBuf>,
    pub ibroute: Option<PathBuf>,
    pub squeue: Option<PathBuf>,
    pub perfquery: Option<PathBuf>,
    pub scontrol: Option<PathBuf>,
    pub fabric_verdict: Option<PathBuf>,
    pub fabric_verdict_max_age: Option<std::time::Duration>,
    pub sacctmgr: Option<PathBuf>,
    /// `QOSLANE_COUNTERS=off`: the counters are not read.
    pub counters_off: bool,
}

impl Paths {
    pub fn new(o: Overrides) -> Self {
        let root = o.root.unwrap_or_else(|| PathBuf::from("/"));
        let at = |rel: &str| root.join(rel);
        Self {
            config: o.config.unwrap_or_else(|| at(defaults::CONFIG)),
            run_dir: at(defaults::RUN_DIR),
            lib_dir: at(defaults::LIB_DIR),
            audit_log: o.audit_log.unwrap_or_else(|| at(defaults::AUDIT_LOG)),
            textfile_dir: o.textfile_dir.unwrap_or_else(|| at(defaults::TEXTFILE_DIR)),
            smpquery: o.smpquery.unwrap_or_else(|| defaults::SMPQUERY.into()),
            ibnetdiscover: o
                .ibnetdiscover
                .unwrap_or_else(|| defaults::IBNETDISCOVER.into()),
            ibroute: o.ibroute.unwrap_or_else(|| defaults::IBROUTE.into()),
            squeue: o.squeue.unwrap_or_else(|| defaults::SQUEUE.into()),
            perfquery: o.perfquery,
            counters_on: !o.counters_off,
            scontrol: o.scontrol,
            fabric_verdict: o.fabric_verdict,
            fabric_verdict_max_age: o
                .fabric_verdict_max_age
                .unwrap_or(defaults::FABRIC_VERDICT_MAX_AGE),
            sacctmgr: o.sacctmgr.unwrap_or_else(|| defaults::SACCTMGR.into()),
            root,
        }
    }

    /// A node setting's file under the root (`absolute`: as the mapping
    /// names it, `/proc/sys/…`).
    pub fn setting(&self, absolute: &str) -> PathBuf {
        self.root.join(absolute.trim_start_matches('/'))
    }

    /// `/sys/class/infiniband` under the root.
    pub fn sysfs_ib(&self) -> PathBuf {
        self.root.join(defaults::SYSFS_IB)
    }

    /// The OpenSM event plugin's spool directory under the root
    /// (`fabric watch`'s default `--spool`).
    pub fn sm_spool(&self) -> PathBuf {
        self.root.join(defaults::SM_SPOOL)
    }

    pub fn lock_file(&self) -> PathBuf {
        self.run_dir.join(LOCK_FILE)
    }
    pub fn journal(&self) -> PathBuf {
        self.run_dir.join("journal.json")
    }
    pub fn node_state(&self) -> PathBuf {
        self.run_dir.join("node.json")
    }
    pub fn jobs_dir(&self) -> PathBuf {
        self.run_dir.join("jobs")
    }
    /// `job`: a job id (`job::JobId`; paths know no type of the job layer).
    pub fn job_record(&self, job: impl std::fmt::Display) -> PathBuf {
        self.jobs_dir().join(format!("{job}.json"))
    }
    /// Why a job runs on the baseline (its level refused under `continue`):
    /// one line the TaskProlog prints to the job.
    pub fn job_notice(&self, job: impl std::fmt::Display) -> PathBuf {
        self.notices_dir().join(job.to_string())
    }
    /// A job its Prolog refused (a `fail_job` level not granted, the node
    /// left as it was): the reason, one line. hookrun requeues a batch job;
    /// one it cannot requeue (srun, salloc) runs its tasks, and the
    /// TaskProlog fails each with this line. The Epilog removes it.
    pub fn job_refusal(&self, job: impl std::fmt::Display) -> PathBuf {
        self.notices_dir().join(format!("{job}.refused"))
    }
    /// Beside the records, never among them: a notice is not a grant.
    pub fn notices_dir(&self) -> PathBuf {
        self.run_dir.join("notices")
    }
    /// What a job did that its user should know once it ended (bytes sent
    /// on another SL than its level's): one file per job, the user's own
    /// (mode 0400), in a directory of root's; `run::notice` writes it and
    /// removes those past `notice::TOLD_MAX_AGE`; a reboot empties `/run`.
    pub fn told_dir(&self) -> PathBuf {
        self.run_dir.join("told")
    }
    pub fn job_told(&self, job: impl std::fmt::Display) -> PathBuf {
        self.told_dir().join(job.to_string())
    }
    /// The job's ports' counters as its Prolog read them (`fabric::pma`).
    pub fn counters_dir(&self) -> PathBuf {
        self.run_dir.join("counters")
    }
    pub fn job_counters(&self, job: impl std::fmt::Display) -> PathBuf {
        self.counters_dir().join(format!("{job}.json"))
    }
    /// Marks a job whose node another job shared while it ran.
    pub fn job_counters_shared(&self, job: impl std::fmt::Display) -> PathBuf {
        self.counters_dir().join(format!("{job}.shared"))
    }
    /// The ports and counters that did not answer (`perfquery`): not asked
    /// again until the node restarts.
    pub fn counters_unsupported(&self) -> PathBuf {
        self.run_dir.join("counters-unsupported.json")
    }
    /// The node features last sent to slurmctld (placement).
    pub fn placement(&self) -> PathBuf {
        self.run_dir.join("placement.json")
    }
    /// When `health` first saw the node lock held outside a transaction
    /// (`state::lock::seen_held`); health's own.
    pub fn lock_seen(&self) -> PathBuf {
        self.run_dir.join("lock-seen.json")
    }
    pub fn fabric_cache(&self) -> PathBuf {
        self.run_dir.join("fabric.json")
    }
    /// `health`'s last full reading of each port's first hop
    /// (`fabric/first_hop/share.rs`).
    pub fn first_hop_reading(&self) -> PathBuf {
        self.run_dir.join("first-hop.json")
    }
    /// The node's grant per level (`grant::Record`), written by `sync`,
    /// `health` and a Prolog whose decision differs from it.
    pub fn grants(&self) -> PathBuf {
        self.run_dir.join("grants.json")
    }
    /// A valid mapping that was not put in force (a level the fabric does
    /// not carry under `enforce`), and why.
    pub fn rejected_mapping(&self) -> PathBuf {
        self.lib_dir.join("rejected.json")
    }
    pub fn last_known_good(&self) -> PathBuf {
        self.lib_dir.join("last-known-good.yml")
    }
    pub fn counters(&self) -> PathBuf {
        self.lib_dir.join("counters.json")
    }
    pub fn textfile(&self) -> PathBuf {
        self.textfile_dir.join("qoslane.prom")
    }

    /// Shows a path as the admin would write it: without the root prefix.
    pub fn display<'a>(&self, p: &'a Path) -> std::borrow::Cow<'a, str> {
        match p.strip_prefix(&self.root) {
            Ok(rel) if self.root != Path::new("/") => format!("/{}", rel.display()).into(),
            _ => p.to_string_lossy(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_defaults_under_the_root_but_programs() {
        let p = Paths::new(Overrides {
            root: Some("/tmp/r".into()),
            ..Default::default()
        });
        assert_eq!(p.config, Path::new("/tmp/r/etc/qoslane/qos-network.yml"));
        assert_eq!(p.audit_log, Path::new("/tmp/r/var/log/qoslane/audit.jsonl"));
        assert_eq!(p.smpquery, Path::new("/usr/sbin/smpquery"));
        let s = crate::mapping::SettingPath::new("/proc/sys/net/x").unwrap();
        assert_eq!(
            p.setting(&s.to_string()),
            Path::new("/tmp/r/proc/sys/net/x")
        );
        assert_eq!(p.display(&p.setting(&s.to_string())), "/proc/sys/net/x");
    }
}
