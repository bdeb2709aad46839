//! What the job's libraries read, declared once: every environment
//! variable the TaskProlog may export for a level ([`TABLE`]), by library,
//! with what it carries (the level's SL or its traffic class) and the link
//! layers it belongs on. `job/exports.rs` renders a level's exports from it
//! (a site's `exports:` edits applied, the node's link layers filtering);
//! the mapping's `exports:` key is checked against it; the admin guide's
//! table is rendered from it (`mapping/keydocs.rs`, part `libraries`).
//! Pure.
//!
//! Each entry names where its meaning was read (the library's repository
//! and file): a variable is listed only once its own source or
//! documentation says what it does. A traffic class belongs on RoCE ports
//! only: on a native InfiniBand port NVSHMEM's IBGDA path fails with one
//! set (NVIDIA/nvshmem#45), and the GRH it marks is absent there anyway.

use std::fmt;

/// What a variable carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Carries {
    /// The level's `service_level`.
    ServiceLevel,
    /// The level's `traffic_class` (a level without one exports nothing).
    TrafficClass,
    /// `1`, only when the level takes each path record's SL (`path_sl:
    /// path_record` on a fabric whose SM gives paths their own SLs, its
    /// pinned SL closing a credit loop): the library asks the SA for the
    /// SL of each connection's path; no pinned SL is exported then.
    PathRecord,
}

impl Carries {
    /// The words the mapping's `exports.add[].value` takes.
    pub const NAMES: &[&str] = &["sl", "traffic_class", "path_record"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "sl" => Some(Self::ServiceLevel),
            "traffic_class" => Some(Self::TrafficClass),
            "path_record" => Some(Self::PathRecord),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ServiceLevel => "sl",
            Self::TrafficClass => "traffic_class",
            Self::PathRecord => "path_record",
        }
    }
}

/// The link layers a variable belongs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layers {
    /// Native InfiniBand ports only.
    InfiniBand,
    /// RoCE (Ethernet) ports only.
    Roce,
    /// Either.
    Both,
}

impl Layers {
    /// The words the mapping's `exports.add[].link_layer` takes.
    pub const NAMES: &[&str] = &["infiniband", "roce", "both"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "infiniband" => Some(Self::InfiniBand),
            "roce" => Some(Self::Roce),
            "both" => Some(Self::Both),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::InfiniBand => "infiniband",
            Self::Roce => "roce",
            Self::Both => "both",
        }
    }

    /// Whether a variable of these layers belongs on a node whose job's
    /// ports are `ports`: only when every one of them is of a layer it
    /// belongs on. A node with no known port (no HCA in sysfs) excludes
    /// nothing.
    pub fn fit(self, ports: PortLayers) -> bool {
        match self {
            Self::Both => true,
            Self::InfiniBand => !ports.roce,
            Self::Roce => !ports.infiniband,
        }
    }
}

impl fmt::Display for Layers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::InfiniBand => "InfiniBand",
            Self::Roce => "RoCE",
            Self::Both => "InfiniBand and RoCE",
        })
    }
}

/// The link layers of a job's ports on this node (the ACTIVE ports the
/// mapping's `devices:` selects, from sysfs `link_layer`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortLayers {
    pub infiniband: bool,
    pub roce: bool,
}

/// One variable a library reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Export {
    pub library: &'static str,
    pub variable: &'static str,
    pub carries: Carries,
    pub layers: Layers,
    /// Where its meaning was read: repository and file.
    pub source: &'static str,
}

/// The variable that names the level itself (exported whenever a level is
/// granted; not a library's, never dropped).
pub const LEVEL_VARIABLE: &str = "QOSLANE_LEVEL";

/// Every variable qoslane exports by default, in the order the TaskProlog
/// prints them (service levels first, then traffic classes, then the
/// path-record switches).
pub const TABLE: &[Export] = &[
    // openucx/ucx src/uct/ib/base/ib_iface.c: "SL" of uct_ib_iface_config_table
    // (prefix UCX_IB_): "IB Service Level / RoCEv2 Ethernet Priority".
    Export {
        library: "UCX",
        variable: "UCX_IB_SL",
        carries: Carries::ServiceLevel,
        layers: Layers::Both,
        source: "openucx/ucx src/uct/ib/base/ib_iface.c",
    },
    // NVIDIA/nccl src/transport/net_ib.cc: NCCL_PARAM(IbSl, "IB_SL"), the
    // QP's ah_attr.sl on IB and RoCE.
    Export {
        library: "NCCL",
        variable: "NCCL_IB_SL",
        carries: Carries::ServiceLevel,
        layers: Layers::Both,
        source: "NVIDIA/nccl src/transport/net_ib.cc",
    },
    // open-mpi/ompi (v4.1.x) opal/mca/btl/openib/btl_openib_mca.c:
    // reg_uint("ib_service_level", "InfiniBand service level"); the openib
    // BTL is gone from Open MPI 5 (tests/e2e/libraries.sh asserts both).
    Export {
        library: "Open MPI (openib BTL)",
        variable: "OMPI_MCA_btl_openib_ib_service_level",
        carries: Carries::ServiceLevel,
        layers: Layers::Both,
        source: "open-mpi/ompi opal/mca/btl/openib/btl_openib_mca.c",
    },
    // MVAPICH2 src/mpid/ch3/channels/mrail/src/gen2/ibv_param.c:
    // getenv("MV2_DEFAULT_SERVICE_LEVEL") → rdma_default_service_level; its
    // user guide: the RoCE priority too (MV2_USE_RoCE).
    Export {
        library: "MVAPICH2",
        variable: "MV2_DEFAULT_SERVICE_LEVEL",
        carries: Carries::ServiceLevel,
        layers: Layers::Both,
        source: "MVAPICH2 src/mpid/ch3/channels/mrail/src/gen2/ibv_param.c",
    },
    // NVIDIA/nvshmem src/modules/transport/common/env_defs.h: IB_SL, "Service
    // level to use over IB/ROCE" (ibrc, ibdevx, ibgda).
    Export {
        library: "NVSHMEM",
        variable: "NVSHMEM_IB_SL",
        carries: Carries::ServiceLevel,
        layers: Layers::Both,
        source: "NVIDIA/nvshmem src/modules/transport/common/env_defs.h",
    },
    // openucx/ucc src/components/tl/mlx5/tl_mlx5.c: "QP_SL", "IB QP Service
    // Level" (prefix UCC_ + TL_MLX5_; ah_attr.sl in tl_mlx5_ib.c).
    Export {
        library: "UCC (TL/MLX5)",
        variable: "UCC_TL_MLX5_QP_SL",
        carries: Carries::ServiceLevel,
        layers: Layers::Both,
        source: "openucx/ucc src/components/tl/mlx5/tl_mlx5.c",
    },
    // kvcache-ai/Mooncake mooncake-transfer-engine/src/config.cpp: MC_IB_SL,
    // 0-15, into ah_attr.sl (transport/rdma_transport/rdma_endpoint.cpp).
    Export {
        library: "Mooncake",
        variable: "MC_IB_SL",
        carries: Carries::ServiceLevel,
        layers: Layers::Both,
        source: "kvcache-ai/Mooncake mooncake-transfer-engine/src/config.cpp",
    },
    // ROCm/TransferBench src/client/EnvVars.hpp (pull request 315, merged
    // 2026-05-26): NIC_SERVICE_LEVEL, ah_attr.sl on IB and RoCE.
    Export {
        library: "TransferBench (ROCm)",
        variable: "NIC_SERVICE_LEVEL",
        carries: Carries::ServiceLevel,
        layers: Layers::Both,
        source: "ROCm/TransferBench src/client/EnvVars.hpp",
    },
    // deepseek-ai/DeepEP deep_ep/buffers/elastic.py: "sl_idx: the RDMA
    // service level index, can be overridden by EP_OVERRIDE_RDMA_SL"; it
    // becomes NCCL GIN's traffic class field (csrc/kernels/backend/nccl.cu),
    // an SL on InfiniBand only: not exported on RoCE.
    Export {
        library: "DeepEP",
        variable: "EP_OVERRIDE_RDMA_SL",
        carries: Carries::ServiceLevel,
        layers: Layers::InfiniBand,
        source: "deepseek-ai/DeepEP deep_ep/buffers/elastic.py",
    },
    // openucx/ucx src/uct/ib/base/ib_iface.c: "TRAFFIC_CLASS", "IB Traffic
    // Class / RoCEv2 Differentiated Services Code Point (DSCP)".
    Export {
        library: "UCX",
        variable: "UCX_IB_TRAFFIC_CLASS",
        carries: Carries::TrafficClass,
        layers: Layers::Roce,
        source: "openucx/ucx src/uct/ib/base/ib_iface.c",
    },
    // NVIDIA/nccl src/transport/net_ib.cc: NCCL_PARAM(IbTc, "IB_TC"), the
    // GRH traffic class.
    Export {
        library: "NCCL",
        variable: "NCCL_IB_TC",
        carries: Carries::TrafficClass,
        layers: Layers::Roce,
        source: "NVIDIA/nccl src/transport/net_ib.cc",
    },
    // NVIDIA/nvshmem src/modules/transport/common/env_defs.h:
    // IB_TRAFFIC_CLASS, "Traffic class for ROCE"; on native IB its IBGDA
    // path fails with one (NVIDIA/nvshmem#45).
    Export {
        library: "NVSHMEM",
        variable: "NVSHMEM_IB_TRAFFIC_CLASS",
        carries: Carries::TrafficClass,
        layers: Layers::Roce,
        source: "NVIDIA/nvshmem src/modules/transport/common/env_defs.h",
    },
    // kvcache-ai/Mooncake mooncake-transfer-engine/src/config.cpp: MC_IB_TC,
    // the GRH traffic class (rdma_endpoint.cpp).
    Export {
        library: "Mooncake",
        variable: "MC_IB_TC",
        carries: Carries::TrafficClass,
        layers: Layers::Roce,
        source: "kvcache-ai/Mooncake mooncake-transfer-engine/src/config.cpp",
    },
    // ROCm/TransferBench src/client/EnvVars.hpp (pull request 315):
    // NIC_TRAFFIC_CLASS, grh.traffic_class, RoCE only.
    Export {
        library: "TransferBench (ROCm)",
        variable: "NIC_TRAFFIC_CLASS",
        carries: Carries::TrafficClass,
        layers: Layers::Roce,
        source: "ROCm/TransferBench src/client/EnvVars.hpp",
    },
    // MVAPICH2 src/mpid/ch3/channels/mrail/src/gen2/ibv_param.c:
    // getenv("MV2_PATH_SL_QUERY") → rdma_path_sl_query (ENABLE_QOS_SUPPORT);
    // rdma_iba_priv.c looks each connection's SL up in the SA's path record
    // when it is set, never on RoCE (`!use_iboeth`).
    Export {
        library: "MVAPICH2",
        variable: "MV2_PATH_SL_QUERY",
        carries: Carries::PathRecord,
        layers: Layers::InfiniBand,
        source: "MVAPICH2 src/mpid/ch3/channels/mrail/src/gen2/ibv_param.c",
    },
    // open-mpi/ompi (v4.1.x) opal/mca/btl/openib/btl_openib_mca.c:
    // reg "ib_path_record_service_level", "Enable getting InfiniBand service
    // level from PathRecord" (built with --enable-openib-dynamic-sl).
    Export {
        library: "Open MPI (openib BTL)",
        variable: "OMPI_MCA_btl_openib_ib_path_record_service_level",
        carries: Carries::PathRecord,
        layers: Layers::InfiniBand,
        source: "open-mpi/ompi opal/mca/btl/openib/btl_openib_mca.c",
    },
];

/// The table's entry for `variable`, if any.
pub fn find(variable: &str) -> Option<&'static Export> {
    TABLE.iter().find(|e| e.variable == variable)
}

/// The longest name a site may add.
pub const MAX_VARIABLE_LEN: usize = 64;

/// Why a name a site adds cannot be exported, if it cannot: an environment
/// variable's name (`A-Z`, digits and `_`, not starting with a digit; lower
/// case too, as `OMPI_MCA_…` needs), and none that changes what a process
/// loads or runs, nor Slurm's, nor qoslane's own.
pub fn refuse_site_variable(name: &str) -> Option<String> {
    let shaped = !name.is_empty()
        && name.len() <= MAX_VARIABLE_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if !shaped {
        return Some(format!(
            "`{}` is not an environment variable's name (letters, digits and `_`, at most {MAX_VARIABLE_LEN}, not starting with a digit)",
            name.escape_debug()
        ));
    }
    let upper = name.to_ascii_uppercase();
    const DENIED_PREFIXES: &[&str] = &["LD_", "SLURM", "QOSLANE", "MALLOC_", "GLIBC_"];
    const DENIED: &[&str] = &[
        "PATH",
        "HOME",
        "SHELL",
        "USER",
        "LOGNAME",
        "IFS",
        "ENV",
        "BASH_ENV",
        "PYTHONPATH",
        "PYTHONHOME",
        "PERL5LIB",
        "TMPDIR",
        "LANG",
        "TZ",
    ];
    if DENIED.contains(&upper.as_str()) || DENIED_PREFIXES.iter().any(|p| upper.starts_with(p)) {
        return Some(format!(
            "`{name}` is not a library's SL or traffic-class variable: it changes what a task loads or runs, or is Slurm's or qoslane's"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_each_variable_once_with_its_source() {
        for (i, e) in TABLE.iter().enumerate() {
            assert!(
                !TABLE[..i].iter().any(|o| o.variable == e.variable),
                "{} twice",
                e.variable
            );
            assert!(e.source.contains('/') && e.source.contains(' '), "{e:?}");
            assert_eq!(refuse_site_variable(e.variable), None, "{e:?}");
            assert_ne!(e.variable, LEVEL_VARIABLE);
        }
        assert_eq!(
            find("NCCL_IB_TC").map(|e| e.carries),
            Some(Carries::TrafficClass)
        );
        assert_eq!(find("QOSLANE_LEVEL"), None);
    }

    /// A traffic class never belongs on a native InfiniBand port
    /// (NVIDIA/nvshmem#45).
    #[test]
    fn every_traffic_class_is_for_roce_ports_only() {
        for e in TABLE.iter().filter(|e| e.carries == Carries::TrafficClass) {
            assert_eq!(e.layers, Layers::Roce, "{e:?}");
        }
    }

    #[test]
    fn a_variable_fits_a_node_whose_every_port_is_of_its_layers() {
        let ib = PortLayers {
            infiniband: true,
            roce: false,
        };
        let roce = PortLayers {
            infiniband: false,
            roce: true,
        };
        let mixed = PortLayers {
            infiniband: true,
            roce: true,
        };
        let none = PortLayers::default();
        assert!(Layers::Both.fit(ib) && Layers::Both.fit(roce) && Layers::Both.fit(mixed));
        assert!(Layers::Roce.fit(roce) && !Layers::Roce.fit(ib) && !Layers::Roce.fit(mixed));
        assert!(Layers::InfiniBand.fit(ib) && !Layers::InfiniBand.fit(roce));
        assert!(!Layers::InfiniBand.fit(mixed));
        assert!(Layers::Roce.fit(none) && Layers::InfiniBand.fit(none));
    }

    #[test]
    fn a_site_variable_is_a_plain_name_that_changes_nothing_else() {
        assert_eq!(refuse_site_variable("MY_LIB_SL"), None);
        assert_eq!(refuse_site_variable("OMPI_MCA_x_sl"), None);
        for bad in [
            "",
            "1X",
            "A-B",
            "A B",
            "LD_PRELOAD",
            "ld_library_path",
            "PATH",
            "SLURM_JOB_ID",
            "QOSLANE_LEVEL",
        ] {
            assert!(refuse_site_variable(bad).is_some(), "{bad}");
        }
        assert!(refuse_site_variable(&"A".repeat(65)).is_some());
    }

    #[test]
    fn the_words_parse_back() {
        for w in Carries::NAMES {
            assert_eq!(Carries::parse(w).map(Carries::as_str), Some(*w));
        }
        for w in Layers::NAMES {
            assert_eq!(Layers::parse(w).map(Layers::as_str), Some(*w));
        }
    }
}
