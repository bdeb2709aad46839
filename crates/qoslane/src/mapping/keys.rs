//! Every key of the mapping file, declared once: where it is written, what
//! its value is, whether it is required, one line of what it is for. The
//! validator's known keys, its "did you mean" suggestions, its "has no
//! `KEY`" errors and the words a choice accepts come from here; the
//! integration tests check each key against the man page
//! (qoslane-mapping(5)), the admin guide, the fuzz dictionary, the shipped
//! example and the Omnia input (CONTRIBUTING.md: "Adding a mapping key").

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
}

impl Place {
    pub const ALL: &[Place] = &[Self::Top, Self::Level, Self::NodeSetting];

    /// The mapping that holds such keys, as a message names it.
    pub fn what(self) -> &'static str {
        match self {
            Self::Top => "the mapping file",
            Self::Level => "a level",
            Self::NodeSetting => "a node setting",
        }
    }

    /// The same, when a message points at one (`this level has no …`).
    pub fn this(self) -> &'static str {
        match self {
            Self::Top => "the mapping file",
            Self::Level => "this level",
            Self::NodeSetting => "this node setting",
        }
    }
}

/// What a key's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// A name: 1 to 64 letters, digits, `_`, `-`, `.`.
    Name,
    /// An integer from 0 to a bound.
    Integer,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// A string (one line).
    Text,
    /// A list (of names, devices, levels or node settings).
    List,
}

/// One key of the mapping file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub name: &'static str,
    pub place: Place,
    pub form: Form,
    pub required: bool,
    /// What it is for, in one line.
    pub doc: &'static str,
}

/// Declares each key as a constant (for the validator to read it by) and
/// every key, in order, as [`KEYS`].
macro_rules! keys {
    ($($(#[$m:meta])* $id:ident = $name:literal, $place:ident, $form:expr, $required:literal, $doc:literal;)*) => {
        $(
            $(#[$m])*
            pub const $id: Key = Key {
                name: $name,
                place: Place::$place,
                form: $form,
                required: $required,
                doc: $doc,
            };
        )*
        /// Every key, in the order the messages list them (per place).
        pub const KEYS: &[Key] = &[$($id),*];
    };
}

keys! {
    DEFAULT_LEVEL = "default_level", Top, Form::Name, true,
        "the level of a job whose QoS no level lists";
    FABRIC_CHECK = "fabric_check", Top, Form::Choice(FabricCheck::NAMES), false,
        "what a level the fabric does not carry gets: refused, warned about, not probed";
    FAIL_JOB_MAX_PROBE_AGE = "fail_job_max_probe_age", Top, Form::Integer, false,
        "the oldest cached fabric probe, in seconds, a fail_job level is granted on";
    ON_FAILURE = "on_failure", Top, Form::Choice(OnFailure::NAMES), false,
        "what a Prolog that cannot grant a level does: run on the baseline or fail";
    ON_UNKNOWN_QOS = "on_unknown_qos", Top, Form::Choice(OnUnknownQos::NAMES), false,
        "what a job whose QoS cannot be learnt gets: the default level, or refused";
    DEVICES = "devices", Top, Form::List, false,
        "the HCA ports checked (DEVICE or DEVICE/PORT); none: every active port";
    LEVELS = "levels", Top, Form::List, true,
        "the levels, highest priority first";
    NAME = "name", Level, Form::Name, true,
        "the level's name, unique";
    QOS = "qos", Level, Form::List, true,
        "the Slurm QoS names of the level, each in one level only";
    SERVICE_LEVEL = "service_level", Level, Form::Integer, true,
        "the InfiniBand SL (0 to 15), distinct across levels";
    VIRTUAL_LANE = "virtual_lane", Level, Form::Integer, false,
        "the VL (0 to 14) the Subnet Manager must map the SL to";
    TRAFFIC_CLASS = "traffic_class", Level, Form::Integer, false,
        "the traffic class (0 to 255) exported to the job's libraries";
    /// The level's own `on_failure`: the top-level one overridden.
    LEVEL_ON_FAILURE = "on_failure", Level, Form::Choice(OnFailure::NAMES), false,
        "the top-level on_failure, for this level";
    NODE_SETTINGS = "node_settings", Level, Form::List, false,
        "kernel settings written while a job of the level runs";
    PATH = "path", NodeSetting, Form::Text, true,
        "the setting's file: absolute, normalised, under /sys/ or /proc/sys/";
    VALUE = "value", NodeSetting, Form::Text, true,
        "the value written, one line";
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
            assert!(!k.doc.is_empty(), "{} has no doc line", k.name);
        }
        for p in Place::ALL {
            assert!(at(*p).next().is_some(), "{p:?}");
        }
    }
}
