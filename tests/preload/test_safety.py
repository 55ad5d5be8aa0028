#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The program sees exactly what it would without the shim: return values
and errno of every wrapped call (SAFETY), the stress run's data (STRESS),
and only the wrapped symbols are exported (EXPORTS).

usage: test_safety.py safety SAFETY | stress STRESS | exports | early EARLY | wrapper"""

import os
import re
import subprocess
import sys

from msqtest import Workdir, check, done, library, plain_env, run, shim_env

WRAPPERS = {"mmap", "mmap64", "munmap", "mremap", "mprotect", "pkey_mprotect", "madvise", "posix_madvise",
            "_exit", "_Exit"}


def main():
    what = sys.argv[1]
    with Workdir("safety-" + what) as wd:
        if what == "safety":
            path = os.path.join(wd.path, "f")
            open(path, "wb").close()
            plain = run([sys.argv[2], path], plain_env()).stdout
            p = run([sys.argv[2], path], shim_env(MADVSEQ_DEBUG=1))
            shim = p.stdout
            print(shim)
            check(plain and plain == shim, "identical results and errno with and without the shim")
            # Calls the kernel refuses (an unaligned munmap) change nothing
            # tracked: every region stays on page bounds.
            bounds = [int(x, 16) for r in re.findall(r"region #\d+ 0x([0-9a-f]+)-0x([0-9a-f]+)", p.stderr)
                      for x in r]
            check(bounds and all(b % 4096 == 0 for b in bounds),
                  "tracked regions stay page-aligned (%d bounds seen)" % len(bounds))
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
        elif what == "wrapper":
            # madvseq run: prepends the library to LD_PRELOAD, never
            # overwrites it; options become MADVSEQ_* variables.
            wrapper, lib = os.environ["MADVSEQ_WRAPPER"], library()
            env = plain_env()
            env["LD_PRELOAD"] = "libc.so.6"
            env["MADVSEQ_LIBRARY"] = lib
            p = run(["sh", wrapper, "run", "--lag", "32M", "-m", "cold", "-d", "--",
                     "sh", "-c", 'echo "$LD_PRELOAD|$MADVSEQ_LAG|$MADVSEQ_MODE|$MADVSEQ_DEBUG"'], env)
            check(p.stdout.strip() == lib + ":libc.so.6|32M|cold|1",
                  "madvseq run prepends the library and sets the options (%r)" % p.stdout.strip())
            p = run(["sh", wrapper, "run", "--bogus", "--", "true"], env, check_rc=False)
            check(p.returncode == 2 and "unknown option" in p.stderr, "a bad option is a usage error")
            env["MADVSEQ_LIBRARY"] = os.path.join(wd.path, "missing.so")
            p = run(["sh", wrapper, "run", "--", "true"], env, check_rc=False)
            check(p.returncode == 1 and "not found" in p.stderr, "a missing library is said")
        elif what == "exports":
            out = subprocess.run(["nm", "-D", "--defined-only", library()], stdout=subprocess.PIPE,
                                 text=True).stdout
            syms = set(re.findall(r"^\S+ [TWi] (\S+)$", out, re.M))
            extra = {s for s in syms if not re.match(
                r"^(mmap|mmap64|munmap|mremap|mprotect|pkey_mprotect|madvise|posix_madvise|_exit|_Exit|.*read.*|.*write.*|"
                r"posix_fadvise(64)?|fclose|getdelim|getline|close|close_range|dup[23]?|fcntl(64)?|sendfile(64)?|"
                r"copy_file_range|__.*_chk)$", s)}
            print("exported:", sorted(syms))
            check(WRAPPERS <= syms, "every mapping wrapper is exported")
            check(not extra, "nothing but libc wrappers is exported (extra: %s)" % sorted(extra))
            check(not any(s.startswith(("msq_", "urcu")) for s in syms), "no internal names leak")
    done()


if __name__ == "__main__":
    main()
