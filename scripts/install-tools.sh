#!/usr/bin/env bash
# Installs, from Debian's packages, the command-line tools the test suite uses that a fresh
# machine may lack, so that `bash scripts/test.sh` (which calls this first) works on one:
#
#   promtool   (prometheus)               scripts/check-monitoring.sh, the /metrics check of
#                                         tests/worker_kafka.rs
#   kcat       (kcat)                     the Kafka readiness probe of scripts/services.sh
#   java 17    (openjdk-17-jdk-headless)  Kafka and Cassandra (scripts/services.sh)
#   mvn        (maven)                    fetches their jars once (scripts/services.sh)
#   python3, its venv module, PyYAML      the embeddings server, the example tool service,
#              (python3, python3-venv,    scripts/check-deploy.sh, scripts/check-monitoring.sh
#               python3-yaml)
#   unzip, curl, git, flock, timeout      scripts/check-deploy.sh, scripts/run.sh,
#              (unzip, curl, git,         scripts/check-supply-chain.sh
#               util-linux, coreutils)
#
# The tools that scripts download into .cache/ (helm, kubeconform, cargo-deny, …) are fetched by
# the scripts that use them. Cargo itself is a precondition (rustup, not apt).
#
#   bash scripts/install-tools.sh     # exit 0: every tool present; 1: one missing and not installable
set -euo pipefail

say() { echo "install-tools: $*" >&2; }

command -v cargo >/dev/null || { say "FAILED: cargo not found (install Rust with rustup)"; exit 1; }

java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1; }

# Each missing tool adds its Debian package.
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need promtool prometheus
need kcat kcat
need mvn maven
need unzip unzip
need curl curl
need git git
need flock util-linux
need timeout coreutils
need python3 python3
command -v java >/dev/null 2>&1 && [[ "$(java_major)" -ge 17 ]] 2>/dev/null \
  || [[ -n "${JAVA17_HOME:-}" ]] || missing+=(openjdk-17-jdk-headless)
if command -v python3 >/dev/null 2>&1; then
  python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
  python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
else
  missing+=(python3-venv python3-yaml)
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  say "every tool is present"
  exit 0
fi
if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  say "FAILED: missing Debian packages ${missing[*]}, and this is not root with apt-get: install them, then rerun"
  exit 1
fi
say "installing ${missing[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
# The package lists may be absent or stale on a fresh machine: update once when the first try fails.
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; } \
  || { say "FAILED: apt-get install ${missing[*]}"; exit 1; }
command -v promtool >/dev/null && command -v kcat >/dev/null \
  || { say "FAILED: promtool or kcat still missing after the install"; exit 1; }
say "installed ${missing[*]}"
