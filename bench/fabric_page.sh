#!/usr/bin/env bash
# bench/fabric_page.sh — what `qoslane fabric audit --format html` costs on a
# generated fat tree of the simulated fabric (rigs/fabric_path_rig.sh):
#   - the page's size (and gzipped, as a ticket attachment would travel);
#   - the command's wall time with --format html beside --format json, the
#     same sweep (the in-process reader), the medians of RUNS each: the
#     difference is what building and writing the page adds;
#   - headless Chromium opening the file: the wall time of --dump-dom, and
#     the time the page's script took to draw (its body's data-drawn-ms).
#
#   bench/fabric_page.sh [-t ft:L:H:S] [-r RUNS] [-e RIG_ENV]
#
# -t  the topology (default ft:56:18:18: 1,008 HCAs, as bench/fabric_audit.sh);
# -r  runs of each format (default 3); -e  a running rig's env file (else one
#     is started and stopped). The binary: $QOSLANE_BIN, else
#     ${CARGO_TARGET_DIR:-target}/release/qoslane. The mapping:
#     examples/qos-network.yml.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
topo=ft:56:18:18
runs=3
env_file=""
while getopts t:r:e: opt; do
    case $opt in
    t) topo=$OPTARG ;;
    r) runs=$OPTARG ;;
    e) env_file=$OPTARG ;;
    *) echo "usage: $0 [-t TOPO] [-r RUNS] [-e RIG_ENV]" >&2; exit 2 ;;
    esac
done
bin=${QOSLANE_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/qoslane}
[ -x "$bin" ] || { echo "fabric_page.sh: no $bin (cargo build --release -p qoslane)" >&2; exit 2; }
chromium=$(command -v chromium || true)
[ -n "$chromium" ] || { echo "fabric_page.sh: no chromium (scripts/install-deps.sh)" >&2; exit 2; }
say() { printf '[fabric-page %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

if [ -z "$env_file" ]; then
    say "starting the rig ($topo)"
    env_file=$(RIG_UP_TIMEOUT=${RIG_UP_TIMEOUT:-600} bash "$repo/rigs/fabric_path_rig.sh" start -t "$topo")
    trap 'bash "$repo/rigs/fabric_path_rig.sh" stop "$env_file" >/dev/null 2>&1 || true' EXIT
fi
# shellcheck disable=SC1090  # the rig's env file
. "$env_file"
work=$(mktemp -d "$RIG_WORK/bench-page.XXXXXX")
mkdir -p "$work/bin"
for t in smpquery ibnetdiscover; do
    ln -s "$repo/rigs/smpquery-sim" "$work/bin/$t"
    {
        echo "export SIM_HOST=node2"
        for k in IBSIM_SOCKNAME RIG_UMAD2SIM RIG_WORK; do echo "export $k=${!k}"; done
    } >"$work/bin/$t.env"
done
mapping=$repo/examples/qos-network.yml

# audit FORMAT : the wall seconds; the output in $work/page.FORMAT
audit() {
    local t0 t1
    t0=$(date +%s.%N)
    env -i QOSLANE_NO_JOURNAL=1 QOSLANE_SMPQUERY="$work/bin/smpquery" \
        QOSLANE_IBNETDISCOVER="$work/bin/ibnetdiscover" LD_PRELOAD="$RIG_UMAD2SIM" \
        SIM_HOST=node2 IBSIM_SOCKNAME="$IBSIM_SOCKNAME" \
        "$bin" fabric audit --config "$mapping" --reader in-process --timeout 3600 \
        --format "$1" --output "$work/page.$1" || [ $? -eq 1 ]
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

for f in json html; do
    for ((i = 1; i <= runs; i++)); do
        say "$f run $i"
        audit "$f" >>"$work/$f.times"
    done
done
json_s=$(median <"$work/json.times")
html_s=$(median <"$work/html.times")
size=$(stat -c %s "$work/page.html")
gz=$(gzip -9c "$work/page.html" | wc -c)

say "chromium"
t0=$(date +%s.%N)
"$chromium" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run \
    --user-data-dir="$work/profile" --window-size=1400,1000 \
    --dump-dom "file://$work/page.html" >"$work/dom.html" 2>/dev/null
t1=$(date +%s.%N)
open_s=$(echo "$t1 - $t0" | bc)
drawn_ms=$(sed -n 's/.*data-drawn-ms="\([0-9]*\)".*/\1/p' "$work/dom.html" | head -1)
nodes=$(sed -n 's/.*data-drawn="\([0-9]*\)".*/\1/p' "$work/dom.html" | head -1)

echo "| fabric | nodes drawn | page | gzipped | --format json | --format html | Chromium opens it | its script draws |"
echo "|---|---|---|---|---|---|---|---|"
printf '| %s | %s | %.2f MB | %.2f MB | %.2f s | %.2f s | %.2f s | %s ms |\n' "$topo" "$nodes" \
    "$(echo "$size / 1000000" | bc -l)" "$(echo "$gz / 1000000" | bc -l)" \
    "$json_s" "$html_s" "$open_s" "$drawn_ms"
say "the page: $work/page.html"
