#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Mappings read with no advice, in read mode "all" (madvseq run's): a
program that maps many table files and reads each front to back (a LevelDB
scan, cache_ext's GET-SCAN) has its own pages dropped behind it, while
every mapping stays mapped; what was cached before stays; a program that
reads a mapping at random keeps what it read; MADV_RANDOM and the library's
own default read mode leave such mappings alone.  The bytes read are the
same with and without the library.

usage: test_mapped_reads.py CASE   (scan, scan-daemon, random, madv-random, advised)"""

import os
import subprocess
import sys
import tempfile

import msqdaemon
from msqtest import M, Workdir, cached, check, done, evict, plain_env, shim_env, skip, warm

TABLES = 48               # "table files" of TABLE bytes each
TABLE = 2 * M + 100 * 1024
BIG = 96 * M              # and one large file, read through as well
LAG = 16 * M

# The client: maps every file named (read-only, no advice) and keeps them
# all mapped, reads each as the case says, prints its checksum and "ready",
# then waits for a line on stdin before it unmaps and exits.  "random":
# reads pages of each file at random (a fixed seed), skipping its first
# 4 MiB, and every page at most once.
CLIENT = r"""
import hashlib, mmap, os, random, sys, time
how, files = sys.argv[1], sys.argv[2:]
h = hashlib.sha256()
maps = []
rnd = random.Random(26)
for f in files:
    fd = os.open(f, os.O_RDONLY)
    m = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    os.close(fd)
    maps.append(m)
    if how == "madv-random":
        m.madvise(mmap.MADV_RANDOM)
    if how == "random":
        pages = list(range(1024, len(m) // 4096))
        rnd.shuffle(pages)
        for p in pages[:len(pages) // 2]:
            h.update(m[p * 4096:p * 4096 + 64])
    else:
        for o in range(0, len(m), 1 << 16):
            h.update(m[o:o + (1 << 16)])
    time.sleep(0.002)   # a table at a time, as a scan reads them
time.sleep(0.3)         # the engine's next looks find nothing new
print(h.hexdigest())
print("ready", flush=True)
sys.stdin.readline()
"""


def run_client(how, files, env):
    """(checksum, bytes of files cached while all are mapped, after exit)."""
    p = subprocess.Popen([sys.executable, "-c", CLIENT, how] + files, env=env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    digest = p.stdout.readline().strip()
    ready = p.stdout.readline().strip()
    while_mapped = sum(cached(f) for f in files)
    p.stdin.write("\n")
    p.stdin.close()
    rc = p.wait(timeout=120)
    check(rc == 0 and ready == "ready", "%s client exits 0 (%d)" % (how, rc))
    return digest, while_mapped, sum(cached(f) for f in files)


def main():
    case = sys.argv[1]
    if os.geteuid() != 0:
        skip("needs root: cachestat of the test's files, and MADV_PAGEOUT's right to them")
    with Workdir("mapped-" + case) as wd:
        tables = [wd.file("t%03d.ldb" % i, TABLE) for i in range(TABLES)]
        big = wd.file("big", BIG)
        hot = wd.file("hot.ldb", TABLE)       # cached before the client starts
        files = tables + [big, hot]
        total = sum(os.path.getsize(f) for f in files)
        how = "random" if case == "random" else "madv-random" if case == "madv-random" else "scan"

        for f in files:
            evict(f)
        ref, plain_mapped, _ = run_client(how, files, plain_env())
        print("without the library: %d MiB of %d MiB cached while mapped"
              % (plain_mapped // M, total // M))
        for f in files:
            evict(f)
        warm(hot)
        hot_before = cached(hot)
        env = shim_env(MADVSEQ_READ="advised" if case == "advised" else "all")
        daemon = None
        if case == "scan-daemon":
            daemon = msqdaemon.serving(wd.path, env)
        try:
            digest, mapped, after = run_client(how, files, env)
        finally:
            if daemon:
                check(daemon.stop() == 0, "the daemon exits 0")
        print("with the library: %d MiB cached while mapped, %d MiB after exit"
              % (mapped // M, after // M))
        check(digest == ref, "the bytes read are the same with and without the library")
        check(cached(hot) >= hot_before - 64 * 1024,
              "the file cached before stays cached (%d of %d KiB)"
              % (cached(hot) // 1024, hot_before // 1024))
        if case in ("scan", "scan-daemon"):
            check(plain_mapped >= total * 9 // 10,
                  "without the library the scan leaves its files cached (%d MiB)"
                  % (plain_mapped // M))
            # One lag behind the large file's reader, plus the tables the
            # last looks had not yet found read through, plus the hot file.
            bound = LAG + 8 * TABLE + TABLE
            check(mapped <= bound, "while mapped, at most %d MiB cached (%d MiB)"
                  % (bound // M, mapped // M))
            check(after <= TABLE + 8 * M, "after exit, at most %d MiB cached (%d MiB)"
                  % ((TABLE + 8 * M) // M, after // M))
        else:
            # Nothing read front to back: every page read stays cached
            # (less the first chunk's few pages a fault maps around).
            check(mapped >= plain_mapped - 2 * M and after >= plain_mapped - 2 * M,
                  "what the program read stays cached: %d MiB while mapped, %d MiB after "
                  "exit, %d MiB without the library"
                  % (mapped // M, after // M, plain_mapped // M))
    done()


if __name__ == "__main__":
    main()
