#!/usr/bin/env python3
"""Checks the audit lines a benchmark left: every line of EVENT after line FROM
has an outcome in OUTCOMES (and, with --source, that qos_source). Prints a
one-line summary; exits 1 when a run did not do what was measured.

  check_audit.py AUDIT FROM EVENT OUTCOMES [--source S] [--min N]
"""
import argparse
import collections
import json
import sys

ap = argparse.ArgumentParser()
ap.add_argument("audit")
ap.add_argument("start", type=int, help="lines already there before the benchmark")
ap.add_argument("event")
ap.add_argument("outcomes", help="comma-separated")
ap.add_argument("--source")
ap.add_argument("--min", type=int, default=1)
a = ap.parse_args()

want = set(a.outcomes.split(","))
seen = collections.Counter()
bad = []
with open(a.audit, encoding="utf-8") as f:
    for i, line in enumerate(f):
        if i < a.start:
            continue
        e = json.loads(line)
        if e["event"] != a.event:
            if e["event"] in ("recover",) or e.get("outcome") == "failed":
                bad.append(f"{e['event']} {e.get('outcome')}: {e.get('error')}")
            continue
        seen[e["outcome"]] += 1
        if e["outcome"] not in want:
            bad.append(f"{e['event']} job {e.get('job_id')} {e['outcome']}: {e.get('error')}")
        elif a.source and e.get("qos_source") != a.source:
            bad.append(f"{e['event']} job {e.get('job_id')} qos_source {e.get('qos_source')}, want {a.source}")
n = sum(seen.values())
summary = f"{a.event}: " + ", ".join(f"{k} {v}" for k, v in sorted(seen.items()))
if a.source:
    summary += f" (qos_source {a.source})"
if bad or n < a.min:
    print(f"FAIL {summary}; {len(bad)} bad, e.g. {bad[:3]}")
    sys.exit(1)
print(f"ok {summary}")
