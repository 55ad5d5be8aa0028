#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Failures inside the shim (libfiu fault points) never change what the
program sees: same exit status, same data.  Each point must also show that
it fired, so a point that no longer exists fails the test.

usage: test_faults.py SEQCLIENT STRESS POINT"""

import os
import subprocess
import sys

from msqtest import M, Workdir, cached, check, done, evict, plain_env, run, shim_env, skip, values

SIZE = 128 * M
FIU_PRELOAD = "/usr/lib/fiu/fiu_run_preload.so"

# point: (how it is enabled, what shows it fired)
POINTS = {
    "madvseq/thread/create": ("enable", "no engine: the stream stays cached until munmap"),
    "madvseq/pagemap/open": ("enable", "no pagemap: nothing dropped while streaming"),
    "madvseq/pagemap/read": ("enable", "engine errors counted"),
    "madvseq/madvise": ("enable", "engine errors counted"),
    "madvseq/proc/maps": ("enable", "nothing tracked"),
    "madvseq/alloc": ("enable_random", "stress run stays correct"),
}


def fiu_env(point, how, **extra):
    env = shim_env(**extra)
    if not os.path.exists(FIU_PRELOAD):
        skip("fiu-utils is not installed (%s)" % FIU_PRELOAD)
    env["LD_PRELOAD"] = FIU_PRELOAD + ":" + env["LD_PRELOAD"]
    env["FIU_CTRL_FIFO"] = ""
    env["FIU_ENABLE"] = ("enable_random name=%s,probability=0.3" if how == "enable_random"
                         else "enable name=%s") % point
    return env


def main():
    client, stress, point = sys.argv[1], sys.argv[2], sys.argv[3]
    how, effect = POINTS[point]
    with Workdir("fault-" + point.replace("/", "-")) as wd:
        stats = os.path.join(wd.path, "stats")
        if point == "madvseq/alloc":
            # Random allocation failures anywhere in the shim, under the
            # stress program: every word read is checked.
            p = run([stress, os.path.join(wd.path, "stress-file"), "4"],
                    fiu_env(point, how, MADVSEQ_STATS=stats), timeout=120)
            print(p.stdout.strip())
            check(p.returncode == 0, "stress run: no wrong data, no failed call (%s)"
                  % p.stderr.strip()[-300:])
            done()
        path = wd.file("data", SIZE)
        ref = values(run([client, "--read", path], plain_env()).stdout)["checksum"]
        evict(path)
        p = run([client, "--hold-ms", "100", path], fiu_env(point, how, MADVSEQ_STATS=stats))
        v = values(p.stdout)
        check(p.returncode == 0, "client exits 0")
        check(v.get("checksum") == ref, "data read is intact")
        st = dict(l.split("=") for l in open(stats).read().split())
        end = int(v.get("end_cached", 0))
        print("fault %s: end of stream %d MiB cached; stats %s" % (point, end // M, st))
        if point in ("madvseq/thread/create", "madvseq/pagemap/open"):
            check(end >= SIZE * 9 // 10, effect)
        elif point == "madvseq/proc/maps":
            check(int(st["regions"]) == 0, effect)
        else:
            check(int(st["errors"]) > 0, effect)
    done()


if __name__ == "__main__":
    main()
