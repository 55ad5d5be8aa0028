#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes libmadvseq.so's version script from wrapped.def: the wrapped libc
functions are exported, nothing else.

usage: gen_map.py wrapped.def OUTPUT"""

import re
import sys

ENTRY = re.compile(r"^MSQ_(?:WRAP|ALIAS)\((\w+)", re.M)


def names(path):
    with open(path) as f:
        return ENTRY.findall(f.read())


def main():
    src, out = sys.argv[1], sys.argv[2]
    syms = names(src)
    if not syms or len(set(syms)) != len(syms):
        sys.exit("gen_map.py: %s: no entries, or one listed twice" % src)
    with open(out, "w") as f:
        f.write("/* Generated from wrapped.def by gen_map.py: only the wrapped libc\n"
                " * functions are exported. */\n{\n  global:\n")
        for s in syms:
            f.write("    %s;\n" % s)
        f.write("  local:\n    *;\n};\n")


if __name__ == "__main__":
    main()
