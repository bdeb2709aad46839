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
#   bench/fabric_audit.sh [-t ft:L:H:S] [-r RUNS] [-o FILE] [-S] [-w 'N...']
#
# -t  the topology (default ft:56:18:18: 56 leaves of 18 HCAs, 18 spines,
#     1,008 HCAs); -r runs of each (default 2); -o also append the rows as
#     JSON lines to FILE; -S skips the smpquery reader (big trees: minutes);
#     -w the --workers values of the in-process reader, one row each
#     (default 4; the smpquery reader runs with 4). The mapping:
#     examples/qos-network.yml.
#     The binary: $QOSLANE_BIN, else
#     ${CARGO_TARGET_DIR:-target}/release/qoslane (build it first). Big trees
#     take long to come up: RIG_UP_TIMEOUT (seconds, default here 600).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
topo=ft:56:18:18
runs=2
out=""
skip_smpquery=""
workers=4
while getopts t:r:o:Sw: opt; do
    case $opt in
    t) topo=$OPTARG ;;
    r) runs=$OPTARG ;;
    o) out=$OPTARG ;;
    S) skip_smpquery=1 ;;
    w) workers=$OPTARG ;;
    *) echo "usage: $0 [-t TOPO] [-r RUNS] [-o FILE] [-S] [-w 'N...']" >&2; exit 2 ;;
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

# audit READER WORKERS [PRELOAD...] : the wall seconds; the report in
# $work/READER.json
audit() {
    local reader=$1 workers=$2 t0 t1
    shift 2
    t0=$(date +%s.%N)
    env -i QOSLANE_NO_JOURNAL=1 QOSLANE_SMPQUERY="$work/bin/smpquery" \
        QOSLANE_IBNETDISCOVER="$work/bin/ibnetdiscover" QOSLANE_IBROUTE="$work/bin/ibroute" "$@" \
        "$bin" fabric audit --config "$mapping" --format json --timeout 3600 \
        --workers "$workers" --reader "$reader" >"$work/$reader.json" || [ $? -eq 1 ]
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
# .report.deadlock: both judge it (the smpquery reader by ibroute); only the
# in-process reader asks the SA for path records; the timings differ.
same() { jq -S 'del(.report.duration_ms, .report.reader, .report.workers, .report.judging.ms, .report.deadlock.read_ms, .report.deadlock.judge_ms, .report.deadlock.path_ms, .report.deadlock.path_sls, .report.deadlock.path_sls_unread)' "$1"; }

echo "| fabric | egress ports | --workers | smpquery | in process | floor | in process / floor | smpquery / in process | reports |"
echo "|---|---|---|---|---|---|---|---|---|"
for ((i = 1; i <= runs; i++)); do
    say "run $i: floor (smpset dump)"
    floor=$(SIM_HOST=node2 LD_PRELOAD=$RIG_UMAD2SIM "$RIG_SMPSET" dump "${lids[@]}" | sed -n 's/^dump: \([0-9]*\) SMPs, \([0-9]*\) failed, \([0-9.]*\) s$/\3 \1 \2/p')
    read -r floor_s floor_smps floor_failed <<<"$floor"
    smp=0
    if [ -z "$skip_smpquery" ]; then
        say "run $i: smpquery"
        smp=$(audit smpquery 4)
    fi
    for w in $workers; do
        say "run $i: in process, --workers $w"
        inp=$(audit in-process "$w" LD_PRELOAD="$RIG_UMAD2SIM" SIM_HOST=node2 IBSIM_SOCKNAME="$IBSIM_SOCKNAME")
        verdict=same
        if [ -n "$skip_smpquery" ]; then
            verdict="(smpquery not run)"
        elif ! diff <(same "$work/smpquery.json") <(same "$work/in-process.json") >"$work/diff.txt"; then
            verdict="FAIL: the reports differ ($work/diff.txt)"
        fi
        ports=$(jq '.report.ports_read' "$work/in-process.json")
        unread=$(jq '.report.unread | length' "$work/in-process.json")
        ratio=$(echo "scale=2; $inp / $floor_s" | bc)
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
