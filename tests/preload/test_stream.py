#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A C client streams a file through an MADV_SEQUENTIAL mapping under the
shim: the file's cached bytes stay within the lag behind each reader, the
data read is intact, and the stats file accounts for what was dropped.

usage: test_stream.py SEQCLIENT VARIANT"""

import os
import sys

from msqtest import (M, Workdir, cached, check, done, evict, need_test_hooks, plain_env, rate,
                     read_ahead_bytes, run, shim_env, values)

SIZE = 256 * M
LAG = 16 * M
SCHED_SLACK = 24 * M
RATE_MBPS = 200
SETTLE_MS = 5000

VARIANTS = {
    # name: (client args, extra env, readers)
    "shared": ([], {}, 1),
    "shared-write": (["--write"], {}, 1),
    "private": (["--private"], {}, 1),
    "posix-madvise": (["--advice", "posix"], {}, 1),
    "threads": (["--threads", "4"], {}, 4),
    "passes": (["--passes", "3"], {}, 1),
    "pagemap-read": ([], {"MADVSEQ_PAGEMAP_SCAN": "0"}, 1),
    "lag-4M": ([], {"MADVSEQ_LAG": "4M"}, 1),
    "cold": ([], {"MADVSEQ_MODE": "cold"}, 1),
    "off": ([], {"MADVSEQ_MODE": "off"}, 1),
    "no-shim": ([], None, 1),
}


def main():
    client, variant = sys.argv[1], sys.argv[2]
    args, extra, readers = VARIANTS[variant]
    if variant == "pagemap-read":
        need_test_hooks("MADVSEQ_PAGEMAP_SCAN")
    lag = 4 * M if variant == "lag-4M" else LAG
    with Workdir("stream-" + variant) as wd:
        path = wd.file("data", SIZE)
        if "--write" in args:  # the file changes: a fresh copy each run
            os.unlink(path)
            path = wd.file("data", SIZE)
        ref = values(run([client, "--read", path], plain_env()).stdout)["checksum"]
        evict(path)
        stats = os.path.join(wd.path, "stats")
        env = plain_env() if extra is None else shim_env(MADVSEQ_STATS=stats, **extra)
        # Paced like a disk, so that what the bounds below measure is the
        # engine, not how long a loaded machine left it without a CPU.
        cmd = [client, "--hold-ms", "200", "--rate", rate(RATE_MBPS)] + args
        if variant not in ("no-shim", "off", "cold", "shared-write"):
            # The end-of-stream bound: what stays once the engine has caught
            # up with the reader (its next cycles after the reader's last
            # page), within SETTLE_MS: on a loaded machine the engine may
            # get no CPU for longer than the hold.  A policy that keeps more
            # never gets there.
            cmd += ["--settle-ms", str(SETTLE_MS), "--below", str(readers * (lag + 4 * M))]
        p = run(cmd + [path], env)
        check(p.returncode == 0, "client exits 0")
        v = values(p.stdout)
        passes = int(args[args.index("--passes") + 1]) if "--passes" in args else 1
        ref = "%016x" % (int(ref, 16) * passes % (1 << 64))
        check(v.get("checksum") == ref, "data read through the mapping is intact")
        if "--write" in args:
            check(v.get("written") == "ok", "every page written through the mapping reached the file")
        if "end_cached" not in v:
            done()
        end, peak, after = int(v["end_cached"]), int(v["max_cached"]), cached(path)
        behind = int(v["max_behind"])
        ra = read_ahead_bytes(path)
        print("end of stream: %d MiB cached%s, peak %d MiB (%d MiB behind the first reader), "
              "after exit %d MiB (read-ahead %d KiB)"
              % (end // M, " %s ms after the hold" % v["settle_ms"] if "settle_ms" in v else "",
                 peak // M, behind // M, after // M, ra // 1024))
        if variant == "shared-write":
            # Dirty pages leave the cache only once written back, which the
            # engine starts behind the writer: more stays than for a reader,
            # far less than the file, and nothing is lost.
            check(peak <= SIZE // 2, "a writer through the mapping does not fill the cache")
            done()
        if variant in ("no-shim", "off"):
            # The kernel alone keeps it all: what the shim is for.
            check(end >= SIZE * 9 // 10, "without the shim the whole file stays cached")
            done()
        if variant == "cold":
            # MADV_COLD only deactivates: with no memory pressure pages stay,
            # but each was advised once.
            st = dict(l.split("=") for l in open(stats).read().split())
            check(int(st["bytes_dropped"]) >= SIZE - 2 * lag - 8 * M,
                  "cold mode advised what lay behind the reader")
            check(end >= SIZE * 9 // 10, "cold pages stay cached without memory pressure")
            done()
        check(end <= readers * (lag + 4 * M),
              "at the end of the stream at most lag + 4 MiB per reader stays cached")
        # While it streams, the engine thread competes for a CPU with the
        # reader (and, on a shared machine, with everything else): a late
        # cycle leaves what the reader read meanwhile.  Bounded, not exact.
        # A later pass meets the previous pass's tail, whose end still
        # counts as a cursor: up to one more lag is kept while they merge.
        stale = lag if variant == "passes" else 0
        # The slack is what the readers streamed while the engine was
        # late: SCHED_SLACK, or, where the machine kept it off a CPU
        # longer, what the paced readers read in its longest gap between
        # two rounds (the stats file's max_round_gap_us), plus a chunk
        # each.  Never more than half the file: a policy that drops
        # nothing keeps it all, and fails whatever the gap.
        st = dict(l.split("=") for l in open(stats).read().split())
        gap_s = int(st.get("max_round_gap_us", 0)) / 1e6
        per_reader = max(SCHED_SLACK, int(gap_s * float(rate(RATE_MBPS)) * M) + 2 * M)
        slack = min(readers * per_reader, SIZE // 2 - lag - stale)
        print("engine's longest gap between rounds %.0f ms: slack %d MiB" % (gap_s * 1000, slack // M))
        # (More readers than CPUs: the engine gets its turn less often.)
        check(behind <= lag + stale + slack,
              "while streaming, at most lag + %d MiB stays cached behind the first reader"
              % (slack // M))
        # Ahead of each cursor the kernel reads ahead (up to three windows
        # were seen for MADV_SEQUENTIAL faults).
        check(peak <= readers * (lag + stale + 3 * ra) + slack,
              "while streaming, at most lag + read-ahead per reader + %d MiB is cached"
              % (slack // M))
        # Pages read ahead past a reader's end but never mapped are not the
        # mapping's to drop: they stay until reclaim (one window per reader).
        check(after <= 4 * M + (readers - 1) * 2 * ra,
              "after munmap the readers' pages are gone too")
        check(int(st["bytes_dropped"]) >= SIZE - 4 * M,
              "stats file accounts for the bytes dropped (%s)" % st["bytes_dropped"])
        check(int(st["errors"]) == 0, "no engine errors")
    done()


if __name__ == "__main__":
    main()
