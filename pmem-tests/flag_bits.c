// SPDX-License-Identifier: GPL-2.0
/*
 * flag_bits: the whole mmap() flags word against a model written from the
 * documented contract, on each kind of file and on anonymous memory: every
 * bit alone, every pair of bits 0-31 under MAP_SHARED_VALIDATE (and the same
 * under MAP_SHARED), bits 32-63 (through syscall(): glibc's mmap() takes an
 * int), and the MAP_DROPPABLE mapping type with each flag.
 *
 * The contract, as read for model() below:
 *  - mmap(2), Debian manpages-dev 6.03 (bookworm): MAP_SHARED_VALIDATE,
 *    MAP_SYNC, the flag list, ERRORS;
 *  - commit 1c9725974074 ("mm: introduce MAP_SHARED_VALIDATE, a mechanism to
 *    safely define new mmap flags", 4.15), message as posted in Jan Kara's
 *    series of 2017-10-24 (patch 01/17, linux-mm archive): the new type is
 *    "guaranteed to fail on all legacy mmap implementations"; "by default all
 *    existing flags are implicitly supported, but new flags require
 *    MAP_SHARED_VALIDATE and per-instance opt-in";
 *  - commit 9651fcedf7b9 ("mm: add MAP_DROPPABLE for designating always
 *    lazily freeable mappings", 6.11) and its comment in do_mmap();
 *  - where mmap(2) says nothing, the kernel's own long-standing rule, named
 *    as such (MAP_HUGETLB on a file, MAP_GROWSDOWN on shared memory).
 * The model does not order errors: mmap(2) does not say which error wins
 * when two apply, so a call two rules refuse may fail with either error
 * (the "order" cases pin the orders we rely on).
 *
 * The same source builds two programs (pmem-tests/Makefile): flag_bits, for
 * x86-64, and flag_bits_32, a static i386 program (-m32), whose calls take
 * the kernel's compat entry points (CONFIG_IA32_EMULATION).  Line numbers
 * below are those of Debian's linux-source-6.12 as shipped (the stock
 * tree; the series moves the mm/mmap.c ones by a few lines, the arch/ ones
 * not at all).  The paths into do_mmap() (mm/mmap.c:284), which does the
 * flag checks the model is about:
 *  - x86-64 mmap(2), nr 9: SYSCALL_DEFINE6(mmap) in
 *    arch/x86/kernel/sys_x86_64.c:79 -> ksys_mmap_pgoff() mm/mmap.c:514 ->
 *    vm_mmap_pgoff() mm/util.c:575 -> do_mmap().
 *  - i386 mmap2, nr 192 (arch/x86/entry/syscalls/syscall_32.tbl:207, what
 *    glibc's i386 mmap() calls): ia32_sys_call() arch/x86/entry/
 *    syscall_32.c:38 -> __ia32_sys_mmap_pgoff, whose stub widens each
 *    32-bit register to the argument's type with a zero extension
 *    (__SC_COMPAT_CAST, arch/x86/include/asm/syscall_wrapper.h:76) ->
 *    SYSCALL_DEFINE6(mmap_pgoff) mm/mmap.c:559 -> ksys_mmap_pgoff() ->
 *    vm_mmap_pgoff() -> do_mmap().  The offset is in pages.
 *  - i386 old mmap, nr 90 (syscall_32.tbl:105, __NR_mmap on i386): the six
 *    arguments in a struct in user memory; on a 64-bit kernel
 *    compat_sys_ia32_mmap() arch/x86/kernel/sys_ia32.c:223 (struct
 *    mmap_arg_struct32, :214, six u32) -> ksys_mmap_pgoff() -> do_mmap()
 *    (on a 32-bit kernel sys_old_mmap(), mm/mmap.c:576).
 * What differs for flag_bits_32: the flags word is 32 bits wide (the
 * kernel sees bits 32-63 as zero), so the cases for bits 32-63 are not
 * built; the hints of MAP_FIXED and MAP_FIXED_NOREPLACE come from the
 * program's own 4 GiB address space (a free 2 MiB-aligned range, as on
 * x86-64); offsets are 0 and files 2 MiB, so no size or offset comes near
 * 32 bits; the MAP_HUGE_* size field (bits 26-31) fits as it is.
 * MAP_32BIT and MAP_ABOVE4G are ignored for a 32-bit call
 * (in_32bit_syscall(), arch/x86/kernel/sys_x86_64.c:179 and :196): still
 * known flags, still no error, the model is the same.  flag_bits_32 also
 * runs every bit alone through the old mmap entry (bits.*.old_mmap_*).
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#ifndef MAP_DROPPABLE
#define MAP_DROPPABLE 0x08		/* include/uapi/linux/mman.h, 6.11 */
#endif
#ifndef MAP_ABOVE4G
#define MAP_ABOVE4G 0x80		/* arch/x86/include/uapi/asm/mman.h, 6.6 */
#endif
#define MAP_UNINITIALIZED_ 0x4000000UL	/* mman-common.h; glibc lacks it */
#define MAP_HUGE_2MB_ (21UL << 26)	/* mmap(2): log2 of the size at bit 26 */
#define MAP_HUGE_1GB_ (30UL << 26)
#define HUGETLBFS_MAGIC_ 0x958458f6U	/* include/uapi/linux/magic.h */

#define LEN (2UL << 20)
#define TYPE_MASK 0x0fUL		/* MAP_TYPE */

/*
 * The flags mmap(2) documents for x86-64 (each with its own entry there),
 * and MAP_ABOVE4G, which the x86 uapi header added in 6.6 and mmap(2) 6.03
 * does not list yet.  MAP_HUGE_2MB and MAP_HUGE_1GB are the two huge page
 * sizes mmap(2) names, the ones x86-64 has: bits 26-30.  Every other bit is
 * unknown: 9, 10 (unassigned on x86), 21-25, 31 (the size field's top bit:
 * only sizes of 4 GiB and more, none on x86-64), 32-63.
 */
#define DOCUMENTED_FLAGS (MAP_FIXED | MAP_ANONYMOUS | MAP_32BIT | MAP_ABOVE4G |	\
	MAP_GROWSDOWN | MAP_DENYWRITE | MAP_EXECUTABLE | MAP_LOCKED |		\
	MAP_NORESERVE | MAP_POPULATE | MAP_NONBLOCK | MAP_STACK | MAP_HUGETLB |	\
	MAP_SYNC | MAP_FIXED_NOREPLACE | MAP_UNINITIALIZED_ | MAP_HUGE_2MB_ |	\
	MAP_HUGE_1GB_)

enum backing { EXT4_DAX, EXT4_NODAX, XFS_DAX, XFS_NODAX, TMPFS, DEVDAX, HUGETLBFS, ANON };

static const char *const backing_name[] = {
	"ext4 DAX", "ext4 non-DAX", "xfs DAX", "xfs non-DAX", "tmpfs", "device-dax",
	"hugetlbfs", "anonymous",
};

/*
 * File systems that support MAP_SYNC (FOP_MMAP_SYNC: ext4, xfs, device-dax),
 * and of their files those that can have it: DAX files of ext4 and xfs on a
 * synchronous DAX device (the emulated NVDIMM is one), and device-dax.
 */
static bool fs_supports_sync(enum backing b)
{
	return b == EXT4_DAX || b == EXT4_NODAX || b == XFS_DAX || b == XFS_NODAX ||
	       b == DEVDAX;
}

static bool supports_sync(enum backing b)
{
	return b == EXT4_DAX || b == XFS_DAX || b == DEVDAX;
}

/* Does this kernel have huge pages at all (CONFIG_HUGETLBFS)? */
static bool have_huge_pages(void)
{
	return access("/sys/kernel/mm/hugepages", F_OK) == 0;
}

/*
 * Huge pages the hugetlb cases need at once: one for the mapping being
 * tried, one that a hugetlbfs file keeps in its page cache after
 * MAP_POPULATE, and spares.  Reserved once per run (vm.nr_hugepages).
 */
#define HUGE_PAGES 8

static bool huge_pool_ready(void)
{
	static int ready = -1;
	char buf[32];
	long n = 0;
	int fd;

	if (ready >= 0)
		return ready;
	ready = 0;
	fd = open("/proc/sys/vm/nr_hugepages", O_RDWR);
	if (fd < 0)
		return false;
	if (read(fd, buf, sizeof(buf) - 1) > 0)
		n = strtol(buf, NULL, 10);
	if (n < HUGE_PAGES) {
		snprintf(buf, sizeof(buf), "%d\n", HUGE_PAGES);
		if (pwrite(fd, buf, strlen(buf), 0) < 0) {
			close(fd);
			return false;
		}
		n = 0;
		if (pread(fd, buf, sizeof(buf) - 1, 0) > 0)
			n = strtol(buf, NULL, 10);
	}
	close(fd);
	ready = n >= HUGE_PAGES;
	return ready;
}

/*
 * The huge page size field of MAP_HUGETLB (bits 26-31, log2 of the size):
 * 0 for the default size, else a size the kernel has (x86-64: 2 MiB, 1 GiB
 * when the CPU has gbpages).
 */
static bool huge_size_ok(unsigned long flags)
{
	unsigned int log = (flags >> 26) & 0x3f;
	char path[96];

	if (!log)
		return true;
	if (log < 12 || log > 40)
		return false;
	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%lukB",
		 (1UL << (log - 10)));
	return access(path, F_OK) == 0;
}

/* What the model allows: 0, the call must succeed; else the errors it may give. */
#define FAILS_EINVAL		(1u << 0)
#define FAILS_EOPNOTSUPP	(1u << 1)
#define NOT_MODELLED		(1u << 2)

/*
 * The outcome of mmap(hint, 2 MiB, PROT_READ|PROT_WRITE, flags, fd, 0) with
 * fd open O_RDWR on backing b (ignored for anonymous memory), a free 2 MiB-
 * aligned hint when flags hold MAP_FIXED or MAP_FIXED_NOREPLACE, as root.
 */
static unsigned int model(enum backing b, unsigned long flags)
{
	unsigned long type = flags & TYPE_MASK;
	bool anon = b == ANON || (flags & MAP_ANONYMOUS);
	bool huge = flags & MAP_HUGETLB;
	bool huge_anon_ok = anon && huge && have_huge_pages() && huge_size_ok(flags);
	/*
	 * Does do_mmap() map a file?  Anonymous MAP_HUGETLB memory is a file:
	 * ksys_mmap_pgoff() sets up an unlinked hugetlbfs file for it.
	 */
	bool has_file = !anon || huge_anon_ok;
	/* ... and is it a hugetlbfs file (needs the huge page pool)? */
	bool hugetlb = huge_anon_ok || (!anon && b == HUGETLBFS);
	unsigned int fails = 0;

	/*
	 * mmap(2): flags hold exactly one of MAP_SHARED, MAP_SHARED_VALIDATE,
	 * MAP_PRIVATE, else EINVAL.  9651fcedf7b9 adds MAP_DROPPABLE, a type
	 * for anonymous memory only (a file cannot be dropped and read back
	 * as zeros).  The kernel's rule, kept since 4.15 (1c9725974074 added
	 * MAP_SHARED_VALIDATE to the file branch of do_mmap() only):
	 * MAP_SHARED_VALIDATE is a type for files, EINVAL for anonymous
	 * memory but anonymous MAP_HUGETLB memory, which is a hugetlbfs file.
	 */
	if (has_file) {
		if (type != MAP_SHARED && type != MAP_SHARED_VALIDATE && type != MAP_PRIVATE)
			fails |= FAILS_EINVAL;
	} else if (type != MAP_SHARED && type != MAP_PRIVATE && type != MAP_DROPPABLE) {
		fails |= FAILS_EINVAL;
	}

	/*
	 * mmap(2), 1c9725974074: MAP_SHARED_VALIDATE behaves as MAP_SHARED,
	 * except that a flag the kernel does not know fails with EOPNOTSUPP
	 * (MAP_SHARED, and the other types, ignore it).  MAP_FIXED_NOREPLACE
	 * is a known flag.
	 */
	if (type == MAP_SHARED_VALIDATE && (flags & ~(TYPE_MASK | DOCUMENTED_FLAGS)))
		fails |= FAILS_EOPNOTSUPP;

	/*
	 * mmap(2), MAP_SYNC: "available only with MAP_SHARED_VALIDATE";
	 * "supported only for files supporting DAX.  For other files, creating
	 * a mapping with this flag results in an EOPNOTSUPP error".  Anonymous
	 * memory and hugetlbfs are no DAX files.
	 */
	if (type == MAP_SHARED_VALIDATE && (flags & MAP_SYNC) && (anon || !supports_sync(b)))
		fails |= FAILS_EOPNOTSUPP;

	/*
	 * mmap(2) adds "mappings of type MAP_SHARED will silently ignore this
	 * flag".  They do on every file system that does not support MAP_SYNC;
	 * on one that does (ext4, xfs, device-dax), MAP_SHARED|MAP_SYNC has
	 * asked for synchronous faults since 4.15 (b6fb293f2497), and ext4
	 * and xfs refuse it with EOPNOTSUPP for a file that cannot have them
	 * (not DAX).  Failing rather than mapping without synchronous faults
	 * is what keeps such a call safe, so the model keeps it.  MAP_PRIVATE
	 * has nothing to sync: it ignores MAP_SYNC.
	 */
	if (type == MAP_SHARED && (flags & MAP_SYNC) && !anon && fs_supports_sync(b) &&
	    !supports_sync(b))
		fails |= FAILS_EOPNOTSUPP;

	/*
	 * MAP_HUGETLB: mmap(2) says only "allocate the mapping using huge
	 * pages".  The kernel's rule, kept since 2.6.32: a file must be on
	 * hugetlbfs, and anonymous memory needs a huge page size the kernel
	 * has (bits 26-31: 0 for the default), else EINVAL, whatever the type
	 * and other flags.  With the pool reserved (huge_pool_ready()) such a
	 * mapping succeeds as any other file mapping does.
	 */
	if (huge && !anon && b != HUGETLBFS)
		fails |= FAILS_EINVAL;
	if (huge && anon && !huge_anon_ok)
		fails |= FAILS_EINVAL;
	if (hugetlb && !fails && !huge_pool_ready())
		return NOT_MODELLED;

	/*
	 * device-dax maps shared only: a private mapping fails with EINVAL
	 * (drivers/dax/device.c, check_vma()).
	 */
	if (b == DEVDAX && !anon && type == MAP_PRIVATE)
		fails |= FAILS_EINVAL;

	/*
	 * MAP_GROWSDOWN: "used for stacks", which grow into private anonymous
	 * memory.  The kernel refuses it with EINVAL for every file mapping
	 * (hugetlbfs included) and for shared anonymous memory (a shared
	 * object does not grow).
	 */
	if ((flags & MAP_GROWSDOWN) && !(!has_file && type == MAP_PRIVATE))
		fails |= FAILS_EINVAL;

	/*
	 * MAP_DROPPABLE (9651fcedf7b9, do_mmap()): "a locked or stack area
	 * makes no sense to be droppable", nor huge pages "for now": EINVAL
	 * with MAP_LOCKED, MAP_HUGETLB or MAP_GROWSDOWN.  It validates nothing
	 * else: unknown flags are ignored, as with MAP_PRIVATE.
	 */
	if (type == MAP_DROPPABLE && (flags & (MAP_LOCKED | MAP_HUGETLB | MAP_GROWSDOWN)))
		fails |= FAILS_EINVAL;

	/*
	 * Every other documented flag (MAP_FIXED with a free address,
	 * MAP_FIXED_NOREPLACE, MAP_32BIT, MAP_ABOVE4G, MAP_DENYWRITE and
	 * MAP_EXECUTABLE ("ignored"), MAP_LOCKED and MAP_POPULATE (the call
	 * "doesn't fail" if populating does; root passes the mlock limits),
	 * MAP_NONBLOCK, MAP_NORESERVE, MAP_STACK, MAP_UNINITIALIZED, the huge
	 * page size without MAP_HUGETLB) adds no error here.
	 */
	return fails;
}

static bool outcome_allowed(unsigned int want, int err)
{
	if (!want)
		return err == 0;
	return (err == EINVAL && (want & FAILS_EINVAL)) ||
	       (err == EOPNOTSUPP && (want & FAILS_EOPNOTSUPP));
}

static const char *outcome_name(unsigned int want)
{
	switch (want) {
	case 0:				return "success";
	case FAILS_EINVAL:		return "EINVAL";
	case FAILS_EOPNOTSUPP:		return "EOPNOTSUPP";
	default:			return "EINVAL or EOPNOTSUPP";
	}
}

static const char *err_name(int err)
{
	return err ? strerror(err) : "success";
}

static int open_backing(enum backing b, const char **why)
{
	static const enum ms_mount mnt[] = { MS_EXT4_DAX, MS_EXT4_NODAX, MS_XFS_DAX, MS_XFS_NODAX };
	const char *dir;
	int fd;

	*why = NULL;
	if (b == ANON) {
		return -2;	/* no file: try_map() passes -1 */
	} else if (b == TMPFS) {
		fd = open("/tmp/flag_bits", O_RDWR | O_CREAT | O_TRUNC, 0644);
	} else if (b == HUGETLBFS) {
		/* a hugetlbfs mount of the default huge page size, once per run */
		static const char mnt_dir[] = "/tmp/flag_bits.hugetlbfs";
		struct statfs sfs;

		if (!have_huge_pages()) {
			*why = "no huge pages in this kernel (CONFIG_HUGETLBFS)";
			return -1;
		}
		if (!huge_pool_ready()) {
			*why = "could not reserve huge pages (vm.nr_hugepages)";
			return -1;
		}
		mkdir(mnt_dir, 0755);
		if (statfs(mnt_dir, &sfs) || (unsigned int)sfs.f_type != HUGETLBFS_MAGIC_) {
			if (mount("nodev", mnt_dir, "hugetlbfs", 0, NULL))
				return -1;
		}
		fd = open("/tmp/flag_bits.hugetlbfs/flag_bits", O_RDWR | O_CREAT | O_TRUNC, 0644);
	} else if (b == DEVDAX) {
		dir = getenv("MAPSYNC_DEVDAX");
		if (!dir || !*dir) {
			*why = "MAPSYNC_DEVDAX is not set: no device-dax namespace";
			return -1;
		}
		return open(dir, O_RDWR);
	} else {
		dir = ms_mount_dir(mnt[b]);
		if (!dir) {
			*why = "the mount is not set: run under pmem-tests/run";
			return -1;
		}
		fd = ms_create_file(dir, "flag_bits", 0);
	}
	if (fd >= 0 && ftruncate(fd, LEN)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Bits in the flags word: 64 on x86-64, 32 for flag_bits_32 (i386). */
#define WORD_BITS ((int)(8 * sizeof(unsigned long)))

/* The system call a mapping is asked for with (see the top of the file). */
enum entry {
	VIA_MMAP,	/* x86-64: mmap (9); i386: mmap2 (192) */
	VIA_OLD_MMAP,	/* i386 only: the old mmap (90), arguments in memory */
};

#ifdef __i386__
static const char *const entry_name[] = { " through mmap2", " through old mmap" };

/* struct mmap_arg_struct32, arch/x86/kernel/sys_ia32.c:214: six 32-bit words */
struct old_mmap_args {
	unsigned long addr, len, prot, flags, fd, offset;
};
_Static_assert(sizeof(struct old_mmap_args) == 24, "six 32-bit words");
#else
static const char *const entry_name[] = { "", "" };
#endif

/*
 * mmap() through syscall(), so that every bit of flags reaches the kernel
 * as given (glibc's mmap() takes an int), by the entry point asked for;
 * returns the errno, 0 on success (and unmaps).
 */
static int try_map(int fd, unsigned long flags, enum entry via)
{
	unsigned long hint = 0;
	long p;
	int err;

	if (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) {
		void *r = mmap(NULL, 2 * LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (r == MAP_FAILED)
			return errno;
		hint = ((unsigned long)r + LEN - 1) & ~(LEN - 1);
		munmap(r, 2 * LEN);
	}
#ifdef __i386__
	if (via == VIA_OLD_MMAP) {
		struct old_mmap_args a = {
			.addr = hint, .len = LEN, .prot = PROT_READ | PROT_WRITE,
			.flags = flags, .fd = fd < 0 ? -1 : fd, .offset = 0,
		};

		p = syscall(SYS_mmap, &a);	/* 90: compat_sys_ia32_mmap() */
	} else {
		/* 192, as glibc's mmap(); the last argument is in pages */
		p = syscall(SYS_mmap2, hint, LEN, PROT_READ | PROT_WRITE, flags,
			    fd < 0 ? -1 : fd, 0);
	}
#else
	p = syscall(SYS_mmap, hint, LEN, PROT_READ | PROT_WRITE, flags, fd < 0 ? -1 : fd, 0);
#endif
	err = p == -1 ? errno : 0;
	if (!err)
		munmap((void *)p, LEN);
	return err;
}

/* Try flags on backing b through entry via; on a mismatch log it and return 1. */
static int check_via(struct __test_metadata *_metadata, int fd, enum backing b,
		     unsigned long flags, enum entry via, int *not_modelled)
{
	unsigned int want;
	int got;

	if (b == ANON)
		flags |= MAP_ANONYMOUS;
	want = model(b, flags);
	if (want == NOT_MODELLED) {
		(*not_modelled)++;
		return 0;
	}
	got = try_map(fd, flags, via);
	if (outcome_allowed(want, got))
		return 0;
	TH_LOG("%s, flags %#lx%s: model says %s, kernel says %s",
	       backing_name[b], flags, entry_name[via], outcome_name(want), err_name(got));
	return 1;
}

static int check_one(struct __test_metadata *_metadata, int fd, enum backing b,
		     unsigned long flags, int *not_modelled)
{
	return check_via(_metadata, fd, b, flags, VIA_MMAP, not_modelled);
}

#define SETUP_BACKING(b) do {							\
	const char *why;							\
										\
	self->fd = open_backing(b, &why);					\
	if (self->fd == -1 && why)						\
		SKIP(return, "%s", why);					\
	ASSERT_NE(-1, self->fd) TH_LOG("%s: cannot open a file: %s",		\
				       backing_name[b], strerror(errno));	\
} while (0)

/* ---- each bit of 0-31 alone, one variant each ---- */

FIXTURE(bits) {
	int fd;
};

FIXTURE_VARIANT(bits) {
	enum backing backing;
	int bit;
};

/* n is two digits; 1##n - 100 reads it as decimal, not octal */
#define BIT_VARIANT(name, b, n) \
	FIXTURE_VARIANT_ADD(bits, name##_bit##n) { .backing = b, .bit = 1##n - 100 }
#define BIT_VARIANTS(name, b) \
	BIT_VARIANT(name, b, 00); BIT_VARIANT(name, b, 01); BIT_VARIANT(name, b, 02); \
	BIT_VARIANT(name, b, 03); BIT_VARIANT(name, b, 04); BIT_VARIANT(name, b, 05); \
	BIT_VARIANT(name, b, 06); BIT_VARIANT(name, b, 07); BIT_VARIANT(name, b, 08); \
	BIT_VARIANT(name, b, 09); BIT_VARIANT(name, b, 10); BIT_VARIANT(name, b, 11); \
	BIT_VARIANT(name, b, 12); BIT_VARIANT(name, b, 13); BIT_VARIANT(name, b, 14); \
	BIT_VARIANT(name, b, 15); BIT_VARIANT(name, b, 16); BIT_VARIANT(name, b, 17); \
	BIT_VARIANT(name, b, 18); BIT_VARIANT(name, b, 19); BIT_VARIANT(name, b, 20); \
	BIT_VARIANT(name, b, 21); BIT_VARIANT(name, b, 22); BIT_VARIANT(name, b, 23); \
	BIT_VARIANT(name, b, 24); BIT_VARIANT(name, b, 25); BIT_VARIANT(name, b, 26); \
	BIT_VARIANT(name, b, 27); BIT_VARIANT(name, b, 28); BIT_VARIANT(name, b, 29); \
	BIT_VARIANT(name, b, 30); BIT_VARIANT(name, b, 31)

BIT_VARIANTS(ext4_dax, EXT4_DAX);
BIT_VARIANTS(ext4_nodax, EXT4_NODAX);
BIT_VARIANTS(xfs_dax, XFS_DAX);
BIT_VARIANTS(xfs_nodax, XFS_NODAX);
BIT_VARIANTS(tmpfs, TMPFS);
BIT_VARIANTS(devdax, DEVDAX);
BIT_VARIANTS(hugetlbfs, HUGETLBFS);

FIXTURE_SETUP(bits)
{
	SETUP_BACKING(variant->backing);
}

FIXTURE_TEARDOWN(bits)
{
	if (self->fd >= 0)
		close(self->fd);
}

static void bit_case(struct __test_metadata *_metadata, int fd, enum backing b,
		     unsigned long flags, enum entry via)
{
	int not_modelled = 0;
	int bad = check_via(_metadata, fd, b, flags, via, &not_modelled);

	if (not_modelled)
		SKIP(return, "flags %#lx: MAP_HUGETLB: no pool of %d huge pages",
		     flags, HUGE_PAGES);
	EXPECT_EQ(0, bad);
}

/* MAP_SHARED_VALIDATE | bit: bits 0 and 1 leave the type as it is. */
TEST_F(bits, validate_matches_model)
{
	bit_case(_metadata, self->fd, variant->backing,
		 MAP_SHARED_VALIDATE | (1UL << variant->bit), VIA_MMAP);
}

/* MAP_SHARED | bit, the bit dropped if it is one of the type field (0-3). */
TEST_F(bits, shared_matches_model)
{
	bit_case(_metadata, self->fd, variant->backing,
		 MAP_SHARED | ((1UL << variant->bit) & ~TYPE_MASK), VIA_MMAP);
}

/* MAP_PRIVATE | bit, likewise: MAP_SYNC (bit 19) means nothing here. */
TEST_F(bits, private_matches_model)
{
	bit_case(_metadata, self->fd, variant->backing,
		 MAP_PRIVATE | ((1UL << variant->bit) & ~TYPE_MASK), VIA_MMAP);
}

#ifdef __i386__
/*
 * flag_bits_32 only: the same two calls through the old i386 mmap (nr 90,
 * compat_sys_ia32_mmap(), arch/x86/kernel/sys_ia32.c:223), another entry
 * into ksys_mmap_pgoff(): MAP_SHARED_VALIDATE|MAP_SYNC is bit 19, the
 * unknown flags are bits 9, 10, 21-25 and 31.  x86-64 has no such entry.
 */
TEST_F(bits, old_mmap_validate_matches_model)
{
	bit_case(_metadata, self->fd, variant->backing,
		 MAP_SHARED_VALIDATE | (1UL << variant->bit), VIA_OLD_MMAP);
}

TEST_F(bits, old_mmap_shared_matches_model)
{
	bit_case(_metadata, self->fd, variant->backing,
		 MAP_SHARED | ((1UL << variant->bit) & ~TYPE_MASK), VIA_OLD_MMAP);
}
#endif

/*
 * ---- every pair of bits 0-31 (496) under MAP_SHARED_VALIDATE and under
 * MAP_SHARED.  A pair belongs to the group of the first flag of group_flag[]
 * it holds, else to "rest" (pairs of other legacy, type and unknown bits):
 * a variant per backing and group, so that a failure names the flag. ----
 */
enum group { G_ANONYMOUS, G_FIXED_NOREPLACE, G_SYNC, G_HUGETLB, G_GROWSDOWN, G_LOCKED,
	     G_POPULATE, G_NORESERVE, G_STACK, G_REST };

static const unsigned long group_flag[G_REST] = {
	MAP_ANONYMOUS, MAP_FIXED_NOREPLACE, MAP_SYNC, MAP_HUGETLB, MAP_GROWSDOWN,
	MAP_LOCKED, MAP_POPULATE, MAP_NORESERVE, MAP_STACK,
};

static enum group group_of(unsigned long pair)
{
	int g;

	for (g = 0; g < G_REST; g++)
		if (pair & group_flag[g])
			return g;
	return G_REST;
}

FIXTURE(pairs) {
	int fd;
};

FIXTURE_VARIANT(pairs) {
	enum backing backing;
	enum group group;
};

#define PAIR_VARIANT(name, b, gname, g) \
	FIXTURE_VARIANT_ADD(pairs, name##_##gname) { .backing = b, .group = g }
#define PAIR_VARIANTS(name, b) \
	PAIR_VARIANT(name, b, anonymous, G_ANONYMOUS); \
	PAIR_VARIANT(name, b, fixed_noreplace, G_FIXED_NOREPLACE); \
	PAIR_VARIANT(name, b, sync, G_SYNC); \
	PAIR_VARIANT(name, b, hugetlb, G_HUGETLB); \
	PAIR_VARIANT(name, b, growsdown, G_GROWSDOWN); \
	PAIR_VARIANT(name, b, locked, G_LOCKED); \
	PAIR_VARIANT(name, b, populate, G_POPULATE); \
	PAIR_VARIANT(name, b, noreserve, G_NORESERVE); \
	PAIR_VARIANT(name, b, stack, G_STACK); \
	PAIR_VARIANT(name, b, rest, G_REST)

PAIR_VARIANTS(ext4_dax, EXT4_DAX);
PAIR_VARIANTS(ext4_nodax, EXT4_NODAX);
PAIR_VARIANTS(xfs_dax, XFS_DAX);
PAIR_VARIANTS(xfs_nodax, XFS_NODAX);
PAIR_VARIANTS(tmpfs, TMPFS);
PAIR_VARIANTS(devdax, DEVDAX);
PAIR_VARIANTS(hugetlbfs, HUGETLBFS);

FIXTURE_SETUP(pairs)
{
	SETUP_BACKING(variant->backing);
}

FIXTURE_TEARDOWN(pairs)
{
	if (self->fd >= 0)
		close(self->fd);
}

static void pair_case(struct __test_metadata *_metadata, int fd, enum backing b,
		      enum group group, unsigned long type)
{
	int i, j, bad = 0, tried = 0, not_modelled = 0;

	for (i = 0; i < 32; i++) {
		for (j = i + 1; j < 32; j++) {
			unsigned long pair = (1UL << i) | (1UL << j);

			if (group_of(pair) != group)
				continue;
			tried++;
			if (type == MAP_SHARED)
				pair &= ~TYPE_MASK;	/* keep the type MAP_SHARED */
			bad += check_one(_metadata, fd, b, type | pair, &not_modelled);
		}
	}
	if (not_modelled)
		TH_LOG("%d pairs not tried: MAP_HUGETLB with no pool of huge pages", not_modelled);
	EXPECT_EQ(0, bad) TH_LOG("%s: %d of %d pairs differ from the model",
				 backing_name[b], bad, tried);
	EXPECT_LT(0, tried);
}

TEST_F(pairs, validate_matches_model)
{
	pair_case(_metadata, self->fd, variant->backing, variant->group, MAP_SHARED_VALIDATE);
}

TEST_F(pairs, shared_matches_model)
{
	pair_case(_metadata, self->fd, variant->backing, variant->group, MAP_SHARED);
}

/* ---- bits 32-63, and MAP_DROPPABLE with each bit, per backing ---- */

FIXTURE(word) {
	int fd;
};

FIXTURE_VARIANT(word) {
	enum backing backing;
};

FIXTURE_VARIANT_ADD(word, ext4_dax) { .backing = EXT4_DAX };
FIXTURE_VARIANT_ADD(word, ext4_nodax) { .backing = EXT4_NODAX };
FIXTURE_VARIANT_ADD(word, xfs_dax) { .backing = XFS_DAX };
FIXTURE_VARIANT_ADD(word, xfs_nodax) { .backing = XFS_NODAX };
FIXTURE_VARIANT_ADD(word, tmpfs) { .backing = TMPFS };
FIXTURE_VARIANT_ADD(word, devdax) { .backing = DEVDAX };
FIXTURE_VARIANT_ADD(word, hugetlbfs) { .backing = HUGETLBFS };
FIXTURE_VARIANT_ADD(word, anon) { .backing = ANON };

FIXTURE_SETUP(word)
{
	SETUP_BACKING(variant->backing);
}

FIXTURE_TEARDOWN(word)
{
	if (self->fd >= 0)
		close(self->fd);
}

#ifndef __i386__
/*
 * Bits 32-63 are flags no one defined: refused by validation, ignored by
 * MAP_SHARED.  Not built for flag_bits_32: an i386 program's flags word is
 * 32 bits, and the compat entries zero-extend it (__SC_COMPAT_CAST;
 * struct mmap_arg_struct32 holds a u32), so no i386 call can set these bits
 * and there is nothing to try (a skip would fail the run).
 */
TEST_F(word, high_bits_match_model)
{
	int k, bad = 0, not_modelled = 0;

	for (k = 32; k < 64; k++) {
		bad += check_one(_metadata, self->fd, variant->backing,
				 MAP_SHARED_VALIDATE | (1UL << k), &not_modelled);
		bad += check_one(_metadata, self->fd, variant->backing,
				 MAP_SHARED | (1UL << k), &not_modelled);
	}
	EXPECT_EQ(0, bad) TH_LOG("%s: %d of 64 calls differ from the model",
				 backing_name[variant->backing], bad);
}
#endif

/*
 * MAP_DROPPABLE alone and with each bit 4-63 (the type field is 0-3); bits
 * 4-31 in flag_bits_32.  The kernel is 64-bit, so VM_DROPPABLE exists for
 * an i386 caller too.
 */
TEST_F(word, droppable_matches_model)
{
	int k, bad = 0, not_modelled = 0;

	bad += check_one(_metadata, self->fd, variant->backing, MAP_DROPPABLE, &not_modelled);
	for (k = 4; k < WORD_BITS; k++)
		bad += check_one(_metadata, self->fd, variant->backing,
				 MAP_DROPPABLE | (1UL << k), &not_modelled);
	if (not_modelled)
		TH_LOG("%d calls not tried: MAP_HUGETLB with no pool of huge pages", not_modelled);
	EXPECT_EQ(0, bad) TH_LOG("%s: %d of %d calls differ from the model",
				 backing_name[variant->backing], bad, WORD_BITS - 3);
}

/*
 * Which error wins.  do_mmap() checks, in order: a zero length (EINVAL),
 * flags the file does not support (EOPNOTSUPP), PROT_WRITE without a
 * writable descriptor (EACCES), a descriptor not open for reading
 * (EACCES), then the mapping type (EINVAL for type 0).
 */
FIXTURE(order) {
	int fd;
};

FIXTURE_VARIANT(order) {
	enum backing backing;
	int open_flags;
	int prot;
	unsigned long flags;
	size_t len;
	int expect;
};

#define RW (PROT_READ | PROT_WRITE)
#define VSYNC (MAP_SHARED_VALIDATE | MAP_SYNC)
FIXTURE_VARIANT_ADD(order, zero_length) {
	.backing = EXT4_DAX, .open_flags = O_RDWR, .prot = RW, .flags = VSYNC, .len = 0,
	.expect = EINVAL,
};
FIXTURE_VARIANT_ADD(order, type_0) {
	.backing = EXT4_DAX, .open_flags = O_RDWR, .prot = RW, .flags = 0, .len = LEN,
	.expect = EINVAL,
};
FIXTURE_VARIANT_ADD(order, type_0_with_sync) {
	.backing = EXT4_DAX, .open_flags = O_RDWR, .prot = RW, .flags = MAP_SYNC, .len = LEN,
	.expect = EINVAL,
};
FIXTURE_VARIANT_ADD(order, dax_rdonly_write_sync) {
	.backing = EXT4_DAX, .open_flags = O_RDONLY, .prot = RW, .flags = VSYNC, .len = LEN,
	.expect = EACCES,
};
FIXTURE_VARIANT_ADD(order, dax_rdonly_read_sync) {
	.backing = EXT4_DAX, .open_flags = O_RDONLY, .prot = PROT_READ, .flags = VSYNC, .len = LEN,
	.expect = 0,
};
FIXTURE_VARIANT_ADD(order, tmpfs_rdonly_write_sync) {
	.backing = TMPFS, .open_flags = O_RDONLY, .prot = RW, .flags = VSYNC, .len = LEN,
	.expect = EOPNOTSUPP,
};
FIXTURE_VARIANT_ADD(order, dax_wronly_write) {
	.backing = EXT4_DAX, .open_flags = O_WRONLY, .prot = PROT_WRITE,
	.flags = MAP_SHARED_VALIDATE, .len = LEN, .expect = EACCES,
};
FIXTURE_VARIANT_ADD(order, dax_wronly_unknown_flag) {
	.backing = EXT4_DAX, .open_flags = O_WRONLY, .prot = PROT_WRITE,
	.flags = MAP_SHARED_VALIDATE | 0x200000, .len = LEN, .expect = EOPNOTSUPP,
};
FIXTURE_VARIANT_ADD(order, xfs_rdonly_write_sync) {
	.backing = XFS_DAX, .open_flags = O_RDONLY, .prot = RW, .flags = VSYNC, .len = LEN,
	.expect = EACCES,
};

FIXTURE_SETUP(order)
{
	const char *why;
	char path[4096];
	int fd;

	/* make the file, then reopen it with the variant's access mode */
	fd = open_backing(variant->backing, &why);
	if (fd < 0 && why)
		SKIP(return, "%s", why);
	ASSERT_LE(0, fd);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	self->fd = open(path, variant->open_flags);
	ASSERT_LE(0, self->fd) TH_LOG("reopen: %s", strerror(errno));
	close(fd);
}

FIXTURE_TEARDOWN(order)
{
	close(self->fd);
}

/* glibc's mmap(): syscall 9 on x86-64, mmap2 (192) in flag_bits_32 */
TEST_F(order, error_that_wins)
{
	void *p = mmap(NULL, variant->len, variant->prot, variant->flags, self->fd, 0);
	int got = p == MAP_FAILED ? errno : 0;

	if (!got)
		munmap(p, variant->len);
	EXPECT_EQ(variant->expect, got)
		TH_LOG("%s, open %#x, prot %#x, flags %#lx, len %zu: expected %s, saw %s",
		       backing_name[variant->backing], variant->open_flags, variant->prot,
		       variant->flags, variant->len, err_name(variant->expect), err_name(got));
}

TEST_HARNESS_MAIN
