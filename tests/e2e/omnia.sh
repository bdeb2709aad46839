#!/usr/bin/env bash
# omnia.sh — the Omnia integration end to end, on this machine (as root): the
# packages built and their contents checked; the playbook applied with the
# local connection to the real single-node Slurm 22.05 rig (localhost is both
# slurm_control_node and slurm_node); jobs of each QoS; a mapping change
# (new tier, changed SL) detected, audited and applied on the next run; QoS
# priorities: one the site set survives every run unless
# slurm_qos_priority_overwrite opts it in, computed ones follow the mapping's
# order; the health check lines Slurm takes; a run
# with nothing to do reports changed=0; an invalid input stops at validation
# with file:line:column and key, leaving /etc/qoslane and /etc/slurm
# byte-identical; the removal path restores slurm.conf exactly.
# The fabric gate, on the multi-switch simulated fabric
# (rigs/fabric_path_rig.sh, queried as its node2): an aligned fabric passes;
# a spine that drops a level stops the rollout before any node changes
# (fail), or only warns (warn); with slurm_qos_network_opensm_apply the role
# writes `qoslane fabric sm-config`'s options into the rig's opensm.conf,
# HUPs its OpenSM and the audit passes; an unreadable fabric stops it with
# its own message; the periodic audit's cron job writes its textfile;
# slurm_qos_network_opensm_plugin installs the built qoslane-opensm-plugin
# package, adds qoslane_sm to the rig's opensm.conf beside a plugin the site
# lists (its words kept), and the rig's real OpenSM, restarted, loads it (its
# log line; records in the spool, a link bounce's too); a second run changes
# nothing; a run whose OpenSM restart fails fails (no time mark left), and the
# next, changing no line, restarts the OpenSM that predates opensm.conf; an
# option the plugin refuses (qoslane_spool_max=-1) fails the play (OpenSM did
# not load it: the new process is checked, not a record the old one wrote as
# it stopped), and so does the next run, restarting it again; the removal, its
# restart failed once, restarts the OpenSM still running the plugin on the next
# run, puts opensm.conf back byte for byte and removes the package; without a
# verdict its watcher is refused at validation, naming the key, and so are a
# spool with a comma and a cap of -1.
#
# This machine has no InfiniBand HCA: the test mapping is the shipped Omnia
# input with `fabric_check: off` (the SL/VL check itself is proven in
# crates/qoslane/tests/integration/fabric.rs and rigs/fabric_e2e.sh on the simulated
# fabric). Everything it changes on the machine (/etc/slurm, /etc/qoslane,
# qoslane's state, the qoslane and plugin packages, QoS it adds) is put back on exit, and
# the rig is left stopped. Bounded polls, no guessed sleeps.
#
#   bash tests/e2e/omnia.sh
#   QOSLANE_REQUIRE_TOOLS=1 ... fail (not skip) without rpmbuild
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { say "omnia.sh needs root (it drives slurm.conf and dpkg)"; exit 1; }
T_START=$(date +%s.%N)
OMNIA=$E2E_REPO/deploy/omnia
PLAYBOOK=/usr/bin/ansible-playbook
WORK=$(mktemp -d /tmp/qoslane-omnia.XXXXXX); chmod 0755 "$WORK"
mkdir -p "$WORK/out" "$WORK/input" "$WORK/packages"; chmod 1777 "$WORK/out"

# One Slurm rig per machine: the e2e suites take turns.
rig_lock "$RIG_LOCK_WAIT" || { say "another suite holds the Slurm rig lock ($RIG_LOCK)"; exit 1; }
if host_slurmctld && ! [ -s "$RIG_DIR/pids/slurmctld.pid" ]; then
  say "a slurmctld not started from $RIG_DIR is running; not touching it"; exit 1
fi

# ------------------------------------------------------------ machine state, put back on exit
STATE_PATHS=(etc/slurm etc/qoslane var/lib/qoslane run/qoslane var/log/qoslane var/lib/hookrun
             var/cache/qoslane var/lib/qoslane-fabric-audit etc/cron.d/qoslane-fabric-audit var/lib/prometheus/node-exporter/qoslane.prom
             var/lib/prometheus/node-exporter/hookrun.prom)
pre=()
for p in "${STATE_PATHS[@]}"; do [ -e "/$p" ] && pre+=("$p"); done
tar -C / -cpf "$WORK/pre-state.tar" --files-from /dev/null "${pre[@]}"
PKG_BEFORE=$(dpkg-query -W -f='${Status}' qoslane hookrun 2>/dev/null | grep -c "ok installed" || true)
PLUGIN_BEFORE=$(dpkg-query -W -f='${Status}' qoslane-opensm-plugin 2>/dev/null | grep -c "ok installed" || true)
QOS_BEFORE=""   # name|priority of each QoS once the rig is up
FABRIC_RIG=$E2E_REPO/rigs/fabric_path_rig.sh
FABRIC_ENV=""   # the multi-switch fabric rig's env file, once started

cleanup() {
  local rc=$?
  set +e
  if [ -s "$RIG_DIR/pids/slurmctld.pid" ]; then
    local q p
    for q in ultra-high standby; do   # QoS this test made the role create
      case " $QOS_BEFORE " in *" $q|"*) ;; *) sacctmgr -i delete qos "$q" >/dev/null 2>&1 ;; esac
    done
    for q in $QOS_BEFORE; do          # priorities the role changed
      p=${q#*|}; sacctmgr -i modify qos where name="${q%%|*}" set priority="$p" >/dev/null 2>&1
    done
  fi
  stop_slurm
  [ -z "$FABRIC_ENV" ] || bash "$FABRIC_RIG" stop "$FABRIC_ENV" >/dev/null 2>&1
  if [ "$PLUGIN_BEFORE" = 0 ] && dpkg-query -W -f='${Status}' qoslane-opensm-plugin 2>/dev/null | grep -q "ok installed\|config-files"; then
    dpkg --purge qoslane-opensm-plugin >/dev/null 2>&1
  fi
  if [ "$PKG_BEFORE" = 0 ]; then
    local pkg
    for pkg in qoslane hookrun; do
      if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed\|config-files"; then
        dpkg --purge "$pkg" >/dev/null 2>&1
      fi
    done
  fi
  for p in "${STATE_PATHS[@]}"; do rm -rf "/${p:?}"; done
  tar -C / -xpf "$WORK/pre-state.tar"
  say "machine state restored (${#pre[@]} paths from before), rig stopped"
  if [ "$rc" -ne 0 ] || [ "$E2E_FAILED" -ne 0 ]; then say "kept $WORK for inspection"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

# ------------------------------------------------------------ lint
t=$(date +%s.%N)
check "lint: yamllint and ansible-lint (production profile)" bash -c "bash '$OMNIA/lint.sh' >'$WORK/lint.log' 2>&1 || { cat '$WORK/lint.log' >&2; false; }"
say "lint in $(secs "$t")s"

# ------------------------------------------------------------ packages
say "building the packages (packaging/build.sh)"
t=$(date +%s.%N)
want=(--deb)
if command -v rpmbuild >/dev/null; then want=(); elif [ "${QOSLANE_REQUIRE_TOOLS:-0}" = 1 ]; then
  fail "rpmbuild missing (apt-get install rpm)"; else say "SKIP rpm: rpmbuild missing (apt-get install rpm)"; fi
bash "$E2E_REPO/packaging/build.sh" --out "$WORK/packages" "${want[@]}" 2>"$WORK/build.log" || { cat "$WORK/build.log" >&2; exit 1; }
say "packages built in $(secs "$t")s"
DEB=$(ls "$WORK"/packages/qoslane_*.deb)
HDEB=$(ls "$WORK"/packages/hookrun_*.deb)
# The crate's version (--version names the build: "0.2.0-1 (git …)").
VERSION=$(cd "$E2E_REPO" && cargo pkgid -p qoslane | sed 's/.*[#@]//')

# The files each package must hold (man pages: whatever qoslane generates).
mkdir -p "$WORK/man"; "$QL" generate man "$WORK/man"; "$(dirname "$QL")/hookrun" generate man "$WORK/man"
expected() { # expected ZSH_DIR DOC_EXT [FILE...]: qoslane's common list, plus each package's own files
  local zsh=$1 doc=$2; shift 2
  {
    printf '%s\n' "$@"
    printf '%s\n' /usr/sbin/qoslane \
      /usr/share/bash-completion/completions/qoslane "$zsh/_qoslane" \
      /usr/share/fish/vendor_completions.d/qoslane.fish \
      /usr/share/doc/qoslane/examples/qos-network.yml \
      /usr/lib/qoslane/hooks/prolog.d/10-qoslane /usr/lib/qoslane/hooks/epilog.d/50-qoslane \
      /usr/lib/qoslane/hooks/task-prolog.d/10-qoslane /usr/lib/qoslane/hooks/health.d/10-qoslane \
      /usr/lib/qoslane/hookrun /usr/lib/qoslane/remove-state \
      /etc/logrotate.d/qoslane \
      /usr/lib/systemd/system/qoslane-metrics.service /usr/lib/systemd/system/qoslane-fabric-audit.service \
      /usr/lib/systemd/system/qoslane-fabric-audit.timer /usr/lib/systemd/system/qoslane-fabric-watch.service \
      /usr/share/qoslane/prometheus/qoslane-alerts.yml /usr/share/qoslane/prometheus/scrape-qoslane.yml \
      /usr/share/qoslane/grafana/grafana-qoslane.json
    for d in admin-guide fabric hookrun metrics omnia; do
      echo "/usr/share/doc/qoslane/$d.$doc"
    done
    for m in "$WORK"/man/qoslane*.[58]; do echo "/usr/share/man/man${m##*.}/$(basename "$m").gz"; done
  } | sort
}
expected_hookrun() { # expected_hookrun ZSH_DIR [FILE...]: hookrun's package
  local zsh=$1; shift
  printf '%s\n' "$@" /usr/sbin/hookrun /usr/lib/hookrun/remove \
    /usr/share/bash-completion/completions/hookrun "$zsh/_hookrun" /usr/share/fish/vendor_completions.d/hookrun.fish \
    /usr/share/man/man8/hookrun.8.gz /usr/share/man/man5/hookrun.conf.5.gz | sort
}
deb_files=$(dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}' | grep -v '^/usr/share/doc/qoslane/copyright$' | sort)
check "deb: holds exactly the expected files" eq "$deb_files" "$(expected /usr/share/zsh/vendor-completions md.gz \
  /etc/default/qoslane /usr/share/doc/qoslane/changelog.Debian.gz /usr/share/lintian/overrides/qoslane)"
check "deb: hookrun's package holds exactly its files" eq \
  "$(dpkg-deb -c "$HDEB" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}' | grep -v '^/usr/share/doc/hookrun/copyright$' | sort)" \
  "$(expected_hookrun /usr/share/zsh/vendor-completions /usr/share/doc/hookrun/changelog.Debian.gz /usr/share/lintian/overrides/hookrun)"
check "deb: binaries are executable" eq \
  "$(dpkg-deb -c "$DEB" | awk '$1 !~ /^[dl]/ && $6 ~ /sbin\// && $1 != "-rwxr-xr-x"' | wc -l)" 0
check "deb: every hook is qoslane itself (a relative symlink, no shell)" eq \
  "$(dpkg-deb -c "$DEB" | awk '$6 ~ /^\.\/usr\/lib\/qoslane\/hooks\/.*\.d\/./ {print $1, $6, $8}' | sort)" \
  "$(for h in epilog.d/50-qoslane health.d/10-qoslane prolog.d/10-qoslane task-prolog.d/10-qoslane; do
       echo "lrwxrwxrwx ./usr/lib/qoslane/hooks/$h ../../../../sbin/qoslane"; done)"
check "deb: slurm.conf's entry is qoslane under hookrun's name (a relative symlink)" eq \
  "$(dpkg-deb -c "$DEB" | awk '$6 == "./usr/lib/qoslane/hookrun" {print $1, $6, $8}')" \
  "lrwxrwxrwx ./usr/lib/qoslane/hookrun ../../sbin/qoslane"
check "deb: version $VERSION, Depends on libc6" bash -c \
  "dpkg-deb -f '$DEB' Version | grep -qx '$VERSION-1' && dpkg-deb -f '$DEB' Depends | grep -q libc6"
if RPM=$(ls "$WORK"/packages/qoslane-[0-9]*.rpm 2>/dev/null); then
  rpm_files=$(rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$RPM" 2>/dev/null | awk '$1 !~ /^d/ {print $2}' | sort)
  check "rpm: holds exactly the expected files" eq "$rpm_files" "$(expected /usr/share/zsh/site-functions md /etc/sysconfig/qoslane /usr/share/licenses/qoslane/copyright)"
  HRPM=$(ls "$WORK"/packages/hookrun-*.rpm)
  check "rpm: hookrun's package holds exactly its files" eq \
    "$(rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$HRPM" 2>/dev/null | awk '$1 !~ /^d/ {print $2}' | sort)" \
    "$(expected_hookrun /usr/share/zsh/site-functions /usr/share/licenses/hookrun/copyright)"
  check "rpm: version $VERSION-1, license Apache-2.0" eq \
    "$(rpm -qp --qf '%{VERSION}-%{RELEASE} %{LICENSE}' "$RPM" 2>/dev/null)" "$VERSION-1 Apache-2.0"
fi

cat > "$WORK/inventory" <<EOF
[slurm_control_node]
localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3
[slurm_node]
localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3
EOF
export ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_LOCAL_TEMP=$WORK/ansible-tmp \
       ANSIBLE_REMOTE_TEMP=$WORK/ansible-tmp ANSIBLE_DEPRECATION_WARNINGS=0

# ------------------------------------------------------------ Omnia's slurm.conf layout
# The role's slurm.conf tasks alone, on a file shaped like Omnia's template
# (commented "#Prolog=" lines, Epilog=.../logout_user.sh, PrologFlags=Contain):
# each line lands in place or after its commented line, and the removal tasks
# give the file back byte for byte. No Slurm needed (scontrol: /bin/true).
say "case: Omnia's slurm.conf layout"
printf '%s\n' ClusterName=omnia SlurmctldHost=head '#Prolog=' '#Epilog=' \
  Epilog=/etc/slurm/epilog.d/logout_user.sh '#TaskProlog=' PrologFlags=Contain \
  '#HealthCheckProgram=' '#HealthCheckInterval=' 'NodeName=node[001-004] CPUs=64 State=UNKNOWN' \
  'PartitionName=normal Nodes=ALL Default=YES State=UP' > "$WORK/omnia-slurm.conf"
cp "$WORK/omnia-slurm.conf" "$WORK/omnia-slurm.conf.orig"
printf '%s\n' ClusterName=omnia SlurmctldHost=head '#Prolog=' Prolog=/usr/lib/qoslane/hookrun '#Epilog=' \
  Epilog=/usr/lib/qoslane/hookrun '#TaskProlog=' TaskProlog=/usr/lib/qoslane/hookrun PrologFlags=Contain,Alloc \
  '#HealthCheckProgram=' HealthCheckProgram=/usr/lib/qoslane/hookrun '#HealthCheckInterval=' \
  HealthCheckInterval=120 HealthCheckNodeState=ANY,CYCLE PrologEpilogTimeout=30 \
  'NodeName=node[001-004] CPUs=64 State=UNKNOWN' 'PartitionName=normal Nodes=ALL Default=YES State=UP' \
  > "$WORK/omnia-slurm.conf.expected"
printf '%s\n' '- name: The role'"'"'s slurm.conf tasks on a fixture file' '  hosts: slurm_control_node' \
  '  gather_facts: false' '  tasks:' '    - name: One tasks file of the role' \
  '      ansible.builtin.include_role:' '        name: slurm_qos_network' \
  '        tasks_from: "{{ conf_file }}"' '      loop: "{{ conf_steps.split() }}"' \
  '      loop_control:' '        loop_var: conf_file' > "$WORK/conf-only.yml"
conf_step() { # conf_step LOGNAME TASKS_FILE... (one play, in order; CONF_EXTRA: more -e NAME=VALUE)
  local name=$1; shift
  ANSIBLE_ROLES_PATH=$OMNIA/roles timeout 120 "$PLAYBOOK" -i "$WORK/inventory" "$WORK/conf-only.yml" \
    -e "slurm_qos_network_input_dir=$OMNIA/input" -e "conf_steps='$*'" \
    -e "slurm_qos_network_slurm_conf=$WORK/omnia-slurm.conf" -e slurm_qos_network_scontrol=/bin/true \
    ${CONF_EXTRA:+$CONF_EXTRA} >"$WORK/$name.log" 2>&1 || { tail -20 "$WORK/$name.log" >&2; return 1; }
}
check "omnia layout: role's slurm.conf tasks ran" conf_step omnia-conf load_input.yml read_slurm_conf.yml slurm_conf.yml
check "omnia layout: lines in place or after their commented lines, flags merged" \
  cmp "$WORK/omnia-slurm.conf.expected" "$WORK/omnia-slurm.conf"
check "omnia layout: original kept" cmp -s "$WORK/omnia-slurm.conf.orig" "$WORK/omnia-slurm.conf.qoslane-orig"
check "omnia layout: a second run changes nothing" bash -c "$(declare -f conf_step); WORK='$WORK' OMNIA='$OMNIA' PLAYBOOK='$PLAYBOOK' \
  conf_step omnia-conf-again load_input.yml read_slurm_conf.yml slurm_conf.yml &&
  grep -qE '^localhost +: .* changed=0 ' '$WORK/omnia-conf-again.log' && cmp -s '$WORK/omnia-slurm.conf.expected' '$WORK/omnia-slurm.conf'"
check "omnia layout: removal tasks ran" conf_step omnia-conf-remove remove_slurm_conf.yml
check "omnia layout: removal gives the file back byte for byte" cmp "$WORK/omnia-slurm.conf.orig" "$WORK/omnia-slurm.conf"

# Placement's controller side on the same file (no Slurm: sacctmgr /bin/false, so the QoS names
# are said to be unchecked): qoslane.conf, job_submit.lua and the module beside it, the Include
# line before the NodeName lines; a second run changes nothing; a site's own job_submit.lua stops
# the play naming the lines to add; the removal tasks take everything out again.
say "case: placement's controller side on Omnia's slurm.conf layout"
CONF_EXTRA="-e slurm_placement=true -e slurm_placement_placeholders=2 -e slurm_placement_cpus=64
  -e slurm_placement_memory_mb=1000 -e slurm_qos_network_sacctmgr=/bin/false
  -e slurm_qos_network_validator_found=$QL -e slurm_qos_network_site_options=$WORK/default-qoslane
  -e slurm_qos_network_slurmctld_restart=/bin/true"
check "placement layout: the role's placement tasks ran" conf_step omnia-place load_input.yml read_slurm_conf.yml placement.yml
check "placement layout: qoslane's job_submit.lua, the module and qoslane.conf beside slurm.conf" bash -c \
  "head -1 '$WORK/job_submit.lua' | grep -q '^-- job_submit.lua: qoslane placement\\.' && [ -s '$WORK/qoslane_placement.lua' ] && grep -q '^JobSubmitPlugins=lua$' '$WORK/qoslane.conf'"
check "placement layout: the Include line just before the first NodeName line" \
  eq "$(grep -B1 -m1 '^NodeName=' "$WORK/omnia-slurm.conf" | head -1)" "Include $WORK/qoslane.conf"
check "placement layout: slurmctld restarted (the placeholder nodes), not reconfigured" bash -c \
  "grep -qF 'RUNNING HANDLER [slurm_qos_network : Restart slurmctld]' '$WORK/omnia-place.log' &&
   ! grep -qF 'RUNNING HANDLER [slurm_qos_network : Reconfigure Slurm]' '$WORK/omnia-place.log'"
check "placement layout: unchecked QoS names said (sacctmgr failed)" grep -q "The mapping's QoS names were not checked against Slurm's" "$WORK/omnia-place.log"
place_again() {
  conf_step omnia-place-again load_input.yml read_slurm_conf.yml placement.yml &&
    grep -qE '^localhost +: .* changed=0 ' "$WORK/omnia-place-again.log"
}
check "placement layout: a second run changes nothing" place_again
printf '%s\n' "-- the site's own" 'function slurm_job_submit(j, p, u) return slurm.SUCCESS end' > "$WORK/job_submit.lua"
cp "$WORK/job_submit.lua" "$WORK/site-job_submit.lua"
place_site_stops() { ! conf_step omnia-place-site load_input.yml read_slurm_conf.yml placement.yml 2>/dev/null; }
check "placement layout: a site's own job_submit.lua stops the play" place_site_stops
check "placement layout: it names the file" \
  grep -qF "$WORK/job_submit.lua on localhost is the site's own (not qoslane's); it is not replaced" "$WORK/omnia-place-site.log"
check "placement layout: and the lines to add" bash -c \
  "grep -qF 'local qoslane = dofile(' '$WORK/omnia-place-site.log' && grep -qF '$WORK/qoslane_placement.lua' '$WORK/omnia-place-site.log' &&
   grep -qF 'qoslane.job_modify(job_desc, job_rec, part_list, modify_uid)' '$WORK/omnia-place-site.log'"
check "placement layout: the site's script is left as it was" cmp -s "$WORK/site-job_submit.lua" "$WORK/job_submit.lua"
check "placement layout: removal tasks ran" conf_step omnia-place-remove load_input.yml remove_placement.yml remove_placement_files.yml
check "placement layout: removal gives slurm.conf back byte for byte" cmp "$WORK/omnia-slurm.conf.orig" "$WORK/omnia-slurm.conf"
check "placement layout: the module and qoslane.conf gone, the site's job_submit.lua stays" bash -c \
  "[ ! -e '$WORK/qoslane_placement.lua' ] && [ ! -e '$WORK/qoslane.conf' ] && cmp -s '$WORK/site-job_submit.lua' '$WORK/job_submit.lua'"
rm -f "$WORK/job_submit.lua"
CONF_EXTRA=""

# ------------------------------------------------------------ the rig
# Prolog: the rig's env-dumping hook (a site script outside prolog.d, which
# the role adopts); Epilog: Omnia's epilog.d/logout_user.sh; no TaskProlog;
# PrologFlags=Alloc and PrologEpilogTimeout=30 as the site had them. The
# role takes these lines over, and the removal path must give them back.
install -d /etc/slurm/epilog.d
site_epilog_hook /etc/slurm/epilog.d/logout_user.sh "$WORK/out"
say "starting the Slurm rig"
t=$(date +%s.%N)
RIG_EPILOG=/etc/slurm/epilog.d/logout_user.sh RIG_TASKPROLOG="" RIG_TASKEPILOG="" \
RIG_PROLOGSLURMCTLD="" RIG_EPILOGSLURMCTLD="" RIG_PROLOG_FLAGS=Alloc RIG_PROLOG_EPILOG_TIMEOUT=30 \
RIG_EXTRA_CONF="AuthInfo=cred_expire=10" RIG_FORCE=1 \
  bash "$RIG" start >"$WORK/rig.log" 2>&1 || { tail -20 "$WORK/rig.log" >&2; exit 1; }
NODE=$(cat "$RIG_DIR/nodename")
say "rig up in $(secs "$t")s, node $NODE"
QOS_BEFORE=$(sacctmgr -n -P show qos format=name,priority | sort | tr '\n' ' ')
CONF=/etc/slurm/slurm.conf
CONF_SHA0=$(sha256sum < "$CONF")
cp "$CONF" "$WORK/slurm.conf.orig"
RIG_PROLOG_HOOK=$(sed -n 's/^Prolog=//p' "$CONF")

# ------------------------------------------------------------ input
cp "$OMNIA/input/slurm_qos_network.yml" "$OMNIA/input/slurm_qos_network_config.yml" "$WORK/input/"
MAP=$WORK/input/slurm_qos_network.yml CFG=$WORK/input/slurm_qos_network_config.yml
sed -i 's/^fabric_check: enforce$/fabric_check: off/' "$MAP"   # no HCA here
sed -i -e "s|^qoslane_package_dir: \"\"|qoslane_package_dir: \"$WORK/packages\"|" \
       -e "s|^qoslane_binary_dir: \"\"|qoslane_binary_dir: \"$E2E_RELEASE\"|" \
       -e 's/^prolog_epilog_timeout: 30$/prolog_epilog_timeout: 40/' \
       -e 's/^  normal: 100$/  normal: 150/' \
       -e 's/^slurm_qos_priority_overwrite: false$/slurm_qos_priority_overwrite: [normal]/' "$CFG"
if ! { grep -q '^fabric_check: off$' "$MAP" && grep -q '^prolog_epilog_timeout: 40$' "$CFG" && grep -q '^  normal: 150$' "$CFG" &&
       grep -q '^slurm_qos_priority_overwrite: \[normal\]$' "$CFG"; }; then
  say "could not prepare the test input from deploy/omnia/input"; exit 1
fi

# ------------------------------------------------------------ the fabric
# The audit host (localhost) reaches the simulated fabric as node2: qoslane
# runs smpquery/ibnetdiscover through symlinks to rigs/smpquery-sim, each
# with its `.env` beside it (slurm_qos_network_audit_env names them).
t=$(date +%s.%N)
FABRIC_ENV=$(bash "$FABRIC_RIG" start 2>"$WORK/fabric-rig.log") || { cat "$WORK/fabric-rig.log" >&2; exit 1; }
fabric() { # fabric VAR : a variable of the fabric rig's env file (re-read: restart-sm changes it)
  sed -n "s/^export $1=//p" "$FABRIC_ENV"
}
mkdir -p "$WORK/sim" "$WORK/textfile"
for tool in smpquery ibnetdiscover; do
  ln -s "$E2E_REPO/rigs/smpquery-sim" "$WORK/sim/$tool"
  { echo "export SIM_HOST=node2"; cat "$FABRIC_ENV"; } > "$WORK/sim/$tool.env"
done
say "fabric rig up in $(secs "$t")s ($(fabric RIG_WORK))"
AUDIT_ENV=(env "QOSLANE_SMPQUERY=$WORK/sim/smpquery" "QOSLANE_IBNETDISCOVER=$WORK/sim/ibnetdiscover")
audit_rc() { # audit_rc MAPPING : exit code of qoslane fabric audit (as the gate runs it)
  local rc=0; "${AUDIT_ENV[@]}" "$QL" fabric audit --config "$1" >"$WORK/audit.out" 2>&1 || rc=$?; echo "$rc"
}
sed -i 's/^slurm_qos_network_audit_timer: false$/slurm_qos_network_audit_timer: true/' "$CFG"
cat >> "$CFG" <<EOF

# The test's: the audit reaches the simulated fabric; its textfile in \$WORK.
slurm_qos_network_audit_env:
  QOSLANE_SMPQUERY: $WORK/sim/smpquery
  QOSLANE_IBNETDISCOVER: $WORK/sim/ibnetdiscover
slurm_qos_network_audit_textfile_dir: $WORK/textfile
EOF
# The periodic audit's verdict for the nodes' health and sync (in \$WORK: the
# filesystem "every node mounts" of this one-host cluster).
VERDICT=$WORK/shared/qoslane-fabric-verdict.json
mkdir -p "$WORK/shared"
sed -i "s|^slurm_qos_network_fabric_verdict: \"\"$|slurm_qos_network_fabric_verdict: $VERDICT|" "$CFG"
grep -qx "slurm_qos_network_fabric_verdict: $VERDICT" "$CFG" || { say "could not set the fabric verdict in $CFG"; exit 1; }
grep -q '^slurm_qos_network_audit_timer: true$' "$CFG" || { say "could not turn the periodic audit on in $CFG"; exit 1; }
CRON=/etc/cron.d/qoslane-fabric-audit
PROM=$WORK/textfile/qoslane-fabric-audit.prom
cron_run() { # the cron job's command, as cron's /bin/sh would run it
  local line; line=$(grep -E '^[*0-9]' "$CRON") || return 1
  sh -c "${line#* root }"
}

RUN=0
play() { # play NAME PLAYBOOK [args...] : run it, log in $WORK/NAME.log; return its exit code
  local name=$1 pb=$2; shift 2; RUN=$((RUN + 1))
  local t; t=$(date +%s.%N)
  set +e
  (cd "$OMNIA" && timeout 600 "$PLAYBOOK" -i "$WORK/inventory" "$pb" \
     -e "slurm_qos_network_input_dir=$WORK/input" "$@") >"$WORK/$name.log" 2>&1
  local rc=$?
  set -e
  say "playbook run $RUN ($name): exit $rc in $(secs "$t")s; $(grep -E '^localhost +:' "$WORK/$name.log" | tail -1 | tr -s ' ')"
  return $rc
}
recap() { grep -E '^localhost +:' "$WORK/$1.log" | tail -1 | sed -n "s/.* $2=\([0-9]*\).*/\1/p"; }
conf_value() { grep -iE "^\s*$1\s*=" "$CONF" | sed 's/^[^=]*=//'; }
conf_count() { grep -ciE "^\s*$1\s*=" "$CONF" || true; }
audit() { # audit EVENT FIELD [JOB] : FIELD of the last EVENT entry (of JOB)
  python3 - /var/log/qoslane/audit.jsonl "$@" <<'PY'
import json, sys
path, event, field = sys.argv[1:4]
job = sys.argv[4] if len(sys.argv) > 4 else None
hits = [l for l in map(json.loads, open(path))
        if l["event"] == event and (job is None or str(l.get("job_id")) == job)]
print(hits[-1].get(field) if hits else "<none>")
PY
}
audit_count() { grep -c "\"event\":\"$1\"" /var/log/qoslane/audit.jsonl 2>/dev/null || echo 0; }
qos_prio() { sacctmgr -n -P show qos "$1" format=priority; }
# priorities_ordered : every QoS of a level of $MAP has a higher priority in
# Slurm accounting than every QoS of the levels below it (levels are listed
# from the highest); says which pairs are not.
priorities_ordered() {
  python3 - "$MAP" <<'PY'
import subprocess, sys, yaml
levels = yaml.safe_load(open(sys.argv[1]))["levels"]
out = subprocess.run(["sacctmgr", "-n", "-P", "show", "qos", "format=name,priority"],
                     capture_output=True, text=True, check=True, timeout=60).stdout
have = {l.split("|")[0].lower(): int(l.split("|")[1]) for l in out.splitlines() if "|" in l}
prio = [(l["name"], {q: have[q.lower()] for q in l["qos"]}) for l in levels]
bad = [f"{hn} {hp} <= {ln} {lp}" for i, (hn, hq) in enumerate(prio) for (ln, lq) in prio[i + 1:]
       for hp in hq.values() for lp in lq.values() if hp <= lp]
print("; ".join(bad) or "ordered: " + ", ".join(f"{n} {q}" for n, q in prio), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}
# slurmd (22.05, SlurmdDebug=info) logs this line each time it reads
# slurm.conf: at start and on `scontrol reconfigure`.
slurmd_reads() { grep -c 'CPU frequency setting not configured' "$RIG_DIR/log/slurmd.log" || true; }
slurmd_reread() { [ "$(slurmd_reads)" -gt "$1" ]; }
slurmd_config() { /usr/bin/scontrol show config | sed -n "s/^$1 *= //p"; }

cat > "$WORK/job.sh" <<EOF
#!/bin/sh
env | sort > $WORK/out/\$SLURM_JOB_ID.env
EOF
chmod 0755 "$WORK/job.sh"
run_job() { # run_job QOS -> job id, once the job and its Epilog are done
  local q=$1 j
  j=$(timeout 120 /usr/bin/sbatch --wait --parsable --qos="$q" -o "$WORK/out/slurm-%j.out" "$WORK/job.sh") ||
    { say "sbatch --qos=$q failed: $(cat "$WORK"/out/slurm-*.out 2>/dev/null | tail -3)"; return 1; }
  poll 60 "job $j gone from squeue (Epilog done)" is_gone "$j" || return 1
  echo "$j"
}
env_of() { grep "^$2=" "$WORK/out/$1.env" | head -1 | cut -d= -f2-; }

# ------------------------------------------------------------ run 1: install
say "case: first run installs and wires everything"
# The site gave mission-critical its own priority (the input says 10000):
# the playbook must keep it, run after run, unless told to change it.
sacctmgr -i modify qos where name=mission-critical set priority=20000 >/dev/null
reads=$(slurmd_reads)
play install slurm_qos_network.yml || { tail -40 "$WORK/install.log" >&2; exit 1; }
check "run 1: changed, nothing failed" test "$(recap install changed)" -gt 0 -a "$(recap install failed)" = 0
check "run 1: slurmd reread slurm.conf" poll 30 "slurmd reconfigured" slurmd_reread "$reads"
cp "$CONF" "$WORK/slurm.conf.run1"
check "run 1: packages installed with dpkg" bash -c \
  "dpkg-query -W -f='\${Status} \${Version}' qoslane | grep -qx 'install ok installed $VERSION-1' &&
   dpkg-query -W -f='\${Status} \${Version}' hookrun | grep -qx 'install ok installed $VERSION-1'"
check "run 1: hookrun from its own package" eq "$(dpkg-query -S /usr/sbin/hookrun 2>/dev/null | cut -d: -f1)" hookrun
check "run 1: mapping installed byte for byte" cmp -s "$MAP" /etc/qoslane/qos-network.yml
# From a package, the hooks are links to the package's (a removed qoslane leaves broken links,
# which hookrun skips).
for h in prolog.d/10-qoslane epilog.d/50-qoslane health.d/10-qoslane task-prolog.d/10-qoslane; do
  check "run 1: hook $h links to the package's" eq "$(readlink "/etc/slurm/$h")" "/usr/lib/qoslane/hooks/$h"
done
check "run 1: the site Prolog is adopted into prolog.d" \
  eq "$(readlink "/etc/slurm/prolog.d/00-$(basename "$RIG_PROLOG_HOOK")")" "$RIG_PROLOG_HOOK"
check "run 1: epilog.d/logout_user.sh kept" test -x /etc/slurm/epilog.d/logout_user.sh
check "run 1: hookrun.conf from the switches" bash -c \
  "grep -qx 'on_failure = drain' /etc/slurm/hookrun.conf && grep -qx 'budget = 20s' /etc/slurm/hookrun.conf"
for kv in Prolog=/usr/lib/qoslane/hookrun Epilog=/usr/lib/qoslane/hookrun TaskProlog=/usr/lib/qoslane/hookrun \
          HealthCheckProgram=/usr/lib/qoslane/hookrun HealthCheckInterval=120 HealthCheckNodeState=ANY,CYCLE \
          PrologFlags=Alloc PrologEpilogTimeout=40; do
  k=${kv%%=*}
  check "run 1: slurm.conf has $kv, once" eq "$(conf_count "$k") $(conf_value "$k")" "1 ${kv#*=}"
done
strip_managed() { grep -viE '^\s*(Prolog|Epilog|TaskProlog|HealthCheckProgram|HealthCheckInterval|HealthCheckNodeState|PrologFlags|PrologEpilogTimeout)\s*=' "$1"; }
check "run 1: every other slurm.conf line untouched" cmp -s <(strip_managed "$WORK/slurm.conf.orig") <(strip_managed "$CONF")
check "run 1: original slurm.conf kept for removal" cmp -s "$WORK/slurm.conf.orig" "$CONF.qoslane-orig"
check "run 1: slurmctld uses qoslane's hookrun entry (reconfigured)" eq "$(slurmd_config Prolog)" /usr/lib/qoslane/hookrun
check "run 1: sync audited the first mapping" eq "$(audit mapping_changed outcome)" applied
check "run 1: audited hash = the admin's file" eq "$(audit mapping_changed mapping_sha256)" "$(sha256sum < "$MAP" | cut -d' ' -f1)"
check "run 1: QoS standby created (priority 1)" eq "$(sacctmgr -n -P show qos standby format=priority)" 1
check "run 1: QoS normal priority set to 150 (slurm_qos_priority_overwrite: [normal])" eq "$(qos_prio normal)" 150
check "run 1: the site's mission-critical priority kept (20000, not the input's 10000)" eq "$(qos_prio mission-critical)" 20000
check "run 1: the playbook says it kept it" grep -qF "mission-critical keeps 20000 (slurm_qos_priority says 10000)" "$WORK/install.log"
check "run 1: QoS priorities follow the mapping's order" priorities_ordered
# (scontrol prints the flag first: CYCLE,ANY)
check "run 1: slurmctld runs the health check every 120 s on ANY,CYCLE nodes" eq \
  "$(slurmd_config HealthCheckInterval)/$(slurmd_config HealthCheckNodeState)" "120 sec/CYCLE,ANY"
check "run 1: hookrun health passes (fabric_check off, no HCA)" bash -c \
  "/usr/sbin/hookrun health 2>&1 | grep -q '10-qoslane: ok'"
check "run 1: the fabric gate audited the new mapping on the aligned fabric and passed" bash -c \
  "grep -A2 'TASK .*Audit the fabric against the new mapping' '$WORK/install.log' | grep -q '^ok: \[localhost\]' &&
   ! grep -qE '(Warning|Failed)\\. The fabric' '$WORK/install.log'"
check "run 1: the periodic audit is a cron job (no systemd here)" grep -qF "fabric audit --timeout 60 --mapping /var/lib/qoslane-fabric-audit/qos-network.yml --textfile $PROM" "$CRON"
check "run 1: the cron job's command writes the textfile: every level carried" bash -c \
  "$(declare -f cron_run); CRON='$CRON'; cron_run; [ \$? = 0 ] && grep -qx 'qoslane_fabric_audit_success 1' '$PROM' &&
   grep -qx 'qoslane_fabric_audit_level_carried{level=\"mission-critical\"} 1' '$PROM'"
check "run 1: the periodic audit writes the fabric verdict for the nodes" grep -qF -- "--verdict $VERDICT" "$CRON"
check "run 1: the verdict the cron job's command wrote is of the mapping the nodes have" \
  python3 "$E2E_REPO/tests/e2e/verdict_of.py" "$VERDICT" /etc/qoslane/qos-network.yml mission-critical
check "run 1: the node's health and sync read it (QOSLANE_FABRIC_VERDICT)" grep -qx "QOSLANE_FABRIC_VERDICT=$VERDICT" /etc/default/qoslane

cp /etc/qoslane/qos-network.yml "$WORK/mapping.run1"
say "case: a --qos=high job gets the high level's SL"
j=$(run_job high)
check "high job: UCX_IB_SL=2" eq "$(env_of "$j" UCX_IB_SL)" 2
check "high job: NCCL_IB_SL=2" eq "$(env_of "$j" NCCL_IB_SL)" 2
check "high job: MV2_DEFAULT_SERVICE_LEVEL=2" eq "$(env_of "$j" MV2_DEFAULT_SERVICE_LEVEL)" 2
check "high job: QOSLANE_LEVEL=high" eq "$(env_of "$j" QOSLANE_LEVEL)" high
check "high job: prolog audited (qos from squeue)" eq "$(audit prolog qos "$j")/$(audit prolog qos_source "$j")/$(audit prolog level "$j")" high/squeue/high
epilog_audited() { [ "$(audit epilog job_id "$1")" = "$1" ]; }
check "high job: epilog audited" poll 30 "epilog audited for job $j" epilog_audited "$j"
check "high job: Omnia's logout_user.sh ran under hookrun" grep -qx "$j" "$WORK/out/logout_user.log"
check "high job: the adopted site Prolog ran under hookrun" test -s "$RIG_DIR/out/prolog_job$j.env"
j=$(run_job mission-critical)
check "mission-critical job: UCX_IB_SL=3, its own level" eq "$(env_of "$j" UCX_IB_SL)/$(env_of "$j" QOSLANE_LEVEL)" 3/mission-critical

# ------------------------------------------------------------ run 2: a new tier, a changed SL
say "case: the admin adds an ultra-high tier and moves high to SL 4"
python3 - "$MAP" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
new_tier = ("  - name: ultra-high\n    qos: [ultra-high]\n    service_level: 5\n    virtual_lane: 5\n")
s = s.replace("  - name: mission-critical\n", new_tier + "  - name: mission-critical\n", 1)
s = s.replace("  - name: high\n    qos: [high]\n    service_level: 2\n    virtual_lane: 2\n",
              "  - name: high\n    qos: [high]\n    service_level: 4\n    virtual_lane: 4\n", 1)
open(p, "w").write(s)
PY
if ! { grep -q 'name: ultra-high' "$MAP" && grep -q 'service_level: 4' "$MAP"; }; then say "mapping edit failed"; exit 1; fi
say "case: a spine drops mission-critical's SL behind the SM: the gate (fail) stops the rollout"
bash "$FABRIC_RIG" misalign "$FABRIC_ENV" spine1 2 3 15 2>>"$WORK/fabric-rig.log" >/dev/null
SPINE1_LID=$(bash "$FABRIC_RIG" lid "$FABRIC_ENV" spine1)
snapshot() { find /etc/qoslane /etc/slurm -type f -print0 | sort -z | xargs -0 sha256sum; find /etc/slurm -type l -printf '%p -> %l\n' | sort; }
snapshot > "$WORK/gate-before.sha"
audits_before=$(audit_count mapping_changed)
if play gate-fail slurm_qos_network.yml; then fail "gate (fail): the playbook failed"; else pass "gate (fail): the playbook failed"; fi
check "gate (fail): the message names level, switch spine1, its LID ($SPINE1_LID) and the ports" grep -qF \
  "level mission-critical: SL 3 -> VL 15 (dropped: VL 15 is the management lane) at switch spine1 (lid $SPINE1_LID) every in port -> 2" "$WORK/gate-fail.log"
check "gate (fail): says which level, and that no node was changed" bash -c \
  "grep -qF 'Failed. The fabric does not carry 1 level(s) of $MAP (mission-critical)' '$WORK/gate-fail.log' && grep -qF 'No node was changed.' '$WORK/gate-fail.log'"
check "gate (fail): stopped before any node task" bash -c "! grep -qE 'TASK .*(Install the QoS network mapping|Apply the mapping on the node|Install the hookrun and qoslane packages|Install the packages)' '$WORK/gate-fail.log'"
check "gate (fail): the node's mapping is still run 1's" cmp -s "$WORK/mapping.run1" /etc/qoslane/qos-network.yml
snapshot > "$WORK/gate-after.sha"
check "gate (fail): /etc/qoslane and /etc/slurm byte-identical, nothing audited" bash -c \
  "cmp -s '$WORK/gate-before.sha' '$WORK/gate-after.sha' && [ '$(audit_count mapping_changed)' = '$audits_before' ]"

say "case: the same fabric with slurm_qos_network_fabric_audit: warn: the rollout goes on, warned"
changes_before=$(audit_count mapping_changed)
play change slurm_qos_network.yml -e slurm_qos_network_fabric_audit=warn || { tail -40 "$WORK/change.log" >&2; exit 1; }
check "run 2 (warn): the warning names level, spine1, its LID and the ports" bash -c \
  "grep -qF 'Warning. The fabric does not carry 1 level(s)' '$WORK/change.log' &&
   grep -qF 'at switch spine1 (lid $SPINE1_LID) every in port -> 2' '$WORK/change.log'"
check "run 2: reported changed" test "$(recap change changed)" -gt 0 -a "$(recap change failed)" = 0
check "run 2: the new mapping is on the node" cmp -s "$MAP" /etc/qoslane/qos-network.yml
check "run 2: sync audited mapping_changed" eq "$(audit_count mapping_changed)" "$((changes_before + 1))"
check "run 2: audited hash = the edited file" eq "$(audit mapping_changed mapping_sha256)" "$(sha256sum < "$MAP" | cut -d' ' -f1)"
check "run 2: the task that ran sync changed" grep -q "changed: \[localhost\]" <(sed -n '/Apply the mapping on the node/,/^$/p' "$WORK/change.log")
check "run 2: QoS ultra-high created" eq "$(sacctmgr -n -P show qos ultra-high format=name)" ultra-high
check "run 2: the site's mission-critical priority survives a second run" eq "$(qos_prio mission-critical)" 20000
check "run 2: ultra-high (top level, no listed priority) computed above every level below: 20100" eq "$(qos_prio ultra-high)" 20100
check "run 2: QoS priorities follow the mapping's order" priorities_ordered
sacctmgr -i modify user root set qos+=ultra-high >/dev/null   # the admin grants the new QoS
j=$(run_job high)
check "high job after the change: UCX_IB_SL=4" eq "$(env_of "$j" UCX_IB_SL)" 4
check "high job after the change: audited with the new hash" eq "$(audit prolog mapping_sha256 "$j")" "$(sha256sum < "$MAP" | cut -d' ' -f1)"
j=$(run_job ultra-high)
check "ultra-high job: UCX_IB_SL=5, QOSLANE_LEVEL=ultra-high" eq "$(env_of "$j" UCX_IB_SL)/$(env_of "$j" QOSLANE_LEVEL)" 5/ultra-high

# ------------------------------------------------------------ run 3: nothing to do
bash "$FABRIC_RIG" restart-sm "$FABRIC_ENV" 2>>"$WORK/fabric-rig.log"   # a fresh SM rewrites every table
check "fabric realigned: the audit passes" eq "$(audit_rc "$MAP")" 0
say "case: a run with nothing changed changes nothing"
conf_sha=$(sha256sum < "$CONF")
play noop slurm_qos_network.yml || { tail -40 "$WORK/noop.log" >&2; exit 1; }
check "run 3: PLAY RECAP changed=0" eq "$(recap noop changed)" 0
check "run 3: sync not run (mapping unchanged)" grep -q "skipping: \[localhost\]" <(sed -n '/Apply the mapping on the node/,/^$/p' "$WORK/noop.log")
check "run 3: Slurm not reconfigured" bash -c "! grep -q 'RUNNING HANDLER' '$WORK/noop.log'"
check "run 3: slurm.conf unchanged" eq "$(sha256sum < "$CONF")" "$conf_sha"
check "run 3: the site's mission-critical priority still 20000" eq "$(qos_prio mission-critical)" 20000

say "case: slurm_qos_priority_overwrite: true lets the playbook set every priority"
say "  and, on an OpenSM whose switch tables drop ultra-high (SL 5 -> VL 15), slurm_qos_network_opensm_apply fixes the SM"
bash "$FABRIC_RIG" reconf "$FABRIC_ENV" qos_swe_sl2vl 0,1,2,3,4,15,6,7,0,1,2,3,4,5,6,7 2>>"$WORK/fabric-rig.log"
check "opensm: the wrong table is caught by the audit" eq "$(audit_rc "$MAP")" 1
OSM_CONF=$(fabric RIG_WORK)/opensm.conf
fabric RIG_OSM_PID > "$WORK/opensm.pid"
osm_ups() { grep -c "SUBNET UP" "$(fabric RIG_WORK)/opensm.log" || true; }
ups_before=$(osm_ups)
cp "$CFG" "$WORK/config.good"
sed -i 's/^slurm_qos_priority_overwrite: .*/slurm_qos_priority_overwrite: true/' "$CFG"
play overwrite slurm_qos_network.yml -e slurm_qos_network_opensm_apply=true -e "slurm_qos_network_opensm_conf=$OSM_CONF" \
  -e "slurm_qos_network_opensm_pid_file=$WORK/opensm.pid" || { tail -40 "$WORK/overwrite.log" >&2; exit 1; }
"$QL" fabric sm-config --config "$MAP" --format json |
  python3 -c 'import json, sys; [print(k, v) for k, v in json.load(sys.stdin)["options"].items()]' > "$WORK/sm-options"
check "opensm: every option of sm-config is a line of opensm.conf, once" bash -c \
  "[ -s '$WORK/sm-options' ] && while read -r k v; do [ \"\$(grep -c \"^\$k \" '$OSM_CONF')\" = 1 ] && grep -qx \"\$k \$v\" '$OSM_CONF' || exit 1; done < '$WORK/sm-options'"
check "opensm: HUPed, it re-swept" test "$(osm_ups)" -gt "$ups_before"
check "opensm: the gate passed (no warning, no failure)" bash -c "! grep -qE '(Warning|Failed)\\. The fabric' '$WORK/overwrite.log'"
check "opensm: the audit passes for every level" eq "$(audit_rc "$MAP")" 0
check "overwrite: mission-critical set to the input's 10000" eq "$(qos_prio mission-critical)" 10000
check "overwrite: ultra-high recomputed above it: 10100" eq "$(qos_prio ultra-high)" 10100
check "overwrite: QoS priorities follow the mapping's order" priorities_ordered
check "overwrite: nothing else changed (slurm.conf)" eq "$(sha256sum < "$CONF")" "$conf_sha"
cp "$WORK/config.good" "$CFG"

# ------------------------------------------------------------ the OpenSM event plugin
# slurm_qos_network_opensm_plugin on the rig's real OpenSM (OpenSM host: localhost, the rig's
# opensm.conf), left on in the input for the cases below (the removal takes it out): the
# plugin's package from the packages built above installed with dpkg; qoslane_sm added beside a
# plugin the site already lists (its words in event_plugin_options kept); OpenSM restarted, by
# the rig as `systemctl restart opensm` would (a fresh SM, on the next HCA), loads the
# package's library: its log says so and the spool gets records, of a link bounce too. A second
# run changes nothing and does not restart OpenSM. No systemd here: the watcher is not started,
# and the play says how to run it.
say "case: slurm_qos_network_opensm_plugin: the plugin loaded into the rig's OpenSM, beside the site's plugin"
SPOOL=$WORK/sm-spool
cat > "$WORK/restart-opensm" <<EOS
#!/bin/sh
exec bash $FABRIC_RIG restart-sm $FABRIC_ENV
EOS
chmod 0755 "$WORK/restart-opensm"
printf '%s\n' 'event_plugin_name other_plugin' 'event_plugin_options other_word=1' >> "$OSM_CONF"
cp "$OSM_CONF" "$WORK/opensm.conf.before-plugin"
sed -i 's/^slurm_qos_network_opensm_plugin: false$/slurm_qos_network_opensm_plugin: true/' "$CFG"
cat >> "$CFG" <<EOF

# The test's: the rig's OpenSM (restarted by the rig), the plugin's spool in \$WORK.
slurm_qos_network_opensm_host: localhost
slurm_qos_network_opensm_conf: $OSM_CONF
slurm_qos_network_opensm_restart_command: $WORK/restart-opensm
slurm_qos_network_opensm_plugin_spool: $SPOOL
EOF
grep -q '^slurm_qos_network_opensm_plugin: true$' "$CFG" || { say "could not turn slurm_qos_network_opensm_plugin on in $CFG"; exit 1; }
osm_pid_before=$(fabric RIG_OSM_PID)
play plugin slurm_qos_network.yml || { tail -40 "$WORK/plugin.log" >&2; exit 1; }
check "plugin: the package installed on the OpenSM host (dpkg, the build's version)" bash -c \
  "dpkg-query -W -f='\${Status} \${Version}' qoslane-opensm-plugin | grep -qx 'install ok installed $VERSION-1'"
check "plugin: qoslane_sm added after the site's plugin, once" eq \
  "$(grep -c '^event_plugin_name' "$OSM_CONF") $(sed -n 's/^event_plugin_name //p' "$OSM_CONF")" "1 other_plugin qoslane_sm"
check "plugin: its words added to event_plugin_options, the site's kept" eq \
  "$(grep -c '^event_plugin_options' "$OSM_CONF") $(sed -n 's/^event_plugin_options //p' "$OSM_CONF")" \
  "1 other_word=1,qoslane_spool=$SPOOL,qoslane_spool_max=1048576"
check "plugin: every other line of opensm.conf untouched" cmp -s <(grep -v '^event_plugin_' "$WORK/opensm.conf.before-plugin") <(grep -v '^event_plugin_' "$OSM_CONF")
check "plugin: OpenSM restarted (not HUPed: the plugin's options are read at start)" test "$(fabric RIG_OSM_PID)" != "$osm_pid_before"
OSM_LOG=$(fabric RIG_WORK)/opensm.log
check "plugin: OpenSM loaded the package's build ($VERSION-1), for its own version" \
  grep -q "qoslane_sm: build $VERSION-1 .*for OpenSM" "$OSM_LOG"
check "plugin: its log says where it spools" grep -qF "qoslane_sm: spooling to $SPOOL/events" "$OSM_LOG"
check "plugin: the site's other plugin was tried too (the line kept it)" grep -qF "cannot load plugin 'other_plugin'" "$OSM_LOG"
spooled() { local n; n=$(stat -c %s "$SPOOL/events" 2>/dev/null) || return 1; [ "$n" -gt 0 ] && [ $((n % 64)) = 0 ] && echo "$n"; }
check "plugin: the spool has whole 64-byte records (the SM's start and first sweep)" poll 10 "records in $SPOOL" spooled
n_before=$(spooled || echo 0)
bash "$FABRIC_RIG" bounce "$FABRIC_ENV" leaf1 3 2>>"$WORK/fabric-rig.log"
grew() { [ "$(spooled || echo 0)" -gt "$n_before" ]; }
check "plugin: a link bounce adds records ($n_before bytes before)" poll 10 "records of the bounce" grew
check "plugin: no systemd here: the watcher not started, the play says how to run it" \
  grep -qF "does not run systemd: qoslane-fabric-watch.service was not started" "$WORK/plugin.log"
osm_pid=$(fabric RIG_OSM_PID)
cp "$OSM_CONF" "$WORK/opensm.conf.plugin"
play plugin-again slurm_qos_network.yml || { tail -40 "$WORK/plugin-again.log" >&2; exit 1; }
check "plugin: a second run changes nothing (changed=0)" eq "$(recap plugin-again changed)" 0
check "plugin: a second run leaves OpenSM running (not restarted) and opensm.conf as it was" bash -c \
  "[ '$(fabric RIG_OSM_PID)' = '$osm_pid' ] && cmp -s '$WORK/opensm.conf.plugin' '$OSM_CONF'"

# A run that edited opensm.conf and then failed leaves the next run to finish: whether OpenSM runs
# the plugin is read from the running OpenSM (its process maps libqoslane_sm.so, holds the spool
# open, started after opensm.conf's last change), not from what the run changed; the load is
# proved by the new process, not by a record in the spool (the old OpenSM's STOP record lands
# there after the restart). No time mark is left behind on the SM host, whatever fails.
say "case: the plugin's restart fails, then its options are refused: each run fails, the next restarts OpenSM"
OSM_LOG=$(fabric RIG_WORK)/opensm.log
marks() { find /tmp -maxdepth 1 -name 'qoslane-sm-restart.*' 2>/dev/null | sort; }
marks_before=$(marks)
osm_pid=$(fabric RIG_OSM_PID)
if play plugin-restart-fails slurm_qos_network.yml -e slurm_qos_network_opensm_plugin_spool_max=2097152 \
  -e slurm_qos_network_opensm_restart_command=/bin/false; then
  fail "plugin, restart fails: the playbook failed"; else pass "plugin, restart fails: the playbook failed"; fi
check "plugin, restart fails: says so, naming the command" \
  grep -qF "loads qoslane_sm, but OpenSM could not be restarted (/bin/false exited 1" "$WORK/plugin-restart-fails.log"
check "plugin, restart fails: opensm.conf has the new cap, the old OpenSM still runs" bash -c \
  "grep -qx 'event_plugin_options other_word=1,qoslane_spool=$SPOOL,qoslane_spool_max=2097152' '$OSM_CONF' &&
   [ '$(fabric RIG_OSM_PID)' = '$osm_pid' ]"
check "plugin, restart fails: no time mark left on the SM host" eq "$(marks)" "$marks_before"
cp "$OSM_CONF" "$WORK/opensm.conf.2m"
play plugin-stale slurm_qos_network.yml -e slurm_qos_network_opensm_plugin_spool_max=2097152 ||
  { tail -40 "$WORK/plugin-stale.log" >&2; exit 1; }
OSM_LOG=$(fabric RIG_WORK)/opensm.log
check "plugin, the next run (opensm.conf already edited): OpenSM restarted, it read the new cap" bash -c \
  "cmp -s '$WORK/opensm.conf.2m' '$OSM_CONF' && [ '$(fabric RIG_OSM_PID)' != '$osm_pid' ] &&
   grep -qF 'qoslane_sm: spooling to $SPOOL/events (at most 2097152 bytes)' '$OSM_LOG'"
# The role refuses qoslane_spool_max=-1 at validation (below): its words are given whole here,
# as a plugin that refuses what the role passes.
REFUSED=(-e "{\"slurm_qos_network_sm_words\": [\"qoslane_spool=$SPOOL\", \"qoslane_spool_max=-1\"]}"
         -e slurm_qos_network_opensm_plugin_timeout=5)
for again in "" -again; do
  osm_pid=$(fabric RIG_OSM_PID)
  if play "plugin-refused$again" slurm_qos_network.yml "${REFUSED[@]}"; then
    fail "plugin refused$again: the playbook failed"; else pass "plugin refused$again: the playbook failed"; fi
  OSM_LOG=$(fabric RIG_WORK)/opensm.log
  check "plugin refused$again: OpenSM restarted, the plugin refused qoslane_spool_max=-1" bash -c \
    "[ '$(fabric RIG_OSM_PID)' != '$osm_pid' ] && grep -qF 'qoslane_spool_max=-1: not a number of bytes >= 256' '$OSM_LOG'"
  check "plugin refused$again: the play says OpenSM did not load it" \
    grep -qF "OpenSM did not load it" "$WORK/plugin-refused$again.log"
done
check "plugin refused: no time mark left on the SM host" eq "$(marks)" "$marks_before"
osm_pid=$(fabric RIG_OSM_PID)
play plugin-back slurm_qos_network.yml || { tail -40 "$WORK/plugin-back.log" >&2; exit 1; }
OSM_LOG=$(fabric RIG_WORK)/opensm.log
check "plugin back to the input's options: OpenSM restarted, the plugin loaded, opensm.conf as after the first run" bash -c \
  "[ '$(fabric RIG_OSM_PID)' != '$osm_pid' ] && cmp -s '$WORK/opensm.conf.plugin' '$OSM_CONF' &&
   grep -qF 'qoslane_sm: spooling to $SPOOL/events (at most 1048576 bytes)' '$OSM_LOG'"
osm_pid=$(fabric RIG_OSM_PID)
play plugin-back-again slurm_qos_network.yml || { tail -40 "$WORK/plugin-back-again.log" >&2; exit 1; }
check "plugin back, a second run: changed=0, OpenSM not restarted" bash -c \
  "[ '$(recap plugin-back-again changed)' = 0 ] && [ '$(fabric RIG_OSM_PID)' = '$osm_pid' ]"

# ------------------------------------------------------------ invalid input
say "case: an invalid mapping stops at validation; nothing on the node changes"
snapshot > "$WORK/before.sha"
cp "$MAP" "$WORK/mapping.good"
sl_line=$(grep -n '^    service_level: 4$' "$MAP" | head -1 | cut -d: -f1)
key_line=$(grep -n '^on_failure: continue$' "$MAP" | cut -d: -f1)
sed -i -e "${sl_line}s/service_level: 4/service_level: 22/" -e "${key_line}s/^on_failure:/on_falure:/" "$MAP"
if play invalid slurm_qos_network.yml; then fail "invalid mapping: the playbook failed"; else pass "invalid mapping: the playbook failed"; fi
check "invalid mapping: names line $sl_line, column 20, key service_level and the reason" \
  grep -qF "slurm_qos_network.yml:$sl_line:20: error: key \`service_level\`: \`service_level\` must be an integer from 0 to 15, found 22" "$WORK/invalid.log"
check "invalid mapping: names line $key_line, the unknown key and the suggestion" \
  grep -qF "slurm_qos_network.yml:$key_line:1: error: key \`on_falure\`: unknown key \`on_falure\` in the mapping file; did you mean \`on_failure\`?" "$WORK/invalid.log"
check "invalid mapping: stopped before any node play" bash -c "! grep -q 'PLAY \[Configure' '$WORK/invalid.log'"
snapshot > "$WORK/after.sha"
check "invalid mapping: /etc/qoslane and /etc/slurm byte-identical" cmp -s "$WORK/before.sha" "$WORK/after.sha"
cp "$WORK/mapping.good" "$MAP"
cp "$CFG" "$WORK/config.good"
budget_line=$(grep -n '^hook_budget: 20$' "$CFG" | cut -d: -f1)
sed -i 's/^hook_budget: 20$/hook_budget: 35/' "$CFG"
if play invalid-config slurm_qos_network.yml; then fail "invalid switch: the playbook failed"; else pass "invalid switch: the playbook failed"; fi
check "invalid switch: names the file, line $budget_line, hook_budget and the limit" \
  grep -qF "slurm_qos_network_config.yml, line $budget_line: hook_budget must be an integer of seconds from 1 to prolog_epilog_timeout - 7 (40 - 7), found 35" "$WORK/invalid-config.log"
snapshot > "$WORK/after2.sha"
check "invalid switch: /etc/qoslane and /etc/slurm byte-identical" cmp -s "$WORK/before.sha" "$WORK/after2.sha"
cp "$WORK/config.good" "$CFG"
# issue 39: 5 and 400 were accepted (slurmd's 60 s per check; the probe cache's 300 s)
interval_line=$(grep -n '^health_check_interval: ' "$CFG" | cut -d: -f1)
for bad in 5 400; do
  sed -i "s/^health_check_interval: .*/health_check_interval: $bad/" "$CFG"
  if play "invalid-interval-$bad" slurm_qos_network.yml; then fail "health_check_interval $bad: the playbook failed"; else pass "health_check_interval $bad: the playbook failed"; fi
  check "health_check_interval $bad: names the file, line $interval_line and the bounds" \
    grep -qF "slurm_qos_network_config.yml, line $interval_line: health_check_interval must be 0 (leave slurm.conf's health check alone) or an integer of seconds from 60 to 300, found $bad." "$WORK/invalid-interval-$bad.log"
done
cp "$WORK/config.good" "$CFG"
state_line=$(grep -n '^health_check_node_state: "ANY,CYCLE"$' "$CFG" | cut -d: -f1)
sed -i 's/^health_check_node_state: "ANY,CYCLE"$/health_check_node_state: "ALLOC,MIXED"/' "$CFG"
if play invalid-state slurm_qos_network.yml; then fail "health_check_node_state without IDLE: the playbook failed"; else pass "health_check_node_state without IDLE: the playbook failed"; fi
check "health_check_node_state without IDLE: names the file, line $state_line and why (a drained node would never resume)" \
  grep -qF "slurm_qos_network_config.yml, line $state_line: health_check_node_state must include ANY or IDLE when health_check_required is true, found" "$WORK/invalid-state.log"
snapshot > "$WORK/after-state.sha"
check "health_check_node_state without IDLE: /etc/qoslane and /etc/slurm byte-identical" cmp -s "$WORK/before.sha" "$WORK/after-state.sha"
cp "$WORK/config.good" "$CFG"
verdict_line=$(grep -n '^slurm_qos_network_fabric_verdict: ' "$CFG" | cut -d: -f1)
sed -i 's|^slurm_qos_network_fabric_verdict: .*|slurm_qos_network_fabric_verdict: shared/verdict.json|' "$CFG"
if play invalid-verdict slurm_qos_network.yml; then fail "a relative fabric verdict path: the playbook failed"; else pass "a relative fabric verdict path: the playbook failed"; fi
# (ansible prints the message in JSON: its quotes come escaped, so the check leaves them out)
check "a relative fabric verdict path: names the file, line $verdict_line and what it must be" bash -c \
  "grep -qF 'slurm_qos_network_config.yml, line $verdict_line: slurm_qos_network_fabric_verdict must be ' '$WORK/invalid-verdict.log' &&
   grep -qF 'or an absolute path, and needs slurm_qos_network_audit_timer: true' '$WORK/invalid-verdict.log'"
cp "$WORK/config.good" "$CFG"
watch_line=$(grep -n '^slurm_qos_network_opensm_plugin_watch: ' "$CFG" | cut -d: -f1)
sed -i 's|^slurm_qos_network_fabric_verdict: .*|slurm_qos_network_fabric_verdict: ""|' "$CFG"
if play invalid-watch slurm_qos_network.yml; then fail "the plugin's watcher without a verdict: the playbook failed"; else pass "the plugin's watcher without a verdict: the playbook failed"; fi
check "the plugin's watcher without a verdict: names the file, line $watch_line and the keys" \
  grep -qF "slurm_qos_network_config.yml, line $watch_line: slurm_qos_network_opensm_plugin_watch: true needs slurm_qos_network_fabric_verdict" "$WORK/invalid-watch.log"
check "the plugin's watcher without a verdict: stopped before any node play" bash -c "! grep -q 'PLAY \[Configure' '$WORK/invalid-watch.log'"
cp "$WORK/config.good" "$CFG"
# The plugin's words in opensm.conf: a spool with a comma would hand the plugin another word; a
# cap the plugin refuses (not decimal digits, under 256) would leave the SM without it.
spool_line=$(grep -n '^slurm_qos_network_opensm_plugin_spool: ' "$CFG" | cut -d: -f1)
sed -i "s|^slurm_qos_network_opensm_plugin_spool: .*|slurm_qos_network_opensm_plugin_spool: $SPOOL,qoslane_spool_max=9|" "$CFG"
if play invalid-spool slurm_qos_network.yml; then fail "a spool with a comma: the playbook failed"; else pass "a spool with a comma: the playbook failed"; fi
check "a spool with a comma: names the file, line $spool_line, the key, the rule and the value" bash -c \
  "grep -qF 'slurm_qos_network_config.yml, line $spool_line: slurm_qos_network_opensm_plugin_spool must be an absolute path without blanks, commas or ' '$WORK/invalid-spool.log' &&
   grep -qF 'found \\\"$SPOOL,qoslane_spool_max=9\\\"' '$WORK/invalid-spool.log'"
cp "$WORK/config.good" "$CFG"
echo "slurm_qos_network_opensm_plugin_spool_max: -1" >> "$CFG"
max_line=$(wc -l < "$CFG")
if play invalid-spool-max slurm_qos_network.yml; then fail "qoslane_spool_max -1: the playbook failed"; else pass "qoslane_spool_max -1: the playbook failed"; fi
check "qoslane_spool_max -1: names the file, line $max_line, the key, the rule and the value" bash -c \
  "grep -qF 'slurm_qos_network_config.yml, line $max_line: slurm_qos_network_opensm_plugin_spool_max must be a number of bytes in decimal digits from 256' '$WORK/invalid-spool-max.log' &&
   grep -qF 'found \\\"-1\\\"' '$WORK/invalid-spool-max.log'"
check "invalid plugin words: stopped before any node play, opensm.conf as it was" bash -c \
  "! grep -q 'PLAY \[Configure' '$WORK/invalid-spool.log' && ! grep -q 'PLAY \[Configure' '$WORK/invalid-spool-max.log' &&
   cmp -s '$WORK/opensm.conf.plugin' '$OSM_CONF'"
cp "$WORK/config.good" "$CFG"
sed -i 's/^slurm_qos_network_enabled: true$/slurm_qos_network_enabled: false/' "$CFG"
play disabled slurm_qos_network.yml || { tail -40 "$WORK/disabled.log" >&2; exit 1; }
check "disabled: validated, then nothing changed" eq "$(recap disabled changed)/$(recap disabled failed)" 0/0
check "disabled: says how to remove the feature" grep -q "run slurm_qos_network_remove.yml" "$WORK/disabled.log"
snapshot > "$WORK/after3.sha"
check "disabled: /etc/qoslane and /etc/slurm byte-identical" cmp -s "$WORK/before.sha" "$WORK/after3.sha"
cp "$WORK/config.good" "$CFG"

# ------------------------------------------------------------ placement
# slurm_placement on the real rig: the controller's files from the mapping, slurm.conf including
# them, the QoS names checked against this slurmdbd, Slurm reconfigured (the node lists the
# level's feature), then the node's QOSLANE_SCONTROL; a mission-critical job gets the level's
# feature and runs; a second run changes nothing. The removal below takes it all out.
say "case: slurm_placement: Slurm's side of placement, then the node's"
cp "$CFG" "$WORK/config.good"
# The rig's slurmctld has no systemd unit: restarted as `systemctl restart slurmctld` would (the
# placeholder nodes change its node count, which 22.05 refuses on a reconfigure), its PID kept
# where the rig's stop finds it.
cat > "$WORK/restart-slurmctld" <<EOS
#!/bin/sh
pid=\$(cat $RIG_DIR/pids/slurmctld.pid) && kill "\$pid"
i=0; while kill -0 "\$pid" 2>/dev/null; do [ \$i -lt 150 ] || exit 1; sleep 0.2; i=\$((i+1)); done
cd / && setsid env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 /usr/sbin/slurmctld -D \\
  </dev/null >>$RIG_DIR/log/slurmctld.stdout 2>&1 &
echo \$! > $RIG_DIR/pids/slurmctld.pid
EOS
chmod 0755 "$WORK/restart-slurmctld"
RESTART=(-e "slurm_qos_network_slurmctld_restart=$WORK/restart-slurmctld")
node_field() { /usr/bin/scontrol show node "$NODE" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }
sed -i -e 's/^slurm_placement: false$/slurm_placement: true/' \
  -e "s/^slurm_placement_placeholders: 0$/slurm_placement_placeholders: 1/" \
  -e "s/^slurm_placement_cpus: 0$/slurm_placement_cpus: $(node_field CPUTot)/" \
  -e "s/^slurm_placement_memory_mb: 0$/slurm_placement_memory_mb: $(node_field RealMemory)/" "$CFG"
grep -q '^slurm_placement: true$' "$CFG" || { say "could not turn slurm_placement on in $CFG"; exit 1; }
play placement slurm_qos_network.yml "${RESTART[@]}" || { tail -40 "$WORK/placement.log" >&2; exit 1; }
check "placement: slurmctld restarted (not reconfigured: the placeholder nodes)" grep -q "RUNNING HANDLER \\[slurm_qos_network : Restart slurmctld\\]" "$WORK/placement.log"
check "placement: qoslane's job_submit.lua, the module and qoslane.conf beside slurm.conf" bash -c \
  "head -1 /etc/slurm/job_submit.lua | grep -q '^-- job_submit.lua: qoslane placement\\.' && [ -s /etc/slurm/qoslane_placement.lua ] && [ -s /etc/slurm/qoslane.conf ]"
check "placement: slurm.conf includes qoslane.conf before its NodeName line" \
  eq "$(grep -B1 -m1 '^NodeName=' "$CONF" | head -1)" "Include /etc/slurm/qoslane.conf"
check "placement: the mapping's QoS names checked against this Slurm's" grep -qF "is known to Slurm" "$WORK/placement.log"
listed() { node_field AvailableFeatures | grep -q 'qoslane_mission-critical'; }
check "placement: slurmctld lists the level's feature on $NODE" poll 30 "features listed" listed
check "placement: then the node's QOSLANE_SCONTROL (placement on)" grep -qx "QOSLANE_SCONTROL=/usr/bin/scontrol" /etc/default/qoslane
h=$(/usr/bin/sbatch -H --parsable --qos=mission-critical -o /dev/null "$WORK/job.sh")
check "placement: a mission-critical job's constraint is the level's feature" \
  grep -q ' Features=qoslane_mission-critical ' <(/usr/bin/scontrol show job -o "$h")
/usr/bin/scancel "$h"
check "placement: and it runs" run_job mission-critical
play placement-again slurm_qos_network.yml "${RESTART[@]}" || { tail -40 "$WORK/placement-again.log" >&2; exit 1; }
check "placement: a second run changes nothing" eq "$(recap placement-again changed)" 0
cp "$WORK/config.good" "$CFG"

# ------------------------------------------------------------ removal
say "case: the removal path puts slurm.conf back as it was"
if [ "$PKG_BEFORE" = 0 ]; then uninstall=(-e slurm_qos_network_uninstall=true); else uninstall=(); fi
reads=$(slurmd_reads)
# A removal whose OpenSM restart fails has taken qoslane_sm out of opensm.conf already: the next
# removal changes no line, and restarts OpenSM because the running one still maps the plugin.
osm_pid=$(fabric RIG_OSM_PID)
if play remove-restart-fails slurm_qos_network_remove.yml "${uninstall[@]}" "${RESTART[@]}" \
  -e slurm_qos_network_opensm_restart_command=/bin/false; then
  fail "removal, OpenSM's restart fails: the playbook failed"; else pass "removal, OpenSM's restart fails: the playbook failed"; fi
check "removal, OpenSM's restart fails: says so; opensm.conf without qoslane_sm, the old OpenSM and the package still there" bash -c \
  "grep -qF 'no longer loads qoslane_sm, but OpenSM could not be restarted (/bin/false exited 1' '$WORK/remove-restart-fails.log' &&
   cmp -s '$WORK/opensm.conf.before-plugin' '$OSM_CONF' && [ '$(fabric RIG_OSM_PID)' = '$osm_pid' ] &&
   dpkg-query -W -f='\${Status}' qoslane-opensm-plugin | grep -q 'ok installed'"
play remove slurm_qos_network_remove.yml "${uninstall[@]}" "${RESTART[@]}" || { tail -40 "$WORK/remove.log" >&2; exit 1; }
check "removal: slurmd reread slurm.conf" poll 30 "slurmd reconfigured" slurmd_reread "$reads"
check "removal: slurm.conf byte-identical to the original" eq "$(sha256sum < "$CONF")" "$CONF_SHA0"
check "removal: backup removed" test ! -e "$CONF.qoslane-orig"
check "removal: placement's files gone, the node's QOSLANE_SCONTROL too" bash -c \
  "[ ! -e /etc/slurm/job_submit.lua ] && [ ! -e /etc/slurm/qoslane_placement.lua ] && [ ! -e /etc/slurm/qoslane.conf ] &&
   ! grep -qs '^QOSLANE_SCONTROL=' /etc/default/qoslane"
check "removal: slurmctld back on the site's hooks" eq "$(slurmd_config Prolog)/$(slurmd_config Epilog)" "$RIG_PROLOG_HOOK//etc/slurm/epilog.d/logout_user.sh"
check "removal: qoslane's hooks, the adopted link and hookrun.conf gone" bash -c \
  "! ls /etc/slurm/prolog.d /etc/slurm/task-prolog.d /etc/slurm/health.d /etc/slurm/hookrun.conf 2>/dev/null | grep -q . && [ ! -e /etc/slurm/epilog.d/50-qoslane ]"
check "removal: epilog.d/logout_user.sh and the site Prolog stay" test -x /etc/slurm/epilog.d/logout_user.sh -a -x "$RIG_PROLOG_HOOK"
check "removal: the audit log stays" test -s /var/log/qoslane/audit.jsonl
check "removal: the periodic audit, its textfile, its verdict and the staged mappings gone" \
  test ! -e "$CRON" -a ! -e "$PROM" -a ! -e /var/lib/qoslane-fabric-audit -a ! -e "$VERDICT"
check "removal: the node's QOSLANE_FABRIC_VERDICT gone" bash -c "! grep -qs '^QOSLANE_FABRIC_VERDICT=' /etc/default/qoslane"
check "removal: qoslane_sm out of opensm.conf, the site's plugin and words kept: byte-identical to before" \
  cmp "$WORK/opensm.conf.before-plugin" "$OSM_CONF"
OSM_LOG=$(fabric RIG_WORK)/opensm.log
check "removal: OpenSM (which still ran the plugin) restarted without it (a new SM, its log without qoslane_sm)" bash -c \
  "[ '$(fabric RIG_OSM_PID)' != '$osm_pid' ] && grep -q 'SUBNET UP' '$OSM_LOG' && ! grep -q 'qoslane_sm' '$OSM_LOG'"
check "removal: the plugin's package removed" bash -c "! dpkg-query -W -f='\${Status}' qoslane-opensm-plugin 2>/dev/null | grep -q 'ok installed'"
osm_pid=$(fabric RIG_OSM_PID)
play remove-plugin-again slurm_qos_network_remove.yml "${uninstall[@]}" "${RESTART[@]}" || { tail -40 "$WORK/remove-plugin-again.log" >&2; exit 1; }
check "removal again, the plugin still asked for: changed=0, OpenSM not restarted" bash -c \
  "[ '$(recap remove-plugin-again changed)' = 0 ] && [ '$(fabric RIG_OSM_PID)' = '$osm_pid' ]"
sed -i 's/^slurm_qos_network_opensm_plugin: true$/slurm_qos_network_opensm_plugin: false/' "$CFG"
if [ "$PKG_BEFORE" = 0 ]; then
  check "removal: both packages uninstalled" bash -c "! dpkg-query -W -f='\${Status}' qoslane hookrun 2>/dev/null | grep -q 'ok installed'"
fi
j=$(run_job high)
check "after removal: jobs run, no SL exports" eq "$(env_of "$j" UCX_IB_SL)" ""
check "after removal: logout_user.sh still runs as the Epilog" grep -qx "$j" "$WORK/out/logout_user.log"
# ------------------------------------------------------------ binaries instead of a package
if [ "$PKG_BEFORE" = 0 ]; then
say "case: no package for the node: the binaries from qoslane_binary_dir"
sed -i 's|^qoslane_package_dir: .*|qoslane_package_dir: ""|' "$CFG"
reads=$(slurmd_reads)
play binaries slurm_qos_network.yml || { tail -40 "$WORK/binaries.log" >&2; exit 1; }
check "binaries: slurmd reread slurm.conf" poll 30 "slurmd reconfigured" slurmd_reread "$reads"
check "binaries: /usr/sbin/qoslane and hookrun are the release binaries, no package" bash -c \
  "cmp -s '$QL' /usr/sbin/qoslane && cmp -s '$HR' /usr/sbin/hookrun && ! dpkg-query -S /usr/sbin/hookrun >/dev/null 2>&1"
for h in prolog.d/10-qoslane epilog.d/50-qoslane task-prolog.d/10-qoslane health.d/10-qoslane; do
  check "binaries: hook $h is a symlink to qoslane" eq "$(readlink "/etc/slurm/$h")" /usr/sbin/qoslane
done
check "binaries: slurm.conf's entry is a link to qoslane named hookrun" eq "$(readlink /usr/lib/qoslane/hookrun)" /usr/sbin/qoslane
j=$(run_job high)
check "binaries: high job UCX_IB_SL=4" eq "$(env_of "$j" UCX_IB_SL)" 4
reads=$(slurmd_reads)
play remove-binaries slurm_qos_network_remove.yml -e slurm_qos_network_uninstall=true || { tail -40 "$WORK/remove-binaries.log" >&2; exit 1; }
check "removal (binaries): slurmd reread slurm.conf" poll 30 "slurmd reconfigured" slurmd_reread "$reads"
check "removal (binaries): slurm.conf byte-identical to the original" eq "$(sha256sum < "$CONF")" "$CONF_SHA0"
check "removal (binaries): binaries and the entry gone" test ! -e /usr/sbin/qoslane -a ! -e /usr/sbin/hookrun -a ! -L /usr/lib/qoslane/hookrun
fi
play remove-again slurm_qos_network_remove.yml "${uninstall[@]}" || { tail -40 "$WORK/remove-again.log" >&2; exit 1; }
check "removal again: changed=0" eq "$(recap remove-again changed)" 0

say "case: a fabric the audit cannot read stops the rollout (fail), with its own message"
bash "$FABRIC_RIG" stop "$FABRIC_ENV" 2>>"$WORK/fabric-rig.log"; FABRIC_ENV=""
snapshot > "$WORK/unreadable-before.sha"
if play unreadable slurm_qos_network.yml -e slurm_qos_network_audit_timeout=5; then
  fail "unreadable fabric: the playbook failed"; else pass "unreadable fabric: the playbook failed"; fi
check "unreadable fabric: says exit 69 and why" bash -c \
  "grep -qF 'could not read the fabric (\`qoslane fabric audit\` exited 69)' '$WORK/unreadable.log' &&
   grep -qF 'the fabric could not be read' '$WORK/unreadable.log'"
snapshot > "$WORK/unreadable-after.sha"
check "unreadable fabric: no node task ran, /etc/qoslane and /etc/slurm byte-identical" bash -c \
  "! grep -qE 'TASK .*Install the (qoslane|hookrun|packages)' '$WORK/unreadable.log' && cmp -s '$WORK/unreadable-before.sha' '$WORK/unreadable-after.sha'"

say "omnia e2e: $E2E_PASSED passed, $E2E_FAILED failed, $RUN playbook runs, $(secs "$T_START")s"
[ "$E2E_FAILED" = 0 ]
