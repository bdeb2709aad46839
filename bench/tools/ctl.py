#!/usr/bin/env python3
"""The controller's view: a QoS lookup under C concurrent callers, each making
K calls back to back, each call a fresh process (as in a Prolog): `scontrol
show job -o ID`, or (`--query squeue`) `squeue -h -j ID -o %q --local`, what every
node's Prolog runs on Slurm before 26.05. `--chroot DIR` runs it inside a
chroot rig (rigs/slurm_chroot_rig.sh; chroot(8) adds one exec per call).
Records per-call latency (process start to exit, as the Prolog sees it) and
the throughput the controller sustained. Appends a row per C to
OUT/results.jsonl.

  ctl.py OUT JOBID --callers 1,16,64 --calls 20 [--scontrol /usr/bin/scontrol]
         [--query scontrol|squeue] [--chroot DIR]
"""
import argparse
import json
import os
import statistics as st
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from record import pct  # noqa: E402


# what a Prolog has: no PATH of the caller's, nothing else
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("job")
    ap.add_argument("--callers", default="1,16,64")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--scontrol", default="/usr/bin/scontrol")
    ap.add_argument("--query", choices=["scontrol", "squeue"], default="scontrol")
    ap.add_argument("--chroot", default=None)
    a = ap.parse_args()
    if a.query == "squeue":
        argv = ["/usr/bin/squeue", "-h", "-j", a.job, "-o", "%q", "--local"]
        good = lambda out: out.strip() != "" and " " not in out.strip()  # noqa: E731
    else:
        argv = [a.scontrol, "show", "job", "-o", a.job]
        good = lambda out: " QOS=" in out  # noqa: E731
    if a.chroot:
        argv = ["/usr/sbin/chroot", a.chroot] + argv
    for c in [int(x) for x in a.callers.split(",")]:
        lat = []
        errors = []
        lock = threading.Lock()
        barrier = threading.Barrier(c)

        def caller():
            barrier.wait()
            for _ in range(a.calls):
                t = time.monotonic()
                p = subprocess.run(argv, capture_output=True, text=True, env=ENV)
                d = (time.monotonic() - t) * 1000
                with lock:
                    lat.append(d)
                    if p.returncode != 0 or not good(p.stdout):
                        errors.append(p.stderr.strip()[:200] or f"exit {p.returncode}")

        threads = [threading.Thread(target=caller) for _ in range(c)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
        row = {
            "section": "controller",
            "label": f"{c} concurrent caller(s)",
            "query": a.query,
            "callers": c,
            "calls": len(lat),
            "latency_ms": {"median": st.median(lat), "p25": pct(lat, 25), "p75": pct(lat, 75),
                           "p95": pct(lat, 95), "max": max(lat), "min": min(lat)},
            "throughput_per_s": len(lat) / wall,
            "errors": len(errors),
            "error_sample": errors[:3],
            "load1": float(open("/proc/loadavg").read().split()[0]),
        }
        with open(os.path.join(a.out, "results.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row))


if __name__ == "__main__":
    main()
