#!/usr/bin/env bash
# Installs what the real-server benchmarks (tests/bench/pg_backup.py,
# kv_backup.py, loader.py, anon_churn.py, warm.py) need on Debian 12, on top of
# scripts/deps.sh.  Idempotent: packages already present are not fetched.
# The scripts run under Debian's /usr/bin/python3: python3-plyvel and
# python3-matplotlib are installed for it, not for another python3 on PATH.
set -euo pipefail
here=$(dirname "$0")
"$here/deps.sh" postgresql-15 python3-plyvel python3-matplotlib nocache fio rsync tar pv linux-perf nginx-light
# The Debian package starts a "main" cluster; the benchmark makes its own
# scratch cluster on a private socket and does not use it; so with nginx,
# which warm.py starts on a configuration and port of its own.
