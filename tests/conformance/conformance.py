# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the conformance harnesses share: a scratch directory on a disk
filesystem, the environments a program runs in with and without the shim,
and a madvseqd on a private socket.

A program under test must see the environment it would see without us:
the variables meson sets for its own tests (PYTHONPATH, MALLOC_PERTURB_,
the project's MADVSEQ_*) are not passed on to it, in either run."""

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "preload"))

from msqtest import TMPFS_MAGIC, _fs_type, skip  # noqa: E402

# Read modes of the shim every harness runs, and the name of the run
# without it.
PLAIN = "plain"
READ_MODES = ("off", "advised", "all")

# Variables of the test runner that the programs under test must not see.
_RUNNER_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "MALLOC_PERTURB_", "LD_PRELOAD",
                "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "MESON_TEST_ITERATION")


def scratch(name):
    """A fresh directory for this run under MADVSEQ_TEST_DIR (the build
    directory in meson), never tmpfs: the shim's drops need a disk file."""
    base = os.environ.get("MADVSEQ_TEST_DIR") or os.getcwd()
    if _fs_type(base) == TMPFS_MAGIC:
        skip("%s is tmpfs; set MADVSEQ_TEST_DIR to a disk filesystem" % base)
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix="conformance-%s-" % name, dir=base)


def preload():
    """The LD_PRELOAD value that loads the shim: MADVSEQ_PRELOAD (sanitizer
    runtimes first, in the ASan build) or MADVSEQ_LIB."""
    chain = os.environ.get("MADVSEQ_PRELOAD") or os.environ.get("MADVSEQ_LIB")
    if not chain:
        skip("neither MADVSEQ_PRELOAD nor MADVSEQ_LIB names the built libmadvseq.so")
    for part in chain.split(":"):
        if not os.path.exists(part):
            skip("%s (in the preload chain) does not exist" % part)
    return chain


def sanitized():
    return "libasan" in (os.environ.get("MADVSEQ_PRELOAD") or "")


def plain_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in _RUNNER_VARS and not k.startswith("MADVSEQ")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def shim_env(read_mode, stats=None, socket=None, **extra):
    """The environment of a run under the shim.  Without a socket, the
    shim is pointed at a path where no daemon listens, so that it runs its
    engine in-process (and never talks to a system-wide daemon)."""
    env = plain_env(**extra)
    env["LD_PRELOAD"] = preload()
    env["MADVSEQ_READ"] = read_mode
    env["MADVSEQ_SOCKET"] = socket or "/nonexistent/madvseq-conformance.sock"
    if stats:
        env["MADVSEQ_STATS"] = stats
    if sanitized():
        # Programs nobody here wrote leak at exit by design; and the report
        # of an error must end the program where it happened.
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0:abort_on_error=1"
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    return env


def need(*programs):
    """Skips (77) naming the first program not on PATH."""
    for p in programs:
        if not shutil.which(p):
            skip("%s is not installed (scripts/deps.sh installs it)" % p)


_daemons = []


@atexit.register
def _no_daemon_left():
    for d in _daemons:
        d.kill()


class Daemon:
    """madvseqd on a socket of its own in dir; MADVSEQD and MADVSEQCTL name
    the built programs.  conf: the configuration file's text."""

    def __init__(self, dir, conf="[/*]\nmode = pageout\nread = all\n"):
        for var in ("MADVSEQD", "MADVSEQCTL"):
            if not os.path.exists(os.environ.get(var, "")):
                skip("%s does not name a built program" % var)
        if os.geteuid() != 0:
            skip("madvseqd needs root")
        self.sock = os.path.join(dir, "madvseqd.sock")
        self.conf = os.path.join(dir, "madvseqd.conf")
        self.log = os.path.join(dir, "madvseqd.log")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.logf = open(self.log, "w")
        # The project's own program, not one under test: it gets the test
        # runner's environment (the sanitizer options of the ASan build),
        # without the preload.
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        self.p = subprocess.Popen([os.environ["MADVSEQD"], "-s", self.sock, "-c", self.conf],
                                  env=env, stdout=self.logf, stderr=self.logf)
        _daemons.append(self)
        for _ in range(400):
            if os.path.exists(self.sock) and self.ctl("status").returncode == 0:
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.025)
        self.kill()
        raise SystemExit("FAIL: madvseqd did not start:\n" + open(self.log).read())

    def ctl(self, *args):
        return subprocess.run([os.environ["MADVSEQCTL"], "-s", self.sock] + list(args),
                              env=plain_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=30)

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        """SIGTERM; returns a problem ('' if it exited cleanly)."""
        if self.p.poll() is not None:
            return "madvseqd died during the run (status %d)" % self.p.returncode
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()
            return "madvseqd did not exit on SIGTERM"
        self.logf.close()
        if self.p.returncode != 0:
            return "madvseqd exited with status %d" % self.p.returncode
        log = open(self.log, errors="replace").read()
        if "AddressSanitizer" in log or "runtime error:" in log:
            return "sanitizer report in madvseqd's log"
        return ""

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def stats_dir(wd):
    """A directory for MADVSEQ_STATS files that every user may write in:
    programs under test drop privileges (test_subprocess runs children as
    nobody), and a stats file they cannot write puts a warning on their
    stderr that the run without the shim does not have."""
    d = os.path.join(wd, "stats")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o1777)
    os.chmod(wd, 0o755)
    return os.path.join(d, "msq.%p")


def stats_files(pattern):
    """The stats files the shim wrote for MADVSEQ_STATS=pattern (%p: pid)."""
    d, base = os.path.split(pattern)
    prefix = base.split("%p")[0]
    try:
        return [os.path.join(d, n) for n in os.listdir(d) if n.startswith(prefix)]
    except FileNotFoundError:
        return []


def stats_totals(pattern):
    """The sums over those files: processes, regions, bytes_dropped,
    read_files, read_bytes_advised (what the shim did in the run)."""
    tot = {"processes": 0, "regions": 0, "bytes_dropped": 0, "read_files": 0,
           "read_bytes_advised": 0}
    for path in stats_files(pattern):
        tot["processes"] += 1
        try:
            # (its file= lines end with file names, which are bytes)
            for line in open(path, errors="replace"):
                k, _, v = line.strip().partition("=")
                if k in tot and v.isdigit():
                    tot[k] += int(v)
        except OSError:
            pass
    return tot


def fmt_totals(t):
    return ("%d processes wrote shim stats: %d mapped regions tracked, %d MiB dropped; "
            "%d read() streams managed, %d MiB advised away"
            % (t["processes"], t["regions"], t["bytes_dropped"] >> 20, t["read_files"],
               t["read_bytes_advised"] >> 20))
