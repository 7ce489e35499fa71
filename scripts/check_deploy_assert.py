#!/usr/bin/env python3
"""Assertions on the chart's rendered objects, for scripts/check-deploy.sh (run in its venv, which
has PyYAML). Schema validity is kubeconform's job; this checks what the chart promises and what the
worker needs:

- the StatefulSet: TURNSTILE_INSTANCE_ID from the pod name (downward API), replicas only without
  KEDA, the grace period above the drain budget, /readyz startup and readiness probes, a /healthz
  liveness probe, the restricted security contexts, /tmp as an emptyDir, no service account
  token, a config checksum annotation, and only TURNSTILE_* variables the worker reads (names
  looked up in src/);
- no Secret object anywhere; every secret reference names an existingSecret value;
- the KEDA ScaledObject targets the StatefulSet and reads the worker's own topic, group, brokers
  and offset reset policy (auto.offset.reset as the worker's sources set it), with maxReplicaCount
  at most kafka.partitions, and its TriggerAuthentication uses the same Secrets as the pods;
- the ServiceMonitor selects the Service's port; the PrometheusRule has the alerts of
  deploy/monitoring/alerts.yaml (the chart's rendering for the default values), every selector
  scoped to this release's namespace and job, runbook URLs under the values' base URL; the dashboard ConfigMap (when files/dashboard.json exists) is labelled
  grafana_dashboard: "1" and holds that JSON; none of the monitoring objects renders without the
  monitoring.coreos.com/v1 API;
- the migration Job is a pre-install/pre-upgrade hook running `turnstile migrate` with flags that
  command has.

Usage: check_deploy_assert.py REPO CHART NO_APIS_RENDERING NAME:KUBE_VERSION:FILE...
"""

import json
import os
import re
import sys

import yaml

repo = sys.argv[1]
chart = sys.argv[2]
no_apis_file = sys.argv[3]
renderings = [r.split(":", 2) for r in sys.argv[4:]]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]


def read(rel):
    with open(os.path.join(repo, rel)) as f:
        return f.read()


# What the worker reads, from its sources: every TURNSTILE_* literal in src/, plus the librdkafka
# pass-through names of src/worker/config.rs (TURNSTILE_KAFKA_<NAME WITH _ FOR .>).
src_text = ""
for root, _, files in os.walk(os.path.join(repo, "src")):
    for f in files:
        if f.endswith(".rs"):
            src_text += open(os.path.join(root, f)).read()
known_vars = set(re.findall(r'"(TURNSTILE_[A-Z_]+)"', src_text))
worker_config = read("src/worker/config.rs")
passthrough = re.search(r"const PASSTHROUGH: &\[&str\] = &\[(.*?)\];", worker_config, re.S)
for name in re.findall(r'"([a-z.]+)"', passthrough.group(1)):
    known_vars.add("TURNSTILE_KAFKA_" + name.replace(".", "_").upper())
settings_rs = read("src/config/settings.rs")
known_vars |= set(re.findall(r'pub const [A-Z_]+: &str = "([A-Z_]+)";', settings_rs))
known_vars |= {"RUST_LOG", "RUST_BACKTRACE", "POD_NAME"}
# Looked up in all of src/ (like the variables above), so moving the consumer's settings to
# another file does not break the check; two different values would be a worker bug.
resets = set(re.findall(r'\.set\("auto\.offset\.reset", "([a-z]+)"\)', src_text))
check(len(resets) == 1, f"src/ sets auto.offset.reset to one value (found {sorted(resets)})")
worker_offset_reset = resets.pop() if len(resets) == 1 else None
migrate_rs = read("src/cli/migrate.rs")
migrate_flags = {"--" + f.replace("_", "-") for f in re.findall(r"pub ([a-z_]+): ", migrate_rs)}

# The bucket bounds the chart accepts as a latency threshold are the worker's turn age buckets.
telemetry_rs = read("src/telemetry.rs")
m = re.search(r"TURN_AGE_BUCKETS_SECONDS: &\[f64\] = &\[(.*?)\];", telemetry_rs, re.S)
worker_buckets = [f"{float(x):g}" for x in re.findall(r"[0-9.]+", m.group(1))] if m else []
helpers = open(os.path.join(chart, "templates", "_helpers.tpl")).read()
m = re.search(r'\$buckets := list ((?:"[0-9.]+" ?)+)', helpers)
chart_buckets = re.findall(r'"([0-9.]+)"', m.group(1)) if m else None
check(worker_buckets and chart_buckets == worker_buckets,
      f"_helpers.tpl turn age buckets {chart_buckets} = src/telemetry.rs {worker_buckets}")
alerts_path = os.path.join(repo, "deploy", "monitoring", "alerts.yaml")
dashboard_path = os.path.join(chart, "files", "dashboard.json")
alerts = yaml.safe_load(open(alerts_path)) if os.path.exists(alerts_path) else None
dashboard = open(dashboard_path).read() if os.path.exists(dashboard_path) else None


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def one(docs, kind, label):
    found = by_kind(docs, kind)
    check(len(found) == 1, f"{label}: expected one {kind}, found {len(found)}")
    return found[0] if found else None


for name, kube_version, path in renderings:
    label = f"{name} values, Kubernetes {kube_version}"
    docs = load(path)
    values = yaml.safe_load(open(os.path.join(chart, "values.yaml")))
    overlay = yaml.safe_load(open(os.path.join(chart, "ci", f"{name}-values.yaml")))

    def merge(a, b):
        for k, v in b.items():
            if isinstance(v, dict) and isinstance(a.get(k), dict):
                merge(a[k], v)
            else:
                a[k] = v

    merge(values, overlay)

    check(not by_kind(docs, "Secret"), f"{label}: the chart must never create a Secret")
    sts = one(docs, "StatefulSet", label)
    svc = one(docs, "Service", label)
    if not sts or not svc:
        continue
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    env = env_of(c)

    # Identity: the pod name through the downward API.
    check(env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
          == "metadata.name", f"{label}: POD_NAME from fieldRef metadata.name")
    names = [e["name"] for e in c["env"]]
    check("TURNSTILE_INSTANCE_ID" in env and "$(POD_NAME)" in env["TURNSTILE_INSTANCE_ID"].get("value", "")
          and names.index("POD_NAME") < names.index("TURNSTILE_INSTANCE_ID"),
          f"{label}: TURNSTILE_INSTANCE_ID = prefix + $(POD_NAME), after POD_NAME")
    check(svc["spec"].get("clusterIP") == "None" and spec["serviceName"] == svc["metadata"]["name"],
          f"{label}: headless governing Service")

    # Replicas: KEDA owns them when autoscaling is on.
    autoscaling = values["autoscaling"]["enabled"]
    check(("replicas" in spec) != autoscaling,
          f"{label}: StatefulSet replicas field {'absent' if autoscaling else 'present'}")

    # Shutdown budget.
    drain = int(env["TURNSTILE_DRAIN_BUDGET_MS"]["value"])
    grace = pod["terminationGracePeriodSeconds"]
    check(grace * 1000 > drain + values["shutdownMarginSeconds"] * 1000,
          f"{label}: grace {grace}s above drain budget {drain}ms + margin")
    check(drain < int(env["TURNSTILE_SESSION_TIMEOUT_MS"]["value"]),
          f"{label}: drain budget below the session timeout")

    # Probes.
    port_names = {p["name"] for p in c["ports"]}
    for probe, want in (("startupProbe", "/readyz"), ("readinessProbe", "/readyz"),
                        ("livenessProbe", "/healthz")):
        if probe not in c:
            continue  # switched off (probes.*.enabled); checked against the values below
        get = c.get(probe, {}).get("httpGet", {})
        check(get.get("path") == want and get.get("port") in port_names,
              f"{label}: {probe} on {want} at a container port")
    listen = env["TURNSTILE_LISTEN"]["value"]
    check(listen.endswith(":" + str(c["ports"][0]["containerPort"])),
          f"{label}: TURNSTILE_LISTEN {listen} matches the container port")

    # Security.
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 10001
          and psc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
          f"{label}: pod securityContext non-root UID 10001, RuntimeDefault seccomp")
    check(csc.get("readOnlyRootFilesystem") is True and csc.get("allowPrivilegeEscalation") is False
          and csc.get("capabilities", {}).get("drop") == ["ALL"] and csc.get("runAsUser") == 10001,
          f"{label}: container securityContext read-only root, no escalation, drop ALL")
    check(pod.get("automountServiceAccountToken") is False, f"{label}: no service account token")
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    check("/tmp" in mounts and "emptyDir" in vols.get(mounts["/tmp"], {}), f"{label}: /tmp emptyDir")
    check(re.fullmatch(r"[0-9a-f]{64}", spec["template"]["metadata"]["annotations"].get("checksum/config", "")),
          f"{label}: checksum/config annotation")
    check(pod.get("topologySpreadConstraints")
          and all("labelSelector" in t for t in pod["topologySpreadConstraints"]),
          f"{label}: topologySpreadConstraints with label selectors")

    # Config files: the ConfigMap mounted where TURNSTILE_CONFIG / TURNSTILE_PROFILES point.
    cms = {d["metadata"]["name"]: d for d in by_kind(docs, "ConfigMap")}
    cfg_cm = vols["config"]["configMap"]["name"]
    check(cfg_cm in cms and {"agents.yaml", "profiles.yaml"} <= set(cms[cfg_cm]["data"]),
          f"{label}: config ConfigMap with agents.yaml and profiles.yaml")
    for var in ("TURNSTILE_CONFIG", "TURNSTILE_PROFILES"):
        check(env[var]["value"] in mounts, f"{label}: {var} is a mounted file")
    if not values["config"]["agents"] and values["config"]["demoAgents"]:
        check(cms[cfg_cm]["data"]["agents.yaml"].strip() == open(os.path.join(chart, "config", "agents.example.yaml")).read().strip(),
              f"{label}: default agents.yaml = config/agents.example.yaml")

    # Every TURNSTILE_* variable is one the worker reads.
    unknown = sorted(n for n in env if n not in known_vars)
    check(not unknown, f"{label}: variables the worker does not read: {unknown}")

    # Secrets only by reference to existingSecret values.
    allowed = {values["kafka"]["sasl"]["existingSecret"], values["kafka"]["tls"]["existingSecret"],
               values["models"]["existingSecret"], values["cql"].get("existingSecret", "")} - {""}
    refs = set()
    for e in c["env"]:
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            refs.add(ref["name"])
    for e in c.get("envFrom", []):
        if "secretRef" in e:
            refs.add(e["secretRef"]["name"])
    for v in pod["volumes"]:
        if "secret" in v:
            refs.add(v["secret"]["secretName"])
    check(refs == allowed, f"{label}: secret references {sorted(refs)} = existingSecret values {sorted(allowed)}")

    # Names that fit: a StatefulSet's pods get a controller-revision-hash label of name + 11.
    check(len(sts["metadata"]["name"]) <= 52, f"{label}: StatefulSet name at most 52 characters")
    for d in docs:
        check(len(d["metadata"]["name"]) <= 63, f"{label}: {d['kind']} name at most 63 characters")

    # Exact numbers: every number reaches the worker as digits, never in exponent form.
    for e in c["env"]:
        check(not re.fullmatch(r"-?[0-9.]+e[+-][0-9]+", str(e.get("value", ""))),
              f"{label}: {e['name']}={e.get('value')} is in exponent form")
    for key, v in values["sessionControl"].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer():
            check(env.get(key, {}).get("value") == str(int(v)),
                  f"{label}: sessionControl {key} renders as {int(v)} (got {env.get(key)})")

    # Sidecars, init containers and extra volumes as given; tools reachable.
    names = [x["name"] for x in pod["containers"][1:]]
    check(names == [x["name"] for x in values["extraContainers"]], f"{label}: extraContainers {names}")
    check([x["name"] for x in pod.get("initContainers", [])] == [x["name"] for x in values["initContainers"]],
          f"{label}: initContainers")
    for v in values["extraVolumes"]:
        check(v["name"] in vols, f"{label}: extra volume {v['name']}")
    check("TURNSTILE_TOOLS_BASE_URL" in env or values["extraContainers"],
          f"{label}: tools.baseUrl set, or a sidecar declared")

    # client.rack: one value, or each pod's own label.
    rack = env.get("TURNSTILE_KAFKA_CLIENT_RACK")
    if values["kafka"]["clientRackFromPodLabel"]:
        check(rack and rack.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
              == f"metadata.labels['{values['kafka']['clientRackFromPodLabel']}']",
              f"{label}: client.rack from the pod label {values['kafka']['clientRackFromPodLabel']}")
    else:
        check((rack or {}).get("value", "") == values["kafka"]["clientRack"],
              f"{label}: client.rack = kafka.clientRack")

    # Probes as configured (the endpoint fixed).
    for probe, key in (("startupProbe", "startup"), ("readinessProbe", "readiness"), ("livenessProbe", "liveness")):
        want = {k: v for k, v in values["probes"][key].items() if k != "enabled"}
        if not values["probes"][key]["enabled"]:
            want = {}
        got = {k: v for k, v in c.get(probe, {}).items() if k != "httpGet"}
        check(got == want, f"{label}: {probe} = probes.{key} ({got} != {want})")

    # NetworkPolicy.
    nps = by_kind(docs, "NetworkPolicy")
    np_values = values["networkPolicy"]
    check(len(nps) == (1 if np_values["enabled"] else 0), f"{label}: NetworkPolicy iff enabled")
    for np in nps:
        ing = np["spec"]["ingress"]
        check(len(ing) == 1 and ing[0]["ports"] == [{"port": "metrics", "protocol": "TCP"}]
              and ing[0].get("from", []) == np_values["from"],
              f"{label}: NetworkPolicy admits only the metrics port from networkPolicy.from")
        check(np["spec"]["podSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items(),
              f"{label}: NetworkPolicy selects the pods")
        check(("Egress" in np["spec"]["policyTypes"]) == bool(np_values["egress"]),
              f"{label}: egress restricted iff networkPolicy.egress")

    # PDB.
    pdb = one(docs, "PodDisruptionBudget", label)
    pdb_values = values["podDisruptionBudget"]
    if pdb:
        if pdb_values["minAvailable"] is None:
            check(pdb["spec"].get("maxUnavailable") == pdb_values["maxUnavailable"],
                  f"{label}: PDB maxUnavailable {pdb_values['maxUnavailable']}")
        else:
            check(pdb["spec"].get("minAvailable") == pdb_values["minAvailable"]
                  and "maxUnavailable" not in pdb["spec"], f"{label}: PDB minAvailable")
        check(pdb["spec"].get("unhealthyPodEvictionPolicy") == (pdb_values["unhealthyPodEvictionPolicy"] or None),
              f"{label}: PDB unhealthyPodEvictionPolicy {pdb_values['unhealthyPodEvictionPolicy']}")
        check(pdb["spec"]["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items(),
              f"{label}: PDB selects the pods")

    # KEDA.
    scaled = by_kind(docs, "ScaledObject")
    check(len(scaled) == (1 if autoscaling else 0), f"{label}: ScaledObject iff autoscaling")
    for so in scaled:
        s = so["spec"]
        check(s["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet",
                                       "name": sts["metadata"]["name"]}, f"{label}: ScaledObject targets the StatefulSet")
        check(s["maxReplicaCount"] <= values["kafka"]["partitions"], f"{label}: maxReplicaCount <= partitions")
        t = s["triggers"][0]
        m = t["metadata"]
        check(t["type"] == "kafka", f"{label}: kafka trigger")
        check(m["topic"] == env["TURNSTILE_TOPIC_TURNS"]["value"], f"{label}: trigger topic = the turns topic")
        check(m["consumerGroup"] == env["TURNSTILE_GROUP_ID"]["value"], f"{label}: trigger group = the worker's")
        check(m["bootstrapServers"] == env["TURNSTILE_BROKERS"]["value"], f"{label}: trigger brokers = the worker's")
        check(m["offsetResetPolicy"] == worker_offset_reset,
              f"{label}: offsetResetPolicy {m['offsetResetPolicy']} = the worker's auto.offset.reset {worker_offset_reset}")
        check(int(m["lagThreshold"]) >= 1 and int(m["activationLagThreshold"]) >= 0, f"{label}: lag thresholds")
        a = values["autoscaling"]
        for key in ("limitToPartitionsWithLag", "excludePersistentLag"):
            check(m.get(key) == ("true" if a[key] else None), f"{label}: trigger {key} = autoscaling.{key}")
        behavior = s["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
        if a["behavior"]:
            check(behavior == a["behavior"], f"{label}: HPA behavior = autoscaling.behavior")
        else:
            check(behavior["scaleDown"]["stabilizationWindowSeconds"] == a["scaleDownStabilizationSeconds"],
                  f"{label}: default scale-down stabilisation")
        ann = so["metadata"].get("annotations", {})
        check(ann.get("autoscaling.keda.sh/paused") == ("true" if a["paused"] else None),
              f"{label}: paused annotation iff autoscaling.paused")
        check(ann.get("autoscaling.keda.sh/paused-replicas")
              == (None if a["pausedReplicas"] is None else str(a["pausedReplicas"])),
              f"{label}: paused-replicas annotation = autoscaling.pausedReplicas")
        auths = {a["metadata"]["name"]: a for a in by_kind(docs, "TriggerAuthentication")}
        if "authenticationRef" in t:
            ta = auths.get(t["authenticationRef"]["name"])
            check(ta is not None, f"{label}: the TriggerAuthentication the trigger names exists")
            if ta:
                names_ta = {r["name"] for r in ta["spec"]["secretTargetRef"]}
                check(names_ta <= allowed, f"{label}: TriggerAuthentication uses existingSecrets only")
                params = {r["parameter"] for r in ta["spec"]["secretTargetRef"]}
                if values["kafka"]["sasl"]["enabled"]:
                    check({"username", "password"} <= params and "sasl" in m, f"{label}: KEDA SASL")
                if values["kafka"]["tls"]["enabled"]:
                    check("ca" in params and m.get("tls") == "enable", f"{label}: KEDA TLS")

    # Monitoring (rendered with --api-versions monitoring.coreos.com/v1).
    mon = values["monitoring"]
    sms = by_kind(docs, "ServiceMonitor")
    check(len(sms) == (1 if mon["serviceMonitor"]["enabled"] else 0), f"{label}: ServiceMonitor iff enabled")
    for sm in sms:
        check(sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items(),
              f"{label}: ServiceMonitor selects the Service")
        check(sm["spec"]["endpoints"][0]["port"] in {p["name"] for p in svc["spec"]["ports"]},
              f"{label}: ServiceMonitor port is a Service port")
    pms = by_kind(docs, "PodMonitor")
    check(len(pms) == (1 if mon["podMonitor"]["enabled"] else 0), f"{label}: PodMonitor iff enabled")
    for pm in pms:
        check(pm["spec"]["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items(),
              f"{label}: PodMonitor selects the pods")
        ep = pm["spec"]["podMetricsEndpoints"][0]
        check(ep["port"] in port_names, f"{label}: PodMonitor port is a container port")
        check({"action": "replace", "targetLabel": "job", "replacement": mon.get("job") or sts["metadata"]["name"]}
              in ep.get("relabelings", []), f"{label}: PodMonitor sets job to what the alerts match")
    prs = by_kind(docs, "PrometheusRule")
    check(len(prs) == (1 if mon["prometheusRule"]["enabled"] and alerts else 0),
          f"{label}: PrometheusRule iff enabled")
    for pr in prs:
        got = [(g["name"], [r.get("alert") or r.get("record") for r in g["rules"]])
               for g in pr["spec"]["groups"]]
        want = [(g["name"], [r.get("alert") or r.get("record") for r in g["rules"]])
                for g in alerts["groups"]]
        check(got == want, f"{label}: PrometheusRule alerts = deploy/monitoring/alerts.yaml alerts")
        job = values["monitoring"].get("job") or sts["metadata"]["name"]
        scope = f'namespace="{pr["metadata"]["namespace"]}", job="{job}"'
        base = values["monitoring"]["prometheusRule"]["runbookBaseUrl"]
        for g in pr["spec"]["groups"]:
            for r in g["rules"]:
                names = re.findall(r"\b(turnstile_[a-z0-9_]+)(\{[^}]*\})?", r["expr"])
                check(names and all(sel.startswith("{" + scope) for _, sel in names),
                      f"{label}: {r.get('alert')}: every selector starts with {{{scope}")
                check(r["annotations"]["runbook_url"] == f"{base}#{r['alert'].lower()}",
                      f"{label}: {r.get('alert')}: runbook_url = runbookBaseUrl + its anchor")
                check(r["labels"]["severity"] != "critical" or r.get("for"),
                      f"{label}: {r.get('alert')}: a critical alert has `for:`")
    dash = [d for d in by_kind(docs, "ConfigMap") if d["metadata"].get("labels", {}).get("grafana_dashboard")]
    check(len(dash) == (1 if mon["grafanaDashboard"]["enabled"] and dashboard else 0),
          f"{label}: dashboard ConfigMap iff enabled and files/dashboard.json exists")
    for d in dash:
        check(d["metadata"]["labels"]["grafana_dashboard"] == "1", f"{label}: grafana_dashboard: \"1\"")
        body = next(iter(d["data"].values()))
        check(json.loads(body) == json.loads(dashboard), f"{label}: dashboard ConfigMap = files/dashboard.json")

    # Migration hook.
    jobs = by_kind(docs, "Job")
    check(len(jobs) == (1 if values["migration"]["enabled"] else 0), f"{label}: migration Job iff enabled")
    for job in jobs:
        ann = job["metadata"]["annotations"]
        check(ann.get("helm.sh/hook") == "pre-install,pre-upgrade", f"{label}: Job is a pre-install,pre-upgrade hook")
        jc = job["spec"]["template"]["spec"]["containers"][0]
        check(jc["args"][0] == "migrate", f"{label}: Job runs turnstile migrate")
        flags = {a for a in jc["args"] if a.startswith("--")}
        check(flags <= migrate_flags, f"{label}: migrate flags {sorted(flags - migrate_flags)} unknown to src/cli/migrate.rs")
        check("serviceAccountName" not in job["spec"]["template"]["spec"],
              f"{label}: the hook Job uses no release object (ServiceAccount)")
        check(job["spec"]["template"]["spec"].get("automountServiceAccountToken") is False,
              f"{label}: Job mounts no token")

# Without the monitoring API, the gated objects are absent (KEDA objects stay: the API server
# rejects them when KEDA is missing, which is the message a user needs).
docs = load(no_apis_file)
check(not by_kind(docs, "ServiceMonitor") and not by_kind(docs, "PrometheusRule"),
      "without monitoring.coreos.com/v1 no ServiceMonitor / PrometheusRule renders")

if failures:
    for f in failures:
        print(f"   FAIL: {f}", file=sys.stderr)
    sys.exit(1)
print(f"   ok: {len(renderings)} renderings: identity, replicas, probes, security, secrets, KEDA, "
      "monitoring, migration hook")
