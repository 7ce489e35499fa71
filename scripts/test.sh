#!/usr/bin/env bash
# The whole test suite, on a fresh machine too, and in a clone with nothing beside it: installs
# the tools it uses (scripts/install-tools.sh), starts Kafka + Cassandra (scripts/services.sh)
# when they are not running, checks that the product compiles without the test harness, runs
# every Rust test with it (`--features harness`: unit, property, integration against the real
# services), then every conversation scenario in process and end to end through the worker, then
# the whole-conversation eval against the floors below (with the embeddings server; skipped when
# EMBEDDINGS_ENABLED=0), in process and then through Kafka against a worker started as
# scripts/run.sh starts one (`turnstile run`, own topics and keyspace), then the offline deploy checks (chart, alerts, dashboard, AsyncAPI), the
# supply-chain check and the SBOM of the Rust dependencies (scripts/sbom.sh). Stops the services at
# the end only if it started them.
set -euo pipefail
cd "$(dirname "$0")/.."

# The tools the suite uses that a fresh machine may lack (promtool, kcat, Java 17, …), from
# Debian's packages.
echo "== tools (scripts/install-tools.sh)"
bash scripts/install-tools.sh

# Floors of the whole-conversation eval (`turnstile eval conversations`, every conversation of
# tests/data/conversations/, strict figures; docs/decision-quality.md "Whole conversations"):
# the suite fails when turn accuracy or conversation success falls below its floor, or when more
# turns than MAX_UNSAFE are unsafe. Set from what the set measures (90.8 % / 73.0 % / 35 with the
# twenty-eighth and twenty-ninth authors' 80 conversations, after the twentieth session;
# eighteen of the thirty-five unsafe turns are in test parts, docs/decision-quality.md), so a change that
# breaks conversations fails.
MIN_TURN_ACCURACY=0.905
MIN_CONVERSATION_SUCCESS=0.725
MAX_UNSAFE=35

started=0
secure_started=0
tools_pid=""
worker_pid=""
cleanup() {
  if [ -n "$worker_pid" ]; then
    kill -TERM "$worker_pid" 2>/dev/null || true
    wait "$worker_pid" 2>/dev/null || true
  fi
  if [ -n "$tools_pid" ]; then
    kill -TERM "$tools_pid" 2>/dev/null || true
    wait "$tools_pid" 2>/dev/null || true
  fi
  if [ "$started" = 1 ]; then bash scripts/services.sh down || true; fi
  if [ "$secure_started" = 1 ]; then bash scripts/services.sh down kafka-secure cassandra-secure || true; fi
}
trap cleanup EXIT
if ! bash scripts/services.sh status >/dev/null 2>&1; then
  bash scripts/services.sh up
  started=1
fi
# TLS + SCRAM Kafka and TLS + password Cassandra for tests/secure_transport.rs (issue 25 item 4):
# required here, so those tests fail instead of skipping when the secure services are missing.
if ! bash scripts/services.sh status kafka-secure cassandra-secure >/dev/null 2>&1; then
  bash scripts/services.sh up kafka-secure cassandra-secure
  secure_started=1
fi
export TURNSTILE_REQUIRE_SECURE_SERVICES=1
eval "$(bash scripts/services.sh env)"

# Starts a fresh example tool service on a free port (log: .cache/services/run/logs/$1.log): sets
# tools_pid and tools_port, or exits with its log.
start_tools() {
  tools_log=.cache/services/run/logs/$1.log
  mkdir -p "$(dirname "$tools_log")"
  : >"$tools_log"
  python3 examples/tool_service/tool_service.py --host 127.0.0.1 --port 0 2>>"$tools_log" &
  tools_pid=$!
  tools_port=""
  for _ in $(seq 100); do
    tools_port=$(sed -n 's|^tool_service: listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$tools_log")
    [ -n "$tools_port" ] && break
    kill -0 "$tools_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$tools_port" ]; then
    tail -n 20 "$tools_log" >&2
    echo "ERROR: the example tool service did not start (log: $tools_log)" >&2
    exit 1
  fi
}

# Plays the conversation set (the command in "$@", then the floors and the data): the whole report
# to $1, its figures (everything before the first transcript) and its stderr to the log; eval_rc
# is the eval's exit code (1: a floor not met; 64 / 69: why it could not run).
play_conversations() {
  local report=$1
  shift
  eval_rc=0
  "$@" --min-turn-accuracy "$MIN_TURN_ACCURACY" --min-conversation-success "$MIN_CONVERSATION_SUCCESS" \
    --max-unsafe "$MAX_UNSAFE" \
    tests/data/conversations/*.jsonl \
    >"$report" 2>"$report.stderr" || eval_rc=$?
  awk '/^FAILED /{exit} {print}' "$report"
  cat "$report.stderr" >&2
}

stop_tools() {
  kill -TERM "$tools_pid" 2>/dev/null || true
  wait "$tools_pid" 2>/dev/null || true
  tools_pid=""
}

# The project's scenarios and its copy of the conformance examples; the steering folder's
# examples too when it sits beside the clone (the project's machines, CI), so that a newer one
# runs before it is copied into tests/conformance/.
paths=(tests/scenarios tests/conformance/examples)
shared_examples=../shared/spec/examples
if [ -d "$shared_examples" ]; then
  paths+=("$shared_examples")
else
  echo "skipped: $shared_examples not found (nothing beside the clone); the in-repo copy in tests/conformance/examples runs"
fi

# The product builds without the test harness (feature `harness`: src/testkit, src/chaos,
# `scenarios --e2e`, the fault hook): this check fails to compile if product code names a gated
# module, i.e. if the harness leaks back into what `cargo build --release` ships.
echo "== product without the harness (cargo check, no features)"
cargo check --locked --lib --bins
# One debug build, with the harness, serves the tests and the scenario runs (a release build
# would double CI time). The tests spawn target/debug/turnstile, so it must carry the feature.
RUST_TEST_THREADS=2 cargo test --locked --all-targets --features harness
cargo build --locked --features harness --bin turnstile
echo "== scenarios, in process"
./target/debug/turnstile scenarios "${paths[@]}"
echo "== scenarios, end to end (Kafka + CQL + HTTP model and tools)"
./target/debug/turnstile scenarios --e2e "${paths[@]}"
echo "== whole conversations (eval conversations: embeddings profiles, a fresh example tool service)"
if [ "${EMBEDDINGS_ENABLED:-1}" = 0 ]; then
  echo "skipped: the embeddings server is disabled (EMBEDDINGS_ENABLED=0), and the eval's embeddings profiles need it"
else
  # A fresh example tool service on a free port (it remembers cancelled orders while it runs, so
  # figures are comparable only against a fresh one); the EXIT trap stops it.
  start_tools eval_tool_service
  echo "example tool service on http://127.0.0.1:$tools_port (pid $tools_pid, log $tools_log)"
  # The full report (figures, then every failed conversation's transcript) goes to a file; the
  # log shows the figures, then what the eval said on stderr (exit 1: each floor not met; 64 / 69:
  # why it could not run).
  report=target/eval-conversations.txt
  play_conversations "$report" ./target/debug/turnstile eval conversations --config config/agents.example.yaml \
    --embeddings-base-url "$EMBEDDINGS_BASE_URL" --embeddings-cache-dir .cache/embeddings \
    --tools-base-url "http://127.0.0.1:$tools_port"
  echo "(floors: turn accuracy >= $MIN_TURN_ACCURACY, conversation success >= $MIN_CONVERSATION_SUCCESS, unsafe turns <= $MAX_UNSAFE; failed conversations' transcripts: $report)"
  stop_tools
  if [ "$eval_rc" != 0 ]; then
    echo "ERROR: the whole-conversation eval failed (exit $eval_rc; 1: a floor not met, named above)" >&2
    exit "$eval_rc"
  fi
  echo "== whole conversations through Kafka (eval conversations --through-kafka against turnstile run, as scripts/run.sh starts it)"
  # The same set and floors, each turn produced to a running worker and judged from its published
  # outputs and its stored checkpoint (docs/conversations.md "Through Kafka"). The worker runs as
  # scripts/run.sh runs it (embeddings profiles, a fresh example tool service, created topics), on
  # topics, a group and a listener of this run's own and keyspace turnstile_eval_kafka.
  start_tools eval_kafka_tool_service
  suffix="$(date +%s)-$$"
  listen_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  kafka_env=(
    TURNSTILE_BROKERS="$KAFKA_BROKERS" TURNSTILE_CQL_CONTACT="$CQL_CONTACT"
    TURNSTILE_KEYSPACE=turnstile_eval_kafka
    TURNSTILE_TOPIC_TURNS="turnstile.eval-$suffix.turns" TURNSTILE_TOPIC_REPLIES="turnstile.eval-$suffix.replies"
    TURNSTILE_TOPIC_EVENTS="turnstile.eval-$suffix.events" TURNSTILE_TOPIC_DEAD_LETTERS="turnstile.eval-$suffix.dead-letters"
  )
  worker_log=.cache/services/run/logs/eval_kafka_worker.log
  ./target/debug/turnstile migrate --contact "$CQL_CONTACT" --keyspace turnstile_eval_kafka
  env "${kafka_env[@]}" TURNSTILE_CREATE_TOPICS=true TURNSTILE_LISTEN="127.0.0.1:$listen_port" \
    TURNSTILE_GROUP_ID="turnstile-eval-$suffix" TURNSTILE_INSTANCE_ID="turnstile-eval-$suffix" \
    TURNSTILE_PROFILES=config/profiles.embeddings.yaml TURNSTILE_EMBEDDINGS_CACHE_DIR=.cache/embeddings \
    TURNSTILE_EMBEDDINGS_BASE_URL="$EMBEDDINGS_BASE_URL" TURNSTILE_TOOLS_BASE_URL="http://127.0.0.1:$tools_port" \
    ./target/debug/turnstile run >"$worker_log" 2>&1 &
  worker_pid=$!
  for _ in $(seq 600); do
    curl -fs -o /dev/null --max-time 1 "http://127.0.0.1:$listen_port/readyz" && break
    kill -0 "$worker_pid" 2>/dev/null || break
    sleep 0.2
  done
  if ! curl -fs -o /dev/null --max-time 1 "http://127.0.0.1:$listen_port/readyz"; then
    tail -n 20 "$worker_log" >&2
    echo "ERROR: the worker was not ready within 120 s (log: $worker_log)" >&2
    exit 1
  fi
  report=target/eval-conversations-kafka.txt
  play_conversations "$report" env "${kafka_env[@]}" ./target/debug/turnstile eval conversations --through-kafka \
    --config config/agents.example.yaml
  echo "(same floors; failed conversations' transcripts: $report; worker log: $worker_log)"
  kill -TERM "$worker_pid" 2>/dev/null || true
  wait "$worker_pid" 2>/dev/null || true
  worker_pid=""
  stop_tools
  if [ "$eval_rc" != 0 ]; then
    echo "ERROR: the whole-conversation eval through Kafka failed (exit $eval_rc; 1: a floor not met, 69: a service or the worker's topics unavailable, named above)" >&2
    exit "$eval_rc"
  fi
fi
echo "== deploy: Helm chart against Kubernetes and CRD schemas, alerts and dashboard (promtool, metric catalogue), AsyncAPI"
bash scripts/check-deploy.sh
echo "== supply chain: licences, bans, sources, advisories (offline RustSec snapshot)"
bash scripts/check-supply-chain.sh
echo "== SBOM of the Rust dependencies (CycloneDX 1.5: every Cargo.lock package, checked and schema-validated)"
bash scripts/sbom.sh target/sbom/turnstile.cdx.json
