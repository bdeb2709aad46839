//! The environment a level gives a job's libraries, as TaskProlog lines.

use crate::mapping::Level;

/// `(NAME, VALUE)` pairs for a granted level, in a fixed order.
pub fn for_level(level: &Level) -> Vec<(&'static str, String)> {
    let sl = level.service_level.to_string();
    let mut v = vec![
        ("UCX_IB_SL", sl.clone()),
        ("NCCL_IB_SL", sl.clone()),
        ("OMPI_MCA_btl_openib_ib_service_level", sl.clone()),
        ("MV2_DEFAULT_SERVICE_LEVEL", sl),
        ("QOSLANE_LEVEL", level.name.clone()),
    ];
    if let Some(tc) = level.traffic_class {
        v.push(("UCX_IB_TRAFFIC_CLASS", tc.to_string()));
        v.push(("NCCL_IB_TC", tc.to_string()));
    }
    v
}

/// Renders pairs as Slurm's TaskProlog protocol: `export NAME=VALUE` lines.
/// Values are validated names and numbers: no quoting is needed (Slurm takes
/// the value verbatim).
pub fn render(pairs: &[(impl AsRef<str>, impl AsRef<str>)]) -> String {
    let mut s = String::new();
    for (k, v) in pairs {
        s.push_str("export ");
        s.push_str(k.as_ref());
        s.push('=');
        s.push_str(v.as_ref());
        s.push('\n');
    }
    s
}
