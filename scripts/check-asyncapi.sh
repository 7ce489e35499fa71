#!/usr/bin/env bash
# Validates the AsyncAPI document of the Kafka interface (docs/asyncapi.md).
#
#   bash scripts/check-asyncapi.sh [DOCUMENT]     # default: asyncapi/turnstile.asyncapi.yaml
#
# Installs the pinned @asyncapi/parser, ajv and ajv-formats (asyncapi/package.json and
# package-lock.json) once into .cache/asyncapi/ with `npm ci`; later runs reuse that folder
# without touching the network, until the lock file or the Node major version changes. Then
# asyncapi/validate.mjs parses the document, resolves every $ref, fails on any parser error and
# checks the payloads, examples, keys, headers and topic names (see the top of that file).
# Exit 0 when it all holds; non-zero with every problem printed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cache="$root/.cache/asyncapi"
doc="${1:-asyncapi/turnstile.asyncapi.yaml}"

die() {
  echo "check-asyncapi: FAILED: $*" >&2
  exit 1
}

command -v node >/dev/null || die "node is not installed (Node 18 or later is needed)"
command -v npm >/dev/null || die "npm is not installed"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[[ "$node_major" -ge 18 ]] || die "Node $(node --version) is too old (18 or later is needed)"
[[ -f "$doc" ]] || die "no document at $doc"

# What the cached install was made from: the lock file and the Node major version.
want="$( (cat asyncapi/package-lock.json; echo "node $node_major") | sha256sum | cut -d' ' -f1)"
install() {
  mkdir -p "$cache"
  # One installer at a time (scripts/check-deploy.sh and scripts/test.sh may both call this).
  exec 9>"$cache.lock"
  flock 9
  if [[ "$(cat "$cache/.installed" 2>/dev/null || true)" == "$want" && -d "$cache/node_modules/@asyncapi/parser" ]]; then
    return 0
  fi
  echo "check-asyncapi: installing the pinned @asyncapi/parser into .cache/asyncapi/ (once)" >&2
  rm -rf "$cache/node_modules" "$cache/.installed"
  cp asyncapi/package.json asyncapi/package-lock.json "$cache/"
  # --ignore-scripts: nothing here needs an install script (one dependency's only phones home).
  npm ci --prefix "$cache" --ignore-scripts --no-audit --no-fund --loglevel=error >&2 \
    || die "npm ci into .cache/asyncapi failed (is the npm registry reachable?)"
  echo "$want" >"$cache/.installed"
  exec 9>&-
}
if [[ "$(cat "$cache/.installed" 2>/dev/null || true)" != "$want" || ! -d "$cache/node_modules/@asyncapi/parser" ]]; then
  install
fi

node asyncapi/validate.mjs --modules "$cache" "$doc" || die "$doc does not hold (problems above)"
