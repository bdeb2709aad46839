#!/usr/bin/env bash
# bench/fabric_audit.sh — `qoslane fabric audit` of a generated fat tree on
# the simulated fabric (rigs/fabric_path_rig.sh: ibsim + a real OpenSM),
# side by side in one run:
#   - smpquery:   --reader smpquery (one smpquery process per query, through
#                 rigs/smpquery-sim as the path tests run it);
#   - in-process: --reader in-process (qoslane under the simulator's preload,
#                 libumad2sim.so, as every umad tool of the rig runs);
#   - floor:      rigs/smpset.c `dump` of every node: every table, one Get at a
#                 time, in one process, nothing judged.
# Every run's report (JSON, less its timing and reader) must be the same both
# ways, or the row is marked FAIL. Times are wall clock of the whole command
# (the topology read by ibnetdiscover included).
#
#   bench/fabric_audit.sh [-t ft:L:H:S] [-r RUNS] [-o FILE] [-S] [-F] [-w 'N...'] [-b OLD_BIN]
#
# -t  the topology (default ft:56:18:18: 56 leaves of 18 HCAs, 18 spines,
#     1,008 HCAs); -r runs of each (default 2); -o also append the rows as
#     JSON lines to FILE; -S skips the smpquery reader (big trees: minutes);
#     -F skips the floor (the 4,032-HCA tree's takes 2 minutes);
#     -w the --workers values of the in-process reader, one row each
#     (default 4; the smpquery reader runs with 4). The mapping:
#     examples/qos-network.yml.
#     The binary: $QOSLANE_BIN, else
#     ${CARGO_TARGET_DIR:-target}/release/qoslane (build it first). Big trees
#     take long to come up: RIG_UP_TIMEOUT (seconds, default here 600).
# -b  also audit in process with OLD_BIN (an earlier build, same --workers)
#     and compare the two reports (less timing and cost) as above.
# Each in-process audit also prints where its time went: the report's
# `cost` (topology, egress reading, judging, MADs by kind) and `deadlock`
# times, and the CPU seconds (utime+stime, /proc/PID/stat) ibsim, OpenSM
# and qoslane spent during it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
topo=ft:56:18:18
runs=2
out=""
skip_smpquery=""
skip_floor=""
workers=4
old_bin=""
while getopts t:r:o:SFw:b: opt; do
    case $opt in
    t) topo=$OPTARG ;;
    r) runs=$OPTARG ;;
    o) out=$OPTARG ;;
    S) skip_smpquery=1 ;;
    F) skip_floor=1 ;;
    w) workers=$OPTARG ;;
    b) old_bin=$OPTARG ;;
    *) echo "usage: $0 [-t TOPO] [-r RUNS] [-o FILE] [-S] [-F] [-w 'N...'] [-b OLD_BIN]" >&2; exit 2 ;;
    esac
done
bin=${QOSLANE_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/qoslane}
[ -x "$bin" ] || { echo "fabric_audit.sh: no $bin (cargo build --release -p qoslane)" >&2; exit 2; }
say() { printf '[fabric-audit %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

say "starting the rig ($topo)"
start=$(date +%s.%N)
env_file=$(RIG_UP_TIMEOUT=${RIG_UP_TIMEOUT:-600} bash "$repo/rigs/fabric_path_rig.sh" start -t "$topo")
trap 'bash "$repo/rigs/fabric_path_rig.sh" stop "$env_file" >/dev/null 2>&1 || true' EXIT
say "rig up after $(echo "$(date +%s.%N) - $start" | bc) s"
# shellcheck disable=SC1090
. "$env_file"
work=$(mktemp -d "$RIG_WORK/bench-audit.XXXXXX")
mkdir -p "$work/bin" "$work/cwd"
for t in smpquery ibnetdiscover ibroute; do
    ln -s "$repo/rigs/smpquery-sim" "$work/bin/$t"
    {
        echo "export SIM_HOST=node2"
        for k in IBSIM_SOCKNAME RIG_UMAD2SIM RIG_WORK; do echo "export $k=${!k}"; done
    } >"$work/bin/$t.env"
done
mapping=$repo/examples/qos-network.yml
cd "$work/cwd"
mapfile -t lids < <(cut -f3 "$RIG_NODES")

# cpu PID: its utime+stime so far, in clock ticks.
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# audit READER WORKERS [PRELOAD...] : the wall seconds; the report in
# $work/READER.json ($AUDIT_BIN and $AUDIT_OUT override the binary and the
# report's name), qoslane's CPU seconds in $work/READER.cpu and ibsim's and
# OpenSM's in $work/READER.sim.
audit() {
    local reader=$1 workers=$2 t0 t1 sim0 osm0 name=${AUDIT_OUT:-$1}
    shift 2
    sim0=$(cpu "$RIG_IBSIM_PID")
    osm0=$(cpu "$RIG_OSM_PID")
    t0=$(date +%s.%N)
    env -i QOSLANE_NO_JOURNAL=1 QOSLANE_SMPQUERY="$work/bin/smpquery" \
        QOSLANE_IBNETDISCOVER="$work/bin/ibnetdiscover" QOSLANE_IBROUTE="$work/bin/ibroute" "$@" \
        /usr/bin/time -f '%U %S' -o "$work/$name.time" \
        "${AUDIT_BIN:-$bin}" fabric audit --config "$mapping" --format json --timeout 3600 \
        --workers "$workers" --reader "$reader" >"$work/$name.json" || [ $? -eq 1 ]
    t1=$(date +%s.%N)
    # The last line: time(1) puts "Command exited with non-zero status 1" first.
    tail -n 1 "$work/$name.time" | awk '{ print $1 + $2 }' >"$work/$name.cpu"
    echo "$(( $(cpu "$RIG_IBSIM_PID") - sim0 )) $(( $(cpu "$RIG_OSM_PID") - osm0 ))" |
        awk -v hz="$hz" '{ printf "%.2f %.2f\n", $1 / hz, $2 / hz }' >"$work/$name.sim"
    echo "$t1 - $t0" | bc
}

# breakdown NAME: where an in-process audit's time went, one line.
breakdown() {
    local sim osm
    read -r sim osm <"$work/$1.sim"
    jq -r --arg name "$1" --arg cpu "$(cat "$work/$1.cpu")" --arg sim "$sim" --arg osm "$osm" '.report as $r |
        "  \($name) (\($r.reader)): topology \($r.cost.topology_ms) ms, routes walked \($r.cost.routed_ms // 0) ms, egress read \($r.cost.egress_ms) ms, "
        + "lanes judged \($r.cost.judge_ms) ms, deadlock: LFT read \($r.deadlock.read_ms) ms, "
        + "judged \($r.deadlock.judge_ms) ms, path records \(if $r.deadlock.path_ms then "\($r.deadlock.path_ms) ms" else "beside the egress read" end); "
        + "sm-policy \($r.cost.sm_policy_ms) ms, wait \($r.cost.wait_ms) ms; "
        + "MADs \($r.cost.mads | to_entries | map("\(.key) \(.value)") | join(", ")) "
        + "(\($r.cost.mads | add)); port pairs \([$r.levels[0].pairs[]] | add); "
        + "CPU s: qoslane \($cpu), ibsim \($sim), opensm \($osm)"' "$work/$1.json" >&2
}
# A report whose routed-only read left pairs out (.report.not_routed) as an
# earlier build that read and judged every pair would have it: those pairs
# counted carried (the rows of the pairs no route takes read by the old
# build, and carried there too, or the reports differ).
every_pair() { jq '(.report.not_routed.pairs // 0) as $n | del(.report.not_routed) | .report.levels |= map(.pairs.carried += $n)' "$1"; }
# .report.deadlock: both judge it (the smpquery reader by ibroute); only the
# in-process reader asks the SA for path records; the timings differ.
same() { jq -S 'del(.report.cost, .report.duration_ms, .report.sm_policy.ms, .report.reader, .report.workers, .report.deadlock.read_ms, .report.deadlock.judge_ms, .report.deadlock.path_ms, .report.deadlock.path_sls, .report.deadlock.path_sls_unread)' "$1"; }

echo "| fabric | egress ports | --workers | smpquery | in process | floor | in process / floor | smpquery / in process | reports |"
echo "|---|---|---|---|---|---|---|---|---|"
for ((i = 1; i <= runs; i++)); do
    floor="0 0 0"
    if [ -z "$skip_floor" ]; then
        say "run $i: floor (smpset dump)"
        floor=$(SIM_HOST=node2 LD_PRELOAD=$RIG_UMAD2SIM "$RIG_SMPSET" dump "${lids[@]}" | sed -n 's/^dump: \([0-9]*\) SMPs, \([0-9]*\) failed, \([0-9.]*\) s$/\3 \1 \2/p')
    fi
    read -r floor_s floor_smps floor_failed <<<"$floor"
    smp=0
    if [ -z "$skip_smpquery" ]; then
        say "run $i: smpquery"
        smp=$(audit smpquery 4)
    fi
    for w in $workers; do
        say "run $i: in process, --workers $w"
        inp=$(audit in-process "$w" LD_PRELOAD="$RIG_UMAD2SIM" SIM_HOST=node2 IBSIM_SOCKNAME="$IBSIM_SOCKNAME")
        say "run $i: in process, --workers $w: $inp s"
        breakdown in-process
        verdict=same
        if [ -n "$skip_smpquery" ]; then
            verdict="(smpquery not run)"
        elif ! diff <(same "$work/smpquery.json") <(same "$work/in-process.json") >"$work/diff.txt"; then
            verdict="FAIL: the reports differ ($work/diff.txt)"
            head -n 60 "$work/diff.txt" >&2
        fi
        if [ -n "$old_bin" ]; then
            say "run $i: in process, --workers $w, the old build $old_bin"
            old=$(AUDIT_BIN=$old_bin AUDIT_OUT=old audit in-process "$w" LD_PRELOAD="$RIG_UMAD2SIM" SIM_HOST=node2 IBSIM_SOCKNAME="$IBSIM_SOCKNAME")
            say "run $i: the old build: $old s"
            breakdown old
            if ! diff <(every_pair "$work/old.json" | same /dev/stdin) <(every_pair "$work/in-process.json" | same /dev/stdin) >"$work/diff-old.txt"; then
                verdict="$verdict; FAIL: the old build's report differs ($work/diff-old.txt)"
                head -n 60 "$work/diff-old.txt" >&2
            else
                verdict="$verdict; the old build's (${old} s): same"
            fi
        fi
        ports=$(jq '.report.ports_read' "$work/in-process.json")
        unread=$(jq '.report.unread | length' "$work/in-process.json")
        ratio=-
        [ -n "$skip_floor" ] || ratio=$(echo "scale=2; $inp / $floor_s" | bc)
        speedup=$(echo "scale=1; $smp / $inp" | bc)
        printf '| %s | %s | %s | %.1f s | %.1f s (%s ms reading) | %.1f s (%s SMPs, %s failed) | %s× | %s× | %s |\n' \
            "$topo" "$ports ($unread unread)" "$w" "$smp" "$inp" "$(jq '.report.duration_ms' "$work/in-process.json")" \
            "$floor_s" "$floor_smps" "$floor_failed" "$ratio" "$speedup" "$verdict"
        if [ -n "$out" ]; then
            jq -cn --arg topo "$topo" --argjson ports "$ports" --argjson workers "$w" \
                --argjson smpquery_s "$smp" --argjson in_process_s "$inp" --argjson floor_s "$floor_s" \
                --arg verdict "$verdict" --arg load "$(cat /proc/loadavg)" \
                '{topo: $topo, ports: $ports, workers: $workers, smpquery_s: $smpquery_s,
                  in_process_s: $in_process_s, floor_s: $floor_s, verdict: $verdict, load: $load}' >>"$out"
        fi
    done
done
