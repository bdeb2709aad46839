#!/usr/bin/env bash
# slurm_versions.sh — the reader of rigs/slurm_versions.tsv, the one table of the Slurm versions
# the suites run (version, where it runs, ports, QoS source, features). Sourced by every script
# that picks a Slurm; nothing else names a version. Run directly, it prints the table (with
# --check: checks it, a step of scripts/test.sh).
#
#   slurm_versions [FILTER]          versions, oldest first. FILTER: host | chroot |
#                                    qos=squeue|env | FEATURE (e.g. openmetrics)
#   slurm_version_of VERSION|SUITE   the version a name means (a version, or its chroot's suite,
#                                    or "host"); fails, saying so, for an unknown name
#   slurm_field VERSION|SUITE FIELD  one cell: where | port_base | qos_source | features
#   slurm_has VERSION FEATURE        the row lists FEATURE
#   slurm_lock VERSION|SUITE|host    the rig's lock file: the host rig's, or the chroot suite's
#   slurm_newest [FILTER]            the last version slurm_versions FILTER lists (fails on none)
#   slurm_versions_check             the table's own consistency (also: slurm_versions.sh --check)

SLURM_VERSIONS_TSV=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/slurm_versions.tsv

# the rows without comments
slurm_rows() { grep -v '^#' "$SLURM_VERSIONS_TSV" | grep .; }

slurm_versions() {
  local f=${1:-}
  slurm_rows | awk -F'\t' -v f="$f" '
    f == "" { print $1; next }
    f == "host" { if ($2 == "host") print $1; next }
    f == "chroot" { if ($2 != "host") print $1; next }
    f ~ /^qos=/ { if ("qos=" $4 == f) print $1; next }
    { n = split($5, a, ","); for (i = 1; i <= n; i++) if (a[i] == f) { print $1; break } }'
}

slurm_version_of() {
  local v
  v=$(slurm_rows | awk -F'\t' -v k="$1" '$1 == k || $2 == k { print $1; exit }')
  [ -n "$v" ] || {
    echo "unknown Slurm '$1' ($(slurm_rows | cut -f1 | paste -sd '|'), or $(slurm_rows | cut -f2 | paste -sd '|'))" >&2
    return 2
  }
  echo "$v"
}

slurm_field() {
  local col
  case $2 in
    where) col=2 ;; port_base) col=3 ;; qos_source) col=4 ;; features) col=5 ;;
    *) echo "slurm_field: no column '$2'" >&2; return 2 ;;
  esac
  slurm_rows | awk -F'\t' -v v="$1" -v c="$col" '$1 == v || $2 == v { print $c; found = 1; exit } END { exit !found }'
}

slurm_has() { case ",$(slurm_field "$1" features)," in *",$2,"*) return 0 ;; *) return 1 ;; esac; }

slurm_lock() {
  local w
  w=$(slurm_field "$1" where 2>/dev/null) || w=$1
  if [ "$w" = host ]; then echo /run/lock/qoslane-slurm-rig.lock; else echo "/run/lock/qoslane-slurm-$w.lock"; fi
}

slurm_newest() {
  local v; v=$(slurm_versions "${1:-}" | tail -n1)
  [ -n "$v" ] || { echo "no Slurm version in rigs/slurm_versions.tsv is ${1:-listed}" >&2; return 1; }
  echo "$v"
}

# slurm_versions_check : the table is one the readers can trust: five cells a row, versions
# unique and oldest first (slurm_newest is the last row), at most one host row, each chroot
# suite once with its own port_base at least 100 from every other, a known qos_source and
# known features. Says every problem; fails on any.
slurm_versions_check() {
  slurm_rows | awk -F'\t' '
    function bad(m) { print "rigs/slurm_versions.tsv: " $1 ": " m > "/dev/stderr"; err = 1 }
    NF != 5 { bad("expected 5 tab-separated cells, got " NF) }
    $1 !~ /^[0-9]+\.[0-9][0-9]$/ { bad("version is not MAJOR.MINOR") }
    seen[$1]++ { bad("version listed twice") }
    prev != "" && ($1 + 0 < prev + 0 || ($1 + 0 == prev + 0 && $1 <= prev)) { bad("not after " prev " (oldest first)") }
    { prev = $1 }
    $2 == "host" { if (hosts++) bad("a second host row"); if ($3 != "-") bad("the host has no port_base") }
    $2 != "host" {
      if ($2 !~ /^[a-z][a-z0-9-]*$/) bad("suite \"" $2 "\" is not a Debian suite name")
      if (suite[$2]++) bad("suite " $2 " listed twice")
      if ($3 !~ /^[0-9]+$/ || $3 < 1024 || $3 > 65000) bad("port_base \"" $3 "\" is not a port")
      for (p in port) if ((p - $3) < 100 && ($3 - p) < 100) bad("port_base " $3 " within 100 of " port[p] "\x27s " p)
      port[$3] = $1
    }
    $4 != "squeue" && $4 != "env" { bad("qos_source \"" $4 "\": squeue or env") }
    $5 != "-" { n = split($5, f, ","); for (i = 1; i <= n; i++) if (f[i] != "openmetrics") bad("unknown feature \"" f[i] "\"") }
    END { if (NR == 0) { print "rigs/slurm_versions.tsv: no rows" > "/dev/stderr"; err = 1 } exit err }'
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  if [ "${1:-}" = --check ]; then slurm_versions_check && echo "rigs/slurm_versions.tsv: $(slurm_versions | wc -l) versions, consistent" >&2; exit; fi
  printf 'version\twhere\tport_base\tqos_source\tfeatures\tlock\n'
  for v in $(slurm_versions); do
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$v" "$(slurm_field "$v" where)" "$(slurm_field "$v" port_base)" \
      "$(slurm_field "$v" qos_source)" "$(slurm_field "$v" features)" "$(slurm_lock "$v")"
  done
fi
