// SPDX-License-Identifier: GPL-2.0
/*
 * repro_ext2_failed_fault: a write fault on an ext2 DAX file that fails
 * after ->iomap_begin() succeeded must fail (SIGBUS) and change nothing;
 * on the EOF page it must not hang.  Plain MAP_SHARED: no MAP_SYNC needed.
 *
 * On 6.12, dax_iomap_pte_fault() leaves iter.processed at 0 when
 * dax_fault_iter() fails, so ext2_iomap_end() sees written == 0 and calls
 * ext2_write_failed(), which truncates to i_size when the range (the whole
 * faulting page) ends past it: on the partial EOF page, ext2_truncate_blocks()
 * takes the invalidate lock exclusively while ext2_dax_fault() holds it
 * shared, and the task hangs in state D for good (patch 0005).
 *
 * The failure: the file's block is marked bad in the pmem disk's badblocks
 * list (/sys/dev/block/MAJ:MIN/badblocks, writable by root), so that
 * dax_direct_access() returns -EHWPOISON (pmem's __pmem_direct_access())
 * after ext2_iomap_begin() mapped the block.  The block is written and
 * synced first: a fault that allocated it would zero it, and a write to a
 * bad sector fails inside ->iomap_begin() (no ->iomap_end() then).  The bad
 * sectors stay marked until the next boot, and the files keep their blocks
 * (nobody else may allocate them): so this program runs in a boot of its
 * own (qemu/suite), which also keeps the stuck task of the stock kernel out
 * of the other tests.
 *
 * inner_page is the control: the same failing fault on a full page inside
 * i_size has nothing to truncate and fails with SIGBUS on every kernel.
 */
#include <fcntl.h>
#include <limits.h>
#include <linux/fiemap.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PG 4096
#define WAIT_S 10

FIXTURE(failed_fault) {
	int fd;
};

FIXTURE_VARIANT(failed_fault) {
	const char *name;
	off_t size;	/* bytes written to the file */
	int page;	/* the page the store faults on */
};

/* 1 page + 100 bytes: page 1 is the partial EOF page */
FIXTURE_VARIANT_ADD(failed_fault, eof_page) {
	.name = "failed_fault_eof", .size = PG + 100, .page = 1,
};
/* 2 pages + 100 bytes: page 0 lies wholly inside i_size */
FIXTURE_VARIANT_ADD(failed_fault, inner_page) {
	.name = "failed_fault_inner", .size = 2 * PG + 100, .page = 0,
};

FIXTURE_SETUP(failed_fault)
{
	self->fd = -1;
}

FIXTURE_TEARDOWN(failed_fault)
{
	/* the file stays: its block is bad until the next boot */
	if (self->fd >= 0)
		close(self->fd);
}

/* the disk sector of byte off of fd (FIEMAP), or -1 */
static long long file_sector(int fd, off_t off)
{
	struct fiemap_extent ext[16];
	int i, n = ms_fiemap(fd, ext, 16);

	for (i = 0; i < n; i++)
		if ((off_t)ext[i].fe_logical <= off &&
		    off < (off_t)(ext[i].fe_logical + ext[i].fe_length))
			return (ext[i].fe_physical + (off - ext[i].fe_logical)) / 512;
	return -1;
}

TEST_F(failed_fault, write_fault_fails_and_returns)
{
	const char *dir = ms_mount_dir(MS_EXT2_DAX);
	static char data[2 * PG + 100];
	char bb[PATH_MAX], seen[256], want[64];
	long long sector;
	struct stat before, after, dst;
	char *map;
	int status, st;
	pid_t pid;
	FILE *f;

	if (!dir)
		SKIP(return, "MAPSYNC_EXT2_DAX is not set: run under pmem-tests/run");
	self->fd = ms_create_file(dir, variant->name, 0);
	ASSERT_LE(0, self->fd);
	memset(data, 'f', sizeof(data));
	ASSERT_EQ(variant->size, pwrite(self->fd, data, variant->size, 0));
	ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ(0, fstat(self->fd, &before));
	ASSERT_NE(0, before.st_size % PG)
		TH_LOG("the file must end inside a page (size %lld)", (long long)before.st_size);

	/* mark the block under the faulting page bad */
	sector = file_sector(self->fd, (off_t)variant->page * PG);
	ASSERT_LE(0, sector) TH_LOG("FIEMAP found no block at page %d", variant->page);
	ASSERT_EQ(0, stat(dir, &dst));
	snprintf(bb, sizeof(bb), "/sys/dev/block/%u:%u/badblocks",
		 major(dst.st_dev), minor(dst.st_dev));
	f = fopen(bb, "w");
	ASSERT_NE(NULL, f) TH_LOG("%s: %s (the pmem disk of %s)", bb, strerror(errno), dir);
	fprintf(f, "%lld %d\n", sector, PG / 512);
	ASSERT_EQ(0, fclose(f)) TH_LOG("writing '%lld %d' to %s: %s", sector, PG / 512,
				       bb, strerror(errno));
	f = fopen(bb, "r");
	ASSERT_NE(NULL, f);
	seen[0] = '\0';
	snprintf(want, sizeof(want), "%lld %d", sector, PG / 512);
	while (fgets(seen, sizeof(seen), f) && strncmp(seen, want, strlen(want)))
		;
	fclose(f);
	ASSERT_EQ(0, strncmp(seen, want, strlen(want)))
		TH_LOG("%s does not list '%s'", bb, want);

	map = mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, map);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		map[variant->page * PG + 10] = 'x';	/* the write fault */
		_exit(0);
	}
	st = ms_wait_child(pid, WAIT_S, &status);
	if (st) {
		kill(pid, SIGKILL);
		ASSERT_TRUE(false)
			TH_LOG("the failing write fault on page %d did not return in %d s; state %c%s",
			       variant->page, WAIT_S, st,
			       st == 'D' ? " (uninterruptible: ext2_iomap_end() truncating under the fault's invalidate lock)" : "");
	}
	munmap(map, 3 * PG);
	ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS)
		TH_LOG("the store into a bad block should raise SIGBUS; the child %s %d",
		       WIFSIGNALED(status) ? "died of signal" : "exited",
		       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	/* a failed fault changes neither the size nor the blocks */
	ASSERT_EQ(0, fstat(self->fd, &after));
	EXPECT_EQ(before.st_size, after.st_size);
	EXPECT_EQ(before.st_blocks, after.st_blocks)
		TH_LOG("blocks before the fault %lld, after %lld",
		       (long long)before.st_blocks, (long long)after.st_blocks);
}

TEST_HARNESS_MAIN
