#!/usr/bin/env bash
# libraries.sh — the TaskProlog's exports fed to the configuration parsers of the UCX and
# Open MPI that each chroot suite of rigs/slurm_versions.tsv ships (trixie: UCX 1.18, Open MPI 5;
# sid: UCX 1.23, Open MPI 6), in the Slurm rigs' chroots (rigs/slurm_chroot_rig.sh installs ucx-utils and openmpi-bin there;
# the host's UCX 1.13 and Open MPI 4.1 are crates/qoslane/tests/integration/libraries.rs).
#
# A mission-critical job's exports (SL 3, traffic class 106), from a real Prolog and TaskProlog
# on a fixture node whose port is RoCE (on an InfiniBand port no traffic class is exported:
# checked first), go into the environment of `ucx_info -cf` and `ompi_info --all --parsable`
# run inside each chroot (its own mount namespace with /proc: nothing is left mounted). Per
# version, what each library does with them:
#   - UCX built with its InfiniBand transports (libuct_ib): every transport's SL is 3 and its
#     traffic class 106; from UCX 1.16 each also has a REVERSE_SL, left at `auto` ("the same
#     value of sl", UCX's own description). A build without them (sid's 1.23.0~rc1) has no
#     transport for the SL to act on: said.
#   - Open MPI with the openib BTL (before 5): its service level is 3, from the environment.
#     Without openib (5 and later): the pml ucx component is there, so the UCX_* exports are
#     what it uses; the OMPI_MCA_btl_openib_* export is read by nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

WORK=$(mktemp -d /tmp/qoslane-e2e-libs.XXXXXX); chmod 0755 "$WORK"
trap 'if [ "$E2E_FAILED" -ne 0 ]; then say "kept $WORK"; else rm -rf "$WORK"; fi' EXIT

build_release
R=$WORK/node
e2e_mapping "$WORK/mapping.yml"
node_layout "$R" "$WORK/mapping.yml" 1 identity
SLURM_JOB_ID=7 SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_QOS=mission-critical \
  QOSLANE_SMPQUERY=$R/bin/smpquery "$QL" --root "$R" prolog >/dev/null
mapfile -t on_ib < <(SLURM_JOB_ID=7 "$QL" --root "$R" task-prolog | sed -n 's/^export //p')
# The same HCA with its port on Ethernet (RoCE): the traffic classes are exported there only.
R2=$WORK/roce
node_layout "$R2" "$WORK/mapping.yml" 1 identity
echo Ethernet > "$R2/sys/class/infiniband/mlx5_0/ports/1/link_layer"
SLURM_JOB_ID=8 SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_QOS=mission-critical \
  QOSLANE_SMPQUERY=$R2/bin/smpquery "$QL" --root "$R2" prolog >/dev/null
mapfile -t exports < <(SLURM_JOB_ID=8 "$QL" --root "$R2" task-prolog | sed -n 's/^export //p')
# all_are VALUE LINES : LINES is not empty and every line ends in =VALUE
all_are() { [ -n "$2" ] && ! printf '%s\n' "$2" | grep -qv "=$1\$"; }
# lacks WORD FILE : FILE never mentions WORD
lacks() { ! grep -q "$1" "$2"; }
check "the TaskProlog exports UCX_IB_SL=3 on InfiniBand" all_are 3 "$(printf '%s\n' "${on_ib[@]}" | grep '^UCX_IB_SL=')"
check "and no traffic class there" eq "$(printf '%s\n' "${on_ib[@]}" | grep -cE '_TC=|TRAFFIC_CLASS=')" 0
check "the TaskProlog exports UCX_IB_SL=3 on RoCE" all_are 3 "$(printf '%s\n' "${exports[@]}" | grep '^UCX_IB_SL=')"
check "and UCX_IB_TRAFFIC_CLASS=106 there" all_are 106 "$(printf '%s\n' "${exports[@]}" | grep '^UCX_IB_TRAFFIC_CLASS=')"
say "exports on RoCE (the libraries' input below): ${exports[*]}"

# in_chroot CH CMD... : CMD inside CH with only the job's exports (and PATH, HOME) in its
# environment, /proc mounted in a private mount namespace
in_chroot() {
  local ch=$1; shift
  # shellcheck disable=SC2016  # the inner shell's arguments
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp "${exports[@]}" \
    unshare -m --propagation private sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"' "$ch" "$@"
}

for suite in $(for v in $(slurm_versions chroot); do slurm_field "$v" where; done); do
  bash "$CHROOT_RIG" create "$suite" >/dev/null 2>&1 || { fail "$suite: the chroot could not be made"; continue; }
  ch=$(bash "$CHROOT_RIG" path "$suite")
  # UCX
  ucx_v=$(in_chroot "$ch" /usr/bin/ucx_info -v 2>/dev/null | sed -n 's/^# Library version: //p')
  in_chroot "$ch" /usr/bin/ucx_info -cf > "$WORK/ucx.$suite.txt" 2>/dev/null
  sls=$(grep -E '^UCX_[A-Z0-9_]+_SL=' "$WORK/ucx.$suite.txt" | grep -v '_REVERSE_SL=' || true)
  # UCX 1.16+: each transport's REVERSE_SL (the responder's), "auto": "the same value of sl"
  rsls=$(grep -E '^UCX_[A-Z0-9_]+_REVERSE_SL=' "$WORK/ucx.$suite.txt" || true)
  tcs=$(grep -E '^UCX_[A-Z0-9_]+_TRAFFIC_CLASS=' "$WORK/ucx.$suite.txt" || true)
  if ls "$ch"/usr/lib/x86_64-linux-gnu/ucx/libuct_ib.so* >/dev/null 2>&1; then
    check "$suite UCX $ucx_v: every IB transport takes SL 3 ($(echo "$sls" | grep -c .) transports)" \
      all_are 3 "$sls"
    check "$suite UCX $ucx_v: every traffic class is 106" \
      all_are 106 "$tcs"
    if [ -n "$rsls" ]; then
      check "$suite UCX $ucx_v: every reverse SL is auto, which UCX documents as the SL's value" \
        all_are auto "$rsls"
    fi
  else
    check "$suite UCX $ucx_v: built without its InfiniBand transports (no libuct_ib): no transport lists an SL" \
      eq "$sls" ""
    say "  $suite: UCX $ucx_v as Debian builds it has no IB transport; UCX_IB_SL acts only in a UCX built with verbs (MOFED, HPC-X, Spack)"
  fi
  # Open MPI
  in_chroot "$ch" /usr/bin/ompi_info --all --parsable > "$WORK/ompi.$suite.txt" 2>/dev/null
  ompi_v=$(sed -n 's/^ompi:version:full://p' "$WORK/ompi.$suite.txt")
  if grep -q '^mca:btl:openib:' "$WORK/ompi.$suite.txt"; then
    check "$suite Open MPI $ompi_v: openib's service level is 3, from the environment" eq \
      "$(sed -n 's/^mca:btl:openib:param:btl_openib_ib_service_level:\(value\|source\)://p' "$WORK/ompi.$suite.txt" | paste -sd /)" "3/environment"
  else
    check "$suite Open MPI $ompi_v: no openib BTL; pml ucx is there, so the UCX_* exports are what it uses" \
      grep -q '^mca:pml:ucx:param:pml_ucx_priority:value:' "$WORK/ompi.$suite.txt"
    check "$suite Open MPI $ompi_v: nothing reads btl_openib_ib_service_level" \
      lacks btl_openib_ib_service_level "$WORK/ompi.$suite.txt"
  fi
done

say "libraries: $E2E_PASSED passed, $E2E_FAILED failed"
echo "libraries: $E2E_PASSED passed, $E2E_FAILED failed"
[ "$E2E_FAILED" -eq 0 ]
