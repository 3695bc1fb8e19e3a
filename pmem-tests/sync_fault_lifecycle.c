// SPDX-License-Identifier: GPL-2.0
/*
 * sync_fault_lifecycle: a MAP_SYNC mapping through what a program does with
 * it after mmap(): mprotect, mremap (grow in place, move), madvise
 * (MADV_DONTNEED), fork, remap_file_pages, truncate and hole punching while
 * it is mapped.
 *
 * A case that claims a synchronous fault ends with one write fault into a
 * hole (a block the file does not have) and counts, as sync_faults does,
 * the events of the inode from the kernel: exactly one dax_pte_fault_done
 * with NEEDDSYNC (the fault must sync the metadata it allocated,
 * dax_finish_sync_fault) and exactly one dax_insert_pfn_mkwrite (the PTE
 * made writable after that sync); and exactly one fsync of the inode
 * (ext4_sync_file_enter or xfs_file_fsync), the sync itself, which the two
 * fs_dax events do not show (mutant dax-sync-fault-noop keeps them and
 * drops the sync).  The file
 * is 4 pages on a DAX mount: page 0 written and fsynced, pages 1-3 holes.
 * Two writes in one case go to pages 1 and 3, never to neighbours.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "mapsync.h"
#include "ms_expect.h"

#define PG 4096UL
#define NPG 4
#define LEN (NPG * PG)
#define MSV_SYNC (MAP_SHARED_VALIDATE | MAP_SYNC)

FIXTURE(life) {
	int fd;
	unsigned long ino;
	char *map;	/* the file, PROT_READ|PROT_WRITE, MAP_SHARED_VALIDATE|MAP_SYNC */
};

FIXTURE_VARIANT(life) {
	enum ms_mount mnt;
};

FIXTURE_VARIANT_ADD(life, ext4) { .mnt = MS_EXT4_DAX };
FIXTURE_VARIANT_ADD(life, xfs) { .mnt = MS_XFS_DAX };

FIXTURE_SETUP(life)
{
	const char *dir = ms_mount_dir(variant->mnt);
	char buf[PG];
	struct stat st;

	self->fd = -1;
	self->map = MAP_FAILED;
	if (!dir)
		SKIP(return, "%s is not set: run under pmem-tests/run", ms_mount_env(variant->mnt));
	self->fd = ms_create_file(dir, "sync_fault_lifecycle", LEN);
	ASSERT_LE(0, self->fd) TH_LOG("create in %s: %s", dir, strerror(errno));
	memset(buf, 'w', sizeof(buf));
	ASSERT_EQ((ssize_t)PG, pwrite(self->fd, buf, PG, 0));
	ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ(0, fstat(self->fd, &st));
	ASSERT_EQ(8, st.st_blocks) TH_LOG("expected page 0 allocated and pages 1-3 holes, the file has %ld 512-byte blocks",
					  (long)st.st_blocks);
	self->ino = st.st_ino;
	self->map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MSV_SYNC, self->fd, 0);
	ASSERT_NE(MAP_FAILED, self->map) TH_LOG("mmap: %s", strerror(errno));
}

FIXTURE_TEARDOWN(life)
{
	if (self->map != MAP_FAILED)
		munmap(self->map, LEN);
	if (self->fd >= 0)
		close(self->fd);
}

/* the page at p holds byte c at offset 0 and zeros after it */
static void expect_page(struct __test_metadata *_metadata, const char *p, char c, const char *what)
{
	size_t i;

	EXPECT_EQ(c, p[0]) TH_LOG("%s: byte 0 is %#x, expected %#x", what, p[0], c);
	for (i = 1; i < PG && !p[i]; i++)
		;
	EXPECT_EQ(PG, i) TH_LOG("%s: byte %zu is %#x, expected 0 (old data?)", what, i, p[i]);
}

TEST_F(life, mprotect_read_to_write_then_hole_write_is_synchronous)
{
	char *map = mmap(NULL, LEN, PROT_READ, MSV_SYNC, self->fd, 0);

	ASSERT_NE(MAP_FAILED, map) TH_LOG("read-only MAP_SYNC mmap of an O_RDWR file: %s", strerror(errno));
	/* a read fault into hole page 1 while read-only: the zero page, no block */
	ASSERT_EQ(0, map[PG]);
	ASSERT_EQ(0, mprotect(map, LEN, PROT_READ | PROT_WRITE)) TH_LOG("mprotect: %s", strerror(errno));
	EXPECT_EQ(1, ms_vm_sync(map)) TH_LOG("VM_SYNC (\"sf\") lost by mprotect");

	ASSERT_EQ(0, ms_trace_start());
	map[PG] = 'x';
	expect_one_sync_fault(_metadata, self->ino, "write into hole page 1, read before mprotect");
	ASSERT_EQ(0, ms_trace_start());
	map[3 * PG] = 'x';
	expect_one_sync_fault(_metadata, self->ino, "write into hole page 3, untouched before mprotect");
	munmap(map, LEN);
}

TEST_F(life, mremap_grow_in_place_keeps_vm_sync_and_hole_write_is_synchronous)
{
	char *res, *map;

	/* room for 4 pages, the file mapped into the first 2 */
	res = mmap(NULL, LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, res);
	ASSERT_EQ(0, munmap(res + 2 * PG, 2 * PG));
	map = mmap(res, 2 * PG, PROT_READ | PROT_WRITE, MSV_SYNC | MAP_FIXED, self->fd, 0);
	ASSERT_EQ(res, map) TH_LOG("mmap: %s", strerror(errno));
	ASSERT_EQ('w', map[0]);
	/* no MREMAP_MAYMOVE: in place or not at all */
	res = mremap(map, 2 * PG, LEN, 0);
	ASSERT_EQ(map, res) TH_LOG("mremap grow in place: %s", res == MAP_FAILED ? strerror(errno) : "moved");
	EXPECT_EQ(1, ms_vm_sync(map + 3 * PG)) TH_LOG("the grown part has no VM_SYNC (\"sf\" in smaps)");

	ASSERT_EQ(0, ms_trace_start());
	map[3 * PG] = 'x';
	expect_one_sync_fault(_metadata, self->ino, "write into hole page 3 in the grown part");
	expect_page(_metadata, map + 3 * PG, 'x', "page 3 after the write");
	munmap(map, LEN);
}

TEST_F(life, mremap_move_keeps_vm_sync_and_hole_write_is_synchronous)
{
	char *map = self->map, *dst, *res;

	ASSERT_EQ('w', map[0]);	/* page 0 mapped: its PTE moves with the mapping */
	dst = mmap(NULL, LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, dst);
	res = mremap(map, LEN, LEN, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	ASSERT_EQ(dst, res) TH_LOG("mremap move: %s", res == MAP_FAILED ? strerror(errno) : "elsewhere");
	self->map = dst;	/* for the teardown */
	EXPECT_EQ(1, ms_vm_sync(dst)) TH_LOG("the moved mapping has no VM_SYNC (\"sf\" in smaps)");
	EXPECT_EQ('w', dst[0]) TH_LOG("page 0 through the moved mapping");

	ASSERT_EQ(0, ms_trace_start());
	dst[2 * PG] = 'x';
	expect_one_sync_fault(_metadata, self->ino, "write into hole page 2 through the moved mapping");
	expect_page(_metadata, dst + 2 * PG, 'x', "page 2 after the write");
}

TEST_F(life, madvise_dontneed_then_hole_write_is_synchronous)
{
	char *map = self->map;

	map[PG] = 'x';
	ASSERT_EQ(0, madvise(map, LEN, MADV_DONTNEED)) TH_LOG("madvise: %s", strerror(errno));

	ASSERT_EQ(0, ms_trace_start());
	map[3 * PG] = 'y';
	expect_one_sync_fault(_metadata, self->ino, "write into hole page 3 after MADV_DONTNEED");
}

TEST_F(life, madvise_dontneed_written_page_reads_back)
{
	char *map = self->map;
	struct ms_sync_count c;
	char got;

	map[PG] = 'x';
	ASSERT_EQ(0, madvise(map, LEN, MADV_DONTNEED)) TH_LOG("madvise: %s", strerror(errno));

	ASSERT_EQ(0, ms_trace_start());
	got = *(volatile char *)(map + PG);
	ASSERT_EQ(0, ms_sync_count(self->ino, &c));
	/* otherwise the PTE survived DONTNEED and this proves nothing */
	EXPECT_LE(1, c.faults) TH_LOG("re-reading page 1 after MADV_DONTNEED took no fault");
	EXPECT_EQ(0, c.needdsync) TH_LOG("a read fault synced (%d NEEDDSYNC)", c.needdsync);
	EXPECT_EQ(0, c.fsyncs) TH_LOG("a read fault called fsync (%d times)", c.fsyncs);
	EXPECT_EQ('x', got) TH_LOG("page 1 after MADV_DONTNEED reads %#x, not the 'x' written", got);
	expect_page(_metadata, map + PG, 'x', "page 1 after MADV_DONTNEED");
}

TEST_F(life, fork_child_hole_write_is_synchronous_and_parent_sees_it)
{
	char *map = self->map;
	int st, status;
	pid_t pid;

	ASSERT_EQ('w', map[0]);
	ASSERT_EQ(0, ms_trace_start());
	pid = fork();
	ASSERT_LE(0, pid) TH_LOG("fork: %s", strerror(errno));
	if (pid == 0) {
		map[2 * PG] = 'c';	/* page 2: a hole the parent never touched */
		_exit(0);
	}
	st = ms_wait_child(pid, 30, &status);
	ASSERT_EQ(0, st) TH_LOG("the child did not end in 30 s (state %c)", st);
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("the child's write failed: status %#x", status);
	expect_one_sync_fault(_metadata, self->ino, "the child's write into hole page 2");
	expect_page(_metadata, map + 2 * PG, 'c', "page 2 in the parent after the child's write");
}

/*
 * remap_file_pages() (deprecated, emulated since 4.0) replaces the pages it
 * remaps with a new mapping of the file; on stock that mapping has no
 * VM_SYNC (patch 0016).  Page 1 of the mapping is remapped onto file page 3,
 * a hole; the store there must be one synchronous fault landing in file
 * page 3, with file page 1 left a hole.  flags: 0 (the emulation populates
 * the new mapping: the store faults on the zero page) or MAP_NONBLOCK (no
 * populate: the store faults on an empty PTE).
 */
static void remap_then_store(struct __test_metadata *_metadata, int fd, unsigned long ino,
			     char *map, int flags, int want_sync)
{
	struct ms_sync_count c;
	char buf[PG];
	struct stat st;

	ASSERT_EQ(0, remap_file_pages(map + PG, PG, 0, 3, flags))
		TH_LOG("remap_file_pages(flags %#x): %s", flags, strerror(errno));
	EXPECT_EQ(want_sync, ms_vm_sync(map + PG))
		TH_LOG("the remapped page: VM_SYNC (\"sf\" in smaps) %s", want_sync ? "lost" : "gained");
	EXPECT_EQ(want_sync, ms_vm_sync(map)) TH_LOG("page 0, left as it was: VM_SYNC changed");
	EXPECT_EQ(want_sync, ms_vm_sync(map + 2 * PG)) TH_LOG("page 2, left as it was: VM_SYNC changed");

	ASSERT_EQ(0, ms_trace_start());
	map[PG] = 'x';
	if (want_sync) {
		expect_one_sync_fault(_metadata, ino, "store into file page 3 (a hole) through the remapped page");
	} else {
		ASSERT_EQ(0, ms_sync_count(ino, &c));
		EXPECT_EQ(0, c.needdsync) TH_LOG("a store through a remapped plain MAP_SHARED page synced (%d NEEDDSYNC, %d fsync)",
						 c.needdsync, c.fsyncs);
	}
	ASSERT_EQ((ssize_t)PG, pread(fd, buf, PG, 3 * PG));
	expect_page(_metadata, buf, 'x', "file page 3 by pread after the store through the remapped page");
	ASSERT_EQ(0, fstat(fd, &st));
	EXPECT_EQ(16, st.st_blocks) TH_LOG("expected pages 0 and 3 allocated (16 sectors), the file has %ld: the store went elsewhere?",
					   (long)st.st_blocks);
}

TEST_F(life, remap_file_pages_keeps_vm_sync_and_hole_write_is_synchronous)
{
	remap_then_store(_metadata, self->fd, self->ino, self->map, 0, 1);
}

TEST_F(life, remap_file_pages_nonblock_keeps_vm_sync_and_hole_write_is_synchronous)
{
	remap_then_store(_metadata, self->fd, self->ino, self->map, MAP_NONBLOCK, 1);
}

/* the control: a mapping without MAP_SYNC does not get it from the remap */
TEST_F(life, remap_file_pages_of_plain_shared_mapping_stays_without_vm_sync)
{
	char *map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);

	ASSERT_NE(MAP_FAILED, map) TH_LOG("mmap MAP_SHARED: %s", strerror(errno));
	remap_then_store(_metadata, self->fd, self->ino, map, 0, 0);
	munmap(map, LEN);
}

TEST_F(life, truncate_down_access_past_eof_sigbus)
{
	char *map = self->map;
	int sig;

	map[3 * PG] = 'x';
	ASSERT_EQ(0, ftruncate(self->fd, PG));
	sig = ms_touch(map + 3 * PG, false);
	EXPECT_EQ(SIGBUS, sig) TH_LOG("read of page 3 (written, then past the new EOF) raised signal %d, not SIGBUS", sig);
	sig = ms_touch(map + PG, true);
	EXPECT_EQ(SIGBUS, sig) TH_LOG("write to page 1 (past the new EOF) raised signal %d, not SIGBUS", sig);
	EXPECT_EQ('w', map[0]) TH_LOG("page 0, inside the new EOF");
}

TEST_F(life, truncate_down_extend_then_write_is_synchronous)
{
	char *map = self->map;
	struct stat st;

	map[3 * PG] = 'x';
	map[3 * PG + 1] = 'x';
	ASSERT_EQ(0, ftruncate(self->fd, PG));
	ASSERT_EQ(0, ftruncate(self->fd, LEN));
	ASSERT_EQ(0, fstat(self->fd, &st));
	ASSERT_EQ(8, st.st_blocks) TH_LOG("truncate down left %ld blocks, expected 8 (page 0)",
					  (long)st.st_blocks);

	ASSERT_EQ(0, ms_trace_start());
	map[3 * PG] = 'y';
	expect_one_sync_fault(_metadata, self->ino, "write into page 3 after truncate down and extend");
	expect_page(_metadata, map + 3 * PG, 'y', "page 3 after truncate, extend and write");
}

TEST_F(life, punched_hole_write_is_synchronous_and_reads_back)
{
	char *map = self->map;

	map[PG] = 'x';
	map[PG + 1] = 'x';
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, PG, PG))
		TH_LOG("punch: %s", strerror(errno));

	ASSERT_EQ(0, ms_trace_start());
	map[PG] = 'y';
	expect_one_sync_fault(_metadata, self->ino, "write into page 1 after punching it");
	expect_page(_metadata, map + PG, 'y', "page 1 after punch and write");
}

TEST_HARNESS_MAIN
