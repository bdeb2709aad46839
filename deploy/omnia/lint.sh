#!/usr/bin/env bash
# lint.sh — yamllint and ansible-lint (production profile) over the Omnia
# integration, as CI runs them (tests/e2e/omnia.sh calls this).
#
#   deploy/omnia/lint.sh
#
# yamllint comes from Debian (scripts/install-deps.sh). ansible-lint is on
# PyPI only: an `ansible-lint` on PATH is used; otherwise it is installed once
# into a virtualenv under ${QOSLANE_CACHE:-/var/cache/qoslane-ci} (about 40 s,
# needs PyPI), so it never touches the system's ansible-core.
# QOSLANE_SKIP_ANSIBLE_LINT=1 skips it (no network).
set -euo pipefail
cd "$(dirname "$0")"

yamllint -s .
echo "lint: yamllint ok" >&2

# Every switch of the input file is documented in the role's README, and every tasks file is
# included by another or by a playbook (none left behind, e.g. a removal step).
bad=0
while read -r k; do
  grep -qF "\`$k\`" roles/slurm_qos_network/README.md ||
    { echo "lint: input key $k is not in roles/slurm_qos_network/README.md" >&2; bad=1; }
done < <(sed -n 's/^\([a-z_]*\):.*/\1/p' input/slurm_qos_network_config.yml)
for f in roles/slurm_qos_network/tasks/*.yml; do
  b=${f##*/}; [ "$b" = main.yml ] && continue
  grep -qE "(include_tasks|import_tasks|tasks_from): +\"?${b//./\\.}\"?$" roles/slurm_qos_network/tasks/*.yml ./*.yml ||
    { echo "lint: $f is included by no tasks file or playbook" >&2; bad=1; }
done
[ "$bad" = 0 ] || exit 1
echo "lint: every input key documented, every tasks file included" >&2

[ "${QOSLANE_SKIP_ANSIBLE_LINT:-0}" = 1 ] && { echo "lint: ansible-lint skipped (QOSLANE_SKIP_ANSIBLE_LINT=1)" >&2; exit 0; }
if command -v ansible-lint >/dev/null 2>&1; then
  AL=ansible-lint
else
  venv=${QOSLANE_CACHE:-/var/cache/qoslane-ci}/ansible-lint-venv
  if [ ! -x "$venv/bin/ansible-lint" ]; then
    echo "lint: installing ansible-lint into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q ansible-lint
  fi
  AL=$venv/bin/ansible-lint
fi
"$AL" --version >&2
# ansible-lint keeps a cache in <git root>/.ansible; leave no trace of it.
cache=$(git rev-parse --show-toplevel 2>/dev/null || pwd)/.ansible
[ -e "$cache" ] || trap 'rm -rf "$cache"' EXIT
"$AL" --profile production --nocolor -q slurm_qos_network.yml slurm_qos_network_remove.yml roles/
echo "lint: ansible-lint (production profile) ok" >&2
