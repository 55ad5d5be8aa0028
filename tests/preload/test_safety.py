#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The program sees exactly what it would without the shim: return values
and errno of every wrapped call (SAFETY), the stress run's data (STRESS),
and only the wrapped symbols are exported (EXPORTS).

usage: test_safety.py safety SAFETY | stress STRESS | exports | early EARLY"""

import os
import re
import subprocess
import sys

from msqtest import Workdir, check, done, library, plain_env, run, shim_env

WRAPPERS = {"mmap", "mmap64", "munmap", "mremap", "madvise", "posix_madvise", "_exit", "_Exit"}


def main():
    what = sys.argv[1]
    with Workdir("safety-" + what) as wd:
        if what == "safety":
            path = os.path.join(wd.path, "f")
            open(path, "wb").close()
            plain = run([sys.argv[2], path], plain_env()).stdout
            shim = run([sys.argv[2], path], shim_env(MADVSEQ_DEBUG=1)).stdout
            print(shim)
            check(plain and plain == shim, "identical results and errno with and without the shim")
        elif what == "stress":
            p = run([sys.argv[2], os.path.join(wd.path, "stress-file"), "6"],
                    shim_env(MADVSEQ_STATS=os.path.join(wd.path, "stats")), timeout=120)
            print(p.stdout.strip())
            check(p.returncode == 0, "threads, fork, vfork, posix_spawn: no wrong data, no failed call")
            st = dict(l.split("=") for l in open(os.path.join(wd.path, "stats")).read().split())
            check(int(st["bytes_dropped"]) > 0, "the engine worked during the stress run")
        elif what == "early":
            # A library whose constructor maps and advises runs before the
            # shim's constructor: the wrappers initialise themselves.
            p = run([sys.argv[2]], shim_env(MADVSEQ_DEBUG=1))
            print(p.stdout, p.stderr)
            check(p.returncode == 0 and "early: ok" in p.stdout, "mapping in a constructor works")
            check("tracking" in p.stderr, "the shim tracked the constructor's mapping")
        elif what == "exports":
            out = subprocess.run(["nm", "-D", "--defined-only", library()], stdout=subprocess.PIPE,
                                 text=True).stdout
            syms = set(re.findall(r"^\S+ [TWi] (\S+)$", out, re.M))
            extra = {s for s in syms if not re.match(
                r"^(mmap|mmap64|munmap|mremap|madvise|posix_madvise|_exit|_Exit|.*read.*|.*write.*|"
                r"posix_fadvise(64)?|fclose|close|close_range|dup[23]?|fcntl(64)?|sendfile(64)?|"
                r"copy_file_range|__.*_chk)$", s)}
            print("exported:", sorted(syms))
            check(WRAPPERS <= syms, "every mapping wrapper is exported")
            check(not extra, "nothing but libc wrappers is exported (extra: %s)" % sorted(extra))
            check(not any(s.startswith(("msq_", "urcu")) for s in syms), "no internal names leak")
    done()


if __name__ == "__main__":
    main()
