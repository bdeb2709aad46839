# shellcheck shell=sh
# Copyright 2026 The qoslane Authors. All Rights Reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
# The running OpenSM and qoslane's event plugin in it, as the role's
# sm_plugin.yml and remove_sm_plugin.yml see them (run as root on the OpenSM
# host: sh -c "$(cat this)" opensm-state CONF PID_FILE SPOOL). One JSON line:
#   pid     the OpenSM that runs CONF: PID_FILE's process when PID_FILE is
#           set (when it is an opensm), else the one process named opensm
#           whose -F/--config is CONF, else the one with no -F/--config
#           (it reads its built-in default); "" = none; "ambiguous" (pids:
#           the candidates) = several
#   mapped  "yes": the process maps libqoslane_sm.so (OpenSM loaded the
#           plugin); "deleted": it maps a library since removed or replaced
#           (a package changed under it); "no"
#   spool   "yes": the process holds SPOOL (the directory) open: the plugin
#           started with that spool (it keeps the directory open while loaded)
#   stale   "yes": CONF was changed after the process started (to within 2 s):
#           it runs with options read from an older opensm.conf
conf=$1 pidfile=$2 spool=$3

# A live process named opensm (not a zombie: its /proc/PID/maps is empty).
is_opensm() {
  [ "$(cat "/proc/$1/comm" 2>/dev/null)" = opensm ] &&
    [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]
}

# The config file a process was started with ("" = none given), absolute.
config_of() {
  c=$(tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null |
    awk 'f { print; exit } $0 == "-F" || $0 == "--config" { f = 1 } /^--config=/ { sub(/^--config=/, ""); print; exit }')
  case $c in
  "" | /*) ;;
  *) c="$(readlink "/proc/$1/cwd")/$c" ;;
  esac
  [ -z "$c" ] || readlink -f "$c" 2>/dev/null || echo "$c"
}

pid="" pids=""
if [ -n "$pidfile" ]; then
  p=$(head -c 32 "$pidfile" 2>/dev/null | tr -cd 0-9)
  if [ -n "$p" ] && is_opensm "$p"; then pid=$p; fi
else
  want=$(readlink -f "$conf" 2>/dev/null || echo "$conf")
  named="" plain=""
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    is_opensm "$p" || continue
    c=$(config_of "$p")
    if [ -z "$c" ]; then plain="$plain $p"; elif [ "$c" = "$want" ]; then named="$named $p"; fi
  done
  for list in "$named" "$plain"; do
    # shellcheck disable=SC2086  # a list of pids
    set -- $list
    [ $# -eq 0 ] && continue
    if [ $# -eq 1 ]; then pid=$1; else pid=ambiguous pids=$(echo "$*" | tr ' ' ','); fi
    break
  done
fi

mapped=no spool_open=no stale=no
case $pid in
"" | ambiguous) ;;
*)
  maps=$(grep '/libqoslane_sm\.so' "/proc/$pid/maps" 2>/dev/null)
  if [ -n "$maps" ]; then
    case $maps in *'(deleted)'*) mapped=deleted ;; *) mapped=yes ;; esac
  fi
  s=$(readlink -f "$spool" 2>/dev/null)
  if [ -n "$s" ]; then
    for f in "/proc/$pid/fd/"*; do
      [ "$(readlink "$f" 2>/dev/null)" = "$s" ] && { spool_open=yes; break; }
    done
  fi
  # start = boot time + the process's start in clock ticks (each rounded
  # down: up to 2 s early), so only a change 2 s after it counts
  ticks=$(getconf CLK_TCK 2>/dev/null || echo 100)
  btime=$(awk '$1 == "btime" { print $2 }' /proc/stat)
  st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{ print $20 }')
  mtime=$(stat -c %Y "$conf" 2>/dev/null)
  if [ -n "$st" ] && [ -n "$btime" ] && [ -n "$mtime" ] && [ "$mtime" -gt $((btime + st / ticks + 1)) ]; then
    stale=yes
  fi
  ;;
esac
printf '{"pid": "%s", "pids": "%s", "mapped": "%s", "spool": "%s", "stale": "%s"}\n' \
  "$pid" "$pids" "$mapped" "$spool_open" "$stale"
