#!/usr/bin/env bash
# Builds the Debian package from a clean clone and tries it as a user
# would, then takes it all away again:
#   1. clones the repository's HEAD (committed work only) into a scratch
#      directory and installs the build-dependencies debian/control names
#      (apt-get build-dep on the clone);
#   2. dpkg-buildpackage -b -us -uc, then lintian on the result (0 errors
#      and 0 warnings required);
#   3. installs the .deb, streams a cold file with `madvseq run --report --
#      cat BIG` using the installed files only and checks that what cat read
#      did not stay cached; checks `madvseq stat` against fincore; runs
#      `systemd-analyze verify` on the installed units;
#   4. purges the package and checks that every file it installed is gone
#      and that nothing else appeared under /etc, /usr, /lib and /var/lib.
# It removes the clone, the test file, and the build-dependencies it had to
# install (not those that were there before), also on failure or Ctrl-C.
#
#   scripts/package.sh [--keep-debs DIR]
#
# Needs root (apt, dpkg, page-cache eviction) and Debian's apt archive.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
keep=
if [ "${1:-}" = --keep-debs ]; then
	keep=$(realpath -m "$2")
fi
[ "$(id -u)" -eq 0 ] || { echo "package: needs root (apt, dpkg); try: sudo $0" >&2; exit 1; }

# A disk filesystem for the test file (page-cache figures mean nothing on tmpfs).
scratch=$(mktemp -d "${PKG_SCRATCH:-/var/tmp}/madvseq-package.XXXXXX")
pkgs_before=$(mktemp)
installed_deps=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	set +e
	if dpkg-query -W -f='${Status}' madvseq 2>/dev/null | grep -q 'ok installed\|config-files'; then
		DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq madvseq >/dev/null
	fi
	if [ -n "$installed_deps" ]; then
		echo "package: removing the build-dependencies this script installed: $installed_deps"
		# shellcheck disable=SC2086
		DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $installed_deps >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get autoremove --purge -y -qq >/dev/null
	fi
	rm -rf "$scratch" "$pkgs_before"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

step() { printf '\n=== package: %s\n' "$*"; }
fail() { echo "package: FAIL: $*" >&2; exit 1; }

step "clean clone of $(git -C "$repo" rev-parse --short HEAD)"
git clone -q --no-hardlinks "$repo" "$scratch/src"
src=$scratch/src
version=$(sed -n "s/^  version: '\([^']*\)'.*/\1/p" "$src/meson.build")
debversion=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version 2>/dev/null ||
	sed -n '1s/.*(\(.*\)).*/\1/p' "$src/debian/changelog")
[ "$version" = "$debversion" ] ||
	fail "meson.build says $version, debian/changelog says $debversion: one version"
echo "version $version"

step "build-dependencies (apt-get build-dep on the clone)"
dpkg-query -W -f='${Package}\n' | sort > "$pkgs_before"
export DEBIAN_FRONTEND=noninteractive
command -v dpkg-buildpackage >/dev/null || apt-get install -y -qq --no-install-recommends dpkg-dev >/dev/null
apt-get build-dep -y -qq "$src" >/dev/null || { apt-get update -qq && apt-get build-dep -y -qq "$src" >/dev/null; }
installed_deps=$(dpkg-query -W -f='${Package}\n' | sort | comm -13 "$pkgs_before" - | tr '\n' ' ')
echo "newly installed: ${installed_deps:-none}"
( cd "$src" && dpkg-checkbuilddeps ) || fail "build-dependencies not satisfied"

step "dpkg-buildpackage -b -us -uc"
( cd "$src" && dpkg-buildpackage -b -us -uc ) > "$scratch/build.log" 2>&1 ||
	{ tail -40 "$scratch/build.log"; fail "dpkg-buildpackage failed"; }
grep -E '^dpkg-buildpackage: info: binary-only upload|dpkg-deb: building package' "$scratch/build.log"
deb=$(ls "$scratch"/madvseq_"$version"_*.deb)
changes=$(ls "$scratch"/libmadvseq_"$version"_*.changes)

step "lintian"
command -v lintian >/dev/null || { apt-get install -y -qq --no-install-recommends lintian >/dev/null; installed_deps="$installed_deps lintian"; }
lintian --fail-on none --tag-display-limit 0 --info "$changes" | tee "$scratch/lintian.log"
errors=$(grep -c '^E: ' "$scratch/lintian.log" || true)
warnings=$(grep -c '^W: ' "$scratch/lintian.log" || true)
echo "lintian: $errors errors, $warnings warnings"
[ "$errors" -eq 0 ] && [ "$warnings" -eq 0 ] || fail "lintian is not clean"
if [ -n "$keep" ]; then
	mkdir -p "$keep"
	cp "$deb" "$changes" "$keep"/
fi

step "install"
snapshot() { # the files a package could leave behind
	find /etc /usr /lib /var/lib -xdev \
		\( -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/lib/systemd/deb-systemd-helper-enabled \
		   -o -path /var/lib/systemd/deb-systemd-user-helper-enabled -o -path /var/lib/ucf \) -prune \
		-o -print 2>/dev/null | sort
}
snapshot > "$scratch/files.before"
apt-get install -y -qq "$deb" >/dev/null
dpkg-query -L madvseq | sort > "$scratch/dpkg-L"
lib=$(grep '/libmadvseq/libmadvseq\.so$' "$scratch/dpkg-L") || fail "no private libmadvseq.so"
echo "installed $(wc -l < "$scratch/dpkg-L") paths; the library: $lib"
for f in /usr/bin/madvseq /usr/sbin/madvseqd /usr/sbin/madvseqctl /etc/madvseq/madvseqd.conf \
	 /lib/systemd/system/madvseqd.service /usr/share/man/man1/madvseq.1.gz; do
	[ -e "$f" ] || [ -e "${f/sbin/bin}" ] || fail "$f not installed"
done
grep -q '^/usr/include/madvseq/protocol.h$' "$scratch/dpkg-L" && fail "the wire protocol header is installed"
grep -q '^/etc/madvseq/madvseqd.conf$' /var/lib/dpkg/info/madvseq.conffiles || fail "no conffile"
madvseq --version
madvseqctl --version
madvseqd --version
madvseqd --check-config /etc/madvseq/madvseqd.conf > /dev/null || fail "the conffile does not check"

step "madvseq run --report -- cat BIG (installed files, a cold 512 MiB file)"
big=$scratch/big
dd if=/dev/urandom of="$big" bs=1M count=512 status=none
sync "$big"
python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$big"
before=$(fincore -b -n -o RES "$big" | tr -d ' ')
MADVSEQ_DAEMON=0 madvseq run --report -- cat "$big" > /dev/null 2> "$scratch/report"
cat "$scratch/report"
after=$(fincore -b -n -o RES "$big" | tr -d ' ')
echo "cached before: $((before >> 20)) MiB, after: $((after >> 20)) MiB of 512 MiB"
[ "$after" -le $((20 << 20)) ] || fail "cat left $((after >> 20)) MiB cached (lag 16M + 4M)"
grep -Eq 'read\(\) streams: 1 managed, [^,]+ streamed, (49[0-9]|5[01][0-9])\.[0-9] MiB dropped' "$scratch/report" ||
	{ od -c "$scratch/report" | head -20; fail "the report does not show ~500 MiB dropped"; }

step "madvseq stat against fincore"
vmtouch_half() { dd if="$big" of=/dev/null bs=1M count=200 status=none; }
vmtouch_half
ours=$(madvseq stat --json "$big" | python3 -c 'import json,sys; print(json.load(sys.stdin)["files"][0]["cached"])')
theirs=$(fincore -b -n -o RES "$big" | tr -d ' ')
madvseq stat "$big"
echo "madvseq stat: $ours bytes cached, fincore: $theirs"
[ "$ours" = "$theirs" ] || fail "madvseq stat and fincore disagree"

step "systemd-analyze verify"
units=$(grep '^/lib/systemd/system/.*\.\(service\|timer\)$' "$scratch/dpkg-L")
# shellcheck disable=SC2086
systemd-analyze verify $units && echo "verified: $units"

step "purge"
apt-get purge -y -qq madvseq >/dev/null
while read -r f; do
	[ "$f" = /. ] && continue
	if [ -e "$f" ] && [ ! -d "$f" ]; then fail "left behind: $f"; fi
done < "$scratch/dpkg-L"
snapshot > "$scratch/files.after"
if ! diff "$scratch/files.before" "$scratch/files.after" > "$scratch/files.diff"; then
	cat "$scratch/files.diff"
	fail "the file tree differs after purge"
fi
[ ! -e /etc/madvseq ] || fail "/etc/madvseq left behind"
echo "nothing left behind ($(wc -l < "$scratch/files.before") paths compared)"
step "done: package $deb built, lintian clean, installed, run, verified, purged"
