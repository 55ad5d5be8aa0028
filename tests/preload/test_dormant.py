#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Installed for every program, the library must cost a process that does
nothing it manages next to nothing: no thread, no socket, no file opened
under /proc or /sys, until a mapping or a descriptor is advised.  strace
shows what a few ordinary programs do with the library preloaded (into the
traced program only) and without: the library may add none of those.  A
program that does stream is traced too, so that the test sees the library
wake up when it has work.

usage: test_dormant.py SEQCLIENT"""

import os
import re
import shutil
import subprocess
import sys

from msqtest import M, Workdir, check, done, library, skip

CALLS = "openat,open,socket,connect,clone,clone3"
SANITIZED = "asan" in os.environ.get("MADVSEQ_PRELOAD", "")


def trace(cmd, wd, name, preload=True):
    """strace of cmd with the library preloaded, or (preload=False) without
    it: with only what the build preloads before it (the sanitizer
    runtimes, which read /proc and start a thread of their own)."""
    out = os.path.join(wd.path, name + ".strace")
    libs = (os.environ.get("MADVSEQ_PRELOAD") or library()).split(":")
    if not preload:
        libs = [l for l in libs if "libmadvseq" not in os.path.basename(l)]
    # (LeakSanitizer cannot run under ptrace.)
    env = ["-E", "ASAN_OPTIONS=detect_leaks=0"] if any("asan" in l for l in libs) else []
    if libs:
        env += ["-E", "LD_PRELOAD=" + ":".join(libs)]
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=" + CALLS, "-o", out] + env + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       errors="replace", timeout=120)
    if p.returncode != 0:
        print(p.stderr)
    lines = open(out).read().splitlines()
    opened = [m.group(1) for m in (re.search(r'open(?:at)?\(.*?"([^"]+)"', l) for l in lines) if m]
    # Calls without pids, fds and addresses, to compare two runs.
    calls = lambda pat: sorted(re.sub(r"^\d+ +|0x[0-9a-f]+|= \d+", "", l) for l in lines
                               if re.search(pat, l))
    return dict(rc=p.returncode, proc=sorted(f for f in opened if f.startswith(("/proc", "/sys"))),
                sockets=calls(r"\b(socket|connect)\("), threads=calls(r"\bclone3?\("))


def added(with_lib, without, key):
    rest = list(without[key])
    out = []
    for x in with_lib[key]:
        if x in rest:
            rest.remove(x)
        else:
            out.append(x)
    return out


def main():
    client = sys.argv[1]
    if not shutil.which("strace"):
        skip("strace is missing")
    with Workdir("dormant") as wd:
        small = wd.file("small", 1 * M)
        for name, cmd in (("true", ["/bin/true"]), ("ls", ["ls", "-l", wd.path]),
                          ("head", ["head", "-c", "4096", small]),
                          ("python", [sys.executable, "-c", "open(%r, 'rb').read()" % small])):
            t, ref = trace(cmd, wd, name), trace(cmd, wd, name + "-plain", preload=False)
            check(t["rc"] == 0 and ref["rc"] == 0, "%s runs under strace, with and without the "
                  "library" % name)
            for key, what in (("proc", "nothing more opened under /proc or /sys"),
                              ("sockets", "no socket more"), ("threads", "no thread more")):
                extra = added(t, ref, key)
                if SANITIZED and key == "proc":
                    # AddressSanitizer reads the maps when an instrumented
                    # library is loaded; the plain build checks those too.
                    extra = [f for f in extra if f != "/proc/self/maps"]
                check(not extra, "%s: %s: %s" % (name, what, " ".join(extra) or "none"))
        # The control: a program that streams through MADV_SEQUENTIAL wakes
        # the library, which then reads /proc/self/pagemap from its thread.
        t = trace([client, wd.file("data", 32 * M)], wd, "stream")
        ref = trace([client, wd.file("data", 32 * M)], wd, "stream-plain", preload=False)
        check(t["rc"] == 0 and added(t, ref, "threads") and
              any("pagemap" in f for f in added(t, ref, "proc")),
              "a streaming program wakes it: a thread and /proc/self/pagemap (%s)"
              % " ".join(t["proc"]))
    done()


if __name__ == "__main__":
    main()
