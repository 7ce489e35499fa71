#!/usr/bin/env bash
# Checks the monitoring files the Helm chart ships, against promtool and the metric catalogue:
#   deploy/monitoring/alerts.yaml        `promtool check rules`; every alert has summary,
#                                        description, a severity, `for:` when critical, and an
#                                        absolute runbook_url whose section exists in
#                                        docs/operations.md; every selector is scoped to the
#                                        release (namespace and job matchers)
#   deploy/monitoring/alerts.test.yaml   `promtool test rules`; every alert has a case where it
#                                        fires and one where it stays quiet
#   helm/turnstile/files/dashboard.json  every query parsed by promtool (written as recording
#                                        rules into a temporary rules file); datasource only
#                                        through the ${datasource} variable; a `pod` variable
#                                        (All lists the release's pods), and every cAdvisor /
#                                        kube-state-metrics query filtered by namespace and pod
# and every metric name in an alert, a panel or a dashboard variable is in the catalogue of
# src/telemetry.rs (`pub const …: &str = "turnstile_…"`; histograms also with _bucket, _sum,
# _count) or in the short list of cAdvisor / kube-state-metrics series below (EXTERNAL). Any
# problem fails the script (exit 1) with what and where. deploy/monitoring/alerts.yaml is the
# chart's rendering of helm/turnstile/files/alerts.tmpl.yaml (scripts/check-deploy.sh keeps the
# two in step).
#
# Usage: bash scripts/check-monitoring.sh        (PROMTOOL=/path/to/promtool to choose one)
# Needs: promtool (Debian: apt-get install --no-install-recommends prometheus), python3 + PyYAML.
set -euo pipefail
cd "$(dirname "$0")/.."

RULES=deploy/monitoring/alerts.yaml
TESTS=deploy/monitoring/alerts.test.yaml
DASHBOARD=helm/turnstile/files/dashboard.json
CATALOGUE=src/telemetry.rs
RUNBOOKS=docs/operations.md

fail() {
  echo "check-monitoring: FAILED: $*" >&2
  exit 1
}

PROMTOOL=${PROMTOOL:-$(command -v promtool || true)}
[[ -n "$PROMTOOL" && -x "$PROMTOOL" ]] \
  || fail "promtool not found (Debian: apt-get install --no-install-recommends prometheus; or set PROMTOOL)"
command -v python3 >/dev/null || fail "python3 not found"
python3 -c 'import yaml' 2>/dev/null || fail "python3 has no PyYAML (Debian: apt-get install python3-yaml)"
for f in "$RULES" "$TESTS" "$DASHBOARD" "$CATALOGUE" "$RUNBOOKS"; do
  [[ -f "$f" ]] || fail "$f is missing"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Every step runs (so one run shows every problem); the script fails at the end if any did.
failed=()

echo "== promtool check rules $RULES"
"$PROMTOOL" check rules "$RULES" || failed+=("promtool check rules $RULES")

echo "== promtool test rules $TESTS"
"$PROMTOOL" test rules "$TESTS" || failed+=("promtool test rules $TESTS")

echo "== metric names against $CATALOGUE, runbooks, test coverage, dashboard datasource"
# Also writes the dashboard's queries as recording rules to $work/dashboard.rules.yaml (with a
# record name -> panel map next to it) for the promtool step below.
python3 - "$RULES" "$TESTS" "$DASHBOARD" "$CATALOGUE" "$RUNBOOKS" "$work/dashboard.rules.yaml" <<'PY' \
  || failed+=("metric names / runbooks / test coverage / dashboard (problems above)")
import json
import re
import sys

import yaml

rules_path, tests_path, dashboard_path, catalogue_path, runbooks_path, out_path = sys.argv[1:]
problems = []


def problem(msg):
    problems.append(msg)
    print(f"  problem: {msg}", file=sys.stderr)


# --- The catalogue -----------------------------------------------------------------------------
source = open(catalogue_path, encoding="utf-8").read()
consts = dict(re.findall(r'pub const (\w+): &str =\s*"(turnstile_[a-z0-9_]+)";', source))
if len(consts) < 10:
    problem(f"{catalogue_path}: found only {len(consts)} metric names; did the catalogue move?")
# Kinds come from the DESCRIPTIONS table (`(MetricKind::Histogram, NAME, unit, help)`), which
# `describe()` walks.
described = re.findall(r"MetricKind::(Counter|Gauge|Histogram),\s*(\w+),", source)
if not described:
    problem(f"{catalogue_path}: no (MetricKind::…, NAME, …) entries found; did DESCRIPTIONS move?")
histograms = {consts[c] for kind, c in described if kind == "Histogram" and c in consts}
for _, c in described:
    if c not in consts:
        problem(f"{catalogue_path}: DESCRIPTIONS entry {c}, which is not a catalogue constant")
known = set(consts.values())
known |= {h + suffix for h in histograms for suffix in ("_bucket", "_sum", "_count")}
# Standard Kubernetes series the dashboard and the readiness alert read, by name: cAdvisor
# (kubelet) container metrics and kube-state-metrics. Anything else outside the catalogue fails.
EXTERNAL = {
    "container_cpu_usage_seconds_total",
    "container_memory_working_set_bytes",
    "container_cpu_cfs_throttled_periods_total",
    "container_cpu_cfs_periods_total",
    "kube_pod_container_status_restarts_total",
    "kube_pod_container_resource_requests",
    "kube_pod_container_resource_limits",
    "kube_statefulset_replicas",
}
known |= EXTERNAL

# --- Metric names in a PromQL expression --------------------------------------------------------
KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "bool", "offset", "inf", "nan", "atan2",
}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", re.I)
STRING = re.compile(r'"(?:[^"\\]|\\.)*"' r"|'(?:[^'\\]|\\.)*'" r"|`[^`]*`")
TOKEN = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[a-zA-Z]*|[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr):
    """Identifiers that stand for metric names (not functions, keywords, labels or durations)."""
    if "__name__" in expr:
        raise ValueError("selects by __name__; write the metric name instead")
    text = STRING.sub('""', expr)
    text = re.sub(r"\{[^{}]*\}", " {} ", text)  # label matchers
    text = re.sub(r"\[[^\[\]]*\]", " ", text)  # ranges and subqueries
    text = GROUPING.sub(" ", text)
    names = []
    for m in TOKEN.finditer(text):
        tok = m.group(0)
        if tok[0].isdigit() or tok.lower() in KEYWORDS:
            continue
        if re.match(r"\s*\(", text[m.end():]):  # a function or an aggregation
            continue
        names.append(tok)
    return names


recorded = set()


def check_names(where, expr):
    try:
        names = metric_names(expr)
    except ValueError as e:
        problem(f"{where}: {e}")
        return
    if not names:
        problem(f"{where}: no metric name found in `{expr}`")
    for n in names:
        if n not in known and n not in recorded:
            hint = ""
            base = re.sub(r"_(bucket|sum|count)$", "", n)
            if base in known and base not in histograms:
                hint = f" ({base} is not a histogram)"
            problem(f"{where}: metric `{n}` is not in the catalogue of {catalogue_path}{hint}")


# --- Alerts and their runbooks ------------------------------------------------------------------
def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


runbooks = open(runbooks_path, encoding="utf-8").read()
anchors = {slug(h) for h in re.findall(r"^#{1,6}\s+(.+?)\s*$", runbooks, re.M)}

rules = yaml.safe_load(open(rules_path, encoding="utf-8"))
alerts = []
for group in rules.get("groups") or []:
    for rule in group.get("rules") or []:
        if "record" in rule:
            recorded.add(rule["record"])
for group in rules.get("groups") or []:
    for rule in group.get("rules") or []:
        name = rule.get("alert") or rule.get("record")
        where = f"{rules_path}: {name}"
        check_names(where, rule.get("expr", ""))
        if "alert" not in rule:
            continue
        alerts.append(name)
        ann = rule.get("annotations") or {}
        for key in ("summary", "description", "runbook_url"):
            if not str(ann.get(key, "")).strip():
                problem(f"{where}: no `{key}` annotation")
        url = str(ann.get("runbook_url", ""))
        m = re.fullmatch(r"(?:.*/)?docs/operations\.md#([\w-]+)", url)
        if not m:
            problem(f"{where}: runbook_url `{url}` does not point at a section of {runbooks_path}")
        elif m.group(1) not in anchors:
            problem(f"{where}: runbook_url `{url}`: {runbooks_path} has no heading with anchor #{m.group(1)}")
        elif m.group(1) != name.lower():
            problem(f"{where}: runbook_url anchor #{m.group(1)} is not the alert's own section #{name.lower()}")
        severity = (rule.get("labels") or {}).get("severity")
        if not severity:
            problem(f"{where}: no `severity` label")
        if severity == "critical" and not rule.get("for"):
            problem(f"{where}: a critical alert without `for:` pages on a single evaluation")
        if not re.match(r"https?://", url):
            problem(f"{where}: runbook_url `{url}` is not absolute (a pager opens it)")
        expr = rule.get("expr", "")
        for name, labels in re.findall(r'\b(turnstile_[a-z0-9_]+)(\{[^}]*\})?', expr):
            if 'namespace="' not in labels or 'job="' not in labels:
                problem(f"{where}: `{name}` is not scoped to one release (namespace=\"…\", job=\"…\")")
if len(set(alerts)) != len(alerts):
    problem(f"{rules_path}: an alert name is used twice: {sorted(alerts)}")

# --- Every alert tested both ways ---------------------------------------------------------------
tests = yaml.safe_load(open(tests_path, encoding="utf-8"))
fires, quiet = set(), set()
for case in tests.get("tests") or []:
    for t in case.get("alert_rule_test") or []:
        name = t.get("alertname")
        if name not in alerts:
            problem(f"{tests_path}: test `{case.get('name')}` checks `{name}`, which is no alert of {rules_path}")
        (fires if t.get("exp_alerts") else quiet).add(name)
for name in alerts:
    if name not in fires:
        problem(f"{tests_path}: no case where {name} fires")
    if name not in quiet:
        problem(f"{tests_path}: no case where {name} stays quiet")

# --- The dashboard ------------------------------------------------------------------------------
dashboard = json.load(open(dashboard_path, encoding="utf-8"))
MACROS = {"$__rate_interval": "5m", "${__rate_interval}": "5m", "$__interval": "1m",
          "${__interval}": "1m", "$__range": "1h", "${__range}": "1h"}


def promql(expr):
    for k, v in MACROS.items():
        expr = expr.replace(k, v)
    return expr


def walk(node, path="$"):
    """Every datasource reference: only the ${datasource} variable (or Grafana's own)."""
    if isinstance(node, dict):
        ds = node.get("datasource")
        if isinstance(ds, dict):
            uid = ds.get("uid")
            if uid not in ("${datasource}", "$datasource", "-- Grafana --"):
                problem(f"{dashboard_path}: {path}.datasource uid `{uid}` is hard-coded; use ${{datasource}}")
        elif isinstance(ds, str) and ds not in ("${datasource}", "$datasource"):
            problem(f"{dashboard_path}: {path}.datasource `{ds}` is hard-coded; use ${{datasource}}")
        for k, v in node.items():
            walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            walk(v, f"{path}[{i}]")


walk(dashboard)
variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
if "pod" not in variables or "instance" in variables:
    problem(f"{dashboard_path}: the worker variable must be `pod` (not `instance`)")
elif variables["pod"].get("allValue"):
    problem(f"{dashboard_path}: variable `pod` has an allValue: All must list the release's pods")
if variables.get("datasource", {}).get("type") != "datasource":
    problem(f"{dashboard_path}: no `datasource` variable of type datasource in templating")

checks = []  # (record name, expression, where)


def panels(items):
    for p in items:
        yield p
        yield from panels(p.get("panels") or [])


ids = set()
for p in panels(dashboard.get("panels") or []):
    pid, title = p.get("id"), p.get("title", "?")
    if pid in ids:
        problem(f"{dashboard_path}: panel id {pid} used twice")
    ids.add(pid)
    if p.get("type") == "row":
        continue
    targets = p.get("targets") or []
    if not targets:
        problem(f"{dashboard_path}: panel `{title}` has no query")
    for t in targets:
        expr = t.get("expr", "")
        where = f"{dashboard_path}: panel `{title}` query {t.get('refId')}"
        if not expr.strip():
            problem(f"{where}: empty expr")
            continue
        check_names(where, expr)
        # Kubernetes series carry no job label: only the pod variable keeps them to the release.
        for name, labels in re.findall(r"\b((?:container|kube)_[a-z0-9_]+)(\{[^}]*\})?", expr):
            if 'pod=~"$pod"' not in labels or 'namespace=~"$namespace"' not in labels:
                problem(f"{where}: `{name}` is not filtered by namespace=~\"$namespace\" and pod=~\"$pod\"")
        checks.append((f"dashboard:panel_{pid}:{t.get('refId')}", promql(expr), where))
for name, v in variables.items():
    if v.get("type") != "query":
        continue
    q = v.get("query")
    q = q.get("query", "") if isinstance(q, dict) else str(q or "")
    where = f"{dashboard_path}: variable `{name}`"
    m = re.fullmatch(r"\s*label_values\((.+),\s*([a-zA-Z_]\w*)\s*\)\s*", q)
    if not m:
        problem(f"{where}: query `{q}` is not label_values(SELECTOR, LABEL)")
        continue
    check_names(where, m.group(1))
    checks.append((f"dashboard:variable_{name}", m.group(1), where))

with open(out_path, "w", encoding="utf-8") as out:
    yaml.safe_dump(
        {"groups": [{"name": "dashboard", "rules": [{"record": r, "expr": e} for r, e, _ in checks]}]},
        out, sort_keys=False, width=1000)
with open(out_path + ".map", "w", encoding="utf-8") as out:
    for r, e, where in checks:
        out.write(f"{r}\t{where}\n")
print(f"  {len(alerts)} alerts, {len(checks)} dashboard queries, {len(known)} catalogue names")
sys.exit(1 if problems else 0)
PY

echo "== promtool check rules (the dashboard's queries as recording rules)"
if [[ ! -s "$work/dashboard.rules.yaml" ]]; then
  failed+=("no dashboard queries to check")
elif ! out=$("$PROMTOOL" check rules "$work/dashboard.rules.yaml" 2>&1); then
  echo "$out" >&2
  # Name the panels behind the record names promtool complains about.
  while IFS=$'\t' read -r record where; do
    if grep -qF "\"$record\"" <<<"$out"; then
      echo "  problem: $where does not parse" >&2
    fi
  done <"$work/dashboard.rules.yaml.map"
  failed+=("a dashboard query does not parse (promtool check rules)")
else
  echo "$out"
fi

if ((${#failed[@]})); then
  printf 'check-monitoring: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "check-monitoring: OK"
