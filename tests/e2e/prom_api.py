#!/usr/bin/env python3
"""prom_api.py — the e2e's reader of a live Prometheus's HTTP API (stdlib only).

  prom_api.py series URL EXPR           number of series of an instant query
                                        (/api/v1/query); exit 1 when the query fails
  prom_api.py value URL EXPR            the value of the first series ("" if none)
  prom_api.py alert URL NAME STATE      exit 0 when alert NAME is in STATE
                                        (firing|pending) in /api/v1/alerts
  prom_api.py alerts URL                every alert: "NAME STATE label=value..."
  prom_api.py targets URL               every active target: "job instance health path"
  prom_api.py panels URL DASHBOARD VAR=VALUE...
                                        every panel query of a Grafana dashboard
                                        (JSON), its template variables replaced
                                        (NAME=VALUE; $__range, $__rate_interval and
                                        $__interval are given the same way), run
                                        as an instant query: one line per query,
                                        "ok N TITLE | EXPR" or "EMPTY/ERROR ...";
                                        exit 1 when any returned no series
  prom_api.py panel URL DASHBOARD TITLE VAR=VALUE...
                                        the query of the panel TITLE, variables as
                                        for panels, without its empty-panel fallback
                                        ("or vector(0)", "or on () label_replace(
                                        vector(0), …)"): one line per series,
                                        "LABELS VALUE"; exit 1 when it has none
  prom_api.py instances URL METRIC      the instance label values of METRIC
                                        (/api/v1/label/instance/values?match[]=),
                                        as the dashboard's label_values() variable
"""

import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request


def get(url, path, **params):
    q = urllib.parse.urlencode(params, doseq=True)
    with urllib.request.urlopen(f"{url}{path}?{q}", timeout=10) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise RuntimeError(f"{path}: {doc.get('errorType')}: {doc.get('error')}")
    return doc["data"]


def query(url, expr):
    data = get(url, "/api/v1/query", query=expr)
    if data["resultType"] == "scalar":
        return [{"metric": {}, "value": data["result"]}]
    return data["result"]


def panel_queries(dashboard):
    def walk(panels):
        for p in panels:
            yield from walk(p.get("panels", []))
            for t in p.get("targets", []):
                if t.get("expr"):
                    yield p.get("title", "?"), t["expr"]

    return list(walk(dashboard.get("panels", [])))


# A panel's "show 0 rather than nothing": `… or vector(0)`, `… or on () label_replace(vector(0), …)`.
FALLBACK = re.compile(r"\s+or\s+(on\s*\(\s*\)\s*)?(label_replace\(\s*)?vector\(0\).*$")


def substitute(expr, values):
    # longest names first: $__rate_interval before $__range / $__interval
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    left = re.findall(r"\$\{?\w+", expr)
    if left:
        raise RuntimeError(f"unsubstituted variables {left} in {expr}")
    return expr


def main(argv):
    cmd, url = argv[1], argv[2].rstrip("/")
    if cmd == "series":
        print(len(query(url, argv[3])))
    elif cmd == "value":
        r = query(url, argv[3])
        print(r[0]["value"][1] if r else "")
    elif cmd == "alert":
        name, state = argv[3], argv[4]
        alerts = get(url, "/api/v1/alerts")["alerts"]
        return 0 if any(a["labels"].get("alertname") == name and a["state"] == state for a in alerts) else 1
    elif cmd == "alerts":
        for a in get(url, "/api/v1/alerts")["alerts"]:
            labels = " ".join(f"{k}={v}" for k, v in sorted(a["labels"].items()) if k != "alertname")
            print(a["labels"].get("alertname"), a["state"], labels)
    elif cmd == "targets":
        for t in get(url, "/api/v1/targets")["activeTargets"]:
            lab = t["labels"]
            print(lab.get("job"), lab.get("instance"), t["health"], t["discoveredLabels"].get("__metrics_path__"), t.get("lastError", ""))
    elif cmd == "instances":
        print("\n".join(get(url, "/api/v1/label/instance/values", **{"match[]": argv[3]})))
    elif cmd == "panel":
        with open(argv[3]) as f:
            dashboard = json.load(f)
        exprs = [e for t, e in panel_queries(dashboard) if t == argv[4]]
        if len(exprs) != 1:
            print(f"ERROR {len(exprs)} queries in panel {argv[4]!r}", file=sys.stderr)
            return 2
        expr = FALLBACK.sub("", substitute(exprs[0], dict(a.split("=", 1) for a in argv[5:])))
        series = query(url, expr)
        for s in series:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s["metric"].items()))
            print(labels, s["value"][1])
        return 0 if series else 1
    elif cmd == "panels":
        with open(argv[3]) as f:
            dashboard = json.load(f)
        values = dict(a.split("=", 1) for a in argv[4:])
        bad = 0
        queries = panel_queries(dashboard)
        if not queries:
            print("ERROR no panel queries in", argv[3])
            return 1
        for title, expr in queries:
            try:
                e = substitute(expr, values)
                n = len(query(url, e))
                word = "ok" if n else "EMPTY"
            except (RuntimeError, urllib.error.HTTPError) as err:
                e, n, word = f"{expr} ({err})", 0, "ERROR"
            bad += n == 0
            print(f"{word} {n} {title} | {e}")
        return 1 if bad else 0
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
