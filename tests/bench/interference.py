#!/usr/bin/env python3
"""Interference benchmark for libmadvseq (see tests/bench/README.md).

The scenario (docs: DESIGN.md): one memory cgroup limited to 1 GiB holds
  victim    fio psync 4 KiB random reads over a warm 512 MiB file, and
  streamer  something that reads a 4 GiB file once from start to end.
The streamer's pages flood the cgroup's LRU and the victim's warm pages are
reclaimed with them.  Each configuration (a "row") is a streamer kind run in a
variant: the kernel alone, under libmadvseq (LD_PRELOAD), under a peer tool.
All rows are measured side by side in one run, interleaved when --reps > 1,
and the table reports medians.

How a phase is timed, and why:
  The streamer reads a fixed amount (the whole file, --passes times), so every
  variant does the same work and its MB/s is bytes / wall time.  The victim is
  time-based and is started together with the streamer and stopped (SIGINT,
  fio then writes its JSON) as soon as the streamer exits, so the victim's
  numbers cover exactly the streaming window.  Fixed-runtime streamers would
  make the amount of flooding depend on the streamer's speed; a victim with its
  own fixed runtime would mix in seconds with no streamer at all.  Starting the
  victim first and waiting would add seconds of undisturbed reads to the
  "with streamer" rows (1 s of 650k IOPS would turn ~1.4k into ~17k).
  "alone" runs the victim by itself for --alone-seconds.

Before every phase: both files are evicted (posix_fadvise DONTNEED, checked
with cachestat), the victim's file is read back by a process *inside* the
benchmark cgroup (page cache is charged to the cgroup that first faults it in;
a warm-up outside would make the victim immune), and the cgroup's peak usage
is reset.  During the phase the streamer file's cached bytes are sampled
every 100 ms (cachestat(2)), so a tool that only drops at exit can't hide
what it held while streaming.
"""

import argparse
import ctypes
import errno
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def parse_size(s):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", str(s))
    if not m:
        raise argparse.ArgumentTypeError("bad size: %r" % s)
    mult = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1 << 40}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def fmt_bytes(n):
    if n is None:
        return "-"
    if n >= GiB:
        return "%.2fG" % (n / GiB)
    if n >= MiB:
        return "%.0fM" % (n / MiB)
    if n >= KiB:
        return "%.0fK" % (n / KiB)
    return "%d" % n


def fmt_stats(st):
    return "%d region(s) in %d process(es), dropped %s, kept %s, %d cycles, %d errors" % (
        st.get("regions", 0), st.get("processes", 0), fmt_bytes(st.get("bytes_dropped", 0)),
        fmt_bytes(st.get("bytes_kept", 0)), st.get("cycles", 0), st.get("errors", 0))


def log(msg):
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Page cache of one file: cachestat(2) (6.5+), else fincore, else vmtouch.

class _CachestatRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [("nr_cache", ctypes.c_uint64), ("nr_dirty", ctypes.c_uint64),
                ("nr_writeback", ctypes.c_uint64), ("nr_evicted", ctypes.c_uint64),
                ("nr_recently_evicted", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
SYS_cachestat = 451   # same number on every architecture
PAGE = os.sysconf("SC_PAGE_SIZE")
_have_cachestat = True


def cached_bytes(path):
    """Bytes of `path` in the page cache (all cgroups)."""
    global _have_cachestat
    if _have_cachestat:
        fd = os.open(path, os.O_RDONLY)
        try:
            rng, cs = _CachestatRange(0, 0), _Cachestat()
            r = _libc.syscall(ctypes.c_long(SYS_cachestat), ctypes.c_int(fd),
                              ctypes.byref(rng), ctypes.byref(cs), ctypes.c_uint(0))
            if r == 0:
                return cs.nr_cache * PAGE
            if ctypes.get_errno() != errno.ENOSYS:
                raise OSError(ctypes.get_errno(), "cachestat")
            _have_cachestat = False
        finally:
            os.close(fd)
    if shutil.which("fincore"):
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "-o", "RES", path],
                             capture_output=True, text=True, check=True).stdout
        return int(out.split()[0])
    out = subprocess.run(["vmtouch", "-f", path], capture_output=True, text=True, check=True).stdout
    m = re.search(r"Resident Pages:\s+(\d+)/", out)
    return int(m.group(1)) * PAGE


def evict(path, tries=5):
    """Drop `path` from the page cache; returns what is left."""
    left = None
    for _ in range(tries):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)          # dirty pages can't be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        left = cached_bytes(path)
        if left == 0:
            break
        time.sleep(0.2)
    return left


# --------------------------------------------------------------------------
# Memory cgroup: v1 (memory.limit_in_bytes, memory.stat cache) or v2
# (memory.max, memory.stat file), created under our own cgroup.

def kill_procs(procs):
    """Kills the processes (subprocess.Popen) still running, with their
    process groups, and reaps them all, waiting at most 5 s for each.
    The group matters: killing the `sh` of `sh -c 'cat F | pv'` alone left
    its cat reading F into the next phase, where that phase's own stream
    found F cached ahead of it (by another reader, so rightly kept)."""
    for p in procs:
        if p.poll() is None:
            try:
                if os.getpgid(p.pid) == p.pid:
                    os.killpg(p.pid, signal.SIGKILL)
                p.kill()
            except OSError:
                pass
    for p in procs:
        try:
            p.wait(timeout=5)
        except Exception:
            pass


def run_interruptible(work, cleanup):
    """Runs work(), then cleanup() with Ctrl-C, SIGTERM and SIGHUP ignored.
    The first of those signals interrupts work(); later ones do nothing (a
    terminal's Ctrl-C reaches us and a wrapper's SIGTERM may follow: the
    second must not interrupt the cleanup).  Returns 0, or 130 when
    interrupted; other exceptions pass through after the cleanup."""
    stopping = []

    def on_signal(sig, frame):
        if stopping:
            return
        stopping.append(sig)
        raise KeyboardInterrupt("signal %d" % sig)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    rc = 0
    try:
        work()
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        rc = 130
    finally:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        cleanup()
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)
    return rc


def rmdir_cgroup(path):
    """Removes the cgroup directory PATH, retrying for 5 s while the kernel
    still counts processes that were just killed in it; logs when it
    cannot."""
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
    log("could not remove cgroup %s" % path)


class Cgroup:
    def __init__(self, name, limit, parent=None):
        self.version, base = self._detect(parent)
        self.path = os.path.join(base, name)
        self.limit = limit
        os.makedirs(self.path, exist_ok=True)
        if self.version == 1:
            self._write("memory.limit_in_bytes", str(limit))
        else:
            # The memory controller must be enabled in the parent's subtree.
            # That fails (EBUSY) when the parent itself holds processes: run
            # from a delegated cgroup, or pass --cgroup-parent.
            try:
                with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory")
            except OSError as e:
                if not os.path.exists(os.path.join(self.path, "memory.max")):
                    raise SystemExit("cannot enable the memory controller under %s (%s); "
                                     "use --cgroup-parent with a delegated cgroup" % (base, e))
            self._write("memory.max", str(limit))

    @staticmethod
    def _detect(parent):
        lines = open("/proc/self/cgroup").read().splitlines()
        v1 = [l.split(":", 2)[2] for l in lines if l.split(":")[1].split(",").count("memory")]
        v2 = [l.split(":", 2)[2] for l in lines if l.startswith("0::")]
        if parent:
            if os.path.exists(os.path.join(parent, "memory.limit_in_bytes")):
                return 1, parent
            return 2, parent
        if v1 and os.path.isdir("/sys/fs/cgroup/memory" + v1[0]):
            return 1, "/sys/fs/cgroup/memory" + v1[0].rstrip("/")
        for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            if v2 and os.path.exists(os.path.join(root, "cgroup.controllers")):
                ctl = open(os.path.join(root, "cgroup.controllers")).read().split()
                if "memory" in ctl:
                    return 2, root + v2[0].rstrip("/")
        raise SystemExit("no memory cgroup controller found (v1 or v2)")

    def rel_path(self):
        """The path /proc/PID/cgroup shows for members (v1: of the memory
        hierarchy)."""
        root = "/sys/fs/cgroup/memory" if self.version == 1 else "/sys/fs/cgroup"
        if self.path.startswith(root + "/"):
            return self.path[len(root):]
        return self.path

    def _write(self, fname, value):
        with open(os.path.join(self.path, fname), "w") as f:
            f.write(value)

    def enter(self, pid=None):
        """Move pid (default: the calling process) into the cgroup."""
        self._write("cgroup.procs", str(pid or os.getpid()))

    def stat(self):
        out = {}
        for line in open(os.path.join(self.path, "memory.stat")):
            k, v = line.split()
            out[k] = int(v)
        return out

    def cache(self):
        """Page cache charged to the cgroup (v1 total_cache, v2 file)."""
        s = self.stat()
        if self.version == 1:
            return s.get("total_cache", s.get("cache", 0))
        return s.get("file", 0)

    def reset_peak(self):
        try:
            self._write("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak", "0")
        except OSError:
            pass

    def peak(self):
        for f in ("memory.max_usage_in_bytes", "memory.peak"):
            p = os.path.join(self.path, f)
            if os.path.exists(p):
                try:
                    return int(open(p).read().split()[0])
                except (OSError, ValueError):
                    pass
        return None

    def pids(self):
        try:
            return [int(x) for x in open(os.path.join(self.path, "cgroup.procs")).read().split()]
        except OSError:
            return []

    def destroy(self):
        for _ in range(50):
            pids = self.pids()
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        rmdir_cgroup(self.path)


# --------------------------------------------------------------------------
# Streamer kinds.  Each returns the argv for one pass over the file; the
# phase runs it --passes times back to back.  `ref` kinds are references
# with their own page-cache policy and are run only in the "kernel" variant.

def stream_fio_mmap(a, f, logp):
    # The streamer: fio's mmap engine, madvise(MADV_SEQUENTIAL) via
    # --fadvise_hint=1; the default bs (4k) unless --stream-bs.
    return (["fio", "--name=stream", "--ioengine=mmap", "--rw=read", "--fadvise_hint=1",
             "--bs=%s" % a.stream_bs, "--filename=%s" % f, "--size=%d" % a.stream_size,
             "--output-format=json", "--output=%s" % logp + ".json"], None)


def stream_cat(a, f, logp):
    return (["cat", f], None)             # read() 128 KiB, posix_fadvise(SEQUENTIAL)


def stream_cp(a, f, logp):
    return (["cp", f, "/dev/null"], None)  # copy_file_range fails, then read()


def stream_dd_nocache(a, f, logp):
    return (["dd", "if=%s" % f, "iflag=nocache", "bs=4M", "of=/dev/null", "status=none"], None)


def stream_odirect(a, f, logp):
    # Ceiling: the same sequential read with O_DIRECT takes no page cache at
    # all, so what the victim loses here is CPU / disk contention, not cache.
    return (["fio", "--name=stream", "--ioengine=psync", "--rw=read", "--direct=1", "--bs=1M",
             "--filename=%s" % f, "--size=%d" % a.stream_size,
             "--output-format=json", "--output=%s" % logp + ".json"], None)


def stream_static_mmap(a, f, logp):
    # A statically linked mmap + MADV_SEQUENTIAL reader (tests/daemon/streamer.c,
    # built with the daemon tests): LD_PRELOAD cannot reach it, only the
    # daemon's smaps discovery can.
    exe = os.path.join(os.path.dirname(os.path.dirname(a.lib or ".")), "tests", "daemon",
                       "daemon-streamer-static")
    return ([exe, f], None)


NO_PRELOAD = {"static-mmap"}      # only the kernel and discovery rows apply

STREAMERS = {
    # name: (argv builder, is reference, label)
    "static-mmap": (stream_static_mmap, False, "static mmap+MADV_SEQUENTIAL"),
    "fio-mmap": (stream_fio_mmap, False, "fio mmap+MADV_SEQUENTIAL"),
    "cat": (stream_cat, False, "cat (read)"),
    "cp": (stream_cp, False, "cp (read)"),
    "dd-nocache": (stream_dd_nocache, True, "dd iflag=nocache bs=4M"),
    "odirect": (stream_odirect, True, "fio O_DIRECT (no cache)"),
}


# --------------------------------------------------------------------------
# Variants: how the streamer runs.  Each returns (argv, env, skip_reason).

def variant_kernel(a, argv, env, logp):
    return argv, env, None


def variant_shim(a, argv, env, logp):
    if not a.lib or not os.path.exists(a.lib):
        return None, None, "shim not built (%s)" % (a.lib or "--lib")
    env = dict(env)
    env["LD_PRELOAD"] = a.lib + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env["MADVSEQ_STATS"] = logp + ".%p.madvseq-stats"   # %p: one file per process
    if a.mode:
        env["MADVSEQ_MODE"] = a.mode
    if a.lag:
        env["MADVSEQ_LAG"] = a.lag
    for kv in a.shim_env:
        k, _, v = kv.partition("=")
        env[k] = v
    return argv, env, None


def variant_nocache(a, argv, env, logp):
    if not shutil.which("nocache"):
        return None, None, "nocache not installed"
    return ["nocache"] + argv, env, None


def daemon_socket(a):
    return os.path.join(a.log_dir, "madvseqd.sock")


def variant_daemon(a, argv, env, logp):
    """Row "daemon does the work": the streamer runs under the shim, which
    registers its regions with a madvseqd started for the phase
    (start_daemon); the daemon drops for them with process_madvise."""
    if not a.daemon or not os.path.exists(a.daemon):
        return None, None, "no daemon (--daemon)"
    argv, env, why = variant_shim(a, argv, env, logp)
    if not why:
        env["MADVSEQ_SOCKET"] = daemon_socket(a)
    return argv, env, why


def variant_discovery(a, argv, env, logp):
    """Row "static streamer under daemon discovery": no shim in the streamer;
    the daemon finds its MADV_SEQUENTIAL VMA (VmFlags 'sr') in smaps.  Only
    mmap streamers have such a VMA."""
    if not a.daemon or not os.path.exists(a.daemon):
        return None, None, "no daemon (--daemon)"
    if "--ioengine=mmap" not in argv and not argv[0].endswith("streamer-static"):
        return None, None, "discovery finds MADV_SEQUENTIAL mappings only"
    return argv, env, None


# The kernel variant (contrib/kernel, the 6.12 series): its drop-behind
# switch, global or per memory cgroup.  A kvariant row runs the stream with
# neither shim nor daemon and the switch on; kvariant-aside runs it under
# the shim registered with a discovering daemon, the switch on through the
# cgroup, to see both step aside.
KSWITCH_SYSCTL = "/proc/sys/vm/seq_read_dropbehind"
KSWITCH_MEMCG = "memory.seq_read_dropbehind"
KSWITCH = {"kvariant": "sysctl", "kvariant-memcg": "memcg", "kvariant-aside": "memcg"}


def variant_kvariant(a, argv, env, logp):
    """Rows "kernel variant": the stream alone, the kernel's switch on
    (written before the stream, restored after: Bench.kswitch_on)."""
    if not os.path.exists(KSWITCH_SYSCTL):
        return None, None, "no vm.seq_read_dropbehind: a kernel without the patch series"
    return argv, env, None


def variant_kvariant_aside(a, argv, env, logp):
    """Row "kernel variant + shim + daemon": the switch on in the cgroup, the
    streamer under the shim registered with madvseqd, which also discovers;
    both must leave the stream to the kernel."""
    argv, env, why = variant_kvariant(a, argv, env, logp)
    return variant_daemon(a, argv, env, logp) if not why else (argv, env, why)


def start_daemon(a, cg, logp, discover):
    """Start madvseqd for one phase with a configuration that covers only the
    benchmark cgroup; returns a handle for stop_daemon.  It runs outside the
    benchmark cgroup, as a system daemon would."""
    sock = daemon_socket(a)
    conf = logp + ".madvseqd.conf"
    try:
        os.unlink(sock)
    except FileNotFoundError:
        pass
    with open(conf, "w") as f:
        f.write("[daemon]\nsocket = %s\ninterval = 20ms\n" % sock)
        # The default (2s) lets a 1 GB/s stream fill the cgroup before the
        # daemon first looks; see --discover-interval.
        f.write("discover_interval = %s\n" % a.discover_interval)
        f.write("\n[/*]\nmode = off\n")
        # "/*/name", not the full path: madvseqd (libinih) cuts section
        # names at 49 characters, and cgroup paths are often longer.
        f.write("\n[/*/%s]\nmode = %s\ndiscover = %s\n" % (
            os.path.basename(cg.rel_path()), a.mode or "pageout", "yes" if discover else "no"))
        if a.lag:
            f.write("lag = %s\n" % a.lag)
    out = open(logp + ".madvseqd.log", "w")
    p = subprocess.Popen([a.daemon, "-c", conf, "-s", sock, "-l", "debug" if a.daemon_debug else "info"],
                         stdout=out, stderr=subprocess.STDOUT)
    for _ in range(100):
        if os.path.exists(sock) or p.poll() is not None:
            break
        time.sleep(0.05)
    if p.poll() is not None:
        raise RuntimeError("madvseqd exited (%s); see %s.madvseqd.log" % (p.returncode, logp))
    return (p, out)


def stop_daemon(handle):
    if not handle:
        return
    p, out = handle
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    out.close()


VARIANTS = {
    "kernel": (variant_kernel, "kernel"),
    "shim": (variant_shim, "libmadvseq"),
    "nocache": (variant_nocache, "nocache"),
    "daemon": (variant_daemon, "madvseqd"),
    "discovery": (variant_discovery, "madvseqd discovery"),
    "kvariant": (variant_kvariant, "kvariant (sysctl)"),
    "kvariant-memcg": (variant_kvariant, "kvariant (memcg)"),
    "kvariant-aside": (variant_kvariant_aside, "kvariant+libmadvseq+madvseqd"),
}


# --------------------------------------------------------------------------

def fio_json(path):
    """fio writes 'fio: terminating on signal 2' before the JSON when stopped."""
    s = open(path).read()
    i = s.find("{")
    j = json.loads(s[i:])
    return j["jobs"][0]


class VictimSched:
    """Where the victim's time went, from /proc/PID/schedstat of fio's job
    process (on-CPU ns, runqueue-wait ns), and what it read from storage
    (/proc/PID/io read_bytes: its page-cache misses).  A victim that read
    nothing from disk but lost IOPS lost them to CPU sharing."""

    def __init__(self):
        self.pid = self.job = None
        self.t0 = self.last = None

    def start(self, pid):
        self.pid, self.t0 = pid, time.monotonic()

    def _find_job(self):
        # fio forks one process per job; the parent mostly sleeps.
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    st = open("/proc/%s/stat" % d).read()
                except OSError:
                    continue
                if int(st.rsplit(")", 1)[1].split()[1]) == self.pid:
                    return int(d)
        return None

    def sample(self):
        if self.pid is None:
            return
        if self.job is None:
            if time.monotonic() - self.t0 < 0.3:
                return
            self.job = self._find_job()
            if self.job is None:
                return
            self.t0_job = time.monotonic()
            self.first = self._read()
            return
        r = self._read()
        if r:
            self.last = (time.monotonic(), r)

    def _read(self):
        """(on-CPU ns, runqueue ns, read_bytes), each None where the kernel
        has no such file (schedstat needs CONFIG_SCHED_INFO, io
        CONFIG_TASK_IO_ACCOUNTING: a small guest kernel may have one and
        not the other); None when the job has gone."""
        cpu = wait = rb = None
        try:
            cpu, wait = (int(x) for x in open("/proc/%d/schedstat" % self.job).read().split()[:2])
        except (OSError, ValueError):
            pass
        try:
            for line in open("/proc/%d/io" % self.job):
                if line.startswith("read_bytes:"):
                    rb = int(line.split()[1])
        except (OSError, ValueError):
            pass
        if cpu is None and rb is None and not os.path.exists("/proc/%d" % self.job):
            return None
        return cpu, wait, rb

    def disk_read(self):
        """Bytes the victim read from storage (its cache misses)."""
        if not self.last or not self.first or self.first[2] is None or self.last[1][2] is None:
            return None
        return self.last[1][2] - self.first[2]

    def _pct(self, i):
        if not self.last or not self.first or self.first[i] is None or self.last[1][i] is None:
            return None
        t, r = self.last
        return 100.0 * (r[i] - self.first[i]) / 1e9 / (t - self.t0_job)

    def cpu_pct(self):
        return self._pct(0)

    def wait_pct(self):
        return self._pct(1)


class Bench:
    def __init__(self, a):
        self.a = a
        self.procs = []
        self.cg = None
        self.results = []         # one dict per phase run

    # -- files
    def make_file(self, path, size):
        if os.path.exists(path) and os.path.getsize(path) == size:
            log("reusing %s" % path)
            return
        log("writing %s (%s of data)" % (path, fmt_bytes(size)))
        # Real (random) data, not fallocate: reads must hit the disk.
        subprocess.run(["fio", "--name=mkfile", "--rw=write", "--bs=1M", "--size=%d" % size,
                        "--filename=%s" % path, "--refill_buffers", "--end_fsync=1",
                        "--output=/dev/null"], check=True)
        evict(path)

    # -- processes in the cgroup
    def spawn(self, argv, env=None, stdout=None, stderr=None, cpus=None):
        cg = self.cg

        def pre():
            os.setpgid(0, 0)      # its own group: kill_procs() ends it whole
            cg.enter()
            if cpus:
                os.sched_setaffinity(0, cpus)
        p = subprocess.Popen(argv, env=env, stdout=stdout or subprocess.DEVNULL,
                             stderr=stderr, preexec_fn=pre)
        self.procs.append(p)
        return p

    def kill_all(self):
        kill_procs(self.procs)
        self.procs = []

    def prepare(self):
        a = self.a
        left = evict(a.stream_file)
        if left:
            log("warning: %s of the streamer file still cached after eviction" % fmt_bytes(left))
        evict(a.victim_file)
        if shutil.which("vmtouch"):
            warm = ["vmtouch", "-qt", a.victim_file]
        else:
            warm = ["dd", "if=%s" % a.victim_file, "of=/dev/null", "bs=1M", "status=none"]
        p = self.spawn(warm)
        p.wait()
        self.procs.remove(p)
        c = cached_bytes(a.victim_file)
        if c < a.victim_size * 0.99:
            log("warning: victim file only %s cached after warm-up" % fmt_bytes(c))
        self.cg.reset_peak()

    # -- the kernel variant's switch
    def kswitch_on(self, via):
        """Turns the kernel's drop-behind on, globally or for the scenario's
        cgroup; returns what kswitch_restore needs.  Raises OSError where the
        file is missing or refuses."""
        path = KSWITCH_SYSCTL if via == "sysctl" else os.path.join(self.cg.path, KSWITCH_MEMCG)
        old = open(path).read().strip()
        with open(path, "w") as f:
            f.write("1")
        return (path, old)

    @staticmethod
    def kswitch_restore(saved):
        path, old = saved
        try:
            with open(path, "w") as f:
                f.write(old)
        except OSError as e:
            log("cannot restore %s to %s: %s" % (path, old, e))

    @staticmethod
    def aside(res, logp):
        """Whether the shim and the daemon left the stream to the kernel: the
        shim's stats say kernel_covers=1 and nothing dropped, the daemon's
        log that the cgroup's mappings are left to the kernel."""
        st = res.get("shim_stats") or {}
        try:
            dlog = open(logp + ".madvseqd.log").read()
        except OSError:
            dlog = ""
        shim_ok = st.get("kernel_covers") == "1" and st.get("bytes_dropped", 0) == 0
        daemon_ok = "left to the kernel" in dlog
        return {"ok": shim_ok and daemon_ok,
                "shim": "kernel_covers=%s dropped %s" % (st.get("kernel_covers", "?"),
                                                         fmt_bytes(st.get("bytes_dropped", 0)))
                        if st else "no stats",
                "daemon": "left to the kernel" if daemon_ok else "did not say it left it to the kernel"}

    def victim_argv(self, out, runtime):
        return ["fio", "--name=victim", "--ioengine=psync", "--rw=randread", "--bs=4k",
                "--filename=%s" % self.a.victim_file, "--size=%d" % self.a.victim_size,
                "--invalidate=0",              # default 1 would drop the warm cache
                "--norandommap", "--randrepeat=0",
                "--time_based", "--runtime=%d" % runtime,
                "--output-format=json", "--output=%s" % out] + (
                    # For the picture: IOPS over 250 ms windows.
                    ["--write_iops_log=%s" % out[:-len(".json")], "--log_avg_msec=250"]
                    if self.a.png else []) + (
                    ["--rate_iops=%d" % self.a.victim_rate] if self.a.victim_rate else [])

    def run_phase(self, kind, variant, rep):
        a = self.a
        name = "alone" if kind is None else "%s/%s" % (kind, variant)
        tag = "%s-%s-r%d" % (kind or "alone", variant or "", rep)
        logp = os.path.join(a.log_dir, tag)
        res = {"config": name, "kind": kind, "variant": variant, "rep": rep}
        env = dict(os.environ)
        argv = None
        if kind is not None:
            argv, _ = STREAMERS[kind][0](a, a.stream_file, logp)
            argv, env, why = VARIANTS[variant][0](a, argv, env, logp)
            if kind in NO_PRELOAD and variant in ("shim", "nocache", "daemon", "kvariant-aside"):
                why = "LD_PRELOAD cannot reach a static program"
            prog = argv and (argv[1] if argv[0] == "nocache" else argv[0])
            if not why and os.path.isabs(prog) and not os.access(prog, os.X_OK):
                why = "%s not built" % prog
            if why:
                res["skip"] = why
                self.results.append(res)
                return res
        self.prepare()
        log("phase %s (rep %d)" % (name, rep + 1))
        vout = logp + ".victim.json"
        dh = None
        kswitch = None
        try:
            if kind is not None and variant in KSWITCH:
                try:
                    kswitch = self.kswitch_on(KSWITCH[variant])
                except OSError as e:
                    res["skip"] = "cannot turn the kernel's switch on: %s" % e
                    self.results.append(res)
                    return res
            if variant in ("daemon", "discovery", "kvariant-aside"):
                try:
                    dh = start_daemon(a, self.cg, logp, variant != "daemon")
                except (RuntimeError, OSError) as e:
                    res["skip"] = str(e)
                    self.results.append(res)
                    return res
            vs = VictimSched()
            if kind is None:
                v = self.spawn(self.victim_argv(vout, a.alone_seconds), cpus=a.victim_cpus)
                vs.start(v.pid)
                deadline = time.monotonic() + a.alone_seconds + 60
                while v.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                    vs.sample()
                v.wait(timeout=5)
                sbytes = st = None
                peak_s = vmin = None
            else:
                t_victim = time.monotonic()
                v = self.spawn(self.victim_argv(vout, a.timeout + 60), cpus=a.victim_cpus)
                vs.start(v.pid)
                errf = open(logp + ".stderr", "w")
                t0 = time.monotonic()
                peak_s = 0
                vmin = a.victim_size
                series = []
                # (s, streamer file cached, victim file cached, cgroup's cache)
                res["series"] = series
                res["t0"] = t0              # CLOCK_MONOTONIC, as in madvseqd -l debug
                res["victim_t0"] = t_victim
                rc = 0
                for _ in range(a.passes):
                    s = self.spawn(argv, env=env, stderr=errf, cpus=a.stream_cpus)
                    while s.poll() is None:
                        time.sleep(0.1)
                        sc, vc = cached_bytes(a.stream_file), cached_bytes(a.victim_file)
                        peak_s, vmin = max(peak_s, sc), min(vmin, vc)
                        series.append((round(time.monotonic() - t0, 2), sc, vc,
                                       self.cg.cache() if a.png else None))
                        vs.sample()
                        if time.monotonic() - t0 > a.timeout:
                            s.kill()
                            res["error"] = "streamer timed out after %ds" % a.timeout
                    rc = rc or s.returncode
                    if res.get("error"):
                        break
                st = time.monotonic() - t0
                errf.close()
                if rc:
                    res["error"] = "streamer exit %d (see %s.stderr)" % (rc, logp)
                sbytes = a.stream_size * a.passes
                v.send_signal(signal.SIGINT)
                v.wait(timeout=60)
        finally:
            stop_daemon(dh)
            self.kill_all()
            if kswitch:
                self.kswitch_restore(kswitch)
        job = fio_json(vout)
        r = job["read"]
        res.update({
            "victim_iops": r["iops"],
            "victim_p99_us": r["clat_ns"]["percentile"]["99.000000"] / 1000.0,
            "victim_runtime_s": r["runtime"] / 1000.0,
            "stream_s": st,
            "stream_mbs": (sbytes / st / 1e6) if st else None,
            "cg_cache_end": self.cg.cache(),
            "cg_peak": self.cg.peak(),
            "stream_cached_end": cached_bytes(a.stream_file),
            "stream_cached_peak": peak_s,
            "victim_cached_end": cached_bytes(a.victim_file),
            "victim_cached_min": vmin,
            "victim_p999_us": r["clat_ns"]["percentile"]["99.900000"] / 1000.0,
            "victim_fio_cpu_pct": job["usr_cpu"] + job["sys_cpu"],
            "victim_cpu_pct": vs.cpu_pct(),
            "victim_runq_pct": vs.wait_pct(),
            "victim_disk_read": vs.disk_read(),
        })
        if res["stream_cached_peak"] is not None:
            res["stream_cached_peak"] = max(res["stream_cached_peak"], res["stream_cached_end"])
        if a.png and res.get("series"):
            res["victim_done"] = fio_iops_progress(vout[:-len(".json")] + "_iops.1.log")
        stats = {}
        files = sorted(f for f in os.listdir(a.log_dir)
                       if f.startswith(os.path.basename(logp) + ".") and f.endswith(".madvseq-stats"))
        for fn in files:
            for line in open(os.path.join(a.log_dir, fn)):
                k, _, v = line.strip().partition("=")
                if k in ("regions", "bytes_dropped", "bytes_kept", "cycles", "errors"):
                    stats[k] = stats.get(k, 0) + int(v or 0)
                elif k in ("mode", "lag", "kernel_covers"):
                    stats[k] = v
        if files:
            stats["processes"] = len(files)
            res["shim_stats"] = stats
        if variant == "kvariant-aside":
            res["aside"] = self.aside(res, logp)
        log("  victim %.0f IOPS p99 %.1fus cpu %s%s; cgroup cache %s, streamer file cached %s (peak %s)%s" % (
            res["victim_iops"], res["victim_p99_us"],
            "%.0f%% (runq wait %.0f%%)" % (res["victim_cpu_pct"], res["victim_runq_pct"])
            if res["victim_cpu_pct"] is not None else "?",
            "" if st is None else ", streamer %.0f MB/s in %.1fs" % (res["stream_mbs"], st),
            fmt_bytes(res["cg_cache_end"]), fmt_bytes(res["stream_cached_end"]),
            fmt_bytes(res["stream_cached_peak"]),
            "; shim: %s" % fmt_stats(res["shim_stats"]) if "shim_stats" in res else ""))
        self.results.append(res)
        return res

    # -- mmap_cost
    def cost(self):
        a = self.a
        exe = a.mmap_cost
        if not exe or not os.path.exists(exe):
            exe = os.path.join(a.log_dir, "mmap_cost")
            subprocess.run([os.environ.get("CC", "cc"), "-O2", "-o", exe,
                            os.path.join(HERE, "mmap_cost.c")], check=True)
        dat = os.path.join(a.data_dir, "mmap_cost.dat")
        have_lib = a.lib and os.path.exists(a.lib)
        sides = ["without", "with"] if have_lib else ["without"]
        # times[side][test][layout] = [ns per call, ...].  The kernel's own
        # cost of an mmap/munmap pair depends on where the VMA lands in the
        # maple tree, and any preloaded library moves that (see mmap_cost.c
        # -v): runs cycle through --cost-layouts layouts, the same ones on
        # both sides, so the ratio compares like with like.
        times = {s: {} for s in sides}
        nl = max(1, a.cost_layouts)
        log("mmap_cost: %d interleaved runs over %d VMA layouts%s" % (
            a.cost_runs, nl, "" if have_lib else " (no shim: baseline only)"))
        pairs = {}      # test -> [with/without of two adjacent runs]
        for i in range(a.cost_runs):
            v = i % nl
            this = {}
            for s in (sides if i % 2 == 0 else sides[::-1]):
                env = dict(os.environ)
                if s == "with":
                    env["LD_PRELOAD"] = a.lib
                out = subprocess.run([exe, "-n", str(a.cost_n), "-v", str(v), dat], env=env,
                                     capture_output=True, text=True, check=True).stdout
                for line in out.splitlines():
                    t, ns, _ = line.split()
                    times[s].setdefault(t, {}).setdefault(v, []).append(float(ns))
                    this[(s, t)] = float(ns)
            for (s, t), ns in this.items():
                if s == "with" and this.get(("without", t)):
                    pairs.setdefault(t, []).append(ns / this[("without", t)])
        rows = []

        def flat(d):
            return [x for xs in d.values() for x in xs]
        for t in times["without"]:
            w0 = flat(times["without"][t])
            row = {"test": t, "without_med": statistics.median(w0), "without_min": min(w0)}
            if have_lib:
                w1 = flat(times["with"][t])
                row.update({"with_med": statistics.median(w1), "with_min": min(w1),
                            "ratio_med": statistics.median(w1) / statistics.median(w0),
                            "ratio_min": min(w1) / min(w0),
                            "ratio_pairs": statistics.median(pairs[t]),
                            "ratio_by_layout": {
                                v: statistics.median(times["with"][t][v]) /
                                statistics.median(times["without"][t][v])
                                for v in times["without"][t]}})
            rows.append(row)
        # Instruction counts (user space only: syscalls themselves are not
        # counted, so the ratio overstates; the per-call delta is the number).
        if have_lib and a.callgrind and shutil.which("valgrind"):
            n = 2000
            for row in rows:
                t = row["test"]
                fn = {"anon": "bench_anon", "file": "bench_file", "read4k": "bench_read4k"}[t]
                ir = {}
                for s in sides:
                    env = dict(os.environ)
                    if s == "with":
                        env["LD_PRELOAD"] = a.lib
                    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                                        "--toggle-collect=" + fn, exe, "-n", str(n), "-t", t, dat],
                                       env=env, capture_output=True, text=True)
                    m = re.search(r"Collected\s*:\s*(\d+)", p.stderr)
                    ir[s] = int(m.group(1)) / (n * (4 if t == "read4k" else 1)) if m else None
                if ir.get("with") and ir.get("without"):
                    row.update({"ir_without": ir["without"], "ir_with": ir["with"]})
        self.cost_rows = rows
        return rows


# --------------------------------------------------------------------------
# Report

TARGETS = {
    "victim_vs_alone": 0.97,
    "stream_vs_kernel": 0.98,
    "stream_cached_max": 64 * MiB,
    "mmap_cost": 1.05,
    "read_cost": 1.03,
}


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fio_iops_progress(path):
    """fio's --write_iops_log (ms, IOPS over --log_avg_msec, ...) as the
    cumulative I/Os done at each entry: [(s since fio started, ios)]."""
    out, done, prev_ms = [], 0.0, 0
    try:
        for line in open(path):
            f = line.split(",")
            ms, iops = int(f[0]), int(f[1])
            done += iops * (ms - prev_ms) / 1000.0
            prev_ms = ms
            out.append((ms / 1000.0, done))
    except (OSError, ValueError, IndexError):
        pass
    return out


def picture(b, path):
    """The first repetition of every streamer and variant, one column each:
    the victim's IOPS over time above, the cgroup's page cache split into
    the victim's file, the streamer's file and the rest below (the
    real-server benchmarks' picture, benchlib.plot)."""
    import bisect
    import benchlib
    res = []
    for r in b.results:
        if r.get("rep") != 0 or not r.get("series") or r.get("error"):
            continue
        prog = r.get("victim_done") or []
        times = [t for t, _ in prog]
        shift = r["t0"] - r["victim_t0"]         # fio's clock starts with the victim
        samples = []
        for t, sc, vc, cg in r["series"]:
            i = bisect.bisect_right(times, t + shift) - 1
            samples.append((t, vc, sc, cg or (vc + sc), prog[i][1] if i >= 0 else 0))
        label = "%s, %s" % (r["kind"], VARIANTS[r["variant"]][1] if r["variant"] in VARIANTS
                              else r["variant"])
        res.append({"variant": label, "samples": samples})
    if res:
        benchlib.plot(res, path, "interference: fio 4 KiB random reads next to a streamer, cgroup %s"
                      % fmt_bytes(b.a.limit), "victim IOPS")


def report(b):
    a = b.a
    rows = {}
    order = []
    for r in b.results:
        key = r["config"]
        if key not in rows:
            rows[key] = []
            order.append(key)
        rows[key].append(r)

    for r in b.results:
        # Diagnostic: IOPS per second the victim was not waiting for a CPU.
        # On shared cores the victim's share of CPU moves with everything
        # else running; this takes that out and leaves the cache effect
        # (disk misses still count: blocked time is not removed).
        rq = r.get("victim_runq_pct")
        if r.get("victim_iops") and rq is not None and rq < 95:
            r["victim_iops_rq_adj"] = r["victim_iops"] / (1 - rq / 100.0)

    def agg(key, field, fn=med):
        vals = [r[field] for r in rows.get(key, [])
                if "skip" not in r and r.get(field) is not None]
        return fn(vals) if vals else None

    def paired(key, field, base_key):
        """Median over reps of key's field / base_key's field in the same rep.
        Rows of one rep ran minutes apart at most, so pairing them cancels
        the slow drift of a shared machine better than a ratio of medians."""
        base = {r["rep"]: r.get(field) for r in rows.get(base_key, []) if "skip" not in r}
        xs = [r[field] / base[r["rep"]] for r in rows.get(key, [])
              if "skip" not in r and r.get(field) and base.get(r["rep"])]
        return med(xs)

    out = []
    P = out.append
    P("")
    if order:
        P("libmadvseq interference benchmark: cgroup v%d limit %s, victim %s psync 4k randread%s, "
          "streamer %s x%d pass(es), %d rep(s)%s; medians, ratios paired within a rep" % (
              b.cg.version if b.cg else 0, fmt_bytes(a.limit), fmt_bytes(a.victim_size),
              " at %d IOPS" % a.victim_rate if getattr(a, "victim_rate", 0) else "",
              fmt_bytes(a.stream_size), a.passes, a.reps,
              ", victim and streamer pinned to separate CPUs" if getattr(a, "pin", False) else ""))
    fmt = "%-38s %8s %7s %6s %6s %7s %4s %4s %6s %6s %6s %8s %9s %9s %8s"
    hdr = fmt % ("configuration", "victim", "x alone", "x adj", "p99", "p99.9", "vic", "vic",
                 "vic", "strm", "x kern", "cg cache", "strm file", "strm file", "victim")
    hdr2 = fmt % ("", "IOPS", "", "", "us", "us", "cpu%", "rq%", "disk", "MB/s", "", "at end",
                  "at end", "peak", "res. min")
    if order:
        P(hdr)
        P(hdr2)
        P("-" * len(hdr))
    for key in order:
        rs = rows[key]
        r0 = rs[0]
        if r0["kind"] is None:
            label = "victim alone"
        else:
            sl = STREAMERS[r0["kind"]][2]
            label = "%s + %s" % (sl, VARIANTS[r0["variant"]][1]) if not STREAMERS[r0["kind"]][1] \
                else "%s (reference)" % sl
        skips = [r.get("skip") for r in rs if r.get("skip")]
        if skips:
            P("%-38s  skipped: %s" % (label[:38], skips[0]))
            continue
        errs = [r["error"] for r in rs if r.get("error")]
        iops = agg(key, "victim_iops")
        mbs = agg(key, "stream_mbs")
        xa = paired(key, "victim_iops", "alone")
        xadj = paired(key, "victim_iops_rq_adj", "alone")
        xk = paired(key, "stream_mbs", "%s/kernel" % r0["kind"]) if r0["kind"] else None
        vmin = agg(key, "victim_cached_min", min)
        if vmin is None:
            vmin = agg(key, "victim_cached_end", min)
        cpu = agg(key, "victim_cpu_pct")
        rq = agg(key, "victim_runq_pct")
        disk = agg(key, "victim_disk_read")
        P(fmt % (
            label[:38], "%.0f" % iops,
            "%.3f" % xa if xa is not None else "-",
            "%.3f" % xadj if xadj is not None else "-",
            "%.1f" % agg(key, "victim_p99_us"), "%.0f" % agg(key, "victim_p999_us"),
            "%.0f" % cpu if cpu is not None else "-",
            "%.0f" % rq if rq is not None else "-",
            fmt_bytes(disk),
            "%.0f" % mbs if mbs else "-",
            "%.3f" % xk if xk is not None else "-",
            fmt_bytes(agg(key, "cg_cache_end", max)),
            fmt_bytes(agg(key, "stream_cached_end", max)),
            fmt_bytes(agg(key, "stream_cached_peak", max)),
            "%.0f%%" % (100.0 * vmin / a.victim_size) if vmin is not None else "-"))
        if len(rs) > 1:
            vals = sorted(r["victim_iops"] for r in rs if "victim_iops" in r)
            P("%-38s %s" % ("  victim IOPS over reps", " ".join("%.0f" % v for v in vals)))
        sts = [r["shim_stats"] for r in rs if isinstance(r.get("shim_stats"), dict)]
        # Stats are written by destructors at exit: fio's job processes leave
        # with _exit and write none, so all-zero stats are not shown.
        if sts and (sts[0].get("regions") or sts[0].get("bytes_dropped")):
            P("%-38s %s" % ("  MADVSEQ_STATS (rep 1)", fmt_stats(sts[0])))
        elif r0["variant"] in ("shim", "daemon") and not sts:
            P("%-38s %s" % ("", "no MADVSEQ_STATS file: was the shim loaded?"))
        for e in errs:
            P("%-38s  error: %s" % ("", e))
    P("")

    # Targets
    verdicts = []
    for key in order:
        r0 = rows[key][0]
        if r0["kind"] is None or r0["variant"] not in ("shim", "daemon") or \
                any(r.get("skip") for r in rows[key]):
            continue
        k = r0["kind"] + ("" if r0["variant"] == "shim" else " (madvseqd)")
        x = paired(key, "victim_iops", "alone")
        xadj = paired(key, "victim_iops_rq_adj", "alone")
        if x is not None:
            verdicts.append((x >= TARGETS["victim_vs_alone"],
                             "%s: victim IOPS under libmadvseq / alone = %.3f (target >= %.2f)%s" % (
                                 k, x, TARGETS["victim_vs_alone"],
                                 "; runqueue-adjusted %.3f" % xadj if xadj is not None else "")))
        x = paired(key, "stream_mbs", "%s/kernel" % r0["kind"])
        if x is not None:
            verdicts.append((x >= TARGETS["stream_vs_kernel"],
                             "%s: streamer MB/s under libmadvseq / kernel alone = %.3f (target >= %.2f)" % (
                                 k, x, TARGETS["stream_vs_kernel"])))
        end = agg(key, "stream_cached_end", max)
        peak = agg(key, "stream_cached_peak", max)
        verdicts.append((end <= TARGETS["stream_cached_max"],
                         "%s: streamer's page cache at end = %s (target <= 64M)" % (k, fmt_bytes(end))))
        verdicts.append((peak <= TARGETS["stream_cached_max"],
                         "%s: streamer's page cache, peak while streaming = %s (target <= 64M)" % (
                             k, fmt_bytes(peak))))
    for row in getattr(b, "cost_rows", []):
        if "ratio_med" not in row:
            continue
        tgt = TARGETS["read_cost"] if row["test"] == "read4k" else TARGETS["mmap_cost"]
        what = "4 KiB read() of cached data" if row["test"] == "read4k" else \
            "untracked %s mmap+munmap" % row["test"]
        x = row.get("ratio_pairs", row["ratio_med"])
        verdicts.append((x <= tgt,
                         "%s with/without shim = %.3f (median of adjacent pairs; %.3f by medians, "
                         "%.3f by mins) (target <= %.2f)" % (what, x, row["ratio_med"], row["ratio_min"], tgt)))

    cost_rows = getattr(b, "cost_rows", [])
    if cost_rows:
        P("per-call cost (ns/call, %d interleaved runs of %d calls over %d VMA layouts; read4k x4;"
          " Ir = user-space instructions per call, callgrind)" % (
              a.cost_runs, a.cost_n, max(1, a.cost_layouts)))
        P("%-8s %12s %12s %12s %12s %8s %8s %8s %11s %11s" % (
            "test", "without med", "with med", "without min", "with min", "x pairs", "x med", "x min",
            "Ir/call w/o", "Ir/call w/"))
        for row in cost_rows:
            P("%-8s %12.1f %12s %12.1f %12s %8s %8s %8s %11s %11s" % (
                row["test"], row["without_med"],
                "%.1f" % row["with_med"] if "with_med" in row else "-",
                row["without_min"],
                "%.1f" % row["with_min"] if "with_min" in row else "-",
                "%.3f" % row["ratio_pairs"] if "ratio_pairs" in row else "-",
                "%.3f" % row["ratio_med"] if "ratio_med" in row else "-",
                "%.3f" % row["ratio_min"] if "ratio_min" in row else "-",
                "%.0f" % row["ir_without"] if "ir_without" in row else "-",
                "%.0f" % row["ir_with"] if "ir_with" in row else "-"))
        for row in cost_rows:
            if row.get("ratio_by_layout"):
                P("  %-6s with/without by layout (-v K): %s" % (row["test"], " ".join(
                    "%s:%.2f" % (k, v) for k, v in sorted(row["ratio_by_layout"].items(),
                                                          key=lambda kv: int(kv[0])))))
        P("")
    for ok, text in verdicts:
        P("%s  %s" % ("PASS" if ok else "MISS", text))
    if not verdicts:
        P("(no libmadvseq rows measured: no targets to check)")
    print("\n".join(out), flush=True)
    return out


# --------------------------------------------------------------------------

def default_dir():
    t = os.environ.get("TMPDIR")
    if t and os.path.isdir(t):
        fs = subprocess.run(["stat", "-f", "-c", "%T", t], capture_output=True, text=True).stdout.strip()
        if fs not in ("tmpfs", "ramfs"):
            return t
    return os.path.join(REPO, "build-bench")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="short run for the demo: 1 pass, 5 s alone, fio-mmap kernel+shim only")
    ap.add_argument("--streamers", default=None,
                    help="comma list of %s, or 'all' (default fio-mmap,odirect; quick: fio-mmap)"
                    % ",".join(STREAMERS))
    ap.add_argument("--variants", default=None,
                    help="comma list of %s (default all; quick: kernel,shim)" % ",".join(VARIANTS))
    ap.add_argument("--reps", type=int, default=None, help="repetitions, interleaved (default 3; quick 1)")
    ap.add_argument("--passes", type=int, default=None,
                    help="times the streamer reads its whole file per phase (default 2; quick 1)")
    ap.add_argument("--alone-seconds", type=int, default=None, help="victim-alone phase (default 10; quick 5)")
    ap.add_argument("--timeout", type=int, default=600, help="max seconds for one streamer phase")
    ap.add_argument("--limit", type=parse_size, default=GiB, help="cgroup memory limit (1G)")
    ap.add_argument("--victim-size", type=parse_size, default=512 * MiB)
    ap.add_argument("--victim-rate", type=int, default=0, metavar="IOPS",
                    help="pace the victim's reads (fio --rate_iops; default: as fast as it can): "
                    "a service with a warm cache rather than a hot one")
    ap.add_argument("--stream-size", type=parse_size, default=4 * GiB)
    ap.add_argument("--stream-bs", default="4k", help="fio streamer block size (fio default 4k)")
    ap.add_argument("--lib", default=os.path.join(REPO, "build-bench", "preload", "libmadvseq.so"),
                    help="libmadvseq.so to preload (default build-bench/preload/libmadvseq.so)")
    ap.add_argument("--mode", help="MADVSEQ_MODE for the shim rows (default: the shim's)")
    ap.add_argument("--lag", help="MADVSEQ_LAG for the shim rows (default: the shim's)")
    ap.add_argument("--shim-env", action="append", default=[], metavar="K=V",
                    help="extra environment for the shim rows (repeatable)")
    ap.add_argument("--daemon", help="madvseqd binary, for the daemon/discovery rows "
                    "(default: daemon/madvseqd in --lib's build dir, if built)")
    ap.add_argument("--discover-interval", default="500ms",
                    help="madvseqd discover_interval for the discovery rows (default 500ms)")
    ap.add_argument("--daemon-debug", action="store_true", help="madvseqd -l debug")
    ap.add_argument("--dir", default=None, help="directory on a disk filesystem for the data files "
                    "(default $TMPDIR if on disk, else build-bench/)")
    ap.add_argument("--keep", action="store_true", help="keep (and reuse) the data files")
    ap.add_argument("--log-dir", help="keep fio JSON, stderr and shim stats here")
    ap.add_argument("--json", help="write all raw results to this file")
    ap.add_argument("--png", metavar="FILE",
                    help="write a picture of the first repetition (python3-matplotlib)")
    ap.add_argument("--report-from", metavar="JSON",
                    help="print the table and verdicts of a run saved with --json, run nothing")
    ap.add_argument("--pin", action="store_true",
                    help="victim on the first CPU, streamer (and the shim's thread) on the others: "
                    "measures the page-cache effect apart from CPU sharing")
    ap.add_argument("--cgroup-parent", help="create the benchmark cgroup under this cgroup directory")
    ap.add_argument("--no-cost", action="store_true", help="skip the mmap_cost comparison")
    ap.add_argument("--cost-only", action="store_true", help="only the mmap_cost comparison")
    ap.add_argument("--cost-runs", type=int, default=None, help="interleaved runs (default 9; quick 3)")
    ap.add_argument("--cost-n", type=int, default=100000, help="calls per run")
    ap.add_argument("--cost-layouts", type=int, default=8,
                    help="VMA layouts to cycle through (mmap_cost -v 0..N-1; default 8)")
    ap.add_argument("--no-callgrind", dest="callgrind", action="store_false")
    ap.add_argument("--mmap-cost", default=None, help="mmap_cost binary (default: next to --lib's "
                    "build dir, else compiled with cc)")
    a = ap.parse_args()

    q = a.quick
    a.reps = a.reps or 3         # quick too: one rep is at the mercy of other load
    a.passes = a.passes or (1 if q else 2)
    a.alone_seconds = a.alone_seconds or (5 if q else 10)
    a.cost_runs = a.cost_runs or (8 if q else 16)
    if a.variants is None:
        a.variants = "kernel,shim" if q else ",".join(VARIANTS)
    a.victim_cpus = a.stream_cpus = None
    if a.pin:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            ap.error("--pin needs at least 2 CPUs")
        a.victim_cpus, a.stream_cpus = {cpus[0]}, set(cpus[1:])
    if a.streamers is None:
        a.streamers = "fio-mmap" if q else "fio-mmap,odirect"
    kinds = list(STREAMERS) if a.streamers == "all" else [k for k in a.streamers.split(",") if k]
    variants = [v for v in a.variants.split(",") if v]
    for k in kinds:
        if k not in STREAMERS:
            ap.error("unknown streamer %r" % k)
    for v in variants:
        if v not in VARIANTS:
            ap.error("unknown variant %r" % v)
    if os.geteuid() != 0:
        log("warning: not root; cgroup creation and eviction checks may fail")
    if a.lib:
        a.lib = os.path.abspath(a.lib)
    if a.daemon is None and a.lib:
        cand = os.path.join(os.path.dirname(os.path.dirname(a.lib)), "daemon", "madvseqd")
        a.daemon = cand if os.path.exists(cand) else None
    if a.mmap_cost is None and a.lib:
        cand = os.path.join(os.path.dirname(os.path.dirname(a.lib)), "tests", "bench", "mmap_cost")
        a.mmap_cost = cand if os.path.exists(cand) else None

    if a.report_from:
        b = Bench(a)
        saved = json.load(open(a.report_from))
        b.results, b.cost_rows = saved["results"], saved["cost"]
        for k, v in saved.get("args", {}).items():
            setattr(a, k, v)
        b.cg = argparse.Namespace(version=saved.get("cgroup_version", 0))
        report(b)
        return 0

    base = os.path.abspath(a.dir or default_dir())
    os.makedirs(base, exist_ok=True)
    a.data_dir = os.path.join(base, "madvseq-bench-data" if a.keep else "madvseq-bench-%d" % os.getpid())
    os.makedirs(a.data_dir, exist_ok=True)
    own_logs = a.log_dir is None
    a.log_dir = os.path.abspath(a.log_dir or os.path.join(a.data_dir, "logs"))
    os.makedirs(a.log_dir, exist_ok=True)
    a.victim_file = os.path.join(a.data_dir, "victim.dat")
    a.stream_file = os.path.join(a.data_dir, "stream.dat")
    missing = [t for t in ("fio",) if not shutil.which(t)]
    if missing:
        raise SystemExit("missing: %s (apt-get install -y %s)" % (" ".join(missing), " ".join(missing)))

    b = Bench(a)

    def work():
        if not a.cost_only:
            b.cg = Cgroup("madvseq-bench-%d" % os.getpid(), a.limit, a.cgroup_parent)
            log("cgroup v%d %s, limit %s; data in %s" % (b.cg.version, b.cg.path, fmt_bytes(a.limit), a.data_dir))
            b.make_file(a.victim_file, a.victim_size)
            b.make_file(a.stream_file, a.stream_size)
            for rep in range(a.reps):
                b.run_phase(None, None, rep)
                for k in kinds:
                    vs = ["kernel"] if STREAMERS[k][1] else variants
                    for v in vs:
                        b.run_phase(k, v, rep)
        if not a.no_cost:
            b.cost()
        report(b)
        if a.png and not a.cost_only:
            picture(b, a.png)

    def cleanup():
        b.kill_all()
        if b.cg:
            b.cg.destroy()
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"results": b.results, "cost": getattr(b, "cost_rows", []),
                           "cgroup_version": b.cg.version if b.cg else 0,
                           "args": {k: getattr(a, k) for k in (
                               "limit", "victim_size", "victim_rate", "stream_size", "passes", "reps",
                               "cost_runs", "cost_n", "cost_layouts", "pin")}}, f, indent=1)
        if not a.keep:
            for fn in (a.victim_file, a.stream_file, os.path.join(a.data_dir, "mmap_cost.dat")):
                try:
                    os.unlink(fn)
                except FileNotFoundError:
                    pass
            if own_logs:
                shutil.rmtree(a.log_dir, ignore_errors=True)
            try:
                os.rmdir(a.data_dir)
            except OSError:
                pass
    return run_interruptible(work, cleanup)


if __name__ == "__main__":
    sys.exit(main())
