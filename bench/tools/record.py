#!/usr/bin/env python3
"""Adds one measured row to OUT/results.jsonl from a hyperfine JSON export
(wall times of every run) and an optional file of peak RSS values (KiB, one a
line, from /usr/bin/time -f %M).

  record.py OUT SECTION LABEL HYPERFINE_JSON [--rss FILE] [--target-ms X]
            [--target-rss-mb Y] [--check TEXT] [--param K=V ...] [--index I]
"""
import argparse
import json
import os
import statistics as st
import sys


def splice(doc, begin, end, body):
    """DOC's text with BODY between its BEGIN and END marker lines (each
    on a line of its own); exits naming DOC when a marker is missing."""
    text = open(doc).read()
    if begin not in text or end not in text:
        sys.exit(f"{doc}: no {begin} ... {end} markers")
    pre, rest = text.split(begin, 1)
    _, post = rest.split(end, 1)
    return pre + begin + "\n" + body + end + post


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary_ms(times_s):
    ms = [t * 1000 for t in times_s]
    return {
        "n": len(ms),
        "median": st.median(ms),
        "p25": pct(ms, 25),
        "p75": pct(ms, 75),
        "p95": pct(ms, 95),
        "min": min(ms),
        "max": max(ms),
        "mean": st.mean(ms),
        "stddev": st.stdev(ms) if len(ms) > 1 else 0.0,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("section")
    ap.add_argument("label")
    ap.add_argument("json")
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--rss")
    ap.add_argument("--target-ms", type=float)
    ap.add_argument("--target-rss-mb", type=float)
    ap.add_argument("--check", default="")
    ap.add_argument("--param", action="append", default=[])
    a = ap.parse_args()
    res = json.load(open(a.json))["results"][a.index]
    row = {
        "section": a.section,
        "label": a.label,
        "command": res["command"],
        "wall_ms": summary_ms(res["times"]),
        "user_ms": res.get("user", 0) * 1000,
        "system_ms": res.get("system", 0) * 1000,
        "target_ms": a.target_ms,
        "target_rss_mb": a.target_rss_mb,
        "check": a.check,
        "params": dict(p.split("=", 1) for p in a.param),
        "load1": float(open("/proc/loadavg").read().split()[0]),
    }
    if a.rss:
        kib = [int(x) for x in open(a.rss).read().split() if x.strip()]
        row["rss_mb"] = {"n": len(kib), "median": st.median(kib) / 1024, "max": max(kib) / 1024}
    with open(os.path.join(a.out, "results.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
