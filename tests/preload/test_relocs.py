#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""libmadvseq.so never enters its own wrappers: it has no dynamic relocation
(JUMP_SLOT, GLOB_DAT or any other) against a symbol it defines and exports,
and it exports nothing but the libc functions it wraps.

A call from inside the library to read(), write(), close() ... binds, through
such a relocation, to the library's own exported wrapper: the library's I/O
is then classified, tracked and sent to the daemon like the application's,
under locks the library already holds.

usage: test_relocs.py"""

import os
import re
import subprocess
import sys

from msqtest import check, done, library, skip

# Every function the shim wraps, from the one list the library's version
# script is generated from (mprotect and pkey_mprotect: so that a private
# mapping made writable is seen).  Nothing else may be exported.
WRAPPED_DEF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "preload",
                           "wrapped.def")


def wrapped():
    with open(WRAPPED_DEF) as f:
        return set(re.findall(r"^MSQ_(?:WRAP|ALIAS)\((\w+)", f.read(), re.M))


def tool(args):
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        skip("%s not installed (binutils)" % args[0])
    if p.returncode != 0:
        print(p.stderr)
        sys.exit("FAIL: %s exited %d" % (" ".join(args), p.returncode))
    return p.stdout


def dynsyms(lib):
    """Index -> (name, defined, bind, type) from the dynamic symbol table."""
    out = {}
    for line in tool(["readelf", "--dyn-syms", "--wide", lib]).splitlines():
        m = re.match(r"^\s*(\d+):\s+[0-9a-f]+\s+\d+\s+(\w+)\s+(\w+)\s+\w+\s+(\w+)\s*(\S*)", line)
        if m:
            idx, typ, bind, ndx, name = m.groups()
            out[int(idx)] = (name.split("@")[0], ndx != "UND", bind, typ)
    return out


def main():
    lib = library()
    syms = dynsyms(lib)
    exported = {n for n, defined, bind, _ in syms.values()
                if defined and bind in ("GLOBAL", "WEAK") and n}
    print("exported (%d): %s" % (len(exported), " ".join(sorted(exported))))

    # Relocations, with the symbol they name by its index in .dynsym (the
    # upper 32 bits of r_info): a name alone cannot tell the library's own
    # read from libc's read@GLIBC_2.2.5.
    own = {}
    for line in tool(["readelf", "-r", "--wide", lib]).splitlines():
        m = re.match(r"^\s*([0-9a-f]+)\s+([0-9a-f]+)\s+(R_\w+)", line)
        if not m:
            continue
        idx = int(m.group(2), 16) >> 32
        if not idx or idx not in syms:
            continue
        name, defined, bind, _ = syms[idx]
        if defined and name in exported:
            own.setdefault(name, set()).add(m.group(3))
    for name in sorted(own):
        print("relocation against own export: %-16s %s" % (name, " ".join(sorted(own[name]))))
    check(not own, "no dynamic relocation against a symbol the library exports (%d found: %s)"
          % (len(own), " ".join(sorted(own))))

    # Only wrapped libc functions: no msq_*, no urcu, no data objects.
    libc_path = next(l.split()[-1] for l in open("/proc/self/maps")
                     if re.search(r"/libc[.-][^/]*so", l))
    libc = set(re.findall(r"^\S+ [TWi] (\S+?)(?:@\S*)?$",
                          tool(["nm", "-D", "--defined-only", libc_path]), re.M))
    listed = wrapped()
    check(len(listed) > 40, "wrapped.def lists the wrapped functions (%d)" % len(listed))
    extra = sorted(exported - listed)
    missing = sorted(listed - exported)
    objects = sorted(n for n, defined, bind, typ in syms.values()
                     if defined and n in exported and typ not in ("FUNC", "IFUNC"))
    not_libc = sorted(n for n in exported if libc and n not in libc)
    check(not extra, "nothing but the wrapped libc functions is exported (extra: %s)" % extra)
    check(not missing, "every function wrapped.def lists is exported (missing: %s)" % missing)
    check(not objects, "no data object is exported (%s)" % objects)
    check(not not_libc, "every export is a libc function (not in libc: %s)" % not_libc)
    check(not any(n.startswith(("msq_", "urcu", "rcu_", "fiu")) for n in exported),
          "no internal name leaks")
    check({"read", "write", "mmap", "munmap", "madvise", "close", "_exit"} <= exported,
          "the core wrappers are exported")
    done()


if __name__ == "__main__":
    main()
