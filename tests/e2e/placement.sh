#!/usr/bin/env bash
# placement.sh — Slurm places a fail_job level's jobs only on the nodes that carry it, on real
# Slurm: every node lists the level's feature in slurm.conf (AvailableFeatures), the nodes that
# carry the level keep it in their ActiveFeatures (`scontrol update NodeName=N ActiveFeatures=…`,
# what qoslane will send when a node's grant changes), and job_submit.lua (rendered from a
# mapping by `qoslane slurm-config`, the release binary built here) adds the feature to the
# job's constraint from its QoS. FUTURE placeholder nodes that carry every feature keep a job
# of a level carried nowhere pending instead of rejected. Then `slurm-config --check-qos` against
# this Slurm's sacctmgr (a misspelt QoS named at its line; slurmdbd unreachable: exit 69), and a
# site's own job_submit.lua: never replaced, then calling qoslane_placement.lua as slurmctld
# loads it (a QoS changed on a pending job there too). The facts behind each step:
# docs/dev/slurm-placement.md. Leaves the rig stopped.
#
#   tests/e2e/placement.sh [--slurm VERSION|SUITE]   (or SLURM_VERSION=...; default the newest
#                                                     chroot's, four nodes; the host's: one node)
set -euo pipefail
# shellcheck source=../../rigs/slurm_versions.sh
. "$(dirname "$0")/../../rigs/slurm_versions.sh"
export SLURM_VERSION=${SLURM_VERSION:-$(slurm_newest chroot)}
if [ "${1:-}" = --slurm ]; then SLURM_VERSION=${2:?--slurm VERSION}; fi
. "$(dirname "$0")/lib.sh"

MC=qoslane_mission-critical   # the level's feature
ANY=qoslane                   # the feature every node keeps (job_submit.lua's any-node feature)
WORK=$(e2e_workdir qoslane-e2e-placement)
LUA_DEST=$CH/etc/slurm/job_submit.lua
placement_cleanup() {
  local rc=$?
  rm -f "$LUA_DEST" "$CH/etc/slurm/qoslane_placement.lua" "$CH/etc/slurm/qoslane.conf"
  set +e   # a failing step of the cleanup must not end it before the rig is stopped
  e2e_cleanup "$rc"
}
trap placement_cleanup EXIT

build_release
# render_lua OUT MAPPING [MODULE_OUT] : job_submit.lua (and the module) as `qoslane slurm-config` renders it from MAPPING (a
# mapping's text); the placeholders' sizes matter only to the slurm.conf lines
render_lua() {
  local d
  d=$(mktemp -d "$CH$WORK/render.XXXXXX")
  printf '%s' "$2" > "$d/mapping.yml"
  "$QL" slurm-config --config "$d/mapping.yml" --placeholders 1 --cpus 1 --memory 1 --output "$d"
  mv "$d/job_submit.lua" "$1"
  [ -z "${3:-}" ] || mv "$d/qoslane_placement.lua" "$3"
  rm -rf "$d"
}
# the mappings: the level mission-critical under fail_job (QoS mission-critical), the default
# level normal under continue; for the logic's test, the levels mc and high (as placement.lua
# expects: QoS mission-critical -> qoslane_mc, high -> qoslane_high)
RIG_MAPPING='default_level: normal
levels:
  - name: mission-critical
    qos: [mission-critical]
    service_level: 3
    on_failure: fail_job
  - name: normal
    qos: [normal]
    service_level: 0
'
UNIT_MAPPING='default_level: normal
levels:
  - name: mc
    qos: [mission-critical]
    service_level: 3
    on_failure: fail_job
  - name: high
    qos: [high]
    service_level: 2
    on_failure: fail_job
  - name: normal
    qos: [normal]
    service_level: 0
'

# ------------------------------------------------------------ the script's logic, without Slurm
if command -v lua5.1 >/dev/null; then
  render_lua "$CH$WORK/unit.lua" "$UNIT_MAPPING" "$CH$WORK/unit-module.lua"
  check "job_submit.lua and the module compile (luac5.1 -p)" luac5.1 -p "$CH$WORK/unit.lua" "$CH$WORK/unit-module.lua"
  check "job_submit.lua's constraint logic (tests/e2e/placement.lua)" \
    eq "$(lua5.1 "$E2E_REPO/tests/e2e/placement.lua" "$CH$WORK/unit.lua" 2>&1)" "all ok"
  check "the module's, called as a site's script calls it" \
    eq "$(lua5.1 "$E2E_REPO/tests/e2e/placement.lua" "$CH$WORK/unit-module.lua" 2>&1)" "all ok"
elif [ "${QOSLANE_REQUIRE_TOOLS:-0}" = 1 ]; then
  check "lua5.1 is installed (scripts/install-deps.sh)" false
else
  say "no lua5.1: the script's logic is checked on Slurm only"
fi

# ------------------------------------------------------------ the rig
if [ -n "$CH" ]; then NN=4; else NN=1; fi
render_lua "$CH$WORK/job_submit.lua" "$RIG_MAPPING"
check "the rig's job_submit.lua: the level's QoS -> its feature ($MC)" \
  grep -qxF "   [\"mission-critical\"] = \"$MC\"," "$CH$WORK/job_submit.lua"
# The placeholders: as many as the largest job below needs nodes, each as big as a node; never
# started (FUTURE), in the partition (Nodes=ALL)
export E2E_EXTRA_CONF="NodeName=DEFAULT Feature=$ANY,$MC,rackA
JobSubmitPlugins=lua
NodeName=qoslane-wait[1-$NN] State=FUTURE CPUs=2 RealMemory=1000"
say "Slurm $SLURM_VERSION ($SLURM_SUITE), $NN node(s), JobSubmitPlugins=lua"
# In place before slurmctld starts (it does not start with JobSubmitPlugins=lua and no script);
# a rig started without JobSubmitPlugins ignores the file
install -m 0644 "$CH$WORK/job_submit.lua" "$LUA_DEST"
start_slurm "" "$NN"
read -r -a nodes <<< "$NODES"
sc() { slurm_cmd /usr/bin/scontrol "$@"; }

# rack_of NODE : the user feature of a node: the chroot's nodes 3 and 4 are rackB (their
# AvailableFeatures, set by `racks`: slurmctld only, gone after a reconfigure), the others rackA
rack_of() { if [ -n "$CH" ] && { [ "$1" = "${nodes[2]}" ] || [ "$1" = "${nodes[3]}" ]; }; then echo rackB; else echo rackA; fi; }
racks() { [ -z "$CH" ] || sc update NodeName="${nodes[2]},${nodes[3]}" AvailableFeatures="$ANY,$MC,rackB" ActiveFeatures="$ANY,$MC,rackB"; }
# carry NODE... : the nodes that carry the level (ActiveFeatures), every other loses it
carry() {
  local n want
  for n in "${nodes[@]}"; do
    want="$ANY,$(rack_of "$n")"
    case " $* " in *" $n "*) want="$ANY,$MC,$(rack_of "$n")" ;; esac
    sc update NodeName="$n" ActiveFeatures="$want"
  done
}
racks
active_of() { slurm_cmd /usr/bin/sinfo -h -N -n "$1" -o %b; }
nodes_of() { slurm_cmd /usr/bin/squeue -h -j "$1" -o %N; }
reason_of() { slurm_cmd /usr/bin/squeue -h -j "$1" -o %r; }
features_of() { sc show job -o "$1" | sed -n 's/.* Features=\([^ ]*\) .*/\1/p'; }
pending_reason() { [ "$(job_state "$1")" = PENDING ] && [ "$(reason_of "$1")" = "$2" ]; }
# in_set NODELIST NODE... : every node of the (compressed) list is one of NODE...
in_set() {
  local list=$1 n; shift
  for n in $(sc show hostnames "$list"); do case " $* " in *" $n "*) ;; *) say "  $n not in: $*"; return 1 ;; esac; done
}
release_all() { local j; for j in "$@"; do release "$j"; done; for j in "$@"; do poll 30 "job $j done" is_gone "$j" || return 1; done; }
T0=$(date +%s)

# ------------------------------------------------------------ every node carries the level
say "case: every node carries mission-critical"
carry "${nodes[@]}"
j=$(submit mission-critical)
poll 30 "job $j running" is_running "$j"
check "a mission-critical job's constraint is the level's feature" eq "$(features_of "$j")" "$MC"
check "it runs" eq "$(job_state "$j")" RUNNING
release_all "$j"
j=$(submit normal)
check "a normal job gets no constraint" eq "$(features_of "$j")" "(null)"
release_all "$j"
# Slurm finds a QoS ignoring its case (the script gets it as typed; 26.05's squeue prints it so):
# the level's feature all the same
j=$(submit Mission-Critical)
check "--qos=Mission-Critical: QoS mission-critical, the level's feature" \
  eq "$(slurm_cmd /usr/bin/squeue -h -j "$j" -o %q | tr '[:upper:]' '[:lower:]') $(features_of "$j")" "mission-critical $MC"
release_all "$j"

# ------------------------------------------------------------ some nodes lose it
if [ -n "$CH" ]; then
  keep=("${nodes[2]}" "${nodes[3]}")
  say "case: ${nodes[0]} and ${nodes[1]} lose mission-critical (ActiveFeatures), ${keep[*]} keep it"
  carry "${keep[@]}"
  check "${nodes[0]}'s ActiveFeatures lost the level, its AvailableFeatures kept it" \
    eq "$(active_of "${nodes[0]}")/$(sc show node "${nodes[0]}" | sed -n 's/.*AvailableFeatures=//p')" "$ANY,rackA/$ANY,$MC,rackA"
  a=$(submit mission-critical --exclusive)
  b=$(submit mission-critical --exclusive)
  poll 30 "jobs $a and $b running" is_running "$a" && poll 30 "job $b running" is_running "$b"
  check "two exclusive mission-critical jobs run on the two nodes that carry it" \
    eq "$(printf '%s\n' "$(nodes_of "$a")" "$(nodes_of "$b")" | sort | paste -sd ' ')" "${keep[*]}"
  c=$(submit mission-critical)
  poll 30 "job $c pending for resources" pending_reason "$c" Resources
  check "a third waits for them (Resources), while the other nodes are free" eq "$(reason_of "$c")" Resources
  n=$(submit normal --exclusive)
  poll 30 "job $n running" is_running "$n"
  check "a normal job still runs on a node that lost the level (in service for other levels)" \
    in_set "$(nodes_of "$n")" "${nodes[0]}" "${nodes[1]}"
  release_all "$a"
  poll 30 "job $c running" is_running "$c"
  check "the third runs when a node that carries the level frees" in_set "$(nodes_of "$c")" "${keep[@]}"
  release_all "$b" "$c" "$n"
  m=$(submit mission-critical -N2)
  poll 30 "job $m running" is_running "$m"
  check "a two-node mission-critical job runs on the two that carry it" eq "$(nodes_of "$m")" "$(sc show hostlist "${keep[0]},${keep[1]}")"
  release_all "$m"
  # shellcheck disable=SC2016  # the task's variable
  out=$(slurm_cmd /usr/bin/timeout 60 /usr/bin/srun --qos=mission-critical -N1 /bin/sh -c 'echo $SLURMD_NODENAME')
  check "srun: on a node that carries the level" in_set "$out" "${keep[@]}"
  # the user's constraint kept: rackA is nodes 1-2 (neither carries), rackB nodes 3-4
  carry "${nodes[1]}" "${nodes[3]}"
  u=$(submit mission-critical -C 'rackA|rackB')
  poll 30 "job $u running" is_running "$u"
  check "the user's OR is grouped and kept" eq "$(features_of "$u")" "(rackA|rackB)&$MC"
  check "it runs on a node that carries the level" in_set "$(nodes_of "$u")" "${nodes[1]}" "${nodes[3]}"
  v=$(submit mission-critical -C rackB)
  poll 30 "job $v running" is_running "$v"
  check "the user's rackB and the level: ${nodes[3]} only" eq "$(nodes_of "$v")" "${nodes[3]}"
  release_all "$u" "$v"
  w=$(submit mission-critical -N2 -C '[rackA*1&rackB*1]')
  poll 30 "job $w running" is_running "$w"
  check "node counts: each counted term takes the level" eq "$(features_of "$w")" "[(rackA&$MC)*1&(rackB&$MC)*1]&$MC"
  check "node counts: one carrying node of each rack" eq "$(nodes_of "$w")" "$(sc show hostlist "${nodes[1]},${nodes[3]}")"
  release_all "$w"
  # a heterogeneous job: the mission-critical component on a carrying node, the normal one anywhere
  h=$(slurm_cmd /usr/bin/sbatch --parsable -o "$WORK/slurm-%j.out" --qos=mission-critical -N1 : --qos=normal -N1 -C rackA "$(job_script het)")
  het_up() { [ "$(slurm_cmd /usr/bin/squeue -h -j "$h" -o %T | sort -u)" = RUNNING ]; }
  poll 30 "het job $h running" het_up
  mapfile -t comps < <(slurm_cmd /usr/bin/squeue -h -j "$h" -o '%A %q %f %N' | sort -n)
  check "het job: the mission-critical component carries the level's feature, the normal one the user's only" \
    eq "$(printf '%s\n' "${comps[@]}" | cut -d' ' -f2,3 | paste -sd ';')" "mission-critical $MC;normal rackA"
  check "het job: the mission-critical component on a carrying node" in_set "$(echo "${comps[0]}" | cut -d' ' -f4)" "${nodes[1]}" "${nodes[3]}"
  touch "$CH$WORK/release.$h"; poll 30 "het job $h done" is_gone "$h"
fi

# ------------------------------------------------------------ no node carries it
say "case: no node carries mission-critical"
carry
p=$(submit mission-critical)
check "a mission-critical job is accepted (not rejected) though no node carries the level" test -n "$p"
poll 30 "job $p pending on ReqNodeNotAvail" pending_reason "$p" "ReqNodeNotAvail, May be reserved for other job"
check "it pends: ReqNodeNotAvail (the placeholders)" eq "$(reason_of "$p")" "ReqNodeNotAvail, May be reserved for other job"
arr=$(submit mission-critical -a 1-2)
check "an array is accepted, its constraint the level's" eq "$(features_of "$arr")" "$MC"
# shellcheck disable=SC2016  # the task's variable
slurm_cmd /usr/bin/timeout 90 /usr/bin/srun --qos=mission-critical -N1 /bin/sh -c 'echo ran-on-$SLURMD_NODENAME' \
  > "$CH$WORK/srun.out" 2> "$CH$WORK/srun.err" &
srun_pid=$!
srun_waits() { grep -q 'queued and waiting for resources' "$CH$WORK/srun.err"; }
check "srun waits (not refused)" poll 30 "srun queued" srun_waits
n=$(submit normal)
poll 30 "job $n running" is_running "$n"
check "a normal job runs meanwhile" eq "$(job_state "$n")" RUNNING
release_all "$n"
back=${nodes[$((NN - 1))]}
say "case: $back carries mission-critical again"
carry "$back"
poll 30 "job $p running" is_running "$p"
check "the pending job runs once a node carries the level again, there" eq "$(nodes_of "$p")" "$back"
touch "$CH$WORK/release.all"   # the job, and the array's tasks when they start
check "srun ran there" wait "$srun_pid"
check "srun's task on $back" eq "$(cat "$CH$WORK/srun.out")" "ran-on-$back"
arr_done() { [ -z "$(job_state "$arr")" ]; }
check "the array ran" poll 60 "array $arr done" arr_done
poll 30 "job $p done" is_gone "$p"
rm -f "$CH$WORK/release.all"

# ------------------------------------------------------------ QoS from the association, and changed
say "case: the association's default QoS, and a QoS changed on a pending job"
slurm_cmd /usr/bin/sacctmgr -i modify user where user=root account=rigacct set defaultqos=mission-critical >/dev/null
# slurmdbd pushes the change to slurmctld: a held job without --qos, until it has the new default
d=""
default_seen() {
  [ -z "$d" ] || slurm_cmd /usr/bin/scancel "$d"
  d=$(slurm_cmd /usr/bin/sbatch --parsable -H -o /dev/null "$(job_script default)")
  sc show job -o "$d" | grep -q ' QOS=mission-critical '
}
poll 30 "a job without --qos gets the new default" default_seen || true
check "no --qos, the association's default mission-critical: the level's feature" eq "$(sc show job -o "$d" | grep -o ' QOS=[^ ]*') $(features_of "$d")" " QOS=mission-critical $MC"
slurm_cmd /usr/bin/sacctmgr -i modify user where user=root account=rigacct set defaultqos=normal >/dev/null
sc update job "$d" QOS=normal
check "QoS changed to normal on the pending job: the constraint is the any-node feature" eq "$(features_of "$d")" "$ANY"
sc update job "$d" QOS=mission-critical
check "and back to mission-critical: the level's feature" eq "$(features_of "$d")" "$MC"
q=$(submit normal -H -C rackA)
check "a held normal job keeps the user's rackA" eq "$(features_of "$q")" rackA
sc update job "$q" QOS=mission-critical
check "QoS changed to mission-critical: rackA and the level" eq "$(features_of "$q")" "rackA&$MC"
carry "${nodes[0]}"
sc release "$q"
poll 30 "job $q running" is_running "$q"
check "released, it runs on the rackA node that carries the level" eq "$(nodes_of "$q")" "${nodes[0]}"
check "Slurm refuses a QoS change of a started job" eq "$(sc update job "$q" QOS=high 2>&1 || true)" "Job is no longer pending execution for job $q"
check "the running job keeps its QoS and constraint" eq "$(sc show job -o "$q" | grep -o ' QOS=[^ ]*') $(features_of "$q")" " QOS=mission-critical rackA&$MC"
release_all "$q"
sc update job "$d" QOS=normal
check "QoS back to normal on the pending job: the any-node feature again" eq "$(features_of "$d")" "$ANY"
slurm_cmd /usr/bin/scancel "$d"

# ------------------------------------------------------------ what a reconfigure does
say "case: scontrol reconfigure"
carry
sc reconfigure
reset_done() { [ "$(active_of "${nodes[0]}")" = "$ANY,$MC,rackA" ]; }
check "a reconfigure gives every node its slurm.conf features back as active (qoslane must assert again)" \
  poll 30 "features reset" reset_done
# ------------------------------------------------------------ qoslane health tells slurmctld
# A real `qoslane health` on a node root of the first node (QOSLANE_SCONTROL: placement on) sends
# the node's grant to this slurmctld: its fabric (the fixture's smpquery answers) carries
# mission-critical, then drops SL 3 to VL 15, then nothing changes.
say "case: qoslane health on ${nodes[0]} sends its grant (placement on)"
e2e_binaries
HROOT=$WORK/node-health
printf '%s' "$RIG_MAPPING" > "$CH$WORK/rig-mapping.yml"
node_layout "$HROOT" "$CH$WORK/rig-mapping.yml"
qhealth() {
  slurm_cmd /usr/bin/env SLURMD_NODENAME="${nodes[0]}" QOSLANE_ROOT="$HROOT" QOSLANE_NO_JOURNAL=1 \
    QOSLANE_SMPQUERY="$HROOT/bin/smpquery" QOSLANE_SQUEUE=/usr/bin/squeue QOSLANE_SCONTROL=/usr/bin/scontrol \
    "$QL" health > "$CH$WORK/health.out" 2>&1
}
last_health_notes() { grep '"event":"health"' "$CH$HROOT/var/log/qoslane/audit.jsonl" | tail -1; }
# the level off on the node first (the reconfigure above gave nodes 3-4 rackA back: only this one)
sc update NodeName="${nodes[0]}" ActiveFeatures="$ANY,rackA"
# rpcs : what the controller was asked since the last `sdiag -r` (nothing else asks between):
# "UPDATE_NODE NODE_INFO" counts
rpc_count() { slurm_cmd /usr/bin/sdiag | awk -v n="$1" '$1 == n { sub(/.*count:/, ""); c = $1 + 0 } END { print c + 0 }'; }
rpcs() { echo "$(rpc_count REQUEST_UPDATE_NODE) $(rpc_count REQUEST_NODE_INFO)"; }
# every request of any type, sdiag's own aside
rpc_total() { slurm_cmd /usr/bin/sdiag | awk '$1 ~ /^REQUEST_/ && $1 != "REQUEST_STATS_INFO" && /count:/ { sub(/.*count:/, ""); c += $1 } END { print c + 0 }'; }
measured() { slurm_cmd /usr/bin/sdiag -r >/dev/null; qhealth; }
check "qoslane health: exit 0 (mission-critical carried)" measured
check "the first run after boot: its own features read, then sent (1 update, 1 node info)" eq "$(rpcs)" "1 1"
check "it sent the level's feature: ${nodes[0]} active $ANY,$MC,rackA" eq "$(active_of "${nodes[0]}")" "$ANY,$MC,rackA"
set_fabric "$HROOT" vl15
rm -f "$CH$HROOT/run/qoslane/fabric.json" "$CH$HROOT/run/qoslane/first-hop.json"
check "qoslane health: exit 0 (mission-critical dropped: a warning)" measured
check "a change: 1 update, nothing read" eq "$(rpcs)" "1 0"
check "it took the feature off: ${nodes[0]} active $ANY,rackA" eq "$(active_of "${nodes[0]}")" "$ANY,rackA"
check "its audit line says what it sent (changed)" grep -q 'placement: ok: sent active features qoslane,rackA (changed)' <<< "$(last_health_notes)"
check "qoslane health again: nothing changed" measured
check "nothing changed: 0 RPCs (of any type)" eq "$(rpcs) $(rpc_total)" "0 0 0"
check "the audit line says it was sent before" grep -q 'placement: ok: active features qoslane,rackA (sent before)' <<< "$(last_health_notes)"

# ------------------------------------------------------------ the cluster view
# `qoslane cluster` (read-only, as nobody) from this slurmctld: the health run above took the level
# off ${nodes[0]}; a job pinned there is refused the way hookrun refuses one (its AdminComment the
# Prolog's line, `scontrol requeue`) after the refusing Prolog's placement sync took the feature off.
say "case: qoslane cluster names where mission-critical is carried, and the refused job"
sc update NodeName="${nodes[0]}" ActiveFeatures="$ANY,$MC,rackA"
r=$(submit mission-critical -w "${nodes[0]}")
poll 30 "job $r running" is_running "$r"
why="qoslane: level mission-critical (QoS mission-critical) refused on ${nodes[0]}: fabric check: mlx5_0/1: SL 3 -> VL 15, want VL 3"
sc update NodeName="${nodes[0]}" ActiveFeatures="$ANY,rackA"
sc update JobId="$r" AdminComment="$why"
sc requeue "$r"
hn=$(submit normal -H)   # a held job of another level: pending, no AdminComment, not listed
pending_again() { [ "$(job_state "$r")" = PENDING ]; }
poll 30 "job $r pending again" pending_again
cl() { slurm_cmd /usr/sbin/runuser -u nobody -- "$QL" cluster --scontrol /usr/bin/scontrol --squeue /usr/bin/squeue "$@"; }
CAP=$CH$WORK/cluster-capture; mkdir -p "$CAP"
# what the view parses, kept (QOSLANE_CAPTURE_DIR: copied there, the parser's fixtures)
sc show node -o > "$CAP/scontrol-show-node.txt"
slurm_cmd /usr/bin/squeue -h -a -t PD -O "$(printf 'JobArrayID:\t,StateCompact:\t,UserName:\t,QOS:\t,Reason:\t,Feature:\t,admin_comment:')" > "$CAP/squeue.txt"
if [ "$NN" -gt 1 ]; then want_rc=0; else want_rc=1; fi
rc=0; cl > "$CAP/cluster.txt" 2> "$CAP/cluster.err" || rc=$?
check "qoslane cluster as nobody: exit $want_rc (1 when the level is carried nowhere)" eq "$rc" "$want_rc"
check "it names ${nodes[0]} as not carrying mission-critical" grep -Eq "^${nodes[0]} +[A-Z+*]+ +NOT carried" "$CAP/cluster.txt"
if [ "$NN" -gt 1 ]; then
  check "it names ${nodes[1]} as carrying it" grep -Eq "^${nodes[1]} +[A-Z+*]+ +carried" "$CAP/cluster.txt"
  check "mission-critical: carried on 3 of 4 nodes" grep -Eq "^mission-critical +3 of 4 nodes \(3 in service\): " "$CAP/cluster.txt"
else
  check "mission-critical: CARRIED NOWHERE" grep -Eq "^mission-critical +CARRIED NOWHERE \\(0 of 1 nodes\\)" "$CAP/cluster.txt"
  check "the refused job waits for the level carried nowhere" grep -q "^  job $r (root, QoS mission-critical) waits for mission-critical: " "$CAP/cluster.txt"
fi
check "it does not list the held normal job $hn" eq "$(grep -c "job $hn " "$CAP/cluster.txt")" 0
check "it lists the refused job $r with its reason (AdminComment)" \
  eq "$(grep -A1 "^  job $r (root, QoS mission-critical) pending: " "$CAP/cluster.txt" | tail -1)" "    $why"
cl --format json > "$CAP/cluster.json" || true
# shellcheck disable=SC2016  # python's text
check "--format json: the node, the level and the refused job" python3 -c '
import json, sys
v = json.load(open(sys.argv[1])); n0, job, why = sys.argv[2:5]
mc = [l for l in v["levels"] if l["level"] == "mission-critical"][0]
node = [n for n in v["nodes"] if n["name"] == n0][0]
assert n0 in mc["not_carried_on"] and n0 not in mc["carried_on"], mc
assert [l["carries"] for l in node["levels"] if l["level"] == "mission-critical"] == ["not_carried"], node
t = [t for t in v["turned_away"] if t["job"] == job][0]
assert (t["admin_comment"], t["level"], t["node"]) == (why, "mission-critical", n0), t
' "$CAP/cluster.json" "${nodes[0]}" "$r" "$why"
if [ -n "${QOSLANE_CAPTURE_DIR:-}" ]; then mkdir -p "$QOSLANE_CAPTURE_DIR"; cp "$CAP"/* "$QOSLANE_CAPTURE_DIR/"; fi
sc update NodeName="${nodes[0]}" ActiveFeatures="$ANY,$MC,rackA"
poll 60 "job $r running again on ${nodes[0]}" is_running "$r"
release_all "$r"
slurm_cmd /usr/bin/scancel "$hn"

# ------------------------------------------------------------ the mapping's QoS names against Slurm's
say "case: slurm-config --check-qos against this Slurm's sacctmgr"
qcheck() { slurm_cmd "$QL" slurm-config --check-qos --config "$1" --sacctmgr /usr/bin/sacctmgr > "$CH$WORK/check.out" 2> "$CH$WORK/check.err"; }
check "every QoS of the rig's mapping is known to Slurm: exit 0" qcheck "$WORK/rig-mapping.yml"
check "Slurm's QoS high, in no level, is said (the default level)" \
  grep -qF "note: Slurm's QoS \`high\` is in no level of $WORK/rig-mapping.yml: its jobs get the default level \`normal\`" "$CH$WORK/check.out"
printf '%s' "$RIG_MAPPING" | sed 's/^    qos: \[mission-critical\]$/    qos: [mision-critical]/' > "$CH$WORK/typo-mapping.yml"
check "the misspelt mapping (its line 4)" eq "$(sed -n 4p "$CH$WORK/typo-mapping.yml")" "    qos: [mision-critical]"
rc=0; qcheck "$WORK/typo-mapping.yml" || rc=$?
check "a misspelt QoS: exit 2" eq "$rc" 2
check "it names the mapping's line" grep -qF "$WORK/typo-mapping.yml:4:11: error: level \`mission-critical\` lists QoS \`mision-critical\`, which Slurm does not know" "$CH$WORK/check.err"
# slurmdbd unreachable: sacctmgr with a slurm.conf whose AccountingStoragePort nothing listens on
conf=$(slurm_cmd /usr/bin/scontrol show config | sed -n 's/^SLURM_CONF *= *//p')
install -d -m 0755 "$CH$WORK/nodbd"
{ grep -v '^AccountingStoragePort=' "$CH$conf"; echo AccountingStoragePort=1; } > "$CH$WORK/nodbd/slurm.conf"
printf '#!/bin/sh\nSLURM_CONF=%s/nodbd/slurm.conf exec /usr/bin/sacctmgr "$@"\n' "$WORK" > "$CH$WORK/nodbd/sacctmgr"
chmod 0755 "$CH$WORK/nodbd/sacctmgr"
rc=0; slurm_cmd /usr/bin/timeout 60 "$QL" slurm-config --check-qos --config "$WORK/rig-mapping.yml" --sacctmgr "$WORK/nodbd/sacctmgr" \
  > "$CH$WORK/check.out" 2> "$CH$WORK/check.err" || rc=$?
check "slurmdbd unreachable: exit 69 (unavailable), not a crash" eq "$rc" 69
check "the error names the command and says why" grep -qF "$WORK/nodbd/sacctmgr -n -P show qos format=name\` failed, so the mapping's QoS names cannot be checked against Slurm's (is slurmdbd reachable from here?)" "$CH$WORK/check.err"

# ------------------------------------------------------------ a site's own job_submit.lua
# It is never replaced: slurm-config writes the module beside it and says which lines to add;
# once added, slurmctld (which reads the changed script at the next job) runs the site's
# functions and qoslane's placement from them, and a QoS changed on a pending job moves the
# features there too, the user's constraint kept.
say "case: a site's own job_submit.lua calls qoslane's module"
cat > "$LUA_DEST" <<'EOS'
-- the site's own job_submit.lua: it marks every job's comment
function slurm_job_submit(job_desc, part_list, submit_uid)
   job_desc.comment = "site-script"
   return slurm.SUCCESS
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end
return slurm.SUCCESS
EOS
cp "$LUA_DEST" "$CH$WORK/site.lua"
qconfig() { slurm_cmd "$QL" slurm-config --config "$WORK/rig-mapping.yml" --placeholders "$NN" --cpus 2 --memory 1000 --output /etc/slurm > "$CH$WORK/config.out" 2> "$CH$WORK/config.err"; }
rc=0; qconfig || rc=$?
check "slurm-config --output refuses to replace the site's job_submit.lua (exit 64)" eq "$rc" 64
check "it names the file and the lines to add" grep -qF "/etc/slurm/job_submit.lua is the site's own job_submit.lua (not qoslane's) and lacks the module loaded" "$CH$WORK/config.err"
check "the site's script is as it was" cmp -s "$LUA_DEST" "$CH$WORK/site.lua"
module_only() { [ -s "$CH/etc/slurm/qoslane_placement.lua" ] && [ ! -e "$CH/etc/slurm/qoslane.conf" ]; }
check "the module is written beside it, no slurm.conf lines yet" module_only
# the three lines, as the error says
sed -i -e '1a local qoslane = dofile("/etc/slurm/qoslane_placement.lua")' \
  -e 's/^   job_desc.comment = "site-script"$/&\n   qoslane.job_submit(job_desc, part_list, submit_uid)/' \
  -e 's/^function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)$/&\n   qoslane.job_modify(job_desc, job_rec, part_list, modify_uid)/' "$LUA_DEST"
cp "$LUA_DEST" "$CH$WORK/site.lua"
check "with the lines added: exit 0" qconfig
check "the site's script is left as it is" cmp -s "$LUA_DEST" "$CH$WORK/site.lua"
check "it says so" grep -qF "/etc/slurm/job_submit.lua left as it is (the site's own, calling the module)" "$CH$WORK/config.err"
racks; carry "${nodes[@]}"
s1=$(submit mission-critical -H -C rackA)
check "slurmctld runs the site's function: the job's comment is the site's" eq "$(slurm_cmd /usr/bin/squeue -h -j "$s1" -o %k)" site-script
check "and qoslane's from it: rackA and the level" eq "$(features_of "$s1")" "rackA&$MC"
sc update job "$s1" QOS=normal
check "QoS changed to normal on the pending job: the level's feature off, the user's rackA kept" eq "$(features_of "$s1")" rackA
sc update job "$s1" QOS=mission-critical
check "and back: rackA and the level again" eq "$(features_of "$s1")" "rackA&$MC"
if [ -n "$CH" ]; then
  sc update job "$s1" Features=rackB
  check "the user's new constraint on the pending job keeps the level" eq "$(features_of "$s1")" "rackB&$MC"
  sc release "$s1"
  poll 30 "job $s1 running" is_running "$s1"
  check "released, it runs on a rackB node that carries the level" in_set "$(nodes_of "$s1")" "${nodes[2]}" "${nodes[3]}"
else
  sc release "$s1"
  poll 30 "job $s1 running" is_running "$s1"
  check "released, it runs" eq "$(job_state "$s1")" RUNNING
fi
release_all "$s1"

say "the cases took $(($(date +%s) - T0)) s"
[ "$E2E_FAILED" -eq 0 ] || { say "$E2E_FAILED failed, $E2E_PASSED passed"; exit 1; }
say "all $E2E_PASSED passed"
