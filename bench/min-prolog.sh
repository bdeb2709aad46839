#!/bin/sh
# min-prolog.sh — the yardstick: the least a hand-written Prolog does for a
# job on Slurm 26.05+, where slurmd gives the Prolog the job's QoS in
# SLURM_JOB_QOS. A case statement for the SL and the RoCE ToS, the ToS
# written (one setting), an env file for the TaskProlog, a log line stamped
# with `date`. No squeue, no smpquery, no lock, no check of the fabric, no
# baseline, no fsync, no metrics: anything qoslane does on top of this is
# measured against it (bench/yardstick.sh).
#
# Environment: HAND_ROOT (prefix of every node path, "" on a real node).
root=${HAND_ROOT:-}
case $SLURM_JOB_QOS in
  mission-critical) sl=3 tos=106 ;;
  high) sl=2 tos=74 ;;
  low | standby) sl=1 tos= ;;
  *) sl=0 tos= ;;
esac
if [ -n "$tos" ]; then
  echo "$tos" > "$root/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"
fi
echo "UCX_IB_SL=$sl NCCL_IB_SL=$sl" > "$root/run/qos-prolog/$SLURM_JOB_ID"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) job=$SLURM_JOB_ID qos=$SLURM_JOB_QOS sl=$sl tos=$tos" \
  >> "$root/var/log/qos-prolog.log"
