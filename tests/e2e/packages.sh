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
for pkg in qoslane hookrun; do
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
cleanup() {
  local rc=$?
  set +e
  local pkg
  for pkg in qoslane hookrun; do
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
say "built $(basename "$DEB") and $(basename "$HDEB") in $(secs "$t")s"
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
  ! grep -q hookrun <<<"$(grep -v "^/usr/share/doc/qoslane/hookrun.md.gz$" <<<"$2")"' _ "$hfiles" "$files"
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

lintian -I --pedantic "$DEB" "$HDEB" >"$PW/lintian.txt" 2>"$PW/lintian.err"; lrc=$?
check "lintian -I --pedantic: no tag left (exit $lrc)" bash -c "[ $lrc = 0 ] && ! [ -s '$PW/lintian.txt' ] || { cat '$PW/lintian.txt' >&2; false; }"

# The .rpm of the same tree: rpmlint with the distribution settings and the
# narrow filters of packaging/rpm/rpmlint.toml, each with its reason.
bash "$E2E_REPO/packaging/build.sh" --rpm --out "$PW/out" 2>>"$PW/build.log" ||
  { cat "$PW/build.log" >&2; exit 1; }
RPM=$(ls "$PW"/out/qoslane-*.rpm)
HRPM=$(ls "$PW"/out/hookrun-*.rpm)
rpmlint -c "$E2E_REPO/packaging/rpm/rpmlint.toml" "$RPM" "$HRPM" >"$PW/rpmlint.txt" 2>&1; rrc=$?
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
check "rpm: the systemd units" bash -c "rpm -qpl '$RPM' 2>/dev/null | grep -c '^/usr/lib/systemd/system/qoslane-' | grep -qx 3"
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

# ------------------------------------------------------------ the packages' life on a real Slurm node
. "$(dirname "$0")/packages_node.sh"

say "packages e2e: $E2E_PASSED passed, $E2E_FAILED failed, $(secs "$T_START")s"
[ "$E2E_FAILED" = 0 ]
