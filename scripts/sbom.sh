#!/usr/bin/env bash
# The SBOM of turnstile's Rust dependencies, CycloneDX 1.5 JSON (docs/supply-chain.md, "SBOM"),
# generated and checked; run by scripts/test.sh, so CI produces it on every run.
#
#   bash scripts/sbom.sh [OUTPUT]     # default: target/sbom/turnstile.cdx.json
#   bash scripts/sbom.sh --validate FILE   # only step 3, for any CycloneDX 1.5 file (check-image.sh)
#
# 1. `python3 scripts/sbom.py rust`: every package of Cargo.lock from `cargo metadata --locked`
#    (name, version, purl pkg:cargo/NAME@VERSION, licence expression, the lock file's SHA-256 of
#    the .crate, repository, dependency graph); scope "required" for the crates of the release
#    binary's normal dependency graph (default features, this platform), "excluded" for the rest;
#    plus the librdkafka that rdkafka-sys bundles. An equivalent of `cargo cyclonedx`, which is
#    not installed (building it costs minutes on 2 cores).
# 2. `python3 scripts/sbom.py check-rust`: every Cargo.lock package present with its purl,
#    licence and checksum, bomFormat / specVersion / serial number, no dangling dependency.
# 3. Validation against the CycloneDX 1.5 JSON schema (strict: no unknown fields) with
#    cyclonedx-python-lib's validator, installed once from PyPI into .cache/sbom/venv.
# Exit non-zero, saying what is wrong, when any step fails.
set -euo pipefail
cd "$(dirname "$0")/.."

CYCLONEDX_LIB_VERSION=11.12.0
out=${1:-target/sbom/turnstile.cdx.json}
venv=.cache/sbom/venv

die() { echo "sbom: FAILED: $*" >&2; exit 1; }
command -v python3 >/dev/null || die "python3 not found (apt-get install python3)"
python3 -c 'import tomllib' 2>/dev/null || die "python3 is older than 3.11 (tomllib): install a newer python3"
command -v cargo >/dev/null || die "cargo not found"

if [[ "${1:-}" == --validate ]]; then
  out=${2:?usage: sbom.sh --validate FILE}
else
  python3 scripts/sbom.py rust --output "$out"
  python3 scripts/sbom.py check-rust "$out"
fi

if ! "$venv/bin/python" -c "import cyclonedx.validation.json, importlib.metadata as m; assert m.version('cyclonedx-python-lib') == '$CYCLONEDX_LIB_VERSION'" 2>/dev/null; then
  echo "sbom: installing cyclonedx-python-lib $CYCLONEDX_LIB_VERSION (schema validator) into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv" || die "python3 -m venv failed (apt-get install python3-venv)"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "cyclonedx-python-lib[json-validation]==$CYCLONEDX_LIB_VERSION" \
    || die "pip install cyclonedx-python-lib[json-validation]==$CYCLONEDX_LIB_VERSION failed (is PyPI reachable?)"
fi
"$venv/bin/python" - "$out" <<'EOF' || die "$out does not validate against the CycloneDX 1.5 schema (errors above)"
import sys
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
errors = JsonStrictValidator(SchemaVersion.V1_5).validate_str(open(sys.argv[1]).read(), all_errors=True)
if errors:
    for e in list(errors)[:20]:
        err = getattr(e, "data", None)
        where = "/".join(str(p) for p in getattr(err, "absolute_path", []))
        print(f"sbom: schema: at /{where}: {getattr(err, 'message', e)}", file=sys.stderr)
    sys.exit(1)
print(f"sbom: ok: {sys.argv[1]}: valid CycloneDX 1.5 JSON (strict schema, cyclonedx-python-lib)")
EOF
