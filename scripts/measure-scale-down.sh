#!/usr/bin/env bash
# Measures how long read_committed consumers wait when workers leave (issue 25, item 6;
# docs/benchmarks.md "Scale-down and kill"). Each run is a `turnstile chaos` scenario against the
# real Kafka and Cassandra of scripts/services.sh: three `turnstile run` workers at the production
# timings (drain budget 8 s, transaction timeout 13 s, session timeout 15 s) on one inbound topic
# with 6 partitions, a steady stream of about 20 turns/s (60 conversations, 1,200 turns over 60 s,
# a 200 ms model), then 20 s in
#   scale-down            SIGTERM to two workers at once (a StatefulSet scaled 3 -> 1), or
#   kill-in-transaction   SIGKILL of one worker while its transaction is open (its outputs are
#                         on the broker, uncommitted; the harness-only hook
#                         TURNSTILE_FAULT_HOLD_TRANSACTION_FILE holds it there).
# A read_committed reader of the reply and event topics stamps when each record became visible;
# each run prints the longest wait for a written output (visible - producer timestamp), the longest
# time an inbound partition's replies stopped, and the turn wait (inbound produced -> reply
# visible), before and after the signal. Timing judges nothing: a run fails (and so this script)
# only when the independent checker finds a lost, duplicated or wrong output, or no real work.
#
# Usage: bash scripts/measure-scale-down.sh [RUNS] [-- extra `turnstile chaos` options]
#   RUNS  runs of each scenario, alternating (default 1); about 80 s per run plus the build.
#   e.g.  bash scripts/measure-scale-down.sh 3
#         bash scripts/measure-scale-down.sh 1 -- --worker-env TURNSTILE_SESSION_TIMEOUT_MS=10000
# Output: the tables on stdout and in target/bench/scale-down-<unix secs>.md; worker logs in
# target/chaos/<scenario>-<run>/. Debug build (`--features harness`: the harness is not in a
# release build).
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-1}"
[[ $# -gt 0 ]] && shift
[[ "${1:-}" == "--" ]] && shift
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "measure-scale-down: RUNS must be a whole number >= 1, got '$runs'" >&2
  exit 64
fi

# Services already answering (possibly started from another checkout, whose state directory
# `services.sh status` here does not see) are used as they are; else this checkout starts them.
reachable() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }
if ! reachable "${KAFKA_BROKERS:-127.0.0.1:9092}" || ! reachable "${CQL_CONTACT:-127.0.0.1:9042}"; then
  bash scripts/services.sh up
fi
cargo build --features harness --bin turnstile

chaos_pid=""
cleanup() {
  # Only what this script started: the chaos process and its worker children, by PID.
  if [[ -n "$chaos_pid" ]] && kill -0 "$chaos_pid" 2>/dev/null; then
    for child in $(pgrep -P "$chaos_pid" || true); do
      kill -KILL "$child" 2>/dev/null || true
    done
    kill -KILL "$chaos_pid" 2>/dev/null || true
    wait "$chaos_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p target/bench
report="target/bench/scale-down-$(date +%s).md"
{
  echo "# scale-down measurement, $(date -u +%FT%TZ), $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo ' + local changes')"
  echo
  echo "$(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); extra options: ${*:-none}"
} >"$report"

failed=0
for ((i = 1; i <= runs; i++)); do
  for fault in scale-down kill-in-transaction; do
    echo "measure-scale-down: run $i/$runs, $fault" >&2
    ./target/debug/turnstile chaos --fault "$fault" "$@" >"$report.part" &
    chaos_pid=$!
    status=0
    wait "$chaos_pid" || status=$?
    chaos_pid=""
    { echo; echo "## run $i, $fault (exit $status)"; echo; cat "$report.part"; } >>"$report"
    if [[ "$status" -ne 0 ]]; then
      echo "measure-scale-down: $fault run $i FAILED (exit $status); see the table" >&2
      failed=1
    fi
  done
done
rm -f "$report.part"
cat "$report"
echo "measure-scale-down: written to $report" >&2
exit "$failed"
