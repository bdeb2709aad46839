#!/usr/bin/env bash
# admin_story.sh — the admin's day with the package, on the real Slurm 22.05
# rig (as root): the .deb built (and a rebuild as revision 2), lintian and
# man --warnings on it, installed with dpkg; the admin guide's own commands
# (its ```sh admin-story blocks, run as written, so the guide cannot drift
# from the package); slurm.conf pointing at the packaged hookrun; a job of
# each tier, the one whose level falls back to the baseline seeing why in its
# output (the TaskProlog's print line); the audit rotated by the real
# logrotate while jobs' Prologs and Epilogs append (no line lost or written
# twice); an in-place upgrade while a job runs (its Epilog, under the new
# package, releases it); purge, and nothing left. tests/e2e/packages.sh
# covers the package without Slurm in depth (file list, site options,
# remove); this is the story end to end.
#
# This machine has no HCA: after the guide's steps the mapping gets
# `fabric_check: off`; high and mission-critical set a setting of mlx5_0
# that does not exist here, so high (continue) runs on the baseline and
# mission-critical (fail_job) is requeued, not held (a refusal; hookrun on_failure =
# requeue for a broken hook). Everything it changes is put back on exit; the rig is left
# stopped. Bounded polls, no guessed sleeps.
#
#   bash tests/e2e/admin_story.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { say "admin_story.sh needs root (dpkg, slurm.conf)"; exit 1; }
T_START=$(date +%s.%N)
WORK=$(mktemp -d /tmp/qoslane-admin.XXXXXX); chmod 0755 "$WORK"
rig_lock "$RIG_LOCK_WAIT" || { say "another suite holds the Slurm rig lock ($RIG_LOCK)"; exit 1; }
if host_slurmctld && ! [ -s "$RIG_DIR/pids/slurmctld.pid" ]; then
  say "a slurmctld not started from $RIG_DIR is running; not touching it"; exit 1
fi
if dpkg-query -W -f='${Status}' qoslane hookrun 2>/dev/null | grep -q "ok installed"; then
  say "qoslane or hookrun is installed on this machine: not touching it"; exit 1
fi

TEXTFILE=/var/lib/prometheus/node-exporter
STATE_PATHS=(etc/slurm etc/qoslane etc/default/qoslane etc/logrotate.d/qoslane var/lib/qoslane
             run/qoslane var/log/qoslane var/lib/hookrun "${TEXTFILE#/}/qoslane.prom" "${TEXTFILE#/}/hookrun.prom")
pre=()
for p in "${STATE_PATHS[@]}"; do [ -e "/$p" ] && pre+=("$p"); done
tar -C / -cpf "$WORK/pre-state.tar" --files-from /dev/null "${pre[@]}"
MADE_TEXTFILE=0
[ -d "$TEXTFILE" ] || { install -d -m 0755 "$TEXTFILE"; MADE_TEXTFILE=1; }

cleanup() {
  local rc=$?
  set +e
  touch "$WORK/release.all"
  stop_slurm
  # hookrun's removal is refused while slurm.conf runs it; slurm.conf is put back below.
  [ -f /etc/slurm/slurm.conf ] && sed -i '/=\/usr\/sbin\/hookrun$/d' /etc/slurm/slurm.conf
  local pkg
  for pkg in qoslane hookrun; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed\|config-files" && dpkg --purge "$pkg" >/dev/null 2>&1
  done
  for p in "${STATE_PATHS[@]}"; do rm -rf "/${p:?}"; done
  tar -C / -xpf "$WORK/pre-state.tar"
  [ "$MADE_TEXTFILE" = 1 ] && rmdir "$TEXTFILE" 2>/dev/null
  say "machine state restored (${#pre[@]} paths from before), rig stopped"
  if [ "$rc" -ne 0 ] || [ "$E2E_FAILED" -ne 0 ]; then say "kept $WORK for inspection"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
AUDIT=/var/log/qoslane/audit.jsonl
audit_of() { # audit_of JOB EVENT FIELD : FIELD of JOB's last EVENT line
  python3 - "$AUDIT" "$@" <<'PY'
import json, sys
path, job, event, field = sys.argv[1:]
hits = [l for l in map(json.loads, open(path)) if str(l.get("job_id")) == job and l["event"] == event]
print(hits[-1].get(field) if hits else "<none>")
PY
}

# ------------------------------------------------------------ build, lint, install
say "building the .deb, and a local rebuild as revision 2 (packaging/build.sh)"
t=$(date +%s.%N)
bash "$E2E_REPO/packaging/build.sh" --deb --out "$WORK/r1" 2>"$WORK/build1.log" || { cat "$WORK/build1.log" >&2; exit 1; }
bash "$E2E_REPO/packaging/build.sh" --deb --revision 2 --out "$WORK/r2" 2>"$WORK/build2.log" || { cat "$WORK/build2.log" >&2; exit 1; }
say "built in $(secs "$t")s"
DEB1=$(ls "$WORK"/r1/qoslane_*.deb) DEB2=$(ls "$WORK"/r2/qoslane_*.deb)
HDEB1=$(ls "$WORK"/r1/hookrun_*.deb) HDEB2=$(ls "$WORK"/r2/hookrun_*.deb)
VERSION=$(dpkg-deb -f "$DEB1" Version)
V2=${VERSION%-*}-2
check "lintian -I --pedantic: no tag (overrides justified)" bash -c \
  "lintian -I --pedantic --tag-display-limit 0 '$DEB1' '$HDEB1' >'$WORK/lintian.txt' 2>/dev/null; rc=\$?; cat '$WORK/lintian.txt' >&2; [ \$rc = 0 ] && ! grep -q . '$WORK/lintian.txt'"
check "rebuild: version $V2, its changelog entry on top" bash -c \
  "[ \"\$(dpkg-deb -f '$DEB2' Version)\" = '$V2' ] && dpkg-deb --fsys-tarfile '$DEB2' | tar -xO ./usr/share/doc/qoslane/changelog.Debian.gz | gunzip | head -1 | grep -qF '($V2)'"
say "case: dpkg -i"
dpkg -i "$HDEB1" "$DEB1" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log" >&2; exit 1; }
check "installed $VERSION (qoslane and hookrun)" eq "$(dpkg-query -W -f='${Status} ${Version};' qoslane hookrun)" "install ok installed $VERSION;install ok installed $VERSION;"
pages_ok() {
  local p w bad=0
  for p in $(dpkg -L qoslane hookrun | grep -E '^/usr/share/man/man[58]/.+\.gz$'); do
    w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$p" 2>&1 >/dev/null) || { say "  $p: man failed"; bad=1; }
    [ -z "$w" ] || { say "  $p: $w"; bad=1; }
  done
  return $bad
}
check "every installed man page renders with man --warnings, silently" pages_ok

# ------------------------------------------------------------ Slurm on the packaged hookrun
say "starting the Slurm rig with slurm.conf's hooks on /usr/sbin/hookrun"
t=$(date +%s.%N)
RIG_PROLOG=/usr/sbin/hookrun RIG_EPILOG=/usr/sbin/hookrun RIG_TASKPROLOG=/usr/sbin/hookrun \
RIG_TASKEPILOG="" RIG_PROLOGSLURMCTLD="" RIG_EPILOGSLURMCTLD="" RIG_PROLOG_FLAGS=Alloc \
RIG_PROLOG_EPILOG_TIMEOUT=30 RIG_QOS="low:10 normal:100 high:1000 mission-critical:10000" \
RIG_EXTRA_CONF="AuthInfo=cred_expire=10" RIG_FORCE=1 \
  bash "$RIG" start >"$WORK/rig.log" 2>&1 || { tail -20 "$WORK/rig.log" >&2; exit 1; }
NODE=$(cat "$RIG_DIR/nodename")
say "rig up in $(secs "$t")s, node $NODE"

# ------------------------------------------------------------ the admin guide's own commands
say "case: the admin guide's commands (docs/admin-guide.md, sh admin-story blocks)"
awk '/^```sh admin-story$/ {on=1; n++; print "# block " n; next} on && /^```$/ {on=0; next} on' \
  "$E2E_REPO/docs/admin-guide.md" > "$WORK/guide.sh"
check "the guide has admin-story blocks" test "$(grep -c '^# block' "$WORK/guide.sh")" -ge 2
check "the guide's commands run as written" bash -c "cd '$WORK' && bash -euo pipefail '$WORK/guide.sh' >'$WORK/guide.out' 2>&1 || { cat '$WORK/guide.out' >&2; false; }"
check "guide: hookrun list shows qoslane's Prolog hook" grep -qE '10-qoslane +required' "$WORK/guide.out"
sed -i 's/^fabric_check: enforce$/fabric_check: off/' /etc/qoslane/qos-network.yml   # no HCA here
check "the mapping is the example but for fabric_check" eq \
  "$(diff /usr/share/doc/qoslane/examples/qos-network.yml /etc/qoslane/qos-network.yml | grep -c '^[<>]')" 2
printf 'on_failure = requeue\nbudget = 20s\nhook_timeout = 10s\n' > /etc/slurm/hookrun.conf

# ------------------------------------------------------------ a job of each tier
say "case: a job of each tier"
for tier in normal:0 low:1; do
  q=${tier%:*} sl=${tier#*:}
  j=$(submit "$q"); poll 60 "$q job $j running" is_running "$j"
  check "$q job: UCX_IB_SL=$sl, QOSLANE_LEVEL=$q" eq "$(env_of "$j" UCX_IB_SL)/$(env_of "$j" QOSLANE_LEVEL)" "$sl/$q"
  release "$j"; poll 60 "job $j done" is_gone "$j"
  epilog_of() { [ "$(audit_of "$1" epilog job_id)" = "$1" ]; }
  check "$q job: its Epilog audited" poll 20 "epilog of $j" epilog_of "$j"
  check "$q job: its Prolog audited applied" eq "$(audit_of "$j" prolog outcome)" applied
done
j=$(submit high); poll 60 "high job $j running" is_running "$j"
check "high job on the baseline: no SL exported" eq "$(env_of "$j" UCX_IB_SL)" ""
check "high job: its output says why (the TaskProlog's print line)" \
  grep -q '^qoslane: QoS high: level high was not granted' "$WORK/slurm-$j.out"
release "$j"; poll 60 "job $j done" is_gone "$j"
j=$(submit mission-critical)
check "mission-critical (fail_job) cannot be granted here: requeued, pending" poll 60 "job $j requeued" requeued "$j"
check "mission-critical: not held (a refusal is never a hold)" not_held "$(/usr/bin/scontrol show job -o "$j")"
check "mission-critical: the node stays in service (on_failure = requeue)" bash -c "[ \"\$(/usr/bin/sinfo -h -N -n '$NODE' -o %T | head -1)\" != drained ]"
/usr/bin/scancel "$j"; poll 30 "job $j gone" is_gone "$j"

# ------------------------------------------------------------ rotation while jobs run
say "case: logrotate rotates the audit while jobs' Prologs and Epilogs append"
# The installed rule, keeping every rotation the test makes (a node keeps 12).
sed 's/^\( *rotate\) [0-9]*$/\1 1000/' /etc/logrotate.d/qoslane > "$WORK/logrotate.conf"
check "the test's rule is the installed one but for rotate" eq \
  "$(diff /etc/logrotate.d/qoslane "$WORK/logrotate.conf" | grep -c '^[<>]')" 2
touch "$WORK/release.all"
N=32
ids=()
for ((i = 0; i < N; i++)); do ids+=("$(submit normal)"); done
rotations=0
all_gone() { local j; for j in "${ids[@]}"; do is_gone "$j" || return 1; done; }
deadline=$(( $(date +%s) + 180 ))
while ! all_gone && [ "$(date +%s)" -lt "$deadline" ]; do
  /usr/sbin/logrotate -f -s "$WORK/logrotate.state" "$WORK/logrotate.conf" && rotations=$((rotations + 1))
  sleep 0.2
done
check "all $N jobs ran" all_gone
say "$N jobs, $rotations rotations; audit files: $(cd /var/log/qoslane && echo *)"
counts=$({ cat "$AUDIT" /var/log/qoslane/audit.jsonl.1 2>/dev/null; for z in /var/log/qoslane/audit.jsonl.*.gz; do [ -e "$z" ] && zcat "$z"; done; } |
  python3 -c '
import json, sys, collections
want = set(map(int, sys.argv[1:]))
c = collections.Counter()
bad = 0
for line in sys.stdin:
    try: e = json.loads(line)
    except ValueError: bad += 1; continue
    if e.get("job_id") in want and e["event"] in ("prolog", "epilog"): c[(e["job_id"], e["event"])] += 1
print(bad, len(c), sum(1 for v in c.values() if v == 1))' "${ids[@]}")
check "rotated at least 3 times while they ran" test "$rotations" -ge 3
check "no line torn; each job's Prolog and Epilog line there exactly once" eq "$counts" "0 $((2 * N)) $((2 * N))"
check "names: audit.jsonl, audit.jsonl.1, audit.jsonl.N.gz and the appenders' audit.jsonl.lock only" bash -c \
  "! ls /var/log/qoslane | grep -vxE 'audit\.jsonl(\.1|\.[0-9]+\.gz|\.lock)?' | grep -q ."
rm -f "$WORK/release.all"

# ------------------------------------------------------------ upgrade with a job running
say "case: upgrade to $V2 while a job holds its level"
j=$(submit low); poll 60 "low job $j running" is_running "$j"
check "job $j holds its record" test -s "/run/qoslane/jobs/$j.json"
dpkg -i "$HDEB2" "$DEB2" >"$WORK/upgrade.log" 2>&1 || { cat "$WORK/upgrade.log" >&2; exit 1; }
check "upgraded in place to $V2" eq "$(dpkg-query -W -f='${Version} ' qoslane hookrun)" "$V2 $V2 "
check "upgrade: the job's record, the state and the metrics stay" \
  test -s "/run/qoslane/jobs/$j.json" -a -d /var/lib/qoslane -a -s "$TEXTFILE/qoslane.prom"
release "$j"; poll 60 "job $j done" is_gone "$j"
released() { [ ! -e "/run/qoslane/jobs/$j.json" ] && [ "$(audit_of "$j" epilog job_id)" = "$j" ]; }
check "job $j's Epilog, under the new package, released it" poll 30 "epilog of $j" released

# ------------------------------------------------------------ purge
say "case: purge leaves nothing behind but the audit history, and says so"
stop_slurm
audit_bytes=$(cat /var/log/qoslane/audit.jsonl* 2>/dev/null | wc -c)
dpkg --purge qoslane >"$WORK/purge.log" 2>&1 || { cat "$WORK/purge.log" >&2; exit 1; }
check "purge: the audit history is kept, whole" eq "$(cat /var/log/qoslane/audit.jsonl* 2>/dev/null | wc -c)" "$audit_bytes"
check "purge: ... and purge says where and how to delete it" \
  grep -q 'audit history is kept in /var/log/qoslane (rm -r /var/log/qoslane deletes it)' "$WORK/purge.log"
rm -r /var/log/qoslane
left=$(ls -d /var/lib/qoslane /run/qoslane /var/log/qoslane /etc/default/qoslane \
  /etc/logrotate.d/qoslane /usr/share/doc/qoslane /usr/share/qoslane /usr/lib/qoslane /usr/sbin/qoslane \
  "$TEXTFILE/qoslane.prom" 2>/dev/null || true)
check "purge: no file, state or metric of qoslane left" eq "$left" ""
# Purged, dpkg may still know the name (hookrun Replaces: qoslane << 0.2.0~): "unknown ok not-installed"
purged() { case "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" in "" | *" not-installed") return 0 ;; *) return 1 ;; esac; }
check "purge: dpkg has no qoslane" purged qoslane
check "purge: hookrun, which slurm.conf runs, stays installed" eq "$(dpkg-query -W -f='${Status}' hookrun)" "install ok installed"
set +e; dpkg --remove hookrun >"$WORK/remove-hookrun.log" 2>&1; hrc=$?; set -e
check "removing hookrun is refused while slurm.conf runs it, naming the line (exit $hrc)" bash -c \
  "[ $hrc != 0 ] && grep -Eq '^  /etc/slurm/slurm.conf:[0-9]+: Prolog=/usr/sbin/hookrun\$' '$WORK/remove-hookrun.log' &&
   dpkg-query -W -f='\${Status}' hookrun | grep -q 'ok installed'"
check "purge: the links the guide made now point nowhere (hookrun skips them)" bash -c \
  "[ -L /etc/slurm/prolog.d/10-qoslane ] && [ ! -e /etc/slurm/prolog.d/10-qoslane ]"

say "admin story: $E2E_PASSED passed, $E2E_FAILED failed, $(secs "$T_START")s"
[ "$E2E_FAILED" = 0 ]
