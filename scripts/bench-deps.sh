#!/usr/bin/env bash
# Installs what the real-server benchmarks (tests/bench/pg_backup.py,
# kv_backup.py, loader.py, anon_churn.py) need on Debian 12, on top of
# scripts/deps.sh.  Idempotent: packages already present are not fetched.
# The scripts run under Debian's /usr/bin/python3: python3-plyvel and
# python3-matplotlib are installed for it, not for another python3 on PATH.
set -euo pipefail
here=$(dirname "$0")
"$here/deps.sh"
pkgs=(postgresql-15 python3-plyvel python3-matplotlib nocache fio rsync tar)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench-deps: missing ${missing[*]}; run as root (or with sudo) to install them" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The Debian package starts a "main" cluster; the benchmark makes its own
# scratch cluster on a private socket and does not use it.
