/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The memory-mapping wrappers of libmadvseq.so: mmap/mmap64, munmap,
 * mremap, madvise, posix_madvise.  Wrappers only: what is tracked is
 * decided in track.c, kept in regions.c, and acted on in engine_thread.c.
 */
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine.h"
#include "shim.h"
#include "track.h"
#include "regions.h"

static struct {
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	int (*munmap)(void *, size_t);
	void *(*mremap)(void *, size_t, size_t, int, ...);
	int (*madvise)(void *, size_t, int);
	int (*posix_madvise)(void *, size_t, int);
	void (*exit_now)(int);
	void (*exit_now2)(int);
} real;

void msq_interpose_resolve(void)
{
	real.mmap = msq_next_symbol("mmap");
	real.munmap = msq_next_symbol("munmap");
	real.mremap = msq_next_symbol("mremap");
	real.madvise = msq_next_symbol("madvise");
	real.posix_madvise = msq_next_symbol("posix_madvise");
	real.exit_now = msq_next_symbol("_exit");
	real.exit_now2 = msq_next_symbol("_Exit");
}

/* Before the real symbols are known (during dlsym), the syscalls. */
static void *call_mmap(void *a, size_t l, int p, int f, int fd, off_t o)
{
	if (real.mmap)
		return real.mmap(a, l, p, f, fd, o);
	return (void *)syscall(SYS_mmap, a, l, p, f, fd, o);
}

static int call_munmap(void *a, size_t l)
{
	return real.munmap ? real.munmap(a, l) : (int)syscall(SYS_munmap, a, l);
}

static void *call_mremap(void *o, size_t ol, size_t nl, int f, void *n)
{
	if (real.mremap)
		return real.mremap(o, ol, nl, f, n);
	return (void *)syscall(SYS_mremap, o, ol, nl, f, n);
}

static int call_madvise(void *a, size_t l, int adv)
{
	return real.madvise ? real.madvise(a, l, adv) : (int)syscall(SYS_madvise, a, l, adv);
}

static int call_posix_madvise(void *a, size_t l, int adv)
{
	if (real.posix_madvise)
		return real.posix_madvise(a, l, adv);
	return syscall(SYS_madvise, a, l, adv) < 0 ? errno : 0;
}

static uint64_t page_end(const void *a, size_t len)
{
	return ((uintptr_t)a + len + 4095) & ~(uint64_t)4095;
}

/* The kernel refuses (EINVAL) a munmap or MAP_FIXED mmap of this range
 * before it changes any mapping: nothing tracked may change either (an
 * unaligned address would otherwise split a region off page bounds). */
static bool refused_range(const void *addr, size_t len)
{
	return ((uintptr_t)addr & 4095) || len == 0;
}

/* MAP_FIXED over a tracked range: the old mapping goes, as with munmap. */
static __attribute__((noinline)) void *mmap_fixed_tracked(void *addr, size_t len, int prot,
							   int flags, int fd, off_t off)
{
	void *p;

	if (refused_range(addr, len) || !msq_shim_ready() ||
	    !msq_regions_overlap((uintptr_t)addr, page_end(addr, len)))
		return call_mmap(addr, len, prot, flags, fd, off);
	MSQ_ENTER();
	msq_track_lock();
	msq_track_forget_locked((uintptr_t)addr, page_end(addr, len), true);
	p = call_mmap(addr, len, prot, flags, fd, off);
	{
		MSQ_PROTECT_ERRNO;
		msq_track_unlock();
	}
	MSQ_LEAVE();
	return p;
}

static inline void *wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	/* Without MAP_FIXED the kernel picks a free range: nothing tracked
	 * can be replaced, so this is the whole cost of an untracked call. */
	if (__builtin_expect((flags & MAP_FIXED) && !msq_guard && msq_regions_any(), 0))
		return mmap_fixed_tracked(addr, len, prot, flags, fd, off);
	return call_mmap(addr, len, prot, flags, fd, off);
}

MSQ_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return wrap_mmap(addr, len, prot, flags, fd, off);
}

/* The same function on 64-bit systems, bound separately by programs built
 * with _FILE_OFFSET_BITS=64 or _LARGEFILE64_SOURCE. */
MSQ_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	return wrap_mmap(addr, len, prot, flags, fd, off);
}

static __attribute__((noinline)) int munmap_tracked(void *addr, size_t len)
{
	int rc;

	if (refused_range(addr, len) || !msq_shim_ready() ||
	    !msq_regions_overlap((uintptr_t)addr, page_end(addr, len)))
		return call_munmap(addr, len);
	MSQ_ENTER();
	/* Final drop and untrack first, with the lock held until the range is
	 * really gone: the engine never sees a stale range. */
	msq_track_lock();
	msq_track_forget_locked((uintptr_t)addr, page_end(addr, len), true);
	rc = call_munmap(addr, len);
	{
		MSQ_PROTECT_ERRNO;
		msq_track_unlock();
	}
	MSQ_LEAVE();
	return rc;
}

MSQ_EXPORT int munmap(void *addr, size_t len)
{
	if (__builtin_expect(!msq_guard && msq_regions_any(), 0))
		return munmap_tracked(addr, len);
	return call_munmap(addr, len);
}

MSQ_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL, *p;
	va_list ap;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	if (msq_guard || !msq_regions_any() || ((uintptr_t)old & 4095) || !msq_shim_ready() ||
	    (!msq_regions_overlap((uintptr_t)old, page_end(old, old_len)) &&
	     !((flags & MREMAP_FIXED) &&
	       msq_regions_overlap((uintptr_t)new_addr, page_end(new_addr, new_len)))))
		return call_mremap(old, old_len, new_len, flags, new_addr);
	MSQ_ENTER();
	msq_track_lock();
	if (flags & MREMAP_FIXED)
		/* Whatever was mapped at the target is replaced. */
		msq_track_forget_locked((uintptr_t)new_addr, page_end(new_addr, new_len), true);
	p = call_mremap(old, old_len, new_len, flags, new_addr);
	{
		MSQ_PROTECT_ERRNO;
		if (p != MAP_FAILED)
			msq_track_moved((uintptr_t)old, page_end(old, old_len) - (uintptr_t)old,
					(uintptr_t)p, page_end(p, new_len) - (uintptr_t)p,
					flags & MREMAP_DONTUNMAP);
		msq_track_unlock();
	}
	MSQ_LEAVE();
	return p;
}

/* Bookkeeping after a successful advice; errno is the caller's. */
static void advised(void *addr, size_t len, int advice)
{
	if (advice == MADV_SEQUENTIAL) {
		/* Advised again (some programs do, per read window): already
		 * tracked as it is, so no second maps read and snapshot. */
		if (!msq_regions_contain((uintptr_t)addr, page_end(addr, len)))
			msq_track_sequential((uintptr_t)addr, page_end(addr, len));
	} else if ((advice == MADV_NORMAL || advice == MADV_RANDOM) &&
		   msq_regions_overlap((uintptr_t)addr, page_end(addr, len))) {
		/* The program no longer reads it as a stream: untrack, and leave
		 * its pages alone. */
		msq_track_lock();
		msq_track_forget_locked((uintptr_t)addr, page_end(addr, len), false);
		msq_track_unlock();
	}
}

MSQ_EXPORT int madvise(void *addr, size_t len, int advice)
{
	int rc = call_madvise(addr, len, advice);

	if (rc == 0 && !msq_guard && msq_shim_ready() && msq_cfg.policy.mode != MSQ_MODE_OFF) {
		MSQ_PROTECT_ERRNO;
		MSQ_ENTER();
		advised(addr, len, advice);
		MSQ_LEAVE();
	}
	return rc;
}

MSQ_EXPORT int posix_madvise(void *addr, size_t len, int advice)
{
	/* glibc's posix_madvise makes the syscall itself; the POSIX_MADV_*
	 * values we act on equal the MADV_* ones. */
	int rc = call_posix_madvise(addr, len, advice);

	if (rc == 0 && !msq_guard && msq_shim_ready() && msq_cfg.policy.mode != MSQ_MODE_OFF &&
	    advice != POSIX_MADV_DONTNEED) {
		MSQ_PROTECT_ERRNO;
		MSQ_ENTER();
		advised(addr, len, advice);
		MSQ_LEAVE();
	}
	return rc;
}

/*
 * _exit/_Exit skip the destructors, where the shim drops what is left
 * behind each reader; many programs end that way (fio's job processes,
 * forked workers).  Drop here with syscalls only: _exit is called from
 * signal handlers and vfork children (whose memory is the parent's: not
 * ours to act on).
 */
static __attribute__((noreturn)) void exit_now(void (*real_exit)(int), int status)
{
	if (!msq_guard && msq_regions_any() && msq_shim_ready() && msq_is_owner())
		msq_engine_exit_flush();
	if (real_exit)
		real_exit(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

MSQ_EXPORT void _exit(int status)
{
	exit_now(real.exit_now, status);
}

MSQ_EXPORT void _Exit(int status)
{
	exit_now(real.exit_now2, status);
}
