#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""preload/env.c is the only code of the library that reads the environment,
so secure execution (env.h) covers every read: no other object linked into
libmadvseq.so may refer to getenv, secure_getenv or environ.  Read from the
objects' symbol tables (nm), so a read added anywhere else fails here.

usage: test_env_reads.py LIBMADVSEQ_SO COMMON_ARCHIVE"""

import glob
import os
import subprocess
import sys

from msqtest import check, done, skip

READERS = {"getenv", "secure_getenv", "__libc_secure_getenv", "environ", "__environ",
           "_environ", "__libc_environ"}


def undefined(path):
    out = subprocess.run(["nm", "-A", "--undefined-only", path], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        # "OBJ: U sym", or "ARCHIVE:MEMBER: U sym"
        member = [p for p in parts[0].split(":") if p][-1]
        yield member, parts[-1].split("@")[0]


def main():
    lib, common = sys.argv[1], sys.argv[2]
    objs = sorted(glob.glob(lib + ".p/*.o"))
    if not objs:
        skip("no objects next to %s (not a meson build tree)" % lib)
    check(any(o.endswith("env.c.o") for o in objs), "env.c is one of the library's objects")
    readers = sorted(set(os.path.basename(o) for path in objs + [common]
                         for o, sym in undefined(path) if sym in READERS))
    print("objects that read the environment: " + (", ".join(readers) or "none"))
    check(readers == ["env.c.o"], "only env.c reads the environment")
    done()


if __name__ == "__main__":
    main()
