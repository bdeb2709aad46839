#!/usr/bin/env python3
"""N jobs' Prolog+Epilog pairs launched at once on one node (what slurmd does
when N jobs start together): every pair runs `qoslane prolog` then
`qoslane epilog` for its own job id; all N start behind one barrier.

Checks: every run exits 0 within the deadline, the audit has N prologs
`applied` and N epilogs `reverted`/`unchanged` and nothing failed, the
counters counted every run, and the node ends at its baseline (the caller
checks settings files). Appends a row to OUT/results.jsonl.

  storm.py OUT ROOT QOSLANE N --via env|squeue --driver STORM [--timeout-ms 3000]

The processes are started by bench/tools/storm.rs (compiled by run.sh):
a Python driver's own cost was a quarter of what it measured.
"""
import argparse
import json
import os
import statistics as st
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from record import pct  # noqa: E402


def qos_names(mapping):
    out = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "qos_names.py"), mapping],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


def runs_total(counters, event, outcomes):
    try:
        c = json.load(open(counters))
    except FileNotFoundError:
        return 0
    return sum(c.get("runs", {}).get(event, {}).get(o, 0) for o in outcomes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("root")
    ap.add_argument("qoslane")
    ap.add_argument("n", type=int)
    ap.add_argument("--via", choices=["env", "squeue"], default="env")
    ap.add_argument("--timeout-ms", type=int, default=3000)
    ap.add_argument("--first-job", type=int, default=200001)
    ap.add_argument("--driver", required=True, help="bench/tools/storm.rs, compiled")
    a = ap.parse_args()

    audit = os.path.join(a.root, "var/log/qoslane/audit.jsonl")
    counters = os.path.join(a.root, "var/lib/qoslane/counters.json")
    start_line = sum(1 for _ in open(audit)) if os.path.exists(audit) else 0
    before = {
        "prolog": runs_total(counters, "prolog", ["applied", "unchanged", "rolled_back", "failed", "reverted"]),
        "epilog": runs_total(counters, "epilog", ["applied", "unchanged", "rolled_back", "failed", "reverted"]),
    }
    names = qos_names(os.path.join(a.root, "etc/qoslane/qos-network.yml"))
    env = dict(os.environ, QOSLANE_TIMEOUT_MS=str(a.timeout_ms))
    out = subprocess.run([a.driver, a.qoslane, str(a.n), str(a.first_job), a.via] + names,
                         env=env, capture_output=True, text=True, check=True).stdout
    results = []
    errs = {}
    for line in out.splitlines():
        if line.startswith("stderr "):
            job, text = line[len("stderr "):].split(": ", 1)
            errs[int(job)] = text
            continue
        job, s0, s1, s2, pc, ec, _ = line.split()
        results.append((int(s0) / 1e6, int(s1) / 1e6, int(s2) / 1e6, int(pc), int(ec), int(job)))
    results = [(t0, t1, t2, pc, ec, errs.get(job, "")) for (t0, t1, t2, pc, ec, job) in results]

    t_start = min(r[0] for r in results)
    t_end = max(r[2] for r in results)
    prolog_ms = [(r[1] - r[0]) * 1000 for r in results]
    epilog_ms = [(r[2] - r[1]) * 1000 for r in results]
    problems = []
    for i, r in enumerate(results):
        if r[3] != 0 or r[4] != 0:
            problems.append(f"job {a.first_job + i}: exit {r[3]}/{r[4]}: {r[5].strip()[:200]}")
    worst = max(prolog_ms + epilog_ms)
    if worst >= a.timeout_ms:
        problems.append(f"a run took {worst:.0f} ms, past the {a.timeout_ms} ms deadline")

    # What the runs said about themselves.
    outcomes = {"prolog": {}, "epilog": {}}
    durations = []
    with open(audit) as f:
        for k, line in enumerate(f):
            # An empty line is what two appenders that both took the tail
            # for torn leave (nodeio/append.rs); qoslane's readers skip it.
            if k < start_line or not line.strip():
                continue
            e = json.loads(line)
            ev = e["event"]
            outcomes.setdefault(ev, {})
            outcomes[ev][e["outcome"]] = outcomes[ev].get(e["outcome"], 0) + 1
            if ev in ("prolog", "epilog"):
                durations.append(e["duration_ms"])
            if e["outcome"] in ("failed", "rolled_back") or ev == "recover":
                problems.append(f"audit: {ev} job {e.get('job_id')} {e['outcome']}: {e.get('error')}")
    if outcomes["prolog"].get("applied", 0) != a.n:
        problems.append(f"audit: {outcomes['prolog']} prologs, want {a.n} applied")
    if outcomes["epilog"].get("reverted", 0) + outcomes["epilog"].get("unchanged", 0) != a.n:
        problems.append(f"audit: {outcomes['epilog']} epilogs, want {a.n} reverted/unchanged")
    after = {
        "prolog": runs_total(counters, "prolog", ["applied", "unchanged", "rolled_back", "failed", "reverted"]),
        "epilog": runs_total(counters, "epilog", ["applied", "unchanged", "rolled_back", "failed", "reverted"]),
    }
    for ev in ("prolog", "epilog"):
        if after[ev] - before[ev] != a.n:
            problems.append(f"counters: {after[ev] - before[ev]} {ev} runs counted, want {a.n}")
    jobs = os.path.join(a.root, "run/qoslane/jobs")
    left = [f for f in os.listdir(jobs) if f.endswith(".json")]
    if left:
        problems.append(f"{len(left)} job records left")
    if os.path.exists(os.path.join(a.root, "run/qoslane/journal.json")):
        problems.append("journal left")

    # The textfile the last run published agrees with the counters.
    textfile = os.path.join(a.root, "var/lib/prometheus/node-exporter/qoslane.prom")
    shown = {"prolog": 0, "epilog": 0}
    with open(textfile) as f:
        for line in f:
            for ev in shown:
                if line.startswith(f'qoslane_hook_runs_total{{event="{ev}"'):
                    shown[ev] += int(float(line.split()[-1]))
            if line.startswith("qoslane_active_jobs{") and float(line.split()[-1]) != 0:
                problems.append(f"textfile: {line.strip()} after every job ended")
    for ev in shown:
        if shown[ev] != after[ev]:
            problems.append(f"textfile shows {shown[ev]} {ev} runs, counters.json {after[ev]}")

    row = {
        "section": "storm",
        "label": f"{a.n} prolog+epilog pairs at once (QoS via {a.via})",
        "n": a.n,
        "via": a.via,
        "total_wall_ms": (t_end - t_start) * 1000,
        "prolog_ms": {"median": st.median(prolog_ms), "p95": pct(prolog_ms, 95), "max": max(prolog_ms)},
        "epilog_ms": {"median": st.median(epilog_ms), "p95": pct(epilog_ms, 95), "max": max(epilog_ms)},
        "in_process_ms": {"median": st.median(durations), "max": max(durations)} if durations else None,
        "deadline_ms": a.timeout_ms,
        "outcomes": outcomes,
        "problems": problems,
        "load1": float(open("/proc/loadavg").read().split()[0]),
    }
    with open(os.path.join(a.out, "results.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps({k: row[k] for k in ("label", "total_wall_ms", "prolog_ms", "epilog_ms", "problems")}))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
