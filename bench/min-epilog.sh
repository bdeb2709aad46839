#!/bin/sh
# min-epilog.sh — the yardstick's Epilog (goes with bench/min-prolog.sh): the
# RoCE ToS back to the site's default, the job's env file removed, a log
# line stamped with `date`.
#
# Environment: HAND_ROOT (prefix of every node path), HAND_BASE_TOS (the
# site's default ToS, 0 unless set).
root=${HAND_ROOT:-}
echo "${HAND_BASE_TOS:-0}" > "$root/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"
rm -f "$root/run/qos-prolog/$SLURM_JOB_ID"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) job=$SLURM_JOB_ID epilog" >> "$root/var/log/qos-prolog.log"
