#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Strong references survive a stream through the shim: a range another
process maps, and a range that was cached before the stream began.  As
root, through a shared mapping (the shim unmaps its own pages and uses
fadvise) and a private one (MADV_PAGEOUT).  Then as an unprivileged user
who may not write the file (no snapshot of what was cached before).

usage: test_strong_refs.py SEQCLIENT root|root-private|unprivileged"""

import os
import subprocess
import sys
import time

from msqtest import (M, Workdir, cached, cached_map, check, done, evict, plain_env, run, shim_env, skip,
                     values)

SIZE = 256 * M
LAG = 16 * M
HELD = (64 * M, 32 * M)      # mapped and touched by another process
WARM = (160 * M, 32 * M)     # cached before the stream starts

HOLDER = r"""
import mmap, sys
off, length = int(sys.argv[2]), int(sys.argv[3])
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    s = 0
    for o in range(off, off + length, 4096):
        s += m[o]
    print("ready", flush=True)
    sys.stdin.read(1)
"""


def main():
    client, who = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        skip("measuring another user's cache and switching users need root")
    with Workdir("refs-" + who) as wd:
        os.chmod(wd.path, 0o755)
        path = wd.file("data", SIZE)
        os.chmod(path, 0o644)
        ref = values(run([client, "--read", path], plain_env()).stdout)["checksum"]
        evict(path)
        with open(path, "rb") as f:
            f.seek(WARM[0])
            f.read(WARM[1])
        warm_before = cached(path, *WARM)
        # (the kernel may leave a piece uncached: what counts is that what
        # was cached stays)
        check(warm_before >= WARM[1] - 2 * M, "warm range cached before the stream")
        # (reading it also read ahead past its end: that is cached before too)
        before = cached(path)
        stats = os.path.join(wd.path, "stats")
        cmd = [client, "--pause", "--hold-ms", "100"] + (["--private"] if who == "root-private"
                                                          else []) + [path]
        if who == "unprivileged":
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
        env = shim_env(MADVSEQ_STATS=stats, MADVSEQ_DEBUG=1)
        streamer = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        check(streamer.stdout.readline().strip() == "advised", "streamer advised its mapping")
        # The other process maps its range only now: not "cached before",
        # a strong reference the engine must find by itself.
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, path, str(HELD[0]), str(HELD[1])],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=plain_env())
        check(holder.stdout.readline().strip() == "ready", "holder maps its range")
        out, err = streamer.communicate("x", timeout=120)
        p = subprocess.CompletedProcess(cmd, streamer.returncode, out, err)
        check(p.returncode == 0, "streamer exits 0")
        check(values(p.stdout).get("checksum") == ref, "data read through the mapping is intact")
        how = "pageout" if who == "root-private" else "unmap+fadvise"
        check("(%s)" % how in p.stderr, "the shim drops by %s" % how)
        held, warm, total = cached(path, *HELD), cached(path, *WARM), cached(path)
        print("after the stream: held range %d MiB, warm range %d MiB, file %d MiB (cached MiB: %s)"
              % (held // M, warm // M, total // M, cached_map(path)))
        check(held == HELD[1], "pages another process maps stay cached")
        if who != "unprivileged":
            check(warm >= warm_before, "pages cached before the stream stay cached")
            check(total <= HELD[1] + before + 4 * M, "everything else the stream read is gone")
            st = dict(l.split("=") for l in open(stats).read().split())
            check(int(st["bytes_kept"]) >= HELD[1] // 2,
                  "stats count the pages kept as strongly referenced (%s)" % st["bytes_kept"])
        else:
            # A user who may not write the file cannot learn what was cached
            # before (mincore and cachestat answer for writable files only):
            # the shim drops what it read, as documented.
            check(total <= HELD[1] + before + 4 * M, "the rest of what the stream read is gone")
        holder.stdin.write("x")
        holder.stdin.close()
        holder.wait(timeout=30)
    done()


if __name__ == "__main__":
    main()
