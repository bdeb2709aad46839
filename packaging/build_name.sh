# shellcheck shell=bash
# build_name.sh — sourced: the build's name both binaries carry (`--version`,
# qoslane_build_info), compiled in from QOSLANE_BUILD (crates/nodeio/src/build.rs):
# "VERSION-REVISION (git COMMIT)", COMMIT with "+dirty" when the tree differs from it.
# packaging/build.sh names its builds with it, and the end-to-end suites' release build
# (tests/e2e/lib.sh) takes the name of revision 1: the same name is the same build to
# cargo, so a suite after the packages' build, or the packages' build after a suite, links
# nothing again (a changed QOSLANE_BUILD recompiles nodeio and relinks both binaries).

# qoslane_build_name REPO REVISION
qoslane_build_name() {
  local repo=$1 revision=$2 version commit
  version=$(cd "$repo" && cargo pkgid -p qoslane | sed 's/.*[#@]//') || return 1
  commit=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  if [ "$commit" != unknown ] && ! git -C "$repo" diff --quiet HEAD -- 2>/dev/null; then
    commit="$commit+dirty"
  fi
  printf '%s-%s (git %s)\n' "$version" "$revision" "$commit"
}
