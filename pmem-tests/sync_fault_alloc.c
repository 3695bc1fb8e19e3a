// SPDX-License-Identifier: GPL-2.0
/*
 * sync_fault_alloc: the MAP_SYNC allocation look-ahead of kernel-patches
 * 0011 (ext4) and 0012 (xfs).
 *
 * A 4 KiB write fault through a MAP_SYNC mapping into a hole or an unwritten
 * extent allocates and zeroes the aligned sync_fault_alloc_kb range around
 * the page, clipped to the hole or extent and to EOF, and commits it once.
 * Every mapping here is placed 4 KiB past a 2 MiB boundary, so that no
 * fault can be a 2 MiB fault.
 *
 *   one_fault  how many blocks one fault allocates, for each knob value,
 *              MAP_SYNC or not, write or read
 *   fill       synchronous faults (NEEDDSYNC, from the kernel) of a 1 MiB
 *              fill, in order and at random, and the data it leaves
 *   layout     the invariants: clipped to EOF (i_size unchanged) and to the
 *              hole, the rest of an unwritten extent stays unwritten, the
 *              look-ahead blocks read zeros (never old data of freed blocks),
 *              and a full file system falls back to the faulting block
 */
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PG 4096UL
#define KB 64			/* the look-ahead the fill and layout tests set */
#define CLUSTER (KB * 1024 / PG)	/* pages */
#define STALE 0x454c415453ULL	/* "STALE": the old data of freed blocks */

/* the knob of the file system at dir; ms_fs_attr_get's -1 when absent */
static long knob_get(const char *dir)
{
	return ms_fs_attr_get(dir, MS_SYNC_FAULT_ALLOC_KB);
}

/* 4 KiB data blocks mapped in fd (FIEMAP: extent-tree blocks do not count) */
static long blocks_of(int fd)
{
	static struct fiemap_extent ext[1024];
	long blocks = 0;
	int i, n = ms_fiemap(fd, ext, 1024);

	if (n < 0)
		return -1;
	for (i = 0; i < n; i++)
		blocks += ext[i].fe_length / PG;
	return blocks;
}

static unsigned long ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : st.st_ino;
}

/* a MAP_SYNC (or MAP_SHARED) mapping of len bytes where only 4 KiB faults happen */
static char *map_pte(int fd, size_t len, bool sync)
{
	return ms_map_placed(len, PROT_READ | PROT_WRITE,
			     sync ? MAP_SHARED_VALIDATE | MAP_SYNC : MAP_SHARED, fd, MS_PLACE_PTE);
}

/* page pg of fd holds 'x' at offset 0 (if written) and zeros elsewhere? */
static bool page_is(int fd, size_t pg, bool written)
{
	static char buf[PG];
	size_t i;

	if (pread(fd, buf, PG, pg * PG) != (ssize_t)PG)
		return false;
	for (i = 0; i < PG; i++)
		if (buf[i] != (i == 0 && written ? 'x' : 0))
			return false;
	return true;
}

/*
 * Saves the file system's knob, sets it to want (unless want < 0) and
 * restores it in the teardown.  Fails when the kernel has no knob.
 */
#define KNOB_SETUP(dir, want)								\
	do {										\
		self->saved_kb = knob_get(dir);						\
		ASSERT_LE(0, self->saved_kb)						\
			TH_LOG("%s has no /sys/fs/<fs>/<dev>/" MS_SYNC_FAULT_ALLOC_KB	\
			       ": a kernel without the look-ahead patches", dir);	\
		if ((want) >= 0)							\
			ASSERT_EQ(0, ms_fs_attr_set(dir, MS_SYNC_FAULT_ALLOC_KB, want));\
	} while (0)

/* ------------------------------------------------------------------ */

FIXTURE(one_fault) {
	const char *dir;
	long saved_kb;
	int fd;
	char *map;
};

FIXTURE_VARIANT(one_fault) {
	enum ms_mount mnt;
	long kb;		/* the knob */
	bool sync;		/* MAP_SHARED_VALIDATE|MAP_SYNC, else MAP_SHARED */
	bool write;		/* write fault, else read fault */
	long blocks;		/* 4 KiB blocks the fault allocates */
};

#define ONE_FAULT(fs, M)							\
FIXTURE_VARIANT_ADD(one_fault, fs##_off) {					\
	.mnt = M, .kb = 0, .sync = true, .write = true, .blocks = 1 };		\
FIXTURE_VARIANT_ADD(one_fault, fs##_block_size_is_off) {			\
	.mnt = M, .kb = 4, .sync = true, .write = true, .blocks = 1 };		\
FIXTURE_VARIANT_ADD(one_fault, fs##_8k) {					\
	.mnt = M, .kb = 8, .sync = true, .write = true, .blocks = 2 };		\
FIXTURE_VARIANT_ADD(one_fault, fs##_64k) {					\
	.mnt = M, .kb = 64, .sync = true, .write = true, .blocks = 16 };	\
FIXTURE_VARIANT_ADD(one_fault, fs##_100k_rounds_down) {				\
	.mnt = M, .kb = 100, .sync = true, .write = true, .blocks = 16 };	\
FIXTURE_VARIANT_ADD(one_fault, fs##_2m) {					\
	.mnt = M, .kb = 2048, .sync = true, .write = true, .blocks = 512 };	\
FIXTURE_VARIANT_ADD(one_fault, fs##_4m_capped_at_pmd) {				\
	.mnt = M, .kb = 4096, .sync = true, .write = true, .blocks = 512 };	\
FIXTURE_VARIANT_ADD(one_fault, fs##_map_shared_unaffected) {			\
	.mnt = M, .kb = 64, .sync = false, .write = true, .blocks = 1 };	\
FIXTURE_VARIANT_ADD(one_fault, fs##_read_allocates_nothing) {			\
	.mnt = M, .kb = 64, .sync = true, .write = false, .blocks = 0 }

ONE_FAULT(ext4, MS_EXT4_DAX);
ONE_FAULT(xfs, MS_XFS_DAX);

#define ONE_LEN (4UL << 20)

FIXTURE_SETUP(one_fault)
{
	self->map = MAP_FAILED;
	self->fd = -1;
	self->saved_kb = -1;
	self->dir = ms_mount_dir(variant->mnt);
	if (!self->dir)
		SKIP(return, "%s is not set", ms_mount_env(variant->mnt));
	KNOB_SETUP(self->dir, variant->kb);
	self->fd = ms_create_file(self->dir, "one_fault", ONE_LEN);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, fsync(self->fd));
	self->map = map_pte(self->fd, ONE_LEN, variant->sync);
	ASSERT_NE(MAP_FAILED, self->map) TH_LOG("mmap: %s", strerror(errno));
}

FIXTURE_TEARDOWN(one_fault)
{
	if (self->map != MAP_FAILED)
		munmap(self->map, ONE_LEN);
	if (self->fd >= 0)
		close(self->fd);
	if (self->saved_kb >= 0)
		ms_fs_attr_set(self->dir, MS_SYNC_FAULT_ALLOC_KB, self->saved_kb);
}

TEST_F(one_fault, first_page_of_sparse_file)
{
	long got;

	ASSERT_EQ(0, ms_touch(self->map, variant->write));
	got = blocks_of(self->fd);
	EXPECT_EQ(variant->blocks, got)
		TH_LOG("knob %ld, %s %s fault: %ld blocks allocated, expected %ld",
		       variant->kb, variant->sync ? "MAP_SYNC" : "MAP_SHARED",
		       variant->write ? "write" : "read", got, variant->blocks);
	if (variant->write)
		EXPECT_TRUE(page_is(self->fd, 0, true));
	for (got = 1; got < variant->blocks; got++)
		ASSERT_TRUE(page_is(self->fd, got, false))
			TH_LOG("look-ahead page %ld does not read as zeros", got);
}

/* ------------------------------------------------------------------ */

FIXTURE(fill) {
	const char *dir;
	long saved_kb;
	int fd;
	char *map;
};

FIXTURE_VARIANT(fill) {
	enum ms_mount mnt;
};

FIXTURE_VARIANT_ADD(fill, ext4) { .mnt = MS_EXT4_DAX };
FIXTURE_VARIANT_ADD(fill, xfs) { .mnt = MS_XFS_DAX };

#define FILL_LEN (1UL << 20)
#define FILL_PAGES (FILL_LEN / PG)

FIXTURE_SETUP(fill)
{
	self->map = MAP_FAILED;
	self->fd = -1;
	self->saved_kb = -1;
	self->dir = ms_mount_dir(variant->mnt);
	if (!self->dir)
		SKIP(return, "%s is not set", ms_mount_env(variant->mnt));
	/* the knob is set by each test: a stock kernel still runs the fill */
	self->saved_kb = knob_get(self->dir);
	self->fd = ms_create_file(self->dir, "fill", FILL_LEN);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, fsync(self->fd));
	self->map = map_pte(self->fd, FILL_LEN, true);
	ASSERT_NE(MAP_FAILED, self->map) TH_LOG("mmap: %s", strerror(errno));
}

FIXTURE_TEARDOWN(fill)
{
	if (self->map != MAP_FAILED)
		munmap(self->map, FILL_LEN);
	if (self->fd >= 0)
		close(self->fd);
	if (self->saved_kb >= 0)
		ms_fs_attr_set(self->dir, MS_SYNC_FAULT_ALLOC_KB, self->saved_kb);
}

/* write every page once, in order or in a random order; returns NEEDDSYNC faults */
static int fill_pages(char *map, int fd, bool random_order)
{
	size_t order[FILL_PAGES], i, j, t;

	for (i = 0; i < FILL_PAGES; i++)
		order[i] = i;
	srandom(7);
	for (i = FILL_PAGES - 1; random_order && i > 0; i--) {
		j = random() % (i + 1);
		t = order[i], order[i] = order[j], order[j] = t;
	}
	if (ms_trace_start())
		return -1;
	for (i = 0; i < FILL_PAGES; i++)
		map[order[i] * PG] = 'x';
	return ms_trace_count("dax_pte_fault_done", ino_of(fd), "NEEDDSYNC");
}

static void check_fill(struct __test_metadata *_metadata, char *map, int fd, int want_max,
		       int want_min, bool random_order)
{
	int syncs = fill_pages(map, fd, random_order);
	size_t i;

	ASSERT_LE(0, syncs) TH_LOG("no fs_dax trace events (tracefs)");
	EXPECT_GE(want_max, syncs)
		TH_LOG("%s fill of %lu pages: %d synchronous faults, at most %d expected",
		       random_order ? "random" : "in-order", FILL_PAGES, syncs, want_max);
	EXPECT_LE(want_min, syncs)
		TH_LOG("%s fill of %lu pages: %d synchronous faults, at least %d expected",
		       random_order ? "random" : "in-order", FILL_PAGES, syncs, want_min);
	for (i = 0; i < FILL_PAGES; i++)
		ASSERT_TRUE(page_is(fd, i, true)) TH_LOG("page %zu after the fill is wrong", i);
	EXPECT_EQ((long)FILL_PAGES, blocks_of(fd));
}

TEST_F(fill, in_order_one_sync_per_64k)
{
	if (self->saved_kb >= 0)
		ASSERT_EQ(0, ms_fs_attr_set(self->dir, MS_SYNC_FAULT_ALLOC_KB, KB));
	check_fill(_metadata, self->map, self->fd, FILL_PAGES / CLUSTER, 1, false);
}

TEST_F(fill, random_order_one_sync_per_64k)
{
	if (self->saved_kb >= 0)
		ASSERT_EQ(0, ms_fs_attr_set(self->dir, MS_SYNC_FAULT_ALLOC_KB, KB));
	check_fill(_metadata, self->map, self->fd, FILL_PAGES / CLUSTER, 1, true);
}

TEST_F(fill, knob_0_one_sync_per_page)
{
	ASSERT_LE(0, self->saved_kb) TH_LOG("no " MS_SYNC_FAULT_ALLOC_KB " to turn the look-ahead off");
	ASSERT_EQ(0, ms_fs_attr_set(self->dir, MS_SYNC_FAULT_ALLOC_KB, 0));
	check_fill(_metadata, self->map, self->fd, FILL_PAGES, FILL_PAGES, false);
}

/* ------------------------------------------------------------------ */

FIXTURE(layout) {
	const char *dir;
	long saved_kb;
	int fd;
};

FIXTURE_VARIANT(layout) {
	enum ms_mount mnt;
};

FIXTURE_VARIANT_ADD(layout, ext4) { .mnt = MS_EXT4_DAX };
FIXTURE_VARIANT_ADD(layout, xfs) { .mnt = MS_XFS_DAX };

FIXTURE_SETUP(layout)
{
	self->fd = -1;
	self->saved_kb = -1;
	self->dir = ms_mount_dir(variant->mnt);
	if (!self->dir)
		SKIP(return, "%s is not set", ms_mount_env(variant->mnt));
	/* without the knob (stock) the invariants must hold all the same */
	self->saved_kb = knob_get(self->dir);
	if (self->saved_kb >= 0)
		ASSERT_EQ(0, ms_fs_attr_set(self->dir, MS_SYNC_FAULT_ALLOC_KB, KB));
}

FIXTURE_TEARDOWN(layout)
{
	char path[4096];

	if (self->fd >= 0)
		close(self->fd);
	snprintf(path, sizeof(path), "%s/filler", self->dir);
	unlink(path);
	if (self->saved_kb >= 0)
		ms_fs_attr_set(self->dir, MS_SYNC_FAULT_ALLOC_KB, self->saved_kb);
}

/* one MAP_SYNC write fault on page pg of fd (len bytes mapped) */
static int fault_page(int fd, size_t len, size_t pg)
{
	char *map = map_pte(fd, len, true);
	int sig;

	if (map == MAP_FAILED)
		return -1;
	sig = ms_touch(map + pg * PG, true);
	munmap(map, len);
	return sig;
}

TEST_F(layout, clipped_to_eof_and_size_unchanged)
{
	off_t size = 5 * PG + 100;
	struct stat st;
	size_t i;

	self->fd = ms_create_file(self->dir, "eof", size);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ(0, fault_page(self->fd, 6 * PG, 1));
	ASSERT_EQ(0, fstat(self->fd, &st));
	EXPECT_EQ(size, st.st_size) TH_LOG("the look-ahead changed i_size");
	EXPECT_EQ(6, blocks_of(self->fd))
		TH_LOG("%ld blocks: the look-ahead should fill the 6 blocks up to EOF, none past it",
		       blocks_of(self->fd));
	for (i = 0; i < 5; i++)
		EXPECT_TRUE(page_is(self->fd, i, i == 1)) TH_LOG("page %zu", i);
}

TEST_F(layout, clipped_to_the_hole)
{
	static char data[2 * PG];
	size_t i;

	/* pages 0-1 and 10 written, the fault on page 5: the hole is 2-9 */
	self->fd = ms_create_file(self->dir, "hole", 64 * PG);
	ASSERT_LE(0, self->fd);
	memset(data, 'D', sizeof(data));
	ASSERT_EQ((ssize_t)sizeof(data), pwrite(self->fd, data, sizeof(data), 0));
	ASSERT_EQ((ssize_t)PG, pwrite(self->fd, data, PG, 10 * PG));
	ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ(0, fault_page(self->fd, 64 * PG, 5));
	EXPECT_EQ(11, blocks_of(self->fd))
		TH_LOG("%ld blocks: 3 written + the hole of 8 around the fault expected",
		       blocks_of(self->fd));
	ASSERT_EQ((ssize_t)sizeof(data), pread(self->fd, data, sizeof(data), 0));
	for (i = 0; i < sizeof(data); i++)
		ASSERT_EQ('D', data[i]) TH_LOG("written data before the hole changed at %zu", i);
	ASSERT_EQ((ssize_t)PG, pread(self->fd, data, PG, 10 * PG));
	for (i = 0; i < PG; i++)
		ASSERT_EQ('D', data[i]) TH_LOG("written data after the hole changed at %zu", i);
	for (i = 2; i < 10; i++)
		EXPECT_TRUE(page_is(self->fd, i, i == 5)) TH_LOG("page %zu", i);
}

TEST_F(layout, rest_of_unwritten_extent_stays_unwritten)
{
	struct fiemap_extent ext[8];
	unsigned long long written = 0, unwritten = 0;
	int i, n;

	/* 32 fallocated pages, the fault on page 3: pages 0-15 become written */
	self->fd = ms_create_file(self->dir, "unwritten", 0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, fallocate(self->fd, 0, 0, 32 * PG));
	ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ(0, fault_page(self->fd, 32 * PG, 3));
	n = ms_fiemap(self->fd, ext, 8);
	ASSERT_LT(0, n) TH_LOG("FIEMAP: %s", strerror(errno));
	for (i = 0; i < n; i++) {
		TH_LOG("extent %d: logical %llu length %llu flags %#x", i,
		       (unsigned long long)ext[i].fe_logical,
		       (unsigned long long)ext[i].fe_length, ext[i].fe_flags);
		if (ext[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN) {
			EXPECT_LE(CLUSTER * PG, ext[i].fe_logical);
			unwritten += ext[i].fe_length;
		} else {
			EXPECT_GT(CLUSTER * PG, ext[i].fe_logical);
			written += ext[i].fe_length;
		}
	}
	EXPECT_EQ(CLUSTER * PG, written) TH_LOG("written bytes: the 64 KiB around the fault");
	EXPECT_EQ((32 - CLUSTER) * PG, unwritten) TH_LOG("unwritten bytes: the rest");
	EXPECT_EQ(32, blocks_of(self->fd));
	for (i = 0; i < 32; i++)
		EXPECT_TRUE(page_is(self->fd, i, i == 3)) TH_LOG("page %d", i);
}

/*
 * Blocks freed by a deleted file still hold its data.  The look-ahead must
 * zero every block it allocates: none of them may show that data.
 */
TEST_F(layout, lookahead_blocks_never_show_old_data)
{
	static unsigned long long buf[(1 << 20) / sizeof(unsigned long long)];
	char path[4096];
	int fd, mb, i, pg, stale = 0;
	size_t j;

	for (j = 0; j < sizeof(buf) / sizeof(buf[0]); j++)
		buf[j] = STALE;
	snprintf(path, sizeof(path), "%s/stale", self->dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, fd);
	for (mb = 0; mb < 32; mb++)
		ASSERT_EQ((ssize_t)sizeof(buf), write(fd, buf, sizeof(buf)));
	ASSERT_EQ(0, fsync(fd));
	close(fd);
	ASSERT_EQ(0, unlink(path));
	sync();		/* the blocks are free once the unlink is committed */

	/* a fault in the middle of each 64 KiB of a 1 MiB sparse file */
	self->fd = ms_create_file(self->dir, "fresh", 256 * PG);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, fsync(self->fd));
	for (i = 0; i < 256 / (int)CLUSTER; i++)
		ASSERT_EQ(0, fault_page(self->fd, 256 * PG, i * CLUSTER + 7));
	EXPECT_EQ(256, blocks_of(self->fd)) TH_LOG("the look-ahead did not fill the file");
	for (pg = 0; pg < 256; pg++) {
		ASSERT_EQ((ssize_t)PG, pread(self->fd, buf, PG, pg * PG));
		for (j = 0; j < PG / sizeof(buf[0]); j++)
			stale += buf[j] == STALE;
		EXPECT_TRUE(page_is(self->fd, pg, pg % CLUSTER == 7)) TH_LOG("page %d", pg);
	}
	EXPECT_EQ(0, stale) TH_LOG("%d words of a deleted file's data are readable", stale);
}

/*
 * With less free space than the look-ahead needs, the fault still gets its
 * block: the look-ahead falls back, it does not turn into SIGBUS.
 */
TEST_F(layout, full_file_system_falls_back_to_one_block)
{
	struct statvfs sv;
	char path[4096];
	off_t off = 0;
	int filler, sig;

	snprintf(path, sizeof(path), "%s/filler", self->dir);
	self->fd = ms_create_file(self->dir, "late", 64 * PG);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, fsync(self->fd));
	filler = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, filler);
	while (!fallocate(filler, 0, off, 1 << 20))
		off += 1 << 20;
	while (!fallocate(filler, 0, off, PG))
		off += PG;
	ASSERT_EQ(ENOSPC, errno) TH_LOG("filling the file system: %s", strerror(errno));
	/* 8 free blocks: fewer than the 15 the look-ahead wants from page 1 on */
	ASSERT_EQ(0, fallocate(filler, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			       off / 2 & ~(off_t)(PG - 1), 8 * PG));
	ASSERT_EQ(0, fsync(filler));
	close(filler);
	sync();
	ASSERT_EQ(0, statvfs(self->dir, &sv));
	TH_LOG("free blocks before the fault: %lu", (unsigned long)sv.f_bfree);
	sig = fault_page(self->fd, 64 * PG, 1);
	EXPECT_EQ(0, sig) TH_LOG("the fault raised signal %d with %lu blocks free", sig,
				 (unsigned long)sv.f_bfree);
	EXPECT_TRUE(page_is(self->fd, 1, true));
	TH_LOG("blocks allocated by the fault: %ld", blocks_of(self->fd));
}

TEST_HARNESS_MAIN
