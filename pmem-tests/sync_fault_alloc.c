// SPDX-License-Identifier: GPL-2.0
/*
 * sync_fault_alloc: the MAP_SYNC allocation look-ahead (kernel-patches 0011
 * ext4, 0012 xfs) and the coherence fix it relies on (0010 dax).
 *
 * Only a file that asks for it gets the look-ahead:
 *   ext4  a write fault through a MAP_SYNC mapping into an unwritten extent
 *         (fallocate) converts and zeroes the unwritten blocks of the
 *         aligned extent_max_zeroout_kb range around the page, clipped to
 *         EOF; holes in it stay holes; a hole gets one block, as before.
 *   xfs   the extent size hint is honoured for DAX allocations (any write
 *         fault, or write(2)): the hint-aligned range, at most 2 MiB,
 *         clipped to the hole or unwritten extent and to EOF.
 * Every mapping is placed 4 KiB past a 2 MiB boundary: 4 KiB faults only.
 *
 *   one_fault  blocks one fault writes (FIEMAP), per file, hint and knob
 *   fill       synchronous faults (NEEDDSYNC, from the kernel) and blocks of
 *              a 1 MiB fill, in order and at random
 *   layout     clipped to EOF (i_size unchanged), to the hole, to the extent;
 *              the rest of an unwritten extent stays unwritten; never old
 *              data of freed blocks; near ENOSPC one block, no signal
 *   extents    ext4: one fault converts every fallocated extent of its range
 *   enospc     near ENOSPC one block, no signal (xfs: a fallocated range is
 *              still converted whole); xfs: a range the allocator gives in
 *              pieces is all written, and the fault maps its piece
 *   coherence  a mapping that read the zero page sees what write(2) or an
 *              O_DIRECT write puts into a look-ahead block, in this process
 *              and in another
 *   quota      xfs: near a user's quota limit one block and no blockgc scan;
 *              the range charged to the owner's quota, block for block
 *   race       a pwrite() racing the look-ahead's zeroing survives (two vCPUs)
 *   swapon     a DAX file cannot be a swap file (why the swap guard is dead)
 *
 * With MAPSYNC_KERNEL=stock the cases that need the look-ahead skip (the
 * stock kernel has no look-ahead); the cases that say what must not change
 * run on both kernels, and so do the two xfs cases near ENOSPC and near a
 * quota limit, where stock's SIGBUS is a bug (expected-stock-failures).
 */
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/quota.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PG 4096UL
#define STALE 0x454c415453ULL	/* "STALE": the old data of freed blocks */

static bool stock_kernel(void)
{
	const char *k = getenv("MAPSYNC_KERNEL");

	return k && !strcmp(k, "stock");
}

#define SKIP_ON_STOCK(lookahead)						\
	do {									\
		if ((lookahead) && stock_kernel())				\
			SKIP(return, "needs the look-ahead, which the stock "	\
			     "kernel does not have (kernel-patches 0011/0012)");\
	} while (0)

/* 4 KiB blocks of fd (FIEMAP): all of them, or only the written ones */
static long blocks_of(int fd, bool written_only)
{
	static struct fiemap_extent ext[1024];
	long blocks = 0;
	int i, n = ms_fiemap(fd, ext, 1024);

	if (n < 0)
		return -1;
	for (i = 0; i < n; i++)
		if (!written_only || !(ext[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN))
			blocks += ext[i].fe_length / PG;
	return blocks;
}

static unsigned long ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : st.st_ino;
}

/* a mapping of len bytes where only 4 KiB faults happen */
static char *map_pte(int fd, size_t len, int prot, bool sync)
{
	return ms_map_placed(len, prot, sync ? MAP_SHARED_VALIDATE | MAP_SYNC : MAP_SHARED,
			     fd, MS_PLACE_PTE);
}

/* page pg of fd holds c at offset 0 (0: nothing written) and zeros elsewhere? */
static bool page_is(int fd, size_t pg, char c)
{
	static char buf[PG];
	size_t i;

	if (pread(fd, buf, PG, pg * PG) != (ssize_t)PG)
		return false;
	for (i = 0; i < PG; i++)
		if (buf[i] != (i == 0 ? c : 0))
			return false;
	return true;
}

/*
 * The file a case works on: created with size bytes, with an extent size hint
 * of hint bytes (xfs; set before any block exists, as xfs requires) and
 * fallocated over [0, falloc) (FALLOC_FL_KEEP_SIZE), then synced.
 */
static int make_file(const char *dir, const char *name, off_t size, unsigned int hint,
		     off_t falloc_off, off_t falloc_len)
{
	char path[4096];
	int fd;

	/* a new inode: O_TRUNC would keep an earlier case's extent size hint */
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
	fd = ms_create_file(dir, name, size);

	if (fd < 0)
		return -1;
	if ((hint && ms_set_extsize(fd, hint)) ||
	    (falloc_len && fallocate(fd, FALLOC_FL_KEEP_SIZE, falloc_off, falloc_len)) ||
	    fsync(fd)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ext4's extent_max_zeroout_kb: saved, set (want >= 0) and restored */
struct knob {
	const char *dir;
	long saved;
};

static int knob_set(struct knob *k, const char *dir, long want)
{
	k->dir = dir;
	k->saved = ms_fs_attr_get(dir, MS_EXTENT_MAX_ZEROOUT_KB);
	if (k->saved < 0)
		return -1;
	return want < 0 ? 0 : ms_fs_attr_set(dir, MS_EXTENT_MAX_ZEROOUT_KB, want);
}

static void knob_restore(struct knob *k)
{
	if (k->dir && k->saved >= 0)
		ms_fs_attr_set(k->dir, MS_EXTENT_MAX_ZEROOUT_KB, k->saved);
}

/* one write (or read) fault on page pg of fd, through a mapping of len bytes */
static int fault_page(int fd, size_t len, size_t pg, bool sync, bool write)
{
	char *map = map_pte(fd, len, PROT_READ | PROT_WRITE, sync);
	int sig;

	if (map == MAP_FAILED)
		return -1;
	sig = ms_touch(map + pg * PG, write);
	munmap(map, len);
	return sig;
}

/* ------------------------------------------------------------------ */

FIXTURE(one_fault) {
	struct knob knob;
	int fd;
};

FIXTURE_VARIANT(one_fault) {
	enum ms_mount mnt;
	bool falloc;		/* the file is fallocated (unwritten extents) */
	unsigned int hint;	/* xfs extent size hint, bytes */
	long kb;		/* ext4 extent_max_zeroout_kb (-1: as it is) */
	bool sync;		/* MAP_SHARED_VALIDATE|MAP_SYNC, else MAP_SHARED */
	bool write;		/* write fault, else read fault */
	bool premap_sync;	/* mapped with MAP_SYNC (no fault) before */
	bool premap_ro;		/* ... read-only, through an O_RDONLY descriptor */
	bool mprotect_rw;	/* the fault's mapping is made read-only, then mprotect()ed */
	long written;		/* written 4 KiB blocks after the fault on page 3 */
	bool lookahead;		/* needs the look-ahead: skipped on stock */
};

#define F(name, ...) FIXTURE_VARIANT_ADD(one_fault, name) { __VA_ARGS__ }
/* ext4: only unwritten extents are converted ahead, by extent_max_zeroout_kb */
F(ext4_falloc_zeroout_0_one_block, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 0,
  .sync = true, .write = true, .written = 1);
F(ext4_falloc_zeroout_8k, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 8,
  .sync = true, .write = true, .written = 2, .lookahead = true);
F(ext4_falloc_zeroout_32k, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 32,
  .sync = true, .write = true, .written = 8, .lookahead = true);
F(ext4_falloc_zeroout_64k, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 64,
  .sync = true, .write = true, .written = 16, .lookahead = true);
F(ext4_falloc_zeroout_100k_rounds_down, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 100,
  .sync = true, .write = true, .written = 16, .lookahead = true);
F(ext4_falloc_zeroout_2m, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 2048,
  .sync = true, .write = true, .written = 512, .lookahead = true);
F(ext4_falloc_zeroout_4m_capped_at_2m, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 4096,
  .sync = true, .write = true, .written = 512, .lookahead = true);
F(ext4_sparse_hole_gets_one_block, .mnt = MS_EXT4_DAX, .kb = 64,
  .sync = true, .write = true, .written = 1);
/* 8 KiB: the look-ahead would write pages 2-3, ext4's own zeroout only page 3 */
F(ext4_falloc_map_shared_as_before, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 8,
  .sync = false, .write = true, .written = 1);
/* a file mapped with MAP_SYNC asked: the look-ahead marks the inode, not the mapping */
F(ext4_falloc_map_shared_after_map_sync_converts_ahead, .mnt = MS_EXT4_DAX, .falloc = true,
  .kb = 8, .sync = false, .write = true, .premap_sync = true, .written = 2, .lookahead = true);
/* a MAP_SYNC mapping made PROT_READ and mprotect()ed writable asked too */
F(ext4_falloc_map_sync_mprotected_writable, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 8,
  .sync = true, .write = true, .mprotect_rw = true, .written = 2, .lookahead = true);
/* ... but not a reader's read-only MAP_SYNC mapping */
F(ext4_falloc_map_shared_after_readonly_map_sync_as_before, .mnt = MS_EXT4_DAX, .falloc = true,
  .kb = 8, .sync = false, .write = true, .premap_sync = true, .premap_ro = true, .written = 1);
F(ext4_falloc_read_writes_nothing, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 64,
  .sync = true, .write = false, .written = 0);
/* xfs: the extent size hint, honoured for every DAX allocation */
F(xfs_no_hint_one_block, .mnt = MS_XFS_DAX, .kb = -1,
  .sync = true, .write = true, .written = 1);
F(xfs_hint_16k, .mnt = MS_XFS_DAX, .hint = 16 << 10, .kb = -1,
  .sync = true, .write = true, .written = 4, .lookahead = true);
F(xfs_hint_64k, .mnt = MS_XFS_DAX, .hint = 64 << 10, .kb = -1,
  .sync = true, .write = true, .written = 16, .lookahead = true);
F(xfs_hint_96k_not_a_power_of_two, .mnt = MS_XFS_DAX, .hint = 96 << 10, .kb = -1,
  .sync = true, .write = true, .written = 24, .lookahead = true);
F(xfs_hint_2m, .mnt = MS_XFS_DAX, .hint = 2 << 20, .kb = -1,
  .sync = true, .write = true, .written = 512, .lookahead = true);
F(xfs_hint_4m_capped_at_pmd, .mnt = MS_XFS_DAX, .hint = 4 << 20, .kb = -1,
  .sync = true, .write = true, .written = 512, .lookahead = true);
F(xfs_hint_64k_map_shared_too, .mnt = MS_XFS_DAX, .hint = 64 << 10, .kb = -1,
  .sync = false, .write = true, .written = 16, .lookahead = true);
F(xfs_hint_64k_read_writes_nothing, .mnt = MS_XFS_DAX, .hint = 64 << 10, .kb = -1,
  .sync = true, .write = false, .written = 0);
F(xfs_falloc_hint_64k, .mnt = MS_XFS_DAX, .falloc = true, .hint = 64 << 10, .kb = -1,
  .sync = true, .write = true, .written = 16, .lookahead = true);
F(xfs_falloc_no_hint_one_block, .mnt = MS_XFS_DAX, .falloc = true, .kb = -1,
  .sync = true, .write = true, .written = 1);
#undef F

#define ONE_LEN (8UL << 20)	/* a 4 MiB range stays within it */

FIXTURE_SETUP(one_fault)
{
	const char *dir = ms_mount_dir(variant->mnt);

	self->fd = -1;
	self->knob.dir = NULL;
	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(variant->mnt));
	SKIP_ON_STOCK(variant->lookahead);
	if (variant->kb >= 0)
		ASSERT_EQ(0, knob_set(&self->knob, dir, variant->kb))
			TH_LOG("%s: no /sys/fs/ext4/<dev>/" MS_EXTENT_MAX_ZEROOUT_KB, dir);
	self->fd = make_file(dir, "one_fault", ONE_LEN, variant->hint, 0,
			     variant->falloc ? ONE_LEN : 0);
	ASSERT_LE(0, self->fd) TH_LOG("making the file: %s", strerror(errno));
}

FIXTURE_TEARDOWN(one_fault)
{
	if (self->fd >= 0)
		close(self->fd);
	knob_restore(&self->knob);
}

TEST_F(one_fault, written_blocks_after_a_fault_on_page_3)
{
	long got, pg;

	if (variant->premap_sync) {
		char proc[64];
		int fd = self->fd;
		char *map;

		if (variant->premap_ro) {
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", self->fd);
			fd = open(proc, O_RDONLY);
			ASSERT_LE(0, fd) TH_LOG("reopening read-only: %s", strerror(errno));
		}
		map = map_pte(fd, ONE_LEN, variant->premap_ro ? PROT_READ : PROT_READ | PROT_WRITE,
			      true);
		ASSERT_NE(MAP_FAILED, map) TH_LOG("MAP_SYNC mapping: %s", strerror(errno));
		munmap(map, ONE_LEN);
		if (fd != self->fd)
			close(fd);
	}
	if (variant->mprotect_rw) {
		char *map = map_pte(self->fd, ONE_LEN, PROT_READ, variant->sync);

		ASSERT_NE(MAP_FAILED, map) TH_LOG("read-only mapping: %s", strerror(errno));
		ASSERT_EQ(0, mprotect(map, ONE_LEN, PROT_READ | PROT_WRITE))
			TH_LOG("mprotect: %s", strerror(errno));
		ASSERT_EQ(0, ms_touch(map + 3 * PG, variant->write));
		munmap(map, ONE_LEN);
	} else {
		ASSERT_EQ(0, fault_page(self->fd, ONE_LEN, 3, variant->sync, variant->write));
	}
	got = blocks_of(self->fd, true);
	EXPECT_EQ(variant->written, got)
		TH_LOG("%s file%s, hint %u, zeroout %ld KiB, %s %s fault: %ld blocks written, %ld expected",
		       variant->falloc ? "fallocated" : "sparse",
		       !variant->premap_sync ? "" : variant->premap_ro ?
		       " mapped read-only with MAP_SYNC before" : " mapped with MAP_SYNC before",
		       variant->hint,
		       variant->kb, variant->sync ? "MAP_SYNC" : "MAP_SHARED",
		       variant->write ? "write" : "read", got, variant->written);
	if (!variant->falloc)
		EXPECT_EQ(got, blocks_of(self->fd, false)) TH_LOG("blocks allocated beyond the written ones");
	for (pg = 0; pg < 16; pg++)
		ASSERT_TRUE(page_is(self->fd, pg, pg == 3 && variant->write ? 'x' : 0))
			TH_LOG("page %ld does not read as it should", pg);
}

/*
 * xfs: a widened allocation never crosses a 2 MiB boundary, whatever the
 * hint: a 96 KiB hint (24 blocks) at page 505 allocates 504-511, not 504-527,
 * which would leave the next 2 MiB partly written and its PMD fault a PTE one.
 */
TEST(xfs_hint_96k_stops_at_a_2m_boundary)
{
	const char *dir = ms_mount_dir(MS_XFS_DAX);
	long got;
	int fd;

	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(MS_XFS_DAX));
	SKIP_ON_STOCK(true);
	fd = make_file(dir, "boundary", ONE_LEN, 96 << 10, 0, 0);
	ASSERT_LE(0, fd) TH_LOG("making the file: %s", strerror(errno));
	ASSERT_EQ(0, fault_page(fd, ONE_LEN, 505, true, true));
	got = blocks_of(fd, false);
	EXPECT_EQ(8, got) TH_LOG("%ld blocks allocated by a fault on page 505 with a 96 KiB hint: "
				 "8 expected (504-511; 24 would cross into the next 2 MiB)", got);
	EXPECT_TRUE(page_is(fd, 505, 'x'));
	close(fd);
}

/* ------------------------------------------------------------------ */

FIXTURE(fill) {
	struct knob knob;
	int fd;
	char *map;
};

FIXTURE_VARIANT(fill) {
	enum ms_mount mnt;
	bool falloc;
	unsigned int hint;
	long kb;
	bool random_order;
	int syncs;		/* NEEDDSYNC faults of the 1 MiB fill */
	bool lookahead;
};

#define F(name, ...) FIXTURE_VARIANT_ADD(fill, name) { __VA_ARGS__ }
F(ext4_falloc_zeroout_64k_in_order, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 64,
  .syncs = 16, .lookahead = true);
F(ext4_falloc_zeroout_64k_random, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 64,
  .random_order = true, .syncs = 16, .lookahead = true);
F(ext4_falloc_zeroout_0_one_sync_per_page, .mnt = MS_EXT4_DAX, .falloc = true, .kb = 0,
  .syncs = 256);
F(ext4_sparse_one_sync_per_page, .mnt = MS_EXT4_DAX, .kb = 64, .syncs = 256);
F(xfs_hint_64k_in_order, .mnt = MS_XFS_DAX, .hint = 64 << 10, .kb = -1,
  .syncs = 16, .lookahead = true);
F(xfs_hint_64k_random, .mnt = MS_XFS_DAX, .hint = 64 << 10, .kb = -1,
  .random_order = true, .syncs = 16, .lookahead = true);
F(xfs_no_hint_one_sync_per_page, .mnt = MS_XFS_DAX, .kb = -1, .syncs = 256);
#undef F

#define FILL_LEN (1UL << 20)
#define FILL_PAGES (FILL_LEN / PG)

FIXTURE_SETUP(fill)
{
	const char *dir = ms_mount_dir(variant->mnt);

	self->map = MAP_FAILED;
	self->fd = -1;
	self->knob.dir = NULL;
	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(variant->mnt));
	SKIP_ON_STOCK(variant->lookahead);
	if (variant->kb >= 0)
		ASSERT_EQ(0, knob_set(&self->knob, dir, variant->kb));
	self->fd = make_file(dir, "fill", FILL_LEN, variant->hint, 0,
			     variant->falloc ? FILL_LEN : 0);
	ASSERT_LE(0, self->fd) TH_LOG("making the file: %s", strerror(errno));
	self->map = map_pte(self->fd, FILL_LEN, PROT_READ | PROT_WRITE, true);
	ASSERT_NE(MAP_FAILED, self->map) TH_LOG("mmap: %s", strerror(errno));
}

FIXTURE_TEARDOWN(fill)
{
	if (self->map != MAP_FAILED)
		munmap(self->map, FILL_LEN);
	if (self->fd >= 0)
		close(self->fd);
	knob_restore(&self->knob);
}

TEST_F(fill, synchronous_faults_of_a_1m_fill)
{
	size_t order[FILL_PAGES], i, j, t;
	int syncs;

	for (i = 0; i < FILL_PAGES; i++)
		order[i] = i;
	srandom(7);
	for (i = FILL_PAGES - 1; variant->random_order && i > 0; i--) {
		j = random() % (i + 1);
		t = order[i], order[i] = order[j], order[j] = t;
	}
	ASSERT_EQ(0, ms_trace_start()) TH_LOG("no fs_dax trace events (tracefs)");
	for (i = 0; i < FILL_PAGES; i++)
		self->map[order[i] * PG] = 'x';
	syncs = ms_trace_count("dax_pte_fault_done", ino_of(self->fd), "NEEDDSYNC");
	ASSERT_LE(0, syncs) TH_LOG("no fs_dax trace events (tracefs)");
	EXPECT_EQ(variant->syncs, syncs)
		TH_LOG("%s fill of %lu pages: %d synchronous faults, %d expected",
		       variant->random_order ? "random" : "in-order", FILL_PAGES, syncs,
		       variant->syncs);
	for (i = 0; i < FILL_PAGES; i++)
		ASSERT_TRUE(page_is(self->fd, i, 'x')) TH_LOG("page %zu after the fill is wrong", i);
	EXPECT_EQ((long)FILL_PAGES, blocks_of(self->fd, false)) TH_LOG("blocks of the file");
	EXPECT_EQ((long)FILL_PAGES, blocks_of(self->fd, true)) TH_LOG("written blocks");
}

/* ------------------------------------------------------------------ */

FIXTURE(layout) {
	struct knob knob;
	const char *dir;
	int fd;
};

FIXTURE_VARIANT(layout) {
	enum ms_mount mnt;
	unsigned int hint;	/* xfs: 64 KiB; ext4 uses extent_max_zeroout_kb 64 */
};

FIXTURE_VARIANT_ADD(layout, ext4) { .mnt = MS_EXT4_DAX };
FIXTURE_VARIANT_ADD(layout, xfs) { .mnt = MS_XFS_DAX, .hint = 64 << 10 };

FIXTURE_SETUP(layout)
{
	self->fd = -1;
	self->knob.dir = NULL;
	self->dir = ms_mount_dir(variant->mnt);
	if (!self->dir)
		SKIP(return, "%s is not set", ms_mount_env(variant->mnt));
	if (variant->mnt == MS_EXT4_DAX)
		ASSERT_EQ(0, knob_set(&self->knob, self->dir, 64));
}

FIXTURE_TEARDOWN(layout)
{
	if (self->fd >= 0)
		close(self->fd);
	knob_restore(&self->knob);
}

TEST_F(layout, clipped_to_eof_and_size_unchanged)
{
	off_t size = 5 * PG + 100;
	bool ext4 = variant->mnt == MS_EXT4_DAX;
	struct stat st;
	size_t i;

	SKIP_ON_STOCK(true);
	/* ext4: 64 KiB fallocated past EOF (KEEP_SIZE); xfs: a sparse file */
	self->fd = make_file(self->dir, "eof", size, variant->hint, 0, ext4 ? 16 * PG : 0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, fault_page(self->fd, 6 * PG, 1, true, true));
	ASSERT_EQ(0, fstat(self->fd, &st));
	EXPECT_EQ(size, st.st_size) TH_LOG("the look-ahead changed i_size");
	EXPECT_EQ(6, blocks_of(self->fd, true))
		TH_LOG("%ld blocks written: the 6 up to EOF expected, none past it",
		       blocks_of(self->fd, true));
	for (i = 0; i < 5; i++)
		EXPECT_TRUE(page_is(self->fd, i, i == 1 ? 'x' : 0)) TH_LOG("page %zu", i);
}

TEST_F(layout, clipped_to_the_hole_or_extent)
{
	static char data[2 * PG];
	bool ext4 = variant->mnt == MS_EXT4_DAX;
	size_t i;

	SKIP_ON_STOCK(true);
	memset(data, 'D', sizeof(data));
	if (ext4) {
		/* pages 2-9 fallocated, the fault on page 5: 2-9 become written */
		self->fd = make_file(self->dir, "hole", 64 * PG, 0, 2 * PG, 8 * PG);
		ASSERT_LE(0, self->fd);
	} else {
		/*
		 * pages 0-1 and 10 written (with the hint, write(2) allocates
		 * all of 0-15), 2-9 punched out: the fault on page 5 must
		 * allocate exactly that hole of 8
		 */
		self->fd = make_file(self->dir, "hole", 64 * PG, variant->hint, 0, 0);
		ASSERT_LE(0, self->fd);
		ASSERT_EQ((ssize_t)sizeof(data), pwrite(self->fd, data, sizeof(data), 0));
		ASSERT_EQ((ssize_t)PG, pwrite(self->fd, data, PG, 10 * PG));
		ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				       2 * PG, 8 * PG));
		ASSERT_EQ(0, fsync(self->fd));
		ASSERT_EQ(8, blocks_of(self->fd, false)) TH_LOG("blocks around the hole");
	}
	ASSERT_EQ(0, fault_page(self->fd, 64 * PG, 5, true, true));
	EXPECT_EQ(ext4 ? 8 : 16, blocks_of(self->fd, false))
		TH_LOG("%ld blocks: %s expected", blocks_of(self->fd, false),
		       ext4 ? "the 8 fallocated" : "8 written + the hole of 8 around the fault");
	EXPECT_EQ(ext4 ? 8 : 16, blocks_of(self->fd, true)) TH_LOG("written blocks");
	if (!ext4) {
		ASSERT_EQ((ssize_t)sizeof(data), pread(self->fd, data, sizeof(data), 0));
		for (i = 0; i < sizeof(data); i++)
			ASSERT_EQ('D', data[i]) TH_LOG("data before the hole changed at %zu", i);
		ASSERT_EQ((ssize_t)PG, pread(self->fd, data, PG, 10 * PG));
		for (i = 0; i < PG; i++)
			ASSERT_EQ('D', data[i]) TH_LOG("data after the hole changed at %zu", i);
	}
	for (i = 2; i < 10; i++)
		EXPECT_TRUE(page_is(self->fd, i, i == 5 ? 'x' : 0)) TH_LOG("page %zu", i);
}

/*
 * Unwritten extents that start and end inside the 64 KiB window of a fault:
 * pages 2-9 and 18-25 fallocated (0-31, then 0-1, 10-17 and 26-31 punched).
 * A store on page 5, then one on page 21, writes exactly those 16 blocks: the
 * range is clipped to the extent on both sides, and nothing is allocated in
 * the holes around it.
 */
TEST_F(layout, clipped_to_an_unwritten_extent_inside_the_window)
{
	static const off_t punch[][2] = { { 0, 2 }, { 10, 8 }, { 26, 6 } };
	size_t i;

	SKIP_ON_STOCK(true);
	self->fd = make_file(self->dir, "inside", 64 * PG, variant->hint, 0, 32 * PG);
	ASSERT_LE(0, self->fd);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				       punch[i][0] * PG, punch[i][1] * PG));
	ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ(16, blocks_of(self->fd, false)) TH_LOG("fallocated blocks left: 16 expected");
	ASSERT_EQ(0, blocks_of(self->fd, true));
	ASSERT_EQ(0, fault_page(self->fd, 64 * PG, 5, true, true));
	EXPECT_EQ(8, blocks_of(self->fd, true))
		TH_LOG("%ld blocks written by a store on page 5: pages 2-9 expected",
		       blocks_of(self->fd, true));
	ASSERT_EQ(0, fault_page(self->fd, 64 * PG, 21, true, true));
	EXPECT_EQ(16, blocks_of(self->fd, true))
		TH_LOG("%ld blocks written after a store on page 21: pages 2-9 and 18-25 expected",
		       blocks_of(self->fd, true));
	EXPECT_EQ(16, blocks_of(self->fd, false))
		TH_LOG("%ld blocks allocated: the 16 fallocated expected, none in the holes",
		       blocks_of(self->fd, false));
	for (i = 0; i < 32; i++)
		EXPECT_TRUE(page_is(self->fd, i, i == 5 || i == 21 ? 'x' : 0)) TH_LOG("page %zu", i);
}

TEST_F(layout, rest_of_unwritten_extent_stays_unwritten)
{
	struct fiemap_extent ext[8];
	unsigned long long written = 0, unwritten = 0;
	int i, n;

	SKIP_ON_STOCK(true);
	/* 32 fallocated pages, the fault on page 3: pages 0-15 become written */
	self->fd = make_file(self->dir, "unwritten", 32 * PG, variant->hint, 0, 32 * PG);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, fault_page(self->fd, 32 * PG, 3, true, true));
	n = ms_fiemap(self->fd, ext, 8);
	ASSERT_LT(0, n) TH_LOG("FIEMAP: %s", strerror(errno));
	for (i = 0; i < n; i++) {
		TH_LOG("extent %d: logical %llu length %llu flags %#x", i,
		       (unsigned long long)ext[i].fe_logical,
		       (unsigned long long)ext[i].fe_length, ext[i].fe_flags);
		if (ext[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN) {
			EXPECT_LE(16 * PG, ext[i].fe_logical);
			unwritten += ext[i].fe_length;
		} else {
			EXPECT_GT(16 * PG, ext[i].fe_logical);
			written += ext[i].fe_length;
		}
	}
	EXPECT_EQ(16 * PG, written) TH_LOG("written bytes: the 64 KiB around the fault");
	EXPECT_EQ(16 * PG, unwritten) TH_LOG("unwritten bytes: the rest");
	for (i = 0; i < 32; i++)
		EXPECT_TRUE(page_is(self->fd, i, i == 3 ? 'x' : 0)) TH_LOG("page %d", i);
}

/*
 * Blocks freed by a deleted file still hold its data, and so do blocks a new
 * file fallocates over them.  Every block the look-ahead writes must be
 * zeroed: none of them may show that data.
 */
static unsigned long long stale_buf[(1 << 20) / sizeof(unsigned long long)];

/* fill 32 MiB of dir's file system with STALE, then free it (committed) */
static int leave_stale_blocks(const char *dir)
{
	char path[4096];
	int fd, mb;
	size_t j;

	for (j = 0; j < sizeof(stale_buf) / sizeof(stale_buf[0]); j++)
		stale_buf[j] = STALE;
	snprintf(path, sizeof(path), "%s/stale", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	for (mb = 0; mb < 32; mb++)
		if (write(fd, stale_buf, sizeof(stale_buf)) != (ssize_t)sizeof(stale_buf))
			break;
	if (mb < 32 || fsync(fd)) {
		close(fd);
		return -1;
	}
	close(fd);
	if (unlink(path))
		return -1;
	sync();		/* the blocks are free once the unlink is committed */
	return 0;
}

/* words equal to w in the page at p */
static int mem_words(const char *p, unsigned long long w)
{
	const unsigned long long *q = (const void *)p;
	int n = 0;
	size_t j;

	for (j = 0; j < PG / sizeof(*q); j++)
		n += q[j] == w;
	return n;
}

/* bytes equal to c in [p, p + len) */
static size_t mem_bytes(const char *p, char c, size_t len)
{
	size_t j, n = 0;

	for (j = 0; j < len; j++)
		n += p[j] == c;
	return n;
}

/* words of page pg of fd that hold STALE (-1: pread failed) */
static int stale_words(int fd, size_t pg)
{
	if (pread(fd, stale_buf, PG, pg * PG) != (ssize_t)PG)
		return -1;
	return mem_words((const char *)stale_buf, STALE);
}

TEST_F(layout, lookahead_blocks_never_show_old_data)
{
	int i, pg, stale = 0;

	SKIP_ON_STOCK(true);
	ASSERT_EQ(0, leave_stale_blocks(self->dir)) TH_LOG("%s", strerror(errno));

	/* ext4: fallocated; xfs: sparse with the hint; a fault on page 7 of each 64 KiB */
	self->fd = make_file(self->dir, "fresh", 256 * PG, variant->hint, 0,
			     variant->mnt == MS_EXT4_DAX ? 256 * PG : 0);
	ASSERT_LE(0, self->fd);
	for (i = 0; i < 16; i++)
		ASSERT_EQ(0, fault_page(self->fd, 256 * PG, i * 16 + 7, true, true));
	EXPECT_EQ(256, blocks_of(self->fd, true)) TH_LOG("the look-ahead did not write the file");
	for (pg = 0; pg < 256; pg++) {
		i = stale_words(self->fd, pg);
		ASSERT_LE(0, i);
		stale += i;
		EXPECT_TRUE(page_is(self->fd, pg, pg % 16 == 7 ? 'x' : 0)) TH_LOG("page %d", pg);
	}
	EXPECT_EQ(0, stale) TH_LOG("%d words of a deleted file's data are readable", stale);
}

/*
 * ext4: a range that holds several fallocated extents.  fallocate() on a file
 * system whose free space is fragmented makes unwritten extents as short as
 * the free extents; here holes make them separate: pages 0-2, 4-6, 8-10 and
 * 12-14 fallocated (3, 7, 11 and 15 holes), 16-31 too, over freed blocks that
 * hold old data; extent_max_zeroout_kb 64 (16 pages).  One MAP_SYNC write
 * fault converts and zeroes every unwritten block of its 16-page range (up to
 * EOF), and leaves the holes and the range after it alone; a fill of the
 * other fallocated pages of the range then takes no synchronous fault.
 */
FIXTURE(extents) {
	struct knob knob;
	int fd;
};

FIXTURE_VARIANT(extents) {
	size_t page;		/* the first fault */
	off_t size;		/* i_size */
	long written;		/* written blocks after it */
};

#define EXT_PAGES 32
FIXTURE_VARIANT_ADD(extents, fault_in_first) { .page = 1, .size = EXT_PAGES * PG, .written = 12 };
FIXTURE_VARIANT_ADD(extents, fault_in_third) { .page = 9, .size = EXT_PAGES * PG, .written = 12 };
FIXTURE_VARIANT_ADD(extents, fault_in_last) { .page = 13, .size = EXT_PAGES * PG, .written = 12 };
/* EOF in page 10: 0-2, 4-6, 8-10 up to it; 12-14 past it stay unwritten */
FIXTURE_VARIANT_ADD(extents, eof_in_third) { .page = 1, .size = 10 * PG + 100, .written = 9 };

static bool ext_fallocated(size_t pg)
{
	return pg >= 16 || pg % 4 != 3;
}

FIXTURE_SETUP(extents)
{
	const char *dir = ms_mount_dir(MS_EXT4_DAX);
	size_t pg;

	self->fd = -1;
	self->knob.dir = NULL;
	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(MS_EXT4_DAX));
	SKIP_ON_STOCK(true);
	ASSERT_EQ(0, knob_set(&self->knob, dir, 64));
	ASSERT_EQ(0, leave_stale_blocks(dir)) TH_LOG("%s", strerror(errno));
	self->fd = make_file(dir, "extents", variant->size, 0, 0, 0);
	ASSERT_LE(0, self->fd);
	for (pg = 0; pg < 16; pg += 4)
		ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_KEEP_SIZE, pg * PG, 3 * PG));
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_KEEP_SIZE, 16 * PG, 16 * PG));
	ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ(28, blocks_of(self->fd, false)) TH_LOG("fallocated blocks");
	ASSERT_EQ(0, blocks_of(self->fd, true)) TH_LOG("written blocks before the fault");
}

FIXTURE_TEARDOWN(extents)
{
	if (self->fd >= 0)
		close(self->fd);
	knob_restore(&self->knob);
}

TEST_F(extents, one_fault_converts_every_unwritten_extent_of_its_range)
{
	size_t eof_pages = (variant->size + PG - 1) / PG, pg;
	char *map = map_pte(self->fd, EXT_PAGES * PG, PROT_READ | PROT_WRITE, true);
	int syncs, stale = 0, n;

	ASSERT_NE(MAP_FAILED, map) TH_LOG("mmap: %s", strerror(errno));
	ASSERT_EQ(0, ms_trace_start()) TH_LOG("no fs_dax trace events (tracefs)");
	map[variant->page * PG] = 'x';
	syncs = ms_trace_count("dax_pte_fault_done", ino_of(self->fd), "NEEDDSYNC");
	EXPECT_EQ(1, syncs) TH_LOG("the first fault: %d synchronous faults", syncs);
	EXPECT_EQ(variant->written, blocks_of(self->fd, true))
		TH_LOG("fault on page %zu: %ld blocks written, %ld expected (every fallocated page of 0-15 below EOF)",
		       variant->page, blocks_of(self->fd, true), variant->written);
	EXPECT_EQ(28, blocks_of(self->fd, false)) TH_LOG("blocks: the holes must stay holes");

	ASSERT_EQ(0, ms_trace_start());
	for (pg = 0; pg < 16 && pg < eof_pages; pg++)
		if (ext_fallocated(pg) && pg != variant->page)
			map[pg * PG] = 'x';
	syncs = ms_trace_count("dax_pte_fault_done", ino_of(self->fd), "NEEDDSYNC");
	EXPECT_EQ(0, syncs)
		TH_LOG("the other fallocated pages of the range: %d synchronous faults", syncs);
	EXPECT_EQ(variant->written, blocks_of(self->fd, true)) TH_LOG("written blocks after the fill");
	EXPECT_EQ(28, blocks_of(self->fd, false)) TH_LOG("blocks after the fill");
	/* through the mapping: it shows the whole block holding EOF, read(2) stops at EOF */
	for (pg = 0; pg < eof_pages && pg < EXT_PAGES; pg++) {
		n = mem_words(map + pg * PG, STALE);
		stale += n;
		EXPECT_EQ(pg < 16 && ext_fallocated(pg) ? 'x' : 0, map[pg * PG]) TH_LOG("page %zu", pg);
		EXPECT_EQ(PG - 1, mem_bytes(map + pg * PG + 1, 0, PG - 1))
			TH_LOG("page %zu: bytes 1-4095 are not all zero", pg);
	}
	munmap(map, EXT_PAGES * PG);
	EXPECT_EQ(0, stale) TH_LOG("%d words of a deleted file's data are readable", stale);
}

/*
 * Near ENOSPC the allocation is not widened (xfs: no blockgc scan per fault
 * for blocks nobody asked for): the fault gets its one block, no SIGBUS.
 * (Stock xfs reserves for the hint-aligned range and allocates one block:
 * with a hint and 8 blocks punched free, this fault gets SIGBUS there, a bug 0012
 * fixes; the xfs case runs on both kernels.)
 */
FIXTURE(enospc) {
	char filler[4096];
	char other[4096];	/* another file to remove */
	struct knob knob;
	const char *resblks_dir;	/* xfs: its reserve pool to restore */
	long resblks;
};

FIXTURE_SETUP(enospc)
{
	self->filler[0] = 0;
	self->other[0] = 0;
	self->knob.dir = NULL;
	self->resblks_dir = NULL;
}

/* xfs's reserve pool of the file system of dir (xfs_io resblks): get (set < 0) or set */
static long xfs_resblks(const char *dir, long set)
{
	char cmd[4200];
	long n = -1;
	FILE *f;

	if (set >= 0)
		snprintf(cmd, sizeof(cmd), "xfs_io -x -c 'resblks %ld' '%s'", set, dir);
	else
		snprintf(cmd, sizeof(cmd), "xfs_io -x -c resblks '%s'", dir);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (fscanf(f, "reserved blocks = %ld", &n) != 1)
		n = -1;
	return pclose(f) ? -1 : n;
}

FIXTURE_TEARDOWN(enospc)
{
	if (self->filler[0])
		unlink(self->filler);	/* whatever failed, free the space again */
	if (self->other[0])
		unlink(self->other);
	knob_restore(&self->knob);
	if (self->resblks_dir)
		xfs_resblks(self->resblks_dir, self->resblks);
}

/*
 * Fill dir's file system with the file path (fallocate, as root: the root
 * reserve too) until it is full (ENOSPC for a 4 KiB piece) or at most avail
 * blocks are available (statvfs f_bavail), and sync it.
 */
static int fill_fs(const char *dir, const char *path, unsigned long avail)
{
	off_t off = 0, step = 1 << 20;
	struct statvfs sv;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return -1;
	while (!statvfs(dir, &sv) && sv.f_bavail > avail) {
		if (sv.f_bavail <= avail + 512)
			step = PG;
		if (!fallocate(fd, 0, off, step)) {
			off += step;
			continue;
		}
		if (errno != ENOSPC)
			goto fail;
		if (step == PG)
			break;
		step = PG;
	}
	if (!fsync(fd))
		return fd;
fail:
	close(fd);
	return -1;
}

/*
 * Fill dir's file system with self->filler, then punch 8 blocks free in its
 * middle (fewer than the 16 of a 64 KiB hint) and sync; *sv: statvfs after.
 */
static void leave_8_blocks(struct __test_metadata *_metadata, FIXTURE_DATA(enospc) *self,
			   const char *dir, struct statvfs *sv)
{
	off_t off;
	int filler;

	snprintf(self->filler, sizeof(self->filler), "%s/filler", dir);
	filler = fill_fs(dir, self->filler, 0);
	ASSERT_LE(0, filler) TH_LOG("filling the file system: %s", strerror(errno));
	off = lseek(filler, 0, SEEK_END);
	ASSERT_EQ(0, fallocate(filler, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			       off / 2 & ~(off_t)(PG - 1), 8 * PG));
	ASSERT_EQ(0, fsync(filler));
	close(filler);
	sync();
	ASSERT_EQ(0, statvfs(dir, sv));
}

TEST_F(enospc, xfs_hint_one_block_and_no_signal)
{
	const char *dir = ms_mount_dir(MS_XFS_DAX);
	struct statvfs sv;
	int fd, sig;

	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(MS_XFS_DAX));
	fd = make_file(dir, "late", 64 * PG, 64 << 10, 0, 0);
	ASSERT_LE(0, fd);
	leave_8_blocks(_metadata, self, dir, &sv);
	sig = fault_page(fd, 64 * PG, 1, true, true);
	EXPECT_EQ(0, sig) TH_LOG("the fault raised signal %d with %lu blocks free", sig,
				 (unsigned long)sv.f_bfree);
	EXPECT_TRUE(page_is(fd, 1, 'x'));
	EXPECT_EQ(1, blocks_of(fd, false))
		TH_LOG("%ld blocks allocated with %lu free: one expected",
		       blocks_of(fd, false), (unsigned long)sv.f_bfree);
	close(fd);
}

/*
 * xfs, a fallocated file with a hint: converting an unwritten extent reserves
 * bmbt blocks alone, so near ENOSPC the range is still converted whole (the
 * space test is for holes).  With 8 blocks punched free, a store on page 1 writes
 * pages 0-15, the 64 KiB of the hint, and no signal.
 */
TEST_F(enospc, xfs_hint_fallocated_converts_the_range)
{
	const char *dir = ms_mount_dir(MS_XFS_DAX);
	struct statvfs sv;
	long written;
	int fd, sig;

	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(MS_XFS_DAX));
	SKIP_ON_STOCK(true);
	fd = make_file(dir, "late", 64 * PG, 64 << 10, 0, 64 * PG);
	ASSERT_LE(0, fd);
	leave_8_blocks(_metadata, self, dir, &sv);
	sig = fault_page(fd, 64 * PG, 1, true, true);
	EXPECT_EQ(0, sig) TH_LOG("the fault raised signal %d with %lu blocks free", sig,
				 (unsigned long)sv.f_bfree);
	EXPECT_TRUE(page_is(fd, 1, 'x'));
	written = blocks_of(fd, true);
	EXPECT_EQ(16, written)
		TH_LOG("%ld blocks written by one fault into a fallocated file with a 64 KiB hint, "
		       "%lu blocks free: 16 expected (1: the space test of holes applied to a "
		       "conversion)", written, (unsigned long)sv.f_bfree);
	EXPECT_EQ(64, blocks_of(fd, false));
	close(fd);
}

/*
 * xfs: a widened range the allocator can only give in pieces.  The free space
 * is 96 extents of 16 blocks that hold old data (every other 16 blocks of a
 * 12 MiB file of STALE words punched, after the file system was filled with
 * the reserve pool emptied first, since its blocks stay free on disk), so a
 * fault in a file with a 2 MiB hint gets its 512 blocks in several extents,
 * one allocation each.  The fault is on the last page, whose block comes in
 * the last piece: it must map that piece (not the first), every block must be
 * written and zeroed, and the rest of the fill takes no synchronous fault.
 */
#define PIECE 16
#define PIECES 96

TEST_F(enospc, xfs_hint_range_in_several_free_extents)
{
	static struct fiemap_extent ext[1024];
	const char *dir = ms_mount_dir(MS_XFS_DAX);
	size_t pages = (2UL << 20) / PG, pg, bad = 0, j;
	long got;
	int fd, filler, sfd, n, syncs, i, stale = 0;
	char *map;

	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(MS_XFS_DAX));
	SKIP_ON_STOCK(true);
	snprintf(self->filler, sizeof(self->filler), "%s/filler", dir);
	snprintf(self->other, sizeof(self->other), "%s/pieces-stale", dir);
	fd = make_file(dir, "pieces", pages * PG, 2 << 20, 0, 0);
	ASSERT_LE(0, fd);
	/* 12 MiB of STALE words, written before the fill: contiguous on disk */
	for (j = 0; j < sizeof(stale_buf) / sizeof(stale_buf[0]); j++)
		stale_buf[j] = STALE;
	sfd = open(self->other, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, sfd) TH_LOG("%s: %s", self->other, strerror(errno));
	for (i = 0; i < PIECES * 2 * PIECE * (int)PG / (int)sizeof(stale_buf); i++)
		ASSERT_EQ((ssize_t)sizeof(stale_buf), write(sfd, stale_buf, sizeof(stale_buf)));
	ASSERT_EQ(0, fsync(sfd));
	self->resblks = xfs_resblks(dir, -1);
	ASSERT_LE(0, self->resblks) TH_LOG("xfs_io -x -c resblks %s failed", dir);
	self->resblks_dir = dir;
	ASSERT_EQ(0, xfs_resblks(dir, 0));
	/* full but for a few blocks, so that the punches can reserve theirs */
	filler = fill_fs(dir, self->filler, 32);
	ASSERT_LE(0, filler) TH_LOG("filling the file system: %s", strerror(errno));
	close(filler);
	for (i = 0; i < PIECES; i++)
		ASSERT_EQ(0, fallocate(sfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				       (off_t)i * 2 * PIECE * PG, PIECE * PG))
			TH_LOG("punch %d: %s", i, strerror(errno));
	ASSERT_EQ(0, fsync(sfd));
	close(sfd);
	sync();		/* the blocks are free once the punches are committed */

	map = map_pte(fd, pages * PG, PROT_READ | PROT_WRITE, true);
	ASSERT_NE(MAP_FAILED, map) TH_LOG("mmap: %s", strerror(errno));
	ASSERT_EQ(0, ms_trace_start()) TH_LOG("no fs_dax trace events (tracefs)");
	EXPECT_EQ(0, ms_touch(map + (pages - 1) * PG, true));
	syncs = ms_trace_count("dax_pte_fault_done", ino_of(fd), "NEEDDSYNC");
	EXPECT_EQ(1, syncs) TH_LOG("the first fault: %d synchronous faults", syncs);
	got = blocks_of(fd, true);
	n = ms_fiemap(fd, ext, 1024);
	EXPECT_EQ((long)pages, got)
		TH_LOG("%ld blocks written by the fault on page %zu, in %d extents: %zu expected "
		       "(the 2 MiB of the hint, from free extents of %d blocks)",
		       got, pages - 1, n, pages, PIECE);
	if (got == (long)pages)
		EXPECT_LT(1, n) TH_LOG("the range came in %d extent: the free space was not "
				       "fragmented, so this case tested nothing", n);
	EXPECT_TRUE(page_is(fd, pages - 1, 'x'))
		TH_LOG("page %zu does not read 'x' through pread(): the fault mapped another "
		       "piece's block", pages - 1);

	ASSERT_EQ(0, ms_trace_start());
	for (pg = 0; pg < pages - 1; pg++)
		map[pg * PG] = 'x';
	syncs = ms_trace_count("dax_pte_fault_done", ino_of(fd), "NEEDDSYNC");
	EXPECT_EQ(0, syncs) TH_LOG("the rest of the 2 MiB: %d synchronous faults", syncs);
	for (pg = 0; pg < pages; pg++) {
		stale += mem_words(map + pg * PG, STALE);
		if (mem_bytes(map + pg * PG + 1, 0, PG - 1) != PG - 1 || !page_is(fd, pg, 'x'))
			bad++;
	}
	EXPECT_EQ(0, stale) TH_LOG("%d words of the punched file's data are readable", stale);
	EXPECT_EQ(0UL, bad) TH_LOG("%zu pages do not read 'x' then zeros, through the mapping "
				   "and pread()", bad);
	munmap(map, pages * PG);
	close(fd);
	unlink(self->other);
	self->other[0] = 0;
	snprintf(self->other, sizeof(self->other), "%s/pieces", dir);
}

/* the unwritten FIEMAP extents of fd: page n (n >= 1) 32+ blocks inside one, 0 if none */
static size_t deep_unwritten_page(int fd, int n)
{
	static struct fiemap_extent ext[1024];
	int i, k = ms_fiemap(fd, ext, 1024);
	size_t s, e, pg;

	for (i = 0; i < k; i++) {
		s = ext[i].fe_logical / PG;
		e = s + ext[i].fe_length / PG;
		if (!(ext[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN))
			continue;
		/* 32-aligned windows 32+ blocks from both ends of the extent */
		for (pg = (s + 32 + 31) & ~31UL; pg + 64 <= e; pg += 64)
			if (--n == 0)
				return pg + 4;
	}
	return 0;
}

/*
 * ext4: on a nearly full file system the look-ahead does not run.  Its extent
 * splits would take tree blocks from the clusters kept for conversions that
 * must not fail (EXT4_GET_BLOCKS_METADATA_NOFAIL): it runs only while more
 * than 16 clusters are available beyond the root reserve and the reserved
 * clusters (statvfs f_bavail).  With 8 or fewer, a fault converts its one
 * block; with 512 more, a fault converts its 128 KiB.  The pages are 32+
 * blocks inside unwritten extents, so that ext4's own zeroout
 * (extent_max_zeroout_kb 128: 32 blocks) converts nothing beside them.
 */
TEST_F(enospc, ext4_nearly_full_fs_converts_one_block)
{
	const char *dir = ms_mount_dir(MS_EXT4_DAX);
	size_t pages = 1024, pg1, pg2;
	struct statvfs sv;
	long written;
	int fd, filler, sig;

	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(MS_EXT4_DAX));
	SKIP_ON_STOCK(true);
	ASSERT_EQ(0, knob_set(&self->knob, dir, 128));
	snprintf(self->filler, sizeof(self->filler), "%s/filler", dir);
	fd = make_file(dir, "full", pages * PG, 0, 0, pages * PG);
	ASSERT_LE(0, fd);
	pg1 = deep_unwritten_page(fd, 1);
	pg2 = deep_unwritten_page(fd, 2);
	ASSERT_NE(0UL, pg2) TH_LOG("fewer than two 64-block windows deep inside the unwritten "
				   "extents of a 4 MiB fallocated file");
	filler = fill_fs(dir, self->filler, 8);
	ASSERT_LE(0, filler) TH_LOG("filling the file system: %s", strerror(errno));
	ASSERT_EQ(0, statvfs(dir, &sv));
	sig = fault_page(fd, pages * PG, pg1, true, true);
	EXPECT_EQ(0, sig) TH_LOG("the fault raised signal %d with %lu blocks available", sig,
				 (unsigned long)sv.f_bavail);
	EXPECT_TRUE(page_is(fd, pg1, 'x'));
	written = blocks_of(fd, true);
	EXPECT_EQ(1, written)
		TH_LOG("%ld blocks written by one fault on page %zu with %lu blocks available "
		       "(%lu free, %ld reserved clusters): one expected (32 if the look-ahead ran)",
		       written, pg1, (unsigned long)sv.f_bavail, (unsigned long)sv.f_bfree,
		       ms_fs_attr_get(dir, "reserved_clusters"));
	/* and with room again, it runs: 32 more */
	ASSERT_EQ(0, fallocate(filler, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 512 * PG));
	ASSERT_EQ(0, fsync(filler));
	close(filler);
	ASSERT_EQ(0, statvfs(dir, &sv));
	EXPECT_EQ(0, fault_page(fd, pages * PG, pg2, true, true));
	written = blocks_of(fd, true);
	EXPECT_EQ(33, written)
		TH_LOG("%ld blocks written after a second fault on page %zu with %lu blocks "
		       "available: 33 expected (1 + the 32 of the look-ahead)", written, pg2,
		       (unsigned long)sv.f_bavail);
	close(fd);
}

/* ------------------------------------------------------------------ */

/*
 * xfs quotas (the look-ahead's space is the owner's space): the xfs DAX mount
 * is mounted again with -o uquota for the case, and back as it was after it.
 * A user 12 blocks below the hard limit of its quota (under 1% of it, where
 * xfs runs a blockgc scan before it fails a reservation), with no soft limit
 * or with the soft limit at the hard one, faults into a file with an extent
 * size hint: the fault gets its one block, charged as one, no signal, and no
 * scan (a widened attempt would fail its quota reservation and scan, in every
 * such fault; xfs_inode_near_dquot_enforcement(), 0012's first test, said
 * "not near" with the soft limit at the hard one).  Far from the
 * limit, a fault gets the hint's range and the quota is charged for exactly
 * the blocks allocated.  (Stock xfs reserves for the hint-aligned range and
 * allocates one block: near the limit its fault gets SIGBUS, a bug 0012 fixes.)
 */
#define QUOTA_UID 4242
#define QUOTA_HINT (128 << 10)
#define QUOTA_USED 4000		/* blocks the user owns before the fault */
#define QUOTA_FREE 12		/* blocks left under the hard limit: < 1% */

FIXTURE(quota) {
	char dev[256];
	const char *dir;
	bool remounted;
	int fd;
};

/* the user's limits: a hard limit only, or a soft limit at the hard one too */
FIXTURE_VARIANT(quota) {
	bool soft;
};

FIXTURE_VARIANT_ADD(quota, hard_only) {
	.soft = false,
};

FIXTURE_VARIANT_ADD(quota, soft_at_hard) {
	.soft = true,
};

FIXTURE_SETUP(quota)
{
	self->dev[0] = 0;
	self->dir = NULL;
	self->remounted = false;
	self->fd = -1;
}

/* the device mounted on dir (/proc/mounts) */
static int mount_dev(const char *dir, char *dev, size_t len)
{
	char d[256], mnt[4096];
	FILE *f = fopen("/proc/mounts", "r");
	int ret = -1;

	if (!f)
		return -1;
	while (fscanf(f, "%255s %4095s %*s %*s %*d %*d", d, mnt) == 2)
		if (!strcmp(mnt, dir))
			ret = snprintf(dev, len, "%s", d) < (int)len ? 0 : -1;
	fclose(f);
	return ret;
}

/*
 * unmount dir and mount dev there again with opts; *gone: dir was unmounted
 * (so that a failed mount is mounted back as before by the teardown)
 */
static int remount_with(const char *dev, const char *dir, const char *opts, bool *gone)
{
	sync();
	if (umount(dir))
		return -1;
	*gone = true;
	return mount(dev, dir, "xfs", 0, opts);
}

FIXTURE_TEARDOWN(quota)
{
	char path[4096];

	if (self->fd >= 0)
		close(self->fd);
	if (self->dir) {
		snprintf(path, sizeof(path), "%s/quota-filler", self->dir);
		unlink(path);
		snprintf(path, sizeof(path), "%s/quota-late", self->dir);
		unlink(path);
	}
	ms_write_file("/sys/kernel/tracing/events/xfs/xfs_blockgc_free_space/enable", "0", false);
	/* umount fails if the mount is already gone (a failed mount): mount it then */
	if (self->remounted && umount(self->dir) && errno != EINVAL)
		fprintf(stderr, "# could not unmount %s: %s\n", self->dir, strerror(errno));
	else if (self->remounted && mount(self->dev, self->dir, "xfs", 0, "dax=always"))
		fprintf(stderr, "# could not mount %s on %s again without quotas: %s\n",
			self->dev, self->dir, strerror(errno));
}

/*
 * the user's block usage (4 KiB blocks) or, with limit >= 0, set its hard
 * limit, and its soft limit to the same (soft) or none
 */
static long user_quota(const char *dev, long limit, bool soft)
{
	struct fs_disk_quota q = { .d_version = FS_DQUOT_VERSION, .d_flags = FS_USER_QUOTA,
				   .d_id = QUOTA_UID };

	if (limit >= 0) {
		q.d_fieldmask = FS_DQ_BHARD | FS_DQ_BSOFT;
		q.d_blk_hardlimit = limit * (PG / 512);
		q.d_blk_softlimit = soft ? q.d_blk_hardlimit : 0;
		return quotactl(QCMD(Q_XSETQLIM, USRQUOTA), dev, QUOTA_UID, (void *)&q);
	}
	if (quotactl(QCMD(Q_XGETQUOTA, USRQUOTA), dev, QUOTA_UID, (void *)&q))
		return -1;
	return q.d_bcount / (PG / 512);
}

/* lines of the trace buffer with event ev (tracing stopped first) */
static int trace_lines(const char *ev)
{
	char line[1024];
	int n = 0;
	FILE *f;

	ms_write_file("/sys/kernel/tracing/tracing_on", "0", false);
	f = fopen("/sys/kernel/tracing/trace", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (line[0] != '#' && strstr(line, ev))
			n++;
	fclose(f);
	return n;
}

/*
 * The case's user: remount with -o uquota, QUOTA_USED blocks in a filler file
 * and an empty 64-page file with a QUOTA_HINT hint, both owned by QUOTA_UID;
 * self->fd is that file, and the return value the user's usage in blocks.
 */
static long quota_user(struct __test_metadata *_metadata, FIXTURE_DATA(quota) *self)
{
	long used;
	int filler;

	ASSERT_EQ(0, mount_dev(self->dir, self->dev, sizeof(self->dev)));
	ASSERT_EQ(0, remount_with(self->dev, self->dir, "dax=always,uquota", &self->remounted))
		TH_LOG("mounting %s on %s again with -o uquota: %s", self->dev, self->dir,
		       strerror(errno));
	filler = make_file(self->dir, "quota-filler", 0, 0, 0, 0);
	ASSERT_LE(0, filler);
	ASSERT_EQ(0, fchown(filler, QUOTA_UID, -1));
	ASSERT_EQ(0, fallocate(filler, 0, 0, QUOTA_USED * PG));
	close(filler);
	self->fd = make_file(self->dir, "quota-late", 64 * PG, QUOTA_HINT, 0, 0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, fchown(self->fd, QUOTA_UID, -1));
	used = user_quota(self->dev, -1, false);
	ASSERT_LE(QUOTA_USED, used) TH_LOG("quota usage of uid %d: %ld blocks", QUOTA_UID, used);
	return used;
}

/*
 * Near the limit: one block, no signal, no blockgc scan.  (Stock reserves for
 * the hint's 32 blocks, fails the reservation and raises SIGBUS: a bug.)
 */
TEST_F(quota, xfs_hint_near_the_limit_one_block_no_scan)
{
	const char *scan = "/sys/kernel/tracing/events/xfs/xfs_blockgc_free_space/enable";
	long used, after;
	int sig, scans;

	self->dir = ms_mount_dir(MS_XFS_DAX);
	if (!self->dir)
		SKIP(return, "%s is not set", ms_mount_env(MS_XFS_DAX));
	used = quota_user(_metadata, self);
	ASSERT_EQ(0, user_quota(self->dev, used + QUOTA_FREE, variant->soft))
		TH_LOG("setting the limits: %s", strerror(errno));
	ASSERT_EQ(0, ms_write_file(scan, "1", false))
		TH_LOG("no xfs_blockgc_free_space trace event: %s", strerror(errno));
	ASSERT_EQ(0, ms_write_file("/sys/kernel/tracing/trace", "", false));
	ASSERT_EQ(0, ms_write_file("/sys/kernel/tracing/tracing_on", "1", false));
	sig = fault_page(self->fd, 64 * PG, 1, true, true);
	scans = trace_lines("xfs_blockgc_free_space:");
	ms_write_file(scan, "0", false);
	EXPECT_EQ(0, sig) TH_LOG("the fault raised signal %d with %d blocks left under the limit",
				 sig, QUOTA_FREE);
	EXPECT_EQ(0, scans) TH_LOG("%d blockgc scans for one fault near the quota limit", scans);
	EXPECT_TRUE(page_is(self->fd, 1, 'x'));
	EXPECT_EQ(1, blocks_of(self->fd, false))
		TH_LOG("%ld blocks allocated with %d left under the limit: one expected",
		       blocks_of(self->fd, false), QUOTA_FREE);
	after = user_quota(self->dev, -1, false);
	EXPECT_EQ(used + 1, after)
		TH_LOG("quota usage went from %ld to %ld blocks for a one-block fault", used, after);
}

/* far from it: the hint's range, and the quota charged for exactly that */
TEST_F(quota, xfs_hint_range_charged_block_for_block)
{
	long used, after;

	self->dir = ms_mount_dir(MS_XFS_DAX);
	if (!self->dir)
		SKIP(return, "%s is not set", ms_mount_env(MS_XFS_DAX));
	SKIP_ON_STOCK(true);
	used = quota_user(_metadata, self);
	ASSERT_EQ(0, user_quota(self->dev, used + 100000, variant->soft));
	EXPECT_EQ(0, fault_page(self->fd, 64 * PG, 40, true, true));
	after = user_quota(self->dev, -1, false);
	EXPECT_EQ((long)(QUOTA_HINT / PG), blocks_of(self->fd, false))
		TH_LOG("%ld blocks allocated by a fault in a file with a %d KiB hint",
		       blocks_of(self->fd, false), QUOTA_HINT >> 10);
	EXPECT_EQ(blocks_of(self->fd, false), after - used)
		TH_LOG("quota usage went from %ld to %ld blocks for a fault that allocated %ld",
		       used, after, blocks_of(self->fd, false));
}

/* ------------------------------------------------------------------ */

/*
 * Another mapping read the zero page of pages 1, 7 and 200; a MAP_SYNC store
 * to page 0 makes the look-ahead write pages 0-15 (zeroed) behind it; then
 * write(2) or an O_DIRECT write puts 'X' into pages 1, 7 and 200.  The other
 * mapping must read 'X' like pread() does, in this process or another one.
 */
FIXTURE(coherence) {
	struct knob knob;
	int fd;
};

enum writer { PWRITE, ODIRECT };

FIXTURE_VARIANT(coherence) {
	enum ms_mount mnt;
	bool falloc;
	unsigned int hint;
	enum writer writer;
	bool other_process;	/* the reading mapping is in a child process */
};

#define F(name, ...) FIXTURE_VARIANT_ADD(coherence, name) { __VA_ARGS__ }
F(ext4_falloc_pwrite, .mnt = MS_EXT4_DAX, .falloc = true, .writer = PWRITE);
F(ext4_falloc_odirect, .mnt = MS_EXT4_DAX, .falloc = true, .writer = ODIRECT);
F(ext4_falloc_pwrite_other_process, .mnt = MS_EXT4_DAX, .falloc = true, .writer = PWRITE,
  .other_process = true);
F(xfs_hint_pwrite, .mnt = MS_XFS_DAX, .hint = 64 << 10, .writer = PWRITE);
F(xfs_hint_odirect, .mnt = MS_XFS_DAX, .hint = 64 << 10, .writer = ODIRECT);
F(xfs_hint_pwrite_other_process, .mnt = MS_XFS_DAX, .hint = 64 << 10, .writer = PWRITE,
  .other_process = true);
F(xfs_falloc_hint_pwrite, .mnt = MS_XFS_DAX, .falloc = true, .hint = 64 << 10,
  .writer = PWRITE);
F(xfs_falloc_hint_odirect, .mnt = MS_XFS_DAX, .falloc = true, .hint = 64 << 10,
  .writer = ODIRECT);
#undef F

#define COH_LEN (1UL << 20)
static const size_t coh_pages[] = { 1, 7, 200 };

FIXTURE_SETUP(coherence)
{
	const char *dir = ms_mount_dir(variant->mnt);

	self->fd = -1;
	self->knob.dir = NULL;
	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(variant->mnt));
	if (variant->mnt == MS_EXT4_DAX)
		ASSERT_EQ(0, knob_set(&self->knob, dir, 64));
	self->fd = make_file(dir, "coherence", COH_LEN, variant->hint, 0,
			     variant->falloc ? COH_LEN : 0);
	ASSERT_LE(0, self->fd) TH_LOG("making the file: %s", strerror(errno));
}

FIXTURE_TEARDOWN(coherence)
{
	if (self->fd >= 0)
		close(self->fd);
	knob_restore(&self->knob);
}

/* the reading side: map read-only, read the pages (zero page), wait, read again */
static void reader(int fd, int go, int done)
{
	volatile char *map = map_pte(fd, COH_LEN, PROT_READ, false);
	char seen[3] = { '?', '?', '?' }, c;
	size_t i;

	if (map == MAP_FAILED)
		_exit(2);
	for (i = 0; i < 3; i++)
		seen[i] = map[coh_pages[i] * PG];
	if (write(done, seen, 3) != 3 || read(go, &c, 1) != 1)
		_exit(3);
	for (i = 0; i < 3; i++)
		seen[i] = map[coh_pages[i] * PG];
	_exit(write(done, seen, 3) == 3 ? 0 : 4);
}

static int write_x(int fd, const char *path, enum writer w, size_t pg)
{
	static char buf[PG] __attribute__((aligned(PG)));
	int dfd = fd;
	ssize_t n;

	memset(buf, 0, sizeof(buf));
	buf[0] = 'X';
	if (w == ODIRECT) {
		dfd = open(path, O_RDWR | O_DIRECT);
		if (dfd < 0)
			return -1;
	}
	n = pwrite(dfd, buf, PG, pg * PG);
	if (dfd != fd)
		close(dfd);
	return n == (ssize_t)PG ? 0 : -1;
}

TEST_F(coherence, mapping_sees_writes_into_lookahead_blocks)
{
	int go[2], done[2], status;
	char seen[4] = { 0 }, path[4096];
	volatile char *rmap;
	char *sync_map;
	pid_t pid = 0;
	size_t i;

	snprintf(path, sizeof(path), "%s/coherence", ms_mount_dir(variant->mnt));
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(done));
	if (variant->other_process) {
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0)
			reader(self->fd, go[0], done[1]);
		ASSERT_EQ(3, read(done[0], seen, 3));
		for (i = 0; i < 3; i++)
			ASSERT_EQ(0, seen[i]) TH_LOG("the other process read %#x", seen[i]);
	}
	/* a read-only mapping in this process too, which reads the zero page */
	rmap = map_pte(self->fd, COH_LEN, PROT_READ, false);
	ASSERT_NE(MAP_FAILED, (void *)rmap);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, rmap[coh_pages[i] * PG]);

	sync_map = map_pte(self->fd, COH_LEN, PROT_READ | PROT_WRITE, true);
	ASSERT_NE(MAP_FAILED, sync_map) TH_LOG("MAP_SYNC mmap: %s", strerror(errno));
	sync_map[0] = 'W';
	TH_LOG("blocks written after the MAP_SYNC store to page 0: %ld",
	       blocks_of(self->fd, true));

	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, write_x(self->fd, path, variant->writer, coh_pages[i]))
			TH_LOG("%s of page %zu: %s", variant->writer == ODIRECT ?
			       "O_DIRECT write" : "pwrite", coh_pages[i], strerror(errno));
	for (i = 0; i < 3; i++)
		ASSERT_TRUE(page_is(self->fd, coh_pages[i], 'X'));

	for (i = 0; i < 3; i++)
		EXPECT_EQ('X', rmap[coh_pages[i] * PG])
			TH_LOG("page %zu: this process's read-only mapping reads %#x after the "
			       "%s, pread() reads 'X'", coh_pages[i], rmap[coh_pages[i] * PG],
			       variant->writer == ODIRECT ? "O_DIRECT write" : "pwrite");
	EXPECT_EQ('X', sync_map[PG]) TH_LOG("the MAP_SYNC mapping reads %#x", sync_map[PG]);
	if (pid) {
		ASSERT_EQ(1, write(go[1], "g", 1));
		ASSERT_EQ(3, read(done[0], seen, 3));
		for (i = 0; i < 3; i++)
			EXPECT_EQ('X', seen[i])
				TH_LOG("page %zu: the other process's mapping reads %#x",
				       coh_pages[i], seen[i]);
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	munmap(sync_map, COH_LEN);
	munmap((void *)rmap, COH_LEN);
}

/*
 * Without any look-ahead: ext4 zeroes a short unwritten extent out whole on
 * the first write into it (extent_max_zeroout_kb, 32 KiB by default) rather
 * than split it.  A mapping that read the zero page of another block of that
 * extent must still see what write(2) puts there (a stock bug; 0010).
 */
TEST(ext4_zeroed_out_unwritten_extent_stays_coherent)
{
	const char *dir = ms_mount_dir(MS_EXT4_DAX);
	volatile char *rmap;
	int fd;

	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(MS_EXT4_DAX));
	/* 16 KiB fallocated in a 16 KiB file: within extent_max_zeroout_kb */
	fd = make_file(dir, "zeroout", 4 * PG, 0, 0, 4 * PG);
	ASSERT_LE(0, fd);
	rmap = map_pte(fd, 4 * PG, PROT_READ, false);
	ASSERT_NE(MAP_FAILED, (void *)rmap);
	ASSERT_EQ(0, rmap[PG]);		/* the zero page */
	ASSERT_EQ(0, write_x(fd, NULL, PWRITE, 0));	/* converts and zeroes all 4 */
	TH_LOG("written blocks after pwrite of page 0: %ld", blocks_of(fd, true));
	ASSERT_EQ(0, write_x(fd, NULL, PWRITE, 1));
	ASSERT_TRUE(page_is(fd, 1, 'X'));
	EXPECT_EQ('X', rmap[PG])
		TH_LOG("page 1: the mapping reads %#x after pwrite, pread() reads 'X'", rmap[PG]);
	munmap((void *)rmap, 4 * PG);
	close(fd);
}

/*
 * write(2) racing the look-ahead: in each of 64 windows of 2 MiB (the
 * look-ahead's range here: a fault zeroes 512 pages), a MAP_SYNC store to
 * page 0 and, from another thread released at the same moment, a pwrite() of
 * 'W' to page 511 after a delay that sweeps 0 to 1.9 times the time of one
 * such fault (measured first, on a window of its own) in 16 steps, four times
 * over: so that some pwrite() lands while the fault converts and zeroes,
 * whichever of the two threads the host runs first.  The look-ahead zeroes
 * page 511 unless write(2) got there first, and then must not zero it: every
 * page 511 must read 'W' afterwards.  ext4: a fallocated file,
 * extent_max_zeroout_kb 2048 (zeroing under i_data_sem before converting is
 * what keeps it; a look-ahead that converts first and zeroes after, unlocked,
 * loses writes: mutant lookahead-ext4-zeroes-after-convert); xfs: a sparse
 * file with a 2 MiB hint (both paths allocate and zero under the ILOCK).  The
 * contract boot has two vCPUs: the two threads run at once.
 */
FIXTURE(race) {
	struct knob knob;
	int fd;
};

FIXTURE_VARIANT(race) {
	enum ms_mount mnt;
	bool ext4;
};

FIXTURE_VARIANT_ADD(race, ext4_fallocated) { .mnt = MS_EXT4_DAX, .ext4 = true };
FIXTURE_VARIANT_ADD(race, xfs_hint_2m) { .mnt = MS_XFS_DAX };

#define RACE_WIN 512
#define RACE_WINDOWS 64
#define RACE_STEPS 16
/* one more window, the last, to time a fault alone */
#define RACE_LEN ((size_t)RACE_WIN * (RACE_WINDOWS + 1) * PG)

FIXTURE_SETUP(race)
{
	const char *dir = ms_mount_dir(variant->mnt);

	self->fd = -1;
	self->knob.dir = NULL;
	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(variant->mnt));
	SKIP_ON_STOCK(true);
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "one CPU: the two threads would take turns, not race (boot with --cpus 2)");
	if (variant->ext4)
		ASSERT_EQ(0, knob_set(&self->knob, dir, 2048));
	self->fd = make_file(dir, "race", RACE_LEN, variant->ext4 ? 0 : 2 << 20,
			     0, variant->ext4 ? RACE_LEN : 0);
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(race)
{
	char path[4096];

	if (self->fd >= 0) {
		close(self->fd);
		snprintf(path, sizeof(path), "%s/race", ms_mount_dir(variant->mnt));
		unlink(path);	/* 130 MiB */
	}
	knob_restore(&self->knob);
}

struct racer {
	int fd;
	int arrived;	/* both threads add 1 per window, then wait for the other */
	int failed;
	long long fault_ns;	/* one MAP_SYNC fault of a window, alone */
};

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* the writer's delay in window w: 0 to 1.9 fault times, in RACE_STEPS steps */
static long long race_delay(const struct racer *r, int w)
{
	return r->fault_ns * (w % RACE_STEPS) / (RACE_STEPS / 2);
}

static void race_meet(int *arrived, int w)
{
	__atomic_add_fetch(arrived, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(arrived, __ATOMIC_SEQ_CST) < 2 * (w + 1))
		sched_yield();
}

static void *race_writer(void *arg)
{
	struct racer *r = arg;
	static char buf[PG];
	int w;

	memset(buf, 0, sizeof(buf));
	buf[0] = 'W';
	for (w = 0; w < RACE_WINDOWS; w++) {
		long long until;

		race_meet(&r->arrived, w);
		until = now_ns() + race_delay(r, w);
		while (now_ns() < until)
			;
		if (pwrite(r->fd, buf, PG, ((size_t)w * RACE_WIN + RACE_WIN - 1) * PG) != (ssize_t)PG)
			r->failed++;
	}
	return NULL;
}

TEST_F(race, writes_racing_the_lookahead_survive)
{
	struct racer r = { .fd = self->fd };
	size_t lost = 0, first = 0, w;
	char steps[RACE_WINDOWS * 3 + 1] = "";
	long long t0;
	pthread_t t;
	char *map = map_pte(self->fd, RACE_LEN, PROT_READ | PROT_WRITE, true);

	ASSERT_NE(MAP_FAILED, map) TH_LOG("mmap: %s", strerror(errno));
	t0 = now_ns();
	map[(size_t)RACE_WINDOWS * RACE_WIN * PG] = 'x';
	r.fault_ns = now_ns() - t0;
	ASSERT_EQ(0, pthread_create(&t, NULL, race_writer, &r));
	for (w = 0; w < RACE_WINDOWS; w++) {
		race_meet(&r.arrived, w);
		map[w * RACE_WIN * PG] = 'x';
	}
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_EQ(0, r.failed) TH_LOG("%d pwrite() calls failed", r.failed);
	for (w = 0; w < RACE_WINDOWS; w++) {
		if (!page_is(self->fd, w * RACE_WIN + RACE_WIN - 1, 'W') ||
		    map[(w * RACE_WIN + RACE_WIN - 1) * PG] != 'W') {
			if (!lost++)
				first = w;
			snprintf(steps + strlen(steps), sizeof(steps) - strlen(steps), " %zu",
				 w % RACE_STEPS);
		}
		EXPECT_EQ('x', map[w * RACE_WIN * PG]) TH_LOG("window %zu: the store is gone", w);
	}
	EXPECT_EQ(0UL, lost) TH_LOG("%zu of %d pwrite()s racing a MAP_SYNC fault in their window "
				    "were lost (first: page %zu; one fault took %lld us; lost at delay "
				    "steps%s, of %d, a step an eighth of a fault)", lost, RACE_WINDOWS,
				    first * RACE_WIN + RACE_WIN - 1, r.fault_ns / 1000, steps,
				    RACE_STEPS);
	munmap(map, RACE_LEN);
}

/*
 * The look-ahead leaves swap files out (IS_SWAPFILE: their slots are
 * unwritten blocks that swap writes through the block device).  That guard
 * cannot be reached today: swapon refuses a DAX file (sys_swapon() reads the
 * header through ->read_folio, which the DAX address space operations of
 * ext4 and xfs lack), and a file's DAX mode changes only when its inode is
 * evicted, which an active swap file's is not.  If swapon ever accepts one,
 * this fails, and the guard needs a case of its own (swap pages out, then a
 * MAP_SYNC store, after mprotect(), beside their slots).
 */
TEST(swapon_refuses_a_dax_file)
{
	static const enum ms_mount mnts[] = { MS_EXT4_DAX, MS_XFS_DAX };
	static char hdr[PG];
	char path[4096];
	const char *dir;
	int fd, ret, err, tried = 0;
	size_t m;

	/* the swap header mkswap writes: version 1, last page, "SWAPSPACE2" */
	*(uint32_t *)(hdr + 1024) = 1;
	*(uint32_t *)(hdr + 1028) = 255;
	memcpy(hdr + PG - 10, "SWAPSPACE2", 10);
	for (m = 0; m < 2; m++) {
		dir = ms_mount_dir(mnts[m]);
		if (!dir)
			continue;
		snprintf(path, sizeof(path), "%s/swapfile", dir);
		unlink(path);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		ASSERT_LE(0, fd) TH_LOG("%s: %s", path, strerror(errno));
		ASSERT_EQ(0, fallocate(fd, 0, 0, 256 * PG));
		ASSERT_EQ((ssize_t)PG, pwrite(fd, hdr, PG, 0));
		ASSERT_EQ(0, fsync(fd));
		close(fd);
		ret = swapon(path, 0);
		err = errno;
		tried++;
		if (!ret)
			EXPECT_EQ(0, swapoff(path)) TH_LOG("swapoff %s: %s", path, strerror(errno));
		unlink(path);
		EXPECT_NE(0, ret) TH_LOG("swapon accepted a swap file on %s (DAX): the look-ahead's "
					 "IS_SWAPFILE guard is reachable now and wants a case", dir);
		if (ret)
			EXPECT_EQ(EINVAL, err) TH_LOG("swapon of a swap file on %s: %s, not EINVAL",
						      dir, strerror(err));
	}
	if (!tried)
		SKIP(return, "neither %s nor %s is set", ms_mount_env(MS_EXT4_DAX),
		     ms_mount_env(MS_XFS_DAX));
}

TEST_HARNESS_MAIN
