// SPDX-License-Identifier: GPL-2.0
/*
 * reflink_short_write: write(2) into shared (reflinked) blocks of an xfs
 * DAX file that fails at its first byte (EFAULT) or stops short because its
 * source buffer faults part way (MAPSYNC_XFS_REFLINK: mkfs -m reflink=1,
 * -o dax=always).
 *
 * A DAX write into a shared block is a copy-on-write: xfs allocates a block
 * in the CoW fork (xfs_direct_write_iomap_begin()), dax_iomap_iter() copies
 * the old data around the range (dax_iomap_copy_around(): the head of the
 * first page and the tail of the last one) and the user's data into the
 * middle, and xfs_dax_write_iomap_end() remaps every block the `written`
 * bytes reach (xfs_reflink_end_cow()) or, when nothing was written, frees
 * the CoW blocks (xfs_reflink_cancel_cow_range()).  When the copy from user
 * space stops inside a page, the part of that page between the last byte
 * copied and the tail was never written: on stock 6.12 (and 7.2) the block
 * is remapped anyway, and the file then reads whatever the newly allocated
 * block held: zeroes, or the data of a deleted file.
 *
 * Every case: a source file (old data, a pattern of the file offset),
 * synced; a clone of it (FICLONE), both with a CoW extent size hint of one
 * block so that the CoW fork holds only what the write asks for; made
 * after a deleted file's data became the only free space (a 64-block file
 * of 0xa5, a filler fallocated over the rest of the free space, the file
 * removed), so that every block the case allocates held that data, as the
 * free space of a used file system may.  Then one pwrite() into the clone (or the
 * source) from a buffer whose next page is PROT_NONE, `readable` bytes
 * before it (0: EFAULT at the first byte).  Checked: the count (EFAULT, or
 * at most `readable` bytes), the size of both files, their exact block
 * counts (st_blocks: the data's blocks, plus, after a short write, the CoW
 * blocks allocated past the last block written, which xfs keeps as CoW
 * preallocation; a write that wrote nothing frees its CoW blocks) and
 * every byte of both: the written file reads the new data in
 * [off, off + count) and the old data everywhere else, the other file the
 * old data only.  A byte that is neither is reported with what it is (the
 * deleted file's 0xa5, zero, or other).  Then again after fsync and the
 * eviction of both inodes (drop_caches), which cancels their CoW forks:
 * exactly the data's blocks.  fsck: the suite's per-boot xfs_repair -n.
 */
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PG 4096L
#define ENV "MAPSYNC_XFS_REFLINK"
#define JUNK 0xa5
#define JUNK_PAGES 64

/*
 * Each case's data differs from every other case's (seed: from the case's
 * variant), so that a block freed by an earlier case (xfs frees in the
 * background) cannot pass for this case's old data.
 */
static unsigned int seed;

/* the old data of byte i of the file: a letter that changes every 8 bytes and every page */
static char old_byte(off_t i)
{
	return 'A' + ((unsigned int)(i / 8 + i / PG) ^ seed) % 26;
}

/* the new data of byte i of the file */
static char new_byte(off_t i)
{
	return 'a' + ((unsigned int)(i / 8 + 3 * (i / PG)) ^ seed) % 26;
}

FIXTURE(rsw) {
	char src[PATH_MAX], clone[PATH_MAX];
	const char *dir;
	int sfd, cfd;
	char *ubuf;
};

FIXTURE_VARIANT(rsw) {
	off_t size;		/* of the source and the clone */
	off_t off;		/* where pwrite() writes */
	size_t len;		/* how much it asks */
	size_t readable;	/* bytes of the buffer before a PROT_NONE page */
	bool into_source;	/* write into the source; else into the clone */
};

/* shared blocks inside EOF: a 4-page file */
FIXTURE_VARIANT_ADD(rsw, efault_aligned) {
	.size = 4 * PG, .off = PG, .len = PG, .readable = 0 };
FIXTURE_VARIANT_ADD(rsw, efault_unaligned) {
	.size = 4 * PG, .off = PG + 100, .len = 3000, .readable = 0 };
FIXTURE_VARIANT_ADD(rsw, efault_unaligned_two_blocks) {
	.size = 4 * PG, .off = PG + 100, .len = 2 * PG, .readable = 0 };
FIXTURE_VARIANT_ADD(rsw, short_aligned) {
	.size = 4 * PG, .off = PG, .len = 2 * PG, .readable = 1000 };
FIXTURE_VARIANT_ADD(rsw, short_unaligned) {
	.size = 4 * PG, .off = PG + 100, .len = 3000, .readable = 1000 };
FIXTURE_VARIANT_ADD(rsw, short_unaligned_two_blocks) {
	.size = 4 * PG, .off = PG + 100, .len = 2 * PG, .readable = PG };
FIXTURE_VARIANT_ADD(rsw, short_unaligned_at_block_end) {
	.size = 4 * PG, .off = PG + 100, .len = 2 * PG, .readable = PG - 100 };
FIXTURE_VARIANT_ADD(rsw, short_unaligned_into_source) {
	.size = 4 * PG, .off = 2 * PG + 300, .len = 3000, .readable = 500, .into_source = true };
/* shared blocks spanning EOF: a file of 4 pages and 100 bytes */
FIXTURE_VARIANT_ADD(rsw, efault_aligned_spanning_eof) {
	.size = 4 * PG + 100, .off = 4 * PG, .len = PG, .readable = 0 };
FIXTURE_VARIANT_ADD(rsw, efault_unaligned_spanning_eof) {
	.size = 4 * PG + 100, .off = 3 * PG + 100, .len = 2 * PG, .readable = 0 };
FIXTURE_VARIANT_ADD(rsw, short_aligned_spanning_eof_stops_inside) {
	.size = 4 * PG + 100, .off = 4 * PG, .len = 3000, .readable = 40 };
FIXTURE_VARIANT_ADD(rsw, short_unaligned_spanning_eof_stops_inside) {
	.size = 4 * PG + 100, .off = 4 * PG + 20, .len = 3000, .readable = 40 };
FIXTURE_VARIANT_ADD(rsw, short_unaligned_spanning_eof_stops_past) {
	.size = 4 * PG + 100, .off = 4 * PG + 20, .len = 3000, .readable = 1000 };
FIXTURE_VARIANT_ADD(rsw, short_unaligned_spanning_eof_two_blocks) {
	.size = 4 * PG + 100, .off = 3 * PG + 100, .len = 2 * PG, .readable = 200 };

static int set_cowextsize(int fd, unsigned int bytes)
{
	struct fsxattr fa;

	if (ioctl(fd, FS_IOC_FSGETXATTR, &fa))
		return -1;
	fa.fsx_cowextsize = bytes;
	fa.fsx_xflags |= FS_XFLAG_COWEXTSIZE;
	return ioctl(fd, FS_IOC_FSSETXATTR, &fa) ? -1 : 0;
}

static int sync_dir(const char *dir)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY), ret;

	if (dfd < 0)
		return -1;
	ret = fsync(dfd);
	close(dfd);
	return ret;
}

static void filler_path(char *path, size_t size, const char *dir)
{
	snprintf(path, size, "%s/rsw-filler", dir);
}

/*
 * Make a deleted file's data (JUNK) the only free space of the file system,
 * so that every block the case allocates (its files, and the CoW blocks of
 * the write) held that data: a file of JUNK_PAGES pages of JUNK, synced; a
 * filler file fallocated over all the rest of the free space; the JUNK file
 * removed and the log forced, so that its blocks are free again.  The
 * filler is removed when the case ends (FIXTURE_TEARDOWN), and by the next
 * setup if a setup failed before.
 */
static void leave_junk(struct __test_metadata *_metadata, const char *dir)
{
	char junk[PATH_MAX], filler[PATH_MAX];
	char *buf = malloc(JUNK_PAGES * PG);
	struct statfs sf;
	int fd, dfd, i;
	off_t chunk, at;

	ASSERT_NE(NULL, buf);
	snprintf(junk, sizeof(junk), "%s/rsw-junk", dir);
	filler_path(filler, sizeof(filler), dir);
	unlink(filler);
	memset(buf, JUNK, JUNK_PAGES * PG);
	fd = open(junk, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, fd) TH_LOG("create %s: %s", junk, strerror(errno));
	ASSERT_EQ(JUNK_PAGES * PG, pwrite(fd, buf, JUNK_PAGES * PG, 0));
	ASSERT_EQ(0, fsync(fd));
	close(fd);
	free(buf);
	ASSERT_EQ(0, statfs(dir, &sf));
	fd = open(filler, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, fd) TH_LOG("create %s: %s", filler, strerror(errno));
	/*
	 * All that is free: xfs refuses a request it cannot reserve whole
	 * (ENOSPC, nothing allocated), so fill in chunks, halving the chunk
	 * at each ENOSPC down to one block.
	 */
	for (chunk = 64 << 20, at = 0; chunk >= (off_t)sf.f_bsize; ) {
		if (!fallocate(fd, 0, at, chunk)) {
			at += chunk;
			continue;
		}
		ASSERT_EQ(ENOSPC, errno) TH_LOG("fallocate %lld bytes at %lld: %s",
						(long long)chunk, (long long)at, strerror(errno));
		chunk /= 2;
	}
	ASSERT_EQ(0, fsync(fd));
	close(fd);
	ASSERT_EQ(0, unlink(junk));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ASSERT_LE(0, dfd);
	/* xfs frees an unlinked file's blocks in the background (inodegc) */
	for (i = 0; i < 50; i++) {
		ASSERT_EQ(0, syncfs(dfd));
		ASSERT_EQ(0, statfs(dir, &sf));
		if (sf.f_bavail >= JUNK_PAGES / 2)
			break;
		usleep(100000);
	}
	close(dfd);
	TH_LOG("free space left (the deleted data's blocks, less what metadata took): %llu blocks of %lu (filler: %lld MiB)",
	       (unsigned long long)sf.f_bavail, (unsigned long)sf.f_bsize, (long long)(at >> 20));
	ASSERT_GE(JUNK_PAGES + 16, (long)sf.f_bavail)
		TH_LOG("the filler left more free space than the deleted file's blocks");
	ASSERT_LE(16, (long)sf.f_bavail) TH_LOG("the filler left no room for the case");
}

FIXTURE_SETUP(rsw)
{
	const char *dir = getenv(ENV);
	char opts[1024], *buf;
	struct stat st;
	off_t i;

	self->sfd = self->cfd = -1;
	self->ubuf = MAP_FAILED;
	self->dir = NULL;
	seed = (unsigned int)(variant->size * 31 + variant->off) * 2654435761u ^
	       (unsigned int)(variant->len * 7 + variant->readable * 3 + variant->into_source);
	/* a device the case needs that is missing fails the run */
	ASSERT_TRUE(dir && *dir) TH_LOG("%s is not set: pmem-tests/run makes it on a 7th fsdax namespace (boot with mode=fsdax*7)", ENV);
	ASSERT_EQ(0, ms_mount_options(dir, opts, sizeof(opts))) TH_LOG("%s is not a mount point", dir);
	ASSERT_TRUE(ms_has_option(opts, "dax=always")) TH_LOG("%s is mounted '%s', not dax=always", dir, opts);
	snprintf(self->src, sizeof(self->src), "%s/rsw-%s-src", dir, _metadata->name);
	snprintf(self->clone, sizeof(self->clone), "%s/rsw-%s-clone", dir, _metadata->name);
	unlink(self->clone);
	unlink(self->src);
	self->dir = dir;
	leave_junk(_metadata, dir);

	buf = malloc(variant->size);
	ASSERT_NE(NULL, buf);
	for (i = 0; i < variant->size; i++)
		buf[i] = old_byte(i);
	self->sfd = open(self->src, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, self->sfd) TH_LOG("create %s: %s", self->src, strerror(errno));
	ASSERT_EQ(0, set_cowextsize(self->sfd, PG)) TH_LOG("CoW extent size hint: %s", strerror(errno));
	ASSERT_EQ(variant->size, pwrite(self->sfd, buf, variant->size, 0));
	free(buf);
	ASSERT_EQ(0, fsync(self->sfd));
	self->cfd = open(self->clone, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, self->cfd) TH_LOG("create %s: %s", self->clone, strerror(errno));
	ASSERT_EQ(0, ioctl(self->cfd, FICLONE, self->sfd)) TH_LOG("FICLONE: %s", strerror(errno));
	ASSERT_EQ(0, set_cowextsize(self->cfd, PG)) TH_LOG("CoW extent size hint: %s", strerror(errno));
	ASSERT_EQ(0, fsync(self->cfd));
	ASSERT_EQ(0, fsync(self->sfd));
	ASSERT_EQ(0, sync_dir(dir));
	ASSERT_EQ(0, fstat(self->cfd, &st));
	ASSERT_EQ(variant->size, st.st_size);

	/* the buffer: `readable` bytes, then a PROT_NONE page */
	self->ubuf = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->ubuf);
	ASSERT_EQ(0, mprotect(self->ubuf + 3 * PG, PG, PROT_NONE));
}

FIXTURE_TEARDOWN(rsw)
{
	if (self->ubuf != MAP_FAILED)
		munmap(self->ubuf, 4 * PG);
	if (self->cfd >= 0)
		close(self->cfd);
	if (self->sfd >= 0)
		close(self->sfd);
	unlink(self->clone);
	unlink(self->src);
	if (self->dir) {
		char filler[PATH_MAX];

		filler_path(filler, sizeof(filler), self->dir);
		unlink(filler);
	}
}

/*
 * Every byte of the file at fd: [0, size) reads old_byte() but the new data
 * new_byte() in [woff, woff + wlen).  Logs the first wrong byte and what
 * the wrong bytes are.
 */
static void expect_content(struct __test_metadata *_metadata, int fd, off_t size,
			   off_t woff, size_t wlen, const char *what)
{
	char *buf = malloc(size);
	off_t i, first = -1;
	size_t bad = 0, junk = 0, zero = 0;
	ssize_t n;

	ASSERT_NE(NULL, buf);
	n = pread(fd, buf, size, 0);
	ASSERT_EQ(size, n) TH_LOG("%s: pread of %lld bytes returned %zd", what, (long long)size, n);
	for (i = 0; i < size; i++) {
		char want = i >= woff && i < woff + (off_t)wlen ? new_byte(i) : old_byte(i);

		if (buf[i] == want)
			continue;
		if (first < 0)
			first = i;
		bad++;
		if ((unsigned char)buf[i] == JUNK)
			junk++;
		else if (!buf[i])
			zero++;
	}
	EXPECT_EQ(0UL, bad)
		TH_LOG("%s: %zu bytes are neither the old data nor the new data, from offset %lld (%#x, expected %#x; page %lld, byte %lld of it): %zu of them are a deleted file's data (%#x), %zu zero, %zu other",
		       what, bad, (long long)first, first >= 0 ? (unsigned char)buf[first] : 0,
		       first >= 0 ? (unsigned char)(first >= woff && first < woff + (off_t)wlen ?
						    new_byte(first) : old_byte(first)) : 0,
		       (long long)(first / PG), (long long)(first % PG), junk, JUNK, zero, bad - junk - zero);
	free(buf);
}

TEST_F(rsw, count_size_blocks_and_every_byte)
{
	int wfd = variant->into_source ? self->sfd : self->cfd;
	int ofd = variant->into_source ? self->cfd : self->sfd;
	const char *wname = variant->into_source ? "the source (written)" : "the clone (written)";
	const char *oname = variant->into_source ? "the clone (not written)" : "the source (not written)";
	char *ubuf = self->ubuf + 3 * PG - variant->readable;
	off_t nblocks = (variant->size + PG - 1) / PG, i, want_size, want_blocks, cow_end, cow_left;
	struct stat wst, ost;
	ssize_t n;
	int sh;

	sh = ms_page_shared(wfd, variant->off);
	ASSERT_EQ(1, sh) TH_LOG("the block at %lld is not shared before the write (FIEMAP: %d)",
				(long long)variant->off, sh);
	ASSERT_EQ(0, fstat(wfd, &wst));
	ASSERT_EQ(0, fstat(ofd, &ost));
	ASSERT_EQ(nblocks * (PG / 512), wst.st_blocks)
		TH_LOG("before the write: %s has %lld 512-byte blocks", wname, (long long)wst.st_blocks);
	ASSERT_EQ(nblocks * (PG / 512), ost.st_blocks)
		TH_LOG("before the write: %s has %lld 512-byte blocks", oname, (long long)ost.st_blocks);
	for (i = 0; i < (off_t)variant->readable; i++)
		ubuf[i] = new_byte(variant->off + i);

	errno = 0;
	n = pwrite(wfd, ubuf, variant->len, variant->off);
	TH_LOG("pwrite(%zu bytes at %lld, %zu readable) of %s: %zd (%s)", variant->len,
	       (long long)variant->off, variant->readable, wname, n, n < 0 ? strerror(errno) : "ok");
	if (variant->readable == 0) {
		EXPECT_EQ(-1, n) TH_LOG("a write whose first byte faults returned %zd", n);
		EXPECT_EQ(EFAULT, errno) TH_LOG("a write whose first byte faults: %s", strerror(errno));
		n = 0;
	} else {
		ASSERT_LT(0, n) TH_LOG("a write with %zu readable bytes failed: %s", variant->readable, strerror(errno));
		EXPECT_GE((ssize_t)variant->readable, n);
	}

	want_size = variant->off + n > variant->size ? variant->off + n : variant->size;
	want_blocks = (want_size + PG - 1) / PG;
	/* the shared blocks the write covers: [off / PG, cow_end) */
	cow_end = (variant->off + (off_t)variant->len + PG - 1) / PG;
	if (cow_end > nblocks)
		cow_end = nblocks;
	cow_left = n > 0 && cow_end > (variant->off + n + PG - 1) / PG ?
		   cow_end - (variant->off + n + PG - 1) / PG : 0;
	ASSERT_EQ(0, fstat(wfd, &wst));
	ASSERT_EQ(0, fstat(ofd, &ost));
	EXPECT_EQ(want_size, wst.st_size) TH_LOG("%s: size %lld after %zd bytes written at %lld",
						 wname, (long long)wst.st_size, n, (long long)variant->off);
	EXPECT_EQ(variant->size, ost.st_size) TH_LOG("%s: size %lld", oname, (long long)ost.st_size);
	/*
	 * Written blocks replace shared ones one for one.  The CoW blocks
	 * the write allocated past the last block it wrote stay in the CoW
	 * fork as xfs's CoW preallocation (counted as delayed blocks in
	 * st_blocks) until the inode is evicted, unless the iteration that
	 * reached them wrote nothing and cancelled them
	 * (xfs_reflink_cancel_cow_range()): between none and all of them.
	 */
	EXPECT_LE(want_blocks * (PG / 512), wst.st_blocks)
		TH_LOG("%s: %lld 512-byte blocks, fewer than the %lld for %lld bytes",
		       wname, (long long)wst.st_blocks, (long long)want_blocks * (PG / 512),
		       (long long)want_size);
	/* how many of them stay depends on where the iteration stopped */
	EXPECT_GE((want_blocks + cow_left) * (PG / 512), wst.st_blocks)
		TH_LOG("%s: %lld 512-byte blocks, more than %lld: %lld for %lld bytes and at most %lld for the CoW blocks past the last one written",
		       wname, (long long)wst.st_blocks, (long long)(want_blocks + cow_left) * (PG / 512),
		       (long long)want_blocks * (PG / 512), (long long)want_size,
		       (long long)cow_left * (PG / 512));
	EXPECT_EQ(nblocks * (PG / 512), ost.st_blocks)
		TH_LOG("%s: %lld 512-byte blocks, %lld before the write", oname,
		       (long long)ost.st_blocks, (long long)nblocks * (PG / 512));
	expect_content(_metadata, wfd, wst.st_size, variant->off, n, wname);
	expect_content(_metadata, ofd, variant->size, 0, 0, oname);
	if (n > 0) {
		sh = ms_page_shared(wfd, variant->off);
		EXPECT_EQ(0, sh) TH_LOG("the written block at %lld is still shared (FIEMAP: %d)",
					(long long)variant->off, sh);
	}
	/*
	 * The same after the write is synced and both inodes are evicted
	 * (their CoW forks cancelled) and read again: exactly the blocks of
	 * the data.
	 */
	ASSERT_EQ(0, fsync(wfd));
	close(self->cfd);
	close(self->sfd);
	self->cfd = self->sfd = -1;
	ASSERT_EQ(0, ms_write_file("/proc/sys/vm/drop_caches", "2", false));
	sync();
	self->sfd = open(self->src, O_RDWR);
	ASSERT_LE(0, self->sfd);
	self->cfd = open(self->clone, O_RDWR);
	ASSERT_LE(0, self->cfd);
	wfd = variant->into_source ? self->sfd : self->cfd;
	ofd = variant->into_source ? self->cfd : self->sfd;
	ASSERT_EQ(0, fstat(wfd, &wst));
	ASSERT_EQ(0, fstat(ofd, &ost));
	EXPECT_EQ(want_size, wst.st_size);
	EXPECT_EQ(want_blocks * (PG / 512), wst.st_blocks)
		TH_LOG("%s, evicted and read again: %lld 512-byte blocks for %lld bytes",
		       wname, (long long)wst.st_blocks, (long long)want_size);
	EXPECT_EQ(nblocks * (PG / 512), ost.st_blocks)
		TH_LOG("%s, evicted and read again: %lld 512-byte blocks", oname, (long long)ost.st_blocks);
	expect_content(_metadata, wfd, wst.st_size, variant->off, n, wname);
	expect_content(_metadata, ofd, variant->size, 0, 0, oname);
}

TEST_HARNESS_MAIN
