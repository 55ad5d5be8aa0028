#!/usr/bin/env bash
# Installs what libmadvseq needs to build, test and benchmark on Debian 12,
# and the Debian packages named as arguments (scripts/bench-deps.sh passes
# its own).  Idempotent: packages already present are not fetched again.
set -euo pipefail
pkgs=(build-essential meson ninja-build pkg-config
      liburcu-dev libfiu-dev fiu-utils libinih-dev libsystemd-dev
      fio nocache vmtouch python3 util-linux coreutils rsync tar
      # conformance suite: CPython's own tests for Debian's interpreter, and
      # the programs of the corpus (tests/conformance/README.md)
      python3.11 libpython3.11-testsuite git sqlite3 gzip xz-utils zstd bzip2 perl
      make nodejs openjdk-17-jdk-headless
      # the libFuzzer harnesses (tests/fuzz); strace for the daemon attack tests;
      # mandoc for the man pages' lint (tools-man-lint)
      clang libclang-rt-dev strace mandoc
      # promtool checks the daemon's Prometheus output (kubepods-metrics)
      prometheus
      # the fd discovery's real programs (suite discovery): a Go backup tool,
      # a Go copier, static busybox, pv, and a PostgreSQL server for
      # pg_basebackup; without them those cases skip
      restic rclone busybox-static pv postgresql-15
      "$@")
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing ${missing[*]}; run as root (or with sudo) to install them" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
