#!/usr/bin/env bash
# notice.sh — the job's user is told, on a real Slurm: a job of a user (nobody; the chroot rigs' jobuser) whose ports sent
# bytes on an SL other than its level's (the stand-in perfquery answering real-format outputs,
# before and after the job) finds the bytes and the SL they went on in a file of its own that
# its Epilog left (/run/qoslane/told/JOBID, mode 0400), which that user reads and another does
# not; a job with nothing to tell gets none. And why not the job's AdminComment: a site Epilog
# hook's `scontrol update JobId=N AdminComment=…` is refused while the job completes ("Job has
# already finished"). Bounded polls. Leaves the rig stopped.
#
#   tests/e2e/notice.sh [--slurm VERSION|SUITE|host]   (or SLURM_VERSION=...; default: the host's)
set -euo pipefail
if [ "${1:-}" = --slurm ]; then export SLURM_VERSION=${2:?--slurm VERSION}; fi
. "$(dirname "$0")/lib.sh"

WORK=$(e2e_workdir qoslane-notice)
R=$WORK/root
trap e2e_cleanup EXIT
say "Slurm $SLURM_VERSION ($SLURM_SUITE): the off-level notice in a file of the job's user"
e2e_mapping "$CH$WORK/mapping.yml"

build_release
e2e_binaries
make_node "$R" "$CH$WORK/mapping.yml"
# The counters: the stand-in perfquery (copied: a chroot sees no repository), answering what
# the ports counted before the job; the job's hooks read them and may call scontrol.
install -d -m 0755 "$CH$R/fakebin"
cp "$FIX/bin/fake-perfquery" "$CH$R/fakebin/perfquery"
answer() { # answer before|after
  local op
  for op in xmtsl rcvsl; do cp "$FIX/perfquery/$op-$1.txt" "$CH$R/fakebin/any.$op.txt"; done
  cp "$FIX/perfquery/vlxmit-before.txt" "$CH$R/fakebin/any.vlxmit.txt"
}
answer before
env="QOSLANE_SMPQUERY=$R/bin/smpquery QOSLANE_PERFQUERY=$R/fakebin/perfquery QOSLANE_SCONTROL=/usr/bin/scontrol QOSLANE_TIMEOUT_MS=3000"
for phase in prolog epilog; do
  printf '#!/bin/sh\n%s exec %s --root %s %s\n' "$env" "$QL" "$R" "$phase" > "$CH$R/etc/slurm/$phase.d/10-qoslane"
done
# A site Epilog hook that tries the job's AdminComment, and says how slurmctld answered.
# shellcheck disable=SC2016  # the hook's variables, at run time
printf '#!/bin/sh\n/usr/bin/scontrol update JobId=$SLURM_JOB_ID AdminComment=probe >%s/out/ac.$SLURM_JOB_ID 2>&1\necho "rc=$?" >>%s/out/ac.$SLURM_JOB_ID\nexit 0\n' "$R" "$R" > "$CH$R/etc/slurm/epilog.d/95-admincomment"
chmod 0755 "$CH$R/etc/slurm/epilog.d/95-admincomment"
# The jobs' user, an association of the rig's account: nobody on the host's rig, the chroot
# rigs' own jobuser there.
if [ -n "$CH" ]; then JOBUSER=jobuser; else JOBUSER=nobody; export RIG_USERS="root nobody"; fi

say "starting the Slurm rig"
start_slurm "$R"
say "node $NODE up ($(slurm_cmd /usr/bin/sinfo -V))"

# A job of $JOBUSER's that lasts until its release file appears (bounded), writing nothing.
submit_as_user() {
  slurm_cmd /usr/sbin/runuser -u "$JOBUSER" -- /usr/bin/sbatch --parsable --qos=mission-critical \
    -o /dev/null -e /dev/null --chdir=/tmp \
    --wrap "i=0; while [ ! -e $WORK/release.\$SLURM_JOB_ID ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i+1)); done"
}
running() { [ "$(job_state "$1")" = RUNNING ]; }
not() { ! "$@"; }
audited() { [ "$(audit_of "$R" "$1" epilog outcome)" != "<none>" ]; }

say "case: $JOBUSER's job alone on the node sends 4096 bytes on SL 0 instead of its level's SL 3"
j=$(submit_as_user)
poll 30 "job $j running" running "$j"
# RUNNING may be said before the Prolog (PrologFlags=Alloc) read the counters: wait for its snapshot.
poll 30 "job $j's Prolog read the counters" test -s "$CH$R/run/qoslane/counters/$j.json"
answer after
release "$j"
poll 60 "job $j gone" is_gone "$j"
poll 30 "job $j's Epilog audited" audited "$j"
told=$R/run/qoslane/told/$j
check "the notice is there" test -f "$CH$told"
check "it is $JOBUSER's and only they read it" eq "$(slurm_cmd /usr/bin/stat -c '%U %a' "$told" 2>/dev/null)" "$JOBUSER 400"
as_user=$(slurm_cmd /usr/sbin/runuser -u "$JOBUSER" -- /bin/cat "$told" 2>&1 || true)
say "  $JOBUSER reads: $as_user"
check "the bytes, the SL they went on and the level's SL" has_text "$as_user" \
  "qoslane: 4096 bytes of this job left on SL 0 instead of level mission-critical's SL 3"
check "another user does not read it" not slurm_cmd /usr/sbin/runuser -u daemon -- /bin/cat "$told"
check "the Epilog's audit says where" has_text "$(audit_of "$R" "$j" epilog notes)" \
  "the job's user is told in /run/qoslane/told/$j"
ac=$(cat "$CH$R/out/ac.$j" 2>/dev/null || true)
say "  a site Epilog hook's AdminComment update: $(tr '\n' ' ' <<<"$ac")"
check "slurmctld refuses the job's AdminComment during its Epilog" has_text "$ac" "rc=1"
check "  because the job has finished" has_text "$ac" "already finished"

say "case: a job that sent only on its level's SL gets no notice"
answer before
j2=$(submit_as_user)
poll 30 "job $j2 running" running "$j2"
poll 30 "job $j2's Prolog read the counters" test -s "$CH$R/run/qoslane/counters/$j2.json"
release "$j2"
poll 60 "job $j2 gone" is_gone "$j2"
poll 30 "job $j2's Epilog audited" audited "$j2"
check "no notice for a job with nothing to tell" test ! -e "$CH$R/run/qoslane/told/$j2"

say "summary (Slurm $SLURM_VERSION): $E2E_PASSED passed, $E2E_FAILED failed"
echo "notice-$SLURM_VERSION: $E2E_PASSED passed, $E2E_FAILED failed"
[ "$E2E_FAILED" -eq 0 ]
