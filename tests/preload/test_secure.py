#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Installed for every program (/etc/ld.so.preload), the library runs inside
setuid programs with the caller's environment.  There it must hand the
caller nothing: it reads no MADVSEQ_* variable, writes no file, talks to no
socket but root's daemon, prints nothing, and works with its built-in
defaults.

The test runs in a private mount namespace: a tmpfs on /mnt holds a copy of
the library, a setuid-root program that streams two files (setuid_stream.c),
a root-owned canary of mode 0600, and a directory of nobody's with a
symlink to the canary, a listening socket and fake /proc and cgroup trees;
an overlay over /etc gives that namespace an ld.so.preload naming the
library.  Nothing of the host changes.

For each variable the library knows (read from its own strings, so a new
variable cannot be left out) the setuid program runs as nobody with a
hostile value, and the test checks: no file created or changed, no
connection to nobody's socket, nothing on stderr, the same output and exit
status as a run without the variable, and the built-in policy at work (the
streamed files are dropped behind the reader).  The same variables given to
a copy without the setuid bit show that each would take effect there, so
the checks can fail.  Then, outside secure execution: a stats file is
refused behind a symlink, when another user owns it, when it is a FIFO; a
socket whose listener runs as another user is not the daemon; and a root
service started with the library gets the policy its environment asks for.

usage: test_secure.py SETUID_STREAM [inner]"""

import grp
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import sys

from msqtest import M, Workdir, cached, check, done, evict, library, make_file, skip

SIZE = 64 * M
MNT = "/mnt"  # a private tmpfs inside the test's mount namespace
NOBODY = "nobody"

# Hostile values per variable; every MADVSEQ_* name in the library's strings
# must appear here.
HOSTILE = [
    ("MADVSEQ_STATS", MNT + "/canary"),
    ("MADVSEQ_STATS", MNT + "/nobody/link"),
    ("MADVSEQ_STATS", MNT + "/new.%p"),
    ("MADVSEQ_SOCKET", MNT + "/nobody/sock"),
    ("MADVSEQ_DAEMON", "bogus"),
    ("MADVSEQ_DEBUG", "1"),
    ("MADVSEQ_MODE", "off"),
    ("MADVSEQ_READ", "off"),
    ("MADVSEQ_LAG", "bogus"),
    ("MADVSEQ_INTERVAL", "bogus"),
    ("MADVSEQ_WRITE_FREE", "bogus"),
    ("MADVSEQ_DONTCACHE", "bogus"),
    ("MADVSEQ_PAGEMAP_SCAN", "bogus"),
    ("MADVSEQ_PROCFS", MNT + "/nobody/proc"),
    ("MADVSEQ_CGROUPFS", MNT + "/nobody/cgroup"),
]
TEST_HOOKS = ("MADVSEQ_PROCFS", "MADVSEQ_CGROUPFS", "MADVSEQ_PAGEMAP_SCAN")


def outer(prog):
    if os.geteuid() != 0:
        skip("needs root (mount namespace, overlay of /etc, a setuid-root program)")
    if not shutil.which("unshare"):
        skip("unshare(1) is missing")
    if not os.path.isdir(MNT):
        skip(MNT + " is missing (the private tmpfs goes there)")
    try:
        pwd.getpwnam(NOBODY)
    except KeyError:
        skip("no user " + NOBODY)
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "--",
                        sys.executable, os.path.abspath(__file__), prog, "inner"])
    sys.exit(p.returncode)


class Listener:
    """A SOCK_SEQPACKET listener run as nobody: counts connections and bytes."""

    CODE = r"""
import os, select, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1]); s.listen(64); s.setblocking(False)
conns, nconn, nbytes = [], 0, 0
print("ready", flush=True)
def drain():
    global nconn, nbytes
    while True:
        try:
            c, _ = s.accept()
        except BlockingIOError:
            break
        c.setblocking(False); conns.append(c); nconn += 1
    for c in list(conns):
        while True:
            try:
                b = c.recv(65536)
            except BlockingIOError:
                break
            if not b:
                conns.remove(c); c.close(); break
            nbytes += len(b)
for line in sys.stdin:
    drain()
    print(nconn, nbytes, flush=True)
    if line.strip() == "reset":
        nconn = nbytes = 0
"""

    def __init__(self, path, user):
        # The system's interpreter: one under root's home is out of nobody's reach.
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        self.p = subprocess.Popen([py, "-c", self.CODE, path], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, user=user,
                                  group=grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name,
                                  extra_groups=[], env={"PATH": "/usr/bin:/bin"})
        assert self.p.stdout.readline().strip() == "ready"

    def ask(self, what):
        self.p.stdin.write(what + "\n")
        self.p.stdin.flush()
        n, b = self.p.stdout.readline().split()
        return int(n), int(b)

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def tree(root):
    """Every file under root: path -> (type, mode, uid, size, mtime, content)."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            body = b""
            if stat.S_ISREG(st.st_mode) and st.st_size < M:
                with open(p, "rb") as f:
                    body = f.read()
            out[p] = (stat.S_IFMT(st.st_mode), st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns, body)
    return out


def own(path, user, mode):
    pw = pwd.getpwnam(user)
    os.chown(path, pw.pw_uid, pw.pw_gid, follow_symlinks=False)
    if not os.path.islink(path):
        os.chmod(path, mode)


def library_names(lib):
    with open(lib, "rb") as f:
        return sorted(set(m.decode() for m in re.findall(rb"MADVSEQ_[A-Z_]+", f.read())))


class Setup:
    def __init__(self, prog, wd):
        os.chmod(wd.path, 0o755)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "secure-test", MNT], check=True)
        for d in ("lib", "bin", "nobody", "ov/upper", "ov/work", "rootdir"):
            os.makedirs(os.path.join(MNT, d))
        # The library (and, in the sanitizer build, the runtimes it needs
        # first), copied where nobody can reach it.
        preload = os.environ.get("MADVSEQ_PRELOAD") or library()
        self.preload = []
        for lib in preload.split(":"):
            if os.path.basename(lib).startswith("libmadvseq"):
                dst = os.path.join(MNT, "lib", os.path.basename(lib))
                shutil.copy(lib, dst)
                os.chmod(dst, 0o644)
                self.lib = dst
                lib = dst
            self.preload.append(lib)
        self.setuid = os.path.join(MNT, "bin", "setuid_stream")
        self.plain = os.path.join(MNT, "bin", "plain_stream")
        shutil.copy(prog, self.setuid)
        shutil.copy(prog, self.plain)
        os.chown(self.setuid, 0, 0)
        os.chmod(self.setuid, 0o4755)
        os.chmod(self.plain, 0o755)
        with open(MNT + "/canary", "w") as f:
            f.write("canary\n")
        os.chmod(MNT + "/canary", 0o600)
        with open(MNT + "/rootdir/target", "w") as f:
            f.write("root's file\n")
        nb = MNT + "/nobody"
        own(nb, NOBODY, 0o755)
        os.symlink(MNT + "/canary", nb + "/link")
        os.symlink(MNT + "/rootdir/target", nb + "/link-target")
        with open(nb + "/theirs", "w") as f:
            f.write("nobody's file\n")
        os.mkfifo(nb + "/fifo")
        # Fake trees that would make the library step aside (the kernel's
        # drop-behind "on"), were they read.
        os.makedirs(nb + "/proc/sys/vm")
        with open(nb + "/proc/sys/vm/seq_read_dropbehind", "w") as f:
            f.write("1\n")
        os.makedirs(nb + "/proc2/self")
        with open(nb + "/proc2/self/cgroup", "w") as f:
            f.write("0::/x\n")
        os.makedirs(nb + "/cgroup/x")
        with open(nb + "/cgroup/x/memory.seq_read_dropbehind", "w") as f:
            f.write("1\n")
        for d, dirs, files in os.walk(nb):
            for n in dirs + files:
                own(os.path.join(d, n), NOBODY, 0o755 if n in dirs else 0o644)
        own(nb + "/fifo", NOBODY, 0o666)
        # The streamed files, on a real disk (their page cache is what is
        # measured), nobody's own, so the policy may drop them for nobody
        # too (MADV_PAGEOUT acts on files the caller may write).
        self.map_file = make_file(os.path.join(wd.path, "map.bin"), SIZE)
        self.read_file = make_file(os.path.join(wd.path, "read.bin"), SIZE)
        for f in (self.map_file, self.read_file):
            own(f, NOBODY, 0o644)
        # ld.so.preload through an overlay of /etc.
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        "lowerdir=/etc,upperdir=%s/ov/upper,workdir=%s/ov/work" % (MNT, MNT), "/etc"],
                       check=True)
        with open("/etc/ld.so.preload", "w") as f:
            f.write(" ".join(self.preload) + "\n")
        self.listener = Listener(nb + "/sock", NOBODY)

    def run(self, env_extra, setuid=True, user=NOBODY):
        """Runs the program; returns what a case compares."""
        evict(self.map_file)
        evict(self.read_file)
        self.listener.ask("reset")
        before = tree(MNT)
        env = {"PATH": "/usr/bin:/bin"}
        env.update(env_extra)
        kw = {}
        if user != "root":
            pw = pwd.getpwnam(user)
            kw = dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
        p = subprocess.run([self.setuid if setuid else self.plain, self.map_file, self.read_file],
                           env=env, cwd=MNT + "/nobody", capture_output=True, text=True,
                           timeout=60, **kw)
        conns, nbytes = self.listener.ask("report")
        after = tree(MNT)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        return dict(rc=p.returncode, out=p.stdout.strip(), err=p.stderr.strip(), changed=changed,
                    conns=conns, bytes=nbytes, map=cached(self.map_file) / SIZE,
                    read=cached(self.read_file) / SIZE)


def dropped(r):
    return r["map"] <= 0.5 and r["read"] <= 0.5


def inner(prog):
    hooks = os.environ.get("MADVSEQ_TEST_HOOKS") == "1"
    with Workdir("secure") as wd:
        s = Setup(prog, wd)
        try:
            cases(s, hooks)
        finally:
            s.listener.close()
            subprocess.run(["umount", "/etc"])
            subprocess.run(["umount", MNT])
    done()


def cases(s, hooks):
    names = library_names(s.lib)
    listed = set(n for n, _ in HOSTILE)
    check(set(names) <= listed, "every MADVSEQ_* variable in the library is tried: %s"
          % ", ".join(sorted(set(names) - listed) or ["(all)"]))
    if not hooks:
        check(not set(TEST_HOOKS) & set(names),
              "a library built without test hooks has none of their names: %s"
              % ", ".join(sorted(set(TEST_HOOKS) & set(names)) or ["(none)"]))
    canary = tree(MNT + "/canary")

    ref = s.run({})
    check(ref["rc"] == 0 and ref["err"] == "", "setuid run without variables: exit 0, no output")
    m = re.match(r"(\w+) (\w+) euid=0 secure=1 shim=1$", ref["out"])
    check(m is not None, "it ran setuid root, in secure execution, with the library loaded: "
          + ref["out"])
    check(dropped(ref), "and the built-in policy dropped behind both streams (map %.2f, read %.2f "
          "cached)" % (ref["map"], ref["read"]))

    rows, table = HOSTILE + [("(all at once)", None)], []
    for name, value in rows:
        env = dict(HOSTILE) if value is None else {name: value}
        if value is None:
            env["MADVSEQ_STATS"] = MNT + "/canary"
        r = s.run(env)
        same = r["rc"] == ref["rc"] and r["out"] == ref["out"]
        table.append("%-21s %-24s %-6s %-6s %-7s %-7s %s" % (
            name, (value or "")[:24], "none" if not r["changed"] else "CHANGED",
            "none" if not r["conns"] else "%d" % r["conns"], "none" if not r["err"] else "PRINTED",
            "same" if same else "DIFFERS", "built-in" if dropped(r) else
            "NOT BUILT-IN (map %.2f read %.2f)" % (r["map"], r["read"])))
        what = "%s=%s in the setuid program" % (name, value or "(each)")
        check(not r["changed"], what + ": no file created or changed " + " ".join(r["changed"]))
        check(r["conns"] == 0, what + ": no connection to nobody's socket")
        check(r["err"] == "", what + ": nothing printed: " + r["err"][:200])
        check(same, what + ": the same output and exit status")
        check(dropped(r), what + ": the built-in policy, not the variable's")
    print("\nthe setuid program run as nobody, one hostile variable at a time:")
    print("%-21s %-24s %-6s %-6s %-7s %-7s %s" % ("variable", "value", "file", "conn", "output",
                                                   "result", "policy"))
    print("\n".join(table) + "\n")
    check(tree(MNT + "/canary") == canary, "the root-owned canary is unchanged")

    # Controls: the same variables where they are the user's own (no setuid
    # bit), so each check above could have failed.
    print("\ncontrols: the program without the setuid bit, as nobody")
    plain = s.run({}, setuid=False)
    check(plain["rc"] == 0 and dropped(plain), "without variables: exit 0, dropped behind")
    r = s.run({"MADVSEQ_STATS": MNT + "/nobody/stats.%p"}, setuid=False)
    check(any(re.search(r"/nobody/stats\.\d+$", c) for c in r["changed"]),
          "MADVSEQ_STATS: the user's stats file is written")
    r = s.run({"MADVSEQ_SOCKET": MNT + "/nobody/sock"}, setuid=False)
    check(r["conns"] >= 1 and r["bytes"] > 0,
          "MADVSEQ_SOCKET: the user's own daemon gets the hello (%d connections, %d bytes)"
          % (r["conns"], r["bytes"]))
    r = s.run({"MADVSEQ_DEBUG": "1"}, setuid=False)
    check("libmadvseq" in r["err"], "MADVSEQ_DEBUG: the library prints")
    for name in ("MADVSEQ_DAEMON", "MADVSEQ_LAG", "MADVSEQ_INTERVAL", "MADVSEQ_WRITE_FREE",
                 "MADVSEQ_DONTCACHE"):
        r = s.run({name: "bogus"}, setuid=False)
        check(name in r["err"], name + "=bogus: the library warns")
    for env, what in (({"MADVSEQ_MODE": "off"}, "map"), ({"MADVSEQ_READ": "off"}, "read")):
        r = s.run(env, setuid=False)
        check(r[what] > 0.9, "%s: the policy changes (%s %.2f cached)" % (env, what, r[what]))
    if hooks:
        r = s.run({"MADVSEQ_PROCFS": MNT + "/nobody/proc"}, setuid=False)
        check(r["map"] > 0.9, "MADVSEQ_PROCFS (test build): the library steps aside (map %.2f)"
              % r["map"])
        r = s.run({"MADVSEQ_PROCFS": MNT + "/nobody/proc2", "MADVSEQ_CGROUPFS": MNT + "/nobody/cgroup"},
                  setuid=False)
        check(r["map"] > 0.9, "MADVSEQ_CGROUPFS (test build): the library steps aside (map %.2f)"
              % r["map"])
        r = s.run({"MADVSEQ_PAGEMAP_SCAN": "bogus"}, setuid=False)
        check("MADVSEQ_PAGEMAP_SCAN" in r["err"], "MADVSEQ_PAGEMAP_SCAN=bogus (test build): warns")
    else:
        r = s.run({"MADVSEQ_PROCFS": MNT + "/nobody/proc"}, setuid=False)
        check(dropped(r), "MADVSEQ_PROCFS: not read by a library built without test hooks")

    print("\noutside secure execution")
    # A root service keeps the policy its own environment asks for.
    r = s.run({"MADVSEQ_MODE": "off", "MADVSEQ_STATS": MNT + "/rootdir/stats"}, setuid=False,
              user="root")
    body = open(MNT + "/rootdir/stats").read() if os.path.exists(MNT + "/rootdir/stats") else ""
    check(r["map"] > 0.9 and "mode=off" in body,
          "a root service with MADVSEQ_MODE=off and MADVSEQ_STATS gets both (map %.2f)" % r["map"])
    # Stats files that are not the user's own.
    for path, why in ((MNT + "/nobody/link-target", "a symlink"),
                      (MNT + "/nobody/theirs", "another user's file"),
                      (MNT + "/nobody/fifo", "a FIFO")):
        r = s.run({"MADVSEQ_STATS": path}, setuid=False, user="root")
        check(r["rc"] == 0 and not r["changed"], "MADVSEQ_STATS at %s: nothing written (%s)"
              % (why, " ".join(r["changed"]) or "no change"))
        check(r["err"].count("MADVSEQ_STATS") == 1, "and one warning: " + r["err"][:200])
    with open(MNT + "/rootdir/own", "w") as f:
        f.write("x" * 100000)
    s.run({"MADVSEQ_STATS": MNT + "/rootdir/own"}, setuid=False, user="root")
    body = open(MNT + "/rootdir/own").read()
    check(body.startswith("pid=") and "xxxx" not in body and len(body) < 100000,
          "the user's own stats file is rewritten whole")
    # A listener of another user's is not the daemon.
    r = s.run({"MADVSEQ_SOCKET": MNT + "/nobody/sock"}, setuid=False, user="root")
    check(r["conns"] == 0 and r["bytes"] == 0,
          "root's process does not connect to nobody's socket (%d connections, %d bytes)"
          % (r["conns"], r["bytes"]))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[2] == "inner":
        inner(sys.argv[1])
    else:
        outer(sys.argv[1])
