#!/usr/bin/env bash
# changelog.sh — the packages' changelogs, made from CHANGELOG.md (the one an admin reads) by
# packaging/build.sh:
#
#   changelog.sh debian CHANGELOG.md MAINTAINER [VERSION-REVISION]
#       the Debian changelog on stdout: one entry per release (`## VERSION (YYYY-MM-DD)`, or
#       `## VERSION (YYYY-MM-DD HH:MM UTC)` for a second release of a day: Debian wants each entry
#       newer than the one below it), as revision 1 of it, newest first, each item of its `###`
#       parts a `*` line wrapped at 76 columns (the Upgrading part's items begin "Upgrade:"),
#       dated the release's day (and time). With
#       VERSION-REVISION of a local rebuild (revision 2 and up), an entry for it on top, dated now.
#   changelog.sh rpm
#       a Debian changelog on stdin as an RPM %changelog on stdout, entry for entry.
#
# A release without a date, or items outside a release, are refused: the changelog is
# what the packages say, so it must parse. An `## Unreleased` section on top (what main
# has that no release has yet) is left out.
set -euo pipefail

die() { printf 'changelog.sh: %s\n' "$*" >&2; exit 1; }

debian() {
  local md=$1 maint=$2 rebuild=${3:-}
  [ -f "$md" ] || die "$md: no such file"
  if [ -n "$rebuild" ]; then
    printf 'qoslane (%s) unstable; urgency=medium\n\n  * Local rebuild as revision %s.\n\n -- %s  %s\n\n' \
      "$rebuild" "${rebuild##*-}" "$maint" "$(LC_ALL=C date -u -R)"
  fi
  awk -v maint="$maint" -v md="$md" '
    function fail(msg) { printf "changelog.sh: %s:%d: %s\n", md, NR, msg > "/dev/stderr"; bad = 1; exit 1 }
    # wrap: an item as "  * " and continuation lines of "    ", at most 76 columns each
    function wrap(t,   n, w, i, line) {
      gsub(/`/, "", t)
      n = split(t, w, / +/); line = "  *"
      for (i = 1; i <= n; i++) {
        if (w[i] == "") continue
        if (length(line) + 1 + length(w[i]) > 76 && line != "  *" && line != "   ") { print line; line = "   " }
        line = line " " w[i]
      }
      print line
    }
    function flush() { if (item != "") { wrap(item); item = "" } }
    function trailer(   cmd, d) {
      flush()
      cmd = "LC_ALL=C date -u -R -d " date " 2>/dev/null"; d = ""
      cmd | getline d; close(cmd)
      if (d == "") fail("release " ver ": no date (YYYY-MM-DD) in its heading")
      print ""; printf " -- %s  %s\n", maint, d
    }
    # What is not released yet (`## Unreleased`, above the newest release) is in no package.
    /^## Unreleased$/ { if (ver != "") fail("\"## Unreleased\" belongs above the newest release"); skip = 1; next }
    skip && !/^## / { next }
    /^## / {
      skip = 0
      if (ver != "") { trailer(); print "" }
      if (!match($0, /^## [0-9][^ ]* \([0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]( [0-2][0-9]:[0-5][0-9] UTC)?\)$/))
        fail("a release heading is \"## VERSION (YYYY-MM-DD)\" or \"## VERSION (YYYY-MM-DD HH:MM UTC)\": " $0)
      ver = $2; date = $0; sub(/^[^(]*\(/, "", date); sub(/\)$/, "", date); date = "\"" date "\""
      printf "qoslane (%s-1) unstable; urgency=medium\n\n", ver
      part = ""; next
    }
    /^### / { flush(); part = $2; next }
    /^- / {
      if (ver == "") fail("an item before the first release")
      flush(); item = substr($0, 3)
      if (part == "Upgrading") item = "Upgrade: " tolower(substr(item, 1, 1)) substr(item, 2)
      next
    }
    /^  [^ ]/ && item != "" { line = $0; sub(/^ +/, "", line); item = item " " line; next }
    /^$/ { flush(); next }
    END { if (bad) exit 1; if (ver == "") fail("no release (## VERSION (YYYY-MM-DD))"); trailer() }
  ' "$md"
}

rpm() {
  awk '
    /^qoslane \(/ { v = $2; gsub(/[()]/, "", v); n = 0; next }
    /^  \* / { item[++n] = "- " substr($0, 5); next }
    /^    / { item[n] = item[n] "\n  " substr($0, 5); next }
    /^ -- / {
      d = $0; sub(/^.*>  /, "", d)
      cmd = "LC_ALL=C date -u -d \"" d "\" \"+%a %b %d %Y\""; cmd | getline day; close(cmd)
      m = $0; sub(/^ -- /, "", m); sub(/>  .*$/, ">", m)
      if (entries++) print ""
      printf "* %s %s - %s\n", day, m, v
      for (i = 1; i <= n; i++) print item[i]
    }
  '
}

case "${1:-}" in
  debian) shift; [ $# -ge 2 ] || die "usage: changelog.sh debian CHANGELOG.md MAINTAINER [VERSION-REVISION]"; debian "$@" ;;
  rpm) rpm ;;
  *) die "usage: changelog.sh debian CHANGELOG.md MAINTAINER [VERSION-REVISION] | rpm" ;;
esac
