#!/usr/bin/env bash
# smreader.sh — `qoslane fabric watch` reading the OpenSM event plugin's spool (smplugin/) on the
# multi-switch rig's real OpenSM (rigs/fabric_path_rig.sh: ibsim, 5 switches, 6 HCAs), in process
# under the rig's umad preload, as a SM host would run it:
#   0. at start: a full audit, the verdict written (a missing verdict file fails every check);
#   a. the SM restarted with options that drop levels (max_op_vls 2: VL2 and VL3 no longer
#      operational): START is seen, a full audit, every node loses mission-critical and high and
#      keeps normal and low; restarted with the rig's options: every node keeps every level;
#   b. a table broken behind the SM's back (spine1 port 2 -> leaf2 drops SL 3: node3 and node4
#      lose mission-critical, as a full audit shows), then that link bounced: the SM's re-sweep
#      (TRAP, LFT_CHANGE) is seen and only the switches it changed and the link's two ends are
#      read again; the verdict says what the fabric now carries;
#   c. an LFT change: a spine link cut and left down, the SM reroutes (TRAP, LFT_CHANGE): a
#      re-audit of the switches named, nobody loses a level, then the link back;
#   after each of a, b and c the watcher's verdict equals a fresh `fabric audit --verdict`'s (less
#   who made it and when): one decision, whatever read the facts. Each act's figures (time from
#   the SM's record to the verdict written, SMPs, ports read and kept) are printed beside the full
#   audit's.
# A killed reader and a full spool leave the SM sweeping: tests/e2e/smplugin.sh (4 and 5).
#   smreader.sh [-t TOPO]   another topology (e.g. ft:56:18:18: the figures only, checks a-c are
#                           the 6-HCA rig's; RIG_UP_TIMEOUT for big trees)
# Needs gcc, make, libopensm-dev, libibumad-dev, jq and the rig's packages; skipped when absent
# unless QOSLANE_REQUIRE_TOOLS=1. The binary: $QOSLANE_BIN, else target/debug/qoslane (built
# here when missing; with -t, target/release/qoslane, built here: the figures are a release
# build's). About 60 s.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
RIG=$REPO/rigs/fabric_path_rig.sh
TOPO=""
while getopts t: opt; do
  case $opt in
  t) TOPO=$OPTARG ;;
  *) echo "usage: $0 [-t TOPO]" >&2; exit 2 ;;
  esac
done

say() { printf '[smreader %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
FAILED=0 PASSED=0
check() {
  local desc=$1; shift
  if "$@"; then say "ok: $desc"; PASSED=$((PASSED + 1)); else say "FAIL: $desc"; FAILED=$((FAILED + 1)); fi
}

missing=()
for t in gcc make opensm ibsim smpquery jq; do command -v "$t" >/dev/null || missing+=("$t"); done
for h in /usr/include/infiniband/opensm/osm_event_plugin.h /usr/include/infiniband/umad.h; do
  [ -e "$h" ] || missing+=("$h")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "missing: ${missing[*]} (scripts/install-deps.sh)"
  [ "${QOSLANE_REQUIRE_TOOLS:-0}" = 1 ] && exit 1
  say "skipped"; exit 0
fi
# The figures of another topology are a release build's (a debug build's deadlock check and
# judging took 2-3 s of the 1,008-HCA tree's re-audit); the checks of the 6-HCA rig, the debug
# build's as the other suites.
profile=debug cargo_profile=()
[ -n "$TOPO" ] && profile=release cargo_profile=(--release)
BIN=${QOSLANE_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/$profile/qoslane}
if [ ! -x "$BIN" ] || { [ -z "${QOSLANE_BIN:-}" ] && [ -n "$TOPO" ]; }; then
  say "building qoslane ($profile)"
  cargo build -q -p qoslane "${cargo_profile[@]}" --manifest-path "$REPO/Cargo.toml" >&2
fi
say "the binary: $BIN"

base=/tmp; [ -w /dev/shm ] && base=/dev/shm
WORK=$(mktemp -d "$base/qoslane-smreader.XXXXXX")
SPOOL=$WORK/spool
ENV="" WATCHER=""
stop_watcher() {
  [ -z "$WATCHER" ] && return 0
  kill -TERM "$WATCHER" 2>/dev/null || true
  wait "$WATCHER" 2>/dev/null || true
  WATCHER=""
}
cleanup() {
  stop_watcher
  [ -z "$ENV" ] || "$RIG" stop "$ENV" >/dev/null 2>&1 || true
  if [ "$FAILED" -ne 0 ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

say "building the plugin"
make -s -C "$REPO/smplugin" O="$WORK/build" all >&2
export LD_LIBRARY_PATH=$WORK/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

now_ns() { date +%s%N; }
poll_for() { # poll_for SECONDS CMD...: until CMD succeeds, at most SECONDS
  local end=$(( $(now_ns) + $1 * 1000000000 )); shift
  until "$@"; do [ "$(now_ns)" -lt "$end" ] || return 1; sleep 0.1; done
}
rig_env() {
  # shellcheck disable=SC1090  # written by the rig
  . "$ENV"
}

cat >"$WORK/m.yml" <<'EOF'
default_level: normal
fabric_check: enforce
levels:
  - name: mission-critical
    qos: [mission-critical]
    service_level: 3
    virtual_lane: 3
    on_failure: fail_job
  - name: high
    qos: [high]
    service_level: 2
    virtual_lane: 2
  - name: normal
    qos: [normal]
    service_level: 0
    virtual_lane: 0
  - name: low
    qos: [low, standby]
    service_level: 1
    virtual_lane: 1
EOF

rig_args=(-o event_plugin_name=qoslane_sm -o "event_plugin_options=qoslane_spool=$SPOOL")
[ -z "$TOPO" ] || rig_args+=(-t "$TOPO")
say "starting the rig ${TOPO:-(2level)} with the plugin"
ENV=$(RIG_UP_TIMEOUT=${RIG_UP_TIMEOUT:-600} "$RIG" start "${rig_args[@]}")
rig_env
mkdir -p "$WORK/bin" "$WORK/cwd"
for t in smpquery ibnetdiscover; do
  ln -s "$REPO/rigs/smpquery-sim" "$WORK/bin/$t"
  { echo "export SIM_HOST=node2"
    for k in IBSIM_SOCKNAME RIG_UMAD2SIM RIG_WORK; do echo "export $k=${!k}"; done
  } >"$WORK/bin/$t.env"
done

# Placement from the watcher (QOSLANE_SCONTROL): the stand-in scontrol answers `show node` with
# the node carrying mission-critical (a fail_job level: placed) and records every call.
ln -s "$REPO/crates/qoslane/tests/fixtures/bin/scontrol" "$WORK/bin/scontrol"
# updates_without LEVEL: the nodes sent ActiveFeatures without qoslane_LEVEL, sorted, comma-joined
updates_without() {
  [ -s "$WORK/bin/scontrol.calls" ] || return 0
  sed -n 's/^update NodeName=\([^ ]*\) ActiveFeatures=\(.*\)$/\1 \2/p' "$WORK/bin/scontrol.calls" |
    awk -v f="qoslane_$1" '{ n = split($2, a, ","); has = 0; for (i = 1; i <= n; i++) if (a[i] == f) has = 1; if (!has) print $1 }' |
    sort -u | paste -sd,
}
# qoslane in process as node2 (umad2sim keeps its emulated sysfs in the working directory)
QENV=(QOSLANE_NO_JOURNAL=1 QOSLANE_SMPQUERY="$WORK/bin/smpquery" QOSLANE_SCONTROL="$WORK/bin/scontrol"
  QOSLANE_IBNETDISCOVER="$WORK/bin/ibnetdiscover" LD_PRELOAD="$RIG_UMAD2SIM"
  IBSIM_SOCKNAME="$IBSIM_SOCKNAME" SIM_HOST=node2)
q() {
  (cd "$WORK/cwd" && exec env -i "${QENV[@]}" "$BIN" --config "$WORK/m.yml" "$@")
}
WV=$WORK/watch-verdict.json
OUT=$WORK/watch.out
# Not through q: `q … &` forks a subshell for the function, and `$!` is that subshell, not
# qoslane (the watcher outlived the test, holding the rig lock); the subshell written here execs.
start_watcher() {
  : >"$OUT"
  (cd "$WORK/cwd" && exec env -i "${QENV[@]}" "$BIN" --config "$WORK/m.yml" fabric watch \
    --spool "$SPOOL" --verdict "$WV" --reader in-process --timeout 600) >"$OUT" 2>>"$WORK/watch.err" &
  WATCHER=$!
}
acts() { if [ -s "$OUT" ]; then wc -l <"$OUT"; else echo 0; fi; }
after() { [ "$(acts)" -gt "$1" ]; }
# wait_act N SECONDS: until the watcher acted more than N times; the last act's line
wait_act() {
  poll_for "$2" after "$1" || { say "  no act after $1 within $2 s"; return 1; }
}
last_act() { tail -1 "$OUT"; }
figures() { # figures LABEL: the last act's figures
  last_act | jq -r --arg l "$1" '"measured: \($l): \(.audit) audit\(if .why then " (" + .why + ")" else "" end): \(.switches_named) switches named, \(.nodes_read) nodes re-read; egress ports \(.egress_read) read / \(.egress_checked) checked / \(.egress_kept) kept; forwarding tables \(.forwarding_read) read / \(.forwarding_kept) kept; \(.smps) SMPs; audit \(.audit_ms) ms; SM record -> verdict \(.sm_to_verdict_ms // "-") ms; topology \(.topology_ms // "-") ms, levels judged again on \(.ports_judged // "-") ports in \(.judge_ms // "-") ms, deadlock check \(.deadlock_ms // "-") ms\(if .deadlock_kept then " (kept)" else "" end)"' >&2
}
# lost FILE LEVEL: the node descriptions that lose LEVEL in a verdict file, sorted, one line
lost() { jq -r --arg l "$2" '.levels[] | select(.level == $l) | [.lost[].node] | sort | join(",")' "$1"; }
# is_lost FILE LEVEL WANT: the file exists, names LEVEL, and its losers are exactly WANT
is_lost() {
  [ -s "$1" ] || { say "  $1: no verdict file"; return 1; }
  jq -e --arg l "$2" '.levels | map(.level) | index($l) != null' "$1" >/dev/null ||
    { say "  $1: no level $2"; return 1; }
  local got; got=$(lost "$1" "$2")
  [ "$got" = "$3" ] || { say "  $1: level $2 lost by '$got', not '$3'"; return 1; }
}
# same_as_full: a fresh full audit's verdict equals the watcher's (less who made it and when)
same_as_full() {
  local rc=0
  q fabric audit --reader in-process --format json --timeout 600 --verdict "$WORK/full-verdict.json" \
    >"$WORK/full.json" 2>"$WORK/full.err" || rc=$?
  [ "$rc" -le 1 ] || { say "  fabric audit exit $rc: $(tail -3 "$WORK/full.err")"; return 1; }
  if [ ! -s "$WV" ] || [ ! -s "$WORK/full-verdict.json" ]; then say "  a verdict file is missing"; return 1; fi
  diff <(jq -S 'del(.made, .made_ms, .host)' "$WV") \
    <(jq -S 'del(.made, .made_ms, .host)' "$WORK/full-verdict.json") >"$WORK/diff.txt" ||
    { say "  the verdicts differ: $(head -20 "$WORK/diff.txt")"; return 1; }
}
all6="node1 HCA-1,node2 HCA-1,node3 HCA-1,node4 HCA-1,node5 HCA-1,node6 HCA-1"

# ------------------------------------------------------------------ 0. a full audit at start
start_watcher
check "the watcher's first act is a full audit" wait_act 0 120
figures "start"
check "its verdict is written, naming the mapping's levels" is_lost "$WV" normal ""
check "it equals a fresh full audit's" same_as_full

if [ -n "$TOPO" ]; then
  # ---------------------------------------------------------------- a big tree: the figures
  n=$(acts)
  leaf=$(awk -F'\t' '$2 == "switch" && $1 ~ /^leaf/ { print $1; exit }' "$RIG_NODES")
  port=$(awk -F'\t' -v l="$leaf" '$1 == l && $3 ~ /^spine/ { print $2; exit }' "$RIG_LINKS")
  say "bouncing $leaf port $port"
  "$RIG" bounce "$ENV" "$leaf" "$port" >&2
  check "the bounce's sweeps are seen" wait_act "$n" 120
  poll_for 10 after $((n + 1)) || true
  sed -n "$((n + 1)),\$p" "$OUT" | while read -r line; do
    jq -r '"measured: bounce: \(.audit) audit: \(.switches_named) switches named, \(.nodes_read) nodes re-read; egress ports \(.egress_read) read / \(.egress_checked) checked / \(.egress_kept) kept; forwarding tables \(.forwarding_read) read / \(.forwarding_kept) kept; \(.smps) SMPs; audit \(.audit_ms) ms; SM record -> verdict \(.sm_to_verdict_ms // "-") ms; topology \(.topology_ms // "-") ms, levels judged again on \(.ports_judged // "-") ports in \(.judge_ms // "-") ms, deadlock check \(.deadlock_ms // "-") ms\(if .deadlock_kept then " (kept)" else "" end)"' <<<"$line" >&2
  done
  check "after the bounce, the watcher's verdict equals a fresh full audit's" same_as_full
  say "measured: the full audit beside it: $(jq -r '.report.duration_ms' "$WORK/full.json") ms (sweep)"
  say "smreader: $PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
  exit
fi

# ------------------------------------------------------------------ a. an SM restarted dropping levels
n=$(acts)
swe=$(grep "^qos_swe_sl2vl " "$RIG_WORK/opensm.conf" || echo "qos_swe_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7")
swe=${swe%%$'\n'*}
# SL 3 -> VL 7 and SL 2 -> VL 6 on every switch external port: mission-critical and high leave
# their VLs (3 and 2) everywhere
sed -i -e 's|^qos_swe_sl2vl .*|qos_swe_sl2vl 0,1,6,7,4,5,6,7,0,1,2,3,4,5,6,7|' "$RIG_WORK/opensm.conf"
"$RIG" restart-sm "$ENV" >&2
rig_env
check "a: the restarted SM is seen (START: a full audit)" wait_act "$n" 60
figures "a (SM restarted, qos_swe_sl2vl moving SL 2 and 3)"
check "a: its reason is the SM's start" bash -c "tail -1 '$OUT' | jq -e '.audit == \"full\" and (.why | test(\"START|instance|watcher\"))' >/dev/null"
# the SM's first sweep may come as more than one act: wait until quiet
sleep 2
check "a: every node loses mission-critical (SL 3 on VL 7)" is_lost "$WV" mission-critical "$all6"
check "a: every node loses high (SL 2 on VL 6)" is_lost "$WV" high "$all6"
check "a: every node keeps normal" is_lost "$WV" normal ""
check "a: every node keeps low" is_lost "$WV" low ""
check "a: slurmctld told at once: every node's ActiveFeatures sent without mission-critical's (a fail_job level)" \
  test "$(updates_without mission-critical)" = "node1,node2,node3,node4,node5,node6"
check "a: the watcher's acts say 6 nodes sent, none failed" \
  test "$(jq -s 'map(.placement_sent) | add' "$OUT")/$(jq -s 'map(.placement_failed) | add' "$OUT")" = 6/0
check "a: the watcher's verdict equals a fresh full audit's" same_as_full
n=$(acts)
sed -i -e "s|^qos_swe_sl2vl .*|$swe|" "$RIG_WORK/opensm.conf"
"$RIG" restart-sm "$ENV" >&2
rig_env
check "a: restarted with the rig's options: seen" wait_act "$n" 60
sleep 2
check "a: every node keeps mission-critical again" is_lost "$WV" mission-critical ""
check "a: and high" is_lost "$WV" high ""
check "a: the watcher's verdict equals a fresh full audit's, again" same_as_full

# ------------------------------------------------------------------ b. a link bounce re-sweeps
"$RIG" misalign "$ENV" spine1 2 3 15 >&2
q fabric audit --reader in-process --format json --verdict "$WORK/broken.json" >/dev/null 2>&1 || true
check "b: a full audit after the break: node3 and node4 lose mission-critical" \
  is_lost "$WORK/broken.json" mission-critical "node3 HCA-1,node4 HCA-1"
check "b: the SM was not told: the watcher has not acted" bash -c "sleep 1; [ \"\$(wc -l <'$OUT')\" -eq $(acts) ]"
n=$(acts)
t_b=$(now_ns)
"$RIG" bounce "$ENV" leaf2 3 >&2
check "b: the bounce's re-sweeps are seen" wait_act "$n" 60
poll_for 10 after $((n + 1)) || true
sleep 2
sed -n "$((n + 1)),\$p" "$OUT" >"$WORK/b.acts"
while read -r line; do
  jq -r '"measured: b (bounce leaf2 3): \(.audit) audit\(if .why then " (" + .why + ")" else "" end): \(.switches_named) switches named, \(.nodes_read) nodes re-read (\(.problem_nodes) where the last audit found a problem); egress \(.egress_read) read / \(.egress_checked) checked / \(.egress_kept) kept; LFT \(.forwarding_read) read / \(.forwarding_kept) kept; \(.smps) SMPs; \(.audit_ms) ms; SM record -> verdict \(.sm_to_verdict_ms // "-") ms; topology \(.topology_ms // "-") ms, levels judged again on \(.ports_judged // "-") ports in \(.judge_ms // "-") ms, deadlock check \(.deadlock_ms // "-") ms\(if .deadlock_kept then " (kept)" else "" end)"' <<<"$line" >&2
done <"$WORK/b.acts"
check "b: the re-sweeps were re-audits of what changed, not full audits" \
  bash -c "jq -se 'length > 0 and all(.audit == \"switches\" and .egress_kept > 0)' '$WORK/b.acts' >/dev/null"
check "b: the watcher's verdict equals a fresh full audit's" same_as_full
b_lost=$(lost "$WV" mission-critical)
say "b: after the bounce, mission-critical is lost by '${b_lost}' (the SM rewrote the bounced link's tables: '' when it repaired spine1)"
check "b: the other levels are kept everywhere" bash -c "
  [ -z \"\$(jq -r '.levels[] | select(.level != \"mission-critical\") | .lost[]' '$WV')\" ]"
say "b: SM record -> verdict after the unlink: $(jq -s '.[0].sm_to_verdict_ms // 0 | floor' "$WORK/b.acts") ms (the bounce started $(( ($(now_ns) - t_b) / 1000000 )) ms ago)"
# repaired for c (a fresh SM rewrites every table)
n=$(acts)
"$RIG" restart-sm "$ENV" >&2
rig_env
wait_act "$n" 60 || true
sleep 2

# ------------------------------------------------------------------ c. an LFT change
n=$(acts)
"$RIG" console "$ENV" 'Unlink "leaf1"[3]' >/dev/null
check "c: the reroute after a cut is seen" wait_act "$n" 60
sleep 2
sed -n "$((n + 1)),\$p" "$OUT" >"$WORK/c.acts"
while read -r line; do
  jq -r '"measured: c (leaf1 port 3 cut): \(.audit) audit\(if .why then " (" + .why + ")" else "" end): \(.switches_named) switches named, \(.nodes_read) nodes re-read (\(.problem_nodes) where the last audit found a problem); egress \(.egress_read) read / \(.egress_checked) checked / \(.egress_kept) kept; LFT \(.forwarding_read) read / \(.forwarding_kept) kept; \(.smps) SMPs; \(.audit_ms) ms; SM record -> verdict \(.sm_to_verdict_ms // "-") ms; topology \(.topology_ms // "-") ms, levels judged again on \(.ports_judged // "-") ports in \(.judge_ms // "-") ms, deadlock check \(.deadlock_ms // "-") ms\(if .deadlock_kept then " (kept)" else "" end)"' <<<"$line" >&2
done <"$WORK/c.acts"
check "c: a re-audit of the switches the SM named (LFT_CHANGE)" \
  bash -c "jq -se 'length > 0 and any(.audit == \"switches\" and .switches_named > 0)' '$WORK/c.acts' >/dev/null"
for l in mission-critical high normal low; do
  check "c: every node keeps $l (a link down is routed round)" is_lost "$WV" "$l" ""
done
check "c: the watcher's verdict equals a fresh full audit's" same_as_full
n=$(acts)
"$RIG" console "$ENV" 'ReLink "leaf1"[3]' >/dev/null
check "c: the link back is seen" wait_act "$n" 60
sleep 2
check "c: and the verdict still equals a fresh full audit's" same_as_full

# ------------------------------------------------------------------ the watcher stops cleanly
stop_watcher
check "the watcher said nothing of a failure" bash -c "! grep -qi 'error\|failed' '$WORK/watch.err'"
say "smreader: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
