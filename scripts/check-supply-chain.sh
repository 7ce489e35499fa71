#!/usr/bin/env bash
# Supply-chain checks of Cargo.lock with cargo-deny, offline (docs/supply-chain.md).
#
#   bash scripts/check-supply-chain.sh [CHECK...]   # default: all = advisories bans licenses sources
#
# 1. Installs the pinned cargo-deny once into .cache/cargo-tools/ (`cargo install --locked`, from
#    crates.io; ~7 min on 2 cores); later runs reuse it without building.
# 2. `cargo fetch --locked`: cargo-deny reads `cargo metadata`, which needs every locked crate
#    (all targets) in cargo's cache; tried with --offline first, so no network once they are there.
# 3. The RustSec advisory db, first found of: the snapshot beside the repo (../shared/advisory-db/,
#    a plain folder, on the project's machines and in CI), copied into a temporary git repo
#    committed with the snapshot's own date, where cargo-deny expects its db; else a shallow clone
#    of RustSec's git repository (deny.toml's db-urls) when the network allows; else the
#    advisories check is skipped with a line saying so, and the other checks still run.
# 4. `cargo deny --offline --locked check` with the committed deny.toml: cargo-deny fetches nothing.
# Exit 0 when every check passes; non-zero, with each finding printed, otherwise. A finding is
# accepted only by an entry with a reason in deny.toml.
#
# Environment:
#   TURNSTILE_ADVISORY_DB_SRC  the snapshot folder (default: ../shared/advisory-db beside the repo;
#                              when set, it must hold the db: no clone, no skip)
#   TURNSTILE_CARGO_TOOLS      the install root of cargo-deny (default: .cache/cargo-tools)
set -euo pipefail

CARGO_DENY_VERSION=0.20.2
# Where cargo-deny 0.20 looks for the db of deny.toml's db-urls entry
# "https://github.com/RustSec/advisory-db": <db-path>/<last path segment>-<xxhash64 of the url>.
DB_DIR_NAME=advisory-db-3157b0e258782691
WARN_AGE_DAYS=90   # cargo-deny's default staleness limit; deny.toml fails from 365 days
ADVISORY_DB_URL=https://github.com/RustSec/advisory-db # deny.toml's db-urls entry

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
db_src="${TURNSTILE_ADVISORY_DB_SRC:-$root/../shared/advisory-db}"
tools="${TURNSTILE_CARGO_TOOLS:-$root/.cache/cargo-tools}"
deny="$tools/bin/cargo-deny"

say() { echo "check-supply-chain: $*" >&2; }
die() {
  echo "check-supply-chain: FAILED: $*" >&2
  exit 1
}
# cargo-deny runs git on the db copy: an outer GIT_DIR etc. must not redirect it.
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_CEILING_DIRECTORIES

command -v cargo >/dev/null || die "cargo is not installed"
command -v git >/dev/null || die "git is not installed (the advisory db copy is a git repo)"
[[ -f deny.toml ]] || die "no deny.toml at the repo root"
if [[ -n "${TURNSTILE_ADVISORY_DB_SRC:-}" && ! -d "$db_src/crates" ]]; then
  die "no RustSec advisory db at $db_src (TURNSTILE_ADVISORY_DB_SRC: expected its crates/ folder)"
fi

checks=("$@")
[[ ${#checks[@]} -gt 0 ]] || checks=(all)

# -- 1. cargo-deny, pinned, built once ------------------------------------------------------------
have_version() { [[ -x "$deny" && "$("$deny" --version 2>/dev/null || true)" == "cargo-deny $CARGO_DENY_VERSION" ]]; }
if ! have_version; then
  mkdir -p "$tools"
  exec 9>"$tools.lock"
  flock 9 # one installer at a time; a second caller waits, then finds it installed
  if ! have_version; then
    say "installing cargo-deny $CARGO_DENY_VERSION into ${tools#"$root"/} (once; slow: it builds from source)"
    start=$SECONDS
    cargo install --locked --force --root "$tools" "cargo-deny@$CARGO_DENY_VERSION" \
      || die "cargo install cargo-deny@$CARGO_DENY_VERSION failed (is crates.io reachable?)"
    have_version || die "$deny does not report cargo-deny $CARGO_DENY_VERSION after the install"
    say "installed cargo-deny in $((SECONDS - start)) s"
  fi
  exec 9>&-
fi
say "tool: $("$deny" --version) (${deny#"$root"/})"

# -- 2. every locked crate in cargo's cache (cargo metadata needs them all) ----------------------
# Offline first (no network when all are cached); else download the missing ones from crates.io.
if ! cargo fetch --locked --offline --quiet 2>/dev/null; then
  say "fetching the locked crates that cargo's cache lacks (cargo fetch --locked)"
  cargo fetch --locked --quiet || die "cargo fetch --locked failed (Cargo.lock out of date, or crates.io unreachable)"
fi

# -- 3. the advisory db: the snapshot as a git repo dated as the snapshot, or a fresh clone --------
tmp="$(mktemp -d "${TMPDIR:-/tmp}/turnstile-advisory-dbs.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
db="$tmp/$DB_DIR_NAME"
snap_info=""
snap_date=""
if [[ -d "$db_src/crates" ]]; then
  snap_info="$(head -n1 "$db_src/SNAPSHOT.txt" 2>/dev/null || true)"
  snap_date="$(grep -oE '\(20[0-9]{2}-[0-9]{2}-[0-9]{2}\)' <<<"$snap_info" | tr -d '()' | head -n1 || true)"
  if [[ -z "$snap_date" ]]; then
    # No date in SNAPSHOT.txt: the newest advisory's date (the snapshot is at least that old).
    snap_date="$(grep -rhoE '^date = "20[0-9]{2}-[0-9]{2}-[0-9]{2}"' "$db_src/crates" | cut -d'"' -f2 | sort | tail -n1)"
    [[ -n "$snap_date" ]] || die "cannot date the advisory db at $db_src (no SNAPSHOT.txt date, no advisory dates)"
  fi
  mkdir "$db"
  # shared/ may be read-only (CI's copy has no write bits): copy without its modes.
  cp -R --no-preserve=mode,ownership "$db_src/." "$db/"
  export GIT_AUTHOR_DATE="${snap_date}T00:00:00Z" GIT_COMMITTER_DATE="${snap_date}T00:00:00Z"
  git -C "$db" init -q -b main
  git -C "$db" add -A
  git -C "$db" -c user.name=advisory-db-snapshot -c user.email=snapshot@localhost \
    -c commit.gpgsign=false -c core.hooksPath=/dev/null commit -q -m "snapshot: $snap_info" \
    || die "could not commit the advisory db copy in $db"
  unset GIT_AUTHOR_DATE GIT_COMMITTER_DATE
  # cargo-deny dates the db by max(HEAD commit, .git/HEAD mtime): make both the snapshot's date.
  touch -d "${snap_date}T00:00:00Z" "$db/.git/HEAD"
  db_from="$(cd "$db_src" && pwd -P)"
elif timeout 600 git clone --quiet --depth 1 "$ADVISORY_DB_URL" "$db" 2>"$tmp/clone.err"; then
  snap_date="$(git -C "$db" log -1 --format=%cs)"
  snap_info="RustSec advisory-db $(git -C "$db" rev-parse --short HEAD) ($snap_date), cloned now"
  db_from="$ADVISORY_DB_URL"
else
  say "skipped: the advisories check: no snapshot at $db_src and $ADVISORY_DB_URL cannot be cloned ($(head -n1 "$tmp/clone.err")); licences, bans and sources are still checked"
  kept=()
  for check in "${checks[@]}"; do
    case "$check" in
      all) kept+=(bans licenses sources) ;;
      advisories) ;;
      *) kept+=("$check") ;;
    esac
  done
  if [[ ${#kept[@]} -eq 0 ]]; then
    say "nothing left to check"
    exit 0
  fi
  checks=("${kept[@]}")
fi
if [[ -n "$snap_date" ]]; then
  export TURNSTILE_ADVISORY_DBS="$tmp" # deny.toml: db-path = "${TURNSTILE_ADVISORY_DBS:-...}"
  age_days=$((($(date -u +%s) - $(date -u -d "$snap_date" +%s)) / 86400))
  n_adv="$(find "$db/crates" -name 'RUSTSEC-*.md' | wc -l)"
  [[ "$n_adv" -gt 0 ]] || die "the advisory db from $db_from holds no RUSTSEC-*.md advisory"
  say "advisory db: $n_adv advisories from $db_from (of $snap_date, $age_days days old)"
  [[ -n "$snap_info" ]] && say "  $snap_info"
  if [[ "$age_days" -gt "$WARN_AGE_DAYS" ]]; then
    say "WARNING: the advisory snapshot is $age_days days old (over $WARN_AGE_DAYS): advisories published since $snap_date are not checked; refresh shared/advisory-db (the check fails past 365 days)"
  fi
fi

# -- 4. the checks --------------------------------------------------------------------------------
say "running: cargo-deny --offline --locked check --show-stats ${checks[*]}  (config deny.toml; Cargo.lock: $(grep -c '^\[\[package\]\]' Cargo.lock) packages)"
start=$SECONDS
if ! "$deny" --offline --locked --color never check --show-stats "${checks[@]}"; then
  die "cargo deny found problems (above). Fix them, or accept one in deny.toml with a reason and list it in docs/supply-chain.md"
fi
say "OK: cargo deny check ${checks[*]} passed in $((SECONDS - start)) s (advisory db: ${snap_date:-none, skipped})"
