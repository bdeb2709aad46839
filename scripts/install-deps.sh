#!/usr/bin/env bash
# install-deps.sh — everything the tests and the demo need on a fresh Debian 12
# machine, as root: the simulated fabric (ibsim + OpenSM + infiniband-diags),
# the host's Slurm cluster (slurmctld/slurmd/slurmdbd, MariaDB, munge), mmdebstrap for the
# chroot Slurms of rigs/slurm_versions.tsv,
# Prometheus tools, Ansible, benchmarking tools, shellcheck, Chromium (the audit page's
# tests); and the Rust components.
# Idempotent: a second run installs nothing.
set -euo pipefail

PKGS=(
  # simulated InfiniBand fabric and the real diag tools
  ibsim-utils libumad2sim0 opensm infiniband-diags
  # the multi-switch rig builds its SMP Set tool (rigs/smpset.c) against libibmad5
  gcc libc6-dev libibmad5
  # the OpenSM event plugin (smplugin/): built against OpenSM's headers
  make libopensm-dev libibumad-dev
  # single-node Slurm cluster
  slurmctld slurmd slurm-client slurmdbd munge mariadb-server
  # the newer Slurm rigs (rigs/slurm_chroot_rig.sh): the suites' chroots, their cached tarballs
  mmdebstrap zstd
  # telemetry: promtool, node_exporter and the Prometheus server that
  # tests/e2e/prometheus.sh runs (curl and python3-yaml: its API reads and config)
  prometheus prometheus-node-exporter curl python3-yaml
  # Omnia integration (python3-apt: Ansible's apt module; rpm: rpmbuild for the .rpm;
  # python3-venv: ansible-lint is installed from PyPI into a venv by deploy/omnia/lint.sh)
  ansible-core yamllint python3-apt rpm python3-venv
  # benchmarks (bench/run.sh): hyperfine, /usr/bin/time for peak RSS
  hyperfine time
  # what one hook costs in threads, fsyncs and programs (tests/integration/cost.rs, bench/cycle.sh)
  strace
  # the libraries that read the TaskProlog's exports (tests/integration/libraries.rs)
  ucx-utils openmpi-bin
  # lint of every shell script (scripts/shellcheck.sh, a step of scripts/test.sh)
  shellcheck
  # packages (tests/e2e/packages.sh): lintian on the .deb, rpmlint on the .rpm, the shipped logrotate rule,
  # man --warnings on every page (man-db)
  lintian rpmlint logrotate man-db
  # the fabric audit's HTML page opened headless (tests/integration/fabric/page.rs)
  chromium
  # the placement suite's check of job_submit.lua's logic without Slurm (tests/e2e/placement.sh)
  lua5.1
  # misc used by scripts
  procps psmisc python3
  # JSON in the shell: tests/e2e/smreader.sh and bench/fabric_audit.sh read reports and verdicts with jq
  jq
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  echo "install-deps: installing ${missing[*]}" >&2
  # Daemons running now (other suites' node_exporter or Prometheus) are not ours to stop.
  # (node_exporter's comm is cut to 15 characters: prometheus-node.)
  telemetry_pids() { { pgrep -x prometheus; pgrep -x prometheus-node; } | tr '\n' ' ' || true; }
  before=" $(telemetry_pids) "
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then   # keep maintainer scripts from starting daemons
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/qoslane-apt.log 2>&1 ||
    { [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d; tail -30 /tmp/qoslane-apt.log >&2; exit 1; }
  [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  # Packages may have started daemons despite policy-rc.d (no systemd here); the
  # rigs start their own. Stop only those the installation started.
  for pid in $(telemetry_pids); do
    case $before in *" $pid "*) ;; *) kill "$pid" 2>/dev/null || true ;; esac
  done
fi

if command -v rustup >/dev/null 2>&1; then
  for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c" >/dev/null 2>&1 || true
  done
fi
echo "install-deps: ok" >&2
