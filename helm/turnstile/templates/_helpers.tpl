{{/*
Names and labels.
*/}}
{{- define "turnstile.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "turnstile.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "turnstile.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "turnstile.selectorLabels" -}}
app.kubernetes.io/name: {{ include "turnstile.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "turnstile.labels" -}}
helm.sh/chart: {{ include "turnstile.chart" . }}
{{ include "turnstile.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: turnstile
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "turnstile.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "turnstile.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "turnstile.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
The agents and profiles files: the values' YAML text, or the example files bundled with the chart
(helm/turnstile/config/*.yaml are links to the repository's config/; `helm package` stores their
content in the chart archive).
*/}}
{{- define "turnstile.agentsYaml" -}}
{{- if .Values.config.agents }}
{{- .Values.config.agents }}
{{- else if .Values.config.demoAgents }}
{{- .Files.Get "config/agents.example.yaml" }}
{{- end }}
{{- end }}

{{- define "turnstile.profilesYaml" -}}
{{- if .Values.config.profiles }}
{{- .Values.config.profiles }}
{{- else if eq .Values.config.bundledProfiles "llm" }}
{{- .Files.Get "config/profiles.example.yaml" }}
{{- else }}
{{- .Files.Get "config/profiles.embeddings.yaml" }}
{{- end }}
{{- end }}

{{/*
Kafka security: the librdkafka security.protocol that sasl/tls imply.
*/}}
{{- define "turnstile.kafkaSecurityProtocol" -}}
{{- $k := .Values.kafka }}
{{- if and $k.sasl.enabled $k.tls.enabled }}SASL_SSL
{{- else if $k.sasl.enabled }}SASL_PLAINTEXT
{{- else if $k.tls.enabled }}SSL
{{- end }}
{{- end }}

{{/* KEDA's name for a SASL mechanism. */}}
{{- define "turnstile.kedaSasl" -}}
{{- $m := .Values.kafka.sasl.mechanism }}
{{- if eq $m "PLAIN" }}plaintext
{{- else if eq $m "SCRAM-SHA-256" }}scram_sha256
{{- else if eq $m "SCRAM-SHA-512" }}scram_sha512
{{- end }}
{{- end }}

{{- define "turnstile.kafkaTlsDir" -}}/etc/turnstile/kafka-tls{{- end }}

{{- define "turnstile.triggerAuth.enabled" -}}
{{- if and .Values.autoscaling.enabled (or .Values.kafka.sasl.enabled .Values.kafka.tls.enabled) }}true{{- end }}
{{- end }}

{{/*
Checks that fail the rendering with a message naming the value and the fix. Included by the
StatefulSet, so every install, upgrade and `helm template` runs them.
*/}}
{{- define "turnstile.validate" -}}
{{- $w := .Values.worker }}
{{- $k := .Values.kafka }}
{{- $a := .Values.autoscaling }}
{{- $name := include "turnstile.fullname" . }}
{{- if gt (len $name) 52 }}
{{- fail (printf "the full name %q has %d characters; a StatefulSet's name may have at most 52 (its pods' controller-revision-hash label appends 11 characters to it, and a label value is at most 63), and the migration Job appends -migrate: choose a shorter release name or set fullnameOverride" $name (len $name)) }}
{{- end }}
{{- if not (trim $k.brokers) }}
{{- fail "kafka.brokers is required: the Kafka bootstrap servers, comma-separated host:port (e.g. kafka-0.kafka:9092,kafka-1.kafka:9092)" }}
{{- end }}
{{- if not (trim .Values.cql.contactPoints) }}
{{- fail "cql.contactPoints is required: the Cassandra / ScyllaDB nodes, comma-separated host:port (e.g. scylla-0.scylla:9042)" }}
{{- end }}
{{- if and .Values.migration.enabled (not (trim .Values.migration.replication)) }}
{{- fail "migration.replication is required (it is fixed once the keyspace exists): e.g. \"{'class': 'NetworkTopologyStrategy', 'dc1': 3}\" with every datacenter named, or \"{'class': 'SimpleStrategy', 'replication_factor': 1}\" for a one-node test cluster" }}
{{- end }}
{{- if and (not .Values.tools.baseUrl) (not .Values.extraContainers) }}
{{- fail "tools.baseUrl is required unless extraContainers declares the tool service as a sidecar: without either, tool endpoints given as paths go to the worker's default http://127.0.0.1:8081, where nothing listens" }}
{{- end }}
{{- if and (not .Values.config.agents) (not .Values.config.demoAgents) }}
{{- fail "config.agents is required: your assistants, tenants and tools as YAML text (--set-file config.agents=agents.yaml); config.demoAgents=true installs the bundled demo domain instead" }}
{{- end }}
{{- if and $k.clientRack $k.clientRackFromPodLabel }}
{{- fail "kafka.clientRack and kafka.clientRackFromPodLabel exclude each other: one rack for every pod, or each pod's own from its label" }}
{{- end }}
{{- if and .Values.monitoring.serviceMonitor.enabled .Values.monitoring.podMonitor.enabled }}
{{- fail "monitoring.serviceMonitor.enabled and monitoring.podMonitor.enabled exclude each other: both would scrape every pod twice" }}
{{- end }}
{{- $grace := int .Values.terminationGracePeriodSeconds }}
{{- $drain := int $w.drainBudgetMs }}
{{- $margin := int .Values.shutdownMarginSeconds }}
{{- if le (mul $grace 1000) (add $drain (mul $margin 1000)) }}
{{- fail (printf "terminationGracePeriodSeconds (%d s) must exceed worker.drainBudgetMs (%d ms) plus shutdownMarginSeconds (%d s, the final Kafka commit and leaving the group): raise terminationGracePeriodSeconds to at least %d, or lower worker.drainBudgetMs" $grace $drain $margin (add (div (add $drain 999) 1000) $margin 1)) }}
{{- end }}
{{- $txn := int $w.transactionTimeoutMs }}
{{- if and (gt $txn 0) (le $txn $drain) }}
{{- fail (printf "worker.transactionTimeoutMs (%d) must exceed worker.drainBudgetMs (%d): the broker would abort a draining pod's transaction; set it to at least %d (drainBudgetMs + 5000), or 0 to derive it (the worker refuses to start otherwise)" $txn $drain (add $drain 5000)) }}
{{- end }}
{{- $c := .Values.cql }}
{{- if and $c.tls.enabled (not $c.tls.existingSecret) }}
{{- fail "cql.tls.enabled needs cql.tls.existingSecret: the name of a Secret holding the CA certificate of the nodes (and, for mutual TLS, the client certificate and key)" }}
{{- end }}
{{- if and $c.tls.enabled (or $c.tls.certKey $c.tls.keyKey) (not (and $c.tls.certKey $c.tls.keyKey)) }}
{{- fail "cql.tls.certKey and cql.tls.keyKey go together (mutual TLS needs both the client certificate and its key)" }}
{{- end }}
{{- if ge $drain (int $k.sessionTimeoutMs) }}
{{- fail (printf "worker.drainBudgetMs (%d) must be below kafka.sessionTimeoutMs (%d): a revocation must drain before the group evicts the member (the worker refuses to start otherwise)" $drain (int $k.sessionTimeoutMs)) }}
{{- end }}
{{- if $a.enabled }}
{{- if gt (int $a.maxReplicaCount) (int $k.partitions) }}
{{- fail (printf "autoscaling.maxReplicaCount (%d) exceeds kafka.partitions (%d): KEDA never runs more workers than %s has partitions (allowIdleConsumers is false: a worker without a partition does no work), so the bound would be a lie; lower autoscaling.maxReplicaCount or set kafka.partitions to the topic's real partition count" (int $a.maxReplicaCount) (int $k.partitions) $k.topics.turns) }}
{{- end }}
{{- if gt (int $a.minReplicaCount) (int $a.maxReplicaCount) }}
{{- fail (printf "autoscaling.minReplicaCount (%d) exceeds autoscaling.maxReplicaCount (%d)" (int $a.minReplicaCount) (int $a.maxReplicaCount)) }}
{{- end }}
{{- end }}
{{- if and $k.sasl.enabled (not $k.sasl.existingSecret) }}
{{- fail "kafka.sasl.enabled needs kafka.sasl.existingSecret: the name of a Secret holding the SASL username and password (the chart never creates Secrets)" }}
{{- end }}
{{- if and $k.tls.enabled (not $k.tls.existingSecret) }}
{{- fail "kafka.tls.enabled needs kafka.tls.existingSecret: the name of a Secret holding the CA certificate (and, for mutual TLS, the client certificate and key)" }}
{{- end }}
{{- if and $k.tls.enabled (or $k.tls.certKey $k.tls.keyKey) (not (and $k.tls.certKey $k.tls.keyKey)) }}
{{- fail "kafka.tls.certKey and kafka.tls.keyKey go together (mutual TLS needs both the client certificate and its key)" }}
{{- end }}
{{- if and (not .Values.config.profiles) (not (has .Values.config.bundledProfiles (list "embeddings" "llm"))) }}
{{- fail "config.bundledProfiles must be embeddings or llm" }}
{{- end }}
{{- if or (not (include "turnstile.agentsYaml" . | trim)) (not (include "turnstile.profilesYaml" . | trim)) }}
{{- fail "the agents or profiles file is empty: set config.agents / config.profiles, or install the chart from a repository checkout or a `helm package` archive (the bundled examples in the chart's config/ are links to the repository's config/)" }}
{{- end }}
{{- end }}

{{/*
A number as written, never in exponent form: YAML numbers arrive as float64, and toString of
1000000.0 is "1e+06". Whole numbers print as integers, others as Go's shortest exact decimal.
*/}}
{{- define "turnstile.number" -}}
{{- $v := . }}
{{- if or (kindIs "float64" $v) (kindIs "float32" $v) }}
{{- if eq (float64 (int64 $v)) (float64 $v) }}{{ int64 $v }}{{ else }}{{ $v | toString | replace "e-0" "e-" | replace "e+0" "e+" }}{{ end }}
{{- else }}{{ $v }}{{ end }}
{{- end }}

{{/*
The job label of the workers' series: the Service's name (a ServiceMonitor's default job), which
the PodMonitor sets too; monitoring.job overrides it for other scrape set-ups.
*/}}
{{- define "turnstile.job" -}}
{{- .Values.monitoring.job | default (include "turnstile.fullname" .) }}
{{- end }}

{{/*
files/alerts.tmpl.yaml with every ${name} replaced (see that file's header), as YAML text. Fails
on an unknown placeholder, a bad threshold or a relative runbook URL.
*/}}
{{- define "turnstile.alertRules" -}}
{{- $m := .Values.monitoring.prometheusRule }}
{{- $text := .Files.Get "files/alerts.tmpl.yaml" }}
{{- if not $text }}
{{- fail "files/alerts.tmpl.yaml is missing from the chart" }}
{{- end }}
{{- if not (regexMatch "^https?://[^/]+/" ($m.runbookBaseUrl | default "")) }}
{{- fail (printf "monitoring.prometheusRule.runbookBaseUrl must be an absolute http(s) URL of docs/operations.md (e.g. https://git.example.com/turnstile/blob/v%s/docs/operations.md), got %q: an alert's runbook link must open from a pager" .Chart.AppVersion ($m.runbookBaseUrl | default "")) }}
{{- end }}
{{- $buckets := list "0.05" "0.1" "0.25" "0.5" "1" "2.5" "5" "10" "15" "30" "60" "120" "300" "600" }}
{{- $threshold := include "turnstile.number" $m.replyLatency.thresholdSeconds }}
{{- if not (has $threshold $buckets) }}
{{- fail (printf "monitoring.prometheusRule.replyLatency.thresholdSeconds %s is not a bucket bound of turnstile_turn_age_seconds (%s; src/telemetry.rs TURN_AGE_BUCKETS_SECONDS)" $threshold (join ", " $buckets)) }}
{{- end }}
{{- $objective := float64 $m.replyLatency.objective }}
{{- if or (le $objective 0.0) (ge $objective 1.0) }}
{{- fail (printf "monitoring.prometheusRule.replyLatency.objective must be between 0 and 1 (exclusive), got %v" $m.replyLatency.objective) }}
{{- end }}
{{- $ns := .Release.Namespace }}
{{- $job := include "turnstile.job" . }}
{{- $p := dict "scope" (printf "namespace=%q, job=%q" $ns $job) "statefulsetScope" (printf "namespace=%q, statefulset=%q" $ns (include "turnstile.fullname" .)) "release" (printf "%s/%s" $ns $job) "runbookBaseUrl" $m.runbookBaseUrl }}
{{- range $alert, $params := $m.alerts }}
{{- range $k, $v := $params }}
{{- $_ := set $p (printf "%s.%s" $alert $k) (include "turnstile.number" $v) }}
{{- end }}
{{- end }}
{{- range $k, $v := $m.replyLatency }}
{{- $_ := set $p (printf "replyLatency.%s" $k) (include "turnstile.number" $v) }}
{{- end }}
{{- range $k, $v := $p }}
{{- $text = replace (printf "${%s}" $k) (toString $v) $text }}
{{- end }}
{{- $left := regexFindAll "\\$\\{[^}]*\\}" $text -1 | uniq }}
{{- if $left }}
{{- fail (printf "files/alerts.tmpl.yaml: no value for %s (monitoring.prometheusRule.alerts / replyLatency)" (join ", " $left)) }}
{{- end }}
{{- $text }}
{{- end }}

{{/* Where the CQL TLS Secret is mounted. */}}
{{- define "turnstile.cqlTlsDir" -}}/etc/turnstile/cql-tls{{- end }}

{{/* CQL TLS environment (worker and migration Job), at the env list's indentation. */}}
{{- define "turnstile.cqlTlsEnv" -}}
{{- $t := .Values.cql.tls }}
{{- if $t.enabled }}
- name: TURNSTILE_CQL_TLS_CA_FILE
  value: "{{ include "turnstile.cqlTlsDir" . }}/{{ $t.caKey }}"
{{- if $t.certKey }}
- name: TURNSTILE_CQL_TLS_CERT_FILE
  value: "{{ include "turnstile.cqlTlsDir" . }}/{{ $t.certKey }}"
- name: TURNSTILE_CQL_TLS_KEY_FILE
  value: "{{ include "turnstile.cqlTlsDir" . }}/{{ $t.keyKey }}"
{{- end }}
{{- if not $t.verifyHostname }}
- name: TURNSTILE_CQL_TLS_VERIFY_HOSTNAME
  value: "false"
{{- end }}
{{- end }}
{{- end }}
