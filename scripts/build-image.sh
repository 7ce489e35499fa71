#!/usr/bin/env bash
# Builds the turnstile image (Containerfile) with its OCI labels filled in (docs/deploy.md):
#
#   bash scripts/build-image.sh -t registry.example.com/turnstile:0.1.0 [more build options]
#   bash scripts/build-image.sh --print-build-args     # only print the --build-arg options
#
# org.opencontainers.image.version   Cargo.toml's package version
# org.opencontainers.image.revision  `git rev-parse HEAD` (with "-dirty" when the tree has changes)
# org.opencontainers.image.created   now, RFC 3339 UTC (or SOURCE_DATE_EPOCH when set)
# org.opencontainers.image.source    IMAGE_SOURCE, else the `origin` remote as an https URL
# org.opencontainers.image.licenses  Apache-2.0 (fixed in the Containerfile)
#
# The build tool is IMAGE_BUILDER (default: docker if found, else buildah, else podman). The base
# images are the Containerfile's digest-pinned defaults unless --build-arg BUILDER_IMAGE=… /
# RUNTIME_IMAGE=… is passed.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "build-image: $*" >&2; exit 1; }

version=$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)
[[ -n "$version" ]] || die "cannot read the package version from Cargo.toml"
revision=${IMAGE_REVISION:-}
if [[ -z "$revision" ]]; then
  revision=$(git rev-parse HEAD 2>/dev/null) \
    || die "not a git checkout: set IMAGE_REVISION to the commit the image is built from"
  if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then revision="$revision-dirty"; fi
fi
source_url=${IMAGE_SOURCE:-}
if [[ -z "$source_url" ]]; then
  remote=$(git remote get-url origin 2>/dev/null || true)
  case "$remote" in
    git@*:*) remote=${remote#git@}; source_url="https://${remote/://}" ;;
    ssh://git@*) source_url="https://${remote#ssh://git@}" ;;
    https://*) source_url=$remote ;;
    *) source_url="" ;;
  esac
  source_url=${source_url%.git}
  source_url=$(sed -E 's#^(https://)[^/@]*@#\1#' <<<"$source_url")  # never a credential in a label
fi
[[ -n "$source_url" ]] \
  || die "no source URL: set IMAGE_SOURCE=https://… (the repository the image is built from); there is no https origin remote"
if [[ -n "${SOURCE_DATE_EPOCH:-}" ]]; then
  created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
else
  created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
fi
args=(--build-arg "IMAGE_VERSION=$version" --build-arg "IMAGE_REVISION=$revision"
  --build-arg "IMAGE_CREATED=$created" --build-arg "IMAGE_SOURCE=$source_url")

if [[ "${1:-}" == --print-build-args ]]; then
  printf '%s\n' "${args[@]}"
  exit 0
fi

builder=${IMAGE_BUILDER:-}
if [[ -z "$builder" ]]; then
  for b in docker buildah podman; do
    if command -v "$b" >/dev/null; then builder=$b; break; fi
  done
fi
[[ -n "$builder" ]] || die "no docker, buildah or podman found (set IMAGE_BUILDER)"
echo "build-image: $builder build: version $version, revision $revision, source $source_url, created $created" >&2
exec "$builder" build -f Containerfile "${args[@]}" "$@" .
