#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""In a memory cgroup smaller than the stream, a victim's warm file stays
cached while a streamer reads through the shim.  The same stream without
the shim runs first, as the control: it must evict the victim, or there is
no pressure to test against (then the test skips, saying so).

The victim touches its file only now and then, so something else on the
machine may take its cold pages while no stream runs at all (a DAMON
pageout scheme, kdamond, does on these machines).  So a third phase runs
the victim alone for as long as the shim's phase took, and the shim must
keep as much of the file as that phase kept, and at most 5% less.

usage: test_pressure.py SEQCLIENT"""

import os
import subprocess
import sys
import time

from msqtest import (M, Cgroup, Workdir, cached, check, done, evict, plain_env, shim_env, skip)

LIMIT = 256 * M
VICTIM = 128 * M
STREAM = 1024 * M
if "libasan" in os.environ.get("MADVSEQ_PRELOAD", ""):
    # The sanitizer runtimes' own memory (shadow, allocator, quarantine) is
    # charged to the cgroup too: give it that room, or the streamer itself
    # pushes the victim out.
    LIMIT += 96 * M

VICTIM_LOOP = r"""
import os, random, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
for off in range(0, size, 1 << 20):
    os.pread(fd, 1 << 20, off)
print("warm", flush=True)
r = random.Random(1)
while True:   # a light working set: warm, used now and then
    os.pread(fd, 4096, r.randrange(size // 4096) * 4096)
    time.sleep(0.005)
"""


def run_phase(client, mode, wd, idle_s=0.0):
    """Returns (victim file cached before, after, seconds) for one stream;
    mode "idle": no stream, the victim alone for idle_s."""
    victim_file = wd.file("victim", VICTIM)
    stream_file = wd.file("stream", STREAM)
    evict(victim_file)
    evict(stream_file)
    cg = Cgroup(mode, LIMIT)
    victim = None
    try:
        victim = subprocess.Popen(cg.prefix() + [sys.executable, "-c", VICTIM_LOOP, victim_file],
                                  stdout=subprocess.PIPE, text=True, env=plain_env())
        check(victim.stdout.readline().strip() == "warm", "victim warmed its file")
        before = cached(victim_file)
        t0 = time.monotonic()
        if mode == "idle":
            time.sleep(idle_s)
        else:
            env = shim_env() if mode == "shim" else plain_env()
            p = subprocess.run(cg.prefix() + [client, stream_file], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=300)
            check(p.returncode == 0, "streamer exits 0")
        took = time.monotonic() - t0
        after = cached(victim_file)
        print("%s: victim file cached: %d MiB before, %d MiB after %s in a %d MiB cgroup (%s), "
              "%.1f s" % (mode, before // M, after // M,
                          "no stream" if mode == "idle" else "a %d MiB stream" % (STREAM // M),
                          LIMIT // M, "v2" if cg.v2 else "v1", took))
        return before, after, took
    finally:
        if victim:
            victim.kill()
            victim.wait()
        cg.remove()


def main():
    client = sys.argv[1]
    with Workdir("pressure") as wd:
        before, after, _ = run_phase(client, "no-shim", wd)
        if after >= before * 75 // 100:
            skip("the kernel alone kept %d%% of the victim's file: no pressure to test against"
                 % (100 * after // max(before, 1)))
        before, after, took = run_phase(client, "shim", wd)
        idle_before, idle_after, _ = run_phase(client, "idle", wd, took)
        kept = min(before, idle_after * before // max(idle_before, 1))
        check(after >= kept * 95 // 100,
              "the victim's file stays cached: %d MiB, as much as with no stream at all (%d MiB)"
              % (after // M, kept // M))
    done()


if __name__ == "__main__":
    main()
