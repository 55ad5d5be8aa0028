#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A program that ends with _exit() ends at once under the shim (issue 9).

  test_exit.py combos EXITREPRO   a 32 MiB MAP_SHARED mapping advised
      MADV_SEQUENTIAL, touched, then _exit(0), in all 12 combinations of
      MADVSEQ_READ (advised/all/off) x MADVSEQ_STATS (set/unset) x
      MADVSEQ_DAEMON (0/1), with MADVSEQ_SOCKET naming a private path where
      no daemon listens; the DAEMON=1 cases once more with a real madvseqd
      on that socket (root, MADVSEQD set).  Each must exit 0 within 1 s of
      its _exit call (killed after 10 s); with STATS set the stats file
      names the pid.
  test_exit.py signal EXITREPRO   _exit(0) from a SIGALRM handler while the
      main thread maps and unmaps tracked regions in a loop.
  test_exit.py thread-signal EXITREPRO   _exit(0) from a SIGALRM handler
      in a thread that never called the shim, while the main thread reads
      a file with read() in a loop, opening and closing it (the stats
      writer at _exit then takes the read path's RCU lock from a thread
      that never registered with it).
  test_exit.py vfork EXITREPRO    a vfork child's _exit(0) leaves the
      parent's state alone and writes no stats file of its own."""

import os
import re
import subprocess
import sys
import time

from msqdaemon import Daemon, available
from msqtest import M, Workdir, check, done, shim_env, warm

LIMIT = 1.0    # seconds from the _exit call to the process's end
TIMEOUT = 10.0


def run(cmd, env):
    """(exit status or None if killed, seconds from _exit to reaped, total
    seconds, stdout, stderr)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return None, None, time.monotonic() - t0, out, err, p.pid
    end = time.monotonic()
    m = re.search(r"^exit_at (\d+)$", out, re.M)
    exit_s = end - int(m.group(1)) / 1e9 if m else None
    return p.returncode, exit_s, end - t0, out, err, p.pid


def verdict(what, r, stats=None, stats_required=True):
    rc, exit_s, total, out, err, pid = r
    text = None
    if stats and os.path.exists(stats):
        text = open(stats).read()
        os.unlink(stats)  # (the next run starts without one, even after this one hung)
    print("%-44s rc=%s exit=%s total=%.3fs" % (what, rc, "%.3fs" % exit_s if exit_s is not None
                                                 else "-", total), flush=True)
    if rc is None:
        check(False, "%s: ended (killed after %.0f s)" % (what, TIMEOUT))
        if err:
            print(err[-2000:])
        return
    check(rc == 0, "%s: exit status 0 (%s)" % (what, rc))
    check(exit_s is not None and exit_s < LIMIT,
          "%s: ended within %.1f s of _exit (%s)" % (what, LIMIT, exit_s))
    if rc != 0 and err:
        print(err[-2000:])
    if stats:
        if stats_required:
            check(text is not None and ("pid=%d\n" % pid) in text,
                  "%s: the stats file exists and names pid %d" % (what, pid))
        elif text is not None:
            check(("pid=%d\n" % pid) in text, "%s: the stats file names pid %d" % (what, pid))


def main():
    what, exe = sys.argv[1], sys.argv[2]
    with Workdir("exit-" + what) as wd:
        data = wd.file("data", 32 * M)
        warm(data)
        sock = os.path.join(wd.path, "madvseqd.sock")
        stats = os.path.join(wd.path, "stats")
        if what == "combos":
            def combos(daemon_label):
                for read in ("advised", "all", "off"):
                    for with_stats in (True, False):
                        for dmn in (("0", "1") if daemon_label == "no daemon" else ("1",)):
                            extra = {"MADVSEQ_READ": read, "MADVSEQ_DAEMON": dmn,
                                     "MADVSEQ_SOCKET": sock}
                            if with_stats:
                                extra["MADVSEQ_STATS"] = stats
                            label = "READ=%s STATS=%s DAEMON=%s (%s)" % (
                                read, "set" if with_stats else "unset", dmn, daemon_label)
                            verdict(label, run([exe, "map", data], shim_env(**extra)),
                                    stats if with_stats else None)
            combos("no daemon")
            if not available():
                print("no run with a real daemon (needs root and MADVSEQD)")
            else:
                with Daemon(wd.path, sock):
                    combos("madvseqd listening")
        elif what in ("signal", "thread-signal"):
            where = " in a thread of its own" if what == "thread-signal" else ""
            for i in range(5):
                verdict("_exit from a signal handler%s, run %d" % (where, i + 1),
                        run([exe, what, data],
                            shim_env(MADVSEQ_READ="all", MADVSEQ_STATS=stats, MADVSEQ_SOCKET=sock)),
                        # (The handler may have interrupted the one holding
                        # what the stats need: best effort there.)
                        stats, stats_required=False)
        elif what == "vfork":
            pattern = os.path.join(wd.path, "stats.%p")
            r = run([exe, "vfork", data],
                    shim_env(MADVSEQ_READ="all", MADVSEQ_STATS=pattern, MADVSEQ_SOCKET=sock))
            verdict("vfork child _exit, then the parent streams on", r,
                    os.path.join(wd.path, "stats.%d" % r[5]))
            others = sorted(f for f in os.listdir(wd.path) if f.startswith("stats."))
            check(not others, "the vfork child wrote no stats file of its own (%s)" % others)
        else:
            sys.exit("usage: test_exit.py combos|signal|thread-signal|vfork EXITREPRO")
    done()


if __name__ == "__main__":
    main()
