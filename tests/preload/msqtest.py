# SPDX-License-Identifier: LGPL-2.1-or-later
"""Helpers for libmadvseq's preload tests: files on a real disk, page-cache
measurement with cachestat(2), the shim's environment, memory cgroups.

A test exits 0 (pass), 1 (fail) or 77 (skip, with the reason printed)."""

import ctypes
import errno
import mmap
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

M = 1 << 20
TMPFS_MAGIC = 0x01021994

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
MADV_POPULATE_READ = 22  # (Linux 5.14; not in Python 3.11's mmap module)


class _CsRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("nr_cache", "nr_dirty", "nr_writeback", "nr_evicted", "nr_recently_evicted")]


# Under emulation (tests/guest boots kernels under qemu's TCG) every
# instruction runs 10-30 times slower while a paced streamer keeps the wall
# clock's pace: it would move many times further per engine or daemon
# cycle than on a real machine, and the bounds on what is cached while
# streaming would measure the emulator.  MADVSEQ_TEST_SLOWDOWN=N (the guest
# harness sets it) divides the streamers' rates by N instead, so those
# bounds keep their meaning.
SLOWDOWN = max(1.0, float(os.environ.get("MADVSEQ_TEST_SLOWDOWN") or 1))

# A test stopped at its timeout (meson sends SIGTERM) unwinds as one that
# failed: its work directory (the attacks' sparse files of terabytes), its
# cgroups and its daemons are cleaned up, not left in the build tree.
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def rate(mib_per_s):
    """A streamer's rate argument (MiB/s), divided by MADVSEQ_TEST_SLOWDOWN."""
    return str(max(1, round(mib_per_s / SLOWDOWN)))


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


class damon_pageout_paused:
    """A context in which the host's DAMON pageout schemes are stopped (as
    the benchmarks' --pause-damon does): such a scheme pages out whatever
    it saw idle for a while, in every cgroup, a warm victim's tail included,
    and a residency bound of 1% would then measure it, not the code under
    test.  The kdamonds start again, with their configuration, on exit."""

    ROOT = "/sys/kernel/mm/damon/admin/kdamonds"

    def __enter__(self):
        import glob
        self.stopped = []
        for k in sorted(glob.glob(os.path.join(self.ROOT, "[0-9]*"))):
            try:
                if open(os.path.join(k, "state")).read().strip() != "on" or not any(
                        open(a).read().strip() == "pageout"
                        for a in glob.glob(os.path.join(k, "contexts", "*", "schemes", "*", "action"))):
                    continue
                with open(os.path.join(k, "state"), "w") as f:
                    f.write("off")
                self.stopped.append(k)
            except OSError:
                continue
        if self.stopped:
            print("DAMON pageout paused for the case: " + ", ".join(self.stopped))
        return self

    def __exit__(self, *exc):
        for k in self.stopped:
            try:
                with open(os.path.join(k, "state"), "w") as f:
                    f.write("on")
            except OSError as e:
                print("cannot start %s again: %s (write 'on' to its state file)" % (k, e))
        return False


def need_test_hooks(names):
    """Skips unless the library reads the tests' hook variables (a build
    configured with -Dtest_hooks=true; installed libraries never do)."""
    if os.environ.get("MADVSEQ_TEST_HOOKS") != "1":
        skip("the library was built without test hooks (-Dtest_hooks=true): it ignores " + names)


failures = []


def check(cond, what):
    """Records a failed assertion; the test goes on so one run shows all."""
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def done():
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    sys.exit(0)


def cached(path, off=0, length=0):
    """Bytes of path's [off, off+length) in the page cache (length 0: to EOF)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        r, cs = _CsRange(off, length), _Cs()
        if _libc.syscall(451, fd, ctypes.byref(r), ctypes.byref(cs), 0) < 0:
            e = ctypes.get_errno()
            if e == errno.ENOSYS and os.geteuid() == 0:
                return _cached_mincore(fd, off, length)
            skip("cachestat(2) unavailable: %s (Linux 6.5+; root or a writable file)"
                 % os.strerror(e))
        return cs.nr_cache * 4096
    finally:
        os.close(fd)


def _cached_mincore(fd, off, length):
    """cached() before Linux 6.5 (no cachestat): mincore(2) over a mapping
    of the range, which faults nothing in.  Root only: for others, mincore
    reports every page of a file they may not write as resident."""
    pg = 4096
    size = os.fstat(fd).st_size
    end = size if not length else min(size, off + length)
    start = off // pg * pg
    if end <= start:
        return 0
    n = (end - start + pg - 1) // pg
    addr = _libc.mmap(None, n * pg, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    try:
        vec = (ctypes.c_ubyte * n)()
        if _libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(n * pg), vec) < 0:
            raise OSError(ctypes.get_errno(), "mincore")
        return sum(v & 1 for v in vec) * pg
    finally:
        _libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(n * pg))


def marked_in_use(path, off=0, length=0):
    """Bytes of path's cached pages in [off, off+length) that the kernel marks
    in use (active or referenced, in /proc/kpageflags): those the daemon keeps
    as strong references.  Root only.  The pages are looked at through a
    mapping advised MADV_RANDOM, whose faults read nothing ahead and mark
    nothing accessed; pages not cached are not touched."""
    pg, kpf_referenced, kpf_active = 4096, 1 << 2, 1 << 6
    length = length or os.path.getsize(path) - off
    fd = os.open(path, os.O_RDONLY)
    addr = _libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, off)
    os.close(fd)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap " + path)
    marked = 0
    try:
        n = (length + pg - 1) // pg
        vec = (ctypes.c_ubyte * n)()
        _libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(length), mmap.MADV_RANDOM)
        if _libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(length), vec) < 0:
            raise OSError(ctypes.get_errno(), "mincore")
        with open("/proc/self/pagemap", "rb") as pm, open("/proc/kpageflags", "rb") as kf:
            for i in range(n):
                a = addr + i * pg
                # Map the cached page, to learn its frame.
                if not vec[i] or _libc.madvise(ctypes.c_void_p(a), ctypes.c_size_t(pg),
                                               MADV_POPULATE_READ) < 0:
                    continue
                pm.seek(a // pg * 8)
                entry = int.from_bytes(pm.read(8), "little")
                pfn = entry & ((1 << 55) - 1)
                if not entry >> 63:
                    continue  # (reclaimed since)
                if not pfn:
                    skip("page frame numbers are hidden (needs CAP_SYS_ADMIN)")
                kf.seek(pfn * 8)
                if int.from_bytes(kf.read(8), "little") & (kpf_referenced | kpf_active):
                    marked += pg
    finally:
        _libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(length))
    return marked


def cached_map(path, unit=M):
    """Which unit-sized pieces of path are (partly) cached: '0-16,64-96' MiB."""
    size, out, start = os.path.getsize(path), [], None
    for off in range(0, size + unit, unit):
        c = off < size and cached(path, off, unit) > 0
        if c and start is None:
            start = off
        if not c and start is not None:
            out.append("%d-%d" % (start // unit, off // unit))
            start = None
    return ",".join(out) or "none"


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if cached(path) > 2 * M:
        skip("cannot evict %s from the page cache" % path)


def warm(path):
    with open(path, "rb") as f:
        while f.read(4 * M):
            pass


def make_file(path, size):
    """Deterministic, incompressible-looking content; reused if present."""
    if os.path.exists(path) and os.path.getsize(path) == size:
        return path
    block = bytearray(os.urandom(M))
    with open(path + ".tmp", "wb") as f:
        for i in range(size // M):
            block[0:8] = i.to_bytes(8, "little")
            f.write(block)
    os.rename(path + ".tmp", path)
    return path


class Workdir:
    """A directory on a disk filesystem (page-cache effects need one)."""

    def __init__(self, name):
        base = os.environ.get("MADVSEQ_TEST_DIR") or os.environ.get("MESON_BUILD_ROOT") or os.getcwd()
        st = os.statvfs(base)
        if _fs_type(base) == TMPFS_MAGIC:
            skip("%s is tmpfs; set MADVSEQ_TEST_DIR to a disk filesystem" % base)
        self.path = tempfile.mkdtemp(prefix="msq-%s-" % name, dir=base)
        need = 2 * 1024 * M
        if st.f_bavail * st.f_frsize < need:
            skip("less than 2 GiB free under %s" % base)

    def file(self, name, size):
        return make_file(os.path.join(self.path, name), size)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        if os.environ.get("MADVSEQ_TEST_KEEP"):  # (logs to read after a failure)
            print("kept %s (MADVSEQ_TEST_KEEP)" % self.path)
        else:
            shutil.rmtree(self.path, ignore_errors=True)


class _Statfs(ctypes.Structure):
    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_long * 15)]


def _fs_type(path):
    st = _Statfs()
    if _libc.statfs(path.encode(), ctypes.byref(st)) < 0:
        return 0
    return st.f_type


def library():
    lib = os.environ.get("MADVSEQ_LIB")
    if not lib or not os.path.exists(lib):
        skip("MADVSEQ_LIB does not name the built libmadvseq.so")
    return lib


def shim_env(**extra):
    """Environment that preloads the shim (MADVSEQ_PRELOAD overrides, e.g.
    with the sanitizer runtimes first)."""
    env = dict(os.environ)
    env["LD_PRELOAD"] = os.environ.get("MADVSEQ_PRELOAD") or library()
    if "libasan" in env["LD_PRELOAD"]:
        # Programs nobody here wrote (Python, fio, fiu's preload) leak at
        # exit by design: leak checking is for the project's own programs.
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0:abort_on_error=1"
        # GCC 12's ASan allocator is not fork-safe in threaded programs.
        env["STRESS_CHILD_EXIT_ONLY"] = "1"
    for k, v in extra.items():
        env[k] = str(v)
    return env


def plain_env():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return env


def run(cmd, env, timeout=300, check_rc=True):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    if check_rc and p.returncode != 0:
        print("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p


def values(out):
    """'key value' lines of a client's output, as a dict."""
    return dict(re.findall(r"^(\w+) (\S+)$", out, re.M))


def read_ahead_bytes(path):
    """The device's read-ahead window: pages ahead of a cursor count too."""
    st = os.stat(path)
    d = "/sys/dev/block/%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    for p in (d + "/queue/read_ahead_kb", d + "/../queue/read_ahead_kb"):
        try:
            return int(open(p).read()) * 1024
        except OSError:
            pass
    return 128 * 1024


class Monitor(threading.Thread):
    """Samples a file's cached bytes every 2 ms until stopped.  Where the
    cached pieces were at the peak (peak_map, cached_map's form) and when
    (peak_at, seconds after the start) explain a peak that is too high."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.max, self.samples, self._halt = path, 0, 0, threading.Event()
        self.peak_map, self.peak_at, self._t0 = "none", 0.0, time.time()
        cached(path)  # skip early if cachestat is missing
        self.start()

    def run(self):
        mapped = 0
        while not self._halt.is_set():
            now = cached(self.path)
            self.max = max(self.max, now)
            if now >= mapped + M:  # (a map costs a cachestat per MiB)
                mapped = now
                self.peak_map, self.peak_at = cached_map(self.path), time.time() - self._t0
            self.samples += 1
            time.sleep(0.002)

    def stop(self):
        self._halt.set()
        self.join()
        return self.max


# --- memory cgroups (v2 where its memory controller is on, else v1) ---

class Cgroup:
    def __init__(self, name, limit):
        self.path, self.v2 = None, False
        v2root = "/sys/fs/cgroup"
        own = _own_cgroup()
        if os.path.exists(v2root + "/cgroup.controllers") and \
                "memory" in open(v2root + "/cgroup.controllers").read().split():
            parent = v2root + own.get("", "/")
            self.v2 = True
        elif "memory" in own and os.path.isdir("/sys/fs/cgroup/memory"):
            parent = "/sys/fs/cgroup/memory" + own["memory"]
        else:
            skip("no memory cgroup controller (v1 or v2) available")
        if os.geteuid() != 0:
            skip("creating memory cgroups needs root")
        self.path = os.path.join(parent, "msq-test-%s-%d" % (name, os.getpid()))
        try:
            os.mkdir(self.path)
        except OSError as e:
            skip("cannot create a memory cgroup under %s: %s" % (parent, e))
        self._write("memory.max" if self.v2 else "memory.limit_in_bytes", str(limit))

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def prefix(self):
        """A command prefix that runs a program inside this cgroup."""
        return ["sh", "-c", 'echo $$ > "$0"/cgroup.procs && exec "$@"', self.path]

    def remove(self):
        if not self.path:
            return
        for _ in range(50):
            try:
                pids = open(os.path.join(self.path, "cgroup.procs")).read().split()
                for p in pids:
                    try:
                        os.kill(int(p), 9)
                    except OSError:
                        pass
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def _own_cgroup():
    out = {}
    for line in open("/proc/self/cgroup"):
        _, ctrls, path = line.rstrip("\n").split(":", 2)
        for c in ctrls.split(","):
            out[c] = path
    return out
