#!/bin/sh
# hand-epilog.sh — the Epilog an admin would write by hand to go with
# bench/hand-prolog.sh: put the RoCE ToS back to the site's default, drop the
# job's env file, append a log line. Like the Prolog it does less than
# qoslane: no lock (a second job's ToS is reset too), no check of what was
# there before, no verify, no fsync, no metrics.
#
# Environment: HAND_ROOT (prefix of every node path), HAND_BASE_TOS (the
# site's default ToS, 0 unless set).
root=${HAND_ROOT:-}
echo "${HAND_BASE_TOS:-0}" > "$root/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"
rm -f "$root/run/qos-prolog/$SLURM_JOB_ID"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $(hostname) job=$SLURM_JOB_ID epilog" >> "$root/var/log/qos-prolog.log"
