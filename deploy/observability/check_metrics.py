#!/usr/bin/env python3
"""Checks that the dashboard and the alert rules query only metrics idemd exports.

Usage: check_metrics.py METRICS_TEXT_FILE METRICS_RS DASHBOARD_JSON ALERTS_YML

Every `idem_*` name in a dashboard query or an alert expression must be a metric of the
scraped dev node (its `# TYPE` lines, histogram series `_bucket`/`_sum`/`_count` included).
A labelled metric appears in /metrics only once one of its series has a value, and a single
dev node cannot produce every one (forwarding needs followers, takeovers need expired
leases): such a name must then be registered in idem-server's metrics.rs, and is listed as
"registered, not seen". Prints one line per name and "N passed, N failed"; exits 1 on any
unknown name or a dashboard that is not valid JSON with queries.
"""
import json
import re
import sys

NAME = re.compile(r"\bidem_[a-z0-9_]+\b")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Series Prometheus itself adds to every target.
PROMETHEUS_OWN = {"up"}


def exported(metrics_text):
    names = set()
    for line in metrics_text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[:2] == ["#", "TYPE"]:
            name, kind = parts[2], parts[3]
            names.add(name)
            if kind == "histogram":
                names.update(name + suffix for suffix in HISTOGRAM_SUFFIXES)
    return names


def registered(metrics_rs):
    """Metric names passed to the constructors in metrics.rs (string literals)."""
    names = set(re.findall(r'"(idem_[a-z0-9_]+)"', metrics_rs))
    return names | {n + s for n in names for s in HISTOGRAM_SUFFIXES}


def dashboard_queries(path):
    with open(path) as f:
        dashboard = json.load(f)
    queries = []
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            queries.append((panel.get("title", "?"), target["expr"]))
    if not queries:
        raise ValueError("the dashboard has no queries")
    return queries


def alert_expressions(path):
    """`expr:` values of the rules file (a block scalar's lines included)."""
    exprs, current = [], None
    for line in open(path):
        stripped = line.strip()
        if stripped.startswith("- alert:"):
            current = stripped.split(":", 1)[1].strip()
        elif stripped.startswith("expr:") and current:
            exprs.append((current, stripped[len("expr:"):]))
        elif exprs and current and exprs[-1][0] == current and line.startswith("            "):
            exprs[-1] = (current, exprs[-1][1] + " " + stripped)
    return exprs


def main(metrics_file, metrics_rs, dashboard, alerts):
    live = exported(open(metrics_file).read())
    known = registered(open(metrics_rs).read())
    passed = failed = 0
    try:
        queries = dashboard_queries(dashboard)
    except (ValueError, KeyError, json.JSONDecodeError) as error:
        print(f"metrics: FAILED: {dashboard}: {error}")
        print("0 passed, 1 failed")
        return 1
    uses = {}
    for where, expr in queries + alert_expressions(alerts):
        for name in NAME.findall(expr):
            uses.setdefault(name, set()).add(where)
        for word in PROMETHEUS_OWN & set(re.findall(r"\b[a-z_]+\b", expr)):
            uses.setdefault(word, set()).add(where)
    for name in sorted(uses):
        where = ", ".join(sorted(uses[name]))
        if name in live or name in PROMETHEUS_OWN:
            passed += 1
            print(f"metrics: ok: {name} (exported by the dev node)")
        elif name in known:
            passed += 1
            print(f"metrics: ok: {name} (registered, not seen on a single dev node)")
        else:
            failed += 1
            print(f"metrics: FAILED: {name} is not exported by idemd (used by {where})")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
