#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every wrapped function returns what it would without the shim: the same
value, errno, bytes and file positions, in its edge cases too (issue 9).

Runs each group of cases in EQUIV without the shim, then under it with
MADVSEQ_READ=advised, all and off, and all with MADVSEQ_DONTCACHE=1, each
in a fresh directory and process (a crash in one group hides no other),
and compares the outputs line by line: any difference fails and is
printed.

usage: test_equiv.py EQUIV"""

import os
import signal
import sys

from msqtest import Workdir, check, done, plain_env, run, shim_env

MODES = [
    ("READ=advised", {"MADVSEQ_READ": "advised"}),
    ("READ=all", {"MADVSEQ_READ": "all"}),
    ("READ=off", {"MADVSEQ_READ": "off"}),
    ("READ=all DONTCACHE=1", {"MADVSEQ_READ": "all", "MADVSEQ_DONTCACHE": "1"}),
]


def status(rc):
    if rc < 0:
        return "killed by %s" % signal.Signals(-rc).name
    return "status %d" % rc


def main():
    exe = sys.argv[1]
    with Workdir("equiv") as wd:
        # No daemon: the policy comes from the environment alone, and a
        # private socket path keeps a system daemon out of it.
        sock = os.path.join(wd.path, "no-daemon.sock")
        groups = run([exe, wd.path], plain_env()).stdout.split()
        n = 0
        src = None

        def run_in(name, group, env):
            nonlocal n, src
            n += 1
            d = os.path.join(wd.path, "%d-%s-%s" % (n, name, group))
            os.mkdir(d)
            if src:  # the 24 MiB the cases read, written once (never written to)
                os.link(src, os.path.join(d, "src"))
            else:
                src = os.path.join(d, "src")
            return run([exe, d, group], env, timeout=120, check_rc=False)

        total = {label: [0, 0] for label, _ in MODES}
        for group in groups:
            base = run_in("plain", group, plain_env())
            if base.returncode != 0 or "== done" not in base.stdout:
                print(base.stdout, base.stderr)
                check(False, "%s: the cases run without the shim (%s)" % (group, status(base.returncode)))
                continue
            want = base.stdout.splitlines()
            for label, extra in MODES:
                p = run_in("shim", group, shim_env(MADVSEQ_SOCKET=sock, **extra))
                got = p.stdout.splitlines()
                diffs = [(want[k] if k < len(want) else "<missing>", got[k] if k < len(got) else "<missing>")
                         for k in range(max(len(want), len(got)))
                         if (want[k] if k < len(want) else None) != (got[k] if k < len(got) else None)]
                total[label][0] += len(want)
                total[label][1] += len(diffs)
                missing = [a for a, b in diffs if b == "<missing>"]
                for a, b in diffs:
                    if b != "<missing>":
                        print("  %s, %s\n    without: %s\n    with:    %s" % (group, label, a, b))
                if missing:
                    print("  %s, %s: %d lines missing (the program ended early), from:\n    %s"
                          % (group, label, len(missing), "\n    ".join(missing)))
                if p.returncode != 0 or p.stderr.strip():
                    print("  %s, %s: %s, stderr:\n%s" % (group, label, status(p.returncode),
                                                         p.stderr[-2000:]))
                check(p.returncode == 0 and not diffs,
                      "%s, %s: every line as without the shim (%d of %d differ, %s)"
                      % (group, label, len(diffs), len(want), status(p.returncode)))
        for label, (lines, differ) in total.items():
            print("%s: %d of %d lines differ" % (label, differ, lines))
        check(len(groups) >= 10, "the table has its groups (%d)" % len(groups))
    done()


if __name__ == "__main__":
    main()
