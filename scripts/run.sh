#!/usr/bin/env bash
# Runs the worker on this machine: starts the local services (scripts/services.sh: Kafka, Cassandra
# and the embeddings server on 127.0.0.1:8000) if needed, creates the checkpoint schema, starts the
# example tool service (examples/tool_service, 127.0.0.1:8081) unless TURNSTILE_TOOLS_BASE_URL names
# your own, and runs `turnstile run` in the foreground with the example configuration (Ctrl-C or
# SIGTERM drains and stops it, then the tool service). Without TURNSTILE_MODEL_BASE_URL the
# embeddings profiles decide (config/profiles.embeddings.yaml, no API key needed); set it (an
# OpenAI-compatible chat endpoint) and the profiles' API-key variables to use the LLM profiles.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/services.sh up
eval "$(bash scripts/services.sh env)"
cargo build --locked --release --bin turnstile
./target/release/turnstile migrate --contact "$CQL_CONTACT"
export TURNSTILE_BROKERS="${TURNSTILE_BROKERS:-$KAFKA_BROKERS}"
export TURNSTILE_CQL_CONTACT="${TURNSTILE_CQL_CONTACT:-$CQL_CONTACT}"
export TURNSTILE_CREATE_TOPICS="${TURNSTILE_CREATE_TOPICS:-true}"
export TURNSTILE_LISTEN="${TURNSTILE_LISTEN:-127.0.0.1:9464}"
# Which models decide: with a chat endpoint (TURNSTILE_MODEL_BASE_URL) the LLM profiles of
# config/profiles.example.yaml; without one, the embeddings profiles of
# config/profiles.embeddings.yaml against the local embeddings server (port 8000), so the quick
# start routes, hands off and ends sessions with no API key. TURNSTILE_PROFILES wins over both.
if [[ -z "${TURNSTILE_PROFILES:-}" ]]; then
  if [[ -n "${TURNSTILE_MODEL_BASE_URL:-}" ]]; then
    export TURNSTILE_PROFILES=config/profiles.example.yaml
  else
    export TURNSTILE_PROFILES=config/profiles.embeddings.yaml
  fi
fi
echo "[run] model profiles: $TURNSTILE_PROFILES"
# Example vectors and fitted heads, by content hash: a restart does not re-embed.
export TURNSTILE_EMBEDDINGS_CACHE_DIR="${TURNSTILE_EMBEDDINGS_CACHE_DIR:-.cache/embeddings}"
# The embeddings server of services.sh, unless told otherwise (absent with EMBEDDINGS_ENABLED=0).
if [[ -n "${TURNSTILE_EMBEDDINGS_BASE_URL:-${EMBEDDINGS_BASE_URL:-}}" ]]; then
  export TURNSTILE_EMBEDDINGS_BASE_URL="${TURNSTILE_EMBEDDINGS_BASE_URL:-$EMBEDDINGS_BASE_URL}"
fi

tools_pid=""
stop_tools() {
  [[ -n "$tools_pid" ]] || return 0
  kill -TERM "$tools_pid" 2>/dev/null || true
  wait "$tools_pid" 2>/dev/null || true
}
trap stop_tools EXIT

if [[ -z "${TURNSTILE_TOOLS_BASE_URL:-}" ]]; then
  tools_port="${TOOL_SERVICE_PORT:-8081}"
  tools_url="http://127.0.0.1:$tools_port"
  tools_log=.cache/services/run/logs/tool_service.log
  if (exec 3<>"/dev/tcp/127.0.0.1/$tools_port") 2>/dev/null; then
    echo "[run] ERROR: port 127.0.0.1:$tools_port is taken, so the example tool service cannot start there." \
      "If that is your tool service: TURNSTILE_TOOLS_BASE_URL=$tools_url bash scripts/run.sh;" \
      "else stop that process or use another port: TOOL_SERVICE_PORT=18081 bash scripts/run.sh" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$tools_log")"
  # A background job of a non-interactive shell ignores SIGINT, so Ctrl-C leaves the tool service
  # up while the worker drains (its in-flight executions still need it); stop_tools ends it after.
  python3 examples/tool_service/tool_service.py --host 127.0.0.1 --port "$tools_port" 2>>"$tools_log" &
  tools_pid=$!
  for _ in $(seq 100); do
    curl -fs -o /dev/null --max-time 1 "$tools_url/health" && break
    if ! kill -0 "$tools_pid" 2>/dev/null; then
      tail -n 20 "$tools_log" >&2
      echo "[run] ERROR: the example tool service exited at start (log: $tools_log)" >&2
      exit 1
    fi
    sleep 0.1
  done
  curl -fs -o /dev/null --max-time 1 "$tools_url/health" ||
    { echo "[run] ERROR: the example tool service is not answering $tools_url/health after 10 s (log: $tools_log)" >&2; exit 1; }
  echo "[run] example tool service on $tools_url (pid $tools_pid, log $tools_log)"
  export TURNSTILE_TOOLS_BASE_URL="$tools_url"
fi

# In the background with `wait`, so that a SIGTERM to this script reaches the worker at once (bash
# runs traps only between commands) and the EXIT trap still stops the tool service afterwards.
./target/release/turnstile run "$@" &
worker=$!
trap 'kill -TERM "$worker" 2>/dev/null || true' INT TERM
while kill -0 "$worker" 2>/dev/null; do wait "$worker" || true; done
wait "$worker"   # the worker's own exit status (bash keeps it), which becomes this script's
