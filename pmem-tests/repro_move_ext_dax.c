// SPDX-License-Identifier: GPL-2.0
/*
 * repro_move_ext_dax: EXT4_IOC_MOVE_EXT (online defrag, e4defrag) refuses a
 * DAX file as the original and as the donor (0020).  A boot of its own: on
 * stock the ioctl moves a DAX donor's blocks through page-cache folios in
 * its DAX address space, and evicting that inode (unlink, umount) hits
 * BUG_ON(nrpages) in clear_inode(), an Oops that leaves the directory
 * locked.  So the case that can reproduce it runs last, and when the
 * ioctl succeeded the files are left in place: the boot's fsck round then
 * fails to unmount the file system (the Oops, in umount), which the stock
 * list names as the same bug.
 *
 * The ioctl swaps the blocks of a range of the original file with those of
 * the donor through the page cache of both files: it locks a folio of each
 * (creating them), copies the original's data into its folio and swaps the
 * extents under i_data_sem.  A DAX file has no page cache: its address space
 * holds DAX entries, which the created folio replaces, and its mappings map
 * the blocks themselves, which nothing unmaps.  Stock ext4 refuses a DAX
 * original (EOPNOTSUPP, "Online defrag not supported with DAX") but never
 * looks at the donor; on a dax=inode mount a DAX donor and a non-DAX
 * original coexist.  A MAP_SYNC mapping of the donor then keeps mapping
 * the blocks that now belong to the original (its stores land in the
 * other file).
 *
 * Each case works on a non-DAX file and a DAX file (FS_XFLAG_DAX, then the
 * inode evicted and read again, as per_file_dax does it) in
 * DIR/move_ext_dax/ of the dax=inode ext4 mount (MAPSYNC_EXT4_NODAX); the
 * DAX file is mapped MAP_SHARED_VALIDATE|MAP_SYNC and read through that
 * mapping before the ioctl.  After the ioctl (which must fail with
 * EOPNOTSUPP and move nothing), both files must hold their own data, read
 * with pread() and through the mapping, and the extents of both
 * (FIEMAP, physical) are those of before.
 */
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/stat.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PG 4096UL
#define NPG 4
#define LEN (NPG * PG)

/* fs/ext4/ext4.h */
struct move_extent {
	__u32 reserved;
	__u32 donor_fd;
	__u64 orig_start;
	__u64 donor_start;
	__u64 len;
	__u64 moved_len;
};
#define EXT4_IOC_MOVE_EXT _IOWR('f', 15, struct move_extent)

FIXTURE(mext) {
	char dir[PATH_MAX / 2];
	char plain[PATH_MAX], dax[PATH_MAX];
	bool moved;	/* the ioctl moved blocks: leave the files (see above) */
};

FIXTURE_VARIANT(mext) {
	bool dax_is_donor;	/* else the DAX file is the original */
};

/* the case stock gets wrong last: what it leaves cannot be deleted */
FIXTURE_VARIANT_ADD(mext, dax_original_nodax_donor) { .dax_is_donor = false };
FIXTURE_VARIANT_ADD(mext, nodax_original_dax_donor) { .dax_is_donor = true };

static int set_dax_flag(int fd)
{
	struct fsxattr fa;

	if (ioctl(fd, FS_IOC_FSGETXATTR, &fa))
		return -1;
	fa.fsx_xflags |= FS_XFLAG_DAX;
	return ioctl(fd, FS_IOC_FSSETXATTR, &fa);
}

static int is_dax(int fd)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx))
		return -1;
	return !!(stx.stx_attributes & STATX_ATTR_DAX);
}

/* a file of NPG pages, page i filled with c + i, synced; 0 or -1 */
static int make_file(const char *dir, const char *name, char c, bool dax)
{
	char buf[PG];
	size_t i;
	int fd = ms_create_file(dir, name, 0);

	if (fd < 0)
		return -1;
	/* the attribute takes effect when the inode is read again */
	if (dax) {
		char path[PATH_MAX];

		if (set_dax_flag(fd) || close(fd))
			return -1;
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		fd = open(path, O_RDWR);
		if (fd < 0)
			return -1;
	}
	for (i = 0; i < NPG; i++) {
		memset(buf, c + i, PG);
		if (pwrite(fd, buf, PG, i * PG) != (ssize_t)PG)
			goto fail;
	}
	if (fsync(fd))
		goto fail;
	return fd;
fail:
	close(fd);
	return -1;
}

/* physical start of each block of fd (FIEMAP), into phys[NPG]; 0 or -1 */
static int blocks_of(int fd, unsigned long long *phys)
{
	struct fiemap_extent ext[NPG];
	int i, n = ms_fiemap(fd, ext, NPG);
	size_t pg;

	if (n < 0)
		return -1;
	for (pg = 0; pg < NPG; pg++) {
		phys[pg] = 0;
		for (i = 0; i < n; i++)
			if (pg * PG >= ext[i].fe_logical &&
			    pg * PG < ext[i].fe_logical + ext[i].fe_length)
				phys[pg] = ext[i].fe_physical + pg * PG - ext[i].fe_logical;
	}
	return 0;
}

FIXTURE_SETUP(mext)
{
	const char *dir = ms_mount_dir(MS_EXT4_NODAX);
	char opts[1024];

	ASSERT_NE(NULL, dir) TH_LOG("%s is not set: run under pmem-tests/run", ms_mount_env(MS_EXT4_NODAX));
	ASSERT_EQ(0, ms_mount_options(dir, opts, sizeof(opts))) TH_LOG("%s is not a mount point", dir);
	ASSERT_TRUE(ms_has_option(opts, "dax=inode"))
		TH_LOG("%s is mounted '%s': these cases need dax=inode", dir, opts);
	self->moved = false;
	snprintf(self->dir, sizeof(self->dir), "%s/move_ext_dax", dir);
	ASSERT_TRUE(!mkdir(self->dir, 0755) || errno == EEXIST) TH_LOG("mkdir %s: %s", self->dir, strerror(errno));
	snprintf(self->plain, sizeof(self->plain), "%s/plain", self->dir);
	snprintf(self->dax, sizeof(self->dax), "%s/dax", self->dir);
	unlink(self->plain);
	unlink(self->dax);
}

FIXTURE_TEARDOWN(mext)
{
	if (self->moved)
		return;
	unlink(self->plain);
	unlink(self->dax);
}

TEST_F(mext, refused_and_nothing_moves)
{
	unsigned long long pb[NPG], db[NPG], pa[NPG], da[NPG];
	struct move_extent me = { 0 };
	int pfd, dfd, ret, err, orig, donor;
	volatile char *map;
	size_t pg;

	pfd = make_file(self->dir, "plain", 'a', false);
	ASSERT_LE(0, pfd) TH_LOG("plain file: %s", strerror(errno));
	dfd = make_file(self->dir, "dax", 'p', true);
	ASSERT_LE(0, dfd) TH_LOG("DAX file: %s", strerror(errno));
	ASSERT_EQ(0, is_dax(pfd));
	ASSERT_EQ(1, is_dax(dfd)) TH_LOG("FS_XFLAG_DAX set, the inode read again: still not DAX");
	map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, dfd, 0);
	ASSERT_NE(MAP_FAILED, (void *)map) TH_LOG("MAP_SYNC of the DAX file: %s", strerror(errno));
	for (pg = 0; pg < NPG; pg++)
		ASSERT_EQ('p' + (int)pg, map[pg * PG]);
	ASSERT_EQ(0, blocks_of(pfd, pb));
	ASSERT_EQ(0, blocks_of(dfd, db));

	orig = variant->dax_is_donor ? pfd : dfd;
	donor = variant->dax_is_donor ? dfd : pfd;
	me.donor_fd = donor;
	me.len = NPG;
	ret = ioctl(orig, EXT4_IOC_MOVE_EXT, &me);
	err = errno;
	self->moved = ret == 0 || me.moved_len;
	TH_LOG("EXT4_IOC_MOVE_EXT, %s original, %s donor: %d (%s), moved_len %llu",
	       orig == dfd ? "DAX" : "non-DAX", donor == dfd ? "DAX" : "non-DAX",
	       ret, ret ? strerror(err) : "success", (unsigned long long)me.moved_len);
	ASSERT_EQ(0, blocks_of(pfd, pa));
	ASSERT_EQ(0, blocks_of(dfd, da));
	for (pg = 0; pg < NPG; pg++)
		TH_LOG("page %zu: non-DAX file pread '%c' block %#llx (was %#llx); "
		       "DAX file pread '%c', mapping '%c', block %#llx (was %#llx)",
		       pg, ms_page_byte(pfd, pg), pa[pg], pb[pg],
		       ms_page_byte(dfd, pg), map[pg * PG], da[pg], db[pg]);
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(EOPNOTSUPP, err);
	EXPECT_EQ(0ULL, (unsigned long long)me.moved_len);
	for (pg = 0; pg < NPG; pg++) {
		EXPECT_EQ('a' + (int)pg, ms_page_byte(pfd, pg));
		EXPECT_EQ('p' + (int)pg, ms_page_byte(dfd, pg));
		EXPECT_EQ('p' + (int)pg, map[pg * PG]);
		EXPECT_EQ(pb[pg], pa[pg]);
		EXPECT_EQ(db[pg], da[pg]);
	}
	munmap((void *)map, LEN);
	close(pfd);
	close(dfd);
}

TEST_HARNESS_MAIN
