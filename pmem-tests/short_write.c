// SPDX-License-Identifier: GPL-2.0
/*
 * short_write: a write() that extends a file and copies less than asked
 * (its source buffer faults part way) keeps what it did write.
 *
 * The buffer is three pages whose third is PROT_NONE.  Through DAX,
 * write() returns two pages; the file must then be two pages long, have
 * blocks, and read back the data (ext2 DAX lost it on 6.12: patch 0006).
 * With O_DIRECT the kernel pins the whole buffer first, so the write fails
 * with EFAULT and must leave the file empty; a short write, if a kernel
 * made one, must keep its data like the DAX case.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PG 4096

FIXTURE(short_write) {
	int fd;
	char *buf;
};

FIXTURE_VARIANT(short_write) {
	enum ms_mount mnt;
	bool direct;		/* O_DIRECT on a non-DAX mount */
};

FIXTURE_VARIANT_ADD(short_write, ext2_dax)      { .mnt = MS_EXT2_DAX };
FIXTURE_VARIANT_ADD(short_write, ext2_nodax_direct) { .mnt = MS_EXT2_NODAX, .direct = true };
FIXTURE_VARIANT_ADD(short_write, ext4_dax)      { .mnt = MS_EXT4_DAX };
FIXTURE_VARIANT_ADD(short_write, ext4_nodax_direct) { .mnt = MS_EXT4_NODAX, .direct = true };
FIXTURE_VARIANT_ADD(short_write, xfs_dax)       { .mnt = MS_XFS_DAX };
FIXTURE_VARIANT_ADD(short_write, xfs_nodax_direct) { .mnt = MS_XFS_NODAX, .direct = true };

FIXTURE_SETUP(short_write)
{
	const char *dir = ms_mount_dir(variant->mnt);
	char path[4096];

	self->buf = MAP_FAILED;
	if (!dir)
		SKIP(return, "%s is not set: run under pmem-tests/run", ms_mount_env(variant->mnt));
	snprintf(path, sizeof(path), "%s/short_write", dir);
	unlink(path);
	self->fd = open(path, O_RDWR | O_CREAT | (variant->direct ? O_DIRECT : 0), 0644);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", path, strerror(errno));
	self->buf = mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->buf);
	memset(self->buf, 'd', 2 * PG);
	ASSERT_EQ(0, mprotect(self->buf + 2 * PG, PG, PROT_NONE));
}

FIXTURE_TEARDOWN(short_write)
{
	if (self->buf != MAP_FAILED)
		munmap(self->buf, 3 * PG);
	close(self->fd);
}

TEST_F(short_write, keeps_written_data)
{
	char *back = aligned_alloc(PG, 2 * PG);
	struct stat st;
	ssize_t n;
	int i, bad = -1;

	ASSERT_NE(NULL, back);
	n = write(self->fd, self->buf, 3 * PG);
	if (n < 0 && variant->direct) {
		EXPECT_EQ(EFAULT, errno) TH_LOG("O_DIRECT write failed with %s", strerror(errno));
		ASSERT_EQ(0, fstat(self->fd, &st));
		EXPECT_EQ(0, st.st_size) TH_LOG("a failed write left size %lld", (long long)st.st_size);
		free(back);
		return;
	}
	ASSERT_EQ(2 * PG, n) TH_LOG("write() returned %zd (errno %s), expected the two readable pages",
				  n, strerror(errno));
	ASSERT_EQ(0, fstat(self->fd, &st));
	EXPECT_EQ(2 * PG, st.st_size) TH_LOG("size %lld after a write() of %zd", (long long)st.st_size, n);
	EXPECT_LE(2 * PG / 512, st.st_blocks)
		TH_LOG("only %lld 512-byte blocks allocated for %zd bytes written: the data was freed",
		       (long long)st.st_blocks, n);
	ASSERT_EQ(2 * PG, pread(self->fd, back, 2 * PG, 0));
	for (i = 0; i < 2 * PG; i++) {
		if (back[i] != 'd') {
			bad = i;
			break;
		}
	}
	EXPECT_EQ(-1, bad) TH_LOG("byte %d reads back %#x, not 'd': the written data is lost",
				  bad, bad >= 0 ? back[bad] : 0);
	free(back);
}

TEST_HARNESS_MAIN
