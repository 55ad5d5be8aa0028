"""Shared pieces of the real-server benchmarks (pg_backup.py, kv_backup.py,
loader.py, anon_churn.py); see tests/bench/README.md.

The page-cache, cgroup, process and daemon helpers are interference.py's own,
imported as they are, so both measure the same way.  What is added here:

  Harness   the memory cgroup of the scenario, a second one for the
            "isolation" variant (the stream in a cgroup of its own), a
            cpuacct group that holds every process the benchmark starts
            (and madvseqd), process spawning and cleanup;
  Meter     CPU from /proc/stat (the whole machine), of the benchmark's
            processes and of kswapd, /proc/vmstat and memory.stat deltas;
  Sampler   a thread that records, every --sample-ms, the cgroup's page
            cache split into the victim's files, the stream's files and the
            rest, plus the victim's progress counter: the tables' residency
            columns and the picture (--png) come from it;
  report()  the tables and PASS/MISS lines, the same for every scenario.
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interference import (KiB, MiB, GiB, Cgroup, cached_bytes, evict, fmt_bytes,  # noqa: E402,F401
                          kill_procs, log, parse_size, rmdir_cgroup, run_interruptible,
                          start_daemon, stop_daemon)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
HZ = os.sysconf("SC_CLK_TCK")

VARIANTS = ["kernel", "nocache", "shim", "daemon", "isolation"]
LABELS = {"kernel": "kernel alone", "nocache": "nocache", "shim": "libmadvseq",
          "daemon": "madvseqd", "isolation": "isolation 64M", "alone": "victim alone",
          "alone_end": "victim alone, end", "odirect": "O_DIRECT ref."}
ALONE = ("alone", "alone_end")   # the victim by itself, first and last phase
CPU_VARIANTS = ("kernel", "shim", "daemon")   # streams run again alone for their CPU cost

# The targets (issue 13), judged for the libmadvseq and madvseqd rows.
TARGETS = {"resident": 0.99, "p99_vs_alone": 1.2, "thr_vs_odirect": 0.95,
           "stream_vs_kernel": 0.98, "cpu_vs_kernel": 0.5}


def add_common_args(ap, limit, quick_help):
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma list of %s (default all)" % ",".join(VARIANTS))
    ap.add_argument("--limit", type=parse_size, default=limit,
                    help="memory limit of the scenario's cgroup (default %s)" % fmt_bytes(limit))
    ap.add_argument("--iso-limit", type=parse_size, default=64 * MiB,
                    help="memory limit of the stream's own cgroup, isolation variant (64M)")
    ap.add_argument("--lib", default=os.path.join(REPO, "build-rel", "preload", "libmadvseq.so"),
                    help="libmadvseq.so (default build-rel/preload/libmadvseq.so)")
    ap.add_argument("--daemon", default=None,
                    help="madvseqd (default: daemon/madvseqd in --lib's build directory)")
    ap.add_argument("--read-mode", default="all",
                    help="MADVSEQ_READ for the libmadvseq and madvseqd rows (default all, as madvseq run)")
    ap.add_argument("--write-free", default="0",
                    help="MADVSEQ_WRITE_FREE for the libmadvseq and madvseqd rows (default 0, as madvseq run; "
                         "'' for the library's own default, four lags)")
    ap.add_argument("--dir", default=None,
                    help="scratch directory on a disk filesystem (default $TMPDIR if on disk, else /var/tmp)")
    ap.add_argument("--log-dir", default=None, help="keep logs and raw outputs here")
    ap.add_argument("--sample-ms", type=int, default=250, help="cache/throughput sampling period (250)")
    ap.add_argument("--png", metavar="FILE", help="write a picture (python3-matplotlib)")
    ap.add_argument("--cgroup-parent", help="create the cgroups under this memory cgroup directory")
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="do not pin the victim to the first CPU and the stream to the others")
    ap.add_argument("--no-cpu-phase", dest="cpu_phase", action="store_false",
                    help="do not run each stream again without its victim to measure its CPU")
    ap.add_argument("--reps", type=int, default=1,
                    help="repeat the whole sequence of phases N times, interleaved; the tables "
                         "show medians (1)")
    ap.add_argument("--pause-damon", action="store_true",
                    help="stop the machine's DAMON pageout schemes for the run and start them "
                         "again at the end: they evict idle-looking page cache of any cgroup, the "
                         "victim's included, which no variant can help")
    ap.add_argument("--perf", action="store_true",
                    help="run each stream of the CPU measurement --cpu-runs times more under perf "
                         "record -a -g and print where the machine's busy CPU went (reclaim, "
                         "copying data)")
    ap.add_argument("--daemon-debug", action="store_true",
                    help="run madvseqd with -l debug (its log in --log-dir)")
    ap.add_argument("--cpu-runs", type=int, default=3,
                    help="runs of the stream without its victim, each from cold files, whose CPU "
                         "is summed (3)")


def phase_tag(a, *parts):
    """The name of a phase's files in --log-dir (pgbench logs, MADVSEQ_STATS,
    stderr), the repetition included: pg_backup's readiness check once
    counted the first repetition's pgbench log as the second's progress,
    and so took the server's children before pgbench had connected."""
    return "%s-r%d" % ("-".join(parts), getattr(a, "rep", 0))


def finish_args(a):
    a.variants = [v for v in a.variants.split(",") if v]
    for v in a.variants:
        if v not in VARIANTS:
            raise SystemExit("unknown variant %r (one of %s)" % (v, ",".join(VARIANTS)))
    a.lib = os.path.abspath(a.lib) if a.lib else None
    if a.daemon is None and a.lib:
        cand = os.path.join(os.path.dirname(os.path.dirname(a.lib)), "daemon", "madvseqd")
        a.daemon = cand if os.path.exists(cand) else None
    if a.dir is None:
        t = os.environ.get("TMPDIR")
        fs = subprocess.run(["stat", "-f", "-c", "%T", t], capture_output=True,
                            text=True).stdout.strip() if t and os.path.isdir(t) else "tmpfs"
        a.dir = t if fs not in ("tmpfs", "ramfs") else "/var/tmp"
    # On 2 cores a victim that runs flat out shares a CPU with the stream
    # unless each has its own: pinned, the victim's figures show what the
    # cache policy costs it (misses, memory bandwidth, kernel threads),
    # not the scheduler's share.
    cpus = sorted(os.sched_getaffinity(0))
    a.victim_cpus = a.stream_cpus = None
    if a.pin and len(cpus) >= 2:
        a.victim_cpus, a.stream_cpus = {cpus[0]}, set(cpus[1:])
    # What interference.start_daemon reads.
    a.mode, a.lag, a.discover_interval = "pageout", None, "500ms"
    if os.geteuid() != 0:
        raise SystemExit("needs root: memory cgroups, page-cache eviction")
    if a.perf and not shutil.which("perf"):
        raise SystemExit("--perf needs perf (scripts/bench-deps.sh installs linux-perf)")


# --------------------------------------------------------------------------
# CPU and reclaim counters

def machine_busy_s():
    """Busy CPU seconds of the whole machine (/proc/stat: all but idle and
    iowait), every process and kernel thread included."""
    f = open("/proc/stat").readline().split()[1:]
    v = [int(x) for x in f]
    user, nice, system, idle, iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / HZ


def proc_stats():
    """(pid, text of /proc/PID/stat) of every process; one that exits while
    it is listed is left out."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = open("/proc/%s/stat" % d).read()
        except OSError:
            continue
        yield int(d), st


def kswapd_s():
    tot = 0
    for _, st in proc_stats():
        comm = st[st.index("(") + 1:st.rindex(")")]
        if comm.startswith("kswapd"):
            f = st.rsplit(")", 1)[1].split()
            tot += int(f[11]) + int(f[12])
    return tot / HZ


def vmstat():
    out = {}
    for line in open("/proc/vmstat"):
        k, v = line.split()
        out[k] = int(v)
    return out


DAMON = "/sys/kernel/mm/damon/admin/kdamonds"


def damon_pageout_kdamonds():
    """(kdamond directory, its pageout schemes' directories) of every
    running kdamond with a pageout scheme."""
    out = []
    for k in sorted(glob.glob(os.path.join(DAMON, "[0-9]*"))):
        try:
            if open(os.path.join(k, "state")).read().strip() != "on":
                continue
            schemes = [sc for sc in glob.glob(os.path.join(k, "contexts", "*", "schemes", "[0-9]*"))
                       if open(os.path.join(sc, "action")).read().strip() == "pageout"]
        except OSError:
            continue
        if schemes:
            out.append((k, schemes))
    return out


def damon_pageout_bytes():
    """Bytes the machine's DAMON pageout schemes have paged out so far
    (None: no such scheme runs).  A host may run one (a paddr scheme that
    pages out what it saw idle for a while): it evicts pages of any cgroup,
    the victim's included, with no pgscan or pgsteal to show for it, so a
    residency dip in a phase where it acted is its work, not the
    manager's.  Asking for fresh stats takes the kdamond up to one
    sampling interval (0.5 s here): called outside the timed window."""
    total, found = 0, False
    for k, schemes in damon_pageout_kdamonds():
        try:
            with open(os.path.join(k, "state"), "w") as f:
                f.write("update_schemes_stats")
            for sc in schemes:
                total += int(open(os.path.join(sc, "stats", "sz_applied")).read())
            found = True
        except (OSError, ValueError):
            continue
    return total if found else None


def pause_damon_pageout():
    """Stops every kdamond that runs a pageout scheme (--pause-damon) and
    returns a callable that starts them again, with the configuration
    they had: their sysfs directories keep it while they are off."""
    stopped = []
    for k, _ in damon_pageout_kdamonds():
        try:
            with open(os.path.join(k, "state"), "w") as f:
                f.write("off")
            stopped.append(k)
        except OSError as e:
            log("cannot stop %s: %s" % (k, e))
    if stopped:
        log("DAMON pageout paused for the run (--pause-damon): %s" % ", ".join(
            os.path.basename(k) for k in stopped) + "; started again at the end")

    def resume():
        for k in stopped:
            try:
                with open(os.path.join(k, "state"), "w") as f:
                    f.write("on")
            except OSError as e:
                log("cannot start %s again: %s (write 'on' to its state file)" % (k, e))
    return resume


def reclaim_counters(d, prefix=""):
    """pgmajfault, pgscan, pgsteal, workingset_refault from a /proc/vmstat or
    memory.stat dict (v1 memory.stat has no pgscan/pgsteal: None)."""
    def s(keys):
        present = [k for k in keys if prefix + k in d]
        return sum(d[prefix + k] for k in present) if present else None
    def by_type(what):
        # Split by LRU type (pgscan_anon + pgscan_file) where the kernel has
        # it: the by-reclaimer counters (kswapd, direct) leave out cgroup v1
        # limit reclaim.
        if prefix + what + "_file" in d:
            return s([what + "_anon", what + "_file"])
        if prefix + what + "_kswapd" in d:
            return s([what + "_kswapd", what + "_direct", what + "_khugepaged", what + "_proactive"])
        return s([what])
    return {"pgmajfault": s(["pgmajfault"]),
            "pgscan": by_type("pgscan"),
            "pgsteal": by_type("pgsteal"),
            "refault_file": s(["workingset_refault_file"]),
            "refault_anon": s(["workingset_refault_anon"])}


class CpuAcct:
    """CPU time of every process the benchmark starts: a cpuacct group
    (cgroup v1) or, on v2, the memory cgroups' own cpu.stat."""

    def __init__(self, name, mem_cgroups):
        self.path = None
        self.mem_cgroups = mem_cgroups
        root = "/sys/fs/cgroup/cpuacct"
        if os.path.exists(os.path.join(root, "cpuacct.usage")):
            self.path = os.path.join(root, name)
            os.makedirs(self.path, exist_ok=True)

    def enter(self, pid=None):
        if self.path:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(pid or os.getpid()))

    def usage_s(self):
        if self.path:
            return int(open(os.path.join(self.path, "cpuacct.usage")).read()) / 1e9
        tot = 0
        for cg in self.mem_cgroups():
            for line in open(os.path.join(cg.path, "cpu.stat")):
                if line.startswith("usage_usec"):
                    tot += int(line.split()[1]) / 1e6
        return tot

    def destroy(self):
        if self.path:
            rmdir_cgroup(self.path)


class Meter:
    """Counters over one phase."""

    def __init__(self, h):
        self.h = h

    def _snap(self):
        return {"t": time.monotonic(), "machine": machine_busy_s(), "kswapd": kswapd_s(),
                "bench": self.h.acct.usage_s(), "vm": vmstat(),
                "mem": [cg.stat() for cg in self.h.mem_cgroups()]}

    def start(self):
        self.damon = damon_pageout_bytes()
        self.a = self._snap()

    def stop(self):
        b = self._snap()
        a = self.a
        damon = damon_pageout_bytes() if self.damon is not None else None
        out = {"seconds": b["t"] - a["t"], "machine_cpu_s": b["machine"] - a["machine"],
               "damon_pageout": damon - self.damon if damon is not None else None,
               "kswapd_s": b["kswapd"] - a["kswapd"],
               "bench_cpu_s": b["bench"] - a["bench"] + b["kswapd"] - a["kswapd"]}
        va, vb = reclaim_counters(a["vm"]), reclaim_counters(b["vm"])
        out["vmstat"] = {k: vb[k] - va[k] if vb[k] is not None else None for k in va}
        prefix = "total_" if self.h.cg.version == 1 else ""
        md = {}
        for sa, sb in zip(a["mem"], b["mem"]):
            ra, rb = reclaim_counters(sa, prefix), reclaim_counters(sb, prefix)
            for k in ra:
                if rb[k] is not None and ra[k] is not None:
                    md[k] = md.get(k, 0) + rb[k] - ra[k]
                else:
                    md.setdefault(k, None)
        out["memstat"] = md
        return out


# --------------------------------------------------------------------------
# Files and the cache sampler

def wait_ready(progress, proc, timeout=120):
    """Waits until the victim has done some work: on a loaded machine its
    start-up (imports, connections) can take seconds, and a stream started
    before would be measured without its victim."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("victim exited %d before it started" % proc.returncode)
        if (progress() or 0) > 0:
            return
        time.sleep(0.1)
    raise RuntimeError("victim did no work in %ds" % timeout)


def progress_counter(path):
    """Creates the empty file PATH in which a victim program keeps its count
    of work done; returns the function that reads it (None until it holds a
    number)."""
    open(path, "w").close()

    def progress():
        try:
            return int(open(path).read() or 0)
        except (OSError, ValueError):
            return None
    return progress


def files_under(paths):
    out = []
    for p in paths:
        if os.path.isfile(p):
            out.append(p)
        elif os.path.isdir(p):
            for root, _, names in os.walk(p):
                out.extend(os.path.join(root, n) for n in names)
    return out


def cached_sum(files):
    tot = 0
    for f in files:
        try:
            if os.path.isfile(f):
                tot += cached_bytes(f)
        except OSError:
            pass      # removed or unreadable in between: not cached by us
    return tot


class Sampler(threading.Thread):
    """Every period: (seconds, victim's files cached, stream's files cached,
    page cache charged to the scenario's cgroups, victim progress).
    `stream_paths` is re-walked every sample: a backup's output appears while
    it runs.  `progress` returns the victim's completed operations so far
    (None if unknown)."""

    def __init__(self, h, victim_files, stream_paths, progress=None, period=0.25, exclude=()):
        super().__init__(daemon=True)
        self.h, self.victim_files, self.stream_paths = h, victim_files, stream_paths
        # A stream path may hold the victim's files too (a whole cluster):
        # those count as the victim's, and `exclude` as nobody's.
        self.exclude = set(victim_files) | set(exclude)
        self.progress, self.period = progress, period
        self.samples = []
        self.halt = threading.Event()
        self.t0 = time.monotonic()
        h.samplers.append(self)

    def run(self):
        while not self.halt.is_set():
            t = time.monotonic() - self.t0
            vc = cached_sum(self.victim_files)
            sc = cached_sum(f for f in files_under(self.stream_paths) if f not in self.exclude)
            try:
                cg = sum(c.cache() for c in self.h.mem_cgroups())
            except OSError:
                return          # the cgroups are gone: the run is being cleaned up
            pr = self.progress() if self.progress else None
            self.samples.append((round(t, 3), vc, sc, cg, pr))
            self.halt.wait(self.period)

    def stop(self):
        self.halt.set()
        self.join(timeout=10)
        return self.samples


# The reference stream: files read with O_DIRECT and their bytes written
# with O_DIRECT into one file allocated beforehand (extending direct writes
# wait for the journal), so that no page of it is cached.  What any stream
# of these bytes costs the victim on the machine at hand (CPU, memory
# bandwidth, disk, interrupts): the most a page-cache policy can give back.
ODIRECT_COPY = r"""
import mmap, os, sys
out, files = sys.argv[1], sys.argv[2:]
sizes = {}
for f in files:
    try:
        sizes[f] = os.path.getsize(f)
    except OSError:             # a server's temporary file may go meanwhile
        pass
total = sum((n + 4095) // 4096 * 4096 for n in sizes.values())
os.makedirs(out, exist_ok=True)
fo = os.open(os.path.join(out, "copy"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
os.posix_fallocate(fo, 0, max(total, 1))
buf = mmap.mmap(-1, 1 << 20)    # page-aligned, as O_DIRECT needs
for f in sizes:
    try:
        fi = os.open(f, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        continue
    while True:
        n = os.readv(fi, [buf])
        if n <= 0:
            break
        os.write(fo, memoryview(buf)[:(n + 4095) // 4096 * 4096])
    os.close(fi)
os.close(fo)
"""


def odirect_copy_argv(files, out):
    """argv of the reference stream: files copied into out/copy, O_DIRECT on
    both sides."""
    return [sys.executable, "-c", ODIRECT_COPY, out] + list(files)


# --------------------------------------------------------------------------
# The harness: cgroups, processes, variants, cleanup

class Harness:
    def __init__(self, a, name):
        self.a = a
        self.name = "madvseq-%s-%d" % (name, os.getpid())
        self.procs = []
        self.cg = self.iso = None
        self.cleanups = []          # callables run last-in first-out at exit
        self.samplers = []
        self.cg = Cgroup(self.name, a.limit, a.cgroup_parent)
        if "isolation" in a.variants:
            self.iso = Cgroup(self.name + "-iso", a.iso_limit, a.cgroup_parent)
        self.acct = CpuAcct(self.name, self.mem_cgroups)
        os.makedirs(a.dir, exist_ok=True)
        self.scratch = os.path.join(os.path.abspath(a.dir), self.name)
        os.makedirs(self.scratch, exist_ok=True)
        os.chmod(self.scratch, 0o755)
        self.own_logs = a.log_dir is None
        a.log_dir = os.path.abspath(a.log_dir or os.path.join(self.scratch, "logs"))
        os.makedirs(a.log_dir, exist_ok=True)
        # Servers run as their own user and write MADVSEQ_STATS here.
        os.chmod(a.log_dir, 0o1777)
        log("cgroup v%d %s, limit %s%s; scratch %s" % (
            self.cg.version, self.cg.path, fmt_bytes(a.limit),
            ", isolation cgroup %s" % fmt_bytes(a.iso_limit) if self.iso else "", self.scratch))
        if a.pause_damon:       # last: close() starts them again
            self.cleanups.append(pause_damon_pageout())

    def mem_cgroups(self):
        return [c for c in (self.cg, self.iso) if c]

    def stream_cg(self, variant):
        return self.iso if variant == "isolation" else self.cg

    def spawn(self, argv, env=None, cg=None, cpus=None, user=None, stdout=None, stderr=None,
              cwd=None, track=True):
        cg = cg or self.cg
        acct = self.acct

        def pre():
            os.setpgid(0, 0)      # its own group: kill_all() ends it whole
            cg.enter()
            acct.enter()
            if cpus:
                os.sched_setaffinity(0, cpus)
            if user:
                import pwd
                pw = pwd.getpwnam(user)
                os.setgid(pw.pw_gid)
                os.setgroups([])
                os.setuid(pw.pw_uid)
        p = subprocess.Popen(argv, env=env, stdout=stdout or subprocess.DEVNULL,
                             stderr=stderr, cwd=cwd, preexec_fn=pre)
        if track:
            self.procs.append(p)
        return p

    def run(self, argv, **kw):
        """Runs to completion inside the cgroup; raises on failure."""
        errp = os.path.join(self.a.log_dir, "cmd.stderr")
        with open(errp, "w") as err:
            p = self.spawn(argv, stderr=err, track=False, **kw)
            rc = p.wait()
        if rc:
            raise RuntimeError("%s exited %d: %s" % (" ".join(argv[:3]), rc,
                                                      open(errp).read().strip()[-800:]))

    def wrap(self, variant, argv, env, tag):
        """argv and environment of a streaming process in a variant; None
        and a reason when the variant cannot run here."""
        env = dict(env if env is not None else os.environ)
        if variant in ("kernel", "isolation") + ALONE:
            return argv, env, None
        if variant == "nocache":
            if not subprocess.run(["sh", "-c", "command -v nocache"], capture_output=True).stdout:
                return None, None, "nocache not installed"
            return ["nocache"] + argv, env, None
        if not self.a.lib or not os.path.exists(self.a.lib):
            return None, None, "libmadvseq not built (%s)" % self.a.lib
        env["LD_PRELOAD"] = self.a.lib + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        env["MADVSEQ_READ"] = self.a.read_mode
        env["MADVSEQ_WRITE_FREE"] = self.a.write_free
        env["MADVSEQ_STATS"] = os.path.join(self.a.log_dir, tag + ".%p.madvseq-stats")
        if variant == "daemon":
            if not self.a.daemon or not os.path.exists(self.a.daemon):
                return None, None, "madvseqd not built"
            env["MADVSEQ_SOCKET"] = os.path.join(self.a.log_dir, "madvseqd.sock")
        return argv, env, None

    def stream(self, variant, argv, env, tag, what, pinned=True):
        """Runs a phase's streaming process to its end in the variant's
        cgroup (on the stream's CPUs unless not pinned), its stderr in
        TAG.stderr; raises when it fails."""
        errp = os.path.join(self.a.log_dir, tag + ".stderr")
        with open(errp, "w") as err:
            rc = self.spawn(argv, env=env, cg=self.stream_cg(variant),
                            cpus=self.a.stream_cpus if pinned else None, stderr=err).wait()
        if rc:
            raise RuntimeError("%s exited %d: %s" % (what, rc, open(errp).read()[-500:]))

    def stream_alone(self, variant, argv, env, tag, what, sync_dir, prepare):
        """The stream once more, without its victim (whose files stay warm
        in the cgroup), for its CPU cost: a victim that runs flat out keeps
        its CPU busy whatever the stream does, so the whole machine's CPU
        per GB is only the stream's own when the victim is not there.
        prepare() evicts the stream's files and removes its output; it runs
        before each of the --cpu-runs runs, outside the measurement.  Each run
        ends with a syncfs of sync_dir, so writeback the kernel alone would
        leave for later is counted too.  The stream is not pinned here, as
        a user runs it: pinned to one CPU, the library's engine thread
        would share its reader's CPU, and what dropping from the other CPU
        costs (TLB shootdowns, common/follow.h) would not show.  Returns
        the Meter's figures and the stream's seconds, summed over the
        runs, and the runs."""
        total = None
        for i in range(self.a.cpu_runs):
            prepare()
            m = Meter(self)
            m.start()
            stream_s = self._run_synced(variant, argv, env, "%s-cpu%d" % (tag, i), what, sync_dir)
            out = m.stop()
            out["stream_s"] = stream_s
            if total is None:
                total = out
            else:
                for k in ("machine_cpu_s", "bench_cpu_s", "kswapd_s", "stream_s", "seconds"):
                    total[k] += out[k]
        total["runs"] = self.a.cpu_runs
        if self.a.perf:
            total["perf"] = self.perf_shares(variant, argv, env, tag, what, sync_dir, prepare)
        return total

    def _run_synced(self, variant, argv, env, tag, what, sync_dir):
        """One run of the stream, then a syncfs of sync_dir; returns the
        stream's own seconds (the syncfs left out)."""
        t0 = time.monotonic()
        self.stream(variant, argv, env, tag, what, pinned=False)
        t1 = time.monotonic()
        subprocess.run(["sync", "-f", sync_dir])
        return t1 - t0

    def perf_shares(self, variant, argv, env, tag, what, sync_dir, prepare):
        """The stream --cpu-runs times more, under perf record -a -g:
        where the whole machine's busy CPU went (perf_report_shares()).
        Separate runs, as perf's own cost would weigh on the measured ones.
        The recording stays in --log-dir when one was given."""
        data = os.path.join(self.a.log_dir, tag + ".perf.data")
        perf = subprocess.Popen(["perf", "record", "-q", "-a", "-g", "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            time.sleep(1)           # perf opens its events before the first run
            for i in range(self.a.cpu_runs):
                prepare()
                self._run_synced(variant, argv, env, "%s-perf%d" % (tag, i), what, sync_dir)
        finally:
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=120)
        try:
            return perf_report_shares(data)
        finally:
            if self.own_logs:
                os.unlink(data)

    def start_daemon(self, variant, tag):
        """madvseqd on a private socket, its configuration covering only the
        scenario's cgroup; it is counted in the benchmark's CPU."""
        if variant != "daemon":
            return None
        hd = start_daemon(self.a, self.cg, os.path.join(self.a.log_dir, tag), False)
        self.acct.enter(hd[0].pid)
        return hd

    def stop_daemon(self, hd):
        stop_daemon(hd)

    def shim_stats(self, tag):
        st = {}
        for fn in os.listdir(self.a.log_dir):
            if fn.startswith(tag + ".") and fn.endswith(".madvseq-stats"):
                for line in open(os.path.join(self.a.log_dir, fn)):
                    k, _, v = line.strip().partition("=")
                    if k in ("regions", "bytes_dropped", "bytes_dropped_asked", "bytes_kept", "errors",
                             "read_files",
                             "read_bytes_advised", "read_bytes_kept", "read_bytes_written_behind"):
                        st[k] = st.get(k, 0) + int(v or 0)
                st["processes"] = st.get("processes", 0) + 1
        return st

    def kill_all(self):
        kill_procs(self.procs)
        self.procs = []

    def close(self):
        for smp in self.samplers:
            smp.stop()
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:       # cleanup goes on whatever failed
                log("cleanup: %s" % e)
        self.kill_all()
        for c in (self.iso, self.cg):
            if c:
                c.destroy()
        if self.acct:
            self.acct.destroy()
        if self.own_logs:
            subprocess.run(["rm", "-rf", self.a.log_dir])
        subprocess.run(["rm", "-rf", self.scratch])


def main_wrapper(a, name, body):
    """Runs body(h) with the harness, cleans up on exit, errors, Ctrl-C and
    SIGTERM; returns the exit status."""
    harness = []

    def work():
        harness.append(Harness(a, name))
        body(harness[0])

    def cleanup():
        for h in harness:
            h.close()
    return run_interruptible(work, cleanup)


# --------------------------------------------------------------------------
# Results and the report

# Self time of the routines that copy data (kernel and libc), and the
# entry points of reclaim (direct: memcg and global; kswapd), whose
# children-inclusive shares do not nest in one another.
COPY_SYMBOLS = ("_copy_to_iter", "_copy_from_iter", "copy_folio_from_iter_atomic", "rep_movs_alternative",
                "copy_user_enhanced_fast_string", "copy_user_generic_string", "copy_mc_enhanced_fast_string",
                "copy_page")
COPY_PREFIXES = ("__memmove_", "__memcpy_", "memcpy_")
RECLAIM_SYMBOLS = ("do_try_to_free_pages", "balance_pgdat")
# The parts of the machine's CPU a cache manager moves around, each a set
# of disjoint call roots (their callees included): what the kernel's
# reclaim does for the kernel alone, the managers' drops do for them (the
# invalidation of clean pages by fadvise, MADV_PAGEOUT/COLD, their
# process_madvise form); writeback a program starts (write-behind's
# sync_file_range) the flusher threads do otherwise.
CPU_PARTS = (
    ("reclaim", RECLAIM_SYMBOLS),
    ("drops", ("__x64_sys_fadvise64", "__x64_sys_madvise", "__x64_sys_process_madvise")),
    ("cachestat", ("__x64_sys_cachestat",)),
    ("wb_program", ("__x64_sys_sync_file_range",)),
    ("wb_flusher", ("wb_workfn",)),
)
# Whose own code (self samples): the library's and the daemon's.
OWN_DSOS = ("libmadvseq.so", "liburcu")


def perf_report_shares(data):
    """From a perf record -a -g file: {"busy": percent of samples outside
    the idle loop, "reclaim": percent of busy samples in reclaim (its
    callees included), "copy": percent of busy samples copying data, each
    CPU_PARTS name: percent of busy samples under its roots, "own": percent
    of busy samples in the library's code (any process), "madvseqd": in
    the daemon's process, kernel included}, or None when perf report gives
    nothing."""
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--children", "--sort", "sym",
                          "-g", "none", "--percent-limit", "0"], capture_output=True, text=True).stdout
    children, self_pct = {}, {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and f[0].endswith("%") and f[1].endswith("%") and f[2].startswith("["):
            children[f[3]] = float(f[0][:-1])
            self_pct[f[3]] = float(f[1][:-1])
    if not children:
        return None
    busy = 100.0 - children.get("do_idle", 0.0)
    if busy <= 0:
        return None
    copy = sum(v for k, v in self_pct.items() if k in COPY_SYMBOLS or k.startswith(COPY_PREFIXES))
    res = {"busy": busy, "copy": 100.0 * copy / busy}
    for name, roots in CPU_PARTS:
        res[name] = 100.0 * sum(children.get(k, 0.0) for k in roots) / busy
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "comm,dso",
                          "-g", "none", "--percent-limit", "0"], capture_output=True, text=True).stdout
    own = daemon = 0.0
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0].endswith("%"):
            comm, dso = f[1], " ".join(f[2:])
            if any(d in dso for d in OWN_DSOS):
                own += float(f[0][:-1])
            if comm == "madvseqd":
                daemon += float(f[0][:-1])
    res["own"] = 100.0 * own / busy
    res["madvseqd"] = 100.0 * daemon / busy
    return res


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    i = min(len(xs) - 1, max(0, int(round(q / 100.0 * len(xs) + 0.5)) - 1))
    return xs[i]


def _median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2.0


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _merge_counters(ds):
    out = {}
    for k, v in ds[0].items():
        if isinstance(v, dict):
            out[k] = _merge_counters([d.get(k) or {} for d in ds])
        elif _number(v):
            out[k] = _median([d.get(k) for d in ds])
        else:
            out[k] = v
    return out


def merge_reps(reps):
    """reps: one list of phase results per repetition, the same phases in
    the same order.  Returns one result per phase: the median of every
    figure over the repetitions; the samples (residency, cache peak, the
    picture) and the victim's bytes of the repetition in which the victim
    kept the least of its files, the stricter choice."""
    out = []
    for i in range(len(reps[0])):
        rs = [rep[i] for rep in reps]
        if len(rs) == 1 or any(r.get("skip") for r in rs):
            out.append(rs[0])
            continue
        least = min(rs, key=lambda r: residency(r.get("samples"), r.get("victim_bytes"))[0] or 0.0)
        m = dict(least)
        m["damon_least"] = (least.get("meter") or {}).get("damon_pageout")
        for k, v in rs[0].items():
            if k == "victim_bytes":
                continue
            if _number(v):
                m[k] = _median([r.get(k) for r in rs])
            elif k == "lat" and v:
                m[k] = tuple(_median([r[k][j] for r in rs if r.get(k)]) for j in range(len(v)))
            elif k in ("meter", "stream_alone") and v:
                m[k] = _merge_counters([r[k] for r in rs if r.get(k)])
        m["thr_reps"] = [r.get("victim_thr") for r in rs]
        out.append(m)
    return out


def repeated_phases(a, phase, kinds, odirect=True):
    """The whole sequence of phases, --reps times, interleaved: the victim
    alone, next to the O_DIRECT reference (when odirect), each of kinds in
    each of --variants, and alone again.  phase(kind, variant) runs one
    (kind None: the victim alone; "odirect": the reference).  Returns the
    reference's result (None without one) and, per kind, its results in
    report()'s order (alone, the variants, alone at the end), each merged
    over the repetitions (merge_reps)."""
    def logged(i, kind, v):
        # Every phase's raw result (samples included) in --log-dir, one
        # JSON line each, for a closer look than the tables give.
        r = phase(kind, v)
        with open(os.path.join(a.log_dir, "phases.jsonl"), "a") as f:
            f.write(json.dumps({"rep": i, "kind": kind, "result": r}, default=str) + "\n")
        return r

    def one_rep(i):
        if a.reps > 1:
            log("repetition %d of %d" % (i + 1, a.reps))
        a.rep = i               # in every phase's tag: its files are its own
        return [logged(i, None, "alone")] + ([logged(i, "odirect", "kernel")] if odirect else []) + \
            [logged(i, kind, v) for kind in kinds for v in a.variants] + [logged(i, None, "alone_end")]
    flat = merge_reps([one_rep(i) for i in range(a.reps)])
    first, nv = (2 if odirect else 1), len(a.variants)
    return (flat[1] if odirect else None,
            [(kind, [flat[0]] + flat[first + k * nv:first + (k + 1) * nv] + [flat[-1]])
             for k, kind in enumerate(kinds)])


def residency(samples, victim_bytes):
    """(least, last) fraction of the victim's files cached while streaming."""
    if not samples or not victim_bytes:
        return None, None
    return (min(s[1] for s in samples) / victim_bytes, samples[-1][1] / victim_bytes)


def _f(x, fmt=None):
    if x is None:
        return "-"
    if fmt is None:        # three significant digits at least
        fmt = "%.0f" if abs(x) >= 100 else "%.2f" if abs(x) >= 1 else "%.3f"
    return fmt % x


def _ratio(x, y):
    return x / y if x is not None and y else None


def table(title, head, rows):
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(head)]
    out = [title, "  ".join(str(h).rjust(w[i]) if i else str(h).ljust(w[i]) for i, h in enumerate(head))]
    for r in rows:
        out.append("  ".join(str(c).rjust(w[i]) if i else str(c).ljust(w[i]) for i, c in enumerate(r)))
    return out


def _rep_ratios(r, refs):
    """The victim's throughput in r over the best of refs (phase results),
    repetition by repetition: (median, [ratio per repetition]), or None
    without repetitions.  The machine's speed moves between repetitions
    (the stream phases of one ran at half the speed of the next one's);
    a ratio taken within each is what the other phases of the same
    repetition saw."""
    mine = r.get("thr_reps") or []
    theirs = [ref.get("thr_reps") or [] for ref in refs if ref]
    if len(mine) < 2 or not theirs or any(len(t) != len(mine) for t in theirs):
        return None
    xs = []
    for i, m in enumerate(mine):
        best = [t[i] for t in theirs if t[i]]
        xs.append(_ratio(m, max(best)) if best else None)
    if any(x is None for x in xs):
        return None
    return _median(xs), xs


def _judged(r, refs, fallback):
    """The figure a throughput verdict judges: the median of the ratios
    within repetitions when there are some, else `fallback`; and the text
    that shows them."""
    rr = _rep_ratios(r, refs)
    if rr is None:
        return fallback, ""
    return rr[0], "; median of the repetitions' own ratios %s" % ", ".join("%.2f" % x for x in rr[1])


def report(res, victim_unit, lat_unit="us", thr_target=None, odirect=None, note=None):
    """res: list of phase results (dicts) with keys variant, skip,
    victim_thr, lat (p50, p99, p999), victim_bytes, samples, stream_bytes,
    stream_s, meter.  The 'alone' row is the victim's reference; the
    'kernel' row the stream's.  thr_target: (ratio, what) judged against
    alone; odirect: the phase result of the victim next to an O_DIRECT
    stream of the same bytes, the reference of what any stream costs it."""
    P = []
    by = {r["variant"]: r for r in res}
    # The victim alone is measured first and last: on a machine whose load
    # moves, one of the two can be far off.  The faster one is the
    # reference, which makes the "x alone" targets the harder to meet.
    alones = [r for r in res if r["variant"] in ALONE and not r.get("skip") and r.get("victim_thr")]
    alone = max(alones, key=lambda r: r["victim_thr"]) if alones else None
    kern = by.get("kernel")
    ok = [r for r in res if not r.get("skip")]
    rows = []
    # The O_DIRECT reference is a row of the victim's table only.
    vres = res[:-1] + [dict(odirect, variant="odirect")] + res[-1:] if odirect else res
    for r in vres:
        if r.get("skip"):
            rows.append([LABELS.get(r["variant"], r["variant"])] + ["skipped: " + r["skip"]] + [""] * 8)
            continue
        rmin, rend = residency(r.get("samples"), r.get("victim_bytes"))
        lat = r.get("lat") or (None, None, None)
        rows.append([LABELS.get(r["variant"], r["variant"]), _f(r.get("victim_thr")),
                     _f(_ratio(r.get("victim_thr"), alone and alone.get("victim_thr")), "%.3f"),
                     _f(lat[0]), _f(lat[1]), _f(lat[2]),
                     _f(_ratio(lat[1], alone and alone["lat"][1]), "%.2f"),
                     _f(rmin and 100 * rmin, "%.1f%%"), _f(rend and 100 * rend, "%.1f%%"),
                     fmt_bytes(r["samples"][-1][3]) if r.get("samples") else "-"])
    reps = max(len(r.get("thr_reps") or [1]) for r in res)
    if reps > 1:
        for row, r in zip(rows, vres):
            xs = [_ratio(t, alone and alone.get("victim_thr")) for t in r.get("thr_reps") or []]
            xs = [x for x in xs if x is not None]
            row.insert(3, "%.2f-%.2f" % (min(xs), max(xs)) if xs else "")
    P += table("victim (%s; latency %s)%s" % (
        victim_unit, lat_unit, "; medians of %d repetitions, residency and cache from the one in "
        "which the victim kept least" % reps if reps > 1 else ""),
               ["variant", victim_unit, "x alone"] + (["range"] if reps > 1 else []) +
               ["p50", "p99", "p99.9", "p99 x alone", "res. min", "res. end", "cg cache end"], rows)
    P.append("")
    rows = []
    for r in ok:
        if r["variant"] in ALONE:
            continue
        m = r["meter"]
        gb = r["stream_bytes"] / 1e9 if r.get("stream_bytes") else None
        mbs = r["stream_bytes"] / r["stream_s"] / 1e6 if gb and r.get("stream_s") else None
        kmbs = kern["stream_bytes"] / kern["stream_s"] / 1e6 if kern and not kern.get("skip") else None
        r["_mbs"], r["_gb"] = mbs, gb
        r["_mcpu"] = m["machine_cpu_s"] / gb if gb else None
        r["_bcpu"] = m["bench_cpu_s"] / gb if gb else None
        sa = r.get("stream_alone")
        # Bytes of one run (pg_backup's output can differ from the
        # phase's), times the runs.
        agb = r.get("stream_alone_bytes", r.get("stream_bytes") or 0) / 1e9 * (sa or {}).get("runs", 1)
        r["_acpu"] = sa["machine_cpu_s"] / agb if agb and sa else None
        peak = max(s[2] for s in r["samples"]) if r.get("samples") else None
        rows.append([LABELS[r["variant"]], _f(gb, "%.2f"), _f(r.get("stream_s"), "%.1f"), _f(mbs),
                     _f(_ratio(mbs, kmbs), "%.3f"), fmt_bytes(peak),
                     _f(r["_mcpu"], "%.3f"), _f(r["_bcpu"], "%.3f"), _f(m["kswapd_s"], "%.2f"),
                     _f(sa and sa["stream_s"], "%.1f"), _f(r["_acpu"], "%.3f"),
                     _f(sa and sa["kswapd_s"], "%.2f")])
    kb = kern.get("_bcpu") if kern else None
    km = kern.get("_mcpu") if kern else None
    ka = kern.get("_acpu") if kern else None
    kp = (kern.get("stream_alone") or {}).get("perf") if kern else None
    for row, r in zip(rows, [r for r in ok if r["variant"] not in ALONE]):
        row.insert(7, _f(_ratio(r["_mcpu"], km), "%.2f"))
        row.insert(9, _f(_ratio(r["_bcpu"], kb), "%.2f"))
        row.insert(13, _f(_ratio(r["_acpu"], ka), "%.2f"))
    P += table("stream (CPU-s/GB: machine = /proc/stat, all processes and kernel threads; "
               "bench = the benchmark's processes + madvseqd + kswapd; alone = the stream "
               "again without its victim, %d runs from cold files, machine CPU up to a syncfs)"
               % max([(r.get("stream_alone") or {}).get("runs", 0) for r in ok] + [0]),
               ["variant", "GB", "s", "MB/s", "x kernel", "strm cache peak", "machine CPU-s/GB",
                "x kernel", "bench CPU-s/GB", "x kernel", "kswapd s", "alone s", "alone CPU-s/GB",
                "x kernel", "alone kswapd s"], rows)
    prows = []
    for r in ok:
        sp = (r.get("stream_alone") or {}).get("perf")
        if sp and r.get("_acpu"):
            prows.append([LABELS[r["variant"]], "%.1f%%" % sp["reclaim"], "%.0f%%" % sp["copy"],
                          "%.3f" % (r["_acpu"] * sp["reclaim"] / 100), "%.3f" % (r["_acpu"] * sp["copy"] / 100)])
    if prows:
        P.append("")
        P += table("where the stream's CPU went (--perf: each stream's alone runs once more, under perf "
                   "record -a -g; shares of the machine's busy samples; CPU-s/GB = share x alone "
                   "CPU-s/GB; reclaim = do_try_to_free_pages and kswapd's balance_pgdat with what "
                   "they call)",
                   ["variant", "reclaim", "copying data", "reclaim CPU-s/GB", "copying CPU-s/GB"], prows)
    P.append("")
    rows = []
    damon = any(r["meter"].get("damon_pageout") is not None for r in ok)
    for r in ok:
        vm, ms = r["meter"]["vmstat"], r["meter"]["memstat"]
        rows.append([LABELS[r["variant"]], _f(r["meter"]["seconds"], "%.1f")] +
                    [_f(vm[k], "%d") for k in ("pgmajfault", "pgscan", "pgsteal", "refault_file", "refault_anon")] +
                    ([fmt_bytes(r["meter"].get("damon_pageout") or 0)] if damon else []) +
                    [_f(ms.get(k), "%d") for k in ("pgmajfault", "pgscan", "pgsteal", "refault_file", "refault_anon")])
    P += table("reclaim: /proc/vmstat deltas (whole machine) | memory.stat deltas (the benchmark's cgroups)" +
               ("; DAMON pageout: what the machine's DAMON pageout scheme paged out meanwhile (no pgscan "
                "shows it; medians)" if damon else ""),
               ["variant", "s", "pgmajfault", "pgscan", "pgsteal", "wsrefault file", "wsrefault anon"] +
               (["DAMON pageout"] if damon else []) +
               ["| cg pgmajfault", "cg pgscan", "cg pgsteal", "cg wsref file", "cg wsref anon"], rows)
    for r in ok:
        for key, who in (("shim_stats", ""), ("server_stats", " (server)")):
            st = r.get(key)
            if not st:
                continue
            P.append("  %s MADVSEQ_STATS%s: %d process(es); %d read()/write() stream(s): dropped %s, "
                     "kept %s, written behind %s; %d region(s): dropped %s, kept %s; %d errors "
                     "(processes killed at the end write none)" % (
                         LABELS[r["variant"]], who, st.get("processes", 0), st.get("read_files", 0),
                         fmt_bytes(st.get("read_bytes_advised", 0)), fmt_bytes(st.get("read_bytes_kept", 0)),
                         fmt_bytes(st.get("read_bytes_written_behind", 0)),
                         st.get("regions", 0), fmt_bytes(st.get("bytes_dropped", 0)),
                         fmt_bytes(st.get("bytes_kept", 0)), st.get("errors", 0)))
    if note:
        P.append(note)
    P.append("")
    # Verdicts
    if alone:
        P.append("reference: %s %s %s, p99 %s %s; kernel alone with the stream %s %s (%s x alone)" % (
            LABELS[alone["variant"]], _f(alone.get("victim_thr")), victim_unit, _f(alone["lat"][1], "%.1f"), lat_unit,
            _f(kern.get("victim_thr")) if kern else "-", victim_unit,
            _f(_ratio(kern.get("victim_thr"), alone.get("victim_thr")), "%.3f") if kern else "-"))
    for r in ok:
        if r["variant"] not in ("shim", "daemon"):
            continue
        L = LABELS[r["variant"]]
        V = []
        rmin, _ = residency(r.get("samples"), r.get("victim_bytes"))
        if rmin is not None:
            dn = r.get("damon_least", (r.get("meter") or {}).get("damon_pageout"))
            V.append((rmin >= TARGETS["resident"], "%s: victim's working set resident, least = %.3f (target >= %.2f%s)"
                      % (L, rmin, TARGETS["resident"],
                         "; DAMON paged out %s machine-wide during that phase" % fmt_bytes(dn) if dn else "")))
        x = _ratio(r["lat"][1] if r.get("lat") else None, alone and alone["lat"][1])
        if x is not None:
            xo = _ratio(odirect["lat"][1], alone["lat"][1]) if odirect and odirect.get("lat") else None
            V.append((x <= TARGETS["p99_vs_alone"], "%s: victim p99 / alone = %.2f (target <= %.1f%s)"
                      % (L, x, TARGETS["p99_vs_alone"],
                         "; next to the O_DIRECT stream: %.2f" % xo if xo is not None else "")))
        if thr_target and alone:
            x, how = _judged(r, alones, _ratio(r.get("victim_thr"), alone.get("victim_thr")))
            if x is not None:
                kx = _judged(kern, alones, _ratio(kern.get("victim_thr"), alone.get("victim_thr")))[0] \
                    if kern else None
                V.append((x >= thr_target[0], "%s: %s during the stream / alone = %.3f (target >= %.2f; kernel alone %s%s)"
                          % (L, thr_target[1], x, thr_target[0], _f(kx, "%.3f"), how)))
        if odirect:
            x, how = _judged(r, [odirect], _ratio(r.get("victim_thr"), odirect.get("victim_thr")))
            if x is not None:
                V.append((x >= TARGETS["thr_vs_odirect"], "%s: victim throughput / next to O_DIRECT stream = %.3f (target >= %.2f%s)"
                          % (L, x, TARGETS["thr_vs_odirect"], how)))
        x = _ratio(r.get("_mbs"), kern and kern.get("_mbs"))
        if x is not None:
            V.append((x >= TARGETS["stream_vs_kernel"], "%s: stream MB/s / kernel alone = %.3f (target >= %.2f)"
                      % (L, x, TARGETS["stream_vs_kernel"])))
        x = _ratio(r.get("_acpu"), ka)
        if x is not None:
            V.append((x <= TARGETS["cpu_vs_kernel"],
                      "%s: machine CPU per GB streamed, stream without its victim / kernel alone = "
                      "%.2f (target <= %.1f; with the victim running: %s%s)" % (
                          L, x, TARGETS["cpu_vs_kernel"], _f(_ratio(r.get("_mcpu"), km), "%.2f"),
                          "; the kernel alone's reclaim: %.1f%% of its busy CPU" % kp["reclaim"]
                          if kp else "")))
        else:
            x = _ratio(r.get("_mcpu"), km)
            if x is not None:
                V.append((x <= TARGETS["cpu_vs_kernel"],
                          "%s: machine CPU per GB streamed / kernel alone = %.2f (target <= %.1f; "
                          "benchmark's own processes + kswapd: %s)" % (
                              L, x, TARGETS["cpu_vs_kernel"], _f(_ratio(r.get("_bcpu"), kb), "%.2f"))))
        for good, text in V:
            P.append("%s  %s" % ("PASS" if good else "MISS", text))
    print("\n".join(P), flush=True)
    return P


# --------------------------------------------------------------------------
# The picture

def plot(res, path, title, victim_unit, stall_s=10.0):
    """One column per variant: the victim's throughput over time above, the
    scenario's page cache split into victim / stream / other below.
    stall_s: after that long without progress the throughput drops to 0
    (infinite for a victim whose unit of progress takes longer)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("no matplotlib (apt-get install python3-matplotlib): no picture")
        return
    rs = [r for r in res if not r.get("skip") and r.get("samples")]
    if not rs:
        return
    n = len(rs)
    fig, ax = plt.subplots(2, n, figsize=(3.2 * n + 0.8, 5.6), sharex="col", squeeze=False,
                           gridspec_kw={"height_ratios": [1, 1.3]})
    ymax_thr = 0
    ymax_c = max(max(s[3] for s in r["samples"]) for r in rs) / MiB * 1.1 or 1
    for r in rs:
        thr = _rates(r["samples"], longest=stall_s)
        if thr:
            # An outlier must not flatten every other panel.
            ymax_thr = max(ymax_thr, pct([v for _, v in thr], 98))
    for i, r in enumerate(rs):
        s = r["samples"]
        t = [x[0] for x in s]
        thr = _rates(s, longest=stall_s)
        a0, a1 = ax[0][i], ax[1][i]
        if thr:
            a0.plot([x for x, _ in thr], [v for _, v in thr], color="tab:blue", lw=1)
        a0.set_ylim(0, ymax_thr * 1.25 or 1)
        a0.set_title(LABELS.get(r["variant"], r["variant"]), fontsize=10)
        a0.grid(alpha=0.3)
        vic = [x[1] / MiB for x in s]
        strm = [x[2] / MiB for x in s]
        oth = [max(0.0, (x[3] - x[1] - x[2]) / MiB) for x in s]
        a1.stackplot(t, vic, strm, oth, colors=["tab:green", "tab:red", "lightgray"],
                     labels=["victim's files", "stream's files", "other"])
        a1.set_ylim(0, ymax_c)
        a1.set_xlabel("seconds")
        a1.grid(alpha=0.3)
        if i == 0:
            a0.set_ylabel(victim_unit)
            a1.set_ylabel("page cache, MiB")
    ax[1][0].legend(loc="upper left", fontsize=7, framealpha=0.8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    log("picture: %s" % path)


def _rates(samples, window=1.0, longest=10.0):
    """Victim operations per second as steps over windows of at least
    `window` seconds that end where the progress counter moved: victims
    report progress in batches (the anonymous-memory program once per
    round), and rates between single samples would be spikes and zeros.  A
    window closes after `longest` seconds without progress, so a stall shows."""
    out = []
    prev = None
    for t, _, _, _, p in samples:
        if p is None:
            continue
        if prev is None:
            prev = (t, p)
            continue
        dt = t - prev[0]
        if dt >= window and (p != prev[1] or dt >= longest):
            r = (p - prev[1]) / dt
            out += [(prev[0], r), (t, r)]
            prev = (t, p)
    return out
