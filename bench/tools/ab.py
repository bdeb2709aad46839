#!/usr/bin/env python3
"""Interleaved A/B of qoslane binaries on one fixture node: each iteration
runs every binary's prolog (after an epilog) and epilog (after a prolog), so
load that comes and goes on a shared machine hits all of them alike. The
environment (root, QoS variables, job id) is the caller's.

  ab.py N LABEL=BINARY... > table rows (markdown)
"""
import os
import statistics as st
import sys
import time


def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main():
    n = int(sys.argv[1])
    bins = [a.split("=", 1) for a in sys.argv[2:]]
    env = dict(os.environ)
    null = os.open(os.devnull, os.O_WRONLY)

    def run(ql, hook):
        t = time.perf_counter_ns()
        pid = os.posix_spawn(ql, [ql, hook], env, file_actions=[
            (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
        _, status = os.waitpid(pid, 0)
        if status != 0:
            sys.exit(f"{ql} {hook}: exit status {status}")
        return (time.perf_counter_ns() - t) / 1e6

    res = {label: {"prolog": [], "epilog": []} for label, _ in bins}
    for _ in range(n):
        for label, ql in bins:
            run(ql, "epilog")
            res[label]["prolog"].append(run(ql, "prolog"))
            res[label]["epilog"].append(run(ql, "epilog"))
            run(ql, "prolog")
    for label, ql in bins:
        run(ql, "epilog")
    for label, _ in bins:
        for hook in ("prolog", "epilog"):
            x = res[label][hook]
            print(f"| {label} | {hook} | {st.median(x):.2f} | {pct(x, 25):.2f}–{pct(x, 75):.2f} | {pct(x, 95):.2f} | {n} |")


if __name__ == "__main__":
    main()
