# shellcheck shell=bash
# packages_upgrade.sh — sourced by tests/e2e/packages_node.sh (the newest chroot Slurm, hookrun as
# Prolog/Epilog/TaskProlog, qoslane's hooks linked): every path a site takes to this release,
# with a job holding a level while the packages change under it, for the .deb (dpkg in the
# chroot) and the .rpm (the host's rpm --root the chroot):
#   - from the last single-package layout (OLD_SINGLE: qoslane holding /usr/sbin/hookrun and
#     shell hooks) with the command the Omnia role runs (dpkg -i --force-confdef --force-confold
#     hookrun qoslane; rpm -U of both): the .deb with an edited /etc/default/qoslane (kept, no
#     prompt without a terminal), the .rpm with an unedited one (replaced);
#   - a downgrade to that layout: the .deb works (qoslane 0.1.0 beside this release's hookrun,
#     which keeps /usr/sbin/hookrun: it replaces that file of the old qoslane), and back up again;
#     the .rpm is refused (the file conflicts), the installed release untouched, the job's level
#     held;
#   - a downgrade to the first release of the current layout (OLD_SPLIT, 0.1.0): works;
#   - from that release back up to this one;
#   - a downgrade to the release before the previous one (OLD_020, 0.2.0) and from it up to this
#     one (a site that skipped 0.3.0);
#   - a downgrade to the previous release (OLD_PREV, 0.3.0) and back up to this one.
# After each: the running job's level held and its Epilog (the installed qoslane's) restoring the
# baseline, the next job granted and released, the node never drained (sinfo sampled every
# 0.2 s from before the command to the next job's end), the audit history before the change a
# prefix of the one after, and --version, qoslane_build_info and hookrun_build_info naming the
# version, revision and commit installed.
# The old releases are built from their commits by packaging/build.sh --commit, once: cached
# under ${XDG_CACHE_HOME:-~/.cache}/qoslane/packages/COMMIT (CI keeps that directory).
# Uses from packages_node.sh: CH, WORK, NODE, AUDIT, in_ch, rpm_ch, deb_of, rpm_of, job_holds,
# still_holds, end_job, released, epilog_audited, in_service, logged, refused, deb_state.

# The last commit of the single-package layout: the first parent of e4a36d0 ("Merge s8-package",
# which made hookrun its own package). The first release of the current layout: 0.1.0. Then
# 0.2.0, and the previous release: 0.3.0.
OLD_SINGLE=e14e30c5f308bb99a54ae7468054cdc964fc62e0
OLD_SPLIT=a030725bff23229c47984f3862e4de15bc4f60b3
OLD_020=68792356a0bbedf6720ef8bbe532bf74853b35ff
OLD_PREV=c50f93cb581883747ff85bd2644a7bd0af9e9d2f
PROM_CH=/var/lib/prometheus/node-exporter

old_packages() { # old_packages COMMIT DIR: its packages (cached) into the chroot's WORK/DIR
  local cache
  cache=$(bash "$E2E_REPO/packaging/build.sh" --commit "$1" 2>>"$PW/build.log") ||
    { tail -20 "$PW/build.log" >&2; return 1; }
  install -d "$CH$WORK/$2"
  cp "$cache"/*.deb "$cache"/*.rpm "$CH$WORK/$2/"
}
t=$(date +%s.%N)
old_packages "$OLD_SINGLE" single || exit 1
old_packages "$OLD_SPLIT" split || exit 1
old_packages "$OLD_020" r020 || exit 1
old_packages "$OLD_PREV" prev || exit 1
say "the packages of ${OLD_SINGLE:0:12} (one package), ${OLD_SPLIT:0:12} (0.1.0), ${OLD_020:0:12} (0.2.0) and ${OLD_PREV:0:12} (0.3.0) in $(secs "$t")s (cached by commit)"
check "the single-package layout: one qoslane package holding /usr/sbin/hookrun, no hookrun package" bash -c \
  "dpkg-deb -c '$(ls "$CH$WORK"/single/qoslane_*.deb)' | grep -c ' ./usr/sbin/hookrun$' >/dev/null &&
   ! ls '$CH$WORK'/single/hookrun* >/dev/null 2>&1"
NEW_COMMIT=$(git -C "$E2E_REPO" rev-parse --short=12 HEAD)
NEW_VERSION=$(dpkg-deb -f "$DEB" Version)

# The Omnia role's install command (tasks/node.yml), as it runs it: its fixed arguments, then
# hookrun's package, then qoslane's.
role_dpkg() {
  python3 - "$E2E_REPO/deploy/omnia/roles/slurm_qos_network/tasks/node.yml" <<'EOF'
import sys, yaml
for task in yaml.safe_load(open(sys.argv[1])):
    for t in task.get("block", []):
        if t.get("name") == "Install the packages (Debian family)":
            argv = t["ansible.builtin.command"]["argv"]
            fixed = [a for a in argv if "{{" not in a]
            pkgs = [a for a in argv if "{{" in a]
            assert len(pkgs) == 2 and "hookrun" in pkgs[0] and "hookrun" not in pkgs[1], pkgs
            print(" ".join(fixed))
            sys.exit(0)
sys.exit("no 'Install the packages (Debian family)' task")
EOF
}
ROLE_DPKG=$(role_dpkg) || { say "the Omnia role's dpkg command not found"; exit 1; }
check "the role's command is non-interactive: $ROLE_DPKG" bash -c \
  "grep -q -- '--force-confdef' <<<'$ROLE_DPKG' && grep -q -- '--force-confold' <<<'$ROLE_DPKG'"
# deb_install DIR: the role's command with DIR's hookrun and qoslane (a DIR of one package: qoslane)
deb_install() {
  local h=() q
  q=$(deb_of "$1" qoslane)
  if ls "$CH$WORK/$1"/hookrun_*.deb >/dev/null 2>&1; then h=("$(deb_of "$1" hookrun)"); fi
  # shellcheck disable=SC2086  # the role's fixed arguments, words
  in_ch $ROLE_DPKG "${h[@]}" "$q" </dev/null
}
# rpm_upgrade DIR [rpm options]: rpm -U DIR's hookrun and qoslane in one transaction
rpm_upgrade() {
  local d=$1 h=(); shift
  if ls "$CH$WORK/$d"/hookrun-*.rpm >/dev/null 2>&1; then h=("$(rpm_of "$d" hookrun)"); fi
  rpm_ch -U --nodeps "$@" "${h[@]}" "$(rpm_of "$d" qoslane)"
}

# watch_node NAME: sinfo's state of the node every 0.2 s into WORK/states.NAME until unwatch_node
watch_node() {
  rm -f "$CH$WORK/unwatch"
  ( while [ ! -e "$CH$WORK/unwatch" ]; do
      in_ch /usr/bin/sinfo -h -N -n "$NODE" -o %T 2>&1; sleep 0.2
    done ) >"$CH$WORK/states.$1" &
  WATCH_PID=$!
}
unwatch_node() { touch "$CH$WORK/unwatch"; wait "$WATCH_PID" 2>/dev/null; }
# never_drained NAME: samples were taken and none of them says drain (or down, or fail)
never_drained() {
  local f=$CH$WORK/states.$1
  [ "$(grep -c . "$f")" -ge 3 ] || { say "  only $(grep -c . "$f") samples"; return 1; }
  ! grep -Eiq 'drain|down|fail' "$f" || { say "  sinfo said: $(sort "$f" | uniq -c | tr '\n' ' ')"; return 1; }
}
# ch_names_build BIN VERSION COMMIT: BIN --version is "NAME VERSION (git COMMIT[+dirty])"
ch_names_build() {
  local out; out=$(in_ch "$1" --version)
  grep -Eqx "$(basename "$1") ${2//./[.]} \(git $3(\+dirty)?\)" <<<"$out" || { say "  $1 --version: $out"; return 1; }
}
# build_info FILE METRIC VERSION COMMIT: METRIC in the textfile names VERSION-REVISION's parts and COMMIT
build_info() {
  local want="^$2\{version=\"${3%-*}\",revision=\"${3##*-}\",commit=\"$4(\+dirty)?\"\} 1$"
  grep -Eq "$want" "$CH$PROM_CH/$1" || { say "  $1: $(grep "^$2" "$CH$PROM_CH/$1")"; return 1; }
}
# audit_kept BEFORE: the audit log as it was (a copy) is the beginning of the audit log now
audit_kept() { cmp -s -n "$(stat -c %s "$1")" "$1" "$AUDIT"; }

# changes_with_job WHAT LOG VERSION COMMIT CMD...: a job holds its level while CMD (its output
# into WORK/LOG) changes the packages; CMD succeeds, the job keeps its level, --version names
# VERSION and COMMIT, the job's Epilog restores, the next job holds and releases its level, the
# node never drains, the audit history before CMD is kept; for this release, qoslane_build_info
# and hookrun_build_info (written by the next job's hooks) name VERSION's parts and COMMIT.
changes_with_job() {
  local what=$1 log=$2 version=$3 commit=$4 j n; shift 4
  j=$(submit high)
  check "$what: job $j (high) holds its level" job_holds "$j"
  cp "$AUDIT" "$CH$WORK/audit.before"
  watch_node "$log"
  check "$what, with job $j running" logged "$log" "$@"
  check "$what: job $j still runs, its level held, the node in service" still_holds "$j"
  check "$what: qoslane and hookrun --version name $version (git $commit)" \
    names_both "$version" "$commit"
  end_job "$j"; poll 30 "job $j's Epilog audited" epilog_audited "$j"
  check "$what: job $j's Epilog, the installed qoslane's, restored the baseline (reverted)" released "$j"
  n=$(submit high)
  check "$what: the next job $n holds its level" job_holds "$n"
  end_job "$n"; poll 30 "job $n's Epilog audited" epilog_audited "$n"
  check "$what: ... and its Epilog released it" released "$n"
  unwatch_node
  check "$what: the node never drained (sinfo every 0.2 s, from before the change to job $n's end)" \
    never_drained "$log"
  check "$what: the audit history before the change is kept, whole" audit_kept "$CH$WORK/audit.before"
  if [ "$version" = "$NEW_VERSION" ]; then
    check "$what: qoslane_build_info and hookrun_build_info name $version and $commit" \
      build_infos "$version" "$commit"
  fi
}
# names_both VERSION COMMIT: both binaries name it; hookrun another when HOOKRUN_AT="VERSION COMMIT"
names_both() {
  local at=${HOOKRUN_AT:-$1 $2}
  ch_names_build /usr/sbin/qoslane "$1" "$2" && ch_names_build /usr/sbin/hookrun "${at% *}" "${at#* }"
}
# state_files: hookrun's metric state directory's names, sorted, on one line (this release
# replaces metrics.json through a spare kept beside it, .metrics.json.spare; 0.3.0 and older
# through a temp file per run, and leave the spare alone)
state_files() { find "$CH/var/lib/hookrun" -mindepth 1 -maxdepth 1 -printf '%f\n' | LC_ALL=C sort | tr '\n' ' '; }
HOOKRUN_STATE=".metrics.json.spare metrics.json metrics.lock "
build_infos() {
  build_info qoslane.prom qoslane_build_info "$1" "$2" && build_info hookrun.prom hookrun_build_info "$1" "$2"
}
# both_at VERSION COMMIT JOB: hookrun and qoslane installed at VERSION (dpkg or rpm, as PM
# says), in force (--version), and JOB still holds its level
both_at() {
  if [ "$PM" = deb ]; then
    eq "$(deb_state qoslane):$(deb_state hookrun)" "install ok installed:install ok installed" || return 1
  else
    eq "$(rpm_ch -q --qf '%{VERSION}-%{RELEASE} ' qoslane hookrun)" "$1 $1 " || return 1
  fi
  names_both "$1" "$2" && still_holds "$3"
}

# The textfile directory, so that the hooks write qoslane.prom and hookrun.prom (removed on exit).
# shellcheck disable=SC2034  # read by packages_node.sh's chroot_cleanup
if [ ! -d "$CH/var/lib/prometheus" ]; then PROM_CH_MADE=1; fi
install -d -m 0755 "$CH$PROM_CH"
SHIPPED_DEFAULT=$E2E_REPO/packaging/default/qoslane

# deb_upgrade_paths: from the single package to this release (an edited /etc/default/qoslane),
# the downgrades, and from 0.1.0, 0.2.0 and 0.3.0 back to this release; ends with this release
# (r1) installed
deb_upgrade_paths() {
  PM=deb
  check "deb: the single-package qoslane of ${OLD_SINGLE:0:12} installed (dpkg -i)" \
    logged dpkg-i-single.log in_ch dpkg -i "$(deb_of single qoslane)"
  check "node: $NODE idle" node_idle
  # The admin's edit: a site option the new package's file does not have.
  echo 'QOSLANE_TIMEOUT_MS=3000' >>"$CH/etc/default/qoslane"
  cp -p "$CH/etc/default/qoslane" "$CH$WORK/default.edited"
  changes_with_job "deb: single package -> $NEW_VERSION (the Omnia role's dpkg -i, no terminal)" \
    deb-from-single.log "$NEW_VERSION" "$NEW_COMMIT" deb_install r1
  check "deb: ... hookrun is its own package now, /usr/sbin/hookrun its file" \
    eq "$(in_ch dpkg-query -S /usr/sbin/hookrun)" "hookrun: /usr/sbin/hookrun"
  check "deb: ... dpkg said it took the file over from the old qoslane" \
    says 'Replacing files in old package qoslane' deb-from-single.log
  check "deb: ... the admin's /etc/default/qoslane kept, the package's beside it (.dpkg-dist)" bash -c \
    "cmp -s '$CH$WORK/default.edited' '$CH/etc/default/qoslane' && cmp -s '$SHIPPED_DEFAULT' '$CH/etc/default/qoslane.dpkg-dist'"
  check "deb: ... the hooks are links to qoslane, the shell library gone" bash -c \
    "[ \"\$(readlink '$CH/usr/lib/qoslane/hooks/epilog.d/50-qoslane')\" = ../../../../sbin/qoslane ] && ! [ -e '$CH/usr/lib/qoslane/site-options' ]"

  # Back to the single package: dpkg unpacks it and keeps hookrun's /usr/sbin/hookrun (hookrun
  # replaces that file of every qoslane before 0.2.0); this release's hookrun stays and runs its
  # hooks.
  HOOKRUN_AT="$NEW_VERSION $NEW_COMMIT" changes_with_job \
    "deb: downgrade $NEW_VERSION -> the single package (the role's dpkg -i)" deb-to-single.log \
    0.1.0-1 "${OLD_SINGLE:0:12}" deb_install single
  check "deb: ... dpkg kept hookrun's file" says 'Replaced by files in installed package hookrun' deb-to-single.log
  # shellcheck disable=SC2016  # dpkg-query's format, not the shell's
  check "deb: ... qoslane 0.1.0-1 beside hookrun $NEW_VERSION, which keeps /usr/sbin/hookrun" eq \
    "$(in_ch dpkg-query -W -f='${Package} ${Version} ${Status}\n' qoslane hookrun | sort | tr '\n' ' '):$(in_ch dpkg-query -S /usr/sbin/hookrun)" \
    "hookrun $NEW_VERSION install ok installed qoslane 0.1.0-1 install ok installed :hookrun: /usr/sbin/hookrun"
  changes_with_job "deb: the single package beside hookrun $NEW_VERSION -> $NEW_VERSION" deb-from-single2.log \
    "$NEW_VERSION" "$NEW_COMMIT" deb_install r1

  changes_with_job "deb: downgrade $NEW_VERSION -> 0.1.0-1 (${OLD_SPLIT:0:12})" deb-to-split.log \
    0.1.0-1 "${OLD_SPLIT:0:12}" deb_install split
  changes_with_job "deb: upgrade 0.1.0-1 (${OLD_SPLIT:0:12}) -> $NEW_VERSION" deb-from-split.log \
    "$NEW_VERSION" "$NEW_COMMIT" deb_install r1
  changes_with_job "deb: downgrade $NEW_VERSION -> 0.2.0-1 (${OLD_020:0:12})" deb-to-020.log \
    0.2.0-1 "${OLD_020:0:12}" deb_install r020
  changes_with_job "deb: upgrade 0.2.0-1 (${OLD_020:0:12}) -> $NEW_VERSION" deb-from-020.log \
    "$NEW_VERSION" "$NEW_COMMIT" deb_install r1
  changes_with_job "deb: downgrade $NEW_VERSION -> 0.3.0-1 (${OLD_PREV:0:12})" deb-to-prev.log \
    0.3.0-1 "${OLD_PREV:0:12}" deb_install prev
  check "deb: ... 0.3.0's hookrun wrote its metric state beside this release's spare, no temp file left" \
    eq "$(state_files)" "$HOOKRUN_STATE"
  changes_with_job "deb: upgrade 0.3.0-1 (${OLD_PREV:0:12}) -> $NEW_VERSION" deb-from-prev.log \
    "$NEW_VERSION" "$NEW_COMMIT" deb_install r1
  check "deb: ... hookrun's metric state through its kept spare again, no other file" \
    eq "$(state_files)" "$HOOKRUN_STATE"
  check "deb: through every change, the admin's /etc/default/qoslane kept" \
    cmp -s "$CH$WORK/default.edited" "$CH/etc/default/qoslane"

  # Regression: 0.1.0's prerm released the levels of running jobs when dpkg deconfigured qoslane
  # in favour of a package being installed (a Breaks, dpkg --auto-deconfigure): jobs lost their
  # level mid-run. Deconfigured so, qoslane stays: nothing is released. Deconfigured because
  # hookrun goes (no Epilog of qoslane will run), it is a removal: released.
  local j prerm=/var/lib/dpkg/info/qoslane.prerm
  j=$(submit high)
  check "deb: job $j (high) holds its level" job_holds "$j"
  check "deb: prerm deconfigure in-favour of a package being installed" \
    logged prerm-deconfigure.log in_ch "$prerm" deconfigure in-favour otherpkg 1.0
  check "deb: ... releases nothing: job $j's level held" still_holds "$j"
  check "deb: prerm deconfigure removing hookrun" \
    logged prerm-deconfigure-hookrun.log in_ch "$prerm" deconfigure in-favour otherpkg 1.0 removing hookrun "$NEW_VERSION"
  check "deb: ... is a removal: job $j's level released at once, audited as its Epilog" released "$j"
  end_job "$j"
}

# rpm_upgrade_paths: the same under rpm (an unedited /etc/sysconfig/qoslane); ends with this
# release (r1) installed
rpm_upgrade_paths() {
  PM=rpm
  check "rpm: the single-package qoslane of ${OLD_SINGLE:0:12} installed (rpm -i)" \
    logged rpm-i-single.log rpm_ch -i --nodeps "$(rpm_of single qoslane)"
  check "rpm: ... its site options differ from this release's (the upgrade changes the file)" bash -c \
    "! cmp -s '$SHIPPED_DEFAULT' '$CH/etc/sysconfig/qoslane'"
  changes_with_job "rpm: single package -> $NEW_VERSION (rpm -U of both)" rpm-from-single.log \
    "$NEW_VERSION" "$NEW_COMMIT" rpm_upgrade r1
  check "rpm: ... hookrun is its own package now, /usr/sbin/hookrun its file" \
    eq "$(rpm_ch -qf --qf '%{NAME}\n' /usr/sbin/hookrun)" hookrun
  check "rpm: ... the unedited /etc/sysconfig/qoslane replaced by this release's, no .rpmnew" bash -c \
    "cmp -s '$SHIPPED_DEFAULT' '$CH/etc/sysconfig/qoslane' && ! [ -e '$CH/etc/sysconfig/qoslane.rpmnew' ]"

  local j
  j=$(submit high)
  check "rpm: job $j (high) holds its level" job_holds "$j"
  check "rpm: a downgrade to the single package is refused (rpm -U --oldpackage)" \
    refused rpm-to-single.log rpm_ch -U --nodeps --oldpackage "$(rpm_of single qoslane)"
  check "rpm: ... saying why (hookrun's file)" says 'file /usr/sbin/hookrun from install of qoslane-.* conflicts with file from package hookrun-' rpm-to-single.log
  check "rpm: ... $NEW_VERSION still installed and in force, job $j's level held" \
    both_at "$NEW_VERSION" "$NEW_COMMIT" "$j"
  end_job "$j"; poll 30 "job $j's Epilog audited" epilog_audited "$j"
  check "rpm: ... its Epilog restored the baseline" released "$j"

  changes_with_job "rpm: downgrade $NEW_VERSION -> 0.1.0-1 (${OLD_SPLIT:0:12}, rpm -U --oldpackage)" \
    rpm-to-split.log 0.1.0-1 "${OLD_SPLIT:0:12}" rpm_upgrade split --oldpackage
  changes_with_job "rpm: upgrade 0.1.0-1 (${OLD_SPLIT:0:12}) -> $NEW_VERSION" rpm-from-split.log \
    "$NEW_VERSION" "$NEW_COMMIT" rpm_upgrade r1
  changes_with_job "rpm: downgrade $NEW_VERSION -> 0.2.0-1 (${OLD_020:0:12}, rpm -U --oldpackage)" \
    rpm-to-020.log 0.2.0-1 "${OLD_020:0:12}" rpm_upgrade r020 --oldpackage
  changes_with_job "rpm: upgrade 0.2.0-1 (${OLD_020:0:12}) -> $NEW_VERSION" rpm-from-020.log \
    "$NEW_VERSION" "$NEW_COMMIT" rpm_upgrade r1
  changes_with_job "rpm: downgrade $NEW_VERSION -> 0.3.0-1 (${OLD_PREV:0:12}, rpm -U --oldpackage)" \
    rpm-to-prev.log 0.3.0-1 "${OLD_PREV:0:12}" rpm_upgrade prev --oldpackage
  changes_with_job "rpm: upgrade 0.3.0-1 (${OLD_PREV:0:12}) -> $NEW_VERSION" rpm-from-prev.log \
    "$NEW_VERSION" "$NEW_COMMIT" rpm_upgrade r1
}
