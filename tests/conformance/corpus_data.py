# SPDX-License-Identifier: LGPL-2.1-or-later
"""The corpus's input data: generated once from fixed seeds (the same bytes
on every machine), reused by later runs, a few tens of MiB in all:

  text.txt      32 MiB of lines of words;  text-16m.txt, text-8m.txt: its
                first 16 and 8 MiB
  blob.bin      32 MiB of pseudo-random bytes
  tree/         ~24 MiB in 400 files under 20 directories (text, binary,
                an executable, a symlink);  tree.tar: it, as a tar file
  repo/         a git repository of tree/'s text in three commits, fixed dates
  db.sqlite     an SQLite database of ~20 MiB
  chunks/       8 pieces of text-16m.txt, the make case's inputs
  scripts/, java/, make/   the programs of the perl, python, edges, node,
                java and make cases (java/Sum.class compiled where javac is)

It is generated without the shim, by this Python and by the plain
programs (tar, git, javac)."""

import fcntl
import itertools
import os
import random
import shutil
import sqlite3
import subprocess

from conformance import plain_env

PYTHON = "/usr/bin/python3"
VERSION = "4"
M = 1 << 20

WORDS_PL = r"""# Word frequencies and an MD5 of a text file, read line by line.
use strict; use warnings; use Digest::MD5;
my %n; my $lines = 0;
open(my $f, '<', $ARGV[0]) or die "$ARGV[0]: $!";
while (my $l = <$f>) { $lines++; $n{$_}++ for split ' ', $l; }
close $f;
open($f, '<', $ARGV[0]) or die; binmode $f;
my $md5 = Digest::MD5->new->addfile($f)->hexdigest; close $f;
print "lines $lines words ", scalar(keys %n), " md5 $md5\n";
my @top = (sort { $n{$b} <=> $n{$a} || $a cmp $b } keys %n)[0..19];
print "$_ $n{$_}\n" for @top;
"""

MMAPSUM_PY = r'''"""Hashes files through mmap + MADV_SEQUENTIAL, through read() after
POSIX_FADV_SEQUENTIAL, in a thread, and in a forked child."""
import hashlib, mmap, os, sys, threading

def by_mmap(path):
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    m.madvise(mmap.MADV_SEQUENTIAL)
    h = hashlib.sha256()
    for off in range(0, len(m), 1 << 20):
        h.update(m[off:off + (1 << 20)])
    m.close()
    return h.hexdigest()

def by_read(path, start=0):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    os.lseek(fd, start, os.SEEK_SET)
    h = hashlib.sha256()
    while True:
        b = os.read(fd, 128 << 10)
        if not b:
            break
        h.update(b)
    os.close(fd)
    return h.hexdigest()

for path in sys.argv[1:]:
    name = os.path.basename(path)
    print("mmap", by_mmap(path), name)
    print("read", by_read(path), name)
    got = {}
    t = threading.Thread(target=lambda: got.update(t=by_mmap(path)))
    t.start()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, by_read(path, os.path.getsize(path) // 2).encode())
        os._exit(0)
    os.close(w)
    child = b""
    while True:
        b = os.read(r, 4096)
        if not b:
            break
        child += b
    os.close(r)
    _, status = os.waitpid(pid, 0)
    t.join()
    print("thread", got["t"], name)
    print("child", child.decode(), "status", status, name)
'''

EDGES_PY = r'''"""System calls at their edges, on a copy of a data file: every result
(return value or errno) is printed, then the file's checksum."""
import errno, hashlib, os, shutil, sys

M = 1 << 20
src, work = sys.argv[1], sys.argv[2]
shutil.copyfile(src, work)   # (sendfile or copy_file_range)

def show(what, f):
    try:
        r = f()
        if isinstance(r, bytes):
            r = "%d bytes %s" % (len(r), hashlib.sha256(r).hexdigest()[:16])
        print(what, "->", r)
    except OSError as e:
        print(what, "-> errno", errno.errorcode.get(e.errno, e.errno))

fd = os.open(work, os.O_RDWR)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
size = os.fstat(fd).st_size
# Overlapping ranges within one file: the kernel refuses (EINVAL).
show("copy_file_range overlapping", lambda: os.copy_file_range(fd, fd, 32 * M, 0, 16 * M))
show("copy_file_range overlapping back", lambda: os.copy_file_range(fd, fd, 12 * M, 16 * M, 8 * M))
# Not overlapping, within the file; and from past its end.
show("copy_file_range disjoint", lambda: os.copy_file_range(fd, fd, 2 * M, 1 * M, 20 * M))
show("copy_file_range past EOF", lambda: os.copy_file_range(fd, fd, 4096, size + 4096, 0))
show("pread past EOF", lambda: os.pread(fd, 4096, size + 10))
show("pread at EOF-100", lambda: os.pread(fd, 4096, size - 100))
show("read 0 bytes", lambda: os.read(fd, 0))
show("read bad fd", lambda: os.read(9999, 10))
show("pread negative offset", lambda: os.pread(fd, 10, -1))
d = os.open(os.path.dirname(work) or ".", os.O_RDONLY)
show("read a directory", lambda: os.read(d, 10))
os.close(d)
r, w = os.pipe()
os.write(w, b"x" * 100)
show("pread a pipe", lambda: os.pread(r, 10, 0))
show("read a pipe", lambda: os.read(r, 1000))
os.close(r); os.close(w)
wo = os.open(work, os.O_WRONLY)
show("read a write-only fd", lambda: os.read(wo, 10))
os.close(wo)
ap = os.open(work, os.O_RDWR | os.O_APPEND)
show("write O_APPEND", lambda: os.write(ap, b"appended\n"))
show("pwrite O_APPEND", lambda: os.pwrite(ap, b"pwritten\n", 0))
show("read O_APPEND at 0", lambda: os.pread(ap, 64, 0))
os.close(ap)
show("sendfile to self", lambda: os.sendfile(fd, fd, 0, 4096))
show("ftruncate", lambda: os.ftruncate(fd, size - 3 * M))
show("read after truncate", lambda: os.pread(fd, 8192, size - 3 * M - 4096))
h = hashlib.sha256()
os.lseek(fd, 0, os.SEEK_SET)
while True:
    b = os.read(fd, 1 << 16)
    if not b:
        break
    h.update(b)
os.close(fd)
show("close again", lambda: os.close(fd))
print("file", os.path.getsize(work), h.hexdigest())
'''

SUM_JS = r"""// Hashes files through streams and readFileSync, gzips the last one.
const fs = require('fs'), crypto = require('crypto'), zlib = require('zlib'), path = require('path');
const { pipeline } = require('stream/promises');
function hash(p) {
  return new Promise((res, rej) => {
    const h = crypto.createHash('sha256');
    fs.createReadStream(p, { highWaterMark: 1 << 16 }).on('data', d => h.update(d))
      .on('end', () => res(h.digest('hex'))).on('error', rej);
  });
}
(async () => {
  const [a, b, out] = process.argv.slice(2);
  for (const p of [a, b]) console.log('stream', await hash(p), path.basename(p));
  console.log('sync', crypto.createHash('sha256').update(fs.readFileSync(b)).digest('hex'));
  await pipeline(fs.createReadStream(b), zlib.createGzip({ level: 1 }), fs.createWriteStream(out));
  console.log('gzip', fs.statSync(out).size);
})().catch(e => { console.error(e); process.exit(1); });
"""

SUM_JAVA = r"""import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.zip.CRC32;

/** CRC-32 of each file through a mapping, SHA-256 through read(). */
public class Sum {
    public static void main(String[] args) throws Exception {
        for (String a : args) {
            Path p = Paths.get(a);
            try (FileChannel ch = FileChannel.open(p)) {
                MappedByteBuffer mb = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
                CRC32 c = new CRC32();
                c.update(mb);
                System.out.printf("mmap crc32 %08x %s%n", c.getValue(), p.getFileName());
            }
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            try (InputStream in = new FileInputStream(a)) {
                byte[] b = new byte[65536];
                for (int n; (n = in.read(b)) > 0;)
                    md.update(b, 0, n);
            }
            StringBuilder s = new StringBuilder();
            for (byte x : md.digest())
                s.append(String.format("%02x", x));
            System.out.println("read sha256 " + s + " " + p.getFileName());
        }
    }
}
"""

MAKEFILE = """# Compresses each chunk (in parallel with -j), then checks them together.
CHUNKS := $(sort $(wildcard $(D)/chunks/*.txt))
OUT := $(patsubst $(D)/chunks/%.txt,%.gz,$(CHUNKS))
all: sums.txt
%.gz: $(D)/chunks/%.txt
\tgzip -n -1 -c $< > $@
sums.txt: $(OUT)
\tcat $^ | gzip -dc | sha256sum > $@
\tsha256sum $^ >> $@
\tcat $@
"""


def _text(rng, size):
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 11)))
             for _ in range(6000)]
    cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(vocab))))
    words = rng.choices(vocab, cum_weights=cum, k=size // 5)
    out, n, i = [], 0, 0
    while n < size:
        k = 3 + (i * 7919 + n) % 15
        line = " ".join(words[i % len(words):i % len(words) + k]) + "\n"
        out.append(line)
        n += len(line)
        i += k
    return "".join(out).encode()[:size]


def _write(path, data, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def _run(cmd, cwd, env=None):
    subprocess.run(cmd, cwd=cwd, env=env or plain_env(), check=True, stdout=subprocess.DEVNULL)


def _generate(d):
    rng = random.Random(20261130)
    text = _text(rng, 32 * M)
    _write(os.path.join(d, "text.txt"), text)
    cut = text.rfind(b"\n", 0, 16 * M) + 1
    _write(os.path.join(d, "text-16m.txt"), text[:cut])
    cut = text.rfind(b"\n", 0, 8 * M) + 1
    _write(os.path.join(d, "text-8m.txt"), text[:cut])
    _write(os.path.join(d, "blob.bin"), random.Random(1).randbytes(32 * M))
    for i in range(8):
        piece = text[i * 2 * M:(i + 1) * 2 * M]
        _write(os.path.join(d, "chunks", "c%d.txt" % i), piece)

    tree = os.path.join(d, "tree")
    brng = random.Random(2)
    for i in range(400):
        sub = os.path.join(tree, "d%02d" % (i % 20))
        size = brng.choice([512, 4096, 30000, 65536, 200000])
        if i % 3 == 0:
            size = 200000
        off = brng.randrange(0, len(text) - size)
        data = text[off:off + size] if i % 2 else brng.randbytes(size)
        _write(os.path.join(sub, "f%03d.%s" % (i, "txt" if i % 2 else "bin")), data)
    _write(os.path.join(tree, "run.sh"), b"#!/bin/sh\necho hello\n", 0o755)
    os.symlink("d00/f000.bin", os.path.join(tree, "link"))
    # Several MiB in one file: the shim's drops start at 2 MiB chunks.
    _write(os.path.join(tree, "big.bin"), brng.randbytes(8 * M))

    if shutil.which("tar"):
        _run(["tar", "--sort=name", "--mtime=@0", "--owner=0", "--group=0", "--numeric-owner",
              "-cf", "tree.tar", "tree"], d)
    if shutil.which("git"):
        repo = os.path.join(d, "repo")
        genv = plain_env(GIT_AUTHOR_NAME="corpus", GIT_AUTHOR_EMAIL="corpus@example.org",
                         GIT_COMMITTER_NAME="corpus", GIT_COMMITTER_EMAIL="corpus@example.org",
                         GIT_AUTHOR_DATE="2020-01-01T00:00:00Z",
                         GIT_COMMITTER_DATE="2020-01-01T00:00:00Z", HOME=d)
        _run(["git", "init", "-q", "-b", "main", repo], d, genv)
        # (the smaller text files only: a few MiB that git can
        # delta-compress in seconds)
        shutil.copytree(tree, os.path.join(repo, "tree"), symlinks=True,
                        ignore=lambda sub, names: [
                            n for n in names if n.endswith(".bin") or
                            os.path.getsize(os.path.join(sub, n)) > 100000])
        _run(["git", "add", "-A"], repo, genv)
        _run(["git", "commit", "-q", "-m", "tree"], repo, genv)
        for k in range(2):
            for i in range(0, 400, 7 + k):
                p = os.path.join(repo, "tree", "d%02d" % (i % 20), "f%03d.txt" % i)
                if os.path.exists(p):
                    with open(p, "ab") as f:
                        f.write(b"change %d\n" % k)
            _write(os.path.join(repo, "notes%d.txt" % k), text[k * M:(k + 2) * M])
            _run(["git", "add", "-A"], repo, genv)
            _run(["git", "commit", "-q", "-m", "change %d" % k], repo, genv)

    db = sqlite3.connect(os.path.join(d, "db.sqlite"))
    db.execute("CREATE TABLE words (id INTEGER PRIMARY KEY, w TEXT, n INTEGER, b BLOB)")
    db.execute("CREATE INDEX words_w ON words (w)")
    lines = text[:6 * M].split(b"\n")
    drng = random.Random(3)
    db.executemany("INSERT INTO words (w, n, b) VALUES (?, ?, ?)",
                   ((l.decode(), i, drng.randbytes(64)) for i, l in enumerate(lines)))
    db.commit()
    db.close()

    _write(os.path.join(d, "scripts", "words.pl"), WORDS_PL.encode())
    _write(os.path.join(d, "scripts", "mmapsum.py"), MMAPSUM_PY.encode())
    _write(os.path.join(d, "scripts", "sum.js"), SUM_JS.encode())
    _write(os.path.join(d, "scripts", "edges.py"), EDGES_PY.encode())
    _write(os.path.join(d, "make", "Makefile"), MAKEFILE.encode())
    _write(os.path.join(d, "java", "Sum.java"), SUM_JAVA.encode())
    if shutil.which("javac"):
        _run(["javac", "-d", os.path.join(d, "java"), os.path.join(d, "java", "Sum.java")], d)


def ensure():
    """The data directory, generated if it is missing or incomplete."""
    base = os.environ.get("MADVSEQ_TEST_DIR") or os.getcwd()
    d = os.path.join(base, "conformance-data")
    os.makedirs(base, exist_ok=True)
    with open(os.path.join(base, ".conformance-data.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = os.path.join(d, ".complete")
        if os.path.exists(stamp) and open(stamp).read() == VERSION:
            return d
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        _generate(d)
        with open(stamp, "w") as f:
            f.write(VERSION)
    return d
