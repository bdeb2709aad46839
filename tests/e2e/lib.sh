#!/usr/bin/env bash
# lib.sh — shared by the end-to-end suites and the demo: named assertions
# (`check DESC CMD...`), build the binaries, a node for the Slurm rig
# (`make_node`, laid out by scripts/lib/node.sh), which Slurm (`slurm_select`,
# SLURM_VERSION=a version of rigs/slurm_versions.tsv; `slurm_cmd` runs a command where it is),
# start/stop the rig under its lock, submit jobs and poll with bounds.
#
# Sourced; expects `set -euo pipefail` in the caller.

# The node layout, its constants (FIX, TOS, RMEM, BASE_*) and the rig lock:
# scripts/lib/node.sh.
# shellcheck source=../../scripts/lib/node.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/node.sh"
E2E_REPO=$NODE_REPO
# shellcheck source=../../packaging/build_name.sh
. "$E2E_REPO/packaging/build_name.sh"
# Where cargo puts the release build (CARGO_TARGET_DIR, as packaging/build.sh).
E2E_RELEASE=${CARGO_TARGET_DIR:-$E2E_REPO/target}/release
QL=$E2E_RELEASE/qoslane
HR=$E2E_RELEASE/hookrun

say() { printf '[e2e %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
fail() { say "FAIL: $*"; E2E_FAILED=$((E2E_FAILED + 1)); }
pass() { say "ok: $*"; E2E_PASSED=$((E2E_PASSED + 1)); }
E2E_FAILED=0
E2E_PASSED=0

# check DESC CMD... : a named assertion
check() {
  local desc=$1; shift
  if "$@"; then pass "$desc"; else fail "$desc"; fi
}
eq() { [ "$1" = "$2" ] || { say "  expected '$2', got '$1'"; return 1; }; }

# poll TIMEOUT_S DESC CMD... : until CMD succeeds, at most TIMEOUT_S seconds
poll() {
  local t=$1 desc=$2; shift 2
  local end=$(( $(date +%s%N) + t * 1000000000 ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s%N)" -gt "$end" ]; then say "timeout (${t}s) waiting for: $desc"; return 1; fi
    sleep 0.1
  done
}

# The build named as packaging/build.sh names revision 1 (packaging/build_name.sh): the
# suites' build and the packages' are one build to cargo, neither relinks after the other.
build_release() {
  say "building release binaries"
  local name
  name=$(qoslane_build_name "$E2E_REPO" 1) || return 1
  (cd "$E2E_REPO" && QOSLANE_BUILD=$name cargo build --release -q -p qoslane -p hookrun)
}

# make_node ROOT MAPPING_FILE : a compute node under the Slurm rig: one port,
# the SM's identity table, hookrun and its hooks (scripts/lib/node.sh)
make_node() { node_layout "$1" "$2" 1 identity; node_hooks "$1"; }

# ------------------------------------------------------------ which Slurm
# slurm_select VERSION|SUITE|host : the Slurm the suite runs on, a row of rigs/slurm_versions.tsv:
# the host's (rigs/slurm_rig.sh) or a Debian suite's in its chroot (rigs/slurm_chroot_rig.sh).
# Sets SLURM_VERSION, SLURM_SUITE (host or the chroot's suite), CH (the chroot's directory, ""
# for the host), NODE_CH (scripts/lib/node.sh: nodes are laid out inside CH) and RIG_LOCK (the
# rig's lock). Everything a hook, a job or a Slurm command sees is a path inside CH; the suite
# reads and writes those files at "$CH$PATH". Default: the host's.
slurm_select() {
  SLURM_VERSION=$(slurm_version_of "$1") || return 2
  SLURM_SUITE=$(slurm_field "$SLURM_VERSION" where)
  RIG_LOCK=$(slurm_lock "$SLURM_VERSION")
  if [ "$SLURM_SUITE" = host ]; then CH=""
  else CH=$(bash "$CHROOT_RIG" path "$SLURM_SUITE"); fi
  NODE_CH=$CH
  export SLURM_VERSION SLURM_SUITE CH NODE_CH
}
slurm_select "${SLURM_VERSION:-$(slurm_newest host)}"

# Where the Prolog learns the QoS (the audit's qos_source): the table's qos_source — env from
# 26.05 (the real one in its environment, from the job credential), before that squeue (the
# non-spoofable query)
qos_source_expected() { slurm_field "$SLURM_VERSION" qos_source; }
# shellcheck disable=SC2034  # for the suites that source this
QSRC=$(qos_source_expected)

# e2e_mapping FILE : the suites' mapping: four levels, mission-critical fail_job; the node
# settings' paths are the fixture node's (scripts/lib/node.sh)
e2e_mapping() {
  cat > "$1" <<YML
default_level: normal
fabric_check: enforce
on_failure: continue
levels:
  - name: mission-critical
    qos: [mission-critical]
    service_level: 3
    virtual_lane: 3
    traffic_class: 106
    on_failure: fail_job
    node_settings:
      - path: $TOS
        value: "106"
      - path: $RMEM
        value: "16777216"
  - name: high
    qos: [high]
    service_level: 2
    virtual_lane: 2
    node_settings:
      - path: $RMEM
        value: "8388608"
  - name: normal
    qos: [normal]
    service_level: 0
    virtual_lane: 0
  - name: low
    qos: [low]
    service_level: 1
    virtual_lane: 1
    node_settings:
      - path: $RMEM
        value: "1048576"
YML
}

# slurm_cmd CMD... : CMD where the Slurm under test is: as is on the host, else inside the chroot
# with a clean environment (what a user's shell there would have: PATH, HOME, LANG)
slurm_cmd() {
  if [ -z "$CH" ]; then "$@"
  else env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 chroot "$CH" "$@"; fi
}

# e2e_workdir NAME : a fresh 0755 directory for the suite, as the hooks see it (under /tmp,
# inside the chroot for a chroot's Slurm, created first when missing): the suite uses
# "$CH$WORK" for its own reads/writes. Fails rather than print "": a suite's cleanup removes
# "$CH$WORK", which must never be the chroot itself.
e2e_workdir() {
  # Made, or made again for another package list, before anything is put in it (a no-op when
  # it is current; start's own create then is too).
  if [ -n "$CH" ]; then
    bash "$CHROOT_RIG" create "$SLURM_SUITE" || return 1
  fi
  local d; d=$(mktemp -d "$CH/tmp/$1.XXXXXX") || return 1
  [ -n "${d#"$CH"}" ] || return 1
  chmod 0755 "$d"; echo "${d#"$CH"}"
}

# e2e_cleanup [RC] : a Slurm suite's EXIT trap (or the end of its own, given the exit status RC:
# under `set -e` a trap's `(exit "$rc")` would end the trap there): release every waiting job,
# stop the rig, remove "$CH$WORK" — or keep it, and say so, when the suite failed
e2e_cleanup() {
  local rc=${1:-$?}
  touch "$CH$WORK/release.all" 2>/dev/null || true
  stop_slurm
  if [ "$rc" -ne 0 ] || [ "$E2E_FAILED" -ne 0 ]; then say "kept $CH$WORK for inspection"; else rm -rf "${CH}${WORK:?}"; fi
}

# e2e_binaries : for a chroot, copy qoslane and hookrun into WORK/bin (QL, HR then name the
# copies: built on bookworm, they run on the newer glibc)
e2e_binaries() {
  [ -n "$CH" ] || return 0
  install -d -m 0755 "$CH$WORK/bin"
  install -m 0755 "$QL" "$HR" "$CH$WORK/bin/"
  QL=$WORK/bin/qoslane HR=$WORK/bin/hookrun
}

# Several nodes: each its own root, WORK/nodes/NAME (root_of NAME), and one Prolog, Epilog and
# TaskProlog for all, WORK/dispatch/bin/hookrun, which runs the node's own hookrun (node_hooks)
# picked by SLURMD_NODENAME, as a site's wrapper picks a node's configuration:
# `start_slurm "$WORK/dispatch" N`, then make_node "$(root_of NAME)" for each of $NODES.
root_of() { echo "$WORK/nodes/$1"; }
dispatch_hooks() {
  install -d -m 0755 "$CH$WORK/dispatch/bin"
  # shellcheck disable=SC2016  # the wrapper's variables, at run time
  printf '#!/bin/sh\ncase $SLURMD_NODENAME in *[!a-zA-Z0-9_-]* | "") echo "no node name" >&2; exit 1 ;; esac\nexec %s/nodes/$SLURMD_NODENAME/bin/hookrun "$@"\n' "$WORK" > "$CH$WORK/dispatch/bin/hookrun"
  chmod 0755 "$CH$WORK/dispatch/bin/hookrun"
}
# health_of NAME : the node's health check as slurmd runs it (HealthCheckProgram: the dispatch
# hookrun, SLURMD_NODENAME), at once, within 60 s (hookrun's budget ends it sooner); its exit
# status is not the caller's
health_of() { slurm_cmd /usr/bin/timeout 60 env SLURMD_NODENAME="$1" "$WORK/dispatch/bin/hookrun" health >/dev/null 2>&1 || true; }

# ------------------------------------------------------------ the multi-switch fabric under the nodes
# fabric_nodes N [HCA...] : the chroot rig's first N node names (the array `names`), each a node
# root (make_node, the mapping "$CH$WORK/mapping.yml") whose smpquery is the chroot's own through
# the simulator's preload (rigs/smpquery-sim) on its own HCA of the multi-switch fabric
# rigs/fabric_path_rig.sh starts here (3 leaves, 2 spines, 6 HCAs, a real OpenSM with QoS: SL n ->
# VL n; FABRIC_ENV its env file, fabric_stop stops it): the K-th node the K-th HCA named, default
# nodeK (node1-2 under leaf1, node3-4 under leaf2, node5-6 under leaf3). ibsim's sockets are
# abstract: a chroot shares the host's network namespace. Each node's smpquery calls are logged
# in "$CH$WORK/sim/NAME.calls".
FABRIC_RIG=$E2E_REPO/rigs/fabric_path_rig.sh
FABRIC_ENV=""
declare -A FABRIC_HCA=()
fabric_nodes() {
  local nn=$1 k=0 n r; shift
  mapfile -t names < <(RIG_NNODES=$nn bash "$CHROOT_RIG" nodes "$SLURM_SUITE")
  for n in "${names[@]}"; do make_node "$(root_of "$n")" "$CH$WORK/mapping.yml"; done
  say "starting the simulated fabric (3 leaves, 2 spines, 6 HCAs; OpenSM with QoS: SL n -> VL n)"
  FABRIC_ENV=$(bash "$FABRIC_RIG" start 8>&- 9>&-)
  install -d -m 0755 "$CH$WORK/sim"
  for n in "${names[@]}"; do
    k=$((k + 1)); r=$(root_of "$n")
    FABRIC_HCA[$n]=${1:-node$k}; [ $# -eq 0 ] || shift
    install -m 0755 "$E2E_REPO/rigs/smpquery-sim" "$CH$r/bin/smpquery"
    printf 'export %s\n' "IBSIM_SOCKNAME=$(fenv IBSIM_SOCKNAME)" "SIM_HOST=${FABRIC_HCA[$n]}" \
      "RIG_UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so" "RIG_WORK=$WORK/sim/$n" \
      "SMPQUERY_SIM_LOCK=$WORK/sim/slots.lock" "SMPQUERY_SIM_LOG=$WORK/sim/$n.calls" > "$CH$r/bin/smpquery.env"
  done
}
fabric_stop() { [ -z "$FABRIC_ENV" ] || bash "$FABRIC_RIG" stop "$FABRIC_ENV" >/dev/null 2>&1 || true; FABRIC_ENV=""; }
fenv() { sed -n "s/^export $1=//p" "$FABRIC_ENV"; }   # a value of the fabric rig's env file
hca_of() { echo "${FABRIC_HCA[$1]}"; }                 # hca_of NAME : the node's HCA
# leaf_of NAME : the switch the node's HCA is cabled to (its first hop)
leaf_of() { bash "$FABRIC_RIG" peer "$FABRIC_ENV" "$(hca_of "$1")" 1 | cut -d' ' -f1; }
# sl2vl_of NAME : its HCA's SL 0-7 -> VL, as the node's own smpquery reads it (inside the chroot)
sl2vl_of() {
  slurm_cmd "$(root_of "$1")/bin/smpquery" -C mlx5_0 -P 1 -D sl2vl 0 |
    sed -n 's/^ports: in  0, out  0: |//p' | tr -d ' ' | cut -d'|' -f1-8
}
# leaf_sl LEAF SL VL : LEAF maps SL to VL toward both spines (its ports 3 and 4; SMP Sets behind
# the SM's back: the SM keeps its copy); VL 15 drops the SL, VL = SL repairs it
leaf_sl() { local out; for out in 3 4; do bash "$FABRIC_RIG" misalign "$FABRIC_ENV" "$1" "$out" "$2" "$3" >/dev/null; done; }

# ------------------------------------------------------------ the fabric audit's verdict
# The audit runs on the host, as on the SM's or a service host: `qoslane fabric audit --verdict`
# through the rig's reader (rigs/smpquery-sim as smpquery, ibnetdiscover and perfquery, on
# node5's HCA under leaf3, no node of the cluster's; one ibsim slot at a time with the nodes')
# writes the verdict into the chroot's $WORK/fabric (the filesystem every node shares: root's,
# 0755; the file root's, 0644); each node's site options name it (QOSLANE_FABRIC_VERDICT).
# verdict_host NODE... : the audit host's reader, and each node's HCA showing the simulated HCA's
# node GUID in its sysfs (as the kernel would), so the node finds itself in the verdict
VERDICT_TOOLS=""
verdict_host() {
  local t n g
  VERDICT_TOOLS=$CH$WORK/audit-tools
  install -d -m 0755 "$CH$WORK/fabric" "$VERDICT_TOOLS"
  for t in smpquery ibnetdiscover perfquery; do
    ln -sfn "$E2E_REPO/rigs/smpquery-sim" "$VERDICT_TOOLS/$t"
    printf 'export %s\n' "IBSIM_SOCKNAME=$(fenv IBSIM_SOCKNAME)" "RIG_UMAD2SIM=$(fenv RIG_UMAD2SIM)" \
      "RIG_WORK=$CH$WORK/sim/audit" "SIM_HOST=node5" "SMPQUERY_SIM_LOCK=$CH$WORK/sim/slots.lock" \
      "SMPQUERY_SIM_LOG=$CH$WORK/sim/audit.calls" > "$VERDICT_TOOLS/$t.env"
  done
  for n in "$@"; do   # RIG_NODES: name type lid guid nports
    g=$(awk -v h="$(hca_of "$n")" '$1 == h { print $4 }' "$(fenv RIG_NODES)")
    g=${g#0x}; [ ${#g} -eq 16 ] || { say "no GUID for $(hca_of "$n")"; return 1; }
    printf '%s:%s:%s:%s\n' "${g:0:4}" "${g:4:4}" "${g:8:4}" "${g:12:4}" \
      > "$CH$(root_of "$n")/sys/class/infiniband/mlx5_0/node_guid"
  done
}
# fabric_audit : one audit on the host (HOST_QL: the host's qoslane) writing the verdict to
# $CH$WORK/fabric/verdict.json; prints its exit code (0 carried, 1 not), its output in
# $CH$WORK/audit.out
fabric_audit() {
  local rc=0
  QOSLANE_NO_JOURNAL=1 QOSLANE_SMPQUERY=$VERDICT_TOOLS/smpquery QOSLANE_IBNETDISCOVER=$VERDICT_TOOLS/ibnetdiscover \
    QOSLANE_PERFQUERY=$VERDICT_TOOLS/perfquery timeout 120 "$HOST_QL" fabric audit --timeout 60 \
    --config "$CH$WORK/mapping.yml" --verdict "$CH$WORK/fabric/verdict.json" >"$CH$WORK/audit.out" 2>&1 || rc=$?
  echo "$rc"
}
# lost_by LEVEL : the HCAs (node descriptions) that lose LEVEL in the verdict, sorted
lost_by() {
  python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
print(" ".join(sorted(p["node"] for l in v["levels"] if l["level"] == sys.argv[2] for p in l["lost"])))' \
    "$CH$WORK/fabric/verdict.json" "$1"
}

# start_slurm ROOT [NNODES] : the rig with ROOT/bin/hookrun as Prolog, Epilog and TaskProlog
# (ROOT "": no hooks; NNODES > 1: the chroot rigs only, NODE is the first node, NODES all of
# them). E2E_EXTRA_CONF: more slurm.conf lines of the suite (before the node lines, so that a
# `NodeName=DEFAULT …` line applies to the rig's nodes).
start_slurm() {
  local r=$1 n=${2:-1}
  local hook=${r:+$r/bin/hookrun} extra="AuthInfo=cred_expire=10${E2E_EXTRA_CONF:+$'\n'$E2E_EXTRA_CONF}"
  # One suite at a time owns a rig (the host rig rewrites /etc/slurm; a chroot rig its ports).
  rig_lock "$RIG_LOCK_WAIT" || { say "another suite holds the Slurm rig lock ($RIG_LOCK)"; return 1; }
  local qos="low:10 normal:100 high:1000 mission-critical:10000 scavenger:1"
  if [ -z "$CH" ]; then
    [ "$n" = 1 ] || { say "the host rig has one node"; return 1; }
    RIG_PROLOG=$hook RIG_EPILOG=$hook RIG_TASKPROLOG=$hook \
    RIG_TASKEPILOG="" RIG_PROLOGSLURMCTLD="" RIG_EPILOGSLURMCTLD="" \
    RIG_PROLOG_FLAGS=Alloc RIG_PROLOG_EPILOG_TIMEOUT=30 RIG_QOS="$qos" \
    RIG_EXTRA_CONF="$extra" \
    RIG_FORCE=1 bash "$RIG" start >/dev/null
    NODE=$(cat "$RIG_DIR/nodename")
    NODES=$NODE
  else
    # We hold the suite's lock: whatever runs there is left over from a suite that was killed
    # (maybe with another node count). Start from a stopped rig.
    RIG_LOCK_HELD=$RIG_LOCK bash "$CHROOT_RIG" stop "$SLURM_SUITE" 2>/dev/null
    RIG_LOCK_HELD=$RIG_LOCK RIG_NNODES=$n RIG_USERS="root jobuser" \
    RIG_PROLOG=$hook RIG_EPILOG=$hook RIG_TASKPROLOG=$hook \
    RIG_TASKEPILOG="" RIG_PROLOGSLURMCTLD="" RIG_EPILOGSLURMCTLD="" \
    RIG_PROLOG_FLAGS=Alloc RIG_PROLOG_EPILOG_TIMEOUT=30 RIG_QOS="$qos" \
    RIG_EXTRA_CONF="$extra" \
    bash "$CHROOT_RIG" start "$SLURM_SUITE" 2>"$CH$WORK/rig-start.log" ||
      { cat "$CH$WORK/rig-start.log" >&2; return 1; }
    NODES=$(RIG_NNODES=$n bash "$CHROOT_RIG" nodes "$SLURM_SUITE" | paste -sd ' ')
    NODE=${NODES%% *}
  fi
  export NODE NODES
}
stop_slurm() {
  if [ -z "$CH" ]; then bash "$RIG" stop >/dev/null 2>&1 || true
  else RIG_LOCK_HELD=$RIG_LOCK bash "$CHROOT_RIG" stop "$SLURM_SUITE" 2>/dev/null || true; fi
}

# Job helpers. A job waits for its release file (bounded), so tests control overlap.
job_script() { # job_script NAME -> path of a batch script that dumps env and waits
  local f=$WORK/$1.sh
  cat > "$CH$f" <<EOS
#!/bin/sh
env | sort > $WORK/\$SLURM_JOB_ID.env
i=0; while [ ! -e $WORK/release.\$SLURM_JOB_ID ] && [ ! -e $WORK/release.all ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i+1)); done
EOS
  chmod 0755 "$CH$f"; echo "$f"
}
submit() { # submit QOS [sbatch args...] -> job id
  local q=$1; shift
  slurm_cmd /usr/bin/sbatch --parsable --qos="$q" -o "$WORK/slurm-%j.out" "$@" "$(job_script "job-$q")"
}
job_state() { slurm_cmd /usr/bin/squeue -h -j "$1" -o %T 2>/dev/null; }
is_running() { [ "$(job_state "$1")" = RUNNING ] && [ -s "$CH$WORK/$1.env" ]; }
is_gone() { [ -z "$(job_state "$1")" ]; }
release() { touch "$CH$WORK/release.$1"; }
env_of() { grep "^$2=" "$CH$WORK/$1.env" | head -1 | cut -d= -f2-; }
# held JOB: requeued and held after a failed Prolog (requeuehold or Slurm's own)
held() {
  slurm_cmd /usr/bin/scontrol show job -o "$1" | grep -Eq 'JobState=PENDING .*Reason=(JobHeldUser|JobHeldAdmin|launch_failed_requeued_held)' ||
    slurm_cmd /usr/bin/scontrol show job -o "$1" | grep -Eq 'Priority=0 .*JobState=PENDING'
}
# requeued JOB: pending again after a Prolog's refusal (Restarts counted), whether held or not;
# not_held "SHOW" (scontrol show job -o): not held by anyone (issue 34: a refusal never holds)
requeued() {
  slurm_cmd /usr/bin/scontrol show job -o "$1" | grep -Eq 'JobState=PENDING .*Restarts=[1-9]'
}
not_held() {
  ! grep -Eq 'Reason=(JobHeldUser|JobHeldAdmin|launch_failed_requeued_held)|Priority=0 ' <<<"$1" ||
    { say "  held: $(grep -o 'Reason=[^ ]*' <<<"$1")"; return 1; }
}
# has_text TEXT NEEDLE: TEXT contains NEEDLE (fixed string); lacks_text: it does not
has_text() { grep -qF -- "$2" <<<"$1" || { say "  not found: '$2'"; return 1; }; }
lacks_text() { ! grep -qF -- "$2" <<<"$1" || { say "  found: '$2'"; return 1; }; }
# node_state / node_reason / resume_node: of NODE; the *_of forms of the node named
node_state_of() { slurm_cmd /usr/bin/sinfo -h -N -n "$1" -o %T | head -1; }
node_reason_of() { slurm_cmd /usr/bin/scontrol show node -o "$1" | sed -n 's/.*Reason=\(.*\) \[.*/\1/p'; }
node_state() { node_state_of "$NODE"; }
node_reason() { node_reason_of "$NODE"; }
# resume_node: resume and wait until idle (a node still completing a job's
# Epilog may ignore the first resume)
resume_once() { slurm_cmd /usr/bin/scontrol update nodename="$1" state=resume >/dev/null 2>&1 || true; [ "$(node_state_of "$1")" = idle ]; }
resume_node_of() { poll 30 "node $1 resumed to idle" resume_once "$1"; }
resume_node() { resume_node_of "$NODE"; }
audit_of() { # audit_of ROOT JOB EVENT FIELD
  python3 - "$CH$1/var/log/qoslane/audit.jsonl" "$2" "$3" "$4" <<'PY'
import json, sys
path, job, event, field = sys.argv[1:]
lines = [json.loads(l) for l in open(path)]
hits = [l for l in lines if str(l.get("job_id")) == job and l["event"] == event]
print(hits[-1].get(field) if hits else "<none>")
PY
}

# ------------------------------------------------------------------ Prometheus
# A real node_exporter per node root and a real Prometheus, plain processes on
# loopback, each on a free port, in the caller's directories; stopped by PID
# (prom_stop). The API is read by tests/e2e/prom_api.py.
NODE_EXPORTER=/usr/bin/prometheus-node-exporter
PROMETHEUS=/usr/bin/prometheus
# shellcheck disable=SC2034  # for the suites that source this
PROMTOOL=/usr/bin/promtool
PROM_API=$E2E_REPO/tests/e2e/prom_api.py
PROM_PIDS=()
# free_port : a loopback TCP port nobody listens on now (the kernel's pick)
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
listening() { python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$1"; }
# prom_spawn LOG PORT CMD... : start CMD (fds 8 and 9, rig locks, not inherited),
# wait until it listens on PORT; its PID goes to PROM_PIDS. Not in a subshell.
prom_spawn() {
  local log=$1 port=$2; shift 2
  "$@" >"$log" 2>&1 8>&- 9>&- </dev/null &
  local pid=$!
  PROM_PIDS+=("$pid")
  if ! poll 30 "$(basename "$1") listening on 127.0.0.1:$port" listening "$port"; then
    say "$(basename "$1") did not come up; its log:"; tail -5 "$log" >&2; return 1
  fi
  kill -0 "$pid" 2>/dev/null || { say "$(basename "$1") exited; its log:"; tail -5 "$log" >&2; return 1; }
}
# node_exporter_start TEXTFILE_DIR LOG -> sets NE_PORT: the textfile collector
# only (the qoslane and hookrun files are what the test reads)
node_exporter_start() {
  NE_PORT=$(free_port)
  prom_spawn "$2" "$NE_PORT" "$NODE_EXPORTER" --web.listen-address="127.0.0.1:$NE_PORT" \
    --collector.disable-defaults --collector.textfile --collector.textfile.directory="$1"
}
# prometheus_start CONFIG DIR -> sets PROM_URL: data and log under DIR
prometheus_start() {
  local port; port=$(free_port)
  prom_spawn "$2/prometheus.log" "$port" "$PROMETHEUS" --config.file="$1" \
    --storage.tsdb.path="$2/data" --web.listen-address="127.0.0.1:$port"
  PROM_URL=http://127.0.0.1:$port
  poll 30 "Prometheus ready" curl -sf --max-time 5 "$PROM_URL/-/ready"
}
# The shipped files, as a rig runs them (deploy/prometheus):
PROM_SHIPPED=$E2E_REPO/deploy/prometheus
# prom_rules_1s OUT : the shipped alert rules with every `for:` set to 1s (and
# nothing else changed), so an alert fires within seconds of its expression
prom_rules_1s() { sed -E 's/^( +for:) .*/\1 1s/' "$PROM_SHIPPED/qoslane-alerts.yml" > "$1"; }
# prom_config OUT RULES CTLD NAME=HOST:PORT... : the shipped scrape config
# (scrape-qoslane.yml) with a rig's targets: the node job gets one target per
# NAME=HOST:PORT (a node_exporter; instance = NAME), every interval 1s, RULES
# the rule file; job names, paths and relabelling stay as shipped. CTLD
# (host:port of a slurmctld serving OpenMetrics) keeps the slurmctld job,
# pointed at it; "" drops it.
prom_config() {
  python3 - "$PROM_SHIPPED/scrape-qoslane.yml" "$@" <<'PY'
import sys, yaml
src, out, rules, ctld, *nodes = sys.argv[1:]
c = yaml.safe_load(open(src))
c["global"] = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
c["rule_files"] = [rules]
jobs = []
for j in c["scrape_configs"]:
    if j["job_name"] == "node":
        j["static_configs"] = [{"targets": [a], "labels": {"instance": n}} for n, a in (x.split("=", 1) for x in nodes)]
    elif j["job_name"] == "slurmctld":
        if not ctld:
            continue
        for sc in j["static_configs"]:
            sc["targets"] = [ctld]
    j.pop("scrape_timeout", None)
    j.pop("scrape_interval", None)
    jobs.append(j)
c["scrape_configs"] = jobs
yaml.safe_dump(c, open(out, "w"), sort_keys=False)
PY
}
# prom_stop : stop what prom_spawn started, by PID
prom_stop() {
  local p
  for p in "${PROM_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PROM_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PROM_PIDS=()
}
# prom_series EXPR : how many series an instant query returns
prom_series() { python3 "$PROM_API" series "$PROM_URL" "$1"; }
# has_series EXPR : at least one
has_series() { [ "$(prom_series "$1")" -gt 0 ]; }
# alert_is NAME STATE : the alert is in STATE (firing|pending) in /api/v1/alerts
alert_is() { python3 "$PROM_API" alert "$PROM_URL" "$1" "$2"; }
