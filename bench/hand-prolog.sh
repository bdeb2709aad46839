#!/bin/sh
# hand-prolog.sh — the comparison point: the Prolog an admin would write by
# hand for the same job (the four tiers of examples/qos-network.yml). Ask the
# controller for the QoS, pick the SL, read the port's SL2VL table with
# smpquery and complain if the SL is not on the intended VL, set the RoCE ToS,
# leave the SL for the TaskProlog, append a log line.
#
# It does less than qoslane: no lock (concurrent Prologs race on the ToS), no
# journal or rollback, no verify, no baseline for the Epilog, no fsync, no
# metrics, no deadline on squeue or smpquery (a hung controller hangs it).
#
# Environment (so the bench can run it under a fixture root):
#   HAND_ROOT      prefix of every node path ("" on a real node)
#   HAND_SQUEUE    default /usr/bin/squeue
#   HAND_SMPQUERY  default /usr/sbin/smpquery
root=${HAND_ROOT:-}
squeue=${HAND_SQUEUE:-/usr/bin/squeue}
smpquery=${HAND_SMPQUERY:-/usr/sbin/smpquery}

# As qoslane asks it (Slurm 22.05-25.11): this cluster only (--local, no
# federation lookup); the answer is `ID QOS`.
qos=$("$squeue" -h -j "$SLURM_JOB_ID" -o "%A %q" --local)
qos=${qos#* }
case $qos in
  mission-critical) sl=3 vl=3 tos=106 ;;
  high) sl=2 vl=2 tos=74 ;;
  low|standby) sl=1 vl=1 tos= ;;
  *) sl=0 vl=0 tos= ;;
esac
got=$("$smpquery" -C mlx5_0 -P 1 -D sl2vl 0 |
  awk -F'|' -v f=$((sl + 2)) '/^ports:/ { gsub(/ /, "", $f); print $f }')
if [ "$got" != "$vl" ]; then
  echo "prolog: job $SLURM_JOB_ID: SL $sl lands on VL $got, not VL $vl" >&2
  exit 1
fi
if [ -n "$tos" ]; then
  echo "$tos" > "$root/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"
fi
mkdir -p "$root/run/qos-prolog"
echo "UCX_IB_SL=$sl NCCL_IB_SL=$sl" > "$root/run/qos-prolog/$SLURM_JOB_ID"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $(hostname) job=$SLURM_JOB_ID qos=$qos sl=$sl vl=$got tos=$tos" \
  >> "$root/var/log/qos-prolog.log"
