//! The least a Rust hook with qoslane's guarantees does: `bench/tools/floor.c`
//! in Rust, std only (see that file: the minimal shell Prolog's job plus
//! the node lock, the journal, the setting read back, the job's record
//! renamed into place, the audit line flushed and the textfile replaced).
//! Not qoslane: a yardstick of what a Rust process doing only that costs
//! on the machine (`bench/yardstick.sh --floor`). Paths under `HAND_ROOT`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

fn replace(path: &Path, text: &str) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    drop(f);
    fs::rename(&tmp, path)
}

fn write_verified(path: &Path, value: &str) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?
        .write_all(value.as_bytes())?;
    let mut got = String::new();
    File::open(path)?.read_to_string(&mut got)?;
    if got == value {
        Ok(())
    } else {
        Err(io::Error::other(format!("read back {got:?}")))
    }
}

fn run() -> io::Result<()> {
    let root = PathBuf::from(std::env::var_os("HAND_ROOT").unwrap_or_default());
    let job = std::env::var("SLURM_JOB_ID").map_err(io::Error::other)?;
    let prolog =
        std::env::var("SLURM_SCRIPT_CONTEXT").map_err(io::Error::other)? == "prolog_slurmd";
    let qos = std::env::var("SLURM_JOB_QOS").unwrap_or_default();
    let (sl, tos) = match qos.as_str() {
        "mission-critical" => (3, Some("106\n")),
        "high" => (2, Some("74\n")),
        _ => (1, None),
    };
    let base = format!(
        "{}\n",
        std::env::var("HAND_BASE_TOS").unwrap_or_else(|_| "0".into())
    );
    let setting = root.join("sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos");
    let dir = root.join("run/qos-prolog");
    let record = dir.join(&job);
    let journal = dir.join(".journal");

    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(dir.join(".lock"))?;
    lock.lock()?;
    let value = if prolog { tos } else { Some(base.as_str()) };
    if let Some(value) = value {
        replace(
            &journal,
            &format!(
                "{{\"job\":{job},\"setting\":\"{}\",\"old\":{base:?}}}\n",
                setting.display()
            ),
        )?;
        write_verified(&setting, value)?;
    }
    if prolog {
        replace(&record, &format!("UCX_IB_SL={sl} NCCL_IB_SL={sl}\n"))?;
    } else {
        let _ = fs::remove_file(&record);
    }
    if value.is_some() {
        fs::remove_file(&journal)?;
    }
    drop(lock);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let event = if prolog { "prolog" } else { "epilog" };
    let mut audit = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .open(root.join("var/log/qos-floor-rs.jsonl"))?;
    audit.write_all(
        format!(
            "{{\"time\":{now},\"event\":\"{event}\",\"job\":{job},\"qos\":\"{qos}\",\"sl\":{sl}}}\n"
        )
        .as_bytes(),
    )?;
    audit.sync_data()?;
    replace(
        &root.join("var/lib/qos-floor-rs.prom"),
        &format!("qos_floor_runs_total{{event=\"{event}\"}} 1\n"),
    )
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(io::stderr(), "floor: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
