#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""madvseqd tests: test_daemon.py CASE.  Exit 0 pass, 1 fail, 77 skip.

Cases run the real daemon (its own socket in a scratch directory on a disk
filesystem, killed at the end) against real programs: shimmed streamers, a
static streamer found through smaps, hostile clients.  Config resolution
runs against the fixture /proc and cgroupfs trees in tests/fixtures."""

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from msqtest import (M, SLOWDOWN, Cgroup, Monitor, Workdir, cached, cached_map, check, done, evict,
                     marked_in_use, plain_env, rate, shim_env, skip)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")
CONTRIB = os.path.join(os.path.dirname(os.path.dirname(HERE)), "contrib")


def tool(var):
    p = os.environ.get(var)
    if not p or not os.path.exists(p):
        skip("%s does not name a built program" % var)
    return p


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def need_root():
    if os.geteuid() != 0:
        skip("the daemon tests need root (process_madvise on other processes, cgroups)")


_started = []


@atexit.register
def _no_daemon_left():
    """A test that ends early (a skip, a failed start, an exception) leaves
    no daemon behind."""
    for p in _started:
        if p.poll() is None:
            p.kill()
            p.wait()


_sandbox = []


def unit_sandbox_prefix():
    """The command prefix that applies madvseqd.service's seccomp filter and
    capability bounding set (daemon-sandbox, from unit_sandbox.py)."""
    if not _sandbox:
        import platform
        import unit_sandbox
        if platform.machine() != "x86_64":
            skip("the unit's filter is emulated for x86-64 only")
        if not shutil.which("systemd-analyze"):
            skip("systemd-analyze (the unit's system call groups) not installed")
        unit = os.environ.get("MADVSEQD_UNIT")
        if not unit or not os.path.exists(unit):
            skip("MADVSEQD_UNIT does not name the generated unit")
        cmd, unknown = unit_sandbox.prefix(unit, tool("SANDBOX"))
        if unknown:
            print("the unit's filter names calls unknown here (refused, as systemd would): %s"
                  % " ".join(unknown))
        print("under the unit's sandbox: %d system calls allowed; %s; not applied here: %s"
              % (cmd[2].count(",") + 1, " ".join(cmd[3:-1]), " ".join(unit_sandbox.not_applied(unit))))
        _sandbox.extend(cmd)
    return list(_sandbox)


class Daemon:
    """A madvseqd on its own socket, with its own configuration."""

    def __init__(self, wd, conf, name="d", args=(), prefix=(), env=None):
        self.dir = wd
        self.sock = os.path.join(wd, name + ".sock")
        self.conf = os.path.join(wd, name + ".conf")
        self.log = os.path.join(wd, name + ".log")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.sandboxed = os.environ.get("MADVSEQD_SANDBOX") == "unit"
        if self.sandboxed:
            # Innermost, right before the daemon: what wraps it (strace,
            # fiu-run) works as it does for the unit's ExecStart, outside.
            prefix = list(prefix) + unit_sandbox_prefix()
        # MADVSEQ_STRACE=DIR: every daemon runs under strace, its file
        # system calls logged to DIR (see the attack cases).
        trace = os.environ.get("MADVSEQ_STRACE")
        self.traced = bool(trace) and not any("strace" in a for a in prefix)
        if self.traced:
            prefix = ["strace", "-f", "-qq", "-e", "trace=%file,openat2,statfs", "-o",
                      os.path.join(trace, "%s-%s-%d.log" % (os.path.basename(wd), name, os.getpid()))] + list(prefix)
        self.traced = self.traced or any("strace" in a for a in prefix)
        if self.traced:
            # LeakSanitizer cannot run under ptrace, and aborts at exit.
            self.env = dict(env or plain_env())
            self.env["ASAN_OPTIONS"] = (self.env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
        self.cmd = list(prefix) + [tool("MADVSEQD"), "-s", self.sock, "-c", self.conf, "-l", "debug"] + list(args)
        self.env = getattr(self, "env", None) or env or plain_env()
        if prefix:
            # fiu-run preloads its library ahead of a sanitizer runtime, and
            # that library keeps a string for good (not ours to report).
            self.env["ASAN_OPTIONS"] = (self.env.get("ASAN_OPTIONS", "") +
                                        ":verify_asan_link_order=0").lstrip(":")
            supp = os.path.join(wd, "lsan.supp")
            with open(supp, "w") as f:
                f.write("leak:fiu_run_preload.so\n")
            self.env["LSAN_OPTIONS"] = "suppressions=" + supp
        if self.sandboxed:
            # LeakSanitizer stops the process with ptrace to scan it, which
            # the filter refuses (@system-service has no ptrace): it would
            # abort at exit.  Leaks are checked in the unsandboxed runs.
            self.env["ASAN_OPTIONS"] = (self.env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
        self.p = None
        self.start()

    def start(self):
        self.logf = open(self.log, "a")
        self.p = subprocess.Popen(self.cmd, env=self.env, stdout=self.logf, stderr=self.logf)
        _started.append(self.p)
        for _ in range(200):
            if os.path.exists(self.sock) and self.ctl("status", check_rc=False).returncode == 0:
                if self.sandboxed:
                    st = open("/proc/%d/status" % self.pid).read()
                    if not re.search(r"^Seccomp:\s+2$", st, re.M):
                        raise SystemExit("FAIL: the daemon runs without the unit's seccomp filter")
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.025)
        print(open(self.log).read())
        raise SystemExit("FAIL: the daemon did not start")

    def ctl(self, *args, check_rc=True):
        p = subprocess.run([tool("MADVSEQCTL"), "-s", self.sock] + list(args), env=plain_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        if check_rc and p.returncode != 0:
            print("madvseqctl %s failed: %s" % (" ".join(args), p.stderr))
        return p

    def status(self):
        return self.ctl("status").stdout

    def metric(self, name, labels=""):
        for _ in range(5):  # injected socket faults may cut a query short
            out = self.ctl("stats", "--format=prometheus", check_rc=False).stdout
            m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), out, re.M)
            if m:
                return float(m.group(1))
        return None

    def metric_sum(self, name):
        """A metric's sum over all its labels (0 when it has none yet)."""
        out = self.ctl("stats", "--format=prometheus", check_rc=False).stdout
        return sum(float(v) for v in re.findall(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name), out, re.M))

    def alive(self):
        return self.p.poll() is None

    def kill9(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    @property
    def pid(self):
        """The daemon's own pid (under strace -f, strace's child)."""
        return daemon_pid(self.p) if self.traced else self.p.pid

    def stop(self):
        """SIGTERM; a crash or a sanitizer report fails the test."""
        if self.p.poll() is None:
            if self.traced:
                os.kill(self.pid, signal.SIGTERM)  # (strace would not pass it on)
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                check(False, "daemon exits on SIGTERM")
                return
        # (a daemon that died before is caught here too)
        check(self.p.returncode != -signal.SIGSYS, "daemon was not killed by a seccomp filter (SIGSYS)")
        check(self.p.returncode == 0, "daemon exits cleanly (status %d)" % self.p.returncode)
        self.logf.close()
        log = open(self.log).read()
        check("AddressSanitizer" not in log and "runtime error:" not in log,
              "no sanitizer report in the daemon's log")

    def dump_log(self, lines=60):
        print("--- daemon log (tail) ---")
        print("\n".join(open(self.log).read().splitlines()[-lines:]))


def own_memory_cgroup():
    for line in open("/proc/self/cgroup"):
        _, ctrls, path = line.rstrip("\n").split(":", 2)
        if "memory" in ctrls.split(","):
            return path
    for line in open("/proc/self/cgroup"):
        if line.startswith("0::"):
            return line[3:].rstrip("\n")
    return "/"


def cg_glob(cg):
    """The daemon's name for a test cgroup (relative to the controller root)."""
    base = "/sys/fs/cgroup/memory" if not cg.v2 else "/sys/fs/cgroup"
    return cg.path[len(base):] or "/"


def stream(cmd, env, cg=None):
    return subprocess.Popen((cg.prefix() if cg else []) + cmd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def checksum(out):
    m = re.search(r"sum=([0-9a-f]+)", out)
    return m.group(1) if m else None


def baseline(data):
    p = subprocess.run([tool("STREAMER"), data], env=plain_env(), stdout=subprocess.PIPE, text=True)
    return checksum(p.stdout)


# --------------------------------------------------------------------------
# Configuration against fixture trees (no root, no daemon process).

def case_fixture(layout):
    d = os.path.join(FIXTURES, layout)
    conf = os.path.join(CONTRIB, "madvseqd.conf")
    want = {
        "v1": {
            "100": ["cgroup /batch.slice/job1 (v1)", "section /batch.slice/*",
                    "discover=yes", "pressure=80%", "limit 1073741824", "gate open"],
            "101": ["cgroup /user.slice/user-1000.slice (v1)", "section /user.slice/*",
                    "mode=cold lag=64M", "psi_some_avg10 7.50", "gate open"],
            "102": ["cgroup /batch.slice/job3 (v1)", "gate closed", "kernel drop-behind absent"],
        },
        "v2": {
            "200": ["cgroup /system.slice/postgresql@15.service (v2)",
                    "section /system.slice/postgresql*.service", "mode=off", "limit 2147483648",
                    "kernel drop-behind off"],
            # batch.slice has the kernel's per-cgroup switch on, job2 off:
            # inherited; postgresql's is off everywhere (sysctl absent)
            "201": ["cgroup /batch.slice/job2 (v2)", "section /batch.slice/*",
                    "limit 536870912", "gate open",
                    "kernel drop-behind on (memory.seq_read_dropbehind)"],
            "202": ["cgroup /user.slice/user-1000.slice/session-3.scope (v2)",
                    "mode=cold", "psi_some_avg10 12.25", "gate open"],
        },
    }[layout]
    for pid, expect in sorted(want.items()):
        p = subprocess.run([tool("MADVSEQD"), "--proc-root", d + "/proc", "--cgroup-root",
                            d + "/cgroup", "-c", conf, "--resolve", pid],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w in expect:
            check(w in p.stdout, "%s pid %s: '%s'" % (layout, pid, w))
        if any(w not in p.stdout for w in expect):
            print(p.stdout, p.stderr)
    done()


def case_check_config():
    d = tool("MADVSEQD")
    p = subprocess.run([d, "--check-config", os.path.join(CONTRIB, "madvseqd.conf")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == 0, "the shipped example is valid")
    check("[/batch.slice/*]" in p.stdout and "discover=yes" in p.stdout and "pressure=80%" in p.stdout,
          "--check-config prints each section's effective policy")
    bad = {
        "bad-mode.conf": ":7: mode: 'fast'",
        "bad-section.conf": ":4: section [batch]",
        "bad-syntax.conf": ":3: not a 'key = value' line",
        "bad-lag.conf": ":2: lag: '1M'",
        "bad-pressure.conf": ":2: pressure: '120%'",
        # libinih would cut the name to 49 characters and match other cgroups
        "bad-long-section.conf": ":4: section name longer than 49 characters",
        "bad-trigger.conf": ":2: discover_trigger: 'lots'",
        # (these made --check-config segfault, or named another line or cause)
        "bad-key-before-section.conf": ":1: key 'mode' before any section",
        "bad-open-section.conf": ":1: section name not closed by ']'",
        "bad-unterminated.conf": ":5: section name not closed by ']'",
        "bad-empty-section.conf": ":3: empty section name",
        # (inih took these silently: a second value for mode, text ignored)
        "bad-continuation.conf": ":3: indented line after a key",
        "bad-after-section.conf": ":1: text after the section name's ']': 'mode = off'",
        # a label's keys never fall to the section before it
        "bad-label-repeat.conf": ":7: section [big] is neither",
        "bad-socket.conf": ":2: socket: 'run/madvseqd.sock'",
        "bad-max-clients.conf": ":2: max_clients: '0'",
        "bad-interval.conf": ":2: interval: '2h'",
        "bad-log-level.conf": ":4: log_level: 'chatty'",
    }
    for f, w in sorted(bad.items()):
        path = os.path.join(FIXTURES, "conf", f)
        p = subprocess.run([d, "--check-config", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        check(p.returncode == 1 and (path + w) in p.stderr, "%s rejected with file and line (%s)"
              % (f, p.stderr.strip()))
    with tempfile.TemporaryDirectory() as t:
        nul = os.path.join(t, "nul.conf")
        open(nul, "wb").write(b"[/*]\nmode = pageout\nlag = 32\0M\n")
        long_line = os.path.join(t, "long.conf")
        open(long_line, "w").write("[/*]\n; %s\nmode = off\n" % ("x" * 300))
        for path, w in ((nul, ":3: NUL byte"), (long_line, ":2: line longer than"),
                        (t, ": is a directory")):
            p = subprocess.run([d, "--check-config", path], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
            check(p.returncode == 1 and (path + w) in p.stderr, "%s rejected (%s)"
                  % (os.path.basename(path), p.stderr.strip()))
    p = subprocess.run([d, "--check-config", "/nonexistent/madvseqd.conf"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    check(p.returncode == 1 and "No such file" in p.stderr, "a missing file is an error")
    done()


def mutate(rng, texts):
    """One malformed (or, now and then, still valid) configuration from the
    seeds: bytes flipped, inserted or cut, lines dropped, doubled, swapped
    or indented, tokens the parser cares about thrown in, seeds spliced."""
    tokens = [b"[", b"]", b"[/*", b"[]", b"=", b":", b";", b"#", b"\n", b"\0", b"\r", b" ", b"\t",
              b"\xef\xbb\xbf", b"[daemon]", b"match = ", b"mode = ", b"lag = 99999999999T",
              b"x" * 300, b"*" * 60, b"%", b"-1", b"1e308", b"nan", b"\xff\xfe"]
    data = bytearray(rng.choice(texts))
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(8)
        pos = rng.randint(0, len(data))
        if op == 0 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif op == 1:
            data[pos:pos] = rng.choice(tokens)
        elif op == 2:
            del data[pos:pos + rng.randint(1, 40)]
        elif op in (3, 4, 5):
            lines = bytes(data).split(b"\n")
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            if op == 3:
                del lines[i]
            elif op == 4:
                lines.insert(j, lines[i])
            else:
                lines[i] = b"  " + lines[i]
            data = bytearray(b"\n".join(lines))
        elif op == 6:
            other = rng.choice(texts)
            cut = rng.randint(0, len(other))
            data = data[:pos] + bytearray(other[cut:])
        else:
            data = data[:pos]
    return bytes(data)


def case_check_config_mutated():
    """--check-config on a few thousand mutations of the seed configurations
    (the fuzzer's, tests/fuzz/config/seeds; MUTATIONS of them, or as many
    as MUTATION_SECONDS allow after the first 1,000): each is accepted (0) or
    rejected with file:line and a cause (1), never a crash, a sanitizer
    report or a hang."""
    import random
    d = tool("MADVSEQD")
    seeds = os.path.join(os.path.dirname(HERE), "fuzz", "config", "seeds")
    texts = [open(os.path.join(seeds, f), "rb").read() for f in sorted(os.listdir(seeds))]
    rng = random.Random(int(os.environ.get("MUTATION_SEED", "10")))
    n = int(os.environ.get("MUTATIONS", "3000"))
    budget = float(os.environ.get("MUTATION_SECONDS", "300"))
    accepted = rejected = 0
    bad = []

    def one(path):
        try:
            p = subprocess.run([d, "--check-config", path], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=30)
        except subprocess.TimeoutExpired:
            return path, None, "hang"
        return path, p.returncode, p.stderr.decode(errors="replace")

    from concurrent.futures import ThreadPoolExecutor
    with tempfile.TemporaryDirectory() as t, ThreadPoolExecutor(8) as pool:
        paths = []
        for i in range(n):
            paths.append(os.path.join(t, "m%05d.conf" % i))
            open(paths[-1], "wb").write(mutate(rng, texts))
        t0 = time.time()
        ran = 0
        results = []
        # In slices, within a time budget: a sanitizer build on a loaded
        # machine takes several times as long per run (each a new process).
        while ran < n and (ran < 1000 or time.time() - t0 < budget):
            results += list(pool.map(one, paths[ran:ran + 200]))
            ran = len(results)
        for path, rc, err in results:
            if rc == 0 and not err:
                accepted += 1
            elif rc == 1 and re.match(re.escape(path) + r"(:\d+)?: \S", err) and \
                    "Sanitizer" not in err and "runtime error" not in err:
                rejected += 1
            else:
                bad.append((path, "status %s: %s" % (rc, err[-500:])))
                shutil.copy(path, os.path.join(os.environ.get("MADVSEQ_TEST_DIR", "."),
                                               "mutated-failure-" + os.path.basename(path)))
    print("%d mutated configurations (of %d, in %.0f s): %d accepted, %d rejected with file:line, "
          "%d otherwise" % (ran, n, time.time() - t0, accepted, rejected, len(bad)))
    for path, why in bad[:10]:
        print("  %s: %s" % (os.path.basename(path), why))
    check(not bad, "every mutated configuration was accepted or rejected with a cause, without a crash")
    check(ran >= min(n, 1000), "at least %d of them ran (%d)" % (min(n, 1000), ran))
    check(rejected > ran // 2, "most of them were rejected (%d of %d)" % (rejected, ran))
    done()


def case_options():
    """Option values are checked before anything starts: a bad --resolve
    used to start a full daemon on the default socket."""
    d = tool("MADVSEQD")
    with Workdir("options") as wd:
        conf = os.path.join(wd.path, "d.conf")
        open(conf, "w").write("[/*]\nmode = pageout\n")
        for args, w in ((["--resolve", "abc"], "--resolve: 'abc'"), (["--resolve", "0"], "--resolve: '0'"),
                        (["--resolve", "-5"], "--resolve: '-5'"), (["--resolve", ""], "--resolve: ''"),
                        (["--resolve", "12x"], "--resolve: '12x'"),
                        (["--resolve", "99999999999"], "--resolve: '99999999999'"),
                        (["-s", "/" + "s" * 120], "--socket: '/sss"), (["-l", "chatty"], "--log-level: 'chatty'")):
            # A daemon started by mistake would listen and never exit: the
            # timeout fails the test then.
            try:
                p = subprocess.run([d, "-c", conf, "-s", os.path.join(wd.path, "x.sock")] + args,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=5)
                rc, err = p.returncode, p.stderr.strip()
            except subprocess.TimeoutExpired:
                rc, err = None, "still running after 5 s: it started a daemon"
            check(rc == 2 and w in err, "%s refused (%s)" % (" ".join(args), err))
        p = subprocess.run([d, "-c", conf, "--resolve", str(os.getpid())], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=5)
        check(p.returncode == 0 and ("pid %d cgroup" % os.getpid()) in p.stdout,
              "--resolve of a live pid answers (%s)" % (p.stdout + p.stderr).strip())
    done()


def case_unit():
    sa = subprocess.run(["sh", "-c", "command -v systemd-analyze"], stdout=subprocess.PIPE, text=True)
    if sa.returncode != 0:
        skip("systemd-analyze not installed")
    unit = os.environ.get("MADVSEQD_UNIT")
    if not unit or not os.path.exists(unit):
        skip("MADVSEQD_UNIT does not name the generated unit")
    with tempfile.TemporaryDirectory() as t:
        # verify needs ExecStart to exist: point it at the built daemon.
        text = open(unit).read()
        text = re.sub(r"^(Exec\w+=)\S*/madvseqd\b", r"\g<1>" + tool("MADVSEQD"), text, flags=re.M)
        path = os.path.join(t, "madvseqd.service")
        open(path, "w").write(text)
        p = subprocess.run(["systemd-analyze", "verify", "--man=no", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if p.returncode != 0 and "--man" in p.stderr:
            p = subprocess.run(["systemd-analyze", "verify", path], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        print(p.stdout + p.stderr)
        check(p.returncode == 0, "systemd-analyze verify accepts the unit")
        # The exposure systemd itself computes (--offline: systemd 250+).
        p = subprocess.run(["systemd-analyze", "security", "--offline=true", path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", p.stdout)
        if m:
            check(float(m.group(1)) <= 2.6, "systemd-analyze security: exposure %s (at most 2.6)"
                  % m.group(1))
        else:
            print("no systemd-analyze security --offline here: %s" % p.stderr.strip()[-200:])
    check("Type=notify" in text, "the unit is Type=notify")
    check(re.search(r"^SystemCallErrorNumber=EPERM$", text, re.M) is not None,
          "a call outside the filter fails with EPERM instead of killing the daemon")
    reload = re.findall(r"^ExecReload=(.*)$", text, re.M)
    check(len(reload) == 2 and reload[0].endswith("--check-config " + re.search(
        r"^ExecStart=.* --config (\S+)", text, re.M).group(1)) and "kill -HUP" in reload[1],
          "ExecReload checks the file before sending SIGHUP (%s)" % reload)
    done()


def case_sandbox(what):
    """The daemon under madvseqd.service's own seccomp filter and bounding
    set, through what it does: a shimmed stream registers and the daemon
    drops behind it, then the final drop (sandbox-stream); an exit drop
    after a streamer is killed (sandbox-exit-drop, as orphan-kill).  With the unit's
    previous filter the first snapshot or exit drop ended it with SIGSYS
    (mincore is not in @system-service, and there was no
    SystemCallErrorNumber=)."""
    os.environ["MADVSEQD_SANDBOX"] = "unit"
    if what == "stream":
        streaming_case("sandbox")
    else:
        orphan_kill(streaming=False)


def case_hardening():
    """madvseqd and madvseqctl carry Debian's hardening: PIE, full RELRO
    (GNU_RELRO and BIND_NOW), the stack protector, and fortified libc
    calls where the build optimises without sanitizers (MADVSEQ_FORTIFY)."""
    if subprocess.run(["sh", "-c", "command -v readelf"], stdout=subprocess.PIPE).returncode:
        skip("readelf (binutils) not installed")
    for var in ("MADVSEQD", "MADVSEQCTL"):
        exe = tool(var)
        name = os.path.basename(exe)

        def readelf(*args):
            return subprocess.run(["readelf", "-W"] + list(args) + [exe], stdout=subprocess.PIPE,
                                  text=True, check=True).stdout
        dyn, ph, hdr, syms = readelf("-d"), readelf("-l"), readelf("-h"), readelf("--dyn-syms")
        check(re.search(r"^\s*GNU_RELRO\s", ph, re.M) is not None, "%s: RELRO segment" % name)
        check(re.search(r"\(FLAGS\)\s.*\bBIND_NOW\b", dyn) is not None or
              re.search(r"\(FLAGS_1\)\s.*\bNOW\b", dyn) is not None, "%s: BIND_NOW (full RELRO)" % name)
        check("DYN (Position-Independent Executable" in hdr or
              re.search(r"\(FLAGS_1\)\s.*\bPIE\b", dyn) is not None, "%s: PIE" % name)
        check("__stack_chk_fail" in syms, "%s: stack protector" % name)
        chk = sorted(set(re.findall(r"\b(__\w+_chk)@", syms)) - {"__stack_chk_fail"})
        if os.environ.get("MADVSEQ_FORTIFY") == "1":
            check(chk, "%s: fortified libc calls (%s)" % (name, " ".join(chk)))
        else:
            print("%s: fortify not expected in this build (%s)" % (name, " ".join(chk) or "none"))
    done()


def case_notify():
    """Type=notify without systemd: a fake NOTIFY_SOCKET gets READY=1,
    RELOADING=1/READY=1 around SIGHUP, STOPPING=1 on SIGTERM."""
    with Workdir("notify") as wd:
        ns = os.path.join(wd.path, "notify.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(ns)
        s.settimeout(10)
        env = plain_env()
        env["NOTIFY_SOCKET"] = ns
        d = Daemon(wd.path, "[/*]\nmode = pageout\n", env=env)

        def expect(word):
            got = []
            while True:
                try:
                    msg = s.recv(4096).decode()
                except socket.timeout:
                    return False, got
                got.append(msg)
                if word in msg.split("\n"):
                    return True, got

        ok, got = expect("READY=1")
        check(ok, "READY=1 once listening (%r)" % got)
        d.p.send_signal(signal.SIGHUP)
        ok1, got1 = expect("RELOADING=1")
        ok2, got2 = expect("READY=1")
        check(ok1 and ok2, "RELOADING=1 then READY=1 on SIGHUP (%r)" % (got1 + got2))
        d.p.send_signal(signal.SIGTERM)
        ok, got = expect("STOPPING=1")
        check(ok, "STOPPING=1 on SIGTERM (%r)" % got)
        d.stop()
    done()


def case_reload():
    with Workdir("reload") as wd:
        d = Daemon(wd.path, "[/*]\nmode = pageout\n")
        st = d.status()
        check("1 cgroup section" in st, "started with one section")
        open(d.conf, "w").write("[/*]\nmode = cold\n[/x/*]\nmode = off\n")
        d.p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        check("2 cgroup sections" in d.status(), "SIGHUP loads a valid file")
        open(d.conf, "w").write("[/*]\nmode = sideways\n")
        d.p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        check(d.alive() and "2 cgroup sections" in d.status(), "an invalid file keeps the old policy")
        log = open(d.log).read()
        check(re.search(r"%s:2: mode: 'sideways'" % re.escape(d.conf), log) is not None and
              "keeping the previous configuration" in log, "and the log says why, with file and line")
        # Files that made the parser crash, and with it the daemon.
        for bad, w in (("mode = off\n", ":1: key 'mode' before any section"),
                       ("[/*\nmode = off\n", ":1: section name not closed by ']'")):
            open(d.conf, "w").write(bad)
            d.p.send_signal(signal.SIGHUP)
            time.sleep(0.5)
            check(d.alive() and "2 cgroup sections" in d.ctl("status", check_rc=False).stdout,
                  "SIGHUP with %r keeps the daemon and its old policy" % bad)
            check((d.conf + w) in open(d.log).read(), "and the log says why (%s)" % w)
        os.unlink(d.conf)
        os.mkdir(d.conf)
        d.p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        check(d.alive() and "2 cgroup sections" in d.ctl("status", check_rc=False).stdout and
              (d.conf + ": is a directory") in open(d.log).read(),
              "a directory in the file's place keeps the old policy too")
        os.rmdir(d.conf)
        d.stop()
    done()


def case_kernel_switch():
    """With the kernel's own drop-behind on (vm.seq_read_dropbehind, from the
    patch series), status and metrics say so; off and absent too.  The
    switch is read from a fixture procfs (--proc-root).  Clients are still
    identified in the real /proc, also on kernels without SO_PEERPIDFD
    (before 6.5; a fault point stands in for one where fault points are
    built)."""
    # (fiu_prefix skips where fault points are missing: only the first pass then)
    fiu = os.environ.get("MADVSEQ_FIU") == "1" and shutil.which("fiu-run")
    passes = [[]] + ([fiu_prefix("enable name=madvseq/daemon/socket/peerpidfd")] if fiu else [])
    with Workdir("kswitch") as wd:
        for prefix, (state, text, metric) in [(p, s) for p in passes for s in (
                ("1", "kernel drop-behind: on", 1), ("0", "kernel drop-behind: off", 0),
                (None, "kernel drop-behind: absent", -1))]:
            proc = os.path.join(wd.path, "proc-%s-%d" % (state, len(prefix)))
            os.makedirs(os.path.join(proc, "sys", "vm"))
            if state is not None:
                with open(os.path.join(proc, "sys", "vm", "seq_read_dropbehind"), "w") as f:
                    f.write(state + "\n")
            if prefix:
                print("without SO_PEERPIDFD (fault point), switch %s:" % state)
            d = Daemon(wd.path, "[/*]\nmode = pageout\n", name="k%s%d" % (state, len(prefix)),
                       args=["--proc-root", proc], prefix=prefix)
            st = d.status()
            check(text in st, "status: '%s'" % text)
            check(d.metric("madvseq_kernel_dropbehind") == metric,
                  "metric madvseq_kernel_dropbehind = %d" % metric)
            if state == "1":
                check("drop-behind (vm.seq_read_dropbehind) is on" in open(d.log).read(),
                      "the log says it steps aside")
            d.stop()
    done()


# --------------------------------------------------------------------------
# The real daemon with real programs.

def streaming_case(name, static=False, kill_daemon=False, gate=False, faults=None, trigger=False):
    need_root()
    size = 256 * M
    lag = 16 * M
    with Workdir(name) as wd:
        data = wd.file("data", size)
        want = baseline(data)
        cg = Cgroup(name, 1 << 30)
        try:
            glob = cg_glob(cg)
            # trigger: no periodic scan after the first (at start, before
            # the streamer): only the page-cache intake can start one.
            conf = "[daemon]\ndiscover_interval = %s\n[test]\nmatch = %s\nmode = pageout\n" % (
                "30min" if trigger else "200ms", glob)
            if static:
                conf += "discover = yes\n"
            if gate:
                conf += "pressure = 95%\n"  # 256M of a 1G limit never gets there
            prefix = fiu_prefix(*faults) if faults else []
            d = Daemon(wd.path, conf, prefix=prefix)
            evict(data)
            stats = os.path.join(wd.path, "shim.stats")
            if static:
                cmd, env = [tool("STREAMER_STATIC"), data, rate(300 if trigger else 100), "1500"], plain_env()
            else:
                cmd = [tool("STREAMER"), data, rate(100), "1500"]
                env = shim_env(MADVSEQ_SOCKET=d.sock, MADVSEQ_STATS=stats, MADVSEQ_DEBUG=1)
            mon = Monitor(data)
            p = stream(cmd, env, cg)
            seen = ""
            t0 = time.time()
            restarted = False
            while p.poll() is None:
                time.sleep(0.25)
                el = time.time() - t0
                if kill_daemon and el > 0.8 and d.alive() and not restarted:
                    d.kill9()
                    print("daemon killed with SIGKILL at %.1fs" % el)
                    killed_at = time.time()
                if kill_daemon and not d.alive() and not restarted and time.time() - killed_at > 0.6:
                    d.start()
                    restarted = True
                    print("daemon restarted at %.1fs" % (time.time() - t0))
                if d.alive():
                    st = d.ctl("status", check_rc=False).stdout
                    if restarted or not kill_daemon:
                        seen += st
            out, err = p.communicate()
            peak = mon.stop()
            # A discovered streamer cannot ask for the final drop: the
            # daemon drops what it left once it sees it exit.
            after = settle(data, M) if static and not faults else cached(data)
            print("streamer: %s" % out.strip().replace("\n", "; "))
            print("peak cached %dM, after %dM (file %dM, lag %dM)" % (peak // M, after // M,
                                                                      size // M, lag // M))
            print("at the peak (%.1fs), cached MiB: %s" % (mon.peak_at, mon.peak_map))
            check(p.returncode == 0 and checksum(out) == want, "data read intact (checksum %s)" % want)
            kind = "discovered" if static else "shim"
            # (with injected socket faults the client may be between connections)
            check(faults or re.search(r"clients: 1 \(\d+ shim, \d+ discovered\)", seen) is not None and
                  ("pid %d %s" % (p.pid, kind)) in seen or (static and "1 discovered" in seen),
                  "the daemon listed the streamer as a %s client" % kind)
            if trigger:
                n = d.metric("madvseq_discovery_scans_total", '{reason="intake"}') or 0
                check(n >= 1, "a scan was started by the page-cache intake (%d such scans)" % n)
            dropped = d.metric("madvseq_dropped_bytes_total", '{cgroup="%s"}' % glob) or 0
            print("daemon dropped %dM in the cgroup" % (dropped // M))
            if gate:
                check(dropped == 0, "the pressure gate kept the daemon idle")
                check(after > size // 2, "and the file stayed cached (%dM)" % (after // M))
            else:
                if kill_daemon:
                    # The counters restart with the daemon: its share since.
                    check(dropped > 0, "the restarted daemon took over again (dropped %dM)" % (dropped // M))
                elif not faults:
                    check(dropped > size // 2, "the daemon dropped most of the file (%dM)" % (dropped // M))
                if static and not faults:
                    # fadvise(DONTNEED) cannot free a folio that the kernel
                    # holds for a moment (isolated for migration or reclaim,
                    # most likely): 2 MiB stayed in one CI run of many, with
                    # all 16 MiB of the last lag logged as dropped.
                    if after > M:
                        print("left after the exit drop, MiB: %s" % cached_map(data))
                    check(after <= 2 * M, "after the discovered streamer exited, the daemon dropped "
                          "what it left (%dK left, at most one large folio)" % (after // 1024))
                # Discovery starts up to one scan late: the pages read by then
                # go at the first cycle, so the peak is a scan's worth higher.
                bound = lag + (64 * M if static or kill_daemon or faults else 48 * M)
                check(peak <= bound, "cache stayed near the lag while streaming (peak %dM <= %dM)"
                      % (peak // M, bound // M))
            if faults:
                # Injected socket faults cut the connection now and then: the
                # shim carries on alone and hands over again, so both drop.
                shim = dict(l.split("=", 1) for l in open(stats).read().split()) if os.path.exists(stats) else {}
                total = dropped + int(shim.get("bytes_dropped", "0"))
                check(total > size // 4, "daemon and shim together still dropped (%dM)" % (total // M))
            elif not static and not gate and not kill_daemon and os.path.exists(stats):
                s = dict(l.split("=", 1) for l in open(stats).read().split())
                print("shim stats: %s" % s)
                check(int(s.get("bytes_dropped", "1")) < 8 * M,
                      "the in-process engine stayed (nearly) idle: dropped %sB" % s.get("bytes_dropped"))
                check(int(s.get("bytes_dropped_asked", "0")) > size // 4,
                      "the library made the drops the daemon asked: %sB" % s.get("bytes_dropped_asked"))
                # At munmap the shim asks the daemon for the final drop of
                # the last lag and waits for it; the file was cold before.
                # The wait is bounded (50 ms): a daemon that is not
                # scheduled in time (sanitizers, a loaded machine) leaves
                # part of the last lag, and the shim says so.
                # What it kept (strong references, or still mapped) stays;
                # and MADV_PAGEOUT unmaps a folio that someone holds for a
                # moment but cannot free it: unmapped, it stays cached where
                # no pagemap shows it (one 2 MiB folio in two CI runs of
                # many, with "16384 KiB dropped, 0 KiB kept" logged).
                final = [l for l in open(d.log).read().splitlines()
                         if ("pid %d: final drop of" % p.pid) in l]
                print("\n".join(final) or "(the daemon logged no final drop)")
                kept = sum(int(m.group(1)) * 1024 for m in
                           (re.search(r"(\d+) KiB kept", l) for l in final) if m)
                if "did not confirm the final drop" in err:
                    print("note: the shim's wait for the final drop timed out")
                    check(after <= lag, "the final drop, not waited for to its end, left %dK cached "
                          "(<= the lag)" % (after // 1024))
                else:
                    check(final and after <= 2 * M + kept, "the daemon's final drop at munmap left %dK "
                          "cached (<= one large folio + the %dK it kept)" % (after // 1024, kept // 1024))
            if kill_daemon:
                check("madvseqd at %s does the work" % d.sock in err and
                      err.count("does the work") >= 2, "the shim handed over, carried on alone, "
                      "and handed over again after the restart")
                print("\n".join(l for l in err.splitlines() if "madvseqd" in l))
            if failures_now():
                d.dump_log()
                print(err[-3000:])
                print("--- status while streaming (last) ---")
                print(seen[-1500:])
            d.stop()
        finally:
            cg.remove()
    done()


def case_discovery_small_folios():
    """discovery-static on a file cached in single pages.  The exit drop
    maps what the exited streamer left to read its page flags; a look that
    marks the pages accessed (MADV_POPULATE_READ does, for every page a PTE
    maps) made it keep the last lag as "strongly referenced".  6.18's ext4
    caches this test's file in 2 MiB folios, which the daemon's mapping maps
    by PMD and the populate left unmarked, so the plain test passed here
    and failed on 6.12 and 6.1.  ext4 with data=journal has no large folios
    (on any of them): on a loop-mounted one the defect shows on this kernel
    too."""
    need_root()
    for tool_ in ("mkfs.ext4", "losetup", "mount", "umount"):
        if not shutil.which(tool_):
            skip("no %s here" % tool_)
    base = os.environ.get("MADVSEQ_TEST_DIR") or os.getcwd()
    top = tempfile.mkdtemp(prefix="msq-smallfolios-", dir=base)
    img, mnt = os.path.join(top, "fs.img"), os.path.join(top, "mnt")
    mounted = False
    try:
        os.mkdir(mnt)
        with open(img, "wb") as f:
            f.truncate(3 << 30)  # sparse: Workdir wants 2 GiB free
        if subprocess.run(["mkfs.ext4", "-q", "-F", img], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode != 0:
            skip("mkfs.ext4 failed")
        r = subprocess.run(["mount", "-o", "loop,data=journal", img, mnt],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            skip("cannot loop-mount an ext4 image with data=journal: %s" % r.stdout.strip())
        mounted = True
        os.environ["MADVSEQ_TEST_DIR"] = mnt
        streaming_case("smallfolios", static=True)
    finally:
        if mounted:
            subprocess.run(["umount", mnt])
        shutil.rmtree(top, ignore_errors=True)


def case_discovery_munmap():
    """A discovered streamer that unmaps its file and lives on: the next
    scan finds the mapping gone, and the daemon drops what it left as it
    would at the process's exit.  It removed the region without that, so
    the last lag stayed cached, and a process that exits right after its
    munmap lost its exit drop whenever a scan came in between (seen in
    discovery-small-folios under ASan)."""
    need_root()
    size = 256 * M
    with Workdir("discovery-munmap") as wd:
        data = wd.file("data", size)
        want = baseline(data)
        cg = Cgroup("munmap", 1 << 30)
        try:
            d = Daemon(wd.path, "[daemon]\ndiscover_interval = 200ms\n[test]\nmatch = %s\n"
                       "mode = pageout\ndiscover = yes\n" % cg_glob(cg))
            evict(data)
            # 100 MiB/s, mapped for 2 s after the last page, then 2 s
            # unmapped (10 scans) before it exits.
            p = stream([tool("STREAMER_STATIC"), data, rate(100), "2000", "1", "munmap-hold"],
                       plain_env(), cg)
            out = ""
            while p.poll() is None and "sum=" not in out:
                out += p.stdout.readline()
            time.sleep(2.0 + 0.8)   # the hold with the mapping, then a few scans
            alive = p.poll() is None
            left = settle(data, M, timeout=1.0)
            rest, _ = p.communicate(timeout=60)
            print("%s; %dK of %dM left cached while it lived on unmapped" % (
                out.strip(), left // 1024, size // M))
            check(p.returncode == 0 and checksum(out) == want, "data read intact (checksum %s)" % want)
            check(alive, "the streamer was still running, without its mapping")
            check(left <= M, "the daemon dropped what the unmapped region left (%dK left)" % (left // 1024))
            check("no longer mapped: dropping what it left cached" in open(d.log).read(),
                  "the daemon says why it dropped them")
            if failures_now():
                d.dump_log()
            d.stop()
        finally:
            cg.remove()
    done()


def failures_now():
    import msqtest
    return bool(msqtest.failures)


def case_final_drop(end):
    """A delegated region's last lag goes when the program exits with the
    file still mapped.  exit() runs the destructor, which asks the daemon
    for the final drop and waits for it; _exit() talks to no daemon (it may
    run in a signal handler or a vfork child): the daemon sees the process
    end and drops what its region left through the file, moments later."""
    need_root()
    size = 128 * M
    with Workdir("final-" + end) as wd:
        data = wd.file("data", size)
        d = Daemon(wd.path, "[/*]\nmode = pageout\n")
        evict(data)
        p = subprocess.run([tool("STREAMER"), data, rate(200), "300", "1", end],
                           env=shim_env(MADVSEQ_SOCKET=d.sock, MADVSEQ_DEBUG="1"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        left = cached(data)
        if end == "_exit":
            for _ in range(50):  # the exit drop: up to 5 s
                if left <= M:
                    break
                time.sleep(0.1)
                left = cached(data)
        print("%s: %dK of %dM left cached" % (end, left // 1024, size // M))
        check(p.returncode == 0 and "does the work" in p.stderr, "the daemon managed the stream")
        check(left <= M, "%s with the file mapped: the daemon dropped the last lag (%dK left)"
              % (end, left // 1024))
        # Nothing left to manage: no more management cycles (an idle
        # daemon sleeps), where one ran every interval (20 ms) before.
        c0 = d.metric("madvseq_cycles_total")
        time.sleep(0.5)
        c1 = d.metric("madvseq_cycles_total")
        check(c0 is not None and c0 == c1, "with no region left the daemon runs no cycles "
              "(%s, then %s after 0.5 s)" % (c0, c1))
        show_if_failed(d, p.stderr)
        d.stop()
    done()


def case_final_takeover(how, end):
    """A final drop the daemon does not make is the shim's: when its advice
    fails (the daemon answers with the error) or when no answer comes in
    time (a daemon stopped by SIGSTOP), the shim drops the range itself
    before it unmaps it or exits.  Before, it left the whole last lag, and
    here all the daemon had not dropped, cached."""
    need_root()
    size = 128 * M
    with Workdir("takeover-%s-%s" % (how, end)) as wd:
        data = wd.file("data", size)
        # failing: every advice of the daemon fails, so it drops nothing
        # while the stream runs either; the fault point is in its engine.
        prefix = fiu_prefix("enable name=madvseq/madvise") if how == "failing" else []
        d = Daemon(wd.path, "[/*]\nmode = pageout\n", prefix=prefix)
        evict(data)
        p = subprocess.Popen([tool("STREAMER"), data, rate(100), "300", "1", end],
                             env=shim_env(MADVSEQ_SOCKET=d.sock, MADVSEQ_DEBUG="1"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stopped = False
        if how == "stopped":
            # Stopped once it manages the stream (it has dropped some).
            t0 = time.time()
            while p.poll() is None and time.time() - t0 < 30:
                if d.metric_sum("madvseq_dropped_bytes_total") > 8 * M:
                    os.kill(d.p.pid, signal.SIGSTOP)
                    stopped = True
                    break
                time.sleep(0.05)
        try:
            out, err = p.communicate(timeout=120)
            left = cached(data)
        finally:
            if stopped:
                os.kill(d.p.pid, signal.SIGCONT)
        dropped = d.metric_sum("madvseq_dropped_bytes_total")
        print("%s, %s: the daemon dropped %dM; %dK of %dM left cached" % (
            how, end, dropped // M, left // 1024, size // M))
        check(p.returncode == 0 and "does the work" in err, "the daemon had the stream")
        if how == "failing":
            check(dropped == 0, "the daemon's advice failed: it dropped nothing (%dM)" % (dropped // M))
            check("could not make the final drop" in err, "the shim was told the final drop failed")
        else:
            check(stopped, "the daemon was stopped while it managed the stream")
            check("did not confirm the final drop" in err, "the shim saw no answer in time")
        check(left <= M, "the shim made the final drop itself (%dK left)" % (left // 1024))
        show_if_failed(d, err)
        d.stop()
    done()


def case_cgroup_removed():
    """A cgroup's record goes once the cgroup was removed and nothing
    refers to it: hosts with a cgroup per job must not grow the daemon's
    state (and status) for good."""
    need_root()
    with Workdir("cgroup-removed") as wd:
        data = wd.file("data", 128 * M)
        cg = Cgroup("removed", 1 << 30)
        name = os.path.basename(cg.path)
        try:
            d = Daemon(wd.path, "[test]\nmatch = %s\nmode = pageout\n" % cg_glob(cg))
            evict(data)
            p = stream([tool("STREAMER"), data, rate(200), "0", "1"], shim_env(MADVSEQ_SOCKET=d.sock), cg)
            p.communicate(timeout=60)
            st = d.status()
            check(name in st, "the cgroup is in the status while it has a stream")
        finally:
            cg.remove()
        t0 = time.time()
        while name in d.status() and time.time() - t0 < 5:
            time.sleep(0.2)
        st = d.status()
        print("\n".join(l for l in st.splitlines() if l.startswith("cgroups:")))
        check(name not in st, "after rmdir its record is gone (%.1f s)" % (time.time() - t0))
        check(re.search(r"cgroups: \d+ known, [1-9]\d* removed", st) is not None,
              "status counts the removed cgroups forgotten")
        if failures_now():
            d.dump_log()
        d.stop()
    done()


def settle(path, limit, timeout=3.0):
    """What stays cached of path once it is at most limit, or at timeout."""
    t0 = time.time()
    c = cached(path)
    while c > limit and time.time() - t0 < timeout:
        time.sleep(0.05)
        c = cached(path)
    return c


def case_orphan_kill():
    """A shimmed streamer killed by SIGKILL asks for no final drop: the daemon
    drops what it left through the file once it sees it gone, keeping what
    another process maps."""
    orphan_kill(streaming=False)


def case_orphan_kill_streaming():
    """The same, killed while it streams, with 2 GiB of memory of its own.
    The daemon then sees its address space gone (process_madvise: ESRCH)
    tens of milliseconds before the kernel has torn it down and unmapped
    its pages: what it left may be dropped only after that."""
    orphan_kill(streaming=True)


def case_orphan_kill_namespace():
    """The same for a program in a mount namespace of its own (a
    container's): the path it maps the file by does not exist for the
    daemon, which finds the file through the descriptor it took at
    registration (/proc/PID/map_files)."""
    orphan_kill(streaming=False, namespace=True)


def orphan_kill(streaming, namespace=False):
    need_root()
    size = 128 * M
    with Workdir("orphan") as wd:
        data = wd.file("data", size)
        d = Daemon(wd.path, "[/*]\nmode = pageout\n")
        evict(data)
        extra = {"MADVSEQ_SOCKET": d.sock, "MADVSEQ_DEBUG": "1"}
        if streaming:
            # 2 GiB, or a quarter of what the machine has free (a guest):
            # either takes the kernel tens of milliseconds to tear down.
            extra["STREAMER_BALLAST_MIB"] = str(min(2048, mem_available() // 4 // M))
        cmd = [tool("STREAMER"), data, rate(100 if streaming else 200), "10000"]
        if namespace:
            if not shutil.which("unshare"):
                skip("no unshare(1) here (util-linux)")
            # The program sees the file at view/data, bound there in its
            # own mount namespace; view/ stays empty for the daemon.
            view = os.path.join(wd.path, "view")
            os.mkdir(view)
            cmd[1] = os.path.join(view, "data")
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   'mount --bind "$0" "$1" && shift && exec "$@"', wd.path, view] + cmd
        p = stream(cmd, shim_env(**extra))
        p.stdout.readline()
        if namespace:
            check(not os.path.exists(os.path.join(view, "data")),
                  "the program's path to the file does not exist for the daemon")
        # Once the stream started (so they are not "cached before"), another
        # process maps (and keeps) the file's last 4 MiB.
        holder = subprocess.Popen([sys.executable, "-c", """
import mmap, sys, time
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 4 << 20, prot=mmap.PROT_READ, offset=%d)
m.madvise(mmap.MADV_RANDOM)  # its faults read no pages around its own
s = sum(m[i] for i in range(0, 4 << 20, 4096))
print("mapped", flush=True)
time.sleep(30)
""" % (size - 4 * M), data], stdout=subprocess.PIPE, text=True)
        holder.stdout.readline()
        if streaming:
            time.sleep(0.4)  # into its pass (at 100 MiB/s: 40M of 128M)
            check(p.poll() is None, "it was still streaming when killed")
        else:
            # Killed while it holds the mapping after its last pass.
            while p.poll() is None and "sum=" not in p.stdout.readline():
                pass
        before = cached(data)
        p.kill()
        _, err = p.communicate()
        left = settle(data, 4 * M + M)
        kept = cached(data, size - 4 * M, 4 * M)
        # A page-out the daemon had under way when the process was killed
        # can fail to unmap a folio as the process tears its mappings
        # down; the kernel then marks it active, and it is kept as a strong
        # reference.  Those are told apart through kpageflags.
        marked = marked_in_use(data, 0, size - 4 * M)
        print("before the kill %dM cached; after %dK, of which the other mapper's 4M: %dK, "
              "marked in use by the kernel: %dK" % (before // M, left // 1024, kept // 1024,
                                                     marked // 1024))
        check("does the work" in err, "the daemon managed the stream")
        check(before >= 8 * M, "its lag was cached when it was killed (%dM)" % (before // M))
        check(left - marked <= 4 * M + M, "the daemon dropped what the killed process left "
              "(%dK left, %dK of them marked in use)" % (left // 1024, marked // 1024))
        check(kept == 4 * M, "pages another process maps stayed (%dK of 4096K)" % (kept // 1024))
        if failures_now():
            print("cached MiB:", [(i, cached(data, i * M, M) // 4096) for i in range(size // M)
                                  if cached(data, i * M, M)])
        holder.kill()
        holder.wait()
        show_if_failed(d, err)
        d.stop()
    done()


def show_if_failed(d, stderr):
    """After a failed check: the program's and the daemon's last words."""
    if failures_now():
        print(stderr[-2000:])
        d.dump_log()


def case_read_policy():
    """The cgroup's read = key reaches the shim's read path; MADVSEQ_READ wins."""
    need_root()
    size = 64 * M
    with Workdir("read-policy") as wd:
        data = wd.file("data", size)
        for read, env_read, want_dropped in (("off", None, False), ("advised", None, True),
                                             ("off", "advised", True)):
            d = Daemon(wd.path, "[/*]\nmode = pageout\nread = %s\n" % read, name="r" + read)
            evict(data)
            extra = {"MADVSEQ_SOCKET": d.sock, "MADVSEQ_DEBUG": "1"}
            if env_read:
                extra["MADVSEQ_READ"] = env_read
            # cat advises POSIX_FADV_SEQUENTIAL: managed in "advised" mode.
            p = subprocess.run(["cat", data], env=shim_env(**extra), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, timeout=60)
            left = cached(data)
            what = "read = %s%s" % (read, ", MADVSEQ_READ=" + env_read if env_read else "")
            print("%s: %dM of %dM left cached" % (what, left // M, size // M))
            check(p.returncode == 0, "%s: cat succeeded" % what)
            if want_dropped:
                check(left <= 8 * M, "%s: the read path dropped the file behind cat" % what)
            else:
                check(left >= size - M, "%s: the file stayed cached" % what)
                check("read path: off (the cgroup's policy from madvseqd)" in p.stderr,
                      "%s: the shim says where the mode came from" % what)
            show_if_failed(d, p.stderr)
            d.stop()
    done()


def case_read_report():
    """A program's read() stream, which the shim manages itself, reaches the
    daemon's status and metrics: cat of a 512M file raises the cgroup's
    dropped bytes by about the file."""
    need_root()
    size = 512 * M
    with Workdir("read-report") as wd:
        data = wd.file("data", size)
        d = Daemon(wd.path, "[/*]\nmode = pageout\n", name="rr")
        evict(data)
        before = sum_metric(d, "madvseq_dropped_bytes_total")
        # cat advises POSIX_FADV_SEQUENTIAL: managed in the default mode.
        p = subprocess.run(["cat", data], env=shim_env(MADVSEQ_SOCKET=d.sock),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60)
        check(p.returncode == 0, "cat succeeded")
        left = cached(data)
        after = sum_metric(d, "madvseq_dropped_bytes_total")
        read_dropped = sum_metric(d, "madvseq_read_dropped_bytes_total")
        streamed = sum_metric(d, "madvseq_read_streamed_bytes_total")
        status = d.ctl("status").stdout
        print("left cached %dM; dropped metric %dM -> %dM (read path %dM dropped of %dM streamed)" %
              (left // M, before // M, after // M, read_dropped // M, streamed // M))
        check(left <= 8 * M, "the read path dropped the file behind cat")
        check(after - before >= 500 * M, "the dropped-bytes metric rose by >= 500M")
        check(streamed >= size, "the streamed bytes are counted (%dM)" % (streamed // M))
        check("read() streams" in status and "1 files" in status,
              "status shows the read path's numbers")
        show_if_failed(d, p.stderr)
        d.stop()
    done()


def sum_metric(d, name):
    """The sum of a metric over its label sets (0 if absent)."""
    out = d.ctl("stats", "--format=prometheus", check_rc=False).stdout
    return int(sum(float(v) for v in re.findall(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name), out, re.M)))


def case_strong_refs():
    """A page another process reads with read() is kept, seen in kpageflags."""
    need_root()
    size = 128 * M
    with Workdir("refs") as wd:
        data = wd.file("data", size)
        d = Daemon(wd.path, "[/*]\nmode = pageout\n")
        if "daemon+kpageflags" not in d.status():
            d.stop()
            skip("no kpageflags here: %s" % d.status().splitlines()[1])
        evict(data)
        p = stream([tool("STREAMER"), data, rate(60), "1500"],
                   shim_env(MADVSEQ_SOCKET=d.sock))
        # Once the daemon has the region (so the pages are not "cached
        # before"), another reader keeps reading the last 32M with read():
        # those pages are referenced by someone else.
        t0 = time.time()
        while p.poll() is None and "pid %d shim" % p.pid not in d.status() and time.time() - t0 < 10:
            time.sleep(0.02)
        with open(data, "rb") as f:
            while p.poll() is None and time.time() - t0 < 30:
                f.seek(size - 32 * M)
                left = 32 * M
                while left:
                    left -= len(f.read(min(left, M)))
                time.sleep(0.05)
        out, _ = p.communicate()
        tail = cached(data, size - 32 * M, 32 * M)
        kept = d.metric("madvseq_kept_strong_bytes_total", '{cgroup="%s"}' % own_memory_cgroup()) or 0
        print("last 32M still cached: %dM; kept as strongly referenced: %dM" % (tail // M, kept // M))
        check(kept > 0, "the daemon kept pages that kpageflags showed in use")
        check(tail >= 30 * M, "the other reader's pages stayed cached")
        check(cached(data) < 32 * M + 40 * M, "the rest was dropped")
        d.stop()
    done()


# --------------------------------------------------------------------------
# Hostile and odd clients; after each the daemon must still answer.

def case_hostile(what):
    need_root()
    with Workdir("hostile-" + what) as wd:
        data = wd.file("data", 64 * M)
        d = Daemon(wd.path, "[daemon]\nhello_timeout = 300ms\n[/*]\nmode = pageout\n")
        h = tool("HOSTILE")
        extra = []
        victim = None
        if what in ("lie-region",):
            extra = [data]
        elif what in ("many",):
            extra = ["1000", data]
            # Half cached: each client's exit drop has a file to walk.
            with open(data, "rb") as f:
                os.fsync(f.fileno())  # (dirty pages would stay)
                while f.read(M):
                    pass
                os.posix_fadvise(f.fileno(), 0, 32 * M, os.POSIX_FADV_DONTNEED)
        elif what == "exit-mid":
            extra = ["100", data]
        elif what == "pid-reuse":
            extra = [data]
        elif what == "silent":
            extra = ["1000"]
        elif what == "lie-pid":
            # A real shimmed victim maps the file; the liar claims its pid.
            victim = stream([tool("STREAMER"), data, rate(8), "0"], plain_env())
            line = victim.stdout.readline()
            m = re.search(r"pid=(\d+) map=(0x[0-9a-f]+) len=(\d+)", line)
            extra = [m.group(1), m.group(2), m.group(3), data]
        p = subprocess.run([h, d.sock, what] + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=120)
        print(p.stdout + p.stderr)
        if victim:
            victim.kill()
            victim.wait()
        if p.returncode == 77:
            d.stop()
            skip(p.stdout.strip())
        check(p.returncode == 0, "hostile %s: handled as expected" % what)
        check(d.alive(), "the daemon is still running")
        st = d.ctl("status", check_rc=False)
        check(st.returncode == 0, "and still answers%s" % ("" if st.returncode == 0 else
                                                           " (madvseqctl: %s)" % st.stderr.strip()))
        if what == "lie-pid":
            check("refused" in open(d.log).read() or "Invalid argument" in p.stdout,
                  "the forged identity bought nothing")
        if what == "many":
            # The thousand exit drops are done a slice at a time: the
            # status above was answered meanwhile, and the queue drains.
            pending = re.search(r"exit drops pending: (\d+)", st.stdout)
            print("exit drops pending when asked: %s" % (pending.group(1) if pending else 0))
            t0 = time.time()
            while "exit drops pending" in d.ctl("status").stdout and time.time() - t0 < 30:
                time.sleep(0.1)
            check("exit drops pending" not in d.ctl("status").stdout,
                  "the exit drops were all done (%.1f s)" % (time.time() - t0))
        if failures_now():
            d.dump_log()
        d.stop()
    done()


# Attacks of an unprivileged local user (uid nobody), each followed by
# root's status, which must answer in under STATUS_MS, with the daemon's
# resident memory under RSS_MAX all along.
NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
STATUS_MS = 100
RSS_MAX = 64 * M


def proto_version():
    """MSQ_PROTO_VERSION, as include/madvseq/protocol.h defines it."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "include", "madvseq", "protocol.h")) as f:
        return int(re.search(r"#define MSQ_PROTO_VERSION (\d+)", f.read()).group(1))


PROTO_VERSION = proto_version()


def status_ms(sock):
    """Root's status over the socket, in-process: milliseconds from
    connect to the last chunk (None: no answer)."""
    import struct
    hdr = lambda t, size, seq: struct.pack("=IHHII", 0x3151534d, PROTO_VERSION, t, size, seq)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    t0 = time.monotonic()
    try:
        s.connect(sock)
        s.send(hdr(1, 24, 1) + struct.pack("=II", 2, 0))  # HELLO, madvseqctl
        s.recv(65536)
        s.send(hdr(5, 16, 2))  # STATUS
        while True:
            b = s.recv(70000)
            if len(b) < 24 or struct.unpack_from("=IHHII", b)[2] != 104:
                return None
            if struct.unpack_from("=I", b, 16)[0] & 1:
                break
    except OSError:
        return None
    finally:
        s.close()
    return (time.monotonic() - t0) * 1000


class RssWatch:
    """The daemon's VmRSS, sampled every 20 ms; .peak in bytes."""

    def __init__(self, pid):
        import threading
        self.pid, self.peak, self.stopped = pid, 0, False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stopped:
            try:
                for line in open("/proc/%d/status" % self.pid):
                    if line.startswith("VmRSS:"):
                        self.peak = max(self.peak, int(line.split()[1]) * 1024)
            except OSError:
                pass
            time.sleep(0.02)

    def stop(self):
        self.stopped = True
        self.t.join()
        return self.peak


def daemon_pid(p):
    """The daemon's pid under a wrapper that forks it (strace -f)."""
    for _ in range(100):
        try:
            kids = open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.02)
    return p.pid


def mapping_rss(pid, addr):
    """Rss of the mapping that starts at addr in pid, in bytes."""
    found = False
    for line in open("/proc/%d/smaps" % pid):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            found = int(line.split("-")[0], 16) == addr
        elif found and line.startswith("Rss:"):
            return int(line.split()[1]) * 1024
    return None


def fiu_prefix(*commands):
    """fiu-run with its control commands ("enable name=POINT", ...) before
    the daemon's command; skips the case where that cannot run."""
    if os.environ.get("MADVSEQ_FIU") != "1":
        skip("fault points are compiled out (configure with -Dfiu=enabled)")
    if subprocess.run(["sh", "-c", "command -v fiu-run"], stdout=subprocess.PIPE).returncode:
        skip("fiu-run (fiu-utils) not installed")
    prefix = ["fiu-run", "-f", ""]
    for c in commands:
        prefix += ["-c", c]
    return prefix


def after_attack(d, what, rss, pid=None):
    """Root's status, timed; the daemon's peak RSS."""
    ms = status_ms(d.sock)
    peak = rss.stop()
    print("%s: root's status answered in %s ms; daemon RSS peak %.1f MiB" % (
        what, "%.1f" % ms if ms is not None else "(no answer)", peak / M))
    # (Under strace every system call of the daemon costs a trip through
    # the tracer: there, only that it answers is judged.)
    limit = 1000 if d.traced else STATUS_MS
    check(ms is not None and ms < limit, "root's status answers in < %d ms" % limit)
    if "libasan" in os.environ.get("MADVSEQ_PRELOAD", ""):
        # (AddressSanitizer keeps up to 256 MiB of freed memory in
        # quarantine, and its shadow: the figure is not the daemon's.)
        print("daemon RSS not judged under AddressSanitizer")
    else:
        check(peak < RSS_MAX, "daemon RSS stays under %d MiB" % (RSS_MAX // M))
    check(d.alive(), "the daemon is still running")


def finish_attack(d, what, rss, *procs):
    """The end of an attack case: the attack's processes killed and reaped,
    root's status and the daemon's RSS judged (after_attack), the daemon
    stopped, the verdict given."""
    for p in procs:
        p.kill()
        p.wait()
    after_attack(d, what, rss)
    d.stop()
    done()


def case_attack(what):
    need_root()
    with Workdir("attack-" + what) as wd:
        os.chmod(wd.path, 0o755)
        h = tool("HOSTILE")
        conf = "[daemon]\nhello_timeout = 300ms\n"
        prefix, extra = [], []
        if what in ("sparse", "sparse-noscan"):
            conf += "max_client_bytes = 8T\n"
        if what == "sparse-noscan":
            # Before 6.7 (Debian 12's 6.1) pagemap has no PAGEMAP_SCAN: it
            # is read entry by entry, 8 bytes for each page, holes included.
            prefix = fiu_prefix("enable name=madvseq/pagemap/scan")
        if what == "symlink-swap":
            # No descriptor held for the region: the path is all there is.
            prefix = ["strace", "-f", "-qq", "-e", "trace=open,openat,openat2,statfs,stat,newfstatat,"
                      "readlink,execve", "-o", os.path.join(wd.path, "strace.log")] + \
                fiu_prefix("enable name=madvseq/daemon/proc/map_files")
        if what == "pid-reuse-nopeerpidfd":
            prefix = fiu_prefix("enable name=madvseq/daemon/socket/peerpidfd")
        conf += "[/*]\nmode = pageout\n"
        d = Daemon(wd.path, conf, prefix=prefix)
        dpid = d.pid
        rss = RssWatch(dpid)
        data = wd.file("data", 64 * M)
        os.chmod(data, 0o644)
        if what in ("unaligned-unregister", "snapshot-ranges"):
            extra = [data]
            # Not cached before: the page the client reads is the final
            # drop's to check (pages cached before are kept unchecked).
            evict(data)
        elif what == "region-flood":
            big = os.path.join(wd.path, "sparse-512M")
            open(big, "w").close()
            os.truncate(big, 512 * M)
            os.chmod(big, 0o644)
            extra = [big, "65536"]
        elif what == "conn-flood":
            extra = ["4200"]
        elif what in ("sparse", "sparse-noscan"):
            for size, n in ((15 << 40, 20), (4 << 40, 200)):
                f = os.path.join(wd.path, "sparse-%d" % size)
                open(f, "w").close()
                os.truncate(f, size)
                os.chmod(f, 0o644)
                p = subprocess.run(NOBODY + [h, d.sock, "sparse", f, str(n)], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=120)
                print(p.stdout.strip())
                if size > 8 << 40:
                    check("0 accepted" in p.stdout, "a client over max_client_bytes is refused")
                else:
                    check("%d accepted" % n in p.stdout, "sparse mappings under the cap are accepted")
                    m = re.search(r"final drop answered in ([0-9.]+) ms", p.stdout)
                    check(m is not None and float(m.group(1)) < STATUS_MS * 10 * SLOWDOWN,
                          "the final drop of the whole mapping is answered in < %d ms"
                          % (STATUS_MS * 10 * SLOWDOWN))
                ms = status_ms(d.sock)
                print("  root's status right after: %.1f ms" % ms if ms is not None else "  no status")
                check(ms is not None and ms < STATUS_MS, "root's status answers in < %d ms" % STATUS_MS)
            finish_attack(d, what, rss)
        if what == "exec-setuid":
            return attack_exec_setuid(wd, d, h, rss)
        if what == "pid-reuse-nopeerpidfd":
            return attack_pid_reuse(wd, d, h, rss)
        if what == "symlink-swap":
            return attack_symlink_swap(wd, d, h, rss)
        if what == "discovery-flood":
            return attack_discovery_flood(wd, d, rss)
        if what == "ignores-drops":
            return attack_ignores_drops(wd, d, h, data, rss)
        if what == "conn-flood":
            p = subprocess.Popen(NOBODY + [h, d.sock, what] + extra, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            out = ""
            for line in p.stdout:
                out += line
                if line.startswith("holding"):
                    break
            print(out.strip())
            m = re.search(r"(\d+) welcomed", out)
            check(m and int(m.group(1)) <= 64, "one user gets at most max_clients_per_uid (64) connections")
            after_attack(d, what + " (connections held)", rss)
            rss = RssWatch(dpid)
            p.stdin.close()
            p.wait()
            finish_attack(d, what, rss)
        p = subprocess.run(NOBODY + [h, d.sock, what] + extra, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
        print(p.stdout.strip())
        check(p.returncode == 0, "%s: handled as expected" % what)
        if what == "region-flood":
            m = re.search(r"(\d+) accepted", p.stdout)
            check(m and int(m.group(1)) <= 1024, "one client gets at most max_regions_per_client (1024)")
        after_attack(d, what, rss)
        if failures_now():
            d.dump_log()
        d.stop()
    done()


def attack_ignores_drops(wd, d, h, data, rss):
    """A client that says it makes the drops it is asked (MSQ_HELLO_DROPS)
    but never reads them: what it was asked and still maps a second later
    is dropped from the daemon after all (common/stream.c, asked_before)."""
    evict(data)
    p = subprocess.Popen(NOBODY + [h, d.sock, "ignores-drops", data], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = p.stdout.readline()
    print(line.strip())
    check(line.startswith("read "), "the client was welcomed, registered and read its file")
    left = None
    deadline = time.monotonic() + 6 * SLOWDOWN
    while time.monotonic() < deadline:
        time.sleep(0.2)
        left = cached(data)
        if left <= 24 * M:
            break
    print("  %s MiB of the client's 64 MiB cached while it maps it" % (None if left is None else left // M))
    check(left is not None and left <= 24 * M,
          "the pages behind it went though it never made the drops it was asked (<= lag + 8 MiB)")
    m = re.search(r"\(([^()]*) of it by the shims, asked\)", d.status())
    print("  %s" % (m.group(0) if m else "no asked count in the status"))
    check(m and m.group(1) != "0 B", "the daemon asked it first")
    p.stdin.close()
    p.wait()
    finish_attack(d, "ignores-drops", rss)


def attack_exec_setuid(wd, d, h, rss):
    """HELLO through a child, then the connected process execs a setuid
    program: REGISTER and UNREGISTER FINAL on its mapping are EPERM and
    its pages stay."""
    prog = os.path.join(wd.path, "setuid-hostile")
    shutil.copy(h, prog)
    os.chown(prog, 0, 0)
    os.chmod(prog, 0o4755)
    secret = wd.file("root-only", 8 * M)
    os.chmod(secret, 0o600)
    p = subprocess.Popen(NOBODY + [h, d.sock, "exec-setuid", secret, prog], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    out, victim, addr, length = "", None, None, None
    t0 = time.time()
    for line in p.stdout:
        out += line
        m = re.search(r"pid=(\d+) map=(0x[0-9a-f]+) len=(\d+)", line)
        if m:
            victim, addr, length = int(m.group(1)), int(m.group(2), 16), int(m.group(3))
        if line.startswith("UNREGISTER FINAL") or "did not start" in line or time.time() - t0 > 20:
            break
    print(out.strip())
    if victim is None:
        p.kill()
        if "Operation not permitted" in out or "nosuid" in out:
            skip("setuid programs cannot run from %s" % wd.path)
        check(False, "the setuid victim started")
        d.stop()
        done()
    time.sleep(0.3)  # a cycle's worth
    uids = [l for l in open("/proc/%d/status" % victim) if l.startswith("Uid:")][0].split()[1:4]
    print("victim pid %d uids %s" % (victim, " ".join(uids)))
    check(uids[1] == "0", "the victim runs setuid root")
    rss_after = mapping_rss(victim, addr)
    print("victim's mapping: %d of %d bytes resident" % (rss_after or 0, length))
    check("REGISTER of its mapping -> Operation not permitted" in out, "REGISTER aimed at it: EPERM")
    check("UNREGISTER FINAL -> Operation not permitted" in out, "UNREGISTER FINAL aimed at it: EPERM")
    check(rss_after == length, "its Rss is unchanged")
    finish_attack(d, "exec-setuid", rss, p)


def attack_pid_reuse(wd, d, h, rss):
    """SO_PEERPIDFD made unavailable: a client connects and exits before the
    daemon accepts; a root process takes its pid.  Nothing may act on it."""
    secret = wd.file("root-only", 8 * M)
    os.chmod(secret, 0o600)
    victim = None
    for attempt in range(5):
        os.kill(d.pid, signal.SIGSTOP)  # accept comes after the reuse
        a = subprocess.Popen(NOBODY + [h, d.sock, "reuse-connect"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = a.stdout.readline()
        m = re.search(r"pid=(\d+)", line)
        if not m:
            os.kill(d.pid, signal.SIGCONT)
            check(False, "the client connected (%s)" % line.strip())
            break
        pid = int(m.group(1))
        while os.path.exists("/proc/%d" % pid) and a.poll() is None:
            time.sleep(0.01)
        a.wait()  # (setpriv exec'd the client: its pid is free once reaped)
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        v = subprocess.Popen([h, "-", "hold", secret], stdout=subprocess.PIPE, text=True)
        if v.pid == pid:
            victim = v
            break
        v.kill()
        v.wait()
        os.kill(d.pid, signal.SIGCONT)
        print("pid %d not reused (got %d); again" % (pid, v.pid))
    if victim is None:
        d.stop()
        skip("could not make a root process take the client's pid")
    vline = victim.stdout.readline()
    m = re.search(r"map=(0x[0-9a-f]+) len=(\d+)", vline)
    addr = int(m.group(1), 16)
    before = mapping_rss(victim.pid, addr)
    os.kill(d.pid, signal.SIGCONT)
    # The client's child still holds the socket and reads the victim's map.
    child_out = ""
    # (the child inherited a.stdout; its stdin is a.stdin)
    a.stdin.write(vline)
    a.stdin.flush()
    t0 = time.time()
    while time.time() - t0 < 10:
        line = a.stdout.readline()
        if not line:
            break
        child_out += line
    print("victim pid %d: %s" % (victim.pid, vline.strip()))
    print(child_out.strip())
    time.sleep(0.3)
    after = mapping_rss(victim.pid, addr)
    print("victim's mapping: %d -> %d bytes resident" % (before, after))
    check("welcomed" not in child_out or ("accepted" not in child_out),
          "REGISTER / UNREGISTER FINAL aimed at the reused pid were not accepted")
    check(after == before, "its Rss is unchanged")
    finish_attack(d, "pid-reuse-nopeerpidfd", rss, victim)


def attack_symlink_swap(wd, d, h, rss):
    """A client maps its own file, registers it, swaps the file's
    directory for a symlink to /etc and is killed with the region managed:
    the exit drop must not open anything by that path."""
    att = os.path.join(wd.path, "attacker")
    os.mkdir(att)
    os.chown(att, 65534, 65534)
    script = (
        "import ctypes, mmap, os, signal, socket, struct, sys\n"
        "sock, att = sys.argv[1], sys.argv[2]\n"
        "dd = os.path.join(att, 'dir'); os.mkdir(dd)\n"
        "f = os.path.join(dd, 'shadow')\n"
        "with open(f, 'wb') as o: o.write(os.urandom(1 << 20) * 8)\n"
        "fd = os.open(f, os.O_RDONLY); st = os.fstat(fd)\n"
        "m = mmap.mmap(fd, 8 << 20, mmap.MAP_SHARED, mmap.PROT_READ)\n"
        "addr = ctypes.addressof(ctypes.c_char.from_buffer_copy(b'x'))\n"
        "import re\n"
        "for l in open('/proc/self/maps'):\n"
        "    if l.rstrip().endswith(f): addr = int(l.split('-')[0], 16); break\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sock)\n"
        "hdr = lambda t, n, q: struct.pack('=IHHII', 0x3151534d, %d, t, n, q)\n" % PROTO_VERSION +
        "s.send(hdr(1, 24, 1) + struct.pack('=II', 1, 0)); s.recv(4096)\n"
        "s.send(hdr(2, 72, 2) + struct.pack('=QQQQQQII', 1, addr, 8 << 20, st.st_dev, st.st_ino, 0, 1, 0))\n"
        "r = s.recv(4096); print('REGISTER ->', struct.unpack_from('=i', r, 16)[0], flush=True)\n"
        "x = sum(m[i] for i in range(0, 8 << 20, 4096))\n"
        "os.rename(dd, dd + '.old'); os.symlink('/etc', dd)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    p = subprocess.run(NOBODY + [sys.executable, "-c", script, d.sock, att], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    print(p.stdout.strip())
    check("REGISTER -> 0" in p.stdout, "the attacker's region was accepted")
    t0 = time.time()
    while "exit drops pending" in d.ctl("status").stdout and time.time() - t0 < 10:
        time.sleep(0.1)
    time.sleep(0.5)
    st = d.ctl("status").stdout
    print("\n".join(l for l in st.splitlines() if l.startswith("refused")))
    check("exit drops skipped: 1 " in st, "the exit drop without a held descriptor was skipped")
    after_attack(d, "symlink-swap", rss)
    d.stop()
    log = open(os.path.join(wd.path, "strace.log")).read()
    named = [l for l in log.splitlines() if att in l or "/etc/shadow" in l]
    outside = sorted({m.group(1) for m in re.finditer(r'open(?:at2?)?\((?:AT_FDCWD, )?"([^"]+)"', log)
                      if not m.group(1).startswith(("/proc/", "/sys/fs/cgroup/"))})
    print("paths the daemon opened outside /proc and cgroupfs: %s" % (" ".join(outside) or "none"))
    print("calls naming the attacker's directory: %d%s" % (len(named), "".join("\n  " + l for l in named[:5])))
    check(not named, "no call of the daemon names the attacker's path")
    done()


def holding(pid):
    """Whether process pid sleeps (state S in /proc/PID/stat)."""
    try:
        st = open("/proc/%d/stat" % pid).read()
    except OSError:
        return False
    return st[st.rindex(")") + 2] == "S"


def attack_discovery_flood(wd, d0, rss0):
    """Hundreds of unshimmed MADV_SEQUENTIAL readers in a discover = yes
    cgroup: the daemon manages at most max_discovered of them."""
    rss0.stop()
    d0.stop()
    static = os.environ.get("STREAMER_STATIC")
    if not static or not os.path.exists(static):
        skip("no static streamer built")
    small = wd.file("small", 4 * M)
    os.chmod(small, 0o644)
    cg = Cgroup("discovery-flood", 8 << 30)
    procs = []
    try:
        conf = "[daemon]\ndiscover_interval = 200ms\n[flood]\nmatch = %s\nmode = pageout\ndiscover = yes\n" % cg_glob(cg)
        d = Daemon(wd.path, conf, name="flood")
        rss = RssWatch(d.pid)
        for i in range(300):
            procs.append(subprocess.Popen(cg.prefix() + NOBODY + [static, small, "0", "600000", "1"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # (The readers hold their mappings for 10 minutes, far longer than
        # the waits below; they are killed at the end.)
        # Until the readers have started and hold their mappings (sleeping:
        # 300 process starts take an emulated guest many seconds, and a
        # status measured meanwhile measures them), then until discovery
        # has settled: the flood is then the daemon's steady state.
        t0 = time.time()
        while time.time() - t0 < 60 and not all(holding(p.pid) for p in procs):
            time.sleep(1)
        prev, t0 = None, time.time()
        while time.time() - t0 < 20:
            time.sleep(1)
            st = d.ctl("status").stdout
            m = re.search(r"(\d+) discovered", st)
            if m and m.group(1) == prev and int(prev) > 0:
                break
            prev = m.group(1) if m else None
        m = re.search(r"clients: \d+ \(\d+ shim, (\d+) discovered\)", st)
        print("300 readers in the cgroup; daemon: %s" % (m.group(0) if m else st[:200]))
        check(m and 0 < int(m.group(1)) <= 256, "discovery manages at most max_discovered (256) processes")
        print("\n".join(l for l in st.splitlines() if l.startswith(("cycles:", "discovery scans:", "daemon:"))))
        after_attack(d, "discovery-flood", rss)
        d.stop()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        cg.remove()
    done()


CASES = {
    "fixture-v1": lambda: case_fixture("v1"),
    "fixture-v2": lambda: case_fixture("v2"),
    "check-config": case_check_config,
    "options": case_options,
    "check-config-mutated": case_check_config_mutated,
    "unit": case_unit,
    "hardening": case_hardening,
    "sandbox-stream": lambda: case_sandbox("stream"),
    "sandbox-exit-drop": lambda: case_sandbox("exit-drop"),
    "notify": case_notify,
    "reload": case_reload,
    "kernel-switch": case_kernel_switch,
    "shim": lambda: streaming_case("shim"),
    "read-policy": case_read_policy,
    "read-report": case_read_report,
    "final-exit": lambda: case_final_drop("exit"),
    "final-_exit": lambda: case_final_drop("_exit"),
    "final-failing-exit": lambda: case_final_takeover("failing", "exit"),
    "final-failing-munmap": lambda: case_final_takeover("failing", "munmap-hold"),
    "final-stopped-exit": lambda: case_final_takeover("stopped", "exit"),
    "orphan-kill": case_orphan_kill,
    "orphan-kill-streaming": case_orphan_kill_streaming,
    "orphan-kill-namespace": case_orphan_kill_namespace,
    "discovery-static": lambda: streaming_case("static", static=True),
    "discovery-trigger": lambda: streaming_case("trigger", static=True, trigger=True),
    "discovery-small-folios": case_discovery_small_folios,
    "discovery-munmap": case_discovery_munmap,
    "sigkill": lambda: streaming_case("sigkill", kill_daemon=True),
    "pressure-gate": lambda: streaming_case("gate", gate=True),
    "faults": lambda: streaming_case(
        # (not socket/listen: a daemon that cannot listen exits, by design)
        "faults", faults=["enable_random name=madvseq/daemon/socket/accept,probability=0.05",
                          "enable_random name=madvseq/daemon/socket/send,probability=0.05",
                          "enable_random name=madvseq/daemon/socket/recv,probability=0.05",
                          "enable_random name=madvseq/daemon/proc/*,probability=0.01",
                          "enable_random name=madvseq/madvise,probability=0.2",
                          "enable_random name=madvseq/pagemap/*,probability=0.02"]),
    "strong-refs": case_strong_refs,
    "cgroup-removed": case_cgroup_removed,
}
for _w in ("malformed", "truncated", "oversized", "out-of-order", "bad-version", "bad-snapshot", "garbage",
           "lie-region", "lie-pid", "silent", "many", "exit-mid", "pid-reuse"):
    CASES["hostile-" + _w] = (lambda w: lambda: case_hostile(w))(_w)

for _w in ("unaligned-unregister", "snapshot-ranges", "second-hello", "status-nonroot", "never-reads",
           "conn-flood", "region-flood", "sparse", "sparse-noscan", "exec-setuid", "pid-reuse-nopeerpidfd", "symlink-swap",
           "discovery-flood", "ignores-drops"):
    CASES["attack-" + _w] = (lambda w: lambda: case_attack(w))(_w)

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: test_daemon.py CASE\ncases: " + " ".join(sorted(CASES)))
        sys.exit(2)
    CASES[sys.argv[1]]()
