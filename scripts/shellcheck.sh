#!/usr/bin/env bash
# scripts/shellcheck.sh — shellcheck over every shell script in the repo: each *.sh and
# each file whose first line is a sh/bash shebang (tracked, or new and not
# ignored; never target/ or .git). Settings: .shellcheckrc (follow sourced
# files). scripts/test.sh runs it as its "shellcheck" step.
#
#   scripts/shellcheck.sh          check them all (exit 1 on any finding)
#   scripts/shellcheck.sh --list   only print the files it would check
#
# Jinja templates (*.j2) are not shell until rendered.
set -euo pipefail
cd "$(dirname "$0")/.."

# Files that are not clean yet and whose owners were told; reported, not failed.
# Remove a line once its file is clean.
WAIVED=()

scripts() {
  local f
  { if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
      git ls-files -z --cached --others --exclude-standard
    else
      find . -path ./.git -prune -o -path '*/target' -prune -o -type f -printf '%P\0'
    fi; } |
  while IFS= read -r -d '' f; do
    [ -f "$f" ] || continue   # deleted in the work tree
    case $f in
      target/* | */target/* | *.j2) continue ;;
      *.sh) printf '%s\n' "$f"; continue ;;
    esac
    head -n1 -- "$f" 2>/dev/null | grep -qE '^#!.*[/ ](ba|da|k)?sh( |$)' && printf '%s\n' "$f"
  done | sort
}

if [ "${1:-}" = --list ]; then scripts; exit 0; fi
command -v shellcheck >/dev/null || { echo "shellcheck.sh: shellcheck is missing (Debian: apt-get install shellcheck)" >&2; exit 69; }
checked=() waived=()
while IFS= read -r f; do
  w=0
  for x in "${WAIVED[@]}"; do [ "$f" = "$x" ] && w=1; done
  if [ $w = 1 ]; then waived+=("$f"); else checked+=("$f"); fi
done < <(scripts)
for f in "${waived[@]}"; do
  n=$(shellcheck -f gcc -- "$f" | grep -c . || true)
  echo "shellcheck.sh: WAIVED $f ($n finding(s); see WAIVED in $0)" >&2
done
shellcheck -- "${checked[@]}"
echo "shellcheck.sh: ${#checked[@]} scripts clean (shellcheck $(shellcheck --version | sed -n 's/^version: //p'))" >&2
