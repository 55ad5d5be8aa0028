#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Programs that close every descriptor they did not open themselves (the
shim's included) see what they would see without the shim: the same
output, files and exit code, in every read mode (issue 9).

A closed internal descriptor's number is soon the program's own: the shim
must neither use it nor close it, and must write nothing to it.

usage: test_closefds.py"""

import hashlib
import os
import subprocess
import sys

from msqdaemon import Daemon, available
from msqtest import M, Workdir, check, done, plain_env, shim_env, warm

# Starts reading (the shim classifies the file, may connect to the
# daemon), closes every descriptor from 3 up, opens its output and puts
# it on every number up to 1023 (the shim's among them), reads on.
PY_READ = r"""
import hashlib, os, sys
first = os.open(sys.argv[1], os.O_RDONLY)   # (no file object: it would close its number later)
os.posix_fadvise(first, 0, 0, os.POSIX_FADV_SEQUENTIAL)
h = hashlib.sha256()
for _ in range(8):
    h.update(os.read(first, 1 << 20))
os.closerange(3, 1024)
o = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for n in range(o + 1, 1024):   # every number the shim held: now the output
    os.dup2(o, n)
f = open(sys.argv[1], "rb")
os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
f.seek(8 << 20)
while True:
    b = f.read(1 << 20)
    if not b:
        break
    h.update(b)
print(h.hexdigest(), f.tell())
f.close()
os.closerange(o + 1, 1024)
os.write(o, h.digest() * 1000)
os.close(o)
sys.exit(5)
"""

# Closes 0, 1 and 2 too: the program's own files get those numbers.
PY_CLOSE_ALL = r"""
import hashlib, os, sys
data, out = sys.argv[1], sys.argv[2]
os.closerange(0, 65536)
o = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)   # fd 0
i = os.open(data, os.O_RDONLY)                                    # fd 1
os.posix_fadvise(i, 0, 0, os.POSIX_FADV_SEQUENTIAL)
h = hashlib.sha256()
n = 0
while True:
    b = os.read(i, 1 << 20)
    if not b:
        break
    h.update(b)
    if n < (4 << 20):
        os.write(o, b)
    n += len(b)
os.close(i)
os.write(o, ("%s %d %d %d\n" % (h.hexdigest(), n, o, i)).encode())
os.close(o)
os._exit(3)
"""

# Streams half a mapping (the engine starts, opens what it needs), closes
# every descriptor from 3 up, puts its output on every number up to 1023,
# opens the file again, streams the rest.
PY_MMAP = r"""
import hashlib, mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
m.madvise(mmap.MADV_SEQUENTIAL)
h = hashlib.sha256()
half = len(m) // 2
for off in range(0, half, 1 << 20):
    h.update(m[off:off + (1 << 20)])
time.sleep(0.1)
os.closerange(3, 1024)
o = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for n in range(o + 1, 1024):   # every number the shim held: now the output
    os.dup2(o, n)
os.close(o + 1)
again = os.open(sys.argv[1], os.O_RDONLY)
for off in range(half, len(m), 1 << 20):
    h.update(m[off:off + (1 << 20)])
time.sleep(0.1)
h.update(os.pread(again, 4096, 0))
os.close(again)
os.closerange(o + 1, 1024)
os.write(o, h.hexdigest().encode())
os.close(o)
print(h.hexdigest())
m.close()  # (closes the number its own copy of fd had: free again by now)
"""


def main():
    with Workdir("closefds") as wd:
        data = wd.file("data", 32 * M)
        warm(data)
        out = os.path.join(wd.path, "out")
        py = sys.executable
        programs = [
            ("python closes 3..1023, reads", [py, "-c", PY_READ, data, out]),
            ("python closes 0..65535, reads and writes", [py, "-c", PY_CLOSE_ALL, data, out]),
            ("python closes 3..1023, maps", [py, "-c", PY_MMAP, data, out]),
            ("bash: stderr closed, cat", ["bash", "-c", 'exec 2>&-; cat "$0"', data]),
            ("bash: 0 and 2 closed, cat to a file",
             ["bash", "-c", 'exec 0<&- 2>&-; cat "$0" > "$1"; exit 7', data, out]),
            ("bash: 0, 1, 2 closed, dd",
             ["bash", "-c", 'exec 0<&- 1>&- 2>&-; dd if="$0" of="$1" bs=1M', data, out]),
        ]
        sock = os.path.join(wd.path, "no-daemon.sock")
        stats = os.path.join(wd.path, "stats")
        envs = [("without the shim", plain_env())] + [
            ("READ=%s" % m, shim_env(MADVSEQ_READ=m, MADVSEQ_SOCKET=sock, MADVSEQ_STATS=stats))
            for m in ("advised", "all", "off")]

        def one(cmd, env):
            if os.path.exists(out):
                os.unlink(out)
            try:
                p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=60)
            except subprocess.TimeoutExpired:
                return ("hung (killed after 60 s)", "", "", b"")
            o = hashlib.sha256(open(out, "rb").read()).hexdigest()[:16] if os.path.exists(out) else "-"
            return (p.returncode, hashlib.sha256(p.stdout).hexdigest()[:16], o, p.stderr)

        # With a daemon listening when one can run here: the shim then
        # holds a connection the program closes.
        daemon = Daemon(wd.path, sock) if available() else None
        print("madvseqd listening: %s" % ("yes" if daemon else "no (needs root and MADVSEQD)"))
        for name, cmd in programs:
            want = None
            for label, env in envs:
                rc, so, fo, err = one(cmd, env)
                print("%-44s %-16s rc=%s stdout=%s out=%s" % (name, label, rc, so, fo))
                if want is None:
                    want = (rc, so, fo)
                    continue
                same = (rc, so, fo) == want
                if not same and err:
                    print(err.decode(errors="replace")[-1500:])
                check(same, "%s, %s: same exit code, output and file as without the shim" % (name, label))
        if daemon:
            check(daemon.stop() == 0, "the daemon ends cleanly")
    done()


if __name__ == "__main__":
    main()
