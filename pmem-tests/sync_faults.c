// SPDX-License-Identifier: GPL-2.0
/*
 * sync_faults: which DAX page faults are synchronous, seen from the kernel.
 *
 * For each case the test maps 3 pages of a file on a DAX mount, clears the
 * trace buffer, touches one page once, and counts the fs_dax events of that
 * inode: dax_pte_fault_done lines, those of them that report NEEDDSYNC (the
 * fault had to sync metadata: dax_finish_sync_fault), and
 * dax_insert_pfn_mkwrite (the PTE made writable after that sync).  Both
 * counts must be exactly what the case says: a sync fault that never
 * completes, and a fault that syncs when it need not, both fail.
 *
 * The state before the fault: most cases fsync the file first (its
 * metadata committed).  The *_unsynced_* cases leave what write(2) or
 * fallocate(2) changed uncommitted: the block a store goes to is mapped,
 * but the metadata that reaches it is not durable yet, so the fault must
 * still sync it (one NEEDDSYNC), whether it lies inside EOF or on the EOF
 * page (0008/0009 take the EOF rule off faults, not this).
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PG 4096UL
#define LEN (3 * PG)

enum prep {
	SPARSE,		/* ftruncate only: every page a hole */
	WRITTEN,	/* written with write() and fsynced */
	UNWRITTEN,	/* fallocated (unwritten extents) and fsynced */
	WRITTEN_TAIL,	/* written and fsynced, size 2 pages + 100 bytes */
	SPARSE_TAIL,	/* ftruncate only, size 2 pages + 100 bytes */
	HOLE_FILLED,	/* ftruncate and fsync, then page 1 written with write() */
};

FIXTURE(faults) {
	int fd;
	unsigned long ino;
	char *map;
};

FIXTURE_VARIANT(faults) {
	enum ms_mount mnt;
	enum prep prep;
	bool map_sync;		/* MAP_SHARED_VALIDATE|MAP_SYNC, else MAP_SHARED */
	bool write;		/* write fault, else read fault */
	unsigned long offset;	/* where the one access goes */
	int needdsync;		/* NEEDDSYNC faults expected */
	int mkwrite;		/* dax_insert_pfn_mkwrite expected (one per sync) */
	bool unsynced;		/* no fsync after the last change of the setup */
};

#define CASES(fs, M)								\
FIXTURE_VARIANT_ADD(faults, fs##_hole_write_sync) {				\
	.mnt = M, .prep = SPARSE, .map_sync = true, .write = true,		\
	.needdsync = 1, .mkwrite = 1,						\
};										\
FIXTURE_VARIANT_ADD(faults, fs##_hole_write_nosync) {				\
	.mnt = M, .prep = SPARSE, .write = true,				\
};										\
FIXTURE_VARIANT_ADD(faults, fs##_hole_read_sync) {				\
	.mnt = M, .prep = SPARSE, .map_sync = true,				\
};										\
FIXTURE_VARIANT_ADD(faults, fs##_unwritten_write_sync) {			\
	.mnt = M, .prep = UNWRITTEN, .map_sync = true, .write = true,		\
	.needdsync = 1, .mkwrite = 1,						\
};										\
FIXTURE_VARIANT_ADD(faults, fs##_overwrite_sync) {				\
	.mnt = M, .prep = WRITTEN, .map_sync = true, .write = true,		\
};										\
FIXTURE_VARIANT_ADD(faults, fs##_written_read_sync) {				\
	.mnt = M, .prep = WRITTEN, .map_sync = true,				\
};										\
FIXTURE_VARIANT_ADD(faults, fs##_eof_page_overwrite_sync) {			\
	.mnt = M, .prep = WRITTEN_TAIL, .map_sync = true, .write = true,	\
	.offset = 2 * PG + 10,							\
};										\
FIXTURE_VARIANT_ADD(faults, fs##_eof_page_hole_write_sync) {			\
	.mnt = M, .prep = SPARSE_TAIL, .map_sync = true, .write = true,	\
	.offset = 2 * PG + 10, .needdsync = 1, .mkwrite = 1,			\
};										\
FIXTURE_VARIANT_ADD(faults, fs##_written_unsynced_overwrite_sync) {		\
	.mnt = M, .prep = WRITTEN, .unsynced = true, .map_sync = true,		\
	.write = true, .offset = PG, .needdsync = 1, .mkwrite = 1,		\
};										\
FIXTURE_VARIANT_ADD(faults, fs##_eof_page_written_unsynced_overwrite_sync) {	\
	.mnt = M, .prep = WRITTEN_TAIL, .unsynced = true, .map_sync = true,	\
	.write = true, .offset = 2 * PG + 10, .needdsync = 1, .mkwrite = 1,	\
};										\
FIXTURE_VARIANT_ADD(faults, fs##_hole_filled_unsynced_overwrite_sync) {	\
	.mnt = M, .prep = HOLE_FILLED, .unsynced = true, .map_sync = true,	\
	.write = true, .offset = PG, .needdsync = 1, .mkwrite = 1,		\
};										\
FIXTURE_VARIANT_ADD(faults, fs##_unwritten_unsynced_write_sync) {		\
	.mnt = M, .prep = UNWRITTEN, .unsynced = true, .map_sync = true,	\
	.write = true, .offset = PG, .needdsync = 1, .mkwrite = 1,		\
}

CASES(ext4, MS_EXT4_DAX);
CASES(xfs, MS_XFS_DAX);

FIXTURE_SETUP(faults)
{
	const char *dir = ms_mount_dir(variant->mnt);
	off_t size = variant->prep == WRITTEN_TAIL || variant->prep == SPARSE_TAIL ?
		     2 * PG + 100 : LEN;
	static char buf[LEN];
	struct stat st;
	int flags;

	self->map = MAP_FAILED;
	if (!dir)
		SKIP(return, "%s is not set: run under pmem-tests/run", ms_mount_env(variant->mnt));
	self->fd = ms_create_file(dir, "sync_faults", 0);
	ASSERT_LE(0, self->fd) TH_LOG("create in %s: %s", dir, strerror(errno));
	switch (variant->prep) {
	case SPARSE:
	case SPARSE_TAIL:
		ASSERT_EQ(0, ftruncate(self->fd, size));
		break;
	case HOLE_FILLED:
		ASSERT_EQ(0, ftruncate(self->fd, size));
		ASSERT_EQ(0, fsync(self->fd));
		memset(buf, 'w', PG);
		ASSERT_EQ((ssize_t)PG, pwrite(self->fd, buf, PG, PG));
		break;
	case UNWRITTEN:
		ASSERT_EQ(0, fallocate(self->fd, 0, 0, size));
		break;
	case WRITTEN:
	case WRITTEN_TAIL:
		memset(buf, 'w', sizeof(buf));
		ASSERT_EQ(size, pwrite(self->fd, buf, size, 0));
		break;
	}
	if (!variant->unsynced)
		ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ(0, fstat(self->fd, &st));
	self->ino = st.st_ino;
	flags = variant->map_sync ? MAP_SHARED_VALIDATE | MAP_SYNC : MAP_SHARED;
	self->map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, flags, self->fd, 0);
	ASSERT_NE(MAP_FAILED, self->map) TH_LOG("mmap: %s", strerror(errno));
}

FIXTURE_TEARDOWN(faults)
{
	if (self->map != MAP_FAILED)
		munmap(self->map, LEN);
	close(self->fd);
}

TEST_F(faults, sync_fault_count)
{
	volatile char *p = self->map + variant->offset;
	int faults, needdsync, mkwrite;

	ASSERT_EQ(0, ms_trace_start()) TH_LOG("tracefs or the fs_dax events are missing");
	if (variant->write)
		*p = 'x';
	else
		(void)*p;
	/* counting stops tracing; the buffer can be read again */
	faults = ms_trace_count("dax_pte_fault_done", self->ino, NULL);
	needdsync = ms_trace_count("dax_pte_fault_done", self->ino, "NEEDDSYNC");
	mkwrite = ms_trace_count("dax_insert_pfn_mkwrite", self->ino, NULL);
	ASSERT_LE(1, faults) TH_LOG("no dax_pte_fault_done event for inode %#lx", self->ino);
	EXPECT_EQ(variant->needdsync, needdsync)
		TH_LOG("%s fault at offset %lu: expected %d NEEDDSYNC, saw %d (of %d faults)",
		       variant->write ? "write" : "read", variant->offset,
		       variant->needdsync, needdsync, faults);
	/* the PTE is made writable only by dax_finish_sync_fault(): exactly as often as it syncs */
	EXPECT_EQ(variant->mkwrite, mkwrite)
		TH_LOG("%s fault at offset %lu: expected %d dax_insert_pfn_mkwrite, saw %d",
		       variant->write ? "write" : "read", variant->offset, variant->mkwrite, mkwrite);
	if (variant->write)
		EXPECT_EQ('x', *p);
}

TEST_HARNESS_MAIN
