#!/usr/bin/env bash
# doc_blocks.sh — every shell block of the admin docs that can run here runs,
# as written, and must succeed: the docs cannot drift from the programs.
#
# Every fenced block of the admin docs says what it is in its info string:
#   ```sh                  a shell block: run here (below)
#   ```sh admin-story      run by tests/e2e/admin_story.sh on the real Slurm
#   ```sh no-run: WHY      a shell block that cannot run here (a real cluster,
#                          an HCA, the Omnia inventory, …): WHY says what it needs
#   ```text, conf, yaml, json, promql, …   not shell: output, configuration
# A block without an info string fails the test (say what it is).
#
# "Here" is a node under a temp root, as the suites lay one out
# (scripts/lib/node.sh: the example mapping, a fixture HCA port answered by
# the fixture smpquery, qoslane's hooks under hookrun), where qoslane has
# run once (`qoslane sync`); PATH has the built qoslane and hookrun first,
# QOSLANE_ROOT and HOOKRUN_ROOT name the root, the working directory is a
# copy of the repository's deploy/ and examples/. As root, each block runs
# as nobody (setpriv), so a block that would write a system path fails
# instead of writing it. Each block runs under `bash -euo pipefail`.
#
#   bash tests/doc_blocks.sh          (uses $CARGO_TARGET_DIR/debug, built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../scripts/lib/node.sh
. scripts/lib/node.sh

DOCS=(docs/admin-guide.md docs/hookrun.md docs/omnia.md docs/metrics.md docs/fabric.md)
BIN=${CARGO_TARGET_DIR:-$PWD/target}/debug
if ! [ -x "$BIN/qoslane" ] || ! [ -x "$BIN/hookrun" ]; then cargo build -q -p qoslane -p hookrun; fi

WORK=$(mktemp -d /tmp/qoslane-docs.XXXXXX)
chmod 0755 "$WORK"
trap 'rm -rf "$WORK"' EXIT
install -d -m 0755 "$WORK/bin" "$WORK/repo" "$WORK/blocks" "$WORK/home"
install -m 0755 "$BIN/qoslane" "$BIN/hookrun" "$WORK/bin/"
cp -r deploy examples "$WORK/repo/"
R=$WORK/root
node_layout "$R" examples/qos-network.yml
QL=$WORK/bin/qoslane HR=$WORK/bin/hookrun node_hooks "$R"

as_user=()
if [ "$(id -u)" = 0 ]; then
  chown -R nobody: "$WORK"
  as_user=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups)
fi
# run FILE : FILE under bash as the blocks' user, in the node's environment.
run() {
  (cd "$WORK/repo" && "${as_user[@]}" env -i PATH="$WORK/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    HOME="$WORK/home" LC_ALL=C.UTF-8 TZ=UTC QOSLANE_ROOT="$R" HOOKRUN_ROOT="$R" \
    QOSLANE_SMPQUERY="$R/bin/smpquery" QOSLANE_NO_JOURNAL=1 bash -euo pipefail "$1")
}
# The node has run qoslane once: a mapping in force, an audit log to read.
printf 'qoslane sync >/dev/null 2>&1\n' > "$WORK/setup.sh"
run "$WORK/setup.sh"

# Every block: DOC:LINE, its info string, its text in blocks/N.
awk -v out="$WORK/blocks" '
  FNR == 1 { inb = 0 }
  /^```/ {
    if (inb) { inb = 0; close(f); next }
    inb = 1; n++; f = sprintf("%s/%03d", out, n)
    printf "%s:%d\t%s\n", FILENAME, FNR, substr($0, 4) > (out "/index")
    printf "" > f; next
  }
  inb { print > f }
' "${DOCS[@]}"

ran=0 passed=0 norun=0 story=0 other=0 bad=0 n=0
while IFS=$'\t' read -r where info; do
  n=$((n + 1)); file=$(printf '%s/%03d' "$WORK/blocks" "$n")
  read -r kind rest <<<"$info"
  case "$kind" in
    "")
      echo "FAIL $where: a block without an info string: say what it is (sh, sh no-run: WHY, text, conf, yaml, json, …)"
      bad=$((bad + 1)) ;;
    sh | bash | shell)
      case "$rest" in
        admin-story*) story=$((story + 1)) ;;
        no-run:?*) norun=$((norun + 1)) ;;
        no-run*)
          echo "FAIL $where: \`no-run\` without its reason (\`$kind no-run: needs …\`)"
          bad=$((bad + 1)) ;;
        "")
          ran=$((ran + 1))
          if run "$file" >"$WORK/out" 2>&1; then
            passed=$((passed + 1)); echo "ok   $where"
          else
            echo "FAIL $where (exit $?):"; sed 's/^/     | /' "$file"; sed 's/^/     > /' "$WORK/out"
          fi ;;
        *)
          echo "FAIL $where: unknown marks \`$rest\` (admin-story, or no-run: WHY)"
          bad=$((bad + 1)) ;;
      esac ;;
    *) other=$((other + 1)) ;;
  esac
done < "$WORK/blocks/index"

echo "doc blocks: $ran run here ($passed passed), $story run by tests/e2e/admin_story.sh," \
  "$norun not runnable here (no-run), $other not shell; $bad unmarked or badly marked"
[ "$passed" = "$ran" ] && [ "$bad" = 0 ]
