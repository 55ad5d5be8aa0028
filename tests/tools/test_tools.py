#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The tools a user meets first: test_tools.py CASE.  Exit 0 pass, 1 fail,
77 skip.

The `madvseq` wrapper (options, one report per bad value, stats path,
static programs, --report), `madvseq stat` against util-linux fincore,
madvseqctl (--version, JSON through jq, Prometheus through promtool, status
naming command and file, the atomic textfile), the daemon's STATUS= and
journald detection, --resolve, the man pages (mandoc -Tlint) and one
version everywhere.  Daemons run on a private socket and are killed at the
end; scratch files go under the build directory (a disk filesystem)."""

import atexit
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(SRC, "tests", "fixtures")
fails = 0


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def check(cond, what, detail=""):
    global fails
    if cond:
        print("ok: " + what)
    else:
        fails += 1
        print("FAIL: " + what + (("\n" + detail) if detail else ""))


def tool(var):
    p = os.environ.get(var)
    if not p or not os.path.exists(p):
        skip("%s does not name a built program" % var)
    return p


def need(prog, package):
    if not shutil.which(prog):
        skip("%s not installed (Debian package %s)" % (prog, package))


def need_root():
    if os.geteuid() != 0:
        skip("needs root (page-cache eviction, the daemon's status)")


def run(args, env=None, **kw):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("MADVSEQ_") and k not in ("MADVSEQ_LIBRARY", "MADVSEQ_HELPER"):
            del e[k]
    e.pop("LD_PRELOAD", None)
    e.update(env or {})
    return subprocess.run(args, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=120, **kw)


def wrapper(*args, env=None):
    if os.environ.get("MADVSEQ_PRELOAD"):
        # The wrapper puts the library first in LD_PRELOAD; a sanitizer
        # build needs its runtimes first.  The plain build runs these.
        skip("the wrapper cannot preload a sanitizer build (the runtimes must come first)")
    e = {"MADVSEQ_LIBRARY": tool("MADVSEQ_LIB"), "MADVSEQ_HELPER": tool("MADVSEQ_HELPER_BIN")}
    e.update(env or {})
    return run(["sh", tool("MADVSEQ_WRAPPER")] + list(args), env=e)


def workdir():
    base = os.environ.get("MADVSEQ_TEST_DIR") or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    d = tempfile.mkdtemp(prefix="tools.", dir=base)
    atexit.register(shutil.rmtree, d, True)
    return d


def disk_workdir():
    d = workdir()
    fs = run(["stat", "-f", "-c", "%T", d]).stdout.strip()
    if fs in ("tmpfs", "ramfs"):
        skip("%s is on %s: page-cache tests need a disk filesystem" % (d, fs))
    return d


def make_file(path, mib):
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
    evict(path)


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def fincore(path):
    return int(run(["fincore", "-b", "-n", "-o", "RES", path]).stdout.strip())


# ---------------------------------------------------------------- wrapper

def case_wrapper_options():
    p = wrapper("run", "--help")
    check(p.returncode == 0 and "read()" in p.stdout and "MADV_SEQUENTIAL" in p.stdout,
          "run --help: exit 0, speaks of read() and mappings", p.stderr)
    # Every MADVSEQ_* variable the library reads has an option.
    names = set()
    for d in ("preload", "common"):
        for f in os.listdir(os.path.join(SRC, d)):
            if f.endswith(".c"):
                text = open(os.path.join(SRC, d, f)).read()
                # (msq_test_env: the tests' hooks, which users do not set)
                names |= set(re.findall(r'msq_env\("(MADVSEQ_[A-Z_]+)"\)', text))
                names |= set(re.findall(r'READ_ENV\("(MADVSEQ_[A-Z_]+)"', text))
    check(len(names) >= 8, "found the library's variables: " + " ".join(sorted(names)))
    for n in sorted(names):
        check("(%s)" % n in p.stdout, "run --help has an option for " + n)
    for args, want in [
            (["--lag=64M"], ["MADVSEQ_LAG=64M"]),
            (["--lag", "64M"], ["MADVSEQ_LAG=64M"]),
            (["-dl", "64M"], ["MADVSEQ_DEBUG=1", "MADVSEQ_LAG=64M"]),
            (["-dl64M"], ["MADVSEQ_DEBUG=1", "MADVSEQ_LAG=64M"]),
            (["-Dd", "-m", "cold"], ["MADVSEQ_DONTCACHE=1", "MADVSEQ_DEBUG=1", "MADVSEQ_MODE=cold"]),
            (["--dontcache=yes", "--no-daemon"], ["MADVSEQ_DONTCACHE=yes", "MADVSEQ_DAEMON=0"]),
            (["--daemon=off", "--socket=/run/x.sock"], ["MADVSEQ_DAEMON=off", "MADVSEQ_SOCKET=/run/x.sock"]),
            (["-S", "/run/y.sock", "-r", "all", "-i", "50ms"],
             ["MADVSEQ_SOCKET=/run/y.sock", "MADVSEQ_READ=all", "MADVSEQ_INTERVAL=50ms"]),
            ([], ["MADVSEQ_READ=all", "MADVSEQ_WRITE_FREE=0"]),  # madvseq run's own defaults
            (["-w64M"], ["MADVSEQ_WRITE_FREE=64M"]),
            (["--write-free", "1G"], ["MADVSEQ_WRITE_FREE=1G"])]:
        p = wrapper("run", *args, "--", "env")
        env = p.stdout.splitlines()
        check(p.returncode == 0 and all(w in env for w in want),
              "run %s sets %s" % (" ".join(args), " ".join(want)), p.stderr)
    p = wrapper("run", "--lag", "64M", "env")  # no "--": the command ends the options
    check(p.returncode == 0 and "MADVSEQ_LAG=64M" in p.stdout.splitlines(), "run without --")
    for bad in (["--nope", "--", "true"], ["-x", "--", "true"], ["--lag"], ["--report=1", "--", "true"],
                # the tests' hooks are no options of the installed wrapper
                ["--procfs=/proc", "--", "true"]):
        p = wrapper("run", *bad)
        check(p.returncode == 2 and p.stderr.strip(), "run %s: usage error (2)" % " ".join(bad))


def case_wrapper_bad_value_once():
    """A bad value is reported once for the process tree, not once per
    process (a shell pipeline and a Python program start many)."""
    need("python3", "python3")
    wd = workdir()
    f = os.path.join(wd, "f")
    with open(f, "wb") as fh:
        fh.write(os.urandom(1 << 20))
    tree = "cat %s | cat > /dev/null; cat %s | wc -c > /dev/null; python3 -c 'import subprocess; " \
           "subprocess.run([\"true\"])'" % (f, f)
    for var, val in [("MADVSEQ_LAG", "lots"), ("MADVSEQ_DONTCACHE", "maybe"), ("MADVSEQ_MODE", "fast"),
                     ("MADVSEQ_DAEMON", "sometimes"), ("MADVSEQ_DEBUG", "2"), ("MADVSEQ_INTERVAL", "1y"),
                     ("MADVSEQ_WRITE_FREE", "all")]:
        p = wrapper("run", "--", "sh", "-c", tree, env={var: val})
        lines = [l for l in p.stderr.splitlines() if var in l]
        check(p.returncode == 0 and len(lines) == 1,
              "%s=%s: reported once for the tree (%d lines)" % (var, val, len(lines)), p.stderr)
    # The same through an option.
    p = wrapper("run", "--lag=2X", "--", "sh", "-c", tree)
    lines = [l for l in p.stderr.splitlines() if "MADVSEQ_LAG" in l]
    check(len(lines) == 1 and "using 16M" in lines[0], "--lag=2X: reported once, default named", p.stderr)
    # Where madvseq run has a default of its own, a bad value gives way to it.
    for opt, var, want in (("--read=sometimes", "MADVSEQ_READ", "all"),
                           ("--write-free=lots", "MADVSEQ_WRITE_FREE", "0")):
        p = wrapper("run", opt, "--", "env")
        check(p.returncode == 0 and ("%s=%s" % (var, want)) in p.stdout.splitlines() and
              ("using %s" % want) in p.stderr, "%s: madvseq run's own default, %s" % (opt, want), p.stderr)


def case_wrapper_stats_path():
    wd = workdir()
    marker = os.path.join(wd, "ran")
    p = wrapper("run", "-s", "/nonexistent/dir/stats", "--", "touch", marker)
    check(p.returncode == 1 and "/nonexistent/dir/stats" in p.stderr and not os.path.exists(marker),
          "unwritable --stats: reported, exit 1, before the program starts", p.stderr)
    p = wrapper("run", "-s", os.path.join(wd, "st.%p"), "--", "touch", marker)
    check(p.returncode == 0 and os.path.exists(marker) and not p.stderr, "writable --stats with %p: runs, quiet",
          p.stderr)
    p = wrapper("run", "-s", os.path.join(wd, "st"), "--", "sh", "-c", "true | true")
    check(p.returncode == 0 and p.stderr.count("has no %p") == 1,
          "--stats without %p: one warning that processes overwrite each other", p.stderr)


def case_wrapper_static():
    static = os.environ.get("STATIC_PROGRAM")
    if not static or not os.path.exists(static):
        skip("no static program (static linking unavailable)")
    p = wrapper("run", "-d", "--", static)
    check("statically linked" in p.stderr, "-d on a static program says it cannot be preloaded", p.stderr)
    p = wrapper("run", "--", static)
    check("statically linked" not in p.stderr, "without -d: silent")
    p = wrapper("run", "-d", "--", "true")
    check("cannot" not in p.stderr and "statically" not in p.stderr, "-d on a dynamic program: no such line",
          p.stderr)


def case_wrapper_report():
    need_root()
    need("fincore", "util-linux")
    wd = disk_workdir()
    big = os.path.join(wd, "big")
    make_file(big, 96)
    # The program closes its own stderr: the summary comes from the wrapper.
    p = wrapper("run", "--report", "--", "sh", "-c",
                'exec 2>&-; cat "$1" > /dev/null; cat "$1" | cat > /dev/null', "sh", big)
    print(p.stderr)
    m = re.search(r"read\(\) streams: (\d+) managed, ([\d.]+) MiB streamed, ([\d.]+) MiB dropped",
                  p.stderr)
    check(p.returncode == 0 and "processes with the library: " in p.stderr and m is not None,
          "--report prints one summary though the program closed its stderr")
    if m:
        check(int(m.group(1)) == 2 and float(m.group(3)) >= 60,
              "--report: 2 files streamed, %s MiB dropped (>= 60 of 2 x 96 less lags)" % m.group(3))
        check(float(m.group(2)) >= 2 * 96 - 1, "--report: %s MiB streamed (2 x 96)" % m.group(2))
    check(p.stderr.count("madvseq: report:") == 1, "one summary for the whole tree")
    m = re.search(r"disk I/O of the tree: ([\d.]+) MiB read", p.stderr)
    check(m is not None and float(m.group(1)) >= 90,
          "--report: the tree read the cold file from disk (%s MiB of 96)" % (m and m.group(1)))
    p = wrapper("run", "--report", "-v", "--", "sh", "-c", 'cat "$1" > /dev/null; exit 3', "sh", big)
    check(p.returncode == 3 and "exited 3" in p.stderr and re.search(r"^  pid \d+:", p.stderr, re.M),
          "--report -v: per-process lines, the command's exit status kept", p.stderr)
    check(re.search(r"^    %s: 96\.0 MiB streamed, [\d.]+ MiB dropped, [\d.]+ (MiB|B) kept \(cached before\)"
                    % re.escape(big), p.stderr, re.M) is not None,
          "--report -v: one line per file, with what was streamed, dropped and kept", p.stderr)
    p = wrapper("run", "--report", "--", "sh", "-c", "kill -TERM $$")
    check(p.returncode == -15 and "killed by signal 15" in p.stderr,
          "--report: a command killed by a signal kills the wrapper the same way", p.stderr)
    left = [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("madvseq-report.")]
    check(not left, "--report leaves no temporary directory", " ".join(left))


# ------------------------------------------------------------------- stat

def case_stat_fincore():
    need("fincore", "util-linux")
    wd = disk_workdir()
    files = []
    for i, (size, read) in enumerate([(16, 5), (8, 8), (4, 0)]):
        f = os.path.join(wd, "f%d" % i)
        make_file(f, size)
        with open(f, "rb") as fh:
            fh.read(read << 20)
        files.append(f)
    cached_before = [fincore(f) for f in files]
    p = run([tool("MADVSEQ_HELPER_BIN"), "stat", "--json", "--socket", os.path.join(wd, "none.sock")] + files)
    if "cachestat" in p.stdout and "error" in p.stdout and "Function not implemented" in p.stdout:
        skip("cachestat(2) needs Linux 6.5")
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        check(False, "stat --json is JSON", p.stdout + p.stderr)
        return
    check(doc["daemon"] is False, "stat --json: no daemon on that socket")
    for f, entry, before in zip(files, doc["files"], cached_before):
        # fincore before and after stat: nothing here adds pages, but a
        # machine's proactive reclaim (a DAMON pageout scheme) may take a
        # few between the two looks, never more than were there before.
        after = fincore(f)
        check(after <= (entry.get("cached") or 0) <= before,
              "%s: madvseq stat %s bytes cached, fincore %d before and %d after"
              % (os.path.basename(f), entry.get("cached"), before, after))
        check(entry["streams"] is None and entry["size"] == os.path.getsize(f), "%s: size, no streams" % f)
    with open(files[1], "rb") as fh:
        fh.read()                       # all of it cached again, for the text
    p = run([tool("MADVSEQ_HELPER_BIN"), "stat", files[1]])
    check(p.returncode == 0 and "cached 8.0 MiB (100.0%)" in p.stdout, "stat text: IEC sizes", p.stdout)
    p = run([tool("MADVSEQ_HELPER_BIN"), "stat", os.path.join(wd, "missing")])
    check(p.returncode == 1 and "missing" in p.stderr, "stat of a missing file: exit 1")


# ------------------------------------------------------ madvseqctl, daemon

class Daemon:
    def __init__(self, wd, env=None, stderr_path=None):
        self.sock = os.path.join(wd, "d.sock")
        self.conf = os.path.join(wd, "d.conf")
        self.log = stderr_path or os.path.join(wd, "d.log")
        with open(self.conf, "w") as f:
            f.write("[/*]\nmode = pageout\n")
        e = dict(os.environ)
        e.pop("LD_PRELOAD", None)
        e.pop("NOTIFY_SOCKET", None)
        e.pop("JOURNAL_STREAM", None)
        e.update(env or {})
        self.logf = open(self.log, "a")
        self.p = subprocess.Popen([tool("MADVSEQD"), "-s", self.sock, "-c", self.conf, "-l", "info"],
                                  env=e, stdout=self.logf, stderr=self.logf)
        atexit.register(self.stop)
        for _ in range(200):
            if os.path.exists(self.sock):
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.025)
        raise SystemExit("FAIL: the daemon did not start:\n" + open(self.log).read())

    def ctl(self, *args):
        return run([tool("MADVSEQCTL"), "-s", self.sock] + list(args))

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            self.p.wait()


def shimmed_streamer(d, path, hold_ms=3000):
    e = dict(os.environ)
    e.update({"MADVSEQ_SOCKET": d.sock, "LD_PRELOAD": os.environ.get("MADVSEQ_PRELOAD") or tool("MADVSEQ_LIB")})
    if os.environ.get("MADVSEQ_PRELOAD"):
        e["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    s = subprocess.Popen([tool("STREAMER"), path, "0", str(hold_ms)], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    atexit.register(lambda: s.poll() is None and s.kill())
    return s


def case_ctl():
    need_root()
    wd = disk_workdir()
    p = run([tool("MADVSEQCTL"), "--version"])
    check(p.returncode == 0 and p.stdout.startswith("madvseqctl " + os.environ["MESON_VERSION"]),
          "madvseqctl --version", p.stdout + p.stderr)
    d = Daemon(wd)
    big = os.path.join(wd, "big")
    make_file(big, 64)
    # Held long after its stream, so every query below still finds it
    # (a sanitizer build is slow); killed at the end.
    s = shimmed_streamer(d, big, hold_ms=60000)
    status = ""
    for _ in range(100):
        status = d.ctl("status").stdout
        if big in status:
            break
        time.sleep(0.05)
    line = [l for l in status.splitlines() if "pid %d shim (daemon-streamer) in /" % s.pid in l]
    check(len(line) == 1,
          "status names command, pid and cgroup", status)
    check(re.search(r"^    %s: dropped " % re.escape(big), status, re.M) is not None,
          "status names the file", status)
    # (The policy line keeps the configuration's own syntax: lag=16M.)
    sizes = "\n".join(l for l in status.splitlines() if "dropped" in l or "rss" in l)
    check(not re.search(r"\b\d+[KMG]\b", sizes) and re.search(r"\d\.\d [KMG]iB|\b\d+ B\b", sizes),
          "status sizes are IEC (512.0 MiB), not 524288K", status)
    if shutil.which("jq"):
        for args in (["status", "--format=json"], ["stats", "--format=json"]):
            p = d.ctl(*args)
            q = run(["jq", "-e", ".streams[] | select(.pid == %d) | .file" % s.pid], input=p.stdout)
            check(p.returncode == 0 and q.returncode == 0 and big in q.stdout,
                  "%s parses with jq and names the stream's file" % " ".join(args), p.stdout + q.stderr)
        p = d.ctl("status", "--format=json")
        q = run(["jq", "-e", '.version == "%s" and .clients.shim >= 1' % os.environ["MESON_VERSION"]],
                input=p.stdout)
        check(q.returncode == 0, "JSON: version and clients", p.stdout)
    else:
        print("note: jq not installed, JSON parsed with Python only")
    try:
        json.loads(d.ctl("status", "--format=json").stdout)
        check(True, "status --format=json is JSON")
    except ValueError as e:
        check(False, "status --format=json is JSON: %s" % e)
    # Helper stat with the daemon: the stream and its pid.
    p = run([tool("MADVSEQ_HELPER_BIN"), "stat", "--json", "--socket", d.sock, big])
    doc = json.loads(p.stdout)
    check(doc["daemon"] and any(x["pid"] == s.pid for x in doc["files"][0]["streams"] or []),
          "madvseq stat lists the process streaming the file", p.stdout)
    prom = d.ctl("stats", "--format=prometheus").stdout
    if shutil.which("promtool"):
        q = run(["promtool", "check", "metrics"], input=prom)
        check(q.returncode == 0 and not q.stdout.strip() and not q.stderr.strip(),
              "promtool check metrics: clean", q.stdout + q.stderr)
    else:
        print("note: promtool not installed (Debian package prometheus)")
    out = os.path.join(wd, "madvseq.prom")
    p = d.ctl("stats", "--format=prometheus", "--output=" + out)
    left = [n for n in os.listdir(wd) if n.startswith("madvseq.prom.")]
    check(p.returncode == 0 and "madvseq_dropped_bytes_total" in open(out).read() and not left,
          "--output writes the textfile through a rename, no temporary left", p.stderr)
    os.chmod(wd, 0o755)
    p = d.ctl("stats", "--format=prometheus", "--output=/nonexistent/madvseq.prom")
    check(p.returncode == 1 and "/nonexistent/madvseq.prom" in p.stderr, "--output to a missing directory: 1")
    s.kill()
    s.wait()


def case_notify_status():
    """STATUS= carries live numbers for systemctl status."""
    need_root()
    wd = disk_workdir()
    ns = os.path.join(wd, "notify")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(ns)
    srv.settimeout(0.2)
    d = Daemon(wd, env={"NOTIFY_SOCKET": ns})
    big = os.path.join(wd, "big")
    make_file(big, 32)
    s = shimmed_streamer(d, big, hold_ms=2500)
    seen = []
    t0 = time.time()
    while time.time() - t0 < 6:
        try:
            seen.append(srv.recv(4096).decode())
        except socket.timeout:
            pass
        if any(re.search(r"STATUS=1 clients \(1 shim, 0 discovered\), 1 regions; dropped", m) for m in seen):
            break
    check(any(re.search(r"STATUS=1 clients \(1 shim, 0 discovered\), 1 regions; dropped \S+ \S*B", m)
              for m in seen), "STATUS= with clients, regions and bytes dropped", "\n".join(seen))
    s.kill()
    s.wait()


def case_journal_stream():
    """<N> prefixes only when stderr is the stream JOURNAL_STREAM names."""
    need_root()
    wd = workdir()
    log = os.path.join(wd, "stderr")
    open(log, "w").close()
    st = os.stat(log)
    d = Daemon(wd, env={"JOURNAL_STREAM": "%d:%d" % (st.st_dev, st.st_ino)}, stderr_path=log)
    d.stop()
    first = open(log).readline()
    check(first.startswith("<6>"), "stderr is the journal stream: '<6>' prefix", first)
    log2 = os.path.join(wd, "stderr2")
    d = Daemon(wd, env={"JOURNAL_STREAM": "%d:%d" % (st.st_dev, st.st_ino)}, stderr_path=log2)
    d.stop()
    first = open(log2).readline()
    check(first.startswith("madvseqd: info: "), "inherited JOURNAL_STREAM, other stderr: plain lines", first)


def case_resolve_unlimited():
    for layout, pid in (("v1", "101"), ("v2", "202")):
        d = os.path.join(FIXTURES, layout)
        p = run([tool("MADVSEQD"), "--proc-root", d + "/proc", "--cgroup-root", d + "/cgroup", "-c",
                 os.path.join(SRC, "contrib", "madvseqd.conf"), "--resolve", pid])
        check("limit unlimited" in p.stdout and "limit 0" not in p.stdout,
              "--resolve %s/%s: an unlimited cgroup says 'unlimited'" % (layout, pid), p.stdout + p.stderr)


# ------------------------------------------------------------ docs, version

def case_man_lint():
    need("mandoc", "mandoc")
    pages = os.environ["MAN_PAGES"].split(":")
    check(len(pages) >= 5, "%d man pages" % len(pages))
    for m in pages:
        p = run(["mandoc", "-Tlint", "-Wwarning", m])
        check(p.returncode == 0 and not p.stdout.strip(), "mandoc -Tlint %s" % os.path.basename(m),
              p.stdout + p.stderr)
    text = open([m for m in pages if m.endswith("libmadvseq.7")][0]).read()
    check("MADVSEQ_DAEMON" in text, "libmadvseq(7) documents MADVSEQ_DAEMON")
    d8 = open([m for m in pages if m.endswith("madvseqd.8")][0]).read()
    files = d8[d8.index(".SH FILES"):]
    files = files[:files.index("\n.SH ", 1)]
    check("When a client exits" not in files, "madvseqd(8): 'When a client exits' is not under FILES")


def case_version():
    v = os.environ["MESON_VERSION"]
    outs = [run([tool("MADVSEQD"), "--version"]).stdout, run([tool("MADVSEQCTL"), "--version"]).stdout,
            run([tool("MADVSEQ_HELPER_BIN"), "--version"]).stdout,
            run(["sh", tool("MADVSEQ_WRAPPER"), "--version"]).stdout]
    for o in outs:
        check(re.search(r"\b%s\b" % re.escape(v), o) is not None, "version %s in '%s'" % (v, o.strip()))
    for m in os.environ["MAN_PAGES"].split(":"):
        th = open(m).readline()
        check('"libmadvseq %s"' % v in th, "%s: %s" % (os.path.basename(m), th.strip()))


def case_log_levels():
    p = run([tool("TEST_LOG")])
    print(p.stdout + p.stderr)
    check(p.returncode == 0, "log levels and journal detection (unit)")


def case_enable_disable():
    """madvseq enable/disable UNIT against a scratch unit directory: the
    drop-in prepends the library to the unit's own LD_PRELOAD (a template
    instance's too), systemd-analyze verify passes on the result, and
    disable leaves the directory as it was."""
    need("systemd-analyze", "systemd")
    lib = tool("MADVSEQ_LIB")
    w = ["sh", tool("MADVSEQ_WRAPPER")]
    d = tempfile.mkdtemp(prefix="msq-units-")
    try:
        with open(os.path.join(d, "backup.service"), "w") as f:
            f.write("[Unit]\nDescription=nightly backup\n[Service]\nType=oneshot\n"
                    "Environment=LD_PRELOAD=/usr/lib/libother.so TZ=UTC\nExecStart=/bin/true\n")
        with open(os.path.join(d, "postgresql@.service"), "w") as f:
            f.write("[Unit]\nDescription=PostgreSQL %i\n[Service]\nExecStart=/bin/sleep 1\n")
        before = sorted(os.listdir(d))
        p = run(w + ["enable", "--unit-dir", d, "backup.service"], env={"MADVSEQ_LIBRARY": lib})
        print(p.stdout + p.stderr)
        dropin = os.path.join(d, "backup.service.d", "50-madvseq.conf")
        body = open(dropin).read() if os.path.exists(dropin) else ""
        print(body)
        check(p.returncode == 0 and 'Environment="LD_PRELOAD=%s:/usr/lib/libother.so"' % lib in body
           and "Environment=MADVSEQ_READ=all" in body,
           "enable wrote a drop-in that prepends the library to the unit's LD_PRELOAD")
        check("needed: systemctl daemon-reload" in p.stdout, "enable says a daemon-reload is needed")
        v = run(["systemd-analyze", "verify", os.path.join(d, "backup.service")],
                env={"SYSTEMD_UNIT_PATH": d + ":"})
        print("systemd-analyze verify: rc %d %s" % (v.returncode, (v.stdout + v.stderr).strip() or "(no output)"))
        check(v.returncode == 0 and "50-madvseq" not in v.stderr, "systemd-analyze verify passes on the result")
        p = run(w + ["enable", "--unit-dir", d, "backup"], env={"MADVSEQ_LIBRARY": lib})
        check("unchanged" in p.stdout and "no daemon-reload or restart needed" in p.stdout,
           "enable again: unchanged, nothing needed")
        p = run(w + ["enable", "--read=advised", "--unit-dir", d, "postgresql@15-main.service"],
                env={"MADVSEQ_LIBRARY": lib})
        pg = os.path.join(d, "postgresql@15-main.service.d", "50-madvseq.conf")
        check(p.returncode == 0 and os.path.exists(pg) and "MADVSEQ_READ=advised" in open(pg).read()
           and 'LD_PRELOAD=%s"' % lib in open(pg).read(), "a template instance, with its own read mode")
        v = run(["systemd-analyze", "verify", os.path.join(d, "postgresql@15-main.service")],
                env={"SYSTEMD_UNIT_PATH": d + ":"})
        check(v.returncode == 0, "systemd-analyze verify passes on the instance (%s)" % v.stderr.strip())
        for args, err in ((["--read=fast", "backup"], "--read: 'fast'"), (["backup.timer"], "not a service"),
                          (["../x"], "not a unit name"), ([], "which unit?")):
            p = run(w + ["enable", "--unit-dir", d] + args, env={"MADVSEQ_LIBRARY": lib})
            check(p.returncode == 2 and err in p.stderr, "enable %s refused (%s)" % (" ".join(args), p.stderr.strip()))
        for u in ("backup.service", "postgresql@15-main.service"):
            p = run(w + ["disable", "--unit-dir", d, u])
            check(p.returncode == 0 and "removed" in p.stdout and "daemon-reload" in p.stdout, "disable %s" % u)
        p = run(w + ["disable", "--unit-dir", d, "backup.service"])
        check("nothing to remove" in p.stdout and "no daemon-reload" in p.stdout, "disable again: nothing to do")
        check(sorted(os.listdir(d)) == before, "the unit directory is as it was")
    finally:
        shutil.rmtree(d)


CASES = {
    "enable-disable": case_enable_disable,
    "wrapper-options": case_wrapper_options,
    "wrapper-bad-value-once": case_wrapper_bad_value_once,
    "wrapper-stats-path": case_wrapper_stats_path,
    "wrapper-static": case_wrapper_static,
    "wrapper-report": case_wrapper_report,
    "stat-fincore": case_stat_fincore,
    "ctl": case_ctl,
    "notify-status": case_notify_status,
    "journal-stream": case_journal_stream,
    "resolve-unlimited": case_resolve_unlimited,
    "man-lint": case_man_lint,
    "version": case_version,
    "log-levels": case_log_levels,
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        sys.exit("usage: test_tools.py " + "|".join(CASES))
    CASES[sys.argv[1]]()
    sys.exit(1 if fails else 0)
