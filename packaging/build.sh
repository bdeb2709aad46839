#!/usr/bin/env bash
# build.sh — the packages: qoslane and hookrun, each a .deb and an .rpm of the
# same version, from one build. hookrun (the Slurm hook framework slurm.conf
# names) is its own package so that removing qoslane never removes what Slurm
# runs as its Prolog; qoslane depends on the hookrun of its own version. The
# OpenSM event plugin (smplugin/) is a third, qoslane-opensm-plugin, for the
# host that runs OpenSM: built here against the installed libopensm-dev and
# pinned to that upstream OpenSM version.
#
#   packaging/build.sh                  every package into target/packages/
#   packaging/build.sh --deb            only the .debs   (--rpm: only the .rpms)
#   packaging/build.sh --out DIR        somewhere else
#   packaging/build.sh --revision N     a local rebuild as revision N of the same
#                                       version (an in-place upgrade; the Debian
#                                       changelog gets an entry for it)
#   packaging/build.sh --commit REV     the packages of an earlier commit (a tag, a
#                                       hash), as that commit's own build.sh makes
#                                       them, in a temporary worktree; kept under
#                                       ${XDG_CACHE_HOME:-~/.cache}/qoslane/packages/
#                                       FULL-HASH/ and taken from there next time
#                                       (the upgrade tests' old releases). Prints
#                                       that directory; --out DIR also copies
#                                       them there. Cargo's target directory is
#                                       target/commits/ of this checkout's, shared
#                                       by the earlier commits' builds (their
#                                       dependencies built once), never this
#                                       checkout's own: cargo names a workspace
#                                       crate's build by name and version, not by
#                                       path, so two trees of one version would
#                                       take each other's builds as fresh.
#   packaging/build.sh --cargo-tools    qoslane and hookrun with cargo-deb / cargo-generate-rpm
#                                       (from [package.metadata.*] of
#                                       crates/qoslane/Cargo.toml and
#                                       crates/hookrun/Cargo.toml) instead
#
# By default the packages are made by the distributions' own tools from
# staged trees: dpkg-deb (always on Debian) and rpmbuild (Debian package
# `rpm`; one spec, hookrun its subpackage). They need no compilation:
# `cargo install cargo-deb cargo-generate-rpm` takes minutes on a small CI
# machine (see docs/omnia.md), the native tools take a second.
#
# hookrun:
#   /usr/sbin/hookrun
#   /usr/share/man/man8/hookrun.8.gz, man5/hookrun.conf.5.gz, its completions
#   /usr/lib/hookrun/remove   (its removal: refused while slurm.conf runs it)
#   /usr/share/doc/hookrun/{copyright,changelog.Debian.gz}   (.rpm: licenses/)
# qoslane (Depends: hookrun of the same version):
#   /usr/sbin/qoslane
#   /usr/share/man/man8/qoslane*.8.gz, man5/qoslane-mapping.5.gz
#   /usr/share/doc/qoslane/{admin-guide,fabric,hookrun,metrics,omnia}.md (.md.gz in the .deb)
#   /usr/lib/systemd/system/qoslane-metrics.service, qoslane-fabric-audit.{service,timer}, qoslane-fabric-watch.service (disabled)
#   /usr/share/qoslane/prometheus/{qoslane-alerts,scrape-qoslane}.yml, grafana/grafana-qoslane.json
#   /usr/share/bash-completion/completions/qoslane
#   /usr/share/zsh/vendor-completions/_qoslane   (.deb; .rpm: zsh/site-functions)
#   /usr/share/fish/vendor_completions.d/qoslane.fish
#   /usr/share/doc/qoslane/examples/qos-network.yml
#   /etc/logrotate.d/qoslane                       (conffile: the audit log)
#   /etc/default/qoslane                           (conffile: the site options; the .rpm:
#                                                   /etc/sysconfig/qoslane)
#   /usr/lib/qoslane/remove-state                  (run by the removal)
#   /usr/lib/qoslane/hooks/{prolog.d,epilog.d,task-prolog.d,health.d}/NN-qoslane
#   (each a symlink to /usr/sbin/qoslane: no shell in between; qoslane picks
#   the hook from SLURM_SCRIPT_CONTEXT or hookrun's HOOKRUN_PHASE and reads
#   the site options file itself)
#   /usr/lib/qoslane/hookrun                       (a symlink to /usr/sbin/qoslane
#   named hookrun: the program slurm.conf names as Prolog, Epilog, TaskProlog
#   and HealthCheckProgram. Run so, the binary is hookrun with qoslane's hook
#   built in: a hook file that is the binary itself runs in a fork of it, one
#   process start per hook instead of two; every other hook is exec'd as
#   /usr/sbin/hookrun execs it. qoslane's removal is refused while
#   slurm.conf runs it, as hookrun's is for /usr/sbin/hookrun. The
#   cargo-deb/cargo-generate-rpm packages have no such link: there
#   slurm.conf names /usr/sbin/hookrun)
# qoslane-opensm-plugin (Depends: opensm of the upstream version it was built
# against, >= V and << the next, read from libopensm-dev's osm_version.h: OpenSM
# loads a plugin only when its version string is its own, exactly):
#   /usr/lib/<multiarch triplet>/libqoslane_sm.so   (.rpm: %{_libdir}; OpenSM
#                                       dlopens lib<name>.so through the linker's
#                                       path: an ldconfig trigger, .rpm scriptlets)
#   /usr/share/doc/qoslane-opensm-plugin/README.md   (smplugin/README.md; copyright,
#                                       changelog.Debian.gz; .rpm: licenses/)
# It never edits opensm.conf: enabling it is the site's (smplugin/README.md).
# Removing qoslane first releases the levels jobs hold (qoslane's Epilog:
# the node settings back to the baseline), then drops its .prom textfile;
# purge (rpm: erase) also /var/lib/qoslane and /run/qoslane. The audit
# history (/var/log/qoslane) is kept, and purge says so. Removing hookrun is
# refused while slurm.conf (or a file it includes) runs /usr/sbin/hookrun.
# An upgrade changes neither the state nor the hooks' places.
# The hooks are NOT installed into /etc/slurm: installing the packages changes
# nothing in Slurm. Enable them with the Omnia playbook, or by hand (symlinks
# into /etc/slurm/<phase>.d/, see docs/omnia.md). A removed qoslane leaves
# broken symlinks, which hookrun reports and skips instead of failing jobs.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=$REPO/target/packages
# qoslane's hooks, as hookrun runs them from /etc/slurm/<phase>.d (links made by the admin or Omnia)
HOOKS="prolog.d/10-qoslane epilog.d/50-qoslane task-prolog.d/10-qoslane health.d/10-qoslane"
WANT_DEB=1 WANT_RPM=1 CARGO_TOOLS=0 REBUILD="" COMMIT_REV="" OUT_GIVEN=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$(realpath -m "$2"); OUT_GIVEN=1; shift 2 ;;
    --deb) WANT_RPM=0; shift ;;
    --rpm) WANT_DEB=0; shift ;;
    --cargo-tools) CARGO_TOOLS=1; shift ;;
    --revision) REBUILD=$2; shift 2 ;;
    --commit) COMMIT_REV=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $1 (see --help)" >&2; exit 64 ;;
  esac
done

log() { printf '[packaging] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
t0=$(date +%s.%N)

cd "$REPO"
if [ -n "$COMMIT_REV" ]; then
  # ------------------------------------------------------------ an earlier commit's packages
  sha=$(git -C "$REPO" rev-parse --verify --quiet "$COMMIT_REV^{commit}") ||
    die "--commit $COMMIT_REV: no such commit in this repository"
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/qoslane/packages
  mkdir -p "$cache"
  # One builder per cache: a second waits, then finds the packages there.
  exec 9>"$cache/.lock"
  flock -w 3600 9 || die "another build.sh --commit holds $cache/.lock"
  if [ ! -f "$cache/$sha/.complete" ]; then
    wt=$(mktemp -d "${TMPDIR:-/tmp}/qoslane-build-$sha.XXXXXX")
    # shellcheck disable=SC2064  # the paths of this run, fixed now
    trap "git -C '$REPO' worktree remove --force '$wt' >/dev/null 2>&1; rm -rf '$wt' '$cache/$sha.tmp'" EXIT
    git -C "$REPO" worktree add --detach --force "$wt" "$sha" >/dev/null 2>&1 ||
      die "git worktree add $wt $sha failed"
    rm -rf "$cache/$sha.tmp"
    log "building the packages of $sha (its own build.sh, in $wt)"
    # Its own version and changelog; a target directory of the earlier commits' own (each
    # in a new worktree: the previous one's crates, built from paths now gone, are stale).
    env -u QOSLANE_BUILD -u SOURCE_DATE_EPOCH CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}/commits" \
      bash "$wt/packaging/build.sh" --out "$cache/$sha.tmp" ||
      die "the build.sh of $sha failed"
    git -C "$wt" log -1 --format='%H %cI %s' > "$cache/$sha.tmp/.complete"
    rm -rf "${cache:?}/$sha"; mv "$cache/$sha.tmp" "$cache/$sha"
  else
    log "the packages of $sha from the cache ($cache/$sha)"
  fi
  if [ -n "$OUT_GIVEN" ]; then mkdir -p "$OUT"; cp "$cache/$sha"/*.deb "$cache/$sha"/*.rpm "$OUT/"; fi
  echo "$cache/$sha"
  exit 0
fi
# Reproducible: the man pages' date is the last commit's.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH
VERSION=$(cargo pkgid -p qoslane | sed 's/.*[#@]//')
REVISION=1
if [ -n "$REBUILD" ]; then
  case $REBUILD in *[!0-9]*) die "--revision wants a number, got '$REBUILD'" ;; esac
  REVISION=$REBUILD
fi
# The build's name, compiled into both binaries (`--version`, qoslane_build_info):
# two package revisions, or two commits, never print the same version.
# shellcheck source=build_name.sh
. "$REPO/packaging/build_name.sh"
QOSLANE_BUILD=$(qoslane_build_name "$REPO" "$REVISION") || die "cannot name the build"
export QOSLANE_BUILD
# A rebuild as another revision in a target directory of its own: revision 1's build in
# target/release stays the end-to-end suites' (same name: nothing relinked), and a second
# build of that revision (a later suite's) finds its own.
if [ "$REVISION" != 1 ] && [ -z "${CARGO_TARGET_DIR:-}" ]; then
  export CARGO_TARGET_DIR="$REPO/target/revision-$REVISION"
fi
log "cargo build --release -p qoslane -p hookrun ($QOSLANE_BUILD)"
cargo build --release -q -p qoslane -p hookrun
REL=${CARGO_TARGET_DIR:-$REPO/target}/release

# The OpenSM event plugin, against the installed libopensm-dev: the version string OpenSM
# compares (osm_version.h's OSM_VERSION, "OpenSM 3.3.23") gives the Depends' range.
OSM_VERSION_H=/usr/include/infiniband/opensm/osm_version.h
[ -f "$OSM_VERSION_H" ] || die "$OSM_VERSION_H missing: the OpenSM plugin builds against libopensm-dev (scripts/install-deps.sh)"
OSM_UPSTREAM=$(sed -n 's/^#define OSM_VERSION "OpenSM \([0-9][0-9.]*\)"$/\1/p' "$OSM_VERSION_H")
[ -n "$OSM_UPSTREAM" ] || die "$OSM_VERSION_H: no OSM_VERSION \"OpenSM X.Y.Z\""
# The package that holds the header must be of that upstream version (its epoch and revision
# aside): a header of another OpenSM than the one installed would pin the wrong one.
osm_dev=$(dpkg-query -W -f='${Version}' libopensm-dev 2>/dev/null || true)
osm_dev=${osm_dev#*:}; osm_dev=${osm_dev%-*}; osm_dev=${osm_dev%%[+~]*}
[ -z "$osm_dev" ] || [ "$osm_dev" = "$OSM_UPSTREAM" ] ||
  die "libopensm-dev is upstream $osm_dev but its osm_version.h says OpenSM $OSM_UPSTREAM"
# The next upstream version: the last number plus one (3.3.23 -> 3.3.24); "<< 3.3.24~" admits
# every Debian revision and rebuild of 3.3.23 (3.3.23-2+b1 keeps the string), nothing later.
OSM_NEXT=$(awk -F. -v OFS=. '{ $NF = $NF + 1; print }' <<<"$OSM_UPSTREAM")
PLUGIN=qoslane-opensm-plugin
PLUGIN_BUILD=$REPO/target/packaging/smplugin
log "make -C smplugin libqoslane_sm.so (OpenSM $OSM_UPSTREAM, hardened as dpkg-buildflags says)"
rm -rf "$PLUGIN_BUILD"
flags() { DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get "$1"; }
make -s -C "$REPO/smplugin" O="$PLUGIN_BUILD" QSM_BUILD="$QOSLANE_BUILD" \
  CFLAGS="$(flags CFLAGS)" CPPFLAGS="$(flags CPPFLAGS)" LDFLAGS="$(flags LDFLAGS)" \
  "$PLUGIN_BUILD/libqoslane_sm.so" >&2 || die "the OpenSM plugin did not build (smplugin/)"
# hookrun took /usr/sbin/hookrun over from the single qoslane package of 0.1.0 in release 0.2.0.
REPLACES_BEFORE=0.2.0~
SUMMARY="Slurm QoS to InfiniBand Service Level for jobs, on the node"
DESCRIPTION="qoslane maps a Slurm job's QoS to an InfiniBand Service Level from a YAML
mapping, checks on the node's HCA ports that the SL lands on the intended
Virtual Lane as the Subnet Manager programmed it, applies the level's node
settings transactionally (journaled, verified, rolled back on failure) and
makes the job's libraries (UCX, NCCL, Open MPI, MVAPICH2) use that SL. Its
hooks run under hookrun (package hookrun), the Slurm hook framework."
HOOKRUN_SUMMARY="Slurm Prolog/Epilog/TaskProlog/HealthCheckProgram hook framework"
HOOKRUN_DESCRIPTION="hookrun is the program slurm.conf names as Prolog, Epilog, TaskProlog and
HealthCheckProgram: it runs the hooks of /etc/slurm/<phase>.d in order, each
under its own deadline, with an exact environment, reports a failed hook as
Slurm expects (the job requeued, held or the node drained, as configured)
and reports and skips a hook whose link is broken. Its removal is refused
while Slurm's configuration still runs it."
PLUGIN_SUMMARY="OpenSM event plugin telling qoslane what the subnet manager changed"
PLUGIN_DESCRIPTION="qoslane_sm is an OpenSM event plugin: for each sweep, routing change,
forwarding-table (LFT) change and trap the subnet manager reports, it appends
a 64-byte record to a bounded spool on a tmpfs (/run/qoslane-sm), where
qoslane reads what changed instead of waiting for its next poll. It never
blocks the SM. Installing it enables nothing: add event_plugin_name
qoslane_sm to opensm.conf (see the README). It is built for one upstream
OpenSM version, the one OpenSM checks when it loads a plugin."
MAINTAINER="qoslane maintainers <qoslane@users.noreply.github.com>"
HOMEPAGE=https://github.com/qoslane/qoslane
mkdir -p "$OUT"
# Installed into /usr/share/doc/qoslane (the man pages and --help name them).
DOCS="admin-guide.md fabric.md hookrun.md metrics.md omnia.md"
# (docs/PERFORMANCE.md and docs/RELIABILITY.md are engineering records, not shipped.)
# Installed into /usr/share/doc/qoslane-opensm-plugin, from smplugin/.
PLUGIN_DOCS="README.md"

# ------------------------------------------------------------ generated files
GEN=$REPO/target/packaging/generated
rm -rf "$GEN"; mkdir -p "$GEN/man" "$GEN/completions"
for bin in qoslane hookrun; do
  "$REL/$bin" generate man "$GEN/man"
  for sh in bash zsh fish; do "$REL/$bin" generate completions "$sh" "$GEN/completions"; done
done
gzip -9n "$GEN"/man/*.[58]
for page in qoslane.8 hookrun.8 qoslane-mapping.5 hookrun.conf.5; do
  [ -s "$GEN/man/$page.gz" ] || die "generate man wrote no $page"
done
# The packages' changelogs are made from CHANGELOG.md (packaging/changelog.sh), whose newest
# release is the version being built; a local rebuild (--revision 2 and up) gets its own entry.
top=$(sed -n 's/^## \([^ ]*\) .*/\1/p' "$REPO/CHANGELOG.md" | head -1)
[ "$top" = "$VERSION" ] || die "CHANGELOG.md's newest release is ${top:-none}, not $VERSION: add its section"
local_rebuild=(); if [ "$REVISION" != 1 ]; then local_rebuild=("${VERSION}-${REVISION}"); fi
bash "$REPO/packaging/changelog.sh" debian "$REPO/CHANGELOG.md" "$MAINTAINER" "${local_rebuild[@]}" > "$GEN/changelog.Debian" ||
  die "CHANGELOG.md does not parse (packaging/changelog.sh)"
gzip -9n "$GEN/changelog.Debian"

# ------------------------------------------------------------ staged trees
# stage_program DIR ZSH_DIR NAME: /usr/sbin/NAME, stripped as distribution packages ship
# binaries (debug data is 10x the code), and its bash, zsh and fish completions
stage_program() {
  local d=$1 zsh=$2 b=$3
  install -D -m 0755 "$REL/$b" "$d/usr/sbin/$b"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$d/usr/sbin/$b"
  install -D -m 0644 "$GEN/completions/$b.bash" "$d/usr/share/bash-completion/completions/$b"
  install -D -m 0644 "$GEN/completions/_$b" "$d$zsh/_$b"
  install -D -m 0644 "$GEN/completions/$b.fish" "$d/usr/share/fish/vendor_completions.d/$b.fish"
}

# stage_hookrun DIR ZSH_DIR: hookrun's installed tree under DIR
stage_hookrun() {
  local d=$1 zsh=$2
  install -D -m 0644 "$GEN/man/hookrun.8.gz" "$d/usr/share/man/man8/hookrun.8.gz"
  install -D -m 0644 "$GEN/man/hookrun.conf.5.gz" "$d/usr/share/man/man5/hookrun.conf.5.gz"
  stage_program "$d" "$zsh" hookrun
  install -D -m 0755 "$REPO/packaging/maint/hookrun/remove" "$d/usr/lib/hookrun/remove"
}

# stage_qoslane DIR ZSH_DIR [SITE_DIR]: qoslane's installed tree under DIR (SITE_DIR: default|sysconfig)
stage_qoslane() {
  local d=$1 zsh=$2 p
  install -d -m 0755 "$d/usr/share/man/man8" "$d/usr/share/man/man5"
  install -m 0644 "$GEN"/man/qoslane*.8.gz "$d/usr/share/man/man8/"
  install -m 0644 "$GEN"/man/qoslane-mapping.5.gz "$d/usr/share/man/man5/"
  stage_program "$d" "$zsh" qoslane
  install -D -m 0644 "$REPO/examples/qos-network.yml" "$d/usr/share/doc/qoslane/examples/qos-network.yml"
  for p in $DOCS; do install -D -m 0644 "$REPO/docs/$p" "$d/usr/share/doc/qoslane/$p"; done
  # systemd units, shipped disabled (no preset, no postinst enabling them).
  for p in "$REPO"/packaging/systemd/*; do install -D -m 0644 "$p" "$d/usr/lib/systemd/system/$(basename "$p")"; done
  install -D -m 0644 "$REPO/deploy/prometheus/qoslane-alerts.yml" "$d/usr/share/qoslane/prometheus/qoslane-alerts.yml"
  install -D -m 0644 "$REPO/deploy/prometheus/scrape-qoslane.yml" "$d/usr/share/qoslane/prometheus/scrape-qoslane.yml"
  install -D -m 0644 "$REPO/deploy/prometheus/grafana-qoslane.json" "$d/usr/share/qoslane/grafana/grafana-qoslane.json"
  install -D -m 0644 "$REPO/packaging/logrotate/qoslane" "$d/etc/logrotate.d/qoslane"
  # The site options: /etc/default on Debian, /etc/sysconfig on the RHEL family (stage SITE_DIR).
  install -D -m 0644 "$REPO/packaging/default/qoslane" "$d/etc/${3:-default}/qoslane"
  install -D -m 0755 "$REPO/packaging/maint/qoslane/remove-state" "$d/usr/lib/qoslane/remove-state"
  # Every hook is qoslane itself, no shell in between: run with no argument,
  # it acts on SLURM_SCRIPT_CONTEXT (Prolog, Epilog, TaskProlog) or hookrun's
  # HOOKRUN_PHASE (health), and reads the site options file itself (a /bin/sh
  # wrapper cost ~0.7-1.2 ms per run; docs/PERFORMANCE.md).
  for p in $HOOKS; do
    install -d -m 0755 "$d/usr/lib/qoslane/hooks/${p%/*}"
    ln -s ../../../../sbin/qoslane "$d/usr/lib/qoslane/hooks/$p"
  done
  # The entry slurm.conf names: the binary under hookrun's name, its hooks built in.
  ln -s ../../sbin/qoslane "$d/usr/lib/qoslane/hookrun"
}

# stage_plugin DIR LIBDIR: the plugin's installed tree under DIR (LIBDIR: where OpenSM's dlopen
# finds it through the linker's path), stripped as distribution packages ship libraries
stage_plugin() {
  install -D -m 0644 "$PLUGIN_BUILD/libqoslane_sm.so" "$1$2/libqoslane_sm.so"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$1$2/libqoslane_sm.so"
  local p
  for p in $PLUGIN_DOCS; do install -D -m 0644 "$REPO/smplugin/$p" "$1/usr/share/doc/$PLUGIN/$p"; done
}

# ------------------------------------------------------------ .deb
# deb_control ST PKG DEPENDS RECOMMENDS SUMMARY DESCRIPTION [REPLACES]: ST/DEBIAN/control
deb_control() {
  local st=$1
  {
    echo "Package: $2"
    echo "Source: qoslane"
    echo "Version: ${VERSION}-${REVISION}"
    echo "Architecture: $(dpkg --print-architecture)"
    echo "Maintainer: $MAINTAINER"
    echo "Installed-Size: $(du -sk --exclude=DEBIAN "$st" | cut -f1)"
    echo "Depends: $3"
    [ -z "$4" ] || echo "Recommends: $4"
    [ -z "${7:-}" ] || echo "Replaces: $7"
    echo "Section: admin"
    echo "Priority: optional"
    echo "Homepage: $HOMEPAGE"
    echo "Description: $5"
    printf '%s\n' "$6" | sed 's/^/ /'
  } > "$st/DEBIAN/control"
}

# deb_pack ST PKG: md5sums, modes, dpkg-deb into OUT
deb_pack() {
  local st=$1 deb
  (cd "$st" && find usr -type f -print0 | sort -z | xargs -0 md5sum > DEBIAN/md5sums)
  chmod 0644 "$st"/DEBIAN/control "$st"/DEBIAN/md5sums
  [ ! -e "$st/DEBIAN/conffiles" ] || chmod 0644 "$st/DEBIAN/conffiles"
  deb=$OUT/${2}_${VERSION}-${REVISION}_$(dpkg --print-architecture).deb
  dpkg-deb --root-owner-group -Zxz --build "$st" "$deb" >/dev/null
  log "built $deb"
}

# deb_docs ST PKG: copyright, changelog and lintian overrides of PKG
deb_docs() {
  install -D -m 0644 "$REPO/packaging/debian/copyright" "$1/usr/share/doc/$2/copyright"
  install -D -m 0644 "$GEN/changelog.Debian.gz" "$1/usr/share/doc/$2/changelog.Debian.gz"
  install -D -m 0644 "$REPO/packaging/debian/$2.lintian-overrides" "$1/usr/share/lintian/overrides/$2"
}

build_deb_native() {
  local arch st depends
  arch=$(dpkg --print-architecture)
  # Depends from the binaries' shared libraries, as dpkg-shlibdeps computes
  # them for any Debian package (it wants a debian/control to sit beside).
  local sd=$REPO/target/packaging/deb/shlibdeps
  rm -rf "$sd"; mkdir -p "$sd/debian"
  printf 'Source: qoslane\n\nPackage: qoslane\nArchitecture: any\n' > "$sd/debian/control"
  shlibs() { (cd "$sd" && dpkg-shlibdeps -O "$1" 2>/dev/null | sed -n 's/^shlibs:Depends=//p'); }

  st=$REPO/target/packaging/deb/hookrun_${VERSION}-${REVISION}_$arch
  rm -rf "$st"
  stage_hookrun "$st" /usr/share/zsh/vendor-completions
  deb_docs "$st" hookrun
  depends=$(shlibs "$st/usr/sbin/hookrun"); [ -n "$depends" ] || die "dpkg-shlibdeps found no dependencies of hookrun"
  install -d -m 0755 "$st/DEBIAN"
  # The qoslane of the first builds was one package holding /usr/sbin/hookrun: hookrun takes
  # the file over from it (dpkg -i hookrun qoslane, hookrun first: no moment without the
  # program slurm.conf runs). No Breaks: dpkg -i would refuse hookrun without
  # --auto-deconfigure, and with it deconfigure the installed qoslane, whose prerm (0.1.0's)
  # releases the levels running jobs hold. The one state Breaks would forbid, the single
  # qoslane beside this hookrun (a lone hookrun, or dpkg's downgrade to one package), works:
  # its shell hooks run under this hookrun (tests/e2e/packages_upgrade.sh runs jobs so).
  deb_control "$st" hookrun "$depends" slurmd "$HOOKRUN_SUMMARY" "$HOOKRUN_DESCRIPTION" \
    "qoslane (<< $REPLACES_BEFORE)"
  install -m 0755 "$REPO/packaging/maint/hookrun/prerm" "$REPO/packaging/maint/hookrun/postrm" "$st/DEBIAN/"
  deb_pack "$st" hookrun

  st=$REPO/target/packaging/deb/qoslane_${VERSION}-${REVISION}_$arch
  rm -rf "$st"
  stage_qoslane "$st" /usr/share/zsh/vendor-completions
  deb_docs "$st" qoslane
  # Debian policy 12.3: documentation over 4 kB is compressed (the example and
  # the copyright stay plain).
  find "$st/usr/share/doc/qoslane" -maxdepth 1 -name '*.md' -size +4k -exec gzip -9n {} +
  depends=$(shlibs "$st/usr/sbin/qoslane"); [ -n "$depends" ] || die "dpkg-shlibdeps found no dependencies of qoslane"
  install -d -m 0755 "$st/DEBIAN"
  # hookrun of this very build: the hooks and hookrun are one release. smpquery
  # (fabric_check: enforce, the fabric audit) and the audit log's rotation.
  deb_control "$st" qoslane "hookrun (= ${VERSION}-${REVISION}), $depends" \
    "slurmd, infiniband-diags, logrotate" "$SUMMARY" "$DESCRIPTION"
  printf '/etc/default/qoslane\n/etc/logrotate.d/qoslane\n' > "$st/DEBIAN/conffiles"
  install -m 0755 "$REPO/packaging/maint/qoslane/prerm" "$REPO/packaging/maint/qoslane/postrm" "$st/DEBIAN/"
  deb_pack "$st" qoslane

  st=$REPO/target/packaging/deb/${PLUGIN}_${VERSION}-${REVISION}_$arch
  rm -rf "$st"
  stage_plugin "$st" "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
  deb_docs "$st" "$PLUGIN"
  find "$st/usr/share/doc/$PLUGIN" -maxdepth 1 -name '*.md' -size +4k -exec gzip -9n {} +
  depends=$(shlibs "$st"/usr/lib/*/libqoslane_sm.so); [ -n "$depends" ] || die "dpkg-shlibdeps found no dependencies of the plugin"
  install -d -m 0755 "$st/DEBIAN"
  # The OpenSM it was built against, to the upstream version: OpenSM skips a plugin of another
  # (its version string), so apt holds OpenSM back until the plugin of the next is installed.
  deb_control "$st" "$PLUGIN" "$depends, opensm (>= $OSM_UPSTREAM), opensm (<< $OSM_NEXT~)" "" \
    "$PLUGIN_SUMMARY" "$PLUGIN_DESCRIPTION"
  # The linker's cache (OpenSM's dlopen finds lib<name>.so through it), as debhelper's ldconfig trigger.
  echo 'activate-noawait ldconfig' > "$st/DEBIAN/triggers"; chmod 0644 "$st/DEBIAN/triggers"
  deb_pack "$st" "$PLUGIN"
}

# ------------------------------------------------------------ .rpm
build_rpm_native() {
  command -v rpmbuild >/dev/null || die "rpmbuild not found (Debian: apt-get install rpm)"
  local top=$REPO/target/packaging/rpm arch p
  arch=$(uname -m)
  rm -rf "$top"; mkdir -p "$top"/{BUILD,RPMS,SPECS,SRPMS,BUILDROOT}
  # One tree, both packages: the spec's %files split it.
  stage_hookrun "$top/stage" /usr/share/zsh/site-functions
  stage_qoslane "$top/stage" /usr/share/zsh/site-functions sysconfig
  stage_plugin "$top/stage" "$(rpm --eval '%{_libdir}')"
  for p in qoslane hookrun "$PLUGIN"; do
    install -D -m 0644 "$REPO/packaging/debian/copyright" "$top/stage/usr/share/licenses/$p/copyright"
  done
  install -d -m 0750 "$top/stage/var/log/qoslane"
  sed -e "s|@VERSION@|$VERSION|" -e "s|@RELEASE@|$REVISION|" -e "s|@SUMMARY@|$SUMMARY|" \
      -e "s|@HOOKRUN_SUMMARY@|$HOOKRUN_SUMMARY|" -e "s|@REPLACES_BEFORE@|$REPLACES_BEFORE|" \
      -e "s|@URL@|$HOMEPAGE|" -e "s|@PACKAGER@|$MAINTAINER|" -e "s|@PLUGIN_SUMMARY@|$PLUGIN_SUMMARY|" \
      -e "s|@OSM_UPSTREAM@|$OSM_UPSTREAM|" -e "s|@OSM_NEXT@|$OSM_NEXT|" "$REPO/packaging/rpm/qoslane.spec.in" > "$top/SPECS/qoslane.spec"
  printf '%s\n' "$DESCRIPTION" > "$top/description"
  printf '%s\n' "$HOOKRUN_DESCRIPTION" > "$top/hookrun-description"
  printf '%s\n' "$PLUGIN_DESCRIPTION" > "$top/plugin-description"
  # %changelog: the Debian changelog's entries, each release's, as rpm writes them.
  zcat "$GEN/changelog.Debian.gz" | bash "$REPO/packaging/changelog.sh" rpm > "$top/changelog"
  rpmbuild -bb --quiet \
    --define "_topdir $top" --define "_stagedir $top/stage" --define "_descfile $top/description" \
    --define "_hookrun_descfile $top/hookrun-description" --define "_changelogfile $top/changelog" \
    --define "_plugin_descfile $top/plugin-description" \
    --define "_build_id_links none" --define "debug_package %{nil}" --define "__os_install_post %{nil}" \
    --target "$arch" "$top/SPECS/qoslane.spec" >"$top/rpmbuild.log" 2>&1 ||
    { tail -20 "$top/rpmbuild.log" >&2; die "rpmbuild failed (log: $top/rpmbuild.log)"; }
  for p in qoslane hookrun "$PLUGIN"; do
    cp "$top/RPMS/$arch/$p-${VERSION}-${REVISION}.$arch.rpm" "$OUT/"
    log "built $OUT/$p-${VERSION}-${REVISION}.$arch.rpm"
  done
}

# ------------------------------------------------------------ cargo tools
build_with_cargo_tools() {
  # The assets of [package.metadata.deb] / [package.metadata.generate-rpm]
  # point at target/packaging/generated (made above) and packaging/. Those
  # tools make no symlinks: their hooks are /bin/sh wrappers that exec
  # qoslane (the native packages link qoslane itself, ~0.7-1.2 ms less per
  # run: docs/PERFORMANCE.md).
  local p
  for p in $HOOKS; do
    install -d "$GEN/hooks/${p%/*}"
    # shellcheck disable=SC2016  # the wrapper's own "$@", at its run time
    printf '%s\n' '#!/bin/sh' '# a qoslane hook (cargo-deb/cargo-generate-rpm packages: the native ones link qoslane).' \
      'exec /usr/sbin/qoslane "$@"' > "$GEN/hooks/$p"
  done
  if [ $WANT_DEB = 1 ]; then
    cargo deb --version >/dev/null 2>&1 || die "cargo-deb not installed (cargo install --locked cargo-deb)"
    for p in hookrun qoslane; do cargo deb -p "$p" --no-build --no-strip --output "$OUT" >&2; done
  fi
  if [ $WANT_RPM = 1 ]; then
    cargo generate-rpm --version >/dev/null 2>&1 || die "cargo-generate-rpm not installed (cargo install --locked cargo-generate-rpm)"
    for p in hookrun qoslane; do cargo generate-rpm -p "crates/$p" -o "$OUT" >&2; done
  fi
}

if [ $CARGO_TOOLS = 1 ]; then
  build_with_cargo_tools
else
  [ $WANT_DEB = 1 ] && build_deb_native
  [ $WANT_RPM = 1 ] && build_rpm_native
fi
log "done in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')s: $(cd "$OUT" && printf '%s ' qoslane[_-]* hookrun[_-]*)"
