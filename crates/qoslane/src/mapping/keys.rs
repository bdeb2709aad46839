//! Every key of the mapping file, declared once: where it is written, what
//! its value is, whether it is required (else what its absence means), what
//! it is for. The validator's known keys, its "did you mean" suggestions,
//! its "has no `KEY`" errors and the words a choice accepts come from here;
//! so do the keys' sections of the man page (qoslane-mapping(5)), the admin
//! guide's key tables and the fuzz dictionary's words (`keydocs.rs`,
//! written by `qoslane generate keys`, held by a test); the integration
//! tests check each key against the shipped example and the Omnia input,
//! and feed the round-trip property from these declarations
//! (CONTRIBUTING.md: "Adding a mapping key").

use super::types::{FabricCheck, OnFailure, OnUnknownQos};

/// Where a key is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The file's top level.
    Top,
    /// An entry of `levels`.
    Level,
    /// An entry of a level's `node_settings`.
    NodeSetting,
    /// The top-level `exports` map.
    Exports,
    /// An entry of `exports.add`.
    ExportEntry,
}

impl Place {
    pub const ALL: &[Place] = &[
        Self::Top,
        Self::Level,
        Self::NodeSetting,
        Self::Exports,
        Self::ExportEntry,
    ];

    /// The mapping that holds such keys, as a message names it.
    pub fn what(self) -> &'static str {
        match self {
            Self::Top => "the mapping file",
            Self::Level => "a level",
            Self::NodeSetting => "a node setting",
            Self::Exports => "`exports`",
            Self::ExportEntry => "an `exports.add` entry",
        }
    }

    /// The same, when a message points at one (`this level has no …`).
    pub fn this(self) -> &'static str {
        match self {
            Self::Top => "the mapping file",
            Self::Level => "this level",
            Self::NodeSetting => "this node setting",
            Self::Exports => "`exports`",
            Self::ExportEntry => "this `exports.add` entry",
        }
    }
}

/// What a key's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// A name: 1 to 64 letters, digits, `_`, `-`, `.`.
    Name,
    /// An integer from 0 to this bound.
    Integer(u64),
    /// One of these words.
    Choice(&'static [&'static str]),
    /// A string (one line).
    Text,
    /// A list (of names, devices, levels or node settings).
    List,
    /// A map of the keys of a place of its own (`exports`).
    Map,
}

/// One key of the mapping file, and its documentation: the man page's
/// entry, the admin guide's table row and the fuzz dictionary's words are
/// rendered from it ([`super::keydocs`]; `qoslane generate keys`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub name: &'static str,
    pub place: Place,
    pub form: Form,
    pub required: bool,
    /// What an absent key means, in the docs' markup (`` `x` ``: a value or
    /// a name as written; `**x**`: stressed); `None` for a required key. A
    /// default that is one value as written (`` `15` ``) is what the
    /// validator takes for the absent key ([`Key::default_value`]).
    pub default: Option<&'static str>,
    /// What its value is, as the docs say it (a choice: its words, from
    /// the form).
    pub value: &'static str,
    /// What it is for, in the docs' markup.
    pub about: &'static str,
}

impl Key {
    /// The default when it is one value as written (`` `enforce` ``).
    pub fn default_value(&self) -> Option<&'static str> {
        let d = self.default?.strip_prefix('`')?.strip_suffix('`')?;
        (!d.contains('`')).then_some(d)
    }
}

/// Declares each key as a constant (for the validator to read it by) and
/// every key, in order, as [`KEYS`]: `ID = "name", Place, form, required`
/// or `default "what an absent key means"`, then `value "…"` (empty for a
/// choice) and what it is for.
macro_rules! keys {
    (@required required) => { true };
    (@required default) => { false };
    (@default) => { None };
    (@default $d:literal) => { Some($d) };
    ($($(#[$m:meta])* $id:ident = $name:literal, $place:ident, $form:expr,
       $req:ident $($default:literal)?, value $value:literal, $about:literal;)*) => {
        $(
            $(#[$m])*
            pub const $id: Key = Key {
                name: $name,
                place: Place::$place,
                form: $form,
                required: keys!(@required $req),
                default: keys!(@default $($default)?),
                value: $value,
                about: $about,
            };
        )*
        /// Every key, in the order the messages list them (per place).
        pub const KEYS: &[Key] = &[$($id),*];
    };
}

keys! {
    DEFAULT_LEVEL = "default_level", Top, Form::Name, required,
        value "level name",
        "The level of a job whose QoS no level lists, or of a job with no QoS (and, under \
         `on_unknown_qos: default_level`, of a job whose QoS cannot be learnt). It must name \
         one of `levels`.";
    FABRIC_CHECK = "fabric_check", Top, Form::Choice(FabricCheck::NAMES), default "`enforce`",
        value "",
        "What a level the fabric does not carry means (its SL dropped, on a VL the port does \
         not run, on another VL than `virtual_lane`, or starved by VL arbitration). `enforce`: \
         the level is refused (the Prolog fails, per `on_failure`). `warn`: audited and logged, \
         granted anyway. `off`: no SMP probe at all (nodes without HCAs).";
    FAIL_JOB_MAX_PROBE_AGE = "fail_job_max_probe_age", Top, Form::Integer(300), default "`15`",
        value "integer seconds, 0 to 300",
        "A level under `fail_job` is granted only on a fabric probe (cache entry) younger than \
         this, so an SM that moved its SL is seen by those jobs within this bound; other levels \
         use the cache up to 300 seconds. `0`: every `fail_job` Prolog probes. A Prolog that \
         must probe takes a few milliseconds longer than one served from the cache; at the \
         default that is paid at most once per 15 seconds per node.";
    ON_FAILURE = "on_failure", Top, Form::Choice(OnFailure::NAMES), default "`continue`",
        value "",
        "What a Prolog that cannot grant its job the level does. `continue`: everything is \
         rolled back, the job runs on the node's baseline with **no** SL exports and is told \
         in its output (a `qoslane: …` line from the TaskProlog); the Prolog exits 0. \
         `fail_job`: rolled back, and the Prolog **refuses the job**: it exits 100 with the \
         reason on stdout; hookrun puts the reason in the job's `AdminComment` (`scontrol \
         show job`) and requeues it (`scontrol requeue`): the job pends again, **not held**, \
         and Slurm starts it where it can (after `cred_expire`, 120 s by default); the node \
         stays in service. A job that cannot be requeued (an `srun` or `salloc` allocation) \
         starts its tasks and each fails at once with the reason (a `qoslane: …` line from \
         the TaskProlog); the node is not drained. The refusal is also in the audit log (`qoslane log --job JOBID`), in hookrun's log line and in \
         `hookrun_hook_runs_total{outcome=\"refused\"}` (hookrun.md, \"Refusing a job\"). A \
         Prolog that could not put the node back (a rollback that failed, a kernel call that \
         hung) exits 1 instead and the node drains. Run without hookrun, Slurm treats 100 as \
         any non-zero Prolog status: the job is requeued and held and the node drains with \
         \"Prolog error\". A level may override it.";
    ON_UNKNOWN_QOS = "on_unknown_qos", Top, Form::Choice(OnUnknownQos::NAMES),
        default "`default_level`",
        value "",
        "What a job whose QoS cannot be learnt gets: squeue did not answer within half the \
         Prolog's deadline (a busy controller before Slurm 26.05), failed, or answered no \
         single QoS. `default_level`: the default level, and the job is told in its output (a \
         `qoslane: …` line from the TaskProlog). `fail_job`: the Prolog refuses the job as \
         `on_failure: fail_job` does (exit 100: requeued, pending again, or its srun's tasks \
         failed with the reason; the node in service). Either way the audit line says `qos_source: default` with the reason in its \
         notes, and `qoslane_qos_fallbacks_total{reason}` counts it. A node with **no usable \
         mapping** (the installed file invalid and no last-known-good copy) grants no level: \
         it refuses every job when the installed file's `on_unknown_qos` reads `fail_job`, \
         else the job runs on the baseline, told; `qoslane health` drains such a node.";
    DEVICES = "devices", Top, Form::List, default "`[]` (every active port)",
        value "list of `DEVICE` or `DEVICE/PORT`",
        "The HCA ports to check: a device (every port of it, e.g. `mlx5_0`) or one port of it \
         (e.g. `mlx5_0/1`, port 1 to 255).";
    EXPORTS = "exports", Top, Form::Map, default "none (the table as shipped)",
        value "map of `add` and `drop`",
        "The site's edits of the environment the TaskProlog exports to a job's libraries \
         (the table in §3, \"What the job's libraries read\"): variables to add \
         (`add`) and the table's variables to drop (`drop`). A variable carries the level's SL \
         or its traffic class, and is exported only when every one of the job's ports on the \
         node is of a link layer it belongs on: a traffic class on RoCE ports only.";
    LEVELS = "levels", Top, Form::List, required,
        value "list of levels, not empty",
        "The levels, highest priority first: **the order ranks them**. It decides whose node \
         settings win on a shared node, and the VL arbitration `qoslane fabric sm-config` \
         proposes.";
    NAME = "name", Level, Form::Name, required,
        value "1 to 64 of `A-Z a-z 0-9 _ - .`",
        "The level's name, unique. Shown in the audit, the metrics and `QOSLANE_LEVEL`.";
    QOS = "qos", Level, Form::List, required,
        value "list of Slurm QoS names, not empty",
        "The Slurm QoS names of the level, each in one level only. Slurm stores QoS names in \
         lower case; an upper-case name is a warning and matches case-insensitively.";
    SERVICE_LEVEL = "service_level", Level, Form::Integer(15), required,
        value "integer 0 to 15",
        "The InfiniBand SL of the job's traffic, distinct across levels (exported by the \
         TaskProlog to the libraries of the export table: UCX, NCCL, Open MPI, MVAPICH2, \
         NVSHMEM, UCC, Mooncake, TransferBench, DeepEP).";
    VIRTUAL_LANE = "virtual_lane", Level, Form::Integer(14), default "none (not checked)",
        value "integer 0 to 14",
        "The VL the Subnet Manager must map `service_level` to on every port checked. VL 15 is \
         the management lane and is refused. Without it the check only proves the SL lands on a \
         data VL the port runs.";
    TRAFFIC_CLASS = "traffic_class", Level, Form::Integer(255), default "none",
        value "integer 0 to 255",
        "The RoCE/GRH traffic class, exported to the job's libraries (`UCX_IB_TRAFFIC_CLASS`, \
         `NCCL_IB_TC`, `NVSHMEM_IB_TRAFFIC_CLASS`, …) on a node whose job's ports are all RoCE, \
         never on a native InfiniBand port.";
    /// The level's own `on_failure`: the top-level one overridden.
    LEVEL_ON_FAILURE = "on_failure", Level, Form::Choice(OnFailure::NAMES),
        default "the top-level `on_failure`",
        value "",
        "This level's own `on_failure` (e.g. `fail_job` for mission-critical: better requeue \
         than run unprotected).";
    PATH_SL = "path_sl", Level, Form::Choice(super::types::PathSl::NAMES),
        default "`pinned`",
        value "",
        "What the level does on a fabric whose Subnet Manager gives paths their own SLs \
         (LASH, DFSSSP, Torus-2QoS: the fabric audit recognises it by the SA's path records) \
         when the level's SL closes a credit loop on the routes in use. `pinned`: the level is \
         not granted (refused or run on the baseline, per `on_failure`), the loop named. \
         `path_record`: the level is granted with the SL of each path's record: the job's \
         libraries that can ask the SM for it are told to (`MV2_PATH_SL_QUERY`, \
         `OMPI_MCA_btl_openib_ib_path_record_service_level`, InfiniBand only) and no pinned SL \
         is exported. Where the level's routes are deadlock-free it keeps its SL either way, \
         granted with a note that the SM routes by path SLs.";
    NODE_SETTINGS = "node_settings", Level, Form::List, default "`[]`",
        value "list of settings (`path`, `value`)",
        "Kernel settings written in the Prolog when a job of the level starts and restored from \
         the node's baseline in the Epilog of its last job, transactionally (journaled, \
         verified, rolled back on failure).";
    SM_TRAFFIC = "sm_traffic", Level, Form::List, default "`[]`",
        value "list of `ipoib`, `sdp`, `rds`, `iser`, `ipoib pkey P`, `pkey R`, `service-id R`, \
               `qos-class R`, `srp target-port-guid R` (`R`: `N` or `N-M`, hex `0x…` or decimal)",
        "Traffic that reads no environment variable and takes its SL from the Subnet Manager's \
         path record answer (rdma_cm, IPoIB, storage), to be put on this level: \
         `qoslane fabric sm-config` writes OpenSM's QoS policy (`qos_policy_file`) from it. A \
         ULP keyword is OpenSM's: `ipoib` is PKey 0x7fff, `sdp` service IDs 0x10000-0x1ffff, \
         `rds` 0x10648ca, `iser` 0x1060cbc; storage without a keyword (Lustre o2ib, NFSoRDMA) by \
         its `service-id` or `pkey`; `qos-class` is what rdma_cm sends as the connection's ToS. \
         A PKey must be a partition of OpenSM's partitions.conf. No two entries, on any levels, \
         may match the same query.";
    EXPORTS_ADD = "add", Exports, Form::List, default "`[]`",
        value "list of entries (`variable`, `value`, `link_layer`)",
        "Variables of a library qoslane's table does not list, each exported with the level's \
         SL or traffic class. A name must be an environment variable's (letters, digits, `_`), \
         not one of the table's (drop it instead), not one that changes what a task loads or \
         runs (`LD_*`, `PATH`, …), nor Slurm's or qoslane's own.";
    EXPORTS_DROP = "drop", Exports, Form::List, default "`[]`",
        value "list of variable names of the table",
        "Variables of qoslane's table the TaskProlog must neither export nor unset (a site \
         whose users set it themselves).";
    EXPORT_VARIABLE = "variable", ExportEntry, Form::Name, required,
        value "environment variable name",
        "The variable's name, as the library reads it.";
    EXPORT_VALUE = "value", ExportEntry, Form::Choice(crate::libraries::Carries::NAMES),
        required,
        value "",
        "What it carries: `sl`, the level's `service_level`; `traffic_class`, the level's \
         `traffic_class` (a level without one exports nothing); `path_record`, `1` when the \
         level takes each path record's SL (`path_sl`), when no SL is exported.";
    EXPORT_LINK_LAYER = "link_layer", ExportEntry,
        Form::Choice(crate::libraries::Layers::NAMES),
        default "`both` for `sl`, `roce` for `traffic_class`",
        value "",
        "The link layers it belongs on: exported only when every one of the job's ports on \
         the node is of them. A traffic class must be `roce`: on a native InfiniBand port it \
         is refused (NVSHMEM's IBGDA path fails with one).";
    PATH = "path", NodeSetting, Form::Text, required,
        value "string",
        "The setting's file: absolute, normalised, under `/sys/` or `/proc/sys/`, unique \
         within the level.";
    VALUE = "value", NodeSetting, Form::Text, required,
        value "string, one line",
        "The value written. A plain number with a leading zero (`010`) is refused: YAML 1.1, \
         which Ansible uses, reads it as octal; quote it.";
}

/// The keys written at `place`, in order.
pub fn at(place: Place) -> impl Iterator<Item = &'static Key> {
    KEYS.iter().filter(move |k| k.place == place)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_declared_once_per_place_and_every_place_has_keys() {
        for (i, k) in KEYS.iter().enumerate() {
            assert!(
                !KEYS[..i]
                    .iter()
                    .any(|o| o.name == k.name && o.place == k.place),
                "{} declared twice at {:?}",
                k.name,
                k.place
            );
            assert!(
                !k.about.is_empty(),
                "{} says nothing of what it is for",
                k.name
            );
            assert_eq!(
                k.required,
                k.default.is_none(),
                "{}: required xor a default",
                k.name
            );
            assert_eq!(
                matches!(k.form, Form::Choice(_)),
                k.value.is_empty(),
                "{}: a choice's value is its words; any other form says its value",
                k.name
            );
        }
        for p in Place::ALL {
            assert!(at(*p).next().is_some(), "{p:?}");
        }
    }

    /// An integer key's declared bound is the one its type enforces.
    #[test]
    fn an_integer_key_declares_the_bound_its_type_holds() {
        use crate::mapping::types::{Mapping, ServiceLevel, TrafficClass, VirtualLane};
        let bound = |k: &Key| match k.form {
            Form::Integer(max) => max,
            other => panic!("{} is {other:?}", k.name),
        };
        assert_eq!(bound(&SERVICE_LEVEL), u64::from(ServiceLevel::MAX));
        assert_eq!(bound(&VIRTUAL_LANE), u64::from(VirtualLane::MAX));
        assert_eq!(bound(&TRAFFIC_CLASS), u64::from(TrafficClass::MAX));
        assert_eq!(
            bound(&FAIL_JOB_MAX_PROBE_AGE),
            Mapping::MAX_FAIL_JOB_MAX_PROBE_AGE.as_secs()
        );
        assert_eq!(
            FAIL_JOB_MAX_PROBE_AGE.default_value(),
            Some(
                Mapping::DEFAULT_FAIL_JOB_MAX_PROBE_AGE
                    .as_secs()
                    .to_string()
                    .as_str()
            )
        );
        let integers = KEYS.iter().filter(|k| matches!(k.form, Form::Integer(_)));
        assert_eq!(
            integers.count(),
            4,
            "a new integer key: hold its bound here"
        );
    }
}
