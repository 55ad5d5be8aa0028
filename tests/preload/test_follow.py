#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The thread that drops a stream's pages runs on its reader's CPU
(common/follow.h): the library's engine thread binds itself to the CPU the
program's main thread runs on while it drops behind it, and follows it to
another; with a third thread in the program (the reader not known) it stays
where it was started.  Registered with madvseqd ("daemon"), the library
still drops there: madvseqd decides and asks (MSQ_MSG_DROP), and does not
move.  For a program without the library that it found itself, madvseqd
moves to the reader's CPU when the reader is bound to one ("discovered"),
and goes back to its own affinity once nothing is left to drop; a reader
free to move it leaves alone ("daemon-free").  The pages behind the reader
go in every case.

usage: test_follow.py CASE   (shim, shim-threads, daemon, discovered, daemon-free)"""

import os
import re
import subprocess
import sys
import time

import msqdaemon
from msqtest import M, Workdir, cached, check, done, evict, shim_env, skip

SIZE = 256 * M
LAG = 16 * M

# Maps the file with MADV_SEQUENTIAL (the engine thread starts then, with
# the program's affinity), reads its first half on CPU a and the rest on
# CPU b (each page, front to back), and prints the engine thread's
# affinity after each half.  "threads": a third thread waits meanwhile;
# "free": the reader keeps the program's affinity.
CLIENT = r"""
import mmap, os, sys, threading, time
how, path, a, b = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if how == "threads":
    ev = threading.Event()
    threading.Thread(target=ev.wait, daemon=True).start()
fd = os.open(path, os.O_RDONLY)
m = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
os.close(fd)
m.madvise(mmap.MADV_SEQUENTIAL)

def engine():
    for t in os.listdir("/proc/self/task"):
        try:
            if open("/proc/self/task/%s/comm" % t).read().strip() == "madvseq":
                return sorted(os.sched_getaffinity(int(t)))
        except OSError:
            pass
    return []

n = 0
for cpu, lo, hi in ((a, 0, len(m) // 2), (b, len(m) // 2, len(m))):
    if how != "free":
        os.sched_setaffinity(0, {cpu})   # this thread only
    for o in range(lo, hi, 4096):
        n += m[o]
    time.sleep(0.3)
    print(",".join(map(str, engine())) or "-", flush=True)
print(n, flush=True)
"""


def affinity_of(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


def main():
    case = sys.argv[1]
    if os.geteuid() != 0:
        skip("needs root: cachestat of the test's file, and MADV_PAGEOUT's right to it")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        skip("needs two CPUs to move between (this process may run on %s)" % cpus)
    a, b = cpus[0], cpus[-1]
    with Workdir("follow-" + case) as wd:
        path = wd.file("stream", SIZE)
        evict(path)
        env = shim_env()
        daemon = None
        found = case in ("discovered", "daemon-free")
        if case == "daemon":
            daemon = msqdaemon.serving(wd.path, env)
        elif found:
            if not msqdaemon.available():
                skip("needs root and MADVSEQD (the built daemon)")
            daemon = msqdaemon.Daemon(wd.path, os.path.join(wd.path, "d.sock"),
                                      "[daemon]\ndiscover_interval = 50ms\n"
                                      "[/*]\nmode = pageout\ndiscover = yes\n")
            env = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
        if daemon:
            own = affinity_of(daemon.p.pid)
        try:
            p = subprocess.run([sys.executable, "-c", CLIENT,
                                {"shim-threads": "threads", "daemon-free": "free"}.get(case, "one"), path, str(a), str(b)],
                               env=env, capture_output=True, text=True, timeout=120)
            check(p.returncode == 0, "the client exits 0 (%s)" % p.stderr.strip()[-300:])
            if found:
                # A process without the library exits with its pages
                # mapped until then: the daemon's exit drop takes them.
                time.sleep(1)
            lines = p.stdout.split()
            check(len(lines) == 3, "the client printed its two samples and its sum")
            after_a, after_b = (lines + ["", ""])[:2]
            left = cached(path)
            print("engine thread's CPUs: %s after the first half (read on %d), %s after the "
                  "second (read on %d); %d MiB of %d cached at exit"
                  % (after_a, a, after_b, b, left // M, SIZE // M))
            check(left <= LAG + 8 * M, "the pages behind the reader went (%d MiB cached)"
                  % (left // M))
            full = ",".join(map(str, cpus))
            if case in ("shim", "daemon"):
                check(after_a == str(a), "the engine thread followed the reader to CPU %d (%s)"
                      % (a, after_a))
                check(after_b == str(b), "and then to CPU %d (%s)" % (b, after_b))
            elif case == "shim-threads":
                check(after_a == full and after_b == full,
                      "with a third thread the engine thread kept its CPUs %s (%s, %s)"
                      % (full, after_a, after_b))
            if daemon:
                ctl = os.path.join(os.path.dirname(os.environ["MADVSEQD"]), "madvseqctl")
                st = subprocess.run([ctl, "-s", daemon.sock, "status"], capture_output=True, text=True,
                                    env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
                m = re.search(r"moved to a reader's CPU (\d+) times", st.stdout)
                check(m, "madvseqctl status says how often madvseqd moved (%s)" % st.stdout)
                if case == "daemon":
                    asked = re.search(r"dropped: [^(]*\(([^()]*) of it by the shims, asked\)",
                                      st.stdout)
                    check(asked and asked.group(1) != "0 B",
                          "madvseqd asked the library to drop (%s)"
                          % (asked.group(0) if asked else st.stdout))
                    check(m and int(m.group(1)) == 0,
                          "madvseqd did not move: the library drops on the reader's CPU (%s)"
                          % (m.group(0) if m else "-"))
                if m and case == "discovered":
                    check(int(m.group(1)) >= 1, "madvseqd moved to its client's CPU (%s)" % m.group(0))
                elif m and case == "daemon-free":
                    check(int(m.group(1)) == 0,
                          "madvseqd left a reader free to move alone (%s)" % m.group(0))
                # It goes back a second after its last drop.
                deadline = time.monotonic() + 10
                while affinity_of(daemon.p.pid) != own and time.monotonic() < deadline:
                    time.sleep(0.1)
                check(affinity_of(daemon.p.pid) == own,
                      "with nothing left to drop madvseqd is back on its CPUs %s (%s)"
                      % (own, affinity_of(daemon.p.pid)))
        finally:
            if daemon:
                check(daemon.stop() == 0, "the daemon exits 0")
    done()


if __name__ == "__main__":
    main()
