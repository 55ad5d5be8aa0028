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

#include "real.h"
#include "regions.h"
#include "settings.h"
#include "shim.h"
#include "track.h"

/* The program's own calls; the syscalls before the real functions are
 * known (during dlsym). */
static void *call_mmap(void *a, size_t l, int p, int f, int fd, off_t o)
{
	return MSQ_REAL(mmap, (void *)syscall(SYS_mmap, a, l, p, f, fd, o), a, l, p, f, fd, o);
}

static int call_munmap(void *a, size_t l)
{
	return MSQ_REAL(munmap, (int)syscall(SYS_munmap, a, l), a, l);
}

static void *call_mremap(void *o, size_t ol, size_t nl, int f, void *n)
{
	return MSQ_REAL(mremap, (void *)syscall(SYS_mremap, o, ol, nl, f, n), o, ol, nl, f, n);
}

static int call_mprotect(void *a, size_t l, int prot)
{
	return MSQ_REAL(mprotect, (int)syscall(SYS_mprotect, a, l, prot), a, l, prot);
}

static int call_pkey_mprotect(void *a, size_t l, int prot, int pkey)
{
	return MSQ_REAL(pkey_mprotect, (int)syscall(SYS_pkey_mprotect, a, l, prot, pkey), a, l,
			prot, pkey);
}

static int call_madvise(void *a, size_t l, int adv)
{
	return MSQ_REAL(madvise, (int)syscall(SYS_madvise, a, l, adv), a, l, adv);
}

static int call_posix_madvise(void *a, size_t l, int adv)
{
	return MSQ_REAL(posix_madvise, syscall(SYS_madvise, a, l, adv) < 0 ? errno : 0, a, l, adv);
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

/*
 * Whether a call on [addr, addr + len) concerns tracked ranges: the shim
 * is up, this is not a vfork child (which may only _exit or exec: its
 * calls pass through untouched), and a tracked range overlaps.  Call with
 * the guard raised: the lookup is an RCU read-side section.
 */
static bool touches_tracked(const void *addr, size_t len)
{
	return msq_shim_ready() && msq_regions_overlap((uintptr_t)addr, page_end(addr, len)) &&
	       msq_is_owner();
}

/* After the program's call: a range re-tracked meanwhile by another
 * thread (its madvise raced with this unmap) is not what it was. */
static void untrack_if_gone(const void *addr, size_t len)
{
	if (msq_regions_overlap((uintptr_t)addr, page_end(addr, len)))
		msq_track_forget((uintptr_t)addr, page_end(addr, len), false);
}

/* MAP_FIXED over a tracked range: the old mapping goes, as with munmap. */
static __attribute__((noinline)) void *mmap_fixed_tracked(void *addr, size_t len, int prot,
							   int flags, int fd, off_t off)
{
	void *p;

	if (refused_range(addr, len))
		return call_mmap(addr, len, prot, flags, fd, off);
	MSQ_ENTER();
	if (!touches_tracked(addr, len)) {
		MSQ_LEAVE();
		return call_mmap(addr, len, prot, flags, fd, off);
	}
	/* The final drop while the old mapping still stands. */
	msq_track_forget((uintptr_t)addr, page_end(addr, len), true);
	p = call_mmap(addr, len, prot, flags, fd, off);
	{
		MSQ_PROTECT_ERRNO;
		untrack_if_gone(addr, len);
	}
	MSQ_LEAVE();
	return p;
}

/* A read-only file mapping, large enough to matter: in read mode "all" it
 * may be a table file read through with no advice (track.c decides). */
static __attribute__((noinline)) void mapped(void *p, size_t len, int flags, int fd, off_t off)
{
	MSQ_PROTECT_ERRNO;
	MSQ_ENTER();
	if (msq_shim_ready() && msq_cfg.policy.mode != MSQ_MODE_OFF && msq_is_owner())
		msq_track_mapped((uintptr_t)p, len, fd, (uint64_t)off, flags & MAP_SHARED);
	MSQ_LEAVE();
}

static inline void *wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p;

	/* Without MAP_FIXED the kernel picks a free range: nothing tracked
	 * can be replaced, so this is the whole cost of an untracked call. */
	if (__builtin_expect((flags & MAP_FIXED) && !msq_guard && msq_regions_any(), 0))
		p = mmap_fixed_tracked(addr, len, prot, flags, fd, off);
	else
		p = call_mmap(addr, len, prot, flags, fd, off);
	if (__builtin_expect(fd >= 0 && len >= MSQ_TRACK_MAPPED_MIN, 0) && p != MAP_FAILED &&
	    (prot & (PROT_READ | PROT_WRITE | PROT_EXEC)) == PROT_READ &&
	    !(flags & (MAP_ANONYMOUS | MAP_POPULATE)) && !msq_guard)
		mapped(p, len, flags, fd, off);
	return p;
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

	if (refused_range(addr, len))
		return call_munmap(addr, len);
	MSQ_ENTER();
	if (!touches_tracked(addr, len)) {
		MSQ_LEAVE();
		return call_munmap(addr, len);
	}
	/* Final drop and untrack first, while the range is still mapped; the
	 * engine no longer sees it once it is out of the table. */
	msq_track_forget((uintptr_t)addr, page_end(addr, len), true);
	rc = call_munmap(addr, len);
	{
		MSQ_PROTECT_ERRNO;
		untrack_if_gone(addr, len);
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
	if (msq_guard || !msq_regions_any() || ((uintptr_t)old & 4095))
		return call_mremap(old, old_len, new_len, flags, new_addr);
	MSQ_ENTER();
	if (!touches_tracked(old, old_len) &&
	    !((flags & MREMAP_FIXED) && touches_tracked(new_addr, new_len))) {
		MSQ_LEAVE();
		return call_mremap(old, old_len, new_len, flags, new_addr);
	}
	if (flags & MREMAP_FIXED)
		/* Whatever was mapped at the target is replaced. */
		msq_track_forget((uintptr_t)new_addr, page_end(new_addr, new_len), true);
	/* The table lock across the move: the engine never acts on the old
	 * addresses once something else may be mapped there. */
	msq_track_lock();
	p = call_mremap(old, old_len, new_len, flags, new_addr);
	{
		MSQ_PROTECT_ERRNO;
		if (p != MAP_FAILED)
			msq_track_moved_locked((uintptr_t)old,
					       page_end(old, old_len) - (uintptr_t)old, (uintptr_t)p,
					       page_end(p, new_len) - (uintptr_t)p,
					       flags & MREMAP_DONTUNMAP);
		msq_track_unlock();
	}
	MSQ_LEAVE();
	return p;
}

/*
 * mprotect: a private mapping made writable may get copy-on-write pages,
 * which MADV_DONTNEED (the shim's drop for private read-only mappings of
 * files it may not write) would discard.  Such parts are untracked before
 * the protection changes, so no drop can come between a write and its
 * check.  (A raw mprotect syscall bypasses this: see libmadvseq(7).)
 */
static void becomes_writable(const void *addr, size_t len, int prot)
{
	if (!(prot & PROT_WRITE) || msq_guard || !msq_regions_any() || ((uintptr_t)addr & 4095))
		return;
	MSQ_ENTER();
	if (touches_tracked(addr, len)) {
		MSQ_PROTECT_ERRNO;
		msq_track_writable((uintptr_t)addr, page_end(addr, len));
	}
	MSQ_LEAVE();
}

MSQ_EXPORT int mprotect(void *addr, size_t len, int prot)
{
	becomes_writable(addr, len, prot);
	return call_mprotect(addr, len, prot);
}

MSQ_EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	becomes_writable(addr, len, prot);
	return call_pkey_mprotect(addr, len, prot, pkey);
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
		msq_track_forget((uintptr_t)addr, page_end(addr, len), false);
	}
}

MSQ_EXPORT int madvise(void *addr, size_t len, int advice)
{
	int rc = call_madvise(addr, len, advice);

	if (rc == 0 && !msq_guard && msq_shim_ready() && msq_cfg.policy.mode != MSQ_MODE_OFF &&
	    msq_is_owner()) {
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
	    advice != POSIX_MADV_DONTNEED && msq_is_owner()) {
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
 * forked workers).  Drop here with syscalls only, no allocation, no
 * daemon (its exit drop takes the delegated regions) and the table lock
 * only if it can be had at once: _exit is called from signal handlers
 * and vfork children (whose memory is the parent's: not ours to act on).
 */
static __attribute__((noreturn)) void exit_now(void (*real_exit)(int), int status)
{
	if (!msq_guard && msq_shim_initialised() && msq_is_owner())
		msq_shim_exit_now();
	if (real_exit)
		real_exit(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

MSQ_EXPORT void _exit(int status)
{
	exit_now(msq_real.exit_now, status);
}

MSQ_EXPORT void _Exit(int status)
{
	exit_now(msq_real.exit_now2, status);
}
