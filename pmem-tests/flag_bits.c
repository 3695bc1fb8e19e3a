// SPDX-License-Identifier: GPL-2.0
/*
 * flag_bits: MAP_SHARED_VALIDATE against a model, one bit of the flags word
 * at a time, on each kind of file; and every pair of non-legacy bits.
 *
 * The model, from the rules (mm/mmap.c do_mmap(), include/linux/mman.h):
 *  - bits of the mapping type other than SHARED|PRIVATE make no valid type:
 *    EINVAL;
 *  - a bit of the legacy set (LEGACY_MAP_MASK) is accepted, except where it
 *    has its own rule: MAP_GROWSDOWN on a file and MAP_HUGETLB on a file
 *    that is not hugetlbfs give EINVAL, MAP_FIXED needs an address (given);
 *  - MAP_SYNC is accepted where the file supports it (DAX on ext4/xfs,
 *    device-dax); elsewhere EOPNOTSUPP;
 *  - MAP_ANONYMOUS makes an anonymous MAP_SHARED_VALIDATE mapping, and
 *    MAP_FIXED_NOREPLACE is accepted (patches 0002, 0003: on the stock
 *    kernel these are listed in expected-stock-failures);
 *  - any other bit: EOPNOTSUPP.
 * MAP_SHARED with the same bit never fails with EOPNOTSUPP.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define LEN (2UL << 20)
#define TYPE_BITS 0x0fUL
/* LEGACY_MAP_MASK of 6.12, x86-64 (bits 26-30: MAP_UNINITIALIZED, MAP_HUGE_*) */
#define LEGACY (MAP_SHARED | MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS | MAP_DENYWRITE | \
		MAP_EXECUTABLE | MAP_GROWSDOWN | MAP_LOCKED | MAP_NORESERVE | \
		MAP_POPULATE | MAP_NONBLOCK | MAP_STACK | MAP_HUGETLB | MAP_32BIT | \
		0x80UL /* MAP_ABOVE4G */ | (0x1fUL << 26))

enum backing { EXT4_DAX, EXT4_NODAX, XFS_DAX, XFS_NODAX, TMPFS, DEVDAX };

static const char *const backing_name[] = {
	"ext4 DAX", "ext4 non-DAX", "xfs DAX", "xfs non-DAX", "tmpfs", "device-dax",
};

static bool supports_sync(enum backing b)
{
	return b == EXT4_DAX || b == XFS_DAX || b == DEVDAX;
}

/* Expected errno (0: success) of MAP_SHARED_VALIDATE | bits on backing b. */
static int model(enum backing b, unsigned long bits)
{
	unsigned long other = bits & ~(LEGACY | MAP_SYNC | MAP_FIXED_NOREPLACE);

	if (bits & TYPE_BITS & ~(unsigned long)MAP_SHARED_VALIDATE)
		return EINVAL;
	if (bits & MAP_ANONYMOUS)	/* the fd is ignored: anonymous memory */
		return (bits & (other | MAP_SYNC)) ? EOPNOTSUPP :
		       (bits & MAP_HUGETLB) ? ENOMEM /* no huge pages reserved */ : 0;
	if (other)
		return EOPNOTSUPP;
	if ((bits & MAP_SYNC) && !supports_sync(b))
		return EOPNOTSUPP;
	if (bits & (MAP_GROWSDOWN | MAP_HUGETLB))
		return EINVAL;
	return 0;
}

static int open_backing(enum backing b, const char **why)
{
	static const enum ms_mount mnt[] = { MS_EXT4_DAX, MS_EXT4_NODAX, MS_XFS_DAX, MS_XFS_NODAX };
	const char *dir;
	int fd;

	*why = NULL;
	if (b == TMPFS) {
		fd = open("/tmp/flag_bits", O_RDWR | O_CREAT | O_TRUNC, 0644);
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

/* mmap with these flags; returns the errno, 0 on success (and unmaps). */
static int try_map(int fd, unsigned long flags)
{
	void *hint = NULL, *p;
	int err;

	if (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) {
		p = mmap(NULL, 2 * LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return errno;
		hint = (void *)(((unsigned long)p + LEN - 1) & ~(LEN - 1));
		munmap(p, 2 * LEN);
	}
	p = mmap(hint, LEN, PROT_READ | PROT_WRITE, flags, fd, 0);
	err = p == MAP_FAILED ? errno : 0;
	if (!err)
		munmap(p, LEN);
	return err;
}

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

#define SETUP_BACKING(b) do {							\
	const char *why;							\
										\
	self->fd = open_backing(b, &why);					\
	if (self->fd < 0 && why)						\
		SKIP(return, "%s", why);					\
	ASSERT_LE(0, self->fd) TH_LOG("%s: cannot open a file: %s",		\
				      backing_name[b], strerror(errno));	\
} while (0)

FIXTURE_SETUP(bits)
{
	SETUP_BACKING(variant->backing);
}

FIXTURE_TEARDOWN(bits)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(bits, validate_matches_model)
{
	unsigned long bit = 1UL << variant->bit;
	int want = model(variant->backing, MAP_SHARED_VALIDATE | bit);
	int got = try_map(self->fd, MAP_SHARED_VALIDATE | bit);

	EXPECT_EQ(want, got)
		TH_LOG("%s, MAP_SHARED_VALIDATE|%#lx: model says %s, kernel says %s",
		       backing_name[variant->backing], bit,
		       want ? strerror(want) : "success", got ? strerror(got) : "success");
}

TEST_F(bits, shared_never_refuses_a_flag)
{
	unsigned long bit = 1UL << variant->bit;
	int got = try_map(self->fd, MAP_SHARED | (bit & ~TYPE_BITS));

	EXPECT_NE(EOPNOTSUPP, got)
		TH_LOG("%s, MAP_SHARED|%#lx: EOPNOTSUPP; MAP_SHARED must ignore flags it "
		       "does not know", backing_name[variant->backing], bit);
}

FIXTURE(pairs) {
	int fd;
};

FIXTURE_VARIANT(pairs) {
	enum backing backing;
};

FIXTURE_VARIANT_ADD(pairs, ext4_dax) { .backing = EXT4_DAX };
FIXTURE_VARIANT_ADD(pairs, ext4_nodax) { .backing = EXT4_NODAX };
FIXTURE_VARIANT_ADD(pairs, xfs_dax) { .backing = XFS_DAX };
FIXTURE_VARIANT_ADD(pairs, xfs_nodax) { .backing = XFS_NODAX };
FIXTURE_VARIANT_ADD(pairs, tmpfs) { .backing = TMPFS };
FIXTURE_VARIANT_ADD(pairs, devdax) { .backing = DEVDAX };

FIXTURE_SETUP(pairs)
{
	SETUP_BACKING(variant->backing);
}

FIXTURE_TEARDOWN(pairs)
{
	if (self->fd >= 0)
		close(self->fd);
}

/* Every pair of bits outside the legacy set, type bits and MAP_SYNC. */
TEST_F(pairs, unknown_bits_are_refused)
{
	unsigned long known = LEGACY | TYPE_BITS | MAP_SYNC | MAP_FIXED_NOREPLACE;
	int i, j, bad = 0, tried = 0;

	for (i = 0; i < 32; i++) {
		for (j = i + 1; j < 32; j++) {
			unsigned long bits = (1UL << i) | (1UL << j);
			int got;

			if (bits & known)
				continue;
			tried++;
			got = try_map(self->fd, MAP_SHARED_VALIDATE | bits);
			if (got != EOPNOTSUPP) {
				bad++;
				TH_LOG("%s, MAP_SHARED_VALIDATE|%#lx: %s, expected EOPNOTSUPP",
				       backing_name[variant->backing], bits,
				       got ? strerror(got) : "success");
			}
		}
	}
	EXPECT_EQ(0, bad) TH_LOG("%d of %d pairs", bad, tried);
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

TEST_F(order, error_that_wins)
{
	void *p = mmap(NULL, variant->len, variant->prot, variant->flags, self->fd, 0);
	int got = p == MAP_FAILED ? errno : 0;

	if (!got)
		munmap(p, variant->len);
	EXPECT_EQ(variant->expect, got)
		TH_LOG("%s, open %#x, prot %#x, flags %#lx, len %zu: expected %s, saw %s",
		       backing_name[variant->backing], variant->open_flags, variant->prot,
		       variant->flags, variant->len,
		       variant->expect ? strerror(variant->expect) : "success",
		       got ? strerror(got) : "success");
}

TEST_HARNESS_MAIN
