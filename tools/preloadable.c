/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * preloadable PROGRAM: whether ld.so will load LD_PRELOAD libraries into
 * PROGRAM.  It will not for a static binary (no PT_INTERP: there is no
 * ld.so), and it restricts them to system directories, with the set-user-ID
 * bit on the library, for programs started in secure-execution mode
 * (set-user-ID or set-group-ID to another id, or file capabilities:
 * AT_SECURE, see ld.so(8)).  A script ("#!") is judged by its interpreter.
 *
 * Prints nothing and exits 0 when the library can be preloaded; otherwise
 * prints the reason on stdout and exits 1 (2: PROGRAM could not be read).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "helper.h"

/* 1: has PT_INTERP, 0: static, -errno: not a readable ELF file. */
static int has_interp(int fd)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;

	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG))
		return -ENOEXEC;
	if (eh.e_ident[EI_CLASS] == ELFCLASS32) {
		Elf32_Ehdr e32;
		Elf32_Phdr p32;

		if (pread(fd, &e32, sizeof(e32), 0) != (ssize_t)sizeof(e32))
			return -ENOEXEC;
		for (unsigned i = 0; i < e32.e_phnum; i++) {
			if (pread(fd, &p32, sizeof(p32), (off_t)(e32.e_phoff + i * e32.e_phentsize)) !=
			    (ssize_t)sizeof(p32))
				return -ENOEXEC;
			if (p32.p_type == PT_INTERP)
				return 1;
		}
		return 0;
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) !=
		    (ssize_t)sizeof(ph))
			return -ENOEXEC;
		if (ph.p_type == PT_INTERP)
			return 1;
	}
	return 0;
}

static int judge(const char *path, int depth)
{
	struct stat st;
	char line[256];
	int fd, rc;
	ssize_t n;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		printf("%s cannot be read (%s): cannot tell whether it can be preloaded\n", path,
		       strerror(errno));
		if (fd >= 0)
			close(fd);
		return 2;
	}
	/* Set-id bits do nothing on a nosuid mount. */
	struct statvfs vfs;

	if (fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_NOSUID))
		st.st_mode &= ~(mode_t)(S_ISUID | S_ISGID);
	/* Secure execution only where the ids change (root running a root
	 * set-user-ID program is not): the kernel's AT_SECURE rule. */
	if ((st.st_mode & S_ISUID) && st.st_uid != getuid()) {
		printf("%s is set-user-ID: ld.so ignores LD_PRELOAD for it\n", path);
		close(fd);
		return 1;
	}
	if ((st.st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) && st.st_gid != getgid()) {
		printf("%s is set-group-ID: ld.so ignores LD_PRELOAD for it\n", path);
		close(fd);
		return 1;
	}
	if (getuid() != 0 && fgetxattr(fd, "security.capability", NULL, 0) > 0) {
		printf("%s has file capabilities: ld.so ignores LD_PRELOAD for it\n", path);
		close(fd);
		return 1;
	}
	n = pread(fd, line, sizeof(line) - 1, 0);
	if (n > 2 && line[0] == '#' && line[1] == '!' && depth == 0) {
		char *p = line + 2, *e;

		close(fd);
		line[n] = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		for (e = p; *e && *e != ' ' && *e != '\t' && *e != '\n'; e++)
			;
		*e = '\0';
		return judge(p, 1);
	}
	rc = has_interp(fd);
	close(fd);
	if (rc == 0) {
		printf("%s is statically linked: there is no ld.so to preload the library\n", path);
		return 1;
	}
	if (rc < 0) {
		printf("%s is not an ELF program or script: cannot tell whether it can be preloaded\n",
		       path);
		return 2;
	}
	return 0;
}

int msq_cmd_preloadable(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: madvseq-helper preloadable PROGRAM\n");
		return 2;
	}
	return judge(argv[1], 0);
}
