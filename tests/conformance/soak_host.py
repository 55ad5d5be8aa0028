# SPDX-License-Identifier: LGPL-2.1-or-later
"""A long-lived host program for soak.py, run under the shim.

    soak_host.py MODE FILE:SHA256 [FILE:SHA256...]

MODE threads: forever, two threads stream the files through mmap +
  MADV_SEQUENTIAL and through read() after POSIX_FADV_SEQUENTIAL, while an
  interval timer sends SIGALRM every 3 ms (reads are interrupted and
  retried), a forked child streams a file and leaves with os._exit or
  exit, and a child program is started with fork+exec and posix_spawn.
MODE exec: one round of the same streams in this process, then it execs
  itself (the pid stays: descriptors the shim leaks across exec add up).

Each round prints one line "round N ok" or "round N BAD what" (a wrong
checksum, a child that failed); soak.py counts them, samples the
process's descriptors and resident memory, and calls a round that does not
come a hang."""

import hashlib
import mmap
import os
import signal
import subprocess
import sys
import threading
import time

CHUNK = 1 << 20


def by_mmap(path):
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    m.madvise(mmap.MADV_SEQUENTIAL)
    h = hashlib.sha256()
    for off in range(0, len(m), CHUNK):
        h.update(m[off:off + CHUNK])
    m.close()
    return h.hexdigest()


def by_read(path):
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    h = hashlib.sha256()
    while True:
        b = os.read(fd, 128 << 10)  # (PEP 475: retried after SIGALRM)
        if not b:
            break
        h.update(b)
    os.close(fd)
    return h.hexdigest()


def in_child(path, want, how):
    """Streams path in a forked child; True if its checksum was right."""
    pid = os.fork()
    if pid == 0:
        ok = by_mmap(path) == want if how % 2 else by_read(path) == want
        if how % 3 == 0:
            sys.stdout.flush()
            os._exit(0 if ok else 3)
        sys.exit(0 if ok else 3)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    print("child %d hung: killed" % pid, flush=True)
    return False


CHILD = ("import hashlib,sys\nh=hashlib.sha256()\nf=open(sys.argv[1],'rb')\n"
         "for b in iter(lambda: f.read(1<<20), b''): h.update(b)\nprint(h.hexdigest())")


def exec_child(path, want, spawn):
    cmd = [sys.executable, "-c", CHILD, path]
    if spawn:
        r, w = os.pipe()
        pid = os.posix_spawn(cmd[0], cmd, dict(os.environ), file_actions=[
            (os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_CLOSE, r)])
        os.close(w)
        out = b""
        with os.fdopen(r, "rb") as f:
            out = f.read()
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0 and out.decode().strip() == want
    p = subprocess.run(cmd, stdout=subprocess.PIPE, timeout=120)
    return p.returncode == 0 and p.stdout.decode().strip() == want


def one_round(files, n, threaded):
    bad = []
    results = {}

    def stream(i, path, want):
        results[i] = (by_mmap(path) == want, by_read(path) == want)

    threads = []
    if threaded:
        for i, (path, want) in enumerate(files):
            t = threading.Thread(target=stream, args=(i, path, want))
            t.start()
            threads.append(t)
    else:
        for i, (path, want) in enumerate(files):
            stream(i, path, want)
    path, want = files[n % len(files)]
    if not in_child(path, want, n):
        bad.append("forked child")
    if not exec_child(path, want, n % 2):
        bad.append("exec'd child")
    for t in threads:
        t.join()
    for i, (m, r) in results.items():
        if not m:
            bad.append("mmap checksum of %s" % files[i][0])
        if not r:
            bad.append("read checksum of %s" % files[i][0])
    return bad


def main():
    mode = sys.argv[1]
    files = [tuple(a.rsplit(":", 1)) for a in sys.argv[2:] if not a.startswith("round=")]
    start = int(next((a[6:] for a in sys.argv if a.startswith("round=")), "0"))
    if mode == "threads":
        ticks = [0]
        signal.signal(signal.SIGALRM, lambda s, f: ticks.__setitem__(0, ticks[0] + 1))
        signal.setitimer(signal.ITIMER_REAL, 0.003, 0.003)
        n = start
        while True:
            bad = one_round(files, n, True)
            print("round %d %s" % (n, "BAD " + "; ".join(bad) if bad else "ok"), flush=True)
            n += 1
    else:
        bad = one_round(files, start, False)
        print("round %d %s" % (start, "BAD " + "; ".join(bad) if bad else "ok"), flush=True)
        args = [a for a in sys.argv if not a.startswith("round=")] + ["round=%d" % (start + 1)]
        os.execv(sys.executable, [sys.executable] + args)


if __name__ == "__main__":
    main()
