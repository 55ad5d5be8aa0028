#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""No circle of files: the calls between the objects of one program.

    test_layering.py NAME OBJDIR

OBJDIR holds the objects of one source directory as meson builds them
(FILE.c.o).  From `nm` of each, a global symbol defined in one file and
undefined in another is an edge from the user to the definer.  Any cycle
in that graph (two files that call each other, directly or around a
circle) fails the test, which then prints every edge of the graph and the
files of each circle.  Symbols defined outside OBJDIR (the engine's
library, libc) are not edges: the directory is judged on its own.
"""
import os
import subprocess
import sys

DEFINED = set('TDBRVWGSCi')  # code, data, bss, read-only, weak, common


def symbols(path):
    out = subprocess.run(['nm', '--defined-only', '-g', path], check=True,
                         capture_output=True, text=True).stdout
    defined = {l.split()[-1] for l in out.splitlines()
               if len(l.split()) >= 3 and l.split()[-2] in DEFINED}
    out = subprocess.run(['nm', '-u', path], check=True, capture_output=True, text=True).stdout
    undefined = {l.split()[-1] for l in out.splitlines() if l.strip()}
    return defined, undefined


def sccs(nodes, edges):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    name, objdir = sys.argv[1], sys.argv[2]
    objs = sorted(f for f in os.listdir(objdir) if f.endswith('.c.o'))
    if not objs:
        print(f'{name}: no objects in {objdir}', file=sys.stderr)
        return 1
    owner, uses = {}, {}
    for o in objs:
        src = o[:-2]  # FILE.c
        defined, undefined = symbols(os.path.join(objdir, o))
        for s in defined:
            owner.setdefault(s, src)
        uses[src] = undefined
    edges, why = {}, {}
    for src, undefined in uses.items():
        for s in sorted(undefined):
            to = owner.get(s)
            if to and to != src:
                edges.setdefault(src, set()).add(to)
                why.setdefault((src, to), []).append(s)
    cycles = [c for c in sccs(sorted(uses), edges) if len(c) > 1]
    if not cycles:
        print(f'{name}: {len(uses)} files, {sum(len(v) for v in edges.values())} edges, no cycle')
        return 0
    print(f'{name}: the calls between files form {len(cycles)} circle(s)')
    print('edges (caller -> callee: symbols):')
    for (a, b), syms in sorted(why.items()):
        mark = '  *' if any(a in c and b in c for c in cycles) else '   '
        print(f'{mark} {a} -> {b}: {", ".join(syms)}')
    for c in cycles:
        print('circle:', ', '.join(c))
    return 1


if __name__ == '__main__':
    sys.exit(main())
