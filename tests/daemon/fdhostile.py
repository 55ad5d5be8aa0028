#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Hostile watched processes for the fd-stream discovery (run as nobody):
fdhostile.py MODE SECONDS ARGS...

Each mode reads fast through a regular file (so that it is a candidate
whose descriptors get looked at) while doing what the daemon must survive.
Prints one line of what it did; exits 0."""

import os
import socket
import sys
import time

CHUNK = 1 << 20


def reader(path):
    fd = os.open(path, os.O_RDONLY)
    return fd


def step(fd, size):
    """1 MiB read on, wrapping at the end (a stream that never stops)."""
    if not os.read(fd, CHUNK):
        os.lseek(fd, 0, os.SEEK_SET)


def main():
    mode, secs = sys.argv[1], float(sys.argv[2])
    args = sys.argv[3:]
    end = time.time() + secs
    n = 0
    if mode == "dup2-swap":
        # fd 100 names the streamed file and, in turns, a precious one that
        # must stay cached: a borrow that acted on it would drop it.
        big, precious = args
        a, b = reader(big), reader(precious)
        os.dup2(a, 100)
        while time.time() < end:
            for _ in range(8):
                step(100, 0)
            os.dup2(b, 100)
            os.dup2(a, 100)
            n += 1
        print("dup2-swap: %d swaps" % n)
    elif mode == "many-fds":
        big, count = args[0], int(args[1])
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
        # Idle descriptors of the streamed file, and the stream on the
        # last one, which a scan in numbers' order reaches last.
        # It reads 100 MiB/s and drops what it read, so that its cgroup
        # takes pages in all along, as a stream from disk does.
        fds = [os.open(big, os.O_RDONLY) for _ in range(count)]
        fd = reader(big)
        t0 = time.time()
        while time.time() < end:
            at = os.lseek(fd, 0, os.SEEK_CUR)
            step(fd, 0)
            os.posix_fadvise(fd, at, CHUNK, os.POSIX_FADV_DONTNEED)
            n += 1
            d = t0 + n / 100.0 - time.time()
            if d > 0:
                time.sleep(d)
        print("many-fds: %d idle descriptors of one file, then a stream of %d MiB on fd %d"
              % (len(fds), n, fd))
    elif mode == "kinds":
        # A FIFO, a socket pair, /dev nodes and a tmpfs file, each read or
        # written, next to a regular stream.
        big, fifo, tmpf = args
        r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        w = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        s1, s2 = socket.socketpair()
        s1.setblocking(False)
        z = os.open("/dev/zero", os.O_RDONLY)
        nul = os.open("/dev/null", os.O_WRONLY)
        t = os.open(tmpf, os.O_RDONLY)
        fd = reader(big)
        buf = b"x" * 65536
        while time.time() < end:
            step(fd, 0)
            os.read(z, CHUNK)
            os.write(nul, buf)
            try:
                os.write(w, buf)
                os.read(r, 65536)
                s1.send(buf)
                s2.recv(65536)
            except BlockingIOError:
                pass
            if not os.read(t, CHUNK):
                os.lseek(t, 0, os.SEEK_SET)
            n += 1
        print("kinds: %d rounds over a FIFO, a socket pair, /dev/zero, /dev/null, tmpfs" % n)
    elif mode == "sparse":
        # Reads through holes of a file of terabytes, and seeks around it.
        path = args[0]
        fd = reader(path)
        size = os.fstat(fd).st_size
        pos = 0
        while time.time() < end:
            for _ in range(16):
                os.pread(fd, 1, 0)  # (keeps nothing: just not idle)
                os.read(fd, CHUNK)
            n += 1
            pos = (pos + (size // 7)) % size
            if n % 4 == 0:
                os.lseek(fd, pos & ~4095, os.SEEK_SET)
        print("sparse: %d rounds over a file of %d GiB" % (n, size >> 30))
    elif mode == "odirect":
        import mmap
        path = args[0]
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        m = mmap.mmap(-1, CHUNK)
        while time.time() < end:
            if os.readv(fd, [m]) <= 0:
                os.lseek(fd, 0, os.SEEK_SET)
            n += 1
        print("odirect: %d MiB read with O_DIRECT" % n)
    elif mode == "exit-exec":
        # Streams that end by exiting or exec'ing while the daemon may be
        # acting on them, one after the other.
        big = args[0]
        while time.time() < end:
            pid = os.fork()
            if pid == 0:
                fd = reader(big)
                for _ in range(40):
                    step(fd, 0)
                if n % 2:
                    os.execv("/bin/true", ["true"])
                os._exit(0)
            os.waitpid(pid, 0)
            n += 1
        print("exit-exec: %d short streams that exited or exec'd" % n)
    elif mode == "closes":
        # Files closed after writing, the daemon's to go through once
        # reported: a flood of new small ones, a FIFO, a sparse file of
        # terabytes with a few pages written, and a file of its own born
        # before it started, written a little and closed (cached before:
        # it must stay cached).  A descriptor open for writing all along
        # gets the filesystem marked.
        big, scratch, old = args
        fd = reader(big)
        keep = os.open(os.path.join(scratch, "held"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(keep, b"x" * 65536)
        fifo = os.path.join(scratch, "fifo")
        os.mkfifo(fifo, 0o600)
        fr = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        sparse = os.path.join(scratch, "sparse")
        files = 0
        while time.time() < end:
            for _ in range(4):
                step(fd, 0)
            for i in range(64):
                f = os.open(os.path.join(scratch, "f%d" % (i % 256)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.write(f, b"y" * 4096)
                os.close(f)
                files += 1
            fw = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fw, b"z")
            os.close(fw)
            os.read(fr, 16)
            s = os.open(sparse, os.O_WRONLY | os.O_CREAT, 0o600)
            os.ftruncate(s, 4 << 40)
            os.pwrite(s, b"s" * 4096, (n % 1024) << 30)
            os.close(s)
            o = os.open(old, os.O_WRONLY)
            os.pwrite(o, b"o", 0)
            os.close(o)
            n += 1
        print("closes: %d rounds, %d small files, a FIFO, a 4 TiB sparse file and an old file "
              "closed after writing" % (n, files))
    elif mode == "stream":
        big = args[0]
        fd = reader(big)
        while time.time() < end:
            step(fd, 0)
            n += 1
        print("stream: %d MiB" % n)
    else:
        print("unknown mode %s" % mode)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
