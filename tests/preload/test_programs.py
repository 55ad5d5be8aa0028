#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Real programs nobody here wrote, streaming through MADV_SEQUENTIAL
mappings under the shim: fio's mmap engine with --fadvise_hint=1, and
Python's mmap.madvise(MADV_SEQUENTIAL).

usage: test_programs.py fio|python|fio-no-shim"""

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import time

from msqtest import (M, Monitor, Workdir, cached, check, done, evict, plain_env, read_ahead_bytes,
                     shim_env, skip)

SIZE = 512 * M
LAG = 16 * M
# Room for an engine cycle that comes late on a busy machine.
SCHED_SLACK = 64 * M

PY_STREAMER = r"""
import hashlib, mmap, sys, time
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    m.madvise(mmap.MADV_SEQUENTIAL)
    h = hashlib.sha256()
    for off in range(0, len(m), 1 << 20):
        h.update(m[off:off + (1 << 20)])
    print(h.hexdigest(), flush=True)
    time.sleep(0.3)      # the stream is over; the mapping is still there
    sys.stdin.read(1)    # until the test has measured
    m.close()
"""


def fio_cmd(path):
    return ["fio", "--name=stream", "--filename=" + path, "--ioengine=mmap", "--rw=read",
            "--fadvise_hint=1", "--bs=256k", "--size=%d" % SIZE, "--output-format=terse"]


def slack_for(stats_glob, rate):
    """Room for late engine rounds: SCHED_SLACK, or, where the machine kept
    the engine off a CPU longer, what the stream read (at rate bytes/s) in
    its longest gap between two rounds (max_round_gap_us in the stats
    files), plus a chunk; never half the file, which a policy that drops
    nothing would keep anyway."""
    gap_us = 0
    for f in glob.glob(stats_glob):
        for line in open(f):
            if line.startswith("max_round_gap_us="):
                gap_us = max(gap_us, int(line.split("=", 1)[1]))
    slack = min(max(SCHED_SLACK, int(rate * gap_us / 1e6) + 2 * M), SIZE // 2 - LAG)
    print("engine's longest gap between rounds %d ms at %d MiB/s: slack %d MiB"
          % (gap_us // 1000, rate // M, slack // M))
    return slack


def main():
    what = sys.argv[1]
    with Workdir("prog-" + what) as wd:
        path = wd.file("data", SIZE)
        ra = read_ahead_bytes(path)
        evict(path)
        if what.startswith("fio"):
            if not shutil.which("fio"):
                skip("fio is not installed")
            stats = os.path.join(wd.path, "stats.%p")
            env = plain_env() if what == "fio-no-shim" else shim_env(MADVSEQ_STATS=stats)
            mon = Monitor(path)
            t0 = time.time()
            p = subprocess.run(fio_cmd(path), env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=300)
            elapsed = max(time.time() - t0, 0.01)
            peak, after = mon.stop(), cached(path)
            print("fio: peak %d MiB cached, %d MiB after it exited (%d samples)"
                  % (peak // M, after // M, mon.samples))
            check(p.returncode == 0, "fio exits 0 (%s)" % p.stderr.strip()[-200:])
            if what == "fio-no-shim":
                check(after >= SIZE * 9 // 10, "without the shim fio leaves the whole file cached")
                done()
            # fio's job process ends with _exit(): no munmap, no destructor;
            # the shim's _exit drops the last lag.
            check(after <= 4 * M, "after fio, at most 4 MiB of the file is cached")
            # fio's own figure of its read bandwidth (terse field 7, KiB/s):
            # the wall clock also holds its start-up.
            try:
                rate = int(p.stdout.strip().splitlines()[-1].split(";")[6]) * 1024
            except (IndexError, ValueError):
                rate = SIZE / elapsed
            slack = slack_for(stats.replace("%p", "*"), rate)
            check(peak <= LAG + 3 * ra + slack,
                  "while fio streams, at most lag + read-ahead + %d MiB is cached" % (slack // M))
        else:
            stats = os.path.join(wd.path, "stats.%p")
            env = shim_env(MADVSEQ_STATS=stats)
            mon = Monitor(path)
            t0 = time.time()
            p = subprocess.Popen([sys.executable, "-c", PY_STREAMER, path], env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            digest = p.stdout.readline().strip()
            elapsed = max(time.time() - t0, 0.01)
            time.sleep(0.2)
            peak, end = mon.stop(), cached(path)
            p.stdin.write("x")
            p.stdin.close()
            rc = p.wait(timeout=60)
            after = cached(path)
            h = hashlib.sha256()
            with open(path, "rb") as f:
                while True:
                    b = f.read(4 * M)
                    if not b:
                        break
                    h.update(b)
            print("python: peak %d MiB, end of stream %d MiB, after close %d MiB"
                  % (peak // M, end // M, after // M))
            check(rc == 0, "python exits 0")
            check(digest == h.hexdigest(), "sha256 of the data read through the mapping is right")
            check(end <= LAG + 4 * M, "at the end of the stream at most lag + 4 MiB is cached")
            slack = slack_for(stats.replace("%p", "*"), SIZE / elapsed)
            check(peak <= LAG + 3 * ra + slack,
                  "while streaming, at most lag + read-ahead + %d MiB is cached" % (slack // M))
            check(after <= 4 * M, "after mmap.close() the stream's pages are gone")
    done()


if __name__ == "__main__":
    main()
