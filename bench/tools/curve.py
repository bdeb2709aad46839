#!/usr/bin/env python3
"""A growth curve measured interleaved: every iteration runs the hook once on
each fixture node in turn (after the opposite hook, so each measured Prolog is
a real grant and each Epilog a real release), so load that comes and goes on
a shared machine hits every point of the curve alike. Times are wall times of
the whole process (posix_spawn to exit), like hyperfine -N. Each node's
environment is its bench.env plus the KEY=VAL given; the job id is 7.

Checks each node's audit: every measured Prolog `applied` (Epilog `reverted`
or `unchanged`: another job of a higher level may keep a setting) with the
expected qos_source. Appends one row per node to OUT/results.jsonl.

  curve.py OUT SECTION HOOK RUNS LABEL=ROOT[,KEY=VAL...] ...
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from record import summary_ms  # noqa: E402


def node_env(root, extra):
    env = dict(os.environ)
    for k in ("SLURM_SCRIPT_CONTEXT", "SLURM_JOB_QOS"):
        env.pop(k, None)
    for line in open(os.path.join(root, "bench.env")):
        line = line.strip()
        if line.startswith("export "):
            for kv in line[len("export "):].split():
                k, v = kv.split("=", 1)
                env[k] = v
    for kv in extra:
        k, v = kv.split("=", 1)
        env[k] = v.replace("$BENCH_QOS", env.get("BENCH_QOS", ""))
    env["SLURM_JOB_ID"] = "7"
    return env


def audit_lines(root):
    p = os.path.join(root, "var/log/qoslane/audit.jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []


def main():
    out, section, hook, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    other = "epilog" if hook == "prolog" else "prolog"
    nodes = []
    for spec in sys.argv[5:]:
        label, rest = spec.split("=", 1)
        root, *extra = rest.split(",")
        env = node_env(root, extra)
        nodes.append((label, root, env, len(audit_lines(root))))
    null = os.open(os.devnull, os.O_WRONLY)

    def run(ql, h, env):
        t = time.perf_counter()
        pid = os.posix_spawn(ql, [ql, h], env, file_actions=[
            (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
        _, status = os.waitpid(pid, 0)
        if status != 0:
            sys.exit(f"{ql} {h} ({env['QOSLANE_ROOT']}): exit status {status}")
        return (time.perf_counter() - t) * 1000

    ql = os.environ["QL"]
    times = {label: [] for label, *_ in nodes}
    for _, _, env, _ in nodes:  # warm-up; each node ends without job 7
        for _ in range(3):
            run(ql, "prolog", env)
            run(ql, "epilog", env)
    starts = {root: len(audit_lines(root)) for _, root, _, _ in nodes}
    for _ in range(runs):
        for label, _, env, _ in nodes:
            run(ql, other, env)
            times[label].append(run(ql, hook, env))
    for _, _, env, _ in nodes:
        if hook == "prolog":
            run(ql, "epilog", env)
    rc = 0
    with open(os.path.join(out, "results.jsonl"), "a") as f:
        for label, root, env, _ in nodes:
            want = {"prolog": {"applied"}, "epilog": {"reverted", "unchanged"}}[hook]
            src = "env" if env.get("SLURM_SCRIPT_CONTEXT") == "prolog_slurmd" else "scontrol"
            lines = [e for e in audit_lines(root)[starts[root]:] if e["event"] == hook]
            bad = [e for e in lines if e["outcome"] not in want
                   or (hook == "prolog" and e.get("qos_source") != src)]
            check = (f"ok {hook}: {len(lines)} runs, all {'/'.join(sorted(want))}"
                     + (f" (qos_source {src})" if hook == "prolog" else ""))
            if bad or len(lines) < runs:
                check = f"FAIL {hook}: {len(bad)} of {len(lines)} runs not as measured, e.g. {bad[:1]}"
                rc = 1
            row = {
                "section": section,
                "label": label,
                "command": f"{ql} {hook}",
                "wall_ms": summary_ms([t / 1000 for t in times[label]]),
                "check": check,
                "params": {},
                "load1": float(open("/proc/loadavg").read().split()[0]),
            }
            f.write(json.dumps(row) + "\n")
            print(f"{label}: median {row['wall_ms']['median']:.2f} ms; {check}")
    sys.exit(rc)


if __name__ == "__main__":
    main()
