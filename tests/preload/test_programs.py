#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Real programs nobody here wrote, streaming through MADV_SEQUENTIAL
mappings under the shim: fio's mmap engine with --fadvise_hint=1, and
Python's mmap.madvise(MADV_SEQUENTIAL).

usage: test_programs.py fio|python|fio-no-shim"""

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


def main():
    what = sys.argv[1]
    with Workdir("prog-" + what) as wd:
        path = wd.file("data", SIZE)
        ra = read_ahead_bytes(path)
        evict(path)
        if what.startswith("fio"):
            if not shutil.which("fio"):
                skip("fio is not installed")
            env = plain_env() if what == "fio-no-shim" else shim_env()
            mon = Monitor(path)
            p = subprocess.run(fio_cmd(path), env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=300)
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
            check(peak <= LAG + 3 * ra + SCHED_SLACK,
                  "while fio streams, at most lag + read-ahead + %d MiB is cached" % (SCHED_SLACK // M))
        else:
            env = shim_env()
            mon = Monitor(path)
            p = subprocess.Popen([sys.executable, "-c", PY_STREAMER, path], env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            digest = p.stdout.readline().strip()
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
            check(peak <= LAG + 3 * ra + SCHED_SLACK,
                  "while streaming, at most lag + read-ahead + %d MiB is cached" % (SCHED_SLACK // M))
            check(after <= 4 * M, "after mmap.close() the stream's pages are gone")
    done()


if __name__ == "__main__":
    main()
