#!/usr/bin/env bash
# The whole test suite: unit, property and integration tests, then every conversation scenario
# (the project's own and the shared examples) through the in-process runner.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --locked --all-targets

examples=../shared/spec/examples
paths=(tests/scenarios)
if [ -d "$examples" ]; then
  paths+=("$examples")
else
  echo "note: $examples not found; running the project's own scenarios only" >&2
fi
cargo run --locked --quiet -- scenarios "${paths[@]}"
