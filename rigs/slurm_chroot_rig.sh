#!/usr/bin/env bash
# slurm_chroot_rig.sh - a newer real Slurm in a chroot beside the host's (rigs/slurm_rig.sh): a
# Debian suite's Slurm, a row of rigs/slurm_versions.tsv, on ports of its own (the row's
# port_base), one or several slurmd.
#
#   slurm_chroot_rig.sh create SUITE   make the chroot when missing: from the cached tarball, else
#                                      with mmdebstrap (then the tarball is written for next time)
#   slurm_chroot_rig.sh start SUITE    create if needed, mount, configure and start munged, mariadbd,
#                                      slurmdbd, slurmctld and RIG_NNODES slurmd (slurmd -N NAME);
#                                      create cluster/account/users/QoS; wait for every node idle
#   slurm_chroot_rig.sh stop SUITE     cancel jobs, stop the daemons, then every process whose
#                                      /proc/PID/root is the chroot; unmount everything under it
#   slurm_chroot_rig.sh status SUITE   processes rooted in the chroot, its mounts, sinfo
#   slurm_chroot_rig.sh run SUITE CMD  run CMD inside the chroot with a clean environment
#   slurm_chroot_rig.sh destroy SUITE  stop, then remove the chroot (never rm -rf a chroot by hand
#                                      while it is started: stop first)
#   slurm_chroot_rig.sh path SUITE     print the chroot's directory
#   slurm_chroot_rig.sh nodes SUITE    print the node names, one a line
#   SUITE: a chroot suite of rigs/slurm_versions.tsv (or its version); default $RIG_SUITE, else
#          the newest chroot version's suite
#
# Nothing of a chroot's suite touches the host: the chroot gets a fresh tmpfs /run (its own munge and
# MariaDB sockets; mariadbd without networking), its own /dev (a tmpfs with null, zero, random…
# and a new devpts instance: nothing of the host's /dev is reachable from it), its own
# /etc/slurm and munge key. The host needs
# mmdebstrap and zstd (scripts/install-deps.sh).
#
# One user at a time: start/stop/create take /run/lock/qoslane-slurm-SUITE.lock (flock) unless the
# caller says it holds it (RIG_LOCK_HELD=that path; tests/e2e/lib.sh does, for a whole suite).
#
# Tunables (environment), as rigs/slurm_rig.sh where they mean the same:
#   RIG_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/qoslane/rigs   the chroots (SUITE/) and tarballs (SUITE.tar.zst)
#   RIG_MIRROR                     Debian mirror for mmdebstrap; default: the one the host's apt uses
#   RIG_NNODES=1                   slurmd daemons, nodes SUITEn1..SUITEnN (each its own port)
#   RIG_USERS="root jobuser"       users with an association (jobuser, uid 5001, is made in the chroot)
#   RIG_QOS="low:10 normal:100 high:1000 mission-critical:10000"   name:priority pairs
#   RIG_DEFAULT_QOS=normal
#   RIG_PROLOG / RIG_EPILOG / RIG_TASKPROLOG / RIG_TASKEPILOG / RIG_PROLOGSLURMCTLD / RIG_EPILOGSLURMCTLD
#                                  path of the hook INSIDE the chroot; unset = a built-in env-dumping
#                                  hook (/var/tmp/rig-out); "" = not configured
#   RIG_PROLOG_FLAGS=Alloc         ("" for none)
#   RIG_PROLOG_EPILOG_TIMEOUT=30   seconds (""/0 = not set)
#   RIG_SCHED_PARAMS="batch_sched_delay=0,sched_interval=2,bf_interval=1"
#   RIG_EXTRA_CONF=""              extra lines appended to slurm.conf
#   RIG_METRICS=1                  MetricsType=metrics/openmetrics (Slurm >= 25.11: the table's
#                                  `openmetrics` feature)
#   RIG_PORT_BASE                  the suite's port_base in the table: slurmctld BASE, slurmdbd BASE+2,
#                                  node 1 BASE+1, node i BASE+10+i
#   RIG_RESET=1                    wipe slurmctld state and the accounting DB before starting
#   RIG_TIMEOUT=60                 seconds to wait for each daemon
set -euo pipefail

# The suites and their ports: rigs/slurm_versions.tsv
# shellcheck source=slurm_versions.sh
. "$(dirname "${BASH_SOURCE[0]}")/slurm_versions.sh"
CMD=${1:-help}
SUITE=${2:-${RIG_SUITE:-$(slurm_field "$(slurm_newest chroot)" where)}}
DEF_PORT=$(slurm_field "$SUITE" port_base 2>/dev/null) || DEF_PORT=-
SUITE=$(slurm_field "$SUITE" where 2>/dev/null) || SUITE=host   # a version names its suite
if [ "$SUITE" = host ] || [ "$DEF_PORT" = - ]; then
  echo "slurm_chroot_rig.sh: suite '${2:-${RIG_SUITE:-}}': one of $(for v in $(slurm_versions chroot); do slurm_field "$v" where; done | paste -sd ' ')" >&2
  exit 2
fi
CACHE=${RIG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/qoslane/rigs}
CH=$CACHE/$SUITE
# The tarball's name carries the package list: a chroot made with another list is made again.
TARBALL=$CACHE/$SUITE.tar.zst
LOCK=$(slurm_lock "$SUITE")
NNODES=${RIG_NNODES:-1}
USERS=${RIG_USERS:-root jobuser}
QOS_SPEC=${RIG_QOS:-"low:10 normal:100 high:1000 mission-critical:10000"}
DEFAULT_QOS=${RIG_DEFAULT_QOS:-normal}
PROLOG_FLAGS=${RIG_PROLOG_FLAGS-Alloc}
PE_TIMEOUT=${RIG_PROLOG_EPILOG_TIMEOUT-30}
SCHED_PARAMS=${RIG_SCHED_PARAMS-batch_sched_delay=0,sched_interval=2,bf_interval=1}
EXTRA_CONF=${RIG_EXTRA_CONF:-}
METRICS=${RIG_METRICS:-0}
TIMEOUT=${RIG_TIMEOUT:-60}
PORT_BASE=${RIG_PORT_BASE:-$DEF_PORT}
CLUSTER=rig_$SUITE
ACCOUNT=rigacct
DB_PASS=${RIG_DB_PASS:-slurmrigpass}
HOST=$(hostname)
# Slurm and what its daemons need, and the libraries the TaskProlog's exports are for (their
# configuration parsers, read by tests/e2e/libraries.sh): UCX and Open MPI as each suite ships
# them (sid: UCX 1.23, Open MPI 6; trixie: UCX 1.18, Open MPI 5). And the diag tools with the
# simulator's preload, so that each node's Prolog queries its own simulated HCA of the host's
# ibsim fabric (its sockets are abstract: a chroot shares the host's network namespace).
PKGS=slurmctld,slurmd,slurm-client,slurmdbd,munge,mariadb-server,procps,curl,ucx-utils,openmpi-bin,infiniband-diags,libumad2sim0
IN_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

log() { printf '[rig:%s %(%H:%M:%S)T] %s\n' "$SUITE" -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

# inch CMD... : CMD inside the chroot, clean environment (the host's PATH must not reach the
# daemons and, through them, the hooks); fd 9 (a caller's rig lock) not passed on
inch() { env -i PATH=$IN_PATH HOME=/root LANG=C.UTF-8 chroot "$CH" "$@" 9>&-; }

node_name() { echo "${SUITE}n$1"; }
node_port() { if [ "$1" = 1 ]; then echo $((PORT_BASE + 1)); else echo $((PORT_BASE + 10 + $1)); fi; }
nodes() { local i; for ((i = 1; i <= NNODES; i++)); do node_name "$i"; done; }

# lock_suite : hold the suite's lock for this run of the script (not when the caller holds it)
lock_suite() {
  [ "${RIG_LOCK_HELD:-}" = "$LOCK" ] && return 0
  mkdir -p "$(dirname "$LOCK")"
  exec 9>"$LOCK"
  flock -w 1800 9 || die "another user holds $LOCK"
}

# ---------------------------------------------------------------- create
# The mirror the host's apt uses for Debian (deb822 .sources or sources.list), unless RIG_MIRROR.
host_mirror() {
  local u
  u=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/\{0,1\}$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  [ -n "$u" ] || u=$(sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\/debian\)\/\{0,1\}[[:space:]].*/\2/p' /etc/apt/sources.list 2>/dev/null | head -1)
  [ -n "$u" ] || die "no Debian mirror in the host's apt sources; set RIG_MIRROR"
  echo "$u"
}
create() {
  # .rig-created holds the package list the chroot was made with; another list: made again
  [ -e "$CH/.rig-created" ] && [ "$(cat "$CH/.rig-created")" = "$PKGS" ] && return 0
  # never remove or unpack over a chroot with anything mounted in it
  [ -z "$(mounts_under)" ] || die "mounts under $CH: run '$0 stop $SUITE' first"
  command -v zstd >/dev/null || die "zstd missing (scripts/install-deps.sh)"
  install -d -m 0755 "$CACHE"
  local t0; t0=$(now)
  if [ -s "$TARBALL" ]; then
    rm -rf --one-file-system "$CH"; install -d -m 0755 "$CH"
    zstd -dc -q "$TARBALL" | tar -C "$CH" --numeric-owner -xpf -
    [ -e "$CH/.rig-created" ] || die "$TARBALL holds no finished chroot; remove it"
    if [ "$(cat "$CH/.rig-created")" = "$PKGS" ]; then
      log "chroot unpacked from $TARBALL in $(elapsed "$t0")s"
      return 0
    fi
    log "$TARBALL was made with other packages: making the chroot again"
    rm -f "$TARBALL"
  fi
  command -v mmdebstrap >/dev/null || die "mmdebstrap missing (scripts/install-deps.sh)"
  local mirror=${RIG_MIRROR:-$(host_mirror)}
  rm -rf --one-file-system "$CH"
  log "creating the $SUITE chroot with mmdebstrap (~40 s)"
  # The mirror may be a frozen snapshot whose Release files have expired: Check-Valid-Until off.
  # mmdebstrap keeps the packages' daemons from starting while it installs.
  mmdebstrap --quiet --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
    --include="$PKGS" "$SUITE" "$CH" "$mirror" >"$CACHE/$SUITE.mmdebstrap.log" 2>&1 ||
    { tail -20 "$CACHE/$SUITE.mmdebstrap.log" >&2; rm -rf --one-file-system "$CH"; die "mmdebstrap failed"; }
  printf '127.0.0.1 localhost %s\n' "$HOST" > "$CH/etc/hosts"   # mmdebstrap writes none
  inch useradd -m -u 5001 -s /bin/bash jobuser
  printf '%s\n' "$PKGS" > "$CH/.rig-created"
  log "mmdebstrap took $(elapsed "$t0")s ($(du -sh "$CH" | cut -f1))"
  tar -C "$CH" --numeric-owner -cf - . | zstd -T0 -3 -q -f -o "$TARBALL.tmp"
  mv "$TARBALL.tmp" "$TARBALL"
  log "cached as $TARBALL ($(du -h "$TARBALL" | cut -f1))"
}

# ---------------------------------------------------------------- mounts
mounted() { mountpoint -q "$CH/$1"; }
# The chroot's /dev is its own (a tmpfs with the few nodes the daemons use, a new devpts
# instance), never a bind of the host's: a bind would make an rm -rf of a mounted chroot
# delete the host's device nodes.
mount_dev() {
  mount -t tmpfs -o mode=0755,size=1m,nosuid tmpfs "$CH/dev"
  local spec n
  for spec in null:3 zero:5 full:7 random:8 urandom:9; do
    n=${spec%%:*}; mknod -m 0666 "$CH/dev/$n" c 1 "${spec#*:}"
  done
  mknod -m 0666 "$CH/dev/tty" c 5 0
  ln -s /proc/self/fd "$CH/dev/fd"
  for n in 0:stdin 1:stdout 2:stderr; do ln -s "/proc/self/fd/${n%%:*}" "$CH/dev/${n#*:}"; done
  install -d -m 1777 "$CH/dev/shm"
  install -d -m 0755 "$CH/dev/pts"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$CH/dev/pts"
  ln -s pts/ptmx "$CH/dev/ptmx"
}
mount_all() {
  mounted proc || mount -t proc proc "$CH/proc"
  mounted sys || mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$CH/sys"
  mounted dev || mount_dev
  mounted run || mount -t tmpfs -o mode=0755,size=64m tmpfs "$CH/run"
}
# every mount point under the chroot, deepest first
mounts_under() { awk -v p="$CH/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r; }
umount_all() {
  local m
  while read -r m; do
    [ -n "$m" ] || continue
    umount "$m" 2>/dev/null || umount -l "$m"
  done < <(mounts_under)
}

# ---------------------------------------------------------------- processes
# PIDs of processes whose root directory is this chroot: what the rig started, and their jobs
chroot_pids() {
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    [ "$r" = "$CH" ] && echo "${p#/proc/}"
  done
  return 0
}
in_chroot() { [ -n "${1:-}" ] && [ "$(readlink "/proc/$1/root" 2>/dev/null)" = "$CH" ]; }
pid_of() { cat "$CH$1" 2>/dev/null || true; }          # pid_of FILE-INSIDE
running() { in_chroot "$(pid_of "$1")"; }
wait_for() {  # wait_for DESC CMD... : poll CMD until it succeeds or TIMEOUT
  local desc=$1 t0; shift; t0=$(now)
  local end=$(($(date +%s) + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || die "timeout waiting for $desc"
    sleep 0.2
  done
  log "$desc ready after $(elapsed "$t0")s"
}

# ---------------------------------------------------------------- configuration
write_default_hook() {
  install -d -m 1777 "$CH/var/tmp/rig-out"
  install -d -m 0755 "$CH/etc/slurm/rig-hooks"
  # shellcheck disable=SC2016  # the hook's variables, at run time
  printf '%s\n' '#!/bin/sh' \
    '# the rig'"'"'s default hook: the sorted environment of each context to /var/tmp/rig-out' \
    'f=/var/tmp/rig-out/${SLURM_SCRIPT_CONTEXT:-unknown}_job${SLURM_JOB_ID:-${SLURM_JOBID:-none}}_${SLURMD_NODENAME:-ctld}_step${SLURM_STEP_ID:-none}.env' \
    '/usr/bin/env | /usr/bin/sort > "$f"' 'exit 0' > "$CH/etc/slurm/rig-hooks/dump.sh"
  chmod 0755 "$CH/etc/slurm/rig-hooks/dump.sh"
}
hook_line() {  # hook_line ConfKey VARNAME
  local key=$1 var=$2
  if [ "${!var+set}" = set ]; then
    [ -n "${!var}" ] && echo "$key=${!var}"
  else
    echo "$key=/etc/slurm/rig-hooks/dump.sh"
  fi
  return 0
}
write_configs() {
  local e=$CH/etc/slurm i
  install -d -m 0755 "$e" "$CH/var/log/slurm" "$CH/var/lib/slurm"
  install -d -m 0700 "$CH/var/lib/slurm/slurmctld"
  inch chown slurm:slurm /var/log/slurm /var/lib/slurm/slurmctld
  write_default_hook
  {
    echo "# generated by slurm_chroot_rig.sh ($SUITE) - do not edit"
    cat <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT_BASE
SlurmdPort=$((PORT_BASE + 1))
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
${SCHED_PARAMS:+SchedulerParameters=$SCHED_PARAMS}
PriorityType=priority/multifactor
PriorityWeightQOS=10000
ReturnToService=2
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd/%n
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$((PORT_BASE + 2))
AccountingStorageEnforce=associations,limits,qos
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
EOF
    [ "$METRICS" = 1 ] && printf 'MetricsType=metrics/openmetrics\nMetricsParameters=ignore_private_data\n'
    hook_line Prolog RIG_PROLOG
    hook_line Epilog RIG_EPILOG
    hook_line TaskProlog RIG_TASKPROLOG
    hook_line TaskEpilog RIG_TASKEPILOG
    hook_line PrologSlurmctld RIG_PROLOGSLURMCTLD
    hook_line EpilogSlurmctld RIG_EPILOGSLURMCTLD
    [ -n "$PROLOG_FLAGS" ] && echo "PrologFlags=$PROLOG_FLAGS"
    [ -n "$PE_TIMEOUT" ] && [ "$PE_TIMEOUT" != 0 ] && echo "PrologEpilogTimeout=$PE_TIMEOUT"
    [ -n "$EXTRA_CONF" ] && echo "$EXTRA_CONF"
    for ((i = 1; i <= NNODES; i++)); do
      echo "NodeName=$(node_name "$i") NodeAddr=127.0.0.1 NodeHostname=$(node_name "$i") Port=$(node_port "$i") CPUs=2 RealMemory=1000 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } > "$e/slurm.conf.new"
  mv "$e/slurm.conf.new" "$e/slurm.conf"
  # slurmd (26.05, 24.11) dies without a cgroup file system unless the plugin is off
  echo "CgroupPlugin=disabled" > "$e/cgroup.conf"
  cat > "$e/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=$HOST
DbdAddr=127.0.0.1
DbdPort=$((PORT_BASE + 2))
SlurmUser=slurm
DebugLevel=info
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurm/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
  inch chown slurm:slurm /etc/slurm/slurmdbd.conf
  chmod 0600 "$e/slurmdbd.conf"
}

# ---------------------------------------------------------------- accounting objects
sa() { inch sacctmgr -i "$@" >>"$CH/var/log/slurm/sacctmgr.log" 2>&1; }
has() { [ -n "$(inch sacctmgr -n -P "$@" 2>/dev/null)" ]; }  # -P: names are not cut at 10 chars
setup_accounting() {
  has show cluster "$CLUSTER" format=cluster || sa add cluster "$CLUSTER"
  local spec name prio qlist="" u
  for spec in $QOS_SPEC; do
    name=${spec%%:*}; prio=${spec#*:}; [ "$prio" = "$spec" ] && prio=0
    if has show qos "$name" format=name; then sa modify qos "$name" set priority="$prio" || true
    else sa add qos "$name" priority="$prio"; fi
    qlist="$qlist${qlist:+,}$name"
  done
  has show account "$ACCOUNT" format=account || sa add account "$ACCOUNT" cluster="$CLUSTER" description=rig organization=rig
  for u in $USERS; do
    inch id "$u" >/dev/null 2>&1 || die "user $u does not exist in the chroot"
    has show assoc where user="$u" account="$ACCOUNT" cluster="$CLUSTER" format=user ||
      sa add user "$u" account="$ACCOUNT" cluster="$CLUSTER"
    sa modify user "$u" set defaultaccount="$ACCOUNT" || true
    sa modify user where user="$u" account="$ACCOUNT" cluster="$CLUSTER" set qos="$qlist" defaultqos="$DEFAULT_QOS" || true
  done
}

# ---------------------------------------------------------------- start / stop / status
node_states() { inch sinfo -h -N -o '%N %T' 2>/dev/null; }
all_idle() {
  local n st ok=0
  while read -r n st; do
    case $st in
      idle) ;;
      drain* | down*) ok=1; inch scontrol update nodename="$n" state=resume >/dev/null 2>&1 || true ;;
      *) ok=1 ;;
    esac
  done < <(node_states)
  [ "$(node_states | wc -l)" -eq "$NNODES" ] && [ $ok = 0 ]
}
start() {
  local T0 n; T0=$(now)
  [ "$(id -u)" = 0 ] || die "must run as root"
  lock_suite
  create
  mount_all
  if [ "${RIG_RESET:-0}" = 1 ]; then
    running /run/slurm/slurmctld.pid && die "RIG_RESET=1 needs a stopped rig (run: $0 stop $SUITE)"
    rm -rf "$CH/var/lib/slurm/slurmctld" "$CH"/var/lib/slurm/slurmd/*
  fi
  write_configs
  inch install -d -o munge -g munge -m 0755 /run/munge
  inch install -d -o mysql -g mysql -m 0755 /run/mariadbd
  ln -sfn mariadbd "$CH/run/mysqld"     # the client library looks for /run/mysqld/mysqld.sock
  inch install -d -o slurm -g slurm -m 0755 /run/slurm
  inch install -d -o mysql -g adm -m 2750 /var/log/mysql

  running /run/munge/munged.pid || inch runuser -u munge -- /usr/sbin/munged
  wait_for munged inch sh -c '/usr/bin/munge -n | /usr/bin/unmunge'
  if ! running /run/mariadbd/mysqld.pid; then
    setsid -f env -i PATH=$IN_PATH LANG=C.UTF-8 chroot "$CH" /usr/sbin/mariadbd --user=mysql \
      --skip-networking --socket=/run/mariadbd/mysqld.sock --pid-file=/run/mariadbd/mysqld.pid \
      --log-error=/var/log/mysql/error.log --innodb-snapshot-isolation=OFF \
      --innodb-lock-wait-timeout=900 --innodb-buffer-pool-size=256M --skip-log-bin \
      </dev/null >/dev/null 2>&1 9>&-
  fi
  wait_for mariadb inch mariadb -e 'select 1'
  [ "${RIG_RESET:-0}" = 1 ] && inch mariadb -e 'DROP DATABASE IF EXISTS slurm_acct_db'
  # The database must exist before slurmdbd's first connect: with libmariadb3 11.8 its retry on
  # the same handle fails ("Number of columns ... (=0)") and slurmdbd exits.
  inch mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
    ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  running /run/slurm/slurmdbd.pid || inch /usr/sbin/slurmdbd
  wait_for slurmdbd inch sacctmgr -n show cluster
  setup_accounting
  if running /run/slurm/slurmctld.pid; then
    inch scontrol reconfigure >/dev/null 2>&1 || true
  else
    inch /usr/sbin/slurmctld
    wait_for slurmctld inch sh -c '/usr/bin/scontrol ping | /usr/bin/grep -q "is UP"'
  fi
  while read -r n; do
    running "/run/slurm/slurmd-$n.pid" && continue
    inch install -d -m 0755 "/var/lib/slurm/slurmd/$n"
    inch /usr/sbin/slurmd -N "$n"
  done < <(nodes)
  wait_for "$NNODES node(s) idle" all_idle
  log "cluster $CLUSTER ($(inch sinfo -V)) up: $(nodes | paste -sd ' '); total $(elapsed "$T0")s"
}

stop_pidfile() { local p; p=$(pid_of "$1"); if in_chroot "$p"; then kill -TERM "$p" 2>/dev/null || true; fi; }
stop() {
  local T0 f i left p; T0=$(now)
  lock_suite
  if mounted run && running /run/slurm/slurmctld.pid; then
    # cancel jobs first, and let their Epilogs report before the controller goes
    local ids; mapfile -t ids < <(inch squeue -h -o %A 2>/dev/null || true)
    [ ${#ids[@]} -eq 0 ] || inch scancel "${ids[@]}" 2>/dev/null || true
    for i in $(seq 1 100); do [ -z "$(inch squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.2; done
  fi
  if mounted run; then
    for f in "$CH"/run/slurm/slurmd-*.pid; do [ -e "$f" ] && stop_pidfile "${f#"$CH"}"; done
    stop_pidfile /run/slurm/slurmctld.pid
    stop_pidfile /run/slurm/slurmdbd.pid
    for i in $(seq 1 50); do running /run/slurm/slurmdbd.pid || running /run/slurm/slurmctld.pid || break; sleep 0.2; done
    stop_pidfile /run/mariadbd/mysqld.pid
    stop_pidfile /run/munge/munged.pid
  fi
  # then whatever else is rooted here (job steps, a hook's children): TERM, after 10 s KILL
  for i in $(seq 1 100); do
    left=$(chroot_pids); [ -z "$left" ] && break
    [ "$i" = 50 ] && for p in $left; do in_chroot "$p" && kill -TERM "$p" 2>/dev/null; done
    sleep 0.2
  done
  for p in $(chroot_pids); do in_chroot "$p" && { log "killing $p ($(cat "/proc/$p/comm" 2>/dev/null))"; kill -KILL "$p" 2>/dev/null; }; done
  for i in $(seq 1 25); do [ -z "$(chroot_pids)" ] && break; sleep 0.2; done
  umount_all
  [ -z "$(mounts_under)" ] || die "mounts left under $CH: $(mounts_under | paste -sd ' ')"
  log "stopped in $(elapsed "$T0")s; nothing rooted in or mounted under $CH"
}

status() {
  local p
  echo "chroot: $CH ($([ -e "$CH/.rig-created" ] && echo created || echo missing)); tarball: $([ -s "$TARBALL" ] && du -h "$TARBALL" | cut -f1 || echo none)"
  echo "processes rooted in it:"
  for p in $(chroot_pids); do ps -o pid=,user=,cmd= -p "$p" || true; done
  echo "mounts:"; mounts_under | sed 's/^/  /'
  if mounted run && running /run/slurm/slurmctld.pid; then inch sinfo -N || true; inch squeue || true; fi
  return 0
}

case $CMD in
  create) [ "$(id -u)" = 0 ] || die "must run as root"; lock_suite; create ;;
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  run) shift 2; inch "$@" ;;
  destroy) stop
    [ -z "$(mounts_under)" ] || die "mounts left under $CH; not removing it"
    rm -rf --one-file-system "$CH"; log "removed $CH (the tarball stays: rm $TARBALL)" ;;
  path) echo "$CH" ;;
  nodes) nodes ;;
  *) sed -n '2,50p' "$0"; [ "$CMD" = help ] ;;
esac
