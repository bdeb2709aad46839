#!/usr/bin/env bash
# audit-deps.sh — Cargo.lock against the RustSec advisory database, offline (a step of
# scripts/test.sh, near "format and lints").
#
#   scripts/audit-deps.sh        fail on any advisory not in IGNORE below
#
# The database is a snapshot beside the checkout, never copied into it: ../shared/advisory-db
# from the repository's root (QOSLANE_ADVISORY_DB names another one, e.g. from a worktree).
# When it is missing the step says so loudly and skips (QOSLANE_REQUIRE_ADVISORY_DB=1: fails).
# cargo-audit is built once (`cargo install --locked`: minutes, half an hour on 2 busy cores) into
# ${XDG_CACHE_HOME:-~/.cache}/qoslane/tools and reused; the audit itself never touches the
# network: --no-fetch (the snapshot as it is), --stale (a snapshot is old by design; its date is
# in its SNAPSHOT.txt), --no-yanked (yanked crates are a crates.io index query).
# Any advisory fails the step, warnings (unsound, unmaintained) included, unless IGNORE below
# lists it with the reason it does not apply.
# Only the workspace's Cargo.lock is audited (crates/qoslane/fuzz has its own, not shipped).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)

CARGO_AUDIT_VERSION=0.22.2
# Advisories that do not apply, one a line with its reason:
#   RUSTSEC-YYYY-NNNN  # crate: why it does not apply to qoslane
# (none: the snapshot of 2026-08-21 finds nothing in Cargo.lock)
IGNORE=(
)
db=${QOSLANE_ADVISORY_DB:-$(dirname "$repo")/shared/advisory-db}
tools=${XDG_CACHE_HOME:-${HOME:?}/.cache}/qoslane/tools
audit=$tools/bin/cargo-audit

if [ ! -d "$db/crates" ]; then
  # Said loudly, not failed: the snapshot lives outside the checkout, and a machine without it
  # must still run every other suite (QOSLANE_REQUIRE_ADVISORY_DB=1 makes this an error).
  echo "audit-deps.sh: WARNING: no advisory database at $db: NOT CHECKED (QOSLANE_ADVISORY_DB names one)" >&2
  [ "${QOSLANE_REQUIRE_ADVISORY_DB:-0}" != 1 ] || exit 1
  exit 0
fi

if ! "$audit" audit --version 2>/dev/null | grep -qx "cargo-audit-audit $CARGO_AUDIT_VERSION"; then
  echo "audit-deps.sh: installing cargo-audit $CARGO_AUDIT_VERSION into $tools (a few minutes, once)" >&2
  cargo install --locked --quiet cargo-audit --version "$CARGO_AUDIT_VERSION" --root "$tools"
fi

ignores=()
for id in "${IGNORE[@]}"; do ignores+=(--ignore "$id"); done
echo "audit-deps.sh: Cargo.lock against the advisory database at $db" >&2
"$audit" audit --no-fetch --stale --no-yanked --deny warnings --db "$db" "${ignores[@]}" --file Cargo.lock
