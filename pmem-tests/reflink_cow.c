// SPDX-License-Identifier: GPL-2.0
/*
 * reflink_cow: MAP_SYNC on an xfs file whose blocks are shared with another
 * file (FICLONE), on a DAX mount (MAPSYNC_XFS_REFLINK: mkfs -m reflink=1,
 * -o dax=always; pmem-tests/run makes it on the 7th fsdax namespace).
 *
 * xfs_file_mmap() takes MAP_SYNC on such a file like on any DAX file, so a
 * write fault into a shared block is a copy-on-write fault under MAP_SYNC:
 * xfs_direct_write_iomap_begin() (xfs_dax_write_iomap_ops) allocates a
 * block in the CoW fork and returns it IOMAP_F_SHARED with the shared block
 * as srcmap, dax_fault_iter() copies the page into the new block
 * (dax_iomap_copy_around()), and xfs_dax_write_iomap_end() remaps it into
 * the data fork (xfs_reflink_end_cow(), a transaction).  Until that remap
 * is in the log on the NVDIMM the file's block is the old shared one: the
 * store would be lost by a crash.  MAP_SYNC promises that it is not, so the
 * fault must be synchronous: NEEDDSYNC, the fsync of the inode
 * (dax_finish_sync_fault()), then the PTE made writable; counted from the
 * kernel as sync_fault_lifecycle counts it.
 *
 * Every file pair: a source of 4 pages, page i filled with 'a' + i, synced;
 * a clone of it (FICLONE), synced with its directory before anything is
 * mapped, so that no metadata of the clone is pending when the CoW fault
 * comes: what the fault must sync is its own CoW remap.
 *
 * The first three cases make one store each: the first CoW fault after
 * that setup, synchronous on 6.12 patched and stock.  The last makes two in
 * a row, and there stock 6.12 fails: xfs set IOMAP_F_DIRTY for a CoW
 * mapping only from whether the inode was pinned with non-timestamp
 * changes (xfs_bmbt_to_iomap()); the remap is logged in
 * xfs_dax_write_iomap_end(), after that decision, so a CoW fault right
 * after a synchronous one (whose fsync left the inode clean) returned with
 * its remap not durable (measured 2026-12-04: of 64 stores into 64 shared
 * pages, only pages 0, 2, 4, ... synced, and the power-failure case
 * crash.xfs.reflink.reflink-sync lost the last store).  Fixed by
 * kernel-patches/0014 (IOMAP_F_DIRTY with every CoW mapping).
 */
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "kselftest_harness.h"
#include "mapsync.h"
#include "ms_expect.h"

#define PG 4096UL
#define NPG 4
#define LEN (NPG * PG)
#define MSV_SYNC (MAP_SHARED_VALIDATE | MAP_SYNC)
#define ENV "MAPSYNC_XFS_REFLINK"

FIXTURE(cow) {
	char dir[PATH_MAX / 2];
	char src[PATH_MAX], clone[PATH_MAX];
	int sfd, cfd;
	unsigned long sino, cino;
};

FIXTURE_SETUP(cow)
{
	const char *dir = getenv(ENV);
	char buf[LEN], opts[1024];
	struct stat st;
	size_t i;
	int dfd;

	self->sfd = self->cfd = -1;
	/* a device the case needs that is missing fails the run */
	ASSERT_TRUE(dir && *dir) TH_LOG("%s is not set: pmem-tests/run makes it on a 7th fsdax namespace (boot with mode=fsdax*7)", ENV);
	ASSERT_EQ(0, ms_mount_options(dir, opts, sizeof(opts))) TH_LOG("%s is not a mount point", dir);
	ASSERT_TRUE(ms_has_option(opts, "dax=always")) TH_LOG("%s is mounted '%s', not dax=always", dir, opts);
	snprintf(self->dir, sizeof(self->dir), "%s", dir);
	snprintf(self->src, sizeof(self->src), "%s/%s-src", dir, _metadata->name);
	snprintf(self->clone, sizeof(self->clone), "%s/%s-clone", dir, _metadata->name);
	unlink(self->clone);
	unlink(self->src);

	self->sfd = open(self->src, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, self->sfd) TH_LOG("create %s: %s", self->src, strerror(errno));
	for (i = 0; i < LEN; i++)
		buf[i] = 'a' + i / PG;
	ASSERT_EQ((ssize_t)LEN, pwrite(self->sfd, buf, LEN, 0));
	ASSERT_EQ(0, fsync(self->sfd));
	self->cfd = open(self->clone, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, self->cfd) TH_LOG("create %s: %s", self->clone, strerror(errno));
	ASSERT_EQ(0, ioctl(self->cfd, FICLONE, self->sfd)) TH_LOG("FICLONE: %s", strerror(errno));
	ASSERT_EQ(0, fsync(self->cfd));
	ASSERT_EQ(0, fsync(self->sfd));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, fsync(dfd));
	close(dfd);
	ASSERT_EQ(0, fstat(self->sfd, &st));
	self->sino = st.st_ino;
	ASSERT_EQ(0, fstat(self->cfd, &st));
	self->cino = st.st_ino;
	ASSERT_EQ((off_t)LEN, st.st_size) TH_LOG("the clone is %lld bytes", (long long)st.st_size);
}

FIXTURE_TEARDOWN(cow)
{
	if (self->cfd >= 0)
		close(self->cfd);
	if (self->sfd >= 0)
		close(self->sfd);
	unlink(self->clone);
	unlink(self->src);
}

/* len bytes at p are all c; else log the first that is not */
static void expect_bytes(struct __test_metadata *_metadata, const char *p, size_t len, char c, const char *what)
{
	size_t i;

	for (i = 0; i < len && p[i] == c; i++)
		;
	EXPECT_EQ(len, i) TH_LOG("%s: byte %zu is %#x, expected %#x", what, i, i < len ? p[i] : 0, c);
}

/*
 * The file at fd reads as the source was written, but for page pg, which
 * holds 'a'+pg except 'N' at byte 100 if changed.
 */
static void expect_file(struct __test_metadata *_metadata, int fd, int pg, bool changed, const char *what)
{
	char buf[PG], msg[128];
	int i;

	for (i = 0; i < NPG; i++) {
		ASSERT_EQ((ssize_t)PG, pread(fd, buf, PG, i * PG));
		snprintf(msg, sizeof(msg), "%s, page %d (pread)", what, i);
		if (i == pg && changed) {
			EXPECT_EQ('N', buf[100]) TH_LOG("%s: byte 100 is %#x, not the 'N' stored", msg, buf[100]);
			expect_bytes(_metadata, buf, 100, 'a' + i, msg);
			expect_bytes(_metadata, buf + 101, PG - 101, 'a' + i, msg);
		} else {
			expect_bytes(_metadata, buf, PG, 'a' + i, msg);
		}
	}
}

/*
 * A MAP_SYNC store into page pg of the file at `wfd` (inode wino), both
 * files shared; `other` is the other file, mapped (MAP_SHARED, read) and
 * read before the store so that its PTE points at the shared block.  If
 * read_first, the store's page is read through the MAP_SYNC mapping before
 * the store (the write then comes as a write-protect fault on a read-only
 * PTE, not as a fault on a missing one).
 */
static void cow_store(struct __test_metadata *_metadata, int wfd, unsigned long wino, int ofd, int pg,
		      bool read_first)
{
	char *map, *omap;
	int sh;

	sh = ms_page_shared(wfd, (off_t)pg * PG);
	ASSERT_EQ(1, sh) TH_LOG("page %d is not in a shared extent before the store (FIEMAP: %d)", pg, sh);
	omap = mmap(NULL, LEN, PROT_READ, MAP_SHARED, ofd, 0);
	ASSERT_NE(MAP_FAILED, omap) TH_LOG("MAP_SHARED of the other file: %s", strerror(errno));
	EXPECT_EQ('a' + pg, omap[pg * PG]);
	map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MSV_SYNC, wfd, 0);
	ASSERT_NE(MAP_FAILED, map) TH_LOG("MAP_SHARED_VALIDATE|MAP_SYNC of a reflinked file: %s", strerror(errno));
	EXPECT_EQ(1, ms_vm_sync(map)) TH_LOG("the MAP_SYNC mapping has no VM_SYNC (\"sf\" in smaps)");
	if (read_first)
		EXPECT_EQ('a' + pg, map[pg * PG + 100]);

	ASSERT_EQ(0, ms_trace_start()) TH_LOG("tracefs or the fs_dax events are missing");
	map[pg * PG + 100] = 'N';
	expect_one_sync_fault(_metadata, wino, read_first ? "store into a shared page read before" :
			      "store into a shared page");

	/* the writer sees its store; the other file's mapping does not */
	EXPECT_EQ('N', map[pg * PG + 100]);
	expect_bytes(_metadata, map + pg * PG, 100, 'a' + pg, "the written page through the MAP_SYNC mapping (copied around the store)");
	expect_bytes(_metadata, omap + pg * PG, PG, 'a' + pg, "the other file's page through its own mapping");
	sh = ms_page_shared(wfd, (off_t)pg * PG);
	EXPECT_EQ(0, sh) TH_LOG("page %d still in a shared extent after the CoW store (FIEMAP: %d)", pg, sh);
	sh = ms_page_shared(wfd, (off_t)(pg ^ 1) * PG);
	EXPECT_EQ(1, sh) TH_LOG("page %d, not written, is no longer shared (FIEMAP: %d)", pg ^ 1, sh);
	munmap(map, LEN);
	munmap(omap, LEN);
	expect_file(_metadata, wfd, pg, true, "the written file");
	expect_file(_metadata, ofd, pg, false, "the other file");
}

TEST_F(cow, clone_store_is_synchronous_and_source_unchanged)
{
	cow_store(_metadata, self->cfd, self->cino, self->sfd, 1, false);
}

TEST_F(cow, clone_store_after_read_is_synchronous_and_source_unchanged)
{
	cow_store(_metadata, self->cfd, self->cino, self->sfd, 2, true);
}

TEST_F(cow, source_store_is_synchronous_and_clone_unchanged)
{
	cow_store(_metadata, self->sfd, self->sino, self->cfd, 1, false);
}

/*
 * Two stores, into clone pages 1 and 2, through one MAP_SYNC mapping: each
 * is a CoW fault, and each must sync.  xfs decides IOMAP_F_DIRTY in
 * xfs_direct_write_iomap_begin() from whether the inode is pinned with
 * non-timestamp changes (xfs_bmbt_to_iomap()); the CoW allocation logs
 * nothing in the inode (the CoW fork is not on disk), and the remap is
 * logged later, in xfs_dax_write_iomap_end().  So right after a sync (the
 * first store's fsync) the next CoW fault was not synchronous (stock 6.12;
 * kernel-patches/0014 fixes it).
 */
TEST_F(cow, clone_second_store_is_synchronous)
{
	char *map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MSV_SYNC, self->cfd, 0);

	ASSERT_NE(MAP_FAILED, map) TH_LOG("mmap: %s", strerror(errno));
	ASSERT_EQ(0, ms_trace_start());
	map[PG + 100] = 'N';
	expect_one_sync_fault(_metadata, self->cino, "first store, into clone page 1");
	ASSERT_EQ(0, ms_trace_start());
	map[2 * PG + 100] = 'N';
	expect_one_sync_fault(_metadata, self->cino, "second store, into clone page 2");
	munmap(map, LEN);
}

/*
 * The bytes a copy-on-write copies into the new block must be written back
 * from the CPU cache (dax_flush()) before the remap makes the block
 * reachable: nothing else does it.  A synchronous fault inserts its DAX
 * entry clean, write(2) and FALLOC_FL_UNSHARE_RANGE insert none, so the
 * fsync that commits the remap finds no dirty entry to flush, and on a
 * platform whose caches are not persistent (ADR, not eADR) a power cut
 * can leave the file pointing at a block whose copied part never reached
 * the media.  QEMU keeps no such cache, so the cases count dax_flush()
 * calls and the bytes they cover, with a kprobe, between the start of the
 * operation and its return; on stock 6.12 dax_iomap_copy_around() flushes
 * only what it zeroed, and dax_unshare_iter() nothing (fixed by 0015).
 */
#define TRACEFS MS_TRACEFS
#define FLUSH_EVENT "mapsync_rc/daxflush"

static void flush_probe_remove(void)
{
	ms_write_file(TRACEFS "/tracing_on", "0", false);
	ms_write_file(TRACEFS "/events/" FLUSH_EVENT "/enable", "0", false);
	ms_write_file(TRACEFS "/kprobe_events", "-:" FLUSH_EVENT "\n", true);
}

/* a kprobe on dax_flush(dax_dev, addr, size), traced from now on */
static int flush_probe_start(void)
{
	flush_probe_remove();
	if (ms_write_file(TRACEFS "/kprobe_events",
			"p:" FLUSH_EVENT " dax_flush size=$arg3:u64\n", true) ||
	    ms_write_file(TRACEFS "/events/" FLUSH_EVENT "/enable", "1", false) ||
	    ms_write_file(TRACEFS "/trace", "", false))
		return -1;
	return ms_write_file(TRACEFS "/tracing_on", "1", false);
}

/* stops tracing: the dax_flush() calls of this process and the bytes they covered */
static int flush_probe_count(unsigned long *calls, unsigned long *bytes)
{
	char line[512], me[32];
	unsigned long long size;
	const char *p;
	FILE *f;

	ms_write_file(TRACEFS "/tracing_on", "0", false);
	f = fopen(TRACEFS "/trace", "r");
	if (!f)
		return -1;
	snprintf(me, sizeof(me), "-%d ", getpid());
	*calls = *bytes = 0;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#' || !strstr(line, "daxflush:") || !strstr(line, me))
			continue;
		p = strstr(line, "size=");
		if (!p || sscanf(p, "size=%llu", &size) != 1)
			continue;
		(*calls)++;
		*bytes += size;
	}
	fclose(f);
	flush_probe_remove();
	return 0;
}

static void expect_flushed(struct __test_metadata *_metadata, unsigned long at_least, const char *what)
{
	unsigned long calls, bytes;

	ASSERT_EQ(0, flush_probe_count(&calls, &bytes)) TH_LOG("tracefs is missing");
	TH_LOG("%s: %lu dax_flush() calls, %lu bytes", what, calls, bytes);
	EXPECT_LE(at_least, bytes)
		TH_LOG("%s: the copy-on-write copied into a new block, and %lu bytes of it were written back (dax_flush), expected at least %lu",
		       what, bytes, at_least);
}

/* a MAP_SYNC store into shared clone page 1: the fault copies the whole page */
TEST_F(cow, clone_store_fault_writes_back_the_copied_page)
{
	char *map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MSV_SYNC, self->cfd, 0);

	ASSERT_NE(MAP_FAILED, map) TH_LOG("mmap: %s", strerror(errno));
	ASSERT_EQ(1, ms_page_shared(self->cfd, 1 * PG));
	ASSERT_EQ(0, flush_probe_start()) TH_LOG("kprobe on dax_flush (tracefs, KPROBE_EVENTS): %s", strerror(errno));
	map[PG + 100] = 'N';
	expect_flushed(_metadata, PG, "MAP_SYNC store into shared clone page 1");
	EXPECT_EQ('b', map[PG]);
	munmap(map, LEN);
}

/* pwrite() of 100 bytes into shared clone page 2: the rest of the page is copied */
TEST_F(cow, clone_pwrite_writes_back_the_copied_edges)
{
	char buf[100];

	memset(buf, 'P', sizeof(buf));
	ASSERT_EQ(1, ms_page_shared(self->cfd, 2 * PG));
	ASSERT_EQ(0, flush_probe_start()) TH_LOG("kprobe on dax_flush (tracefs, KPROBE_EVENTS): %s", strerror(errno));
	ASSERT_EQ((ssize_t)sizeof(buf), pwrite(self->cfd, buf, sizeof(buf), 2 * PG + 100));
	expect_flushed(_metadata, PG - sizeof(buf), "pwrite() of 100 bytes into shared clone page 2");
}

/* FALLOC_FL_UNSHARE_RANGE of the whole clone: every page copied */
TEST_F(cow, clone_unshare_writes_back_the_copied_blocks)
{
	ASSERT_EQ(1, ms_page_shared(self->cfd, 0 * PG));
	ASSERT_EQ(0, flush_probe_start()) TH_LOG("kprobe on dax_flush (tracefs, KPROBE_EVENTS): %s", strerror(errno));
	ASSERT_EQ(0, fallocate(self->cfd, FALLOC_FL_UNSHARE_RANGE, 0, LEN))
		TH_LOG("fallocate(FALLOC_FL_UNSHARE_RANGE): %s", strerror(errno));
	expect_flushed(_metadata, LEN, "FALLOC_FL_UNSHARE_RANGE of the 4-page clone");
	EXPECT_EQ(0, ms_page_shared(self->cfd, 0 * PG)) TH_LOG("page 0 still shared after the unshare");
}

TEST_HARNESS_MAIN
