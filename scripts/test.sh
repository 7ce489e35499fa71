#!/usr/bin/env bash
# The whole test suite, on a fresh machine too: starts Kafka + Cassandra (scripts/services.sh)
# when they are not running, checks that the product compiles without the test harness, runs
# every Rust test with it (`--features harness`: unit, property, integration against the real
# services), then every conversation scenario in process and end to end through the worker, then
# the offline deploy checks (chart, alerts, dashboard, AsyncAPI) and the supply-chain check.
# Stops the services at the end only if it started them.
set -euo pipefail
cd "$(dirname "$0")/.."

started=0
if ! bash scripts/services.sh status >/dev/null 2>&1; then
  bash scripts/services.sh up
  started=1
fi
cleanup() { if [ "$started" = 1 ]; then bash scripts/services.sh down || true; fi; }
trap cleanup EXIT
eval "$(bash scripts/services.sh env)"

examples=../shared/spec/examples
paths=(tests/scenarios)
if [ -d "$examples" ]; then
  paths+=("$examples")
else
  echo "note: $examples not found; running the project's own scenarios only" >&2
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
echo "== deploy: Helm chart against Kubernetes and CRD schemas, alerts and dashboard (promtool, metric catalogue), AsyncAPI"
bash scripts/check-deploy.sh
echo "== supply chain: licences, bans, sources, advisories (offline RustSec snapshot)"
bash scripts/check-supply-chain.sh
