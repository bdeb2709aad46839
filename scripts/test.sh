#!/usr/bin/env bash
# test.sh — the whole test suite, as CI runs it (README's test command).
#
#   scripts/test.sh            install what is missing, then run every suite
#   QOSLANE_SKIP_INSTALL=1     do not call install-deps.sh
#   QOSLANE_SKIP_SLURM=1       skip the suites that take over the machine's
#                              Slurm (the rig rewrites /etc/slurm) and the
#                              chroot Slurms; CI runs them
#   QOSLANE_SLURM_VERSIONS     the Slurm versions to run the e2e suite on
#                              (default: every row of rigs/slurm_versions.tsv)
#   QOSLANE_SUITE_TIMEOUT      seconds an end-to-end suite may take before it is
#                              stopped and counted failed (default 1800; the
#                              longest, omnia.sh, takes ~600 s)
#
# Suites: formatting and lints; Cargo.lock against the RustSec advisories (offline); shellcheck over every shell script; the Slurm versions
# table's consistency; unit and
# integration tests (with fault injection compiled in); the real simulated
# fabric (ibsim + OpenSM + smpquery); the multi-switch fabric rig's self-test
# (its levers, read back with the real tools); Prometheus rule tests; the real Slurm
# cluster end to end on every Slurm of rigs/slurm_versions.tsv, one node and (in the chroots)
# four; qoslane's metrics in a real Prometheus (its alerts fire, the dashboard's queries answer,
# slurmctld's OpenMetrics scraped); the TaskProlog's exports read by each chroot's UCX and Open MPI; the Omnia
# playbook against the local Slurm; the admin story; every shell block of the admin docs that can
# run without Slurm (tests/doc_blocks.sh, seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# The Slurm versions the suites run: one table (slurm_versions, slurm_field, slurm_newest)
# shellcheck source=../rigs/slurm_versions.sh
. rigs/slurm_versions.sh

step() { printf '\n==== %s\n' "$*" >&2; }

if [ "${QOSLANE_SKIP_INSTALL:-0}" != 1 ]; then
  step "install dependencies"
  bash scripts/install-deps.sh
fi

step "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --features qoslane/fault-injection -q -- -D warnings
# Without features too: what only a feature uses (a fault-injection test's helper) is dead code
# there, and `cargo clippy --workspace --all-targets` is what CONTRIBUTING says passes.
cargo clippy --workspace --all-targets -q -- -D warnings
# The fuzz crate is a workspace of its own: its Cargo.lock must be current too (a stale one
# makes `cargo fuzz` re-resolve and drift from the versions the main lock pins).
(cd crates/qoslane/fuzz && cargo metadata --locked --format-version 1 >/dev/null)

step "supply chain: Cargo.lock against the RustSec advisory database (offline, scripts/audit-deps.sh)"
bash scripts/audit-deps.sh

step "shellcheck"
bash scripts/shellcheck.sh

step "the Slurm versions table (rigs/slurm_versions.tsv)"
slurm_versions_check

step "unit and integration tests (fault injection on, real tools required)"
export QOSLANE_REQUIRE_TOOLS=1 QOSLANE_FABRIC_RIG=1
cargo test --workspace --features qoslane/fault-injection 2>&1 | tee /tmp/qoslane-cargo-test.log
grep -q "test result: ok" /tmp/qoslane-cargo-test.log

step "the admin docs' shell blocks, run as written on a fixture node (tests/doc_blocks.sh)"
bash tests/doc_blocks.sh

step "the multi-switch fabric rig: every lever read back (rigs/selftest_fabric_path.sh)"
bash rigs/selftest_fabric_path.sh

step "the OpenSM event plugin on the rig's real OpenSM, fuzzed and measured (tests/e2e/smplugin.sh, ~12 s)"
bash tests/e2e/smplugin.sh

step "fabric watch reading the plugin's spool on the rig's real OpenSM: an SM restart, a bounce, an LFT change, each verdict a full audit's (tests/e2e/smreader.sh, ~30 s)"
bash tests/e2e/smreader.sh

step "Prometheus rules and metrics (promtool)"
promtool check rules deploy/prometheus/qoslane-alerts.yml
(cd deploy/prometheus && promtool test rules qoslane-alerts.test.yml)
promtool check metrics < crates/qoslane/tests/golden/metrics.prom

# Every suite below runs under a cap (its own process group, SIGTERM at the cap, SIGKILL 30 s
# later): each waits with deadlines of its own, and a hang none of them foresaw still ends CI.
suite_cap=${QOSLANE_SUITE_TIMEOUT:-1800}
capped() { # capped SCRIPT [ARGS…]: the suite, its exit status; 124 when the cap stopped it
  local rc=0
  timeout --kill-after=30 "$suite_cap" bash "$@" || rc=$?
  [ "$rc" != 124 ] && [ "$rc" != 137 ] ||
    printf '[test.sh] %s stopped at the cap of %ss (QOSLANE_SUITE_TIMEOUT)\n' "$*" "$suite_cap" >&2
  return "$rc"
}

step "packages: the .deb's contents, lintian, man pages, logrotate, install and purge (no Slurm)"
capped tests/e2e/packages.sh

# The Slurm suite once per Slurm version of rigs/slurm_versions.tsv: the host's, then each in its
# chroot (rigs/slurm_chroot_rig.sh creates each when missing, ~30 s, then reuses it); each closes
# with "slurm-VERSION: N passed, 0 failed". The several-node suite runs on every chroot's.
# QOSLANE_SLURM_VERSIONS narrows the list (e.g. "22.05").
versions=${QOSLANE_SLURM_VERSIONS:-$(slurm_versions | paste -sd ' ')}
runs=()
for v in $versions; do runs+=("tests/e2e/slurm.sh --slurm $v"); done
for v in $versions; do
  [ "$(slurm_field "$v" where 2>/dev/null)" = host ] || runs+=("tests/e2e/slurm_nodes.sh --slurm $v")
done
# Placement (the Slurm side: node features, job_submit.lua, placeholders; ~20 s each)
for v in $versions; do runs+=("tests/e2e/placement.sh --slurm $v"); done
# The job's user told of off-level bytes (a file of their own; AdminComment refused at the Epilog)
for v in $versions; do runs+=("tests/e2e/notice.sh --slurm $v"); done
# The whole chain on the multi-switch fabric, four nodes (issue 34's "done when"; ~2 min each)
for v in $versions; do [ "$(slurm_field "$v" where 2>/dev/null)" = host ] || runs+=("tests/e2e/fabric_placement.sh --slurm $v"); done
# Prometheus (its alerts, the dashboard, slurmctld's OpenMetrics) on the newest version with
# OpenMetrics (two nodes), or on the first version QOSLANE_SLURM_VERSIONS lists when it leaves
# that one out.
pv=$(slurm_newest openmetrics)
case " $versions " in *" $pv "*) ;; *) pv=${versions%% *} ;; esac
runs+=("tests/e2e/prometheus.sh --slurm $pv" tests/e2e/libraries.sh tests/e2e/omnia.sh tests/e2e/admin_story.sh)
# A failed end-to-end suite does not stop the others: one CI run reports every failure.
failed=()
for t in "${runs[@]}"; do
  [ -e "${t%% *}" ] || continue
  if [ "${QOSLANE_SKIP_SLURM:-0}" = 1 ]; then step "skipped (QOSLANE_SKIP_SLURM=1): $t"; continue; fi
  step "end to end: $t"
  t0=$(date +%s)
  rc=0
  # shellcheck disable=SC2086  # "script --slurm VERSION": split on purpose
  capped $t || rc=$?
  printf '[test.sh] %s took %ss (exit %s)\n' "$t" "$(($(date +%s) - t0))" "$rc" >&2
  [ "$rc" = 0 ] || failed+=("$t")
done
if [ ${#failed[@]} -gt 0 ]; then
  step "FAILED: ${#failed[@]} end-to-end suite(s)"
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
step "all suites passed"
