#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""No write is lost when a private read-only mapping is made writable
behind its cursor (issue 9).

The streamer runs as an unprivileged user on a root-owned 0644 file: it
cannot write the file, so MADV_PAGEOUT would skip its pages and the shim
drops its private, read-only mapping with MADV_DONTNEED.  A second thread
mprotect()s pieces 16-64 MiB behind the cursor writable and writes markers
there; every marker must survive.  The window is narrow: a pass on code
that has the race does not always lose a write.

usage: test_mprace.py MPRACE"""

import os
import sys

from msqtest import M, Workdir, check, done, run, shim_env, skip, warm

SECONDS = 4


def main():
    exe = sys.argv[1]
    if os.geteuid() != 0:
        skip("needs root (a root-owned file read by another user)")
    with Workdir("mprace") as wd:
        os.chmod(wd.path, 0o755)
        data = wd.file("data", 256 * M)
        os.chown(data, 0, 0)
        os.chmod(data, 0o644)
        out = os.path.join(wd.path, "out")
        os.mkdir(out)
        os.chmod(out, 0o777)
        stats = os.path.join(out, "stats")
        warm(data)
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", exe, data, str(SECONDS)]
        p = run(cmd, shim_env(MADVSEQ_LAG="16M", MADVSEQ_INTERVAL="1ms", MADVSEQ_STATS=stats,
                              MADVSEQ_SOCKET=os.path.join(wd.path, "no-daemon.sock")),
                timeout=120, check_rc=False)
        print(p.stdout.strip())
        if p.stderr.strip():
            print(p.stderr.strip()[-2000:])
        if p.returncode == 2:
            sys.exit("FAIL: the streamer failed")
        st = dict(l.split("=", 1) for l in open(stats).read().split()) if os.path.exists(stats) else {}
        print("engine: bytes_dropped=%s cycles=%s errors=%s" % (st.get("bytes_dropped"), st.get("cycles"),
                                                                 st.get("errors")))
        fields = p.stdout.split()
        lost = int(fields[fields.index("lost") + 1]) if "lost" in fields else -1
        markers = int(fields[fields.index("markers") + 1]) if "markers" in fields else 0
        check(markers > 0, "markers were written behind the cursor (%d)" % markers)
        check(p.returncode == 0 and lost == 0, "no marker lost (%d of %d lost)" % (lost, markers))
    done()


if __name__ == "__main__":
    main()
