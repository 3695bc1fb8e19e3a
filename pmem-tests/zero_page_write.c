// SPDX-License-Identifier: GPL-2.0
/*
 * zero_page_write: what write(2) into a DAX file does to the zero pages a
 * mapping holds in blocks that became written without a write to them
 * (kernel-patches 0010), and only to them.
 *
 * The state: ext4 -o dax, a 16 KiB file fallocated whole (one unwritten
 * extent, within extent_max_zeroout_kb, set to 32 here).  A MAP_SHARED
 * mapping reads pages 0 and 2 (the zero page) and stores to page 1: that
 * write fault converts the extent and ext4 zeroes it out whole rather than
 * split it, so all four blocks are written and pages 0 and 2 are still
 * mapped to the zero page.  A write(2) into them gets no IOMAP_F_NEW.
 *
 *   only_zero_pages  pwrite() of pages 0-2: the mapping reads the data in
 *                    pages 0 and 2, and page 1, which maps its block, is
 *                    not torn down: reading it again takes no page fault
 *                    (getrusage() minor faults of the thread), whether its
 *                    entry is dirty (the store not synced) or clean (fsync).
 *   nowait           pwritev2(RWF_NOWAIT) of page 0, through an O_DIRECT fd
 *                    (ext4 refuses a non-direct RWF_NOWAIT write with EINVAL
 *                    before it reaches DAX: no FOP_BUFFER_WASYNC), returns
 *                    EAGAIN and writes nothing: the zero page would have to
 *                    be invalidated, which waits for the entry lock of any
 *                    fault in progress there (a race that cannot be made
 *                    deterministic from user space: the contract is tested,
 *                    EAGAIN before anything is done, as direct I/O does when
 *                    cached pages would have to be invalidated).  A blocking
 *                    pwrite() then writes, and the mapping sees it.
 */
#include <fcntl.h>
#include <limits.h>
#include <linux/fiemap.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PG 4096UL
#define NPG 4
#define LEN (NPG * PG)

FIXTURE(zp) {
	long saved_kb;
	const char *dir;
	volatile char *map;
	int fd;
};

FIXTURE_VARIANT(zp) {
	bool sync_page1;	/* fsync after the store to page 1: its entry clean */
};

FIXTURE_VARIANT_ADD(zp, page1_dirty) { .sync_page1 = false };
FIXTURE_VARIANT_ADD(zp, page1_clean) { .sync_page1 = true };

static long written_blocks(int fd)
{
	struct fiemap_extent ext[16];
	int i, n = ms_fiemap(fd, ext, 16);
	long blocks = 0;

	if (n < 0)
		return -1;
	for (i = 0; i < n; i++)
		if (!(ext[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN))
			blocks += ext[i].fe_length / PG;
	return blocks;
}

static long minflt(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) ? -1 : ru.ru_minflt;
}

FIXTURE_SETUP(zp)
{
	char path[PATH_MAX];

	self->fd = -1;
	self->map = MAP_FAILED;
	self->dir = ms_mount_dir(MS_EXT4_DAX);
	ASSERT_NE(NULL, self->dir) TH_LOG("%s is not set: run under pmem-tests/run", ms_mount_env(MS_EXT4_DAX));
	self->saved_kb = ms_fs_attr_get(self->dir, MS_EXTENT_MAX_ZEROOUT_KB);
	ASSERT_LE(0, self->saved_kb);
	ASSERT_EQ(0, ms_fs_attr_set(self->dir, MS_EXTENT_MAX_ZEROOUT_KB, 32));
	snprintf(path, sizeof(path), "%s/zero_page_write", self->dir);
	unlink(path);	/* a new inode */
	self->fd = ms_create_file(self->dir, "zero_page_write", LEN);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_KEEP_SIZE, 0, LEN));
	ASSERT_EQ(0, fsync(self->fd));
	self->map = ms_map_placed(LEN, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, MS_PLACE_PTE);
	ASSERT_NE(MAP_FAILED, (void *)self->map);
	ASSERT_EQ(0, self->map[0]);		/* the zero page */
	ASSERT_EQ(0, self->map[2 * PG]);	/* the zero page */
	self->map[PG] = 'm';			/* converts and zeroes the extent */
	if (variant->sync_page1)
		ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ('m', self->map[PG]);
	ASSERT_EQ(NPG, written_blocks(self->fd))
		TH_LOG("the store to page 1 did not zero the 16 KiB extent out whole: %ld blocks written",
		       written_blocks(self->fd));
}

FIXTURE_TEARDOWN(zp)
{
	char path[PATH_MAX];

	if (self->map != MAP_FAILED)
		munmap((void *)self->map, LEN);
	if (self->fd >= 0)
		close(self->fd);
	if (self->dir) {
		snprintf(path, sizeof(path), "%s/zero_page_write", self->dir);
		unlink(path);
		if (self->saved_kb >= 0)
			ms_fs_attr_set(self->dir, MS_EXTENT_MAX_ZEROOUT_KB, self->saved_kb);
	}
}

TEST_F(zp, only_zero_pages)
{
	static char buf[3 * PG];
	long before, faults;
	char c;

	memset(buf, 'X', PG);
	buf[PG] = 'm';		/* page 1 as the store left it: 'm', then zeros */
	memset(buf + 2 * PG, 'Y', PG);
	ASSERT_EQ((ssize_t)sizeof(buf), pwrite(self->fd, buf, sizeof(buf), 0));
	before = minflt();
	c = self->map[PG];
	faults = minflt() - before;
	TH_LOG("%s page 1 between two zero pages: %ld page fault(s) reading it after pwrite() of pages 0-2",
	       variant->sync_page1 ? "clean" : "dirty", faults);
	EXPECT_EQ('m', c);
	EXPECT_EQ(0, faults) TH_LOG("write(2) tore down the mapping of a block it did not need to");
	EXPECT_EQ('X', self->map[0]) TH_LOG("page 0: the mapping reads %#x", self->map[0]);
	EXPECT_EQ('Y', self->map[2 * PG]) TH_LOG("page 2: the mapping reads %#x", self->map[2 * PG]);
	EXPECT_EQ('X', ms_page_byte(self->fd, 0));
	EXPECT_EQ('Y', ms_page_byte(self->fd, 2));
}

TEST_F(zp, nowait)
{
	static char buf[PG] __attribute__((aligned(PG)));
	struct iovec iov = { .iov_base = buf, .iov_len = PG };
	char path[PATH_MAX];
	ssize_t n;
	int dfd, err;

	memset(buf, 'X', PG);
	snprintf(path, sizeof(path), "%s/zero_page_write", self->dir);
	dfd = open(path, O_RDWR | O_DIRECT);
	ASSERT_LE(0, dfd) TH_LOG("open O_DIRECT: %s", strerror(errno));
	n = pwritev2(dfd, &iov, 1, 0, RWF_NOWAIT);
	err = errno;
	close(dfd);
	TH_LOG("pwritev2(RWF_NOWAIT), O_DIRECT, into a zero-page-mapped written block: %zd (%s)",
	       n, n < 0 ? strerror(err) : "written");
	EXPECT_EQ(-1, n);
	EXPECT_EQ(EAGAIN, err);
	if (n < 0)
		EXPECT_EQ(0, ms_page_byte(self->fd, 0)) TH_LOG("EAGAIN, but page 0 was written");
	ASSERT_EQ((ssize_t)PG, pwrite(self->fd, buf, PG, 0));
	EXPECT_EQ('X', self->map[0]) TH_LOG("page 0: the mapping reads %#x after a blocking pwrite()",
					    self->map[0]);
	EXPECT_EQ('m', self->map[PG]);
}

TEST_HARNESS_MAIN
