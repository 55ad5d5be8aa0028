#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""madvseqd's pressure and PSI gates on real cgroup v2 pressure.

Needs cgroup v2 with the memory controller enabled at the root (a guest
booted by run-guest.sh; hosts whose memory controller is v1 skip).  Three
cgroups laid out as systemd makes them, each with its own section in the
daemon's configuration and a shimmed streamer registered with the daemon:

  /system.slice/msq-gate-full-PID.service   memory.max 160M, pressure = 80%:
      another process there read 150M first, so usage sits near the limit:
      the gate must open and the daemon drop;
  /user.slice/user-1000.slice/msq-gate-idle-PID.scope   memory.max 1G,
      pressure = 80%: a 96M stream never gets there: the gate stays closed
      and the daemon drops nothing;
  /system.slice/msq-gate-psi-PID.service    memory.max 128M, psi = 1: closed
      while nothing stalls (memory.pressure some avg10 0: its 96M stream
      fits), open once a reader thrashing a 384M file in it makes the
      cgroup stall.

While they run, the daemon's status (madvseqctl status --format=json) is read
every 250 ms; for each gate it reports what it decided on (usage, limit,
PSI, and how long ago), and the test reads memory.current, memory.max and
memory.pressure itself before and after each request.  Checked: the limit
is memory.max; the decision follows from the figures the daemon reports;
and it agrees with the test's own readings of the files wherever those
stayed clearly on one side of the threshold (usage 5% of the limit away,
PSI 0.5 away) from just before the daemon read them until its answer.
Exit 0 pass, 1 fail, 77 skip."""

import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))

from msqtest import M, Workdir, check, done, evict, make_file, shim_env, skip  # noqa: E402
from test_daemon import Daemon, need_root, tool  # noqa: E402

CG = "/sys/fs/cgroup"


def read(path):
    with open(path) as f:
        return f.read()


def need_v2_memory():
    try:
        ctl = read(CG + "/cgroup.controllers").split()
        sub = read(CG + "/cgroup.subtree_control").split()
    except OSError:
        skip("no cgroup v2 mounted at %s" % CG)
    if "memory" not in ctl or "memory" not in sub:
        skip("the cgroup v2 memory controller is not enabled at the root (v1 host?)")
    for d in ("system.slice", "user.slice/user-1000.slice"):
        if not os.path.isdir(os.path.join(CG, d)) or \
                "memory" not in read(os.path.join(CG, d, "cgroup.subtree_control")).split():
            skip("no %s with the memory controller (run it in tests/guest/run-guest.sh)" % d)


class Group:
    def __init__(self, rel, limit):
        self.rel = rel
        self.path = CG + rel
        os.mkdir(self.path)
        with open(self.path + "/memory.max", "w") as f:
            f.write(str(limit))
        self.procs = []

    def run(self, argv, env=None):
        p = subprocess.Popen(["sh", "-c", 'echo $$ > "$0"/cgroup.procs && exec "$@"', self.path] + argv,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def now(self):
        """memory.current, memory.max and memory.pressure's some avg10, read now."""
        cur = int(read(self.path + "/memory.current"))
        mx = read(self.path + "/memory.max").strip()
        psi = float(read(self.path + "/memory.pressure").split("avg10=")[1].split()[0])
        return cur, (0 if mx == "max" else int(mx)), psi

    def remove(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def decide(pct, psi_thr, usage, limit, avg10):
    """msqd_gate_decide(), for the sections below."""
    if pct and limit and usage * 100 >= pct * limit:
        return True
    return psi_thr > 0 and avg10 >= psi_thr


def main():
    need_root()
    need_v2_memory()
    pid = os.getpid()
    full = Group("/system.slice/msq-gate-full-%d.service" % pid, 160 * M)
    idle = Group("/user.slice/user-1000.slice/msq-gate-idle-%d.scope" % pid, 1 << 30)
    psi = Group("/system.slice/msq-gate-psi-%d.service" % pid, 128 * M)
    # section, pressure %, psi threshold
    gates = {full.rel: (80, 0), idle.rel: (80, 0), psi.rel: (0, 1.0)}
    groups = (full, idle, psi)
    try:
        with Workdir("gate") as wd:
            fill = make_file(os.path.join(wd.path, "fill"), 150 * M)
            thrash = make_file(os.path.join(wd.path, "thrash"), 384 * M)
            streams = {g.rel: make_file(os.path.join(wd.path, "stream-" + g.rel.split("/")[-1]), 96 * M)
                       for g in groups}
            for f in [fill, thrash] + list(streams.values()):
                evict(f)
            conf = "[daemon]\ninterval = 100ms\ndiscover_interval = 30min\n"
            for i, (rel, (pct, thr)) in enumerate(gates.items()):
                # ([label] + match: section names stop at 49 characters)
                conf += "[gate%d]\nmatch = %s\nmode = pageout\n" % (i, rel)
                conf += "pressure = %d%%\n" % pct if pct else "psi = %g\n" % thr
            d = Daemon(wd.path, conf)
            # The full cgroup: 150M of its 160M cached before the stream.
            full.run(["sh", "-c", 'cat "$0" >/dev/null', fill]).wait()
            print("full cgroup after reading 150M: memory.current %dM" % (full.now()[0] // M))
            env = shim_env(MADVSEQ_SOCKET=d.sock)
            # Paced streamers (MiB/s), held mapped after the pass so that the
            # daemon keeps cycling them (and reading their gates).
            for g in groups:
                g.run([tool("STREAMER"), streams[g.rel], "8", "25000"], env=env)
            samples = {g.rel: [] for g in groups}
            hist = {g.rel: [] for g in groups}  # (time, the files read then)
            thrasher = []

            def start_thrash():
                thrasher.append(psi.run(["sh", "-c", 'while :; do cat "$0" >/dev/null; done', thrash]))

            timer = threading.Timer(10.0, start_thrash)
            timer.start()
            t0 = time.time()
            while time.time() - t0 < 26:
                time.sleep(0.25)
                tb = time.time()
                for g in groups:
                    hist[g.rel].append((tb, g.now()))
                st = d.ctl("status", "--format=json", check_rc=False)
                ta = time.time()
                for g in groups:
                    hist[g.rel].append((ta, g.now()))
                if st.returncode != 0:
                    continue
                seen = {c["path"]: c for c in json.loads(st.stdout)["cgroups"]}
                for g in groups:
                    c = seen.get(g.rel)
                    if c and "gate_read" in c:
                        # The files as they were from the daemon's read to now.
                        since = tb - c["gate_read"]["age_ms"] / 1000.0 - 0.3
                        win = [r for tt, r in hist[g.rel] if since <= tt <= ta]
                        samples[g.rel].append((tb - t0, c, win))
            timer.cancel()
            status_text = d.status()
            dropped = {g.rel: 0 for g in groups}
            for line in d.ctl("stats", "--format=prometheus").stdout.splitlines():
                for rel in dropped:
                    if line.startswith('madvseq_dropped_bytes_total{cgroup="%s"}' % rel):
                        dropped[rel] = int(float(line.split()[-1]))
            print(status_text)
            for g in groups:
                pct, thr = gates[g.rel]
                s = samples[g.rel]
                agree = disagree = 0
                opened = closed = 0
                for t, c, win in s:
                    cur, mx, avg10 = win[-1]
                    gr = c["gate_read"]
                    is_open = c["gate"] == "open"
                    opened += is_open
                    closed += not is_open
                    # The figures the daemon reports are the ones it decided on.
                    if is_open != decide(pct, thr, gr["usage_bytes"], gr["limit_bytes"],
                                         gr["psi_some_avg10"]):
                        print("  %.1fs: gate %s but its figures %s say otherwise" % (t, c["gate"], gr))
                        disagree += 1
                        continue
                    if gr["limit_bytes"] != mx:
                        print("  %.1fs: daemon's limit %d, memory.max %d" % (t, gr["limit_bytes"], mx))
                        disagree += 1
                        continue
                    # Against the files as the test read them from just before
                    # the daemon's read until after its answer, where they stayed
                    # clearly on one side of the threshold all along (PSI's
                    # avg10 moves every 2 s).
                    clear = gr["age_ms"] <= 1500 and len(win) >= 2 and all(
                        (not pct or abs(u * 100 - pct * m) > 5 * m) and
                        (not thr or abs(a10 - thr) > 0.5) for u, m, a10 in win) and \
                        len({decide(pct, thr, *r) for r in win}) == 1
                    if clear:
                        if is_open == decide(pct, thr, cur, mx, avg10):
                            agree += 1
                        else:
                            print("  %.1fs: gate %s; memory.current %d, memory.max %d, some avg10 %.2f"
                                  % (t, c["gate"], cur, mx, avg10))
                            disagree += 1
                last = s[-1][2][-1] if s else None
                print("%s: %d samples, gate open %d closed %d, agree %d, disagree %d, dropped %dM%s" % (
                    g.rel, len(s), opened, closed, agree, disagree, dropped[g.rel] // M,
                    "; last: memory.current %dM of %dM, some avg10 %.2f" % (
                        last[0] // M, last[1] // M, last[2]) if last else ""))
                check(len(s) >= 10, "%s: the daemon read the gate (%d samples)" % (g.rel, len(s)))
                check(disagree == 0, "%s: every decision matches the cgroup's files (%d checked)"
                      % (g.rel, agree))
                check(agree >= 5, "%s: enough samples clearly on one side (%d)" % (g.rel, agree))
                if g is full:
                    check(opened > 0 and dropped[g.rel] > 0,
                          "near its limit the gate opened and the daemon dropped (%dM)" % (dropped[g.rel] // M))
                if g is idle:
                    check(opened == 0 and dropped[g.rel] == 0,
                          "far below its limit the gate stayed closed, nothing dropped")
                if g is psi:
                    before = [x for x in s if x[0] < 9.5]
                    after = [x for x in s if x[0] > 16]
                    check(before and all(x[1]["gate"] == "closed" for x in before),
                          "no stall before the thrasher: PSI gate closed")
                    check(any(x[1]["gate"] == "open" and x[2][-1][2] >= thr for x in after),
                          "the thrasher's stalls (memory.pressure) opened the PSI gate")
            d.stop()
    finally:
        for g in groups:
            g.remove()
    done()


if __name__ == "__main__":
    main()
