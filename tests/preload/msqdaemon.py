# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real madvseqd on a private socket, for preload tests that need the
shim connected to a daemon (MADVSEQD names the built daemon)."""

import os
import socket
import subprocess
import sys
import time


def available():
    exe = os.environ.get("MADVSEQD")
    return bool(exe) and os.path.exists(exe) and os.geteuid() == 0


def serving(d, env):
    """A Daemon on a private socket in directory d, with env set for the
    library to reach it (MADVSEQ_SOCKET); skips the test where none can run."""
    if not available():
        from msqtest import skip
        skip("needs root and MADVSEQD (the built daemon)")
    daemon = Daemon(d, os.path.join(d, "madvseqd.sock"))
    env["MADVSEQ_SOCKET"] = daemon.sock
    return daemon


class Daemon:
    """Started on construction, listening on sock; stop() ends it."""

    def __init__(self, d, sock, conf="[/*]\nmode = pageout\n"):
        exe = os.environ["MADVSEQD"]
        self.sock = sock
        path = os.path.join(d, "madvseqd.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.log = open(os.path.join(d, "madvseqd.log"), "w")
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        self.p = subprocess.Popen([exe, "-s", sock, "-c", path, "-l", "debug"], env=env,
                                  stdout=self.log, stderr=self.log)
        for _ in range(400):
            if self.p.poll() is not None:
                break
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
                    s.connect(sock)
                return
            except OSError:
                time.sleep(0.025)
        self.stop()
        print(open(self.log.name).read())
        sys.exit("FAIL: the daemon did not start")

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()
        return self.p.returncode

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.stop()
