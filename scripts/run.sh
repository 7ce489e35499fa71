#!/usr/bin/env bash
# Runs the worker on this machine: starts Kafka + Cassandra (scripts/services.sh) if needed,
# creates the checkpoint schema, and runs `turnstile run` in the foreground with the example
# configuration (Ctrl-C drains and stops it). Set TURNSTILE_MODEL_BASE_URL and the profiles'
# API-key variables to talk to a real model; without one every model call falls back safely.
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
# The example profiles name no endpoint; point them at a local OpenAI-compatible server
# (vLLM's default port) unless told otherwise. Without one, model calls fall back safely.
export TURNSTILE_MODEL_BASE_URL="${TURNSTILE_MODEL_BASE_URL:-http://127.0.0.1:8000/v1}"
exec ./target/release/turnstile run "$@"
