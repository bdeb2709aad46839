#!/usr/bin/env bash
# scripts/lib/node.sh — the one place the shell side lays out a fixture node
# and takes the machine's Slurm rig. Sourced by tests/e2e/lib.sh (the e2e
# suites and scripts/demo.sh) and bench/lib.sh (bench/run.sh, probe.sh,
# compare.sh); expects `set -euo pipefail` in the caller.
#
# A fixture node is a compute node's view under a root prefix (qoslane's
# --root / QOSLANE_ROOT):
#   ROOT/etc/qoslane/qos-network.yml   the mapping
#   ROOT$TOS, ROOT$RMEM                the node settings' files, at baseline
#   ROOT/sys/class/infiniband/mlx5_N   ACTIVE InfiniBand ports (port 1 each),
#                                      modelled on a real mlx5 sysfs tree
#   ROOT/bin/smpquery                  the fixture smpquery, answering from
#   ROOT/bin/any.{sl2vl,portinfo,vlarb}.txt  what the SM programmed
# and, for a node under Slurm (node_hooks), hookrun as Prolog, Epilog,
# TaskProlog and HealthCheckProgram with qoslane one hook per phase.
#
#   node_layout ROOT MAPPING [PORTS] [TABLE]   the node (PORTS default 1,
#                                              TABLE identity|reversed|...)
#   set_fabric ROOT TABLE                      what the SM programmed now
#   node_hooks ROOT                            hookrun and its hooks ($QL, $HR)
#   rig_lock WAIT_S / rig_unlock               the Slurm rig, one user at a time
#
# A node under a Slurm in a chroot (rigs/slurm_chroot_rig.sh) lives inside it:
# with NODE_CH set to the chroot's directory, ROOT (and the binaries $QL, $HR)
# are paths as seen inside it, the files are written at NODE_CH/ROOT, and the
# fixture smpquery is copied in rather than linked to the repo.
#
# Only the layout is here: assertions belong to tests/e2e/lib.sh (`check`),
# measuring to bench/lib.sh (`check_audit`).

NODE_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The Slurm versions the suites run, one table (slurm_versions, slurm_field, slurm_lock, ...).
# shellcheck source=../../rigs/slurm_versions.sh
. "$NODE_REPO/rigs/slurm_versions.sh"
# The committed stand-ins (fake smpquery, squeue) and captured answers.
FIX=$NODE_REPO/crates/qoslane/tests/fixtures
# The node settings the fixture mappings change, and their baseline values.
TOS=/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos
RMEM=/proc/sys/net/core/rmem_max
BASE_TOS=0
BASE_RMEM=212992

# node_layout ROOT MAPPING [PORTS] [TABLE] : a fresh node under ROOT.
# MAPPING is a file to copy, or "" when the caller writes
# ROOT/etc/qoslane/qos-network.yml itself. Port mlx5_0 is the fixture's own
# (its GUID and LID); mlx5_1.. get a GUID and LID each.
node_layout() {
  local r=${NODE_CH:-}$1 mapping=$2 ports=${3:-1} table=${4:-identity}
  rm -rf "$r"
  install -d -m 0755 "$r" "$r/etc/qoslane" "$r/bin"
  [ -z "$mapping" ] || cp "$mapping" "$r/etc/qoslane/qos-network.yml"
  install -d "$(dirname "$r$TOS")" "$(dirname "$r$RMEM")"
  echo "$BASE_TOS" > "$r$TOS"
  echo "$BASE_RMEM" > "$r$RMEM"
  local src=$FIX/fabric/mlx5-quirks/sys/class/infiniband/mlx5_0 i d
  for ((i = 0; i < ports; i++)); do
    d=$r/sys/class/infiniband/mlx5_$i
    install -d "$d"
    cp -a "$src/." "$d/"
    if [ "$i" -gt 0 ]; then
      printf '0a7f:bc12:45ef:%04x\n' $((0xd200 + i)) > "$d/node_guid"
      printf '0x%x\n' $((0x10 + i)) > "$d/ports/1/lid"
    fi
  done
  if [ -n "${NODE_CH:-}" ]; then cp "$FIX/bin/fake-smpquery" "$r/bin/smpquery"
  else ln -s "$FIX/bin/fake-smpquery" "$r/bin/smpquery"; fi
  set_fabric "$1" "$table"
}

# set_fabric ROOT TABLE : what the SM programmed, as smpquery prints it (the
# captured answers FIX/smpquery/qos-TABLE.*.txt: identity, reversed, ...)
set_fabric() {
  local r=${NODE_CH:-}$1 t=$2 op
  for op in sl2vl portinfo vlarb; do cp "$FIX/smpquery/qos-$t.$op.txt" "$r/bin/any.$op.txt"; done
}

# node_hooks ROOT : hookrun (ROOT/bin/hookrun, for slurm.conf) with qoslane
# ($QL) as one hook per phase, an existing site Epilog hook like Omnia's
# logout_user.sh (it appends the job id to ROOT/out/logout_user.log) and
# hookrun.conf (requeue on failure, 15 s budget, 5 s per hook).
node_hooks() {
  local r=$1 h=${NODE_CH:-}$1 ql=${QL:?node_hooks: QL (the qoslane binary) is not set} hr=${HR:?node_hooks: HR (the hookrun binary) is not set}
  install -d -m 1777 "$h/out"
  printf '#!/bin/sh\nexec %s --root %s "$@"\n' "$hr" "$r" > "$h/bin/hookrun"
  chmod 0755 "$h/bin/hookrun"
  local d
  for d in prolog.d epilog.d task-prolog.d health.d; do install -d "$h/etc/slurm/$d"; done
  local env="QOSLANE_SMPQUERY=$r/bin/smpquery QOSLANE_TIMEOUT_MS=3000"
  printf '#!/bin/sh\n%s exec %s --root %s prolog\n' "$env" "$ql" "$r" > "$h/etc/slurm/prolog.d/10-qoslane"
  printf '#!/bin/sh\n%s exec %s --root %s epilog\n' "$env" "$ql" "$r" > "$h/etc/slurm/epilog.d/10-qoslane"
  printf '#!/bin/sh\nexec %s --root %s task-prolog\n' "$ql" "$r" > "$h/etc/slurm/task-prolog.d/10-qoslane"
  printf '#!/bin/sh\n%s exec %s --root %s health\n' "$env" "$ql" "$r" > "$h/etc/slurm/health.d/10-qoslane"
  site_epilog_hook "$h/etc/slurm/epilog.d/90-logout_user.sh" "$r/out"
  chmod 0755 "$h"/etc/slurm/*.d/*
  printf 'on_failure = requeue\nbudget = 15s\nhook_timeout = 5s\n' > "$h/etc/slurm/hookrun.conf"
}

# node_hooks_shipped ROOT [PREFIX] : the node's hooks as the packages lay them out
# (after node_hooks): ROOT/bin/hookrun, which slurm.conf names, execs the entry
# ROOT/bin/entry/hookrun, a link to qoslane ($QL) named hookrun, and qoslane's
# Prolog and Epilog hooks are links to the binary, run built in (a fork of the
# entry: one program start per hook); the TaskProlog's hook (its own --root: the
# job user's environment is not trusted), the health hook and the site's Epilog
# hook stay scripts, started as before. PREFIX (e.g. strace) runs the entry.
node_hooks_shipped() {
  local r=$1 h=${NODE_CH:-}$1 prefix=${2:-} ql=${QL:?node_hooks_shipped: QL (the qoslane binary) is not set}
  install -d -m 0755 "$h/bin/entry"
  ln -sfn "$ql" "$h/bin/entry/hookrun"
  ln -sfn "$ql" "$h/etc/slurm/prolog.d/10-qoslane"
  ln -sfn "$ql" "$h/etc/slurm/epilog.d/10-qoslane"
  printf '#!/bin/sh\nQOSLANE_ROOT=%s QOSLANE_SMPQUERY=%s/bin/smpquery QOSLANE_TIMEOUT_MS=3000 exec %s %s/bin/entry/hookrun --root %s "$@"\n' \
    "$r" "$r" "$prefix" "$r" "$r" > "$h/bin/hookrun.new"
  chmod 0755 "$h/bin/hookrun.new"; mv "$h/bin/hookrun.new" "$h/bin/hookrun"
}

# site_epilog_hook FILE DIR : a site's own Epilog hook (like Omnia's
# epilog.d/logout_user.sh) that appends each job id to DIR/logout_user.log
site_epilog_hook() {
  # shellcheck disable=SC2016  # $SLURM_JOB_ID is the hook's, at run time
  printf '#!/bin/sh\necho "$SLURM_JOB_ID" >> %s/logout_user.log\n' "$2" > "$1"
  chmod 0755 "$1"
}

# ------------------------------------------------------------------ the Slurm rig
# rigs/slurm_rig.sh rewrites /etc/slurm and runs the machine's only Slurm: one
# suite (e2e, Omnia, the bench's controller section, the demo) at a time.
# shellcheck disable=SC2034  # RIG: for the scripts that source this
RIG=$NODE_REPO/rigs/slurm_rig.sh
export RIG_DIR=${RIG_DIR:-/tmp/qoslane-slurmrig}
RIG_LOCK=$(slurm_lock host)
# rigs/slurm_chroot_rig.sh: one lock per chroot suite of rigs/slurm_versions.tsv (slurm_lock SUITE)
# shellcheck disable=SC2034  # for the scripts that source this
CHROOT_RIG=$NODE_REPO/rigs/slurm_chroot_rig.sh
# shellcheck disable=SC2034  # for the scripts that source this
RIG_LOCK_WAIT=1800   # how long a suite waits for the one before it (seconds)

# rig_lock WAIT_S : hold the rig lock (fd 9) for the rest of this shell;
# wait at most WAIT_S seconds (0: do not wait). Fails when another holds it. The rig's daemons inherit fd 9: the lock lasts while
# they run, and is free once `slurm_rig.sh stop` and this shell are done.
# RIG_LOCK may name another rig's lock (tests/e2e/lib.sh's slurm_select does for the chroots).
rig_lock() {
  local wait=$1
  mkdir -p "$(dirname "$RIG_LOCK")"   # /run/lock is missing on some machines
  exec 9>"$RIG_LOCK"
  if [ "$wait" -eq 0 ]; then flock -n 9; else flock -w "$wait" 9; fi
}
# host_slurmctld : a slurmctld runs on the host itself (a chroot rig's, rigs/slurm_chroot_rig.sh,
# has its own root, ports and /etc/slurm, and does not count)
host_slurmctld() {
  local p
  for p in $(pgrep -x slurmctld); do [ "$(readlink "/proc/$p/root" 2>/dev/null)" = / ] && return 0; done
  return 1
}
# rig_unlock : let the next suite have the rig (after stopping it)
rig_unlock() { exec 9>&-; }

# shown_run ERRFILE CMD... : CMD, its stderr shown without libibumad's `ibwarn: … get_abi_version`
# line (a host without the ib_umad module: qoslane tries the port in process first, the library
# says so, then qoslane reads by smpquery); CMD's exit status. For the demos.
shown_run() {
  local err=$1 rc=0; shift
  "$@" 2>"$err" || rc=$?
  grep -v '^ibwarn: .*get_abi_version' "$err" >&2 || true
  return "$rc"
}
