# shellcheck shell=bash
# packages_node.sh — sourced by tests/e2e/packages.sh once its host part is done: the packages'
# whole life on a real Slurm node, the newest chroot rig of rigs/slurm_versions.tsv (one slurmd
# with Prolog, Epilog and TaskProlog = /usr/sbin/hookrun, qoslane's hooks linked into
# /etc/slurm/<phase>.d as docs/omnia.md says). Jobs of QoS high hold a level whose node setting
# is rmem_max (the chroot's /proc/sys/net/core/rmem_max, a file of the suite bind-mounted over
# it: the host's value is never written). With a job running:
#   every upgrade path to this release and the downgrades, .deb and .rpm (packages_upgrade.sh:
#     from the single-package layout, from 0.1.0, 0.2.0 and 0.3.0, with the Omnia role's command);
#   .deb (dpkg in the chroot): upgrade 1 -> 2, the job's Epilog (the new qoslane) restores the
#     baseline; remove qoslane: its level released at once, audited, the node in service, the
#     next job runs with the hooks' links broken (skipped); removing hookrun is refused while
#     slurm.conf runs it, naming the line; purge keeps the audit history and says how to delete
#     it; hookrun goes once slurm.conf no longer names it.
#   .rpm (the host's rpm, --root the chroot: the scriptlets run there): the same life, erase
#     being remove and purge at once.
# Uses from packages.sh: PW, DEB, HDEB, RPM, HRPM, PW/out2 (revision 2), check/poll/say and lib.sh's
# job helpers.

slurm_select "$(slurm_newest chroot)"   # CH, SLURM_SUITE, RIG_LOCK: the chroot's
exec 8>"$RIG_LOCK"
flock -w "$RIG_LOCK_WAIT" 8 || { say "another suite holds $RIG_LOCK"; exit 1; }
export RIG_LOCK_HELD=$RIG_LOCK
RPMDB=/var/lib/qoslane-e2e-rpm          # the rpm database, inside the chroot
HOOK_LINKS=(prolog.d/10-qoslane epilog.d/50-qoslane task-prolog.d/10-qoslane)
in_ch() { slurm_cmd "$@"; }
rpm_ch() { rpm --root "$CH" --dbpath "$RPMDB" "$@"; }
# shellcheck disable=SC2016  # dpkg-query's format, not the shell's
installed_deb() { in_ch dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed\|config-files"; }

# Put the chroot back as the rig left it: no package of ours (slurm.conf first made not to name
# hookrun, so that its removal is not refused), no hook links, no rpm database.
chroot_cleanup() {
  set +e
  [ -z "${WORK:-}" ] || touch "$CH$WORK/release.all" 2>/dev/null
  stop_slurm
  [ -f "$CH/etc/slurm/slurm.conf" ] && sed -i '/=\/usr\/sbin\/hookrun$/d' "$CH/etc/slurm/slurm.conf"
  local p
  for p in qoslane hookrun; do
    if installed_deb "$p"; then in_ch dpkg --purge "$p" >/dev/null 2>&1; fi
    if [ -d "$CH$RPMDB" ] && rpm_ch -q "$p" >/dev/null 2>&1; then rpm_ch -e --nodeps "$p" >/dev/null 2>&1; fi
  done
  rm -rf "${CH:?}$RPMDB" "$CH/var/log/qoslane" "$CH/etc/qoslane"
  if [ "${PROM_CH_MADE:-0}" = 1 ]; then rm -rf "${CH:?}/var/lib/prometheus"; fi
  for p in "${HOOK_LINKS[@]}"; do rm -f "$CH/etc/slurm/$p"; rmdir "$CH/etc/slurm/${p%/*}" 2>/dev/null; done
  if [ -z "${WORK:-}" ]; then :
  elif [ "$E2E_FAILED" -ne 0 ]; then say "kept $CH$WORK"
  else rm -rf "${CH:?}${WORK:?}"; fi
}

say "the packages on a real Slurm node: Slurm $SLURM_VERSION in its chroot ($SLURM_SUITE)"
bash "$CHROOT_RIG" stop "$SLURM_SUITE" 2>/dev/null || true
bash "$CHROOT_RIG" create "$SLURM_SUITE" >/dev/null
WORK=$(mktemp -d "$CH/tmp/qoslane-packages.XXXXXX"); chmod 0755 "$WORK"; WORK=${WORK#"$CH"}
for p in qoslane hookrun; do
  if installed_deb "$p"; then say "the chroot has $p installed (an earlier run's); not replacing it"; exit 1; fi
done

# Revision 2 of the same version (built by packages.sh into PW/out2): the upgrade.
V1=$(dpkg-deb -f "$DEB" Version) V2=$(dpkg-deb -f "$(ls "$PW"/out2/qoslane_*.deb)" Version)
install -d "$CH$WORK/r1" "$CH$WORK/r2"
cp "$DEB" "$HDEB" "$RPM" "$HRPM" "$CH$WORK/r1/"
cp "$PW"/out2/*.deb "$PW"/out2/*.rpm "$CH$WORK/r2/"
deb_of() { echo "$WORK/$1/$(basename "$(ls "$CH$WORK/$1/$2"_*.deb)")"; }      # deb_of r1|r2 PKG
rpm_of() { echo "$CH$WORK/$1/$(basename "$(ls "$CH$WORK/$1/$2"-[0-9]*.rpm)")"; }  # rpm_of r1|r2 PKG (qoslane: not qoslane-opensm-plugin)

# The node as an admin sets it up: the mapping (no HCA here: fabric_check off), the hooks linked.
install -d -m 0755 "$CH/etc/qoslane"
# The suites' mapping (tests/e2e/lib.sh): high sets rmem_max to 8388608.
e2e_mapping "$CH/etc/qoslane/qos-network.yml"
sed -i 's/^fabric_check: enforce$/fabric_check: off/' "$CH/etc/qoslane/qos-network.yml"
for p in "${HOOK_LINKS[@]}"; do
  install -d -m 0755 "$CH/etc/slurm/${p%/*}"
  ln -sfn "/usr/lib/qoslane/hooks/$p" "$CH/etc/slurm/$p"
done

RIG_NNODES=1 RIG_USERS="root jobuser" \
RIG_PROLOG=/usr/sbin/hookrun RIG_EPILOG=/usr/sbin/hookrun RIG_TASKPROLOG=/usr/sbin/hookrun \
RIG_TASKEPILOG="" RIG_PROLOGSLURMCTLD="" RIG_EPILOGSLURMCTLD="" \
RIG_PROLOG_FLAGS=Alloc RIG_PROLOG_EPILOG_TIMEOUT=30 RIG_EXTRA_CONF="AuthInfo=cred_expire=10" \
  bash "$CHROOT_RIG" start "$SLURM_SUITE" 2>"$CH$WORK/rig-start.log" ||
  { cat "$CH$WORK/rig-start.log" >&2; exit 1; }
NODE=$(RIG_NNODES=1 bash "$CHROOT_RIG" nodes "$SLURM_SUITE" | head -1)
# The level's setting: a file of the suite over the chroot's rmem_max (the rig's stop unmounts it).
HOST_RMEM=$(cat "$RMEM")
echo "$BASE_RMEM" > "$CH$WORK/rmem_max"
mount --bind "$CH$WORK/rmem_max" "$CH$RMEM"
rmem() { tr -d '\n' < "$CH$WORK/rmem_max"; }
AUDIT=$CH/var/log/qoslane/audit.jsonl
in_service() { ! in_ch /usr/bin/scontrol show node -o "$NODE" | grep -q 'State=[A-Z+]*DRAIN'; }
# node_idle: IDLE and nothing else (no DRAIN, COMPLETING, ... beside it), as slurmctld says
node_idle() { case "$(in_ch /usr/bin/scontrol show node -o "$NODE")" in *" State=IDLE "*) ;; *) return 1 ;; esac; }
# settles: the node idle and in service within 30 s (else its state is said)
settles() {
  poll 30 "node $NODE idle, not drained" eval 'node_idle && in_service' && return 0
  say "  $(in_ch /usr/bin/scontrol show node -o "$NODE" | grep -o 'State=[^ ]*\|Reason=.*')"; return 1
}
epilog_audited() { [ "$(audit_of "" "$1" epilog outcome)" != "<none>" ]; }
# job_holds JOB: running, granted high by its Prolog, rmem_max at high's value
job_holds() {
  poll 60 "job $1 running" is_running "$1" &&
    eq "$(audit_of "" "$1" prolog outcome):$(rmem)" applied:8388608
}
# job_ran_without_qoslane JOB: it ran (its script wrote its environment), had no level, and ended
job_ran_without_qoslane() {
  poll 60 "job $1 running" is_running "$1" || return 1
  release "$1"; poll 60 "job $1 done" is_gone "$1" || return 1
  eq "$(env_of "$1" QOSLANE_LEVEL)" ""
}

# logged LOG CMD...: CMD (dpkg or rpm, in or at the chroot), its output into WORK/LOG, shown on failure
logged() { local log=$CH$WORK/$1; shift; "$@" >"$log" 2>&1 || { cat "$log" >&2; return 1; }; }
# refused LOG CMD...: CMD fails (its output into WORK/LOG)
refused() { local log=$CH$WORK/$1; shift; ! "$@" >"$log" 2>&1; }
# shellcheck disable=SC2016  # dpkg-query's format, not the shell's
deb_state() { in_ch dpkg-query -W -f='${Status}' "$1" 2>/dev/null; }
# still_holds JOB: running, rmem_max at high's value, the node in service
still_holds() { is_running "$1" && [ "$(rmem)" = 8388608 ] && in_service; }
# released JOB: rmem_max back to the baseline and the job's Epilog audited as reverted
released() { eq "$(rmem):$(audit_of "" "$1" epilog outcome)" "$BASE_RMEM:reverted"; }
names_v2() { "$@" --version | grep -q " ${V2//./[.]} (git "; }
end_job() { release "$1"; poll 60 "job $1 done" is_gone "$1"; }
says() { grep -Eq -- "$1" "$CH$WORK/$2"; }
KEPT='audit history is kept in /var/log/qoslane \(rm -r /var/log/qoslane deletes it\)'
REFUSED_LINE='^  /etc/slurm/slurm.conf:[0-9]+: Prolog=/usr/sbin/hookrun$'
gone_in_ch() { local p; for p in "$@"; do if [ -e "$CH$p" ]; then say "  still there: $p"; return 1; fi; done; }

# after_removal WHAT JOB: qoslane is gone, JOB (whose level it released) still runs; the node
# stays in service through JOB's end (its Epilog's link broken: skipped) and the next job
# (without a level), and nothing is written to the audit history (audit_sum: before)
after_removal() {
  local what=$1 j=$2
  check "$what: job $j still runs, the node in service" bash -c \
    "$(declare -f slurm_cmd in_ch job_state is_running in_service); CH='$CH' WORK='$WORK' NODE='$NODE'; is_running '$j' && in_service"
  end_job "$j"
  check "$what: job $j's end (its Epilog's link broken: skipped) leaves the node idle, in service" settles
  j=$(submit high)
  check "$what: the next job runs, without a level (its hooks skipped)" job_ran_without_qoslane "$j"
  check "$what: the node in service after it" in_service
  check "$what: the audit history intact, nothing written since" eq "$(md5sum < "$AUDIT")" "$audit_sum"
}

# Every upgrade path to this release, and the downgrades (packages_upgrade.sh).
. "$(dirname "${BASH_SOURCE[0]}")/packages_upgrade.sh"

# ------------------------------------------------------------ .deb: upgrade paths, a revision
deb_upgrade_paths   # ends with $V1 installed
j=$(submit high)
check "deb: job $j (high) holds its level: rmem_max 8388608" job_holds "$j"
check "deb: upgrade $V1 -> $V2 with job $j running (dpkg -i)" \
  logged upgrade.log in_ch dpkg -i "$(deb_of r2 hookrun)" "$(deb_of r2 qoslane)"
check "deb: upgraded: qoslane and hookrun --version name $V2" bash -c \
  "$(declare -f names_v2 slurm_cmd in_ch); CH='$CH' V2='$V2'; names_v2 in_ch /usr/sbin/qoslane && names_v2 in_ch /usr/sbin/hookrun"
check "deb: upgraded: job $j still runs, its level held, the node in service" still_holds "$j"
end_job "$j"; poll 30 "job $j's Epilog audited" epilog_audited "$j"
check "deb: upgraded: the new qoslane's Epilog restored what the old one applied (reverted, rmem_max $BASE_RMEM)" released "$j"
check "deb: upgraded: the node in service" in_service

# ------------------------------------------------------------ .deb: remove qoslane with a job
j=$(submit high)
check "deb: job $j (high) holds its level" job_holds "$j"
check "deb: dpkg --remove qoslane with job $j running" logged remove.log in_ch dpkg --remove qoslane
check "deb: removal released job $j's level first, and said so" says "qoslane: job $j: its level released" remove.log
check "deb: ... the node setting back to the baseline at once, audited as the job's Epilog" released "$j"
audit_sum=$(md5sum < "$AUDIT")
check "deb: removed: hookrun stays installed" eq "$(deb_state hookrun)" "install ok installed"
after_removal "deb: removed" "$j"

# ------------------------------------------------------------ .deb: hookrun, purge
check "deb: dpkg --remove hookrun is refused while slurm.conf runs it" refused remove-hookrun.log in_ch dpkg --remove hookrun
check "deb: ... naming slurm.conf's line" says "$REFUSED_LINE" remove-hookrun.log
check "deb: ... hookrun still installed, the node in service" bash -c \
  "$(declare -f slurm_cmd in_ch in_service); CH='$CH' NODE='$NODE'
   in_ch dpkg-query -W -f='\${Status}' hookrun | grep -q 'ok installed' && [ -x '$CH/usr/sbin/hookrun' ] && in_service"
check "deb: dpkg --purge qoslane" logged purge.log in_ch dpkg --purge qoslane
check "deb: purged: says where the audit history is and how to delete it" says "$KEPT" purge.log
check "deb: purged: the audit history intact" eq "$(md5sum < "$AUDIT")" "$audit_sum"
check "deb: purged: qoslane's state and site options gone" gone_in_ch /run/qoslane /var/lib/qoslane /etc/default/qoslane /usr/sbin/qoslane
cp -p "$CH/etc/slurm/slurm.conf" "$CH$WORK/slurm.conf.rig"
sed -i '/=\/usr\/sbin\/hookrun$/d' "$CH/etc/slurm/slurm.conf"   # the file only: slurmd keeps its own
check "deb: dpkg --purge hookrun once slurm.conf no longer runs it" logged purge-hookrun.log in_ch dpkg --purge hookrun
check "deb: ... hookrun gone" gone_in_ch /usr/sbin/hookrun /usr/lib/hookrun
cp -p "$CH$WORK/slurm.conf.rig" "$CH/etc/slurm/slurm.conf"

# ------------------------------------------------------------ .rpm: the same life under rpm
# The host's rpm with --root the chroot: the scriptlets run inside it, on the Slurm node
# (--nodeps: the chroot's libraries are dpkg's).
rpm_ch --initdb
rm -r "$CH/var/log/qoslane"
rpm_upgrade_paths   # ends with $V1 installed
check "rpm: the site options are /etc/sysconfig/qoslane" bash -c "[ -f '$CH/etc/sysconfig/qoslane' ] && ! [ -e '$CH/etc/default/qoslane' ]"
j=$(submit high)
check "rpm: job $j (high) holds its level" job_holds "$j"
check "rpm: rpm -U to $V2 with job $j running" logged rpm-U.log rpm_ch -U --nodeps "$(rpm_of r2 hookrun)" "$(rpm_of r2 qoslane)"
check "rpm: upgraded: qoslane --version names $V2" names_v2 in_ch /usr/sbin/qoslane
check "rpm: upgraded: job $j still runs, its level held, the node in service" still_holds "$j"
end_job "$j"; poll 30 "job $j's Epilog audited" epilog_audited "$j"
check "rpm: upgraded: the new qoslane's Epilog restored the baseline" released "$j"
j=$(submit high)
check "rpm: job $j (high) holds its level" job_holds "$j"
check "rpm: rpm -e qoslane with job $j running" logged rpm-e.log rpm_ch -e qoslane
check "rpm: erase released job $j's level first, and said so" says "qoslane: job $j: its level released" rpm-e.log
check "rpm: ... the node setting back to the baseline, audited as the job's Epilog" released "$j"
check "rpm: erase says where the audit history is and how to delete it" says "$KEPT" rpm-e.log
audit_sum=$(md5sum < "$AUDIT")
check "rpm: erased: qoslane's state gone; hookrun stays" bash -c \
  "$(declare -f rpm_ch); CH='$CH' RPMDB='$RPMDB'; rpm_ch -q hookrun >/dev/null && ! [ -e '$CH/run/qoslane' ] && ! [ -e '$CH/usr/sbin/qoslane' ]"
after_removal "rpm: erased" "$j"
check "rpm: rpm -e hookrun is refused while slurm.conf runs it" refused rpm-e-hookrun.log rpm_ch -e hookrun
check "rpm: ... naming the line; hookrun still installed" bash -c \
  "$(declare -f rpm_ch); CH='$CH' RPMDB='$RPMDB'; rpm_ch -q hookrun >/dev/null && grep -Eq '$REFUSED_LINE' '$CH$WORK/rpm-e-hookrun.log'"
sed -i '/=\/usr\/sbin\/hookrun$/d' "$CH/etc/slurm/slurm.conf"
check "rpm: rpm -e hookrun once slurm.conf no longer runs it" logged rpm-e-hookrun2.log rpm_ch -e hookrun
check "rpm: ... hookrun gone" gone_in_ch /usr/sbin/hookrun /usr/lib/hookrun
cp -p "$CH$WORK/slurm.conf.rig" "$CH/etc/slurm/slurm.conf"
check "the host's rmem_max was never written" eq "$(cat "$RMEM")" "$HOST_RMEM"
