#!/usr/bin/env bash
# Builds the madvseqd container image from the project's own .deb, with no
# registry: Debian 12's archive is the only source.
#   1. a Debian 12 (bookworm) minbase root made with debootstrap, with the
#      package's run-time libraries, imported into podman as the base image;
#      the tarball is kept in the cache directory under a hash of what made
#      it (suite, mirror, packages, debootstrap's version), so later runs
#      import it again instead of running debootstrap;
#   2. the .deb, built by dpkg-buildpackage from a clone of HEAD (committed
#      work only, as scripts/package.sh builds it), kept in the cache under
#      HEAD's tree hash;
#   3. `podman build` of contrib/container/Containerfile on that base.
#
#   contrib/container/build-image.sh [--tag NAME] [--cache DIR]
#
# Default tag localhost/madvseqd:VERSION; default cache
# $MADVSEQ_IMAGE_CACHE or /var/cache/madvseq-image.  Prints, as its last
# line, "image: NAME SIZE".  Needs root (debootstrap), podman, debootstrap
# and the build-dependencies in debian/control (dpkg-checkbuilddeps says
# which are missing; `apt-get build-dep .` installs them).
# Exit status 77: podman or debootstrap is missing or cannot run here.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
version=$(sed -n "s/^  version: '\([^']*\)'.*/\1/p" "$repo/meson.build")
tag=localhost/madvseqd:$version
cache=${MADVSEQ_IMAGE_CACHE:-/var/cache/madvseq-image}
suite=bookworm
mirror=${MADVSEQ_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What madvseq's binaries link (dpkg-shlibdeps of the .deb) and what its
# DaemonSet's metrics container serves its file with (busybox httpd).
include=liburcu8,libinih1,libsystemd0,busybox

while [ $# -gt 0 ]; do
	case $1 in
	--tag) tag=$2; shift 2 ;;
	--cache) cache=$2; shift 2 ;;
	*) echo "usage: $0 [--tag NAME] [--cache DIR]" >&2; exit 2 ;;
	esac
done

skip() { echo "build-image: SKIP: $*" >&2; exit 77; }
fail() { echo "build-image: FAIL: $*" >&2; exit 1; }
step() { printf '=== build-image: %s\n' "$*" >&2; }

[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, podman's rootful store)"
command -v podman >/dev/null || skip "podman is not installed (apt-get install podman)"
command -v debootstrap >/dev/null || skip "debootstrap is not installed (apt-get install debootstrap)"
podman info >/dev/null 2>&1 || skip "podman cannot run here: $(podman info 2>&1 | tail -1)"
# crun refuses a host whose cgroup v1 hierarchies sit beside a cgroup2
# mount ("hybrid mode"); runc takes it.  Podman's default rlimits (1M
# files) are above what root without CAP_SYS_RESOURCE may set: the
# caller's own hard limits instead.
podman_opts=()
if [ -z "${MADVSEQ_PODMAN_RUNTIME:-}" ] && [ -d /sys/fs/cgroup/memory ] &&
	grep -q ' cgroup2 ' /proc/self/mounts && command -v runc >/dev/null; then
	MADVSEQ_PODMAN_RUNTIME=runc
fi
[ -n "${MADVSEQ_PODMAN_RUNTIME:-}" ] && podman_opts+=(--runtime "$MADVSEQ_PODMAN_RUNTIME")
nproc=$(ulimit -Hu); [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
ulimits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit "nproc=$nproc:$nproc")
if ! deps=$(cd "$repo" && dpkg-checkbuilddeps debian/control 2>&1); then
	fail "$deps (apt-get build-dep $repo installs them)"
fi

scratch=$(mktemp -d "${TMPDIR:-/var/tmp}/madvseq-image.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$cache"

# 1. The base.
dbs_version=$(dpkg-query -W -f='${Version}' debootstrap 2>/dev/null || debootstrap --version)
key=$(printf '%s\n' "$suite" "$mirror" "$include" "minbase" "$dbs_version" | sha256sum | cut -c1-16)
base_tar=$cache/base-$key.tar
base=localhost/madvseq-base:$key
if [ ! -s "$base_tar" ]; then
	step "debootstrap $suite from $mirror (not cached: $base_tar)"
	start=$(date +%s)
	debootstrap --variant=minbase --include="$include" "$suite" "$scratch/root" "$mirror" \
		>"$scratch/debootstrap.log" 2>&1 || {
		tail -20 "$scratch/debootstrap.log" >&2
		grep -q 'Failure trying to run\|Cannot\|Couldn.t' "$scratch/debootstrap.log" &&
			skip "debootstrap cannot run here (see above)"
		fail "debootstrap failed (see above)"
	}
	# What the image does not need: apt's lists and caches, man pages.
	chroot "$scratch/root" apt-get clean
	rm -rf "$scratch/root/var/lib/apt/lists/"* "$scratch/root/usr/share/man/"* \
		"$scratch/root/usr/share/doc/"*/changelog* "$scratch/root/var/log/"*
	tar --numeric-owner -C "$scratch/root" -cf "$base_tar.new" .
	mv "$base_tar.new" "$base_tar"
	rm -rf "$scratch/root"
	step "debootstrap took $(( $(date +%s) - start )) s"
fi
if ! podman image exists "$base"; then
	step "podman import $base_tar as $base"
	podman import --quiet "$base_tar" "$base" >/dev/null
fi

# 2. The .deb of HEAD.
tree=$(git -C "$repo" rev-parse 'HEAD^{tree}')
debdir=$cache/deb-${tree:0:16}
if ! ls "$debdir"/madvseq_*.deb >/dev/null 2>&1; then
	step "dpkg-buildpackage of $(git -C "$repo" rev-parse --short HEAD) (committed work only)"
	git clone -q --no-hardlinks "$repo" "$scratch/src"
	(cd "$scratch/src" && dpkg-buildpackage -b -us -uc) >"$scratch/build.log" 2>&1 || {
		tail -30 "$scratch/build.log" >&2
		fail "dpkg-buildpackage failed (see above)"
	}
	mkdir -p "$debdir.new"
	mv "$scratch"/madvseq_*.deb "$debdir.new/"
	rm -rf "$debdir"
	mv "$debdir.new" "$debdir"
fi

# 3. The image.
step "podman build $tag"
mkdir -p "$scratch/ctx"
cp "$debdir"/madvseq_*.deb "$repo/contrib/container/Containerfile" "$scratch/ctx/"
podman "${podman_opts[@]}" build "${ulimits[@]}" --quiet --pull=never --build-arg BASE="$base" -f "$scratch/ctx/Containerfile" \
	-t "$tag" "$scratch/ctx" >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$tag")
echo "image: $tag $((size / 1024 / 1024)) MiB"
