/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "real.h"

struct msq_real_fns msq_real;

void msq_real_resolve(void)
{
#define RESOLVE(field, name) (msq_real.field = msq_next_symbol(name))
	RESOLVE(mmap, "mmap");
	RESOLVE(munmap, "munmap");
	RESOLVE(mremap, "mremap");
	RESOLVE(mprotect, "mprotect");
	RESOLVE(pkey_mprotect, "pkey_mprotect");
	RESOLVE(madvise, "madvise");
	RESOLVE(posix_madvise, "posix_madvise");
	RESOLVE(exit_now, "_exit");
	RESOLVE(exit_now2, "_Exit");
	RESOLVE(read, "read");
	RESOLVE(pread, "pread");
	RESOLVE(pread64, "pread64");
	RESOLVE(readv, "readv");
	RESOLVE(preadv, "preadv");
	RESOLVE(preadv64, "preadv64");
	RESOLVE(preadv2, "preadv2");
	RESOLVE(preadv64v2, "preadv64v2");
	RESOLVE(read_chk, "__read_chk");
	RESOLVE(pread_chk, "__pread_chk");
	RESOLVE(pread64_chk, "__pread64_chk");
	RESOLVE(write, "write");
	RESOLVE(pwrite, "pwrite");
	RESOLVE(pwrite64, "pwrite64");
	RESOLVE(writev, "writev");
	RESOLVE(pwritev, "pwritev");
	RESOLVE(pwritev64, "pwritev64");
	RESOLVE(pwritev2, "pwritev2");
	RESOLVE(pwritev64v2, "pwritev64v2");
	RESOLVE(posix_fadvise, "posix_fadvise");
	RESOLVE(posix_fadvise64, "posix_fadvise64");
	RESOLVE(sendfile, "sendfile");
	RESOLVE(sendfile64, "sendfile64");
	RESOLVE(copy_file_range, "copy_file_range");
	RESOLVE(close, "close");
	RESOLVE(dup, "dup");
	RESOLVE(dup2, "dup2");
	RESOLVE(dup3, "dup3");
	RESOLVE(fcntl, "fcntl");
	RESOLVE(fcntl64, "fcntl64");
	RESOLVE(close_range, "close_range");
	RESOLVE(fread, "fread");
	RESOLVE(fread_unlocked, "fread_unlocked");
	RESOLVE(fwrite, "fwrite");
	RESOLVE(fwrite_unlocked, "fwrite_unlocked");
	RESOLVE(getdelim, "getdelim");
	RESOLVE(getline, "getline");
	RESOLVE(fclose, "fclose");
#undef RESOLVE
}
