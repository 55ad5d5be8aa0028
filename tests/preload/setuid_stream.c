/* setuid_stream: the program test_secure.py installs setuid root.  It
 * streams one file through an MADV_SEQUENTIAL mapping and another through
 * read() after posix_fadvise(SEQUENTIAL), the two things libmadvseq
 * manages, and prints what a caller may compare between runs:
 *
 *   "MAPSUM READSUM euid=E secure=S shim=M"
 *
 * MAPSUM and READSUM are checksums of the bytes; S is getauxval(AT_SECURE);
 * M is 1 when libmadvseq.so is mapped into the process (so a run in which
 * ld.so.preload did not take effect cannot pass for a secure one).
 *
 * Usage: setuid_stream MAPFILE READFILE
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "setuid_stream: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t mix(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i += 64)
		h = (h ^ p[i]) * 1099511628211u;
	return h;
}

static uint64_t map_stream(const char *path)
{
	struct stat st;
	uint64_t h = 1469598103934665603u;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned char *p;

	if (fd < 0 || fstat(fd, &st) < 0)
		die(path);
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		die("mmap");
	close(fd);
	if (madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL) < 0)
		die("madvise");
	/* A page at a time, at about the pace of a program that uses what it
	 * reads: the library's engine gets to look behind the cursor. */
	for (off_t off = 0; off < st.st_size; off += 1 << 20) {
		size_t n = st.st_size - off < (1 << 20) ? (size_t)(st.st_size - off) : 1 << 20;

		h = mix(h, p + off, n);
		usleep(2000);
	}
	if (munmap(p, (size_t)st.st_size) < 0)
		die("munmap");
	return h;
}

static uint64_t read_stream(const char *path)
{
	static unsigned char buf[1 << 20];
	uint64_t h = 1469598103934665603u;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		die(path);
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		h = mix(h, buf, (size_t)n);
	if (n < 0)
		die("read");
	close(fd);
	return h;
}

static int shim_mapped(void)
{
	char buf[1 << 16];
	size_t len = 0;
	ssize_t n;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die("/proc/self/maps");
	while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return strstr(buf, "libmadvseq.so") != NULL;
}

int main(int argc, char **argv)
{
	uint64_t m, r;

	if (argc != 3) {
		fprintf(stderr, "usage: setuid_stream MAPFILE READFILE\n");
		return 2;
	}
	m = map_stream(argv[1]);
	r = read_stream(argv[2]);
	printf("%016llx %016llx euid=%d secure=%lu shim=%d\n", (unsigned long long)m,
	       (unsigned long long)r, (int)geteuid(), getauxval(AT_SECURE), shim_mapped());
	return 0;
}
