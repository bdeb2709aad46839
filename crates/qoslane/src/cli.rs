//! The command line, defined once: parsing, `--help`, the man page and the
//! shell completions all come from these types.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Default, Parser)]
#[command(
    name = "qoslane",
    version = nodeio::build::VERSION,
    about = "Carry a Slurm job's QoS onto the InfiniBand fabric (SL/VL), verified, audited, rolled back",
    long_about = "qoslane maps a Slurm job's QoS to an InfiniBand Service Level from a YAML mapping, \
checks on the node's HCA ports that the SL lands on the intended Virtual Lane, applies the level's \
node settings transactionally and makes the job's libraries (UCX, NCCL, MPI) use that SL.\n\n\
With no subcommand it acts on hookrun's HOOKRUN_PHASE (prolog, epilog, task-prolog, health): the \
packaged hooks are links to this binary, and the phase hookrun runs wins (`hookrun health` from the \
Epilog runs the health check); without one, on SLURM_SCRIPT_CONTEXT: prolog_slurmd -> prolog, \
epilog_slurmd -> epilog, prolog_task -> task-prolog, so slurm.conf can point Prolog=, Epilog= and \
TaskProlog= at it. In the TaskProlog (prolog_task, the job user's environment) HOOKRUN_PHASE is ignored.\n\n\
Environment (ignored by task-prolog, whose environment is the user's): QOSLANE_ROOT, QOSLANE_CONFIG, \
QOSLANE_AUDIT_LOG, QOSLANE_TEXTFILE_DIR, QOSLANE_SMPQUERY, QOSLANE_IBNETDISCOVER, QOSLANE_SQUEUE, QOSLANE_PERFQUERY, QOSLANE_COUNTERS, QOSLANE_SCONTROL, QOSLANE_FABRIC_VERDICT, QOSLANE_FABRIC_VERDICT_MAX_AGE, \
QOSLANE_TIMEOUT_MS.",
    after_help = "Exit codes (one table with hookrun's): 0 ok, 1 failed, 2 invalid mapping, 64 usage, \
66 no input, 69 program unavailable, 70 internal, 74 I/O, 75 try again (lock or deadline), 100 the \
Prolog refused its job, 141 the reader of the output went away. `qoslane COMMAND -h` ends with the \
command's own. See qoslane(8), qoslane-mapping(5) and \
the admin guide in /usr/share/doc/qoslane/ (admin-guide.md, compressed in the .deb)."
)]
pub struct Cli {
    /// Resolve every system path under DIR (tests use a temp tree) [env: QOSLANE_ROOT]
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// The mapping file [env: QOSLANE_CONFIG] [default: <root>/etc/qoslane/qos-network.yml]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// The deadline of one run, in milliseconds; keep it well under Slurm's
    /// PrologEpilogTimeout [env: QOSLANE_TIMEOUT_MS] [default: 3000]
    #[arg(long, global = true, value_name = "MS")]
    pub timeout_ms: Option<u64>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The command line as parsed, helped and documented: [`Cli`] with each
/// global flag said once (`manpage::globals_once`).
pub fn command() -> clap::Command {
    manpage::globals_once(<Cli as clap::CommandFactory>::command())
}

/// Parses the process's arguments with [`command`].
///
/// # Errors
/// clap's, for a bad command line, `--help` and `--version`.
pub fn parse() -> Result<Cli, clap::Error> {
    let matches = command().try_get_matches()?;
    <Cli as clap::FromArgMatches>::from_arg_matches(&matches)
}

/// A hook's command line needs no parser: no argument (Slurm starts a hook
/// so, and hookrun the packaged TaskProlog hook, a symlink to the binary)
/// or only `prolog`, `epilog` or `task-prolog` (the packaged Prolog and
/// Epilog scripts). For these clap's command tree — every subcommand's
/// arguments, ~100 KB of allocations, a third of a TaskProlog's
/// instructions — is not built. `None`: anything else (options included),
/// for clap; the tests below check that clap reads these lines the same way.
pub fn hook_line(mut args: impl Iterator<Item = std::ffi::OsString>) -> Option<Cli> {
    let command = match (args.next(), args.next()) {
        (None, _) => None,
        (Some(word), None) => Some(match word.to_str()? {
            "prolog" => Command::Prolog,
            "epilog" => Command::Epilog,
            "task-prolog" => Command::TaskProlog,
            _ => return None,
        }),
        (Some(_), Some(_)) => return None,
    };
    Some(Cli {
        command,
        ..Cli::default()
    })
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    #[default]
    Human,
    Json,
}

/// `fabric audit --format`: the common two, and the page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum AuditFormat {
    #[default]
    Human,
    Json,
    /// One self-contained HTML page: the fabric drawn per level, the findings
    Html,
}

/// How `fabric audit` sends its SMP queries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum FabricReader {
    /// In process when libibumad and the HCA port can be opened, else smpquery
    #[default]
    Auto,
    /// In process through libibumad (an error when it cannot start)
    InProcess,
    /// One smpquery per query
    Smpquery,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a mapping file (--config FILE; default: the installed one, as `nginx -t`); print
    /// every problem as FILE:LINE:COL with a snippet
    #[command(
        after_help = "Mapping: --config FILE (default: the installed one, /etc/qoslane/qos-network.yml)\nExit status: 0 valid, 2 invalid, 64 usage, 66 unreadable"
    )]
    Validate {
        /// The mapping to check (an older spelling of --config FILE, kept for scripts)
        #[arg(hide = true)]
        file: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Show what a job of QoS NAME would get, without touching the node
    #[command(
        after_help = "Mapping: --config FILE (default: the installed one, /etc/qoslane/qos-network.yml)\nExit status: 0 ok (with --fabric: the level would be granted), 1 with --fabric: it would not, 2 the mapping is invalid, 64 usage, 66 no mapping"
    )]
    Explain {
        #[arg(long, value_name = "NAME")]
        qos: String,
        /// Also probe this node's ports and their first hop now, and say whether the level
        /// would be granted here (writes nothing; exit 1 when it would not)
        #[arg(long)]
        fabric: bool,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Slurm Prolog: grant the job's level (verify fabric, apply settings, record)
    #[command(
        after_help = "Mapping: --config FILE (default: the installed one, /etc/qoslane/qos-network.yml)\nExit status: 0 granted, or refused under on_failure continue, 1 failed under fail_job, 64 usage, 75 lock or deadline, 100 the job refused by policy (hookrun requeues and holds it)"
    )]
    Prolog,
    /// Slurm Epilog: release the job's level, restore settings when it was the last
    #[command(
        after_help = "Mapping: --config FILE (default: the installed one, /etc/qoslane/qos-network.yml)\nExit status: 0 released, or failed under on_failure continue, 1 failed under fail_job, 64 usage, 75 lock or deadline"
    )]
    Epilog,
    /// Slurm TaskProlog: print the job's `export` lines (runs as the job user)
    #[command(
        after_help = "Exit status: 0 the job's lines printed, 1 a job this node's Prolog refused: \
                      its reason as a print line (a non-zero TaskProlog fails the task; an \
                      srun hookrun could not requeue does not run without its level)"
    )]
    TaskProlog,
    /// After installing a new mapping: validate, check every level on the fabric, and
    /// only then put it in force (last-known-good) and re-apply the running jobs' settings
    #[command(
        after_help = "Mapping: --config FILE (default: the installed one, /etc/qoslane/qos-network.yml)\nExit status: 0 in force, 1 refused (a level the fabric does not carry under enforce), 2 invalid, 64 usage, 66 no mapping, 74 state I/O or overtaken by another sync, 75 lock or deadline"
    )]
    Sync {
        /// Say what would happen (validation, fabric verdict, settings to change); change nothing
        #[arg(long)]
        dry_run: bool,
    },
    /// Health check: ports up, each level's grant decided and recorded, mapping valid, state sane
    #[command(
        after_help = "Mapping: --config FILE (default: the installed one, /etc/qoslane/qos-network.yml)\nExit status: 0 healthy (warnings included), 1 drain, 64 usage"
    )]
    Health {
        /// human, or json: the report as one object
        #[arg(long, value_enum, default_value_t)]
        format: Format,
        /// The same as --format json (kept for scripts written before --format)
        #[arg(long, hide = true)]
        json: bool,
    },
    /// What is in force, which jobs hold which level and SL, settings, fabric, last problems
    /// (read-only; exit 0 in order, 1 needs attention)
    #[command(
        long_about = "What the node looks like now, the way `systemctl status` reads: the \
mapping in force (and since when), last-known-good, a rejected newer mapping and its first error; \
the cached fabric probe judged for every level; each level's recorded grant (granted, with \
warnings, baseline, refused, and why); which jobs hold which level and SL since when; \
the settings (now, wanted, baseline); a pending journal; the last problems from the end of the \
audit log.\n\nRead-only: no lock, no SMP query (the cached probe), nothing created or written.\n\n\
Exit status: 0 in order; 1 needs attention (the first line starts with ×, then one Attention line \
per reason: no usable mapping, the installed one invalid or rejected, a setting out of sync, a \
pending journal, a level not granted, a held SL the cached probe says is not carried, a failed \
last health check, a state file that cannot be used, state this user may not read); 74 only when \
the output cannot be written."
    )]
    #[command(
        after_help = "Mapping: --config FILE (default: the installed one, /etc/qoslane/qos-network.yml)\nExit status: 0 in order, 1 needs attention, 64 usage"
    )]
    Status {
        /// json: the same facts as one object, `"schema": 1` (every key: the admin guide, §8)
        #[arg(long, value_enum, default_value_t)]
        format: Format,
        /// The same as --format json (kept for scripts written before --format)
        #[arg(long, hide = true)]
        json: bool,
    },
    /// Which jobs got which level and SL, and why: the audit log read back and filtered (the
    /// rotated audit.jsonl.1 and audit.jsonl.N.gz too, oldest first)
    #[command(
        after_help = "Exit status: 0 read (also when nothing matched), 64 a bad filter, 66 no audit log"
    )]
    Log(LogArgs),
    /// Roll back an interrupted transaction
    #[command(
        after_help = "Exit status: 0 rolled back or nothing to do, 64 usage, 70 the rollback failed (journal kept), 75 lock or deadline"
    )]
    Recover,
    /// Print the metrics, or serve them over HTTP at /metrics
    #[command(after_help = "Exit status: 0 printed, 64 usage, 74 cannot listen")]
    Metrics {
        /// Serve on ADDR (e.g. 127.0.0.1:9817) instead of printing once
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
    },
    /// Print (or write with --output DIR) what slurmctld needs so that a fail_job level's
    /// jobs go only to the nodes that carry it: the slurm.conf lines to include (every node's
    /// qoslane features, JobSubmitPlugins=lua, FUTURE placeholder nodes of the given size),
    /// job_submit.lua with the QoS -> feature table of the mapping, and the same as a module
    /// (qoslane_placement.lua) for a site whose job_submit.lua is its own. Refuses a mapping
    /// Slurm cannot be told (nothing under fail_job, a fail_job default level, a name that
    /// cannot be a node feature), naming its line. --check-qos compares the mapping's QoS
    /// names with Slurm's instead
    #[command(
        name = "slurm-config",
        after_help = "Mapping: --config FILE (default: the installed one, /etc/qoslane/qos-network.yml)\nExit status: 0 printed or written (or every QoS known), 2 the mapping is invalid, cannot be expressed in Slurm or names a QoS Slurm does not know, 64 usage (a site's own job_submit.lua in DIR that does not call the module), 66 no mapping, 69 sacctmgr failed (slurmdbd unreachable)"
    )]
    SlurmConfig(SlurmConfigArgs),
    /// Which nodes carry which fail_job level as Slurm knows it, the levels carried nowhere,
    /// the pending jobs qoslane turned away and why (read-only; any host with Slurm's client
    /// commands, no root needed)
    #[command(
        long_about = "Which nodes carry which placed level, as slurmctld knows it: for each \
fail_job level (a qoslane_<level> node feature), the nodes whose ActiveFeatures hold it (each \
node's `qoslane health` keeps them as its grant says), those that list it but do not carry it \
now, those whose slurm.conf line lacks it; per level the nodes that carry it, and CARRIED \
NOWHERE when no node in service does (its jobs pend until one does). Then the pending jobs \
qoslane turned away (AdminComment `qoslane: level L (QoS Q) refused on NODE: WHY`, with \
Slurm's reason they pend) and the pending jobs whose constraint asks for a level carried \
nowhere.\n\nRead-only: one `scontrol show node -o` and one `squeue` (two requests to \
slurmctld), nothing written; it runs on any host with Slurm's client commands and needs no \
root. scontrol: --scontrol, else QOSLANE_SCONTROL, else /usr/bin/scontrol; squeue: --squeue, \
else QOSLANE_SQUEUE, else /usr/bin/squeue.\n\nExit status: 0 every placed level is carried \
on a node in service (or none is placed); 1 a level is carried nowhere; 69 scontrol or squeue \
failed (the error names the command); 75 one did not answer within --timeout.",
        after_help = "Exit status: 0 every placed level carried, 1 a level carried nowhere, 64 usage, 69 scontrol or squeue failed, 75 no answer in time"
    )]
    Cluster(ClusterArgs),
    /// Fabric-wide checks, for a control node (any host with an HCA on the fabric)
    #[command(after_help = "Exit status: the subcommand's")]
    Fabric {
        #[command(subcommand)]
        what: FabricCommand,
    },
    /// Print what the shell completions offer: `complete qos`, the QoS names of the mapping
    /// in force (or --config FILE), one per line (what the generated completions call for
    /// --qos)
    #[command(hide = true)]
    Complete {
        #[arg(value_parser = ["qos"])]
        what: String,
    },
    /// Write the man page or shell completions (for packaging)
    #[command(hide = true)]
    Generate {
        #[command(subcommand)]
        what: Generate,
    },
}

#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Only this job's entries
    #[arg(long, value_name = "ID")]
    pub job: Option<u64>,
    /// From this time: RFC 3339 (2026-12-01T10:00:00Z, 2026-12-01T11:00:00+01:00), a local
    /// date and time (2026-12-01 10:00) or date (2026-12-01), today, yesterday, or relative
    /// (90m, 2h, 3d, -1h, "2 hours ago"); without a zone, the local one (TZ)
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub since: Option<String>,
    /// Up to this time (same forms as --since)
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub until: Option<String>,
    /// Only these outcomes (repeatable)
    #[arg(long, value_name = "OUTCOME", value_parser = clap::builder::PossibleValuesParser::new(
        crate::report::Outcome::ALL.iter().map(|o| o.as_str())))]
    pub outcome: Vec<String>,
    /// Only these events (repeatable)
    #[arg(long, value_name = "EVENT", value_parser = clap::builder::PossibleValuesParser::new(
        crate::report::Event::ALL.iter().map(|e| e.as_str())))]
    pub event: Vec<String>,
    /// Only jobs of this QoS (as the job asked for it)
    #[arg(long, value_name = "NAME")]
    pub qos: Option<String>,
    /// The last N matching entries; 0 for all
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: usize,
    /// json: the matching entries as JSON lines, byte for byte as written
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// The same as --format json (kept for scripts written before --format)
    #[arg(long, hide = true)]
    pub json: bool,
    /// Then print each new matching entry as it is appended, across a rotation (as
    /// `journalctl -f`); Ctrl-C ends it
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Times in UTC, as written, and --since/--until without a zone read in UTC [default:
    /// the local zone, TZ honoured]
    #[arg(long)]
    pub utc: bool,
}

impl LogArgs {
    /// Whether the entries are printed as JSON lines (`--format json` or `--json`).
    pub fn as_json(&self) -> bool {
        self.format.or_json(self.json) == Format::Json
    }
}

impl Cli {
    /// The one way to name a mapping is the global `--config FILE` (as
    /// hookrun's `--config` names hookrun.conf, and `QOSLANE_CONFIG`);
    /// `validate FILE` and the fabric commands' `--mapping FILE` are older
    /// spellings kept, hidden, for scripts. Folds whichever was given into
    /// `config`; two of them are refused rather than one silently ignored.
    ///
    /// # Errors
    /// The usage error naming both spellings.
    pub fn one_mapping(&mut self) -> Result<(), String> {
        let older = match &mut self.command {
            Some(Command::Validate { file, .. }) => file.take().map(|f| ("FILE", f)),
            Some(Command::Fabric {
                what:
                    FabricCommand::Audit(AuditArgs { mapping, .. })
                    | FabricCommand::SmConfig(SmConfigArgs { mapping, .. }),
            }) => mapping.take().map(|f| ("--mapping <FILE>", f)),
            _ => None,
        };
        match (older, &self.config) {
            (Some((spelling, _)), Some(_)) => Err(format!(
                "the argument '{spelling}' cannot be used with '--config <FILE>': both name \
                 the mapping; give one (--config FILE)"
            )),
            (Some((_, file)), None) => {
                self.config = Some(file);
                Ok(())
            }
            (None, _) => Ok(()),
        }
    }
}

impl Format {
    /// `--format`, or the older `--json` flag that means `--format json`.
    pub fn or_json(self, json: bool) -> Self {
        if json { Self::Json } else { self }
    }
}

#[derive(Debug, Subcommand)]
pub enum FabricCommand {
    /// Read every switch and HCA port's SL2VL, VLArb and OperVLs once and judge every level
    /// of the mapping on every data port: dropped (VL 15), not operational (beyond OperVLs),
    /// starved (weight 0 in both VLArb tables), or on another VL than the level names.
    /// Exit 0: every level carried; 1: some level is not; 69: the fabric could not be
    /// (wholly) read
    #[command(
        after_help = "Mapping: --config FILE (default: the installed one, /etc/qoslane/qos-network.yml)\nExit status: 0 every level carried, 1 some level is not, 2 the mapping is invalid, 64 usage, 66 no mapping, 69 the fabric could not be (wholly) read"
    )]
    Audit(AuditArgs),
    /// Follow the OpenSM event plugin's spool (smplugin/, `event_plugin_name qoslane_sm`) and keep
    /// the fabric verdict current within seconds of the SM's sweep: a full audit at start (and
    /// when the SM restarts, records were lost or a sweep is not explained), else only the
    /// switches the SM changed (LFT_CHANGE) and the nodes whose links changed are read again,
    /// the rest of the last audit kept in memory; the verdict written as `fabric audit
    /// --verdict` writes it. One JSON line per re-audit on stdout. Runs until stopped (a
    /// systemd service on the SM host), or once with --once
    #[command(
        after_help = "Mapping: --config FILE (default: the installed one, /etc/qoslane/qos-network.yml)\nExit status: 0 stopped (or --once: the verdict written), 2 the mapping is invalid, 64 usage, 66 no mapping, 69 the fabric could not be read (--once)"
    )]
    Watch(WatchArgs),
    /// Print the OpenSM QoS options that carry the mapping: SL2VL for HCA ports, switch
    /// external ports and switch port 0 consistent with each level's virtual_lane; VL
    /// arbitration in the mapping's order (top tiers in the high-priority table);
    /// qos_high_limit; max_op_vls. Refuses what the hardware cannot do. Changes nothing
    #[command(
        after_help = "Mapping: --config FILE (default: the installed one, /etc/qoslane/qos-network.yml)\nExit status: 0 printed, 2 the mapping is invalid, 64 usage (a VL the hardware cannot run), 66 no mapping"
    )]
    SmConfig(SmConfigArgs),
}

#[derive(Debug, clap::Args)]
pub struct SmConfigArgs {
    /// The mapping: an older spelling of --config FILE, kept for scripts
    #[arg(long, value_name = "FILE", hide = true)]
    pub mapping: Option<PathBuf>,
    /// human: an opensm.conf fragment with comments; json: the options as an object
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// The data VLs of the HCAs and switches (PortInfo VLCap): VL0, VL0-1, VL0-3, VL0-7, VL0-14
    #[arg(long, value_name = "RANGE", default_value = "VL0-7")]
    pub vl_cap: String,
    /// How many of the top levels go into the high-priority VL arbitration table
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub high_tiers: usize,
    /// Print OpenSM's qos-policy.conf (the SL of each level's sm_traffic) instead of the options
    #[arg(long)]
    pub qos_policy: bool,
    /// Where the SM host keeps the policy: the options' qos_policy_file when a level declares sm_traffic
    #[arg(long, value_name = "PATH", default_value = crate::fabric::judge::sm_policy::DEFAULT_POLICY_FILE)]
    pub qos_policy_file: String,
}

#[derive(Debug, clap::Args)]
pub struct SlurmConfigArgs {
    /// How many placeholder nodes: the most nodes one job of these levels asks for
    #[arg(long, value_name = "K", required_unless_present = "check_qos")]
    pub placeholders: Option<u32>,
    /// The placeholders' CPUs: the largest node's
    #[arg(long, value_name = "N", required_unless_present = "check_qos")]
    pub cpus: Option<u32>,
    /// The placeholders' RealMemory in MB: the largest node's
    #[arg(long, value_name = "MB", required_unless_present = "check_qos")]
    pub memory: Option<u64>,
    /// The placeholders' Gres (slurm.conf's form, e.g. gpu:4): the largest node's
    #[arg(long, value_name = "GRES")]
    pub gres: Option<String>,
    /// The site's own node features jobs may ask for (comma-separated): the placeholders
    /// carry them too
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub features: Vec<String>,
    /// Write qoslane_placement.lua, job_submit.lua and qoslane.conf into DIR (each
    /// atomically replaced) instead of printing them. A job_submit.lua there that is not
    /// qoslane's is the site's: never replaced; one that calls the module is left as it is,
    /// any other refused with the lines to add (the module is written all the same)
    #[arg(long, value_name = "DIR", conflicts_with = "check_qos")]
    pub output: Option<PathBuf>,
    /// Compare the mapping's QoS names with Slurm's (`sacctmgr -n -P show qos format=name`)
    /// and write nothing: a QoS of the mapping Slurm does not know is an error naming its
    /// line; a Slurm QoS no level lists is said (its jobs get the default level)
    #[arg(long)]
    pub check_qos: bool,
    /// sacctmgr for --check-qos (default: QOSLANE_SACCTMGR, from the environment or the site
    /// options file, else /usr/bin/sacctmgr)
    #[arg(
        long,
        value_name = "PATH",
        requires = "check_qos",
        conflicts_with = "qos_from"
    )]
    pub sacctmgr: Option<PathBuf>,
    /// For --check-qos, Slurm's QoS names from FILE (what `sacctmgr -n -P show qos
    /// format=name` printed on a host that reaches slurmdbd) instead of running sacctmgr
    #[arg(long, value_name = "FILE", requires = "check_qos")]
    pub qos_from: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    /// json: the same facts as one object, `"schema": 1`
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// scontrol, by absolute path [env: QOSLANE_SCONTROL] [default: /usr/bin/scontrol]
    #[arg(long, value_name = "PATH")]
    pub scontrol: Option<PathBuf>,
    /// squeue, by absolute path [env: QOSLANE_SQUEUE] [default: /usr/bin/squeue]
    #[arg(long, value_name = "PATH")]
    pub squeue: Option<PathBuf>,
    /// How long scontrol and squeue may take together, in seconds
    #[arg(long, value_name = "SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub timeout: u64,
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// The mapping: an older spelling of --config FILE, kept for scripts
    #[arg(long, value_name = "FILE", hide = true)]
    pub mapping: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    pub format: AuditFormat,
    /// Write the output to FILE (atomically replaced) instead of stdout
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write the verdict as a Prometheus textfile (atomically replaced)
    #[arg(long, value_name = "FILE")]
    pub textfile: Option<PathBuf>,
    /// Also write the fabric verdict for the nodes' grants: per level, the HCA ports whose traffic
    /// takes a port it is not carried on (JSON, atomically replaced; the nodes read it as
    /// QOSLANE_FABRIC_VERDICT)
    #[arg(long, value_name = "FILE")]
    pub verdict: Option<PathBuf>,
    #[command(flatten)]
    pub read: ReadArgs,
    /// Clear each switch port's transmit wait counters after reading them, so the next audit
    /// shows the wait since this one
    #[arg(long)]
    pub reset_wait: bool,
}

#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// The fabric verdict to keep current (JSON, atomically replaced; the nodes read it as
    /// QOSLANE_FABRIC_VERDICT) [default: QOSLANE_FABRIC_VERDICT, from the environment or the
    /// site options file]
    #[arg(long, value_name = "FILE")]
    pub verdict: Option<PathBuf>,
    /// The plugin's spool directory (its qoslane_spool) [default: /run/qoslane-sm]
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// Also write the audit's and the watcher's metrics as a Prometheus textfile
    #[arg(long, value_name = "FILE")]
    pub textfile: Option<PathBuf>,
    /// How often the spool is looked at, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = 200,
          value_parser = clap::value_parser!(u64).range(10..=5000))]
    pub poll_ms: u64,
    /// Act on records when no sweep end came and nothing more for this long, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(100..=60000))]
    pub quiet_ms: u64,
    /// A full audit at least this often, in seconds (0: only when the records ask for one;
    /// the audit's timer stays the safety net)
    #[arg(long, value_name = "SECS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=604_800))]
    pub full_every: u64,
    /// Take the spool once, audit the whole fabric, write the verdict and exit
    #[arg(long)]
    pub once: bool,
    #[command(flatten)]
    pub read: ReadArgs,
}

/// How an audit reads the fabric: the options `fabric audit` and `fabric watch` share.
#[derive(Debug, clap::Args)]
pub struct ReadArgs {
    /// smpquery processes at once (1-16); in process, 4 × N SMPs in flight per LID, 128 in all
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u8).range(1..=16))]
    pub workers: u8,
    /// How the SMP queries are sent
    #[arg(long, value_enum, default_value_t, env = "QOSLANE_FABRIC_READER")]
    pub reader: FabricReader,
    /// An audit's deadline, in seconds (the watcher's: each audit's)
    #[arg(long, value_name = "SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// The local HCA to send the queries from (e.g. mlx5_0) [default: the first]
    #[arg(long = "ca", value_name = "DEVICE", requires = "ca_port")]
    pub ca: Option<String>,
    /// The local HCA port to send the queries from
    #[arg(long = "ca-port", value_name = "PORT", requires = "ca")]
    pub ca_port: Option<u32>,
}

#[derive(Debug, Subcommand)]
pub enum Generate {
    /// Man pages into DIR
    Man { dir: PathBuf },
    /// Completions for SHELL into DIR
    Completions {
        shell: clap_complete::Shell,
        dir: PathBuf,
    },
    /// The mapping keys' documentation (man page sections, the admin guide's tables, the fuzz
    /// dictionary's words) from their declarations, rewritten in the checkout at DIR
    #[command(hide = true)]
    Keys { dir: PathBuf },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(args: &[&str]) -> Option<Cli> {
        hook_line(args.iter().map(std::ffi::OsString::from))
    }

    /// What the fast path reads is what clap reads, for every line it takes;
    /// every other line is left to clap.
    #[test]
    fn a_hook_line_is_read_as_clap_reads_it() {
        for args in [&[][..], &["prolog"], &["epilog"], &["task-prolog"]] {
            let fast = line(args).expect("a hook line");
            let clap = Cli::try_parse_from(std::iter::once("qoslane").chain(args.iter().copied()))
                .expect("clap parses it");
            assert_eq!(format!("{fast:?}"), format!("{clap:?}"), "{args:?}");
        }
        for args in [
            &["prolog", "--root", "/x"][..],
            &["--root", "/x", "prolog"],
            &["health"],
            &["--help"],
            &["prolog", "--help"],
            &["Prolog"],
        ] {
            assert!(line(args).is_none(), "{args:?} must go to clap");
        }
    }
}
