#!/usr/bin/env python3
"""SMPs of `health`'s first hop, counted from an strace of the rig test
fabric::share (bench/health_smps.sh), and the load per leaf per
HealthCheckInterval they make (markdown on stdout).

  health_smps.py STRACE [--interval S] [--period S]

Counted: every 288-byte write (one MAD through the rig's umad preload) by
a `qoslane health` run and its children, split into what smpquery
processes sent and what qoslane sent in process; and each smpquery call's
MADs by query (its argv). Computed from those counts: a leaf of n ports with
every other port Active (a = n - 1 output ports), N nodes under it.
"""
import argparse
import collections
import re

ap = argparse.ArgumentParser()
ap.add_argument("strace")
ap.add_argument("--interval", type=int, default=120)
ap.add_argument("--period", type=int, default=240)
args = ap.parse_args()

parent, exe, runs = {}, {}, []
lines = open(args.strace).read().splitlines()
for line in lines:
    m = re.match(r"(\d+)\s+(.*)", line)
    if not m:
        continue
    pid, rest = m.groups()
    c = re.match(r"(?:clone3?|vfork|fork)\(.*= (\d+)$", rest) or re.match(
        r"<\.\.\. (?:clone3?|vfork|fork) resumed>.*= (\d+)$", rest)
    if c:
        parent[c.group(1)] = pid
    if rest.startswith("execve("):
        exe[pid] = exe.get(pid, "") + rest
        if '/qoslane", "health"' in rest and pid not in runs:
            runs.append(pid)


def run_of(pid):
    for _ in range(64):
        if pid in runs:
            return pid
        if pid not in parent:
            return None
        pid = parent[pid]
    return None


per_run = collections.Counter()
in_process = collections.Counter()
per_call = collections.Counter()
for line in lines:
    m = re.match(r"(\d+)\s+(?:write\(\d+, |<\.\.\. write resumed>).*= 288$", line)
    if not m:
        continue
    pid = m.group(1)
    per_call[pid] += 1
    r = run_of(pid)
    if r:
        per_run[r] += 1
        if "smpquery" not in exe.get(pid, ""):
            in_process[r] += 1

# Each smpquery call's MADs by its query: "-D sl2vl 0,1 3" -> "sl2vl (switch port)"
kinds = collections.defaultdict(set)
for pid, e in exe.items():
    m = re.search(r'"/usr/sbin/smpquery".*?"-D", "(\w+)", "([\d,]+)"', e)
    if m and per_call[pid]:
        where = "switch" if m.group(2) == "0,1" else "own port"
        kinds[f"{m.group(1)} ({where})"].add(per_call[pid])

out = ["| `smpquery` call (counted) | MADs |", "|---|---:|"]
for k in sorted(kinds):
    out.append(f"| {k} | {', '.join(map(str, sorted(kinds[k])))} |")
out += ["", "| health run (counted, leaf1: 4 ports, 3 Active besides the node's) | MADs in process (first hop) | by smpquery (own port) |",
        "|---|---:|---:|"]
for i, r in enumerate(runs, 1):
    out.append(f"| {i} | {in_process[r]} | {per_run[r] - in_process[r]} |")


def before(n):  # every run in full by smpquery
    a = n - 1
    return 1 + 2 + 1 + (n - 1) + a * (1 + (n + 1)) + 3 * a


def full(n):  # in process: each table once (one low and one high VLArb block)
    a = n - 1
    return 3 + (n - 1) + 3 * a


def rows(n):
    return 1 + (n - 1)


share = min(1.0, args.interval / args.period)
out += ["", f"Per leaf per interval (HealthCheckInterval {args.interval} s, a full reading every {args.period} s per node: "
        f"{share:.2f} of the runs), first hop only:", "",
        "| leaf | nodes | before: smpquery queries | before: SMPs | after: full / rows-only run | after: SMPs (mean) | before ÷ after |",
        "|---|---:|---:|---:|---:|---:|---:|"]
for n, nodes in ((4, 2), (36, 18), (72, 36)):
    q = 3 + (n - 1) + 2 * (n - 1)
    b = before(n) * nodes
    a = (share * full(n) + (1 - share) * rows(n)) * nodes
    out.append(f"| {n} ports | {nodes} | {q * nodes:,} | {b:,} | {full(n)} / {rows(n)} | {a:,.0f} | {b / a:.0f}× |")
print("\n".join(out))
