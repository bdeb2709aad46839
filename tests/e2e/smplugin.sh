#!/usr/bin/env bash
# smplugin.sh — qoslane's OpenSM event plugin (smplugin/, libqoslane_sm.so) on the
# multi-switch rig's real OpenSM (rigs/fabric_path_rig.sh: ibsim, 5 switches, 6 HCAs):
#   1. the SM's first sweep is in the spool (START, HEAVY_SWEEP_DONE, UCAST_ROUTING_DONE,
#      SUBNET_UP) and how long after the SM's own "SUBNET UP" log line the record was written;
#   2. a reader takes the file (rename): the plugin starts a new one; a link bounce is seen
#      (TRAP, a re-sweep, LFT_CHANGE naming switches of the rig), how long after the unlink;
#   3. a SIGHUP re-sweep (the rig's reconf) is seen;
#   4. an SM restarted with a level dropped and a tiny spool: STOP of the old SM, START of the new
#      one (a reader audits everything), the spool fills: exactly one OVERFLOW marker, the file
#      stays within its cap, and the SM goes on sweeping (its log, smpquery answers); once the
#      reader takes the full file, the drops show in the next records;
#   5. a reader killed mid-loop, then the spool directory removed under the SM: it sweeps on
#      and the plugin makes the directory again for its next records;
#      a plugin built against another OpenSM version, or given a bad option, is not loaded and
#      the SM runs without it;
#   6. the plugin's core under ASan/UBSan with random events from 4 threads and a hostile reader
#      (smplugin/tests/fuzz.c), and its cost per event (smplugin/tests/bench.c).
# Needs gcc, make, libopensm-dev, libibumad-dev and the rig's packages (scripts/install-deps.sh);
# skipped when absent unless QOSLANE_REQUIRE_TOOLS=1. About 30 s.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
RIG=$REPO/rigs/fabric_path_rig.sh

say() { printf '[smplugin %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
FAILED=0 PASSED=0
check() {
  local desc=$1; shift
  if "$@"; then say "ok: $desc"; PASSED=$((PASSED + 1)); else say "FAIL: $desc"; FAILED=$((FAILED + 1)); fi
}

missing=()
for t in gcc make opensm ibsim smpquery; do command -v "$t" >/dev/null || missing+=("$t"); done
for h in /usr/include/infiniband/opensm/osm_event_plugin.h /usr/include/infiniband/umad.h; do
  [ -e "$h" ] || missing+=("$h")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "missing: ${missing[*]} (scripts/install-deps.sh)"
  [ "${QOSLANE_REQUIRE_TOOLS:-0}" = 1 ] && exit 1
  say "skipped"; exit 0
fi

base=/tmp; [ -w /dev/shm ] && base=/dev/shm
WORK=$(mktemp -d "$base/qoslane-smplugin.XXXXXX")
SPOOL=$WORK/spool
ENV=""
cleanup() {
  [ -z "$ENV" ] || "$RIG" stop "$ENV" >/dev/null 2>&1 || true
  if [ "$FAILED" -ne 0 ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

say "building the plugin, qsm-dump, the fuzz harness and the bench"
make -s -C "$REPO/smplugin" O="$WORK/build" all "$WORK/build/fuzz" "$WORK/build/bench" \
  "$WORK/build/mismatch/libqoslane_sm.so" >&2
DUMP=$WORK/build/qsm-dump
# OpenSM dlopens "libqoslane_sm.so": from the library path (installed: the system's)
export LD_LIBRARY_PATH=$WORK/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# records: every record of every file in the spool, oldest first, as
# "time_ns kind seq instance guid block dropped"
records() {
  local f
  for f in "$SPOOL"/*; do
    [ -f "$f" ] && "$DUMP" "$f"
  done | awk '$1 ~ /^seq=/ {
      for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      print v["time_ns"], v["kind"], v["seq"], v["instance"], v["guid"], v["block"], v["dropped"] }' |
    sort -n
}
# since T_NS KIND: the records of KIND written after T_NS
since() { records | awk -v t="$1" -v k="$2" '$1 > t && $2 == k'; }
has() { [ -n "$(since "$1" "$2")" ]; }
first_ms_after() { # first_ms_after T_NS KIND: ms from T_NS to the first KIND record after it
  since "$1" "$2" | awk -v t="$1" 'NR == 1 { printf "%.1f", ($1 - t) / 1e6 }'
}
now_ns() { date +%s%N; }
ups() { grep -c "SUBNET UP" "$RIG_WORK/opensm.log" 2>/dev/null || echo 0; }
# poll_for SECONDS CMD...: until CMD succeeds, at most SECONDS
poll_for() {
  local end=$(( $(now_ns) + $1 * 1000000000 )); shift
  until "$@"; do [ "$(now_ns)" -lt "$end" ] || return 1; sleep 0.05; done
}
rig_env() { # the rig's env file, read again (restart-sm rewrites it)
  # shellcheck disable=SC1090  # written by the rig
  . "$ENV"
}

# ------------------------------------------------------------------ 1. the first sweep
t0=$(now_ns)
ENV=$("$RIG" start -o event_plugin_name=qoslane_sm -o "event_plugin_options=qoslane_spool=$SPOOL")
rig_env
check "OpenSM loaded the plugin (its log says where it spools)" \
  grep -q "qoslane_sm: spooling to $SPOOL/events" "$RIG_WORK/opensm.log"
for k in START HEAVY_SWEEP_START HEAVY_SWEEP_DONE UCAST_ROUTING_DONE SUBNET_UP; do
  check "the first sweep's $k is in the spool" poll_for 5 has "$t0" "$k"
done
# the SM's own "SUBNET UP" line (local time, microseconds) against the record's time
log_ns=$(grep "SUBNET UP" "$RIG_WORK/opensm.log" | tail -1 |
  awk '{ printf "%s %s %s %s\n", $1, $2, $3, $4 }' | { read -r mon day hms us; echo "$(date -d "$mon $day $hms" +%s)$(printf '%06d' "$((10#$us))")000"; })
rec_ns=$(since "$t0" SUBNET_UP | tail -1 | awk '{print $1}')
lat_up=$(awk -v a="$rec_ns" -v b="$log_ns" 'BEGIN { printf "%.2f", (a - b) / 1e6 }')
say "measured: the SM's SUBNET UP log line -> its record: $lat_up ms"
check "the SUBNET_UP record was written within 1 s of the SM's log line ($lat_up ms)" \
  awk -v d="$lat_up" 'BEGIN { exit !(d >= -1 && d < 1000) }'

# ------------------------------------------------------------------ 2. a link bounce
mv "$SPOOL/events" "$SPOOL/taken.1"   # the reader takes the file
switches=$(awk -F'\t' '$2 == "switch" { print $4 }' "$RIG_NODES")
t1=$(now_ns)
"$RIG" bounce "$ENV" leaf1 3 >&2
check "after the reader took the file, the plugin started a new one" test -f "$SPOOL/events"
check "the bounce's trap is in the new file" poll_for 5 grep -q 'kind=TRAP' <("$DUMP" "$SPOOL/events")
for k in TRAP HEAVY_SWEEP_START HEAVY_SWEEP_DONE LFT_CHANGE UCAST_ROUTING_DONE SUBNET_UP; do
  check "the bounce's $k is in the spool" poll_for 5 has "$t1" "$k"
done
lft_guids=$(since "$t1" LFT_CHANGE | awk '{print $5}' | sort -u)
named_switch() { # every LFT_CHANGE names a switch of the rig
  local g
  [ -n "$lft_guids" ] || return 1
  for g in $lft_guids; do grep -qix "$g" <<<"$switches" || { say "  $g is no switch of the rig"; return 1; }; done
}
check "every LFT_CHANGE names a switch of the rig ($(wc -w <<<"$lft_guids") switches)" named_switch
say "measured: unlink -> TRAP record $(first_ms_after "$t1" TRAP) ms, -> first LFT_CHANGE record $(first_ms_after "$t1" LFT_CHANGE) ms, -> SUBNET_UP record $(first_ms_after "$t1" SUBNET_UP) ms (the rig's bounce includes its own waits)"

# ------------------------------------------------------------------ 3. a SIGHUP re-sweep
t2=$(now_ns)
"$RIG" reconf "$ENV" qos_swe_vlarb_low 0:64,1:64,2:64,3:64,4:64,5:64,6:64,7:32 >&2
check "a SIGHUP re-sweep's HEAVY_SWEEP_DONE is in the spool" poll_for 5 has "$t2" HEAVY_SWEEP_DONE
check "and its SUBNET_UP" poll_for 5 has "$t2" SUBNET_UP

# ------------------------------------------------------------------ 4. restart, a level dropped, a full spool
old_instance=$(since "$t0" START | head -1 | awk '{print $4}')
cap=512   # 8 records: the new SM's first sweep fills it
sed -i -e "s|^event_plugin_options .*|event_plugin_options qoslane_spool=$SPOOL,qoslane_spool_max=$cap|" \
  -e 's|^qos_swe_sl2vl .*|qos_swe_sl2vl 0,1,2,3,4,5,6,0,0,1,2,3,4,5,6,0|' "$RIG_WORK/opensm.conf"
rm -f "$SPOOL"/taken.*; mv "$SPOOL/events" "$SPOOL/taken.2"
t3=$(now_ns)
"$RIG" restart-sm "$ENV" >&2
rig_env
stopped() { since "$t3" STOP | awk -v i="$old_instance" '$4 == i' | grep -q .; }
check "the old SM's plugin wrote STOP on its way out" stopped
new_instance() { since "$t3" START | awk -v i="$old_instance" '$4 != i' | grep -q .; }
check "the new SM's plugin wrote START (a reader audits everything)" poll_for 5 new_instance
n_up=$(ups)
"$RIG" bounce "$ENV" leaf2 3 >&2
"$RIG" bounce "$ENV" leaf3 4 >&2
size=$(stat -c %s "$SPOOL/events")
check "the full spool file stays within its cap ($size <= $cap bytes)" test "$size" -le "$cap"
check "exactly one OVERFLOW marker in it" test "$("$DUMP" "$SPOOL/events" | grep -c 'kind=OVERFLOW')" = 1
check "the SM swept on with a full spool (SUBNET UP $n_up -> $(ups))" test "$(ups)" -gt "$n_up"
answers() {
  "$RIG" sim "$ENV" node3 smpquery nodeinfo "$("$RIG" lid "$ENV" spine2)" | grep -q '^NodeType:.*Switch'
}
check "smpquery answers with a full spool" answers
mv "$SPOOL/events" "$SPOOL/taken.3"   # the reader catches up
t4=$(now_ns)
"$RIG" bounce "$ENV" leaf1 4 >&2
drops_shown() { records | awk -v t="$t4" '$1 > t && $2 != "OVERFLOW" && $7 > 0' | grep -q .; }
check "once the reader took the full file, the next records count the drops" poll_for 5 drops_shown

# ------------------------------------------------------------------ 5. a killed reader, a spool gone
(while :; do mv "$SPOOL/events" "$SPOOL/taken.loop" 2>/dev/null || true; sleep 0.02; done) &
reader=$!
sleep 0.3
kill -KILL "$reader"; wait "$reader" 2>/dev/null || true
n_up=$(ups)
"$RIG" bounce "$ENV" leaf2 4 >&2
check "a killed reader: the SM sweeps on (SUBNET UP $n_up -> $(ups))" test "$(ups)" -gt "$n_up"
rm -rf "$SPOOL"
n_up=$(ups)
t5=$(now_ns)
"$RIG" bounce "$ENV" leaf3 3 >&2
check "the spool directory removed: the SM sweeps on (SUBNET UP $n_up -> $(ups))" test "$(ups)" -gt "$n_up"
# (the small cap of step 4 holds: the bounce's first records, then one OVERFLOW)
bounce_in_new_spool() { [ -d "$SPOOL" ] && since "$t5" TRAP | grep -q .; }
check "the spool directory removed: the plugin made it again, the bounce's records in it" \
  poll_for 5 bounce_in_new_spool
check "smpquery answers with the spool gone" answers
check "OpenSM logged no plugin error" bash -c "! grep -qi 'ERR 1000\|qoslane_sm:.*\(error\|fail\)' '$RIG_WORK'/opensm.log*"
RIG_KEEP_WORKDIR=1 "$RIG" stop "$ENV" >&2; ENV=""
check "the plugin said its counts when the SM stopped" grep -q 'qoslane_sm: stopped: .* events dropped' "$RIG_WORK/opensm.log"
case $RIG_WORK in */fabric-path-rig.*) rm -rf "$RIG_WORK" ;; esac
rm -rf "$SPOOL"   # its STOP record made it again

# ------------------------------------------------------------------ 5b. built against another OpenSM
# OpenSM compares the plugin's osm_version with its own: another is skipped, the SM runs without it
mkdir -p "$SPOOL"
ENV=$(LD_LIBRARY_PATH=$WORK/build/mismatch "$RIG" start -o event_plugin_name=qoslane_sm \
  -o "event_plugin_options=qoslane_spool=$SPOOL")
rig_env
check "a plugin built against another OpenSM: OpenSM says so and skips it" \
  grep -q "OpenSM version mismatch - plugin was built against OpenSM 0.0.0" "$RIG_WORK/opensm.log"
check "and runs without it (SUBNET UP, nothing spooled)" \
  bash -c "grep -q 'SUBNET UP' '$RIG_WORK/opensm.log' && [ ! -e '$SPOOL/events' ]"
check "smpquery answers" answers
"$RIG" stop "$ENV" >&2; ENV=""

# ------------------------------------------------------------------ 5c. a plugin that cannot start
ENV=$("$RIG" start -o event_plugin_name=qoslane_sm -o event_plugin_options=qoslane_spool=relative/dir)
rig_env
check "a bad option: the plugin says why, OpenSM does not load it" \
  bash -c "grep -q 'qoslane_sm: qoslane_spool: not an absolute path' '$RIG_WORK/opensm.log' &&
    grep -q \"ERR 1000: cannot load plugin 'qoslane_sm'\" '$RIG_WORK/opensm.log'"
check "and the SM runs without it (SUBNET UP)" grep -q 'SUBNET UP' "$RIG_WORK/opensm.log"
"$RIG" stop "$ENV" >&2; ENV=""

# ------------------------------------------------------------------ 6. fuzz and cost
check "the plugin's core under ASan/UBSan, random events, a hostile reader" \
  env TMPDIR="$WORK" "$WORK/build/fuzz" 20000
bench=$(TMPDIR="$WORK" "$WORK/build/bench" 100000)
say "measured: $bench"

say "smplugin: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
