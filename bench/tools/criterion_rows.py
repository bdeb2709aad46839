#!/usr/bin/env python3
"""Adds the criterion results (target/criterion/<group>/<bench>/new/estimates.json)
of the `plan` bench to OUT/results.jsonl, in the order the bench defines.

  criterion_rows.py OUT CRITERION_DIR
"""
import json
import os
import re
import sys

GROUPS = ["validate", "level_for_qos", "desired", "fabric_check", "render_metrics"]


def human(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def natural(s):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def main():
    out, cdir = sys.argv[1], sys.argv[2]
    rows = []
    for g in GROUPS:
        gdir = os.path.join(cdir, g)
        if not os.path.isdir(gdir):
            continue
        found = []
        for dirpath, _dirs, files in os.walk(gdir):
            if os.path.basename(dirpath) == "new" and "estimates.json" in files:
                found.append(dirpath)
        for d in sorted(found, key=natural):
            e = json.load(open(os.path.join(d, "estimates.json")))["median"]
            bj = os.path.join(d, "benchmark.json")
            title = json.load(open(bj)).get("full_id") if os.path.exists(bj) else d
            rows.append({
                "section": "criterion",
                "label": title,
                "median_ns": e["point_estimate"],
                "median": human(e["point_estimate"]),
                "ci": f"{human(e['confidence_interval']['lower_bound'])} – {human(e['confidence_interval']['upper_bound'])}",
            })
    with open(os.path.join(out, "results.jsonl"), "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"{len(rows)} criterion rows")


if __name__ == "__main__":
    main()
