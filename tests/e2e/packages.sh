#!/usr/bin/env bash
# packages.sh — the packages as an admin gets them (as root): hookrun and qoslane, built by
# packaging/build.sh; their file lists (docs without the engineering records, alert rules,
# dashboard, man8 pages and qoslane-mapping(5), logrotate rule, changelog, the conffiles; hookrun
# in its own package, qoslane depending on the hookrun of its version); lintian clean (-I
# --pedantic, overrides justified in the packages); the .rpms rpmlint clean
# (packaging/rpm/rpmlint.toml); systemd units shipped disabled and accepted by systemd-analyze
# verify; --version naming the build; every man page rendered by `man --warnings` without a
# warning. On this machine, installed with dpkg: /etc/default/qoslane honoured by the hooks when
# root's and refused (the hook fails, qoslane never runs) when group-writable; the shipped
# logrotate rule run by the real logrotate while real qoslane runs append to the audit log (no
# line lost or doubled); `dpkg --remove qoslane` drops its .prom textfile and leaves hookrun;
# `dpkg --purge` leaves nothing (files, state, metrics) but the audit history, and says so.
# The OpenSM plugin's package (qoslane-opensm-plugin, smplugin/): its files, its Depends pinned to
# the upstream OpenSM it was built against (read here from the installed opensm), the ldconfig
# trigger, no maintainer script (it never edits opensm.conf); apt keeps a newer OpenSM back
# (simulated: apt-get -s against a local repository holding one); installed on this machine, the
# multi-switch rig's real OpenSM loads it through the linker's path (event_plugin_name
# qoslane_sm, no LD_LIBRARY_PATH), its log names the build and the spool gets the first sweep's
# records; the next revision installed under the running OpenSM, which sweeps on, and loaded by
# the restarted one; purged, nothing left (always: the EXIT trap). OpenSM skipping a build of
# another version is tests/e2e/smplugin.sh's.
# Then on a real Slurm node (tests/e2e/packages_node.sh, the newest chroot rig): upgrade, remove
# and purge (.deb, dpkg) and upgrade and erase (.rpm, the host's rpm --root the chroot) with jobs
# running; hookrun's removal refused while slurm.conf runs it.
#
# The host part holds the host's Slurm rig lock because tests/e2e/omnia.sh installs the same
# packages into the same dpkg database; the node part the chroot's. A machine where qoslane or
# hookrun is installed already is refused, not overwritten; the state paths are put back on exit.
#
#   bash tests/e2e/packages.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { say "packages.sh needs root (dpkg -i)"; exit 1; }
T_START=$(date +%s.%N)
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
for tool in lintian rpmlint rpmbuild logrotate man dpkg-deb; do
  command -v "$tool" >/dev/null || { say "$tool missing (scripts/install-deps.sh)"; exit 1; }
done
rig_lock "$RIG_LOCK_WAIT" || { say "another suite holds the rig lock ($RIG_LOCK)"; exit 1; }
PLUGIN=qoslane-opensm-plugin
for pkg in qoslane hookrun "$PLUGIN"; do
  if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
    say "$pkg is installed on this machine; not replacing it"; exit 1
  fi
done

PW=$(mktemp -d /tmp/qoslane-packages.XXXXXX)
PROM=/var/lib/prometheus/node-exporter
STATE_PATHS=(etc/qoslane etc/default/qoslane etc/logrotate.d/qoslane var/lib/qoslane
             run/qoslane var/log/qoslane var/lib/hookrun
             "${PROM#/}/qoslane.prom" "${PROM#/}/hookrun.prom")
pre=()
for p in "${STATE_PATHS[@]}"; do if [ -e "/$p" ]; then pre+=("$p"); fi; done
tar -C / -cpf "$PW/pre-state.tar" --files-from /dev/null "${pre[@]}"
# Out of the way while the package is installed (put back on exit): a file left by an earlier
# install, such as /etc/default/qoslane, would make dpkg ask about a conffile and fail.
for p in "${pre[@]}"; do rm -rf "/${p:?}"; done
PROM_DIR_BEFORE=$([ -d "$PROM" ] && echo 1 || echo 0)
# The Slurm node's part (packages_node.sh) puts its own cleanup here.
# shellcheck disable=SC2317  # called by cleanup (the EXIT trap)
chroot_cleanup() { :; }
SM_ENV=""   # the fabric rig of the plugin's part, stopped on exit
cleanup() {
  local rc=$?
  set +e
  local pkg
  [ -z "$SM_ENV" ] || "$E2E_REPO/rigs/fabric_path_rig.sh" stop "$SM_ENV" >/dev/null 2>&1
  for pkg in qoslane hookrun "$PLUGIN"; do
    if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed\|config-files"; then
      dpkg --purge "$pkg" >/dev/null 2>&1
    fi
  done
  chroot_cleanup
  for p in "${STATE_PATHS[@]}"; do rm -rf "/${p:?}"; done
  tar -C / -xpf "$PW/pre-state.tar"
  if [ "$PROM_DIR_BEFORE" = 0 ]; then rmdir "$PROM" 2>/dev/null; fi
  if [ "$rc" -ne 0 ] || [ "$E2E_FAILED" -ne 0 ]; then say "kept $PW"; else rm -rf "$PW"; fi
}
trap cleanup EXIT

# ------------------------------------------------------------ build and contents
t=$(date +%s.%N)
bash "$E2E_REPO/packaging/build.sh" --deb --out "$PW/out" 2>"$PW/build.log" ||
  { cat "$PW/build.log" >&2; exit 1; }
DEB=$(ls "$PW"/out/qoslane_*.deb)
HDEB=$(ls "$PW"/out/hookrun_*.deb)
PDEB=$(ls "$PW"/out/${PLUGIN}_*.deb)
say "built $(basename "$DEB"), $(basename "$HDEB") and $(basename "$PDEB") in $(secs "$t")s"
files=$(dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}')
hfiles=$(dpkg-deb -c "$HDEB" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}')
has() { grep -qx -- "$1" <<<"$files" || { say "  not in the package: $1"; return 1; }; }
has_all() { local f; for f in "$@"; do has "$f" || return 1; done; }
check "deb: the docs, compressed (policy 12.3)" has_all /usr/share/doc/qoslane/{admin-guide,fabric,hookrun,metrics,omnia}.md.gz
check "deb: systemd units (metrics server, fabric-audit service and timer, fabric-watch service)" has_all \
  /usr/lib/systemd/system/{qoslane-metrics.service,qoslane-fabric-audit.service,qoslane-fabric-audit.timer,qoslane-fabric-watch.service}
check "deb: Recommends what fabric_check and the audit log's rotation need" bash -c \
  "dpkg-deb -f '$DEB' Recommends | grep -q 'infiniband-diags' && dpkg-deb -f '$DEB' Recommends | grep -q logrotate"
check "deb: alert rules, scrape config and dashboard" has_all /usr/share/qoslane/prometheus/qoslane-alerts.yml \
  /usr/share/qoslane/prometheus/scrape-qoslane.yml /usr/share/qoslane/grafana/grafana-qoslane.json
no_man1() { ! grep -q /man1/ <<<"$files"; }
check "deb: man pages in section 8, the mapping in 5" has_all /usr/share/man/man8/{qoslane,qoslane-validate}.8.gz \
  /usr/share/man/man5/qoslane-mapping.5.gz
check "deb: engineering records are not shipped (PERFORMANCE.md, RELIABILITY.md)" bash -c \
  "! grep -qE '/(PERFORMANCE|RELIABILITY)\.md' <<<'$files'"
# hookrun, the framework slurm.conf names, is a package of its own: removing qoslane leaves it.
# shellcheck disable=SC2016  # the script's own arguments
check "hookrun package: hookrun, its man pages, completions and removal check; none of them in qoslane's" bash -c '
  for f in /usr/sbin/hookrun /usr/share/man/man8/hookrun.8.gz /usr/share/man/man5/hookrun.conf.5.gz \
           /usr/share/bash-completion/completions/hookrun /usr/lib/hookrun/remove \
           /usr/share/doc/hookrun/copyright /usr/share/doc/hookrun/changelog.Debian.gz; do
    grep -qx -- "$f" <<<"$1" || { echo "  not in hookrun: $f" >&2; exit 1; }
  done
  ! grep -q hookrun <<<"$(grep -vE "^/usr/(share/doc/qoslane/hookrun\.md\.gz|lib/qoslane/hookrun)$" <<<"$2")"' _ "$hfiles" "$files"
check "deb: qoslane's entry for slurm.conf, /usr/lib/qoslane/hookrun, is qoslane under hookrun's name" has_all /usr/lib/qoslane/hookrun
check "deb: qoslane depends on the hookrun of its own version" bash -c \
  "dpkg-deb -f '$DEB' Depends | grep -q 'hookrun (= $(dpkg-deb -f "$DEB" Version))' && [ \"\$(dpkg-deb -f '$HDEB' Version)\" = \"\$(dpkg-deb -f '$DEB' Version)\" ]"
check "deb: no man page in section 1" no_man1
# The single-package qoslane of the first builds held /usr/sbin/hookrun: hookrun takes it over.
# No Breaks: dpkg -i would then deconfigure the installed qoslane (see packaging/build.sh).
check "deb: hookrun Replaces the qoslane before 0.2.0 (its /usr/sbin/hookrun), and Breaks nothing" eq \
  "$(dpkg-deb -f "$HDEB" Replaces):$(dpkg-deb -f "$HDEB" Breaks)" "qoslane (<< 0.2.0~):"
# Every release of CHANGELOG.md, newest first, is an entry of the package's changelog.
releases=$(sed -n 's/^## \([0-9][^ ]*\) .*/\1-1/p' "$E2E_REPO/CHANGELOG.md" | tr '\n' ' ')
check "deb: the changelog is CHANGELOG.md's, a release an entry ($releases)" eq \
  "$(dpkg-deb --fsys-tarfile "$DEB" | tar -xOf - ./usr/share/doc/qoslane/changelog.Debian.gz | gzip -d |
     dpkg-parsechangelog -l - --format rfc822 --all | sed -n 's/^Version: //p' | tr '\n' ' ')" "$releases"
check "deb: changelog, copyright, lintian overrides" has_all /usr/share/doc/qoslane/changelog.Debian.gz \
  /usr/share/doc/qoslane/copyright /usr/share/lintian/overrides/qoslane
check "deb: conffiles are /etc/default/qoslane and the logrotate rule" eq \
  "$(dpkg-deb --ctrl-tarfile "$DEB" | tar -xOf - ./conffiles | sort)" \
  "$(printf '%s\n' /etc/default/qoslane /etc/logrotate.d/qoslane)"
 check "deb: maintainer scripts are POSIX sh with set -e" bash -c "
  for d in '$DEB' '$HDEB'; do for s in prerm postrm; do
    dpkg-deb --ctrl-tarfile \"\$d\" | tar -xOf - ./\$s | head -1 | grep -qx '#!/bin/sh' &&
    dpkg-deb --ctrl-tarfile \"\$d\" | tar -xOf - ./\$s | grep -qx 'set -e' || exit 1
  done; done"

lintian -I --pedantic "$DEB" "$HDEB" "$PDEB" >"$PW/lintian.txt" 2>"$PW/lintian.err"; lrc=$?
check "lintian -I --pedantic: no tag left (exit $lrc)" bash -c "[ $lrc = 0 ] && ! [ -s '$PW/lintian.txt' ] || { cat '$PW/lintian.txt' >&2; false; }"

# The .rpm of the same tree: rpmlint with the distribution settings and the
# narrow filters of packaging/rpm/rpmlint.toml, each with its reason.
bash "$E2E_REPO/packaging/build.sh" --rpm --out "$PW/out" 2>>"$PW/build.log" ||
  { cat "$PW/build.log" >&2; exit 1; }
RPM=$(ls "$PW"/out/qoslane-[0-9]*.rpm)
HRPM=$(ls "$PW"/out/hookrun-*.rpm)
PRPM=$(ls "$PW"/out/$PLUGIN-[0-9]*.rpm)
rpmlint -c "$E2E_REPO/packaging/rpm/rpmlint.toml" "$RPM" "$HRPM" "$PRPM" >"$PW/rpmlint.txt" 2>&1; rrc=$?
check "rpmlint: no error or warning left (exit $rrc)" bash -c \
  "[ $rrc = 0 ] && grep -q ' 0 errors, 0 warnings' '$PW/rpmlint.txt' || { cat '$PW/rpmlint.txt' >&2; false; }"
check "rpm: Recommends infiniband-diags and logrotate" bash -c \
  "rpm -qp --recommends '$RPM' 2>/dev/null | grep -qx infiniband-diags && rpm -qp --recommends '$RPM' 2>/dev/null | grep -qx logrotate"
check "rpm: its %changelog is the package's" bash -c "rpm -qp --changelog '$RPM' 2>/dev/null | grep -q -- '- $(dpkg-deb -f "$DEB" Version | sed 's/[.]/[.]/g')\$'"
check "rpm: %changelog has every release, newest first ($releases)" eq \
  "$(rpm -qp --changelog "$RPM" 2>/dev/null | sed -n 's/^\* .* - //p' | tr '\n' ' ')" "$releases"
check "rpm: hookrun conflicts with the qoslane before 0.2.0 (whose /usr/sbin/hookrun it takes)" eq \
  "$(rpm -qp --conflicts "$HRPM" 2>/dev/null)" "qoslane < 0.2.0~"
check "rpm: the site options are /etc/sysconfig/qoslane, a noreplace conffile" bash -c \
  "rpm -qp --configfiles '$RPM' 2>/dev/null | grep -qx /etc/sysconfig/qoslane && ! rpm -qpl '$RPM' 2>/dev/null | grep -q /etc/default/"
# Every unit of packaging/systemd/, whatever their number.
check "rpm: the systemd units (those of packaging/systemd/)" eq \
  "$(rpm -qpl "$RPM" 2>/dev/null | grep '^/usr/lib/systemd/system/' | sort)" \
  "$(find "$E2E_REPO/packaging/systemd" -type f -printf '/usr/lib/systemd/system/%f\n' | sort)"
check "rpm: hookrun its own package, required by qoslane at its own version-release" bash -c \
  "rpm -qpl '$HRPM' 2>/dev/null | grep -qx /usr/sbin/hookrun && ! rpm -qpl '$RPM' 2>/dev/null | grep -q /usr/sbin/hookrun &&
   rpm -qp --requires '$RPM' 2>/dev/null | grep -qx \"hookrun = \$(rpm -qp --qf '%{VERSION}-%{RELEASE}' '$HRPM' 2>/dev/null)\""

mkdir -p "$PW/x"; dpkg-deb -x "$DEB" "$PW/x"; dpkg-deb -x "$HDEB" "$PW/x"
man_clean() {
  local page out bad=0
  for page in "$PW"/x/usr/share/man/man*/*.gz; do
    out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    if [ -n "$out" ]; then say "  $(basename "$page"): $out"; bad=1; fi
  done
  return $bad
}
check "man --warnings: every page ($(find "$PW"/x/usr/share/man -name '*.gz' | wc -l)) renders clean" man_clean

# ------------------------------------------------------------ installed
check "dpkg -i (hookrun and qoslane)" bash -c "dpkg -i '$HDEB' '$DEB' >'$PW/dpkg-i.log' 2>&1 || { cat '$PW/dpkg-i.log' >&2; false; }"
check "--help points to the installed guide, which is there" bash -c \
  "/usr/sbin/qoslane --help | tr '\\n' ' ' | grep -q 'admin guide in /usr/share/doc/qoslane/' && zcat /usr/share/doc/qoslane/admin-guide.md.gz | grep -q '^# '"
# The build's name: the package's version and revision and the commit (two revisions differ).
ver=$(dpkg-deb -f "$DEB" Version)
names_build() { grep -Eqx "$(basename "$1") ${ver//./[.]} \(git [0-9a-f]{12}(\+dirty)?\)" <<<"$("$1" --version)"; }
check "--version names the build: $(/usr/sbin/qoslane --version)" names_build /usr/sbin/qoslane
check "hookrun --version too" names_build /usr/sbin/hookrun
check "systemd-analyze verify accepts the units" bash -c \
  "systemd-analyze verify /usr/lib/systemd/system/qoslane-metrics.service /usr/lib/systemd/system/qoslane-fabric-audit.service /usr/lib/systemd/system/qoslane-fabric-audit.timer /usr/lib/systemd/system/qoslane-fabric-watch.service 2>'$PW/verify.err' && ! grep -i qoslane '$PW/verify.err' || { cat '$PW/verify.err' >&2; false; }"
check "the units are installed disabled (no wants/ link)" bash -c \
  "! ls /etc/systemd/system/*.wants/qoslane-* >/dev/null 2>&1"
check "man finds qoslane(8) and qoslane-mapping(5)" bash -c \
  "man -w 8 qoslane | grep -q man8/qoslane.8 && man -w 5 qoslane-mapping | grep -q man5/qoslane-mapping.5"

# hookrun's removal check on the shapes slurm.conf takes: an Include (relative, a glob), keys
# in any case with spaces around =, comments; a commented line, another program and a longer
# name do not count.
SC=$PW/slurmconf; mkdir -p "$SC/inc"
printf '%s\n' ClusterName=x '#Prolog=/usr/sbin/hookrun' TaskProlog=/usr/local/bin/other 'include inc/*.conf' >"$SC/slurm.conf"
printf '%s\n' PrologFlags=Alloc 'prolog = /usr/sbin/hookrun # the framework' Epilog=/usr/sbin/hookrun2 >"$SC/inc/hooks.conf"
set +e; SLURM_CONF=$SC/slurm.conf /usr/lib/hookrun/remove check 2>"$PW/check.err"; crc=$?; set -e
check "hookrun's removal check: refuses (exit $crc) naming exactly the included line" bash -c \
  "[ $crc = 1 ] && [ \"\$(grep '^  ' '$PW/check.err')\" = '  $SC/inc/hooks.conf:2: prolog = /usr/sbin/hookrun # the framework' ]"
sed -i '2d' "$SC/inc/hooks.conf"
check "hookrun's removal check: passes once no line runs /usr/sbin/hookrun" env SLURM_CONF="$SC/slurm.conf" /usr/lib/hookrun/remove check

# A Prolog as slurmd starts it: no PATH, the job's facts only.
prolog() { env -i SLURM_JOB_ID="$1" SLURM_JOB_QOS=normal SLURM_SCRIPT_CONTEXT=prolog_slurmd \
             /usr/lib/qoslane/hooks/prolog.d/10-qoslane; }
cp -p /etc/default/qoslane "$PW/default.orig"
printf 'QOSLANE_CONFIG=%s\nQOSLANE_NO_JOURNAL=1\n' "$PW/site/qos-network.yml" >>/etc/default/qoslane
prolog 101 >/dev/null 2>"$PW/prolog.err" || true
check "site options: the hook (qoslane itself) reads /etc/default/qoslane's mapping path" \
  grep -q "$PW/site/qos-network.yml" "$PW/prolog.err"
check "site options: that run is in the audit log" \
  grep -q '"job_id":101,' /var/log/qoslane/audit.jsonl
# The TaskProlog hook as hookrun starts it: no argument, the task's context.
tp=$(env -i SLURM_SCRIPT_CONTEXT=prolog_task SLURM_JOB_ID=101 HOOKRUN_PHASE=task-prolog \
       /usr/lib/qoslane/hooks/task-prolog.d/10-qoslane 2>"$PW/task-prolog.err") || true
for h in prolog.d/10-qoslane epilog.d/50-qoslane task-prolog.d/10-qoslane health.d/10-qoslane; do
  check "hook $h: a symlink to qoslane itself, no shell" \
    eq "$(readlink "/usr/lib/qoslane/hooks/$h"):$(readlink -f "/usr/lib/qoslane/hooks/$h")" \
    ../../../../sbin/qoslane:/usr/sbin/qoslane
done
check "task-prolog hook: with no argument it speaks the TaskProlog protocol for the job" bash -c \
  "printf '%s\n' \"\$1\" | grep -q '^\(export\|unset\) QOSLANE_LEVEL' && ! printf '%s\n' \"\$1\" | grep -qv '^\(export\|unset\|print\) '" _ "$tp"
chmod g+w /etc/default/qoslane
lines=$(wc -l </var/log/qoslane/audit.jsonl)
set +e; prolog 102 >/dev/null 2>"$PW/refused.err"; prc=$?; set -e
check "site options: a group-writable file fails the hook (exit $prc: I/O, not a refused job)" eq "$prc" 74
check "site options: ... saying why" bash -c "grep '/etc/default/qoslane' '$PW/refused.err' | grep -q 'refusing the site options'"
check "site options: ... and the Prolog did nothing" eq "$(wc -l </var/log/qoslane/audit.jsonl)" "$lines"
chmod g-w /etc/default/qoslane; chown nobody /etc/default/qoslane
set +e; prolog 103 >/dev/null 2>"$PW/refused.err"; prc=$?; set -e
check "site options: a file not owned by root fails the hook" eq "$prc:$(grep -c 'refusing the site options' "$PW/refused.err")" 74:1
cp -p "$PW/default.orig" /etc/default/qoslane; chown root:root /etc/default/qoslane

# ------------------------------------------------------------ logrotate while appending
# The shipped rule, pointed at a fixture root's audit log; real qoslane
# Prologs as slurmd starts them (the QoS from the environment, as from 26.05; a missing
# mapping: each one fails fast and audits one line) append
# while logrotate -f rotates it five times.
R=$PW/root; mkdir -p "$R"
sed "s|^/var/log/qoslane/audit.jsonl|$R/var/log/qoslane/audit.jsonl|" /etc/logrotate.d/qoslane >"$PW/logrotate.conf"
N=400
appender() {
  local i
  for i in $(seq 1 "$N"); do
    env -i SLURM_JOB_ID="$i" SLURM_JOB_QOS=normal SLURM_SCRIPT_CONTEXT=prolog_slurmd QOSLANE_NO_JOURNAL=1 \
      /usr/sbin/qoslane --root "$R" prolog >/dev/null 2>&1 || true
  done
}
env -i SLURM_JOB_ID=$((N + 1)) SLURM_JOB_QOS=normal SLURM_SCRIPT_CONTEXT=prolog_slurmd QOSLANE_NO_JOURNAL=1 \
  /usr/sbin/qoslane --root "$R" prolog >/dev/null 2>&1 || true
appender & apid=$!
rotations=0
for _ in 1 2 3 4 5; do
  sleep 0.3
  logrotate -f -s "$PW/logrotate.state" "$PW/logrotate.conf" 2>>"$PW/logrotate.err" &&
    rotations=$((rotations + 1))
done
wait "$apid"
A=$R/var/log/qoslane/audit.jsonl
all_lines() { cat "$A" "$A.1"; local z; for z in "$A".*.gz; do zcat "$z"; done; }
check "logrotate: 5 forced rotations succeeded" eq "$rotations" 5
check "logrotate: names audit.jsonl, .1, .N.gz (nodateext, delaycompress)" bash -c \
  "[ -f '$A' ] && [ -f '$A.1' ] && [ -f '$A.2.gz' ] && [ -f '$A.5.gz' ] && ! ls '$A'-* >/dev/null 2>&1"
check "logrotate: the new file has the audit log's mode and owner" eq "$(stat -c '%a %U:%G' "$A")" "640 root:root"
check "logrotate: every run's line exactly once ($((N + 1)) runs)" eq \
  "$(all_lines | sed -n 's/.*"job_id":\([0-9]*\),.*/\1/p' | sort -n | tr '\n' ' ')" "$(seq 1 $((N + 1)) | tr '\n' ' ')"
check "logrotate: every line is whole JSON" bash -c \
  "$(declare -f all_lines); A='$A'; all_lines | python3 -c 'import json,sys; [json.loads(l) for l in sys.stdin]'"

# ------------------------------------------------------------ remove, purge
# hookrun's textfile and state, as a hookrun run leaves them.
mkdir -p /var/lib/hookrun; echo '{}' >/var/lib/hookrun/metrics.json; echo '# x' >"$PROM/hookrun.prom"
check "before removal: qoslane's textfile and state are there" bash -c \
  "[ -s '$PROM/qoslane.prom' ] && [ -d /var/lib/qoslane ] && [ -d /run/qoslane ]"
check "dpkg --remove qoslane" bash -c "dpkg --remove qoslane >'$PW/remove.log' 2>&1 || { cat '$PW/remove.log' >&2; false; }"
check "removed: qoslane's .prom textfile is gone (node_exporter exports nothing stale)" bash -c "! [ -e '$PROM/qoslane.prom' ]"
check "removed: hookrun stays installed, with its textfile" bash -c \
  "dpkg-query -W -f='\${Status}' hookrun | grep -qx 'install ok installed' && [ -x /usr/sbin/hookrun ] && [ -e '$PROM/hookrun.prom' ]"
check "removed: conffiles and state kept until purge" bash -c \
  "[ -f /etc/default/qoslane ] && [ -d /var/lib/qoslane ] && [ -f /var/log/qoslane/audit.jsonl ]"
audit_before=$(md5sum </var/log/qoslane/audit.jsonl)
check "dpkg --purge qoslane" bash -c "dpkg --purge qoslane >'$PW/purge.log' 2>&1 || { cat '$PW/purge.log' >&2; false; }"
check "purged: the audit history is kept, whole" eq "$(md5sum </var/log/qoslane/audit.jsonl 2>&1)" "$audit_before"
check "purged: ... and purge says where it is and how to delete it" \
  grep -q 'audit history is kept in /var/log/qoslane (rm -r /var/log/qoslane deletes it)' "$PW/purge.log"
check "dpkg --purge hookrun (slurm.conf does not run it here)" bash -c \
  "dpkg --purge hookrun >'$PW/purge-hookrun.log' 2>&1 || { cat '$PW/purge-hookrun.log' >&2; false; }"
rm -r /var/log/qoslane
left=$(for p in /etc/default/qoslane /etc/logrotate.d/qoslane /var/lib/qoslane /var/lib/hookrun \
         /run/qoslane "$PROM/qoslane.prom" "$PROM/hookrun.prom" /usr/lib/qoslane /usr/lib/hookrun \
         /usr/share/qoslane /usr/share/doc/qoslane /usr/share/doc/hookrun /usr/sbin/qoslane /usr/sbin/hookrun; do
         if [ -e "$p" ]; then echo "$p"; fi; done)
check "purged: nothing left" eq "$left" ""
check "purged: dpkg knows neither package" bash -c "! dpkg-query -W qoslane >/dev/null 2>&1 && ! dpkg-query -W hookrun >/dev/null 2>&1"
check "purge again is no error (nothing to purge)" bash -c "dpkg --purge qoslane hookrun >/dev/null 2>&1"

# ------------------------------------------------------------ the OpenSM plugin's package
# Revision 2 of the same version, for the upgrades (here the plugin's, on the node qoslane's).
bash "$E2E_REPO/packaging/build.sh" --revision 2 --out "$PW/out2" 2>>"$PW/build.log" ||
  { cat "$PW/build.log" >&2; exit 1; }
PDEB2=$(ls "$PW"/out2/${PLUGIN}_*.deb)
TRIPLET=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
LIB=/usr/lib/$TRIPLET/libqoslane_sm.so
# The upstream OpenSM of this machine, as dpkg has it (the plugin must be pinned to it).
OSM=$(dpkg-query -W -f='${Version}' opensm 2>/dev/null || true); OSM=${OSM#*:}; OSM=${OSM%-*}
OSM_NEXT=$(awk -F. -v OFS=. '{ $NF = $NF + 1; print }' <<<"$OSM")
pfiles=$(dpkg-deb -c "$PDEB" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}' | sort)
check "plugin deb: the library in the multiarch directory, the README, copyright, changelog, overrides" eq "$pfiles" \
  "$(printf '%s\n' "$LIB" /usr/share/doc/$PLUGIN/{README.md.gz,changelog.Debian.gz,copyright} \
       /usr/share/lintian/overrides/$PLUGIN | sort)"
check "plugin deb: the version and revision of qoslane's ($ver)" eq "$(dpkg-deb -f "$PDEB" Version)" "$ver"
check "plugin deb: Depends on the upstream OpenSM installed here: opensm (>= $OSM), opensm (<< $OSM_NEXT~)" bash -c \
  "[ -n '$OSM' ] && dpkg-deb -f '$PDEB' Depends | grep -qF 'opensm (>= $OSM), opensm (<< $OSM_NEXT~)'"
check "plugin deb: the ldconfig trigger, no maintainer script (opensm.conf is the site's)" eq \
  "$(dpkg-deb --ctrl-tarfile "$PDEB" | tar -t | sed 's|^\./||' | grep . | sort | tr '\n' ' '):$(dpkg-deb -I "$PDEB" triggers)" \
  "control md5sums triggers :activate-noawait ldconfig"
check "plugin rpm: %{_libdir}/libqoslane_sm.so (0755), the README, the license" eq \
  "$(rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$PRPM" 2>/dev/null | grep -v '^d')" \
  "$(printf '%s\n' "-rwxr-xr-x /usr/lib64/libqoslane_sm.so" "-rw-r--r-- /usr/share/doc/$PLUGIN/README.md" \
       "-rw-r--r-- /usr/share/licenses/$PLUGIN/copyright")"
check "plugin rpm: Requires opensm >= $OSM and < $OSM_NEXT~, ldconfig after install and erase, $ver" bash -c \
  "rpm -qp --requires '$PRPM' 2>/dev/null | grep -qx 'opensm >= $OSM' && rpm -qp --requires '$PRPM' 2>/dev/null | grep -qx 'opensm < $OSM_NEXT~' &&
   [ \"\$(rpm -qp --qf '%{POSTINPROG} %{POSTUNPROG} %{VERSION}-%{RELEASE}' '$PRPM' 2>/dev/null)\" = '/sbin/ldconfig /sbin/ldconfig $ver' ]"

check "dpkg -i $PLUGIN (the opensm here satisfies it)" bash -c \
  "dpkg -i '$PDEB' >'$PW/plugin-i.log' 2>&1 || { cat '$PW/plugin-i.log' >&2; false; }"
# in_cache: the linker's cache names the library, by a path that is LIB (merged /usr: the cache
# says /lib/TRIPLET/..., the same file)
in_cache() {
  local p
  for p in $(ldconfig -p | awk '$1 == "libqoslane_sm.so" { print $NF }'); do
    [ "$(readlink -f "$p")" = "$LIB" ] && return 0
  done
  return 1
}
check "plugin: the linker's cache has it (the trigger ran): $LIB" in_cache

# apt keeps OpenSM back: a local repository (apt's state under PW) offers opensm $OSM_NEXT-1.
APT=$PW/apt; mkdir -p "$APT/repo" "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/fake/DEBIAN"
printf '%s\n' "Package: opensm" "Version: $OSM_NEXT-1" "Architecture: $(dpkg --print-architecture)" \
  "Maintainer: test <test@invalid>" "Description: a later OpenSM (a test's)" >"$APT/fake/DEBIAN/control"
dpkg-deb --root-owner-group --build "$APT/fake" "$APT/repo/opensm_${OSM_NEXT}-1.deb" >/dev/null
(cd "$APT/repo" && dpkg-scanpackages -m . /dev/null 2>/dev/null >Packages)
echo "deb [trusted=yes] file:$APT/repo ./" >"$APT/sources.list"
apt_sim() { apt-get -q -o Dir::Etc::SourceList="$APT/sources.list" -o Dir::Etc::SourceParts=/dev/null \
  -o Dir::State::Lists="$APT/lists" -o Dir::Cache="$APT/cache" -o Debug::NoLocking=1 "$@"; }
apt_sim update >"$APT/update.log" 2>&1 || cat "$APT/update.log" >&2
apt_sim -s upgrade >"$APT/upgrade.log" 2>&1
apt_sim -s install opensm >"$APT/install.log" 2>&1
check "apt: a plain upgrade keeps opensm $OSM_NEXT back while the plugin is installed" bash -c \
  "grep -A1 'kept back:' '$APT/upgrade.log' | grep -qw opensm && ! grep -q '^Inst opensm' '$APT/upgrade.log' || { cat '$APT/upgrade.log' >&2; false; }"
check "apt: installing opensm $OSM_NEXT would remove the plugin (the admin's no)" bash -c \
  "grep -q '^Remv $PLUGIN ' '$APT/install.log' || { cat '$APT/install.log' >&2; false; }"

# The multi-switch rig's real OpenSM, with no library path of ours: the installed plugin.
FABRIC_RIG=$E2E_REPO/rigs/fabric_path_rig.sh
SPOOL=$PW/sm-spool
make -s -C "$E2E_REPO/smplugin" O="$PW/smplugin" "$PW/smplugin/qsm-dump" >&2
dump_kinds() { "$PW/smplugin/qsm-dump" "$SPOOL/events" 2>/dev/null | sed -n 's/.*kind=\([A-Z_]*\).*/\1/p' | sort -u | tr '\n' ' '; }
spool_has() { dump_kinds | grep -qw "$1"; }
maps_installed() { grep -q " $LIB\$" "/proc/$RIG_OSM_PID/maps"; }
RIG_WORK="" RIG_OSM_PID=""   # from the rig's env file, read again after restart-sm
# shellcheck disable=SC1090  # the rig's env file, written by the rig
sm_env() { . "$SM_ENV"; }
first_sweep() { spool_has START && spool_has SUBNET_UP; }
sweeps_on() { kill -0 "$osm_pid" && spool_has TRAP && spool_has SUBNET_UP; }
if ! command -v ibsim >/dev/null; then
  if [ "${QOSLANE_REQUIRE_TOOLS:-0}" = 1 ]; then fail "ibsim missing: the plugin's load not tested"
  else say "SKIP the plugin's load on the rig: ibsim missing (scripts/install-deps.sh)"; fi
else
  SM_ENV=$(env -u LD_LIBRARY_PATH "$FABRIC_RIG" start -o event_plugin_name=qoslane_sm \
    -o "event_plugin_options=qoslane_spool=$SPOOL" 2>"$PW/rig.log") || { cat "$PW/rig.log" >&2; exit 1; }
  sm_env
  check "plugin: OpenSM loaded the installed library (its maps: $LIB)" maps_installed
  check "plugin: OpenSM's log says qoslane_sm: spooling to $SPOOL/events" bash -c \
    "grep -q 'qoslane_sm: spooling to $SPOOL/events' '$RIG_WORK/opensm.log'"
  check "plugin: ... and names the build, $ver, for OpenSM $OSM" bash -c \
    "grep -Eq 'qoslane_sm: build ${ver//./[.]} \(git [0-9a-f]{12}(\+dirty)?\), for OpenSM ${OSM//./[.]}\$' '$RIG_WORK/opensm.log'"
  check "plugin: the first sweep's records are in the spool (START, SUBNET_UP)" \
    poll 10 "START and SUBNET_UP in $SPOOL/events" first_sweep
  say "  the spool: $(dump_kinds)"
  # The next revision under the running OpenSM: it keeps what it loaded and sweeps on.
  osm_pid=$RIG_OSM_PID
  mv "$SPOOL/events" "$SPOOL/taken"
  check "plugin: dpkg -i revision 2 while OpenSM runs" bash -c \
    "dpkg -i '$PDEB2' >'$PW/plugin-i2.log' 2>&1 || { cat '$PW/plugin-i2.log' >&2; false; }"
  "$FABRIC_RIG" bounce "$SM_ENV" leaf1 3 >>"$PW/rig.log" 2>&1
  check "plugin: ... the running OpenSM sweeps on with the plugin it loaded (a bounce's TRAP and SUBNET_UP spooled)" \
    poll 10 "TRAP and SUBNET_UP after the upgrade" sweeps_on
  "$FABRIC_RIG" restart-sm "$SM_ENV" >>"$PW/rig.log" 2>&1
  sm_env
  check "plugin: the restarted OpenSM loads revision 2 (its log names $(dpkg-deb -f "$PDEB2" Version))" bash -c \
    "grep -q 'qoslane_sm: build ${ver%-*}-2 (git ' '$RIG_WORK/opensm.log' && grep -q ' $LIB\$' /proc/$RIG_OSM_PID/maps"
  "$FABRIC_RIG" stop "$SM_ENV" >>"$PW/rig.log" 2>&1; SM_ENV=""
fi
check "dpkg --purge $PLUGIN" bash -c "dpkg --purge '$PLUGIN' >'$PW/plugin-purge.log' 2>&1 || { cat '$PW/plugin-purge.log' >&2; false; }"
check "plugin purged: no library, no docs, not in the linker's cache, dpkg knows it not" bash -c \
  "! [ -e '$LIB' ] && ! [ -e /usr/share/doc/$PLUGIN ] && ! ldconfig -p | grep -q libqoslane_sm && ! dpkg-query -W '$PLUGIN' >/dev/null 2>&1"
apt_sim -s upgrade >"$APT/upgrade-after.log" 2>&1
check "apt: without the plugin, the same upgrade takes opensm $OSM_NEXT (the plugin held it back)" bash -c \
  "grep -q '^Inst opensm ' '$APT/upgrade-after.log' || { cat '$APT/upgrade-after.log' >&2; false; }"

# ------------------------------------------------------------ the packages' life on a real Slurm node
. "$(dirname "$0")/packages_node.sh"

say "packages e2e: $E2E_PASSED passed, $E2E_FAILED failed, $(secs "$T_START")s"
[ "$E2E_FAILED" = 0 ]
