//! Log lines also reach the systemd journal (Slurm does not keep a Prolog's stderr).

use std::os::unix::net::UnixDatagram;

use crate::util::Fixture;

fn records(socket: &UnixDatagram) -> Vec<String> {
    socket.set_nonblocking(true).expect("nonblocking");
    let mut records = Vec::new();
    let mut buffer = vec![0u8; 65536];
    while let Ok(n) = socket.recv(&mut buffer) {
        records.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
    }
    records
}

#[test]
fn every_line_goes_to_the_journal_with_its_fields() {
    let fx = Fixture::new();
    let path = fx.path("run/systemd/journal/socket");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let journal = UnixDatagram::bind(&path).expect("bind a fake journal");
    fx.hook("prolog", "10-ok", "echo 'setting up'");
    fx.hook("prolog", "20-flaky.optional", "exit 3");

    let run = fx
        .hookrun()
        .args(["prolog"])
        .env("SLURM_JOB_ID", "42")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);

    let records = records(&journal);
    let find = |needle: &str| {
        records
            .iter()
            .find(|r| r.contains(needle))
            .unwrap_or_else(|| panic!("no record with {needle:?} in {records:#?}"))
    };
    let ok = find("MESSAGE=hookrun[prolog] 10-ok: ok in ");
    for field in [
        "PRIORITY=6\n",
        "SYSLOG_IDENTIFIER=hookrun\n",
        "HOOKRUN_PHASE=prolog\n",
        "HOOKRUN_HOOK=10-ok\n",
        "SLURM_JOB_ID=42\n",
    ] {
        assert!(ok.contains(field), "{field:?} missing in {ok:?}");
    }
    find("MESSAGE=hookrun[prolog] 10-ok> setting up\n");
    let failed = find("MESSAGE=hookrun[prolog] 20-flaky.optional: failed in ");
    assert!(failed.contains("PRIORITY=4\n"), "{failed:?}");
    // Every stderr line has its record.
    assert_eq!(records.len(), run.stderr.lines().count(), "{records:#?}");
}

#[test]
fn without_a_journal_socket_stderr_is_enough() {
    let fx = Fixture::new();
    fx.hook("prolog", "10-ok", "");
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.has_line("10-ok: ok in"));
}
