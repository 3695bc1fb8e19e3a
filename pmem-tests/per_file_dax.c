// SPDX-License-Identifier: GPL-2.0
/*
 * per_file_dax: DAX chosen per file (mount option dax=inode) on ext4 and
 * xfs, and what it means for MAP_SYNC.
 *
 * On a dax=inode mount a file is DAX when it has the DAX attribute
 * (FS_XFLAG_DAX through FS_IOC_FSSETXATTR, what `xfs_io -c "chattr +x"`
 * does; ext4 stores it as EXT4_DAX_FL, xfs as XFS_DIFLAG2_DAX).  The kernel
 * decides when it reads the inode (ext4_should_enable_dax(),
 * xfs_inode_should_enable_dax()), never for an inode in memory: changing
 * the attribute marks the inode "don't cache" (d_mark_dontcache(), from
 * ext4_dax_dontcache() and xfs_ioctl_setattr_prepare_dax()), so that it is
 * evicted when its last user lets go, and the next open reads it again
 * with the new mode.  A user is an open file, and a mapping, which holds
 * its file.
 *
 * So: a file without the attribute refuses MAP_SHARED_VALIDATE|MAP_SYNC
 * with EOPNOTSUPP and statx() does not report STATX_ATTR_DAX; setting the
 * attribute changes nothing while the file is open or mapped; once every
 * fd is closed and every mapping gone, the file is DAX: statx() says so,
 * MAP_SYNC maps (VM_SYNC), and a write fault into a hole is synchronous
 * (counted from the kernel as sync_fault_lifecycle counts it: one
 * NEEDDSYNC, one dax_insert_pfn_mkwrite, one fsync of the inode).  Clearing
 * the attribute and letting go again takes DAX away, and the data written
 * through the DAX mapping is still the file's.
 *
 * Nothing here writes /proc/sys/vm/drop_caches: the eviction checked is the
 * one the attribute change asks for.  Each case works on its own file in
 * DIR/per_file_dax/ of the non-DAX mount (MAPSYNC_{EXT4,XFS}_NODAX, which
 * pmem-tests/run mounts dax=inode; the directory has no DAX attribute, so
 * nothing inherits it).
 */
#include <fcntl.h>
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
#define MSV_SYNC (MAP_SHARED_VALIDATE | MAP_SYNC)

FIXTURE(pfd) {
	char dir[PATH_MAX / 2];
	char path[PATH_MAX];
};

FIXTURE_VARIANT(pfd) {
	enum ms_mount mnt;
};

FIXTURE_VARIANT_ADD(pfd, ext4) { .mnt = MS_EXT4_NODAX };
FIXTURE_VARIANT_ADD(pfd, xfs) { .mnt = MS_XFS_NODAX };

/* create the case's file: 4 pages, page 0 written and synced, pages 1-3 holes */
FIXTURE_SETUP(pfd)
{
	const char *dir = ms_mount_dir(variant->mnt);
	char opts[1024], buf[PG];
	int fd;

	ASSERT_NE(NULL, dir) TH_LOG("%s is not set: run under pmem-tests/run", ms_mount_env(variant->mnt));
	ASSERT_EQ(0, ms_mount_options(dir, opts, sizeof(opts))) TH_LOG("%s is not a mount point", dir);
	/* dax=inode is xfs's default, which /proc/mounts does not show */
	ASSERT_FALSE(ms_has_option(opts, "dax=always") || ms_has_option(opts, "dax=never") ||
		     ms_has_option(opts, "dax"))
		TH_LOG("%s is mounted '%s': these cases need dax=inode", dir, opts);
	snprintf(self->dir, sizeof(self->dir), "%s/per_file_dax", dir);
	ASSERT_TRUE(!mkdir(self->dir, 0755) || errno == EEXIST) TH_LOG("mkdir %s: %s", self->dir, strerror(errno));
	snprintf(self->path, sizeof(self->path), "%s/%s", self->dir, _metadata->name);
	unlink(self->path);
	fd = ms_create_file(self->dir, _metadata->name, LEN);
	ASSERT_LE(0, fd) TH_LOG("create %s: %s", self->path, strerror(errno));
	memset(buf, 'w', sizeof(buf));
	ASSERT_EQ((ssize_t)PG, pwrite(fd, buf, PG, 0));
	ASSERT_EQ(0, fsync(fd));
	close(fd);
}

FIXTURE_TEARDOWN(pfd)
{
	unlink(self->path);
}

/* the file's DAX attribute (FS_XFLAG_DAX): 1, 0, or -1 (errno set) */
static int dax_flag(const char *path)
{
	struct fsxattr fa;
	int fd = open(path, O_RDONLY), ret = -1;

	if (fd < 0)
		return -1;
	if (!ioctl(fd, FS_IOC_FSGETXATTR, &fa))
		ret = !!(fa.fsx_xflags & FS_XFLAG_DAX);
	close(fd);
	return ret;
}

/* set (on) or clear the DAX attribute through fd; 0 or -1 */
static int set_dax_flag(int fd, bool on)
{
	struct fsxattr fa;

	if (ioctl(fd, FS_IOC_FSGETXATTR, &fa))
		return -1;
	if (on)
		fa.fsx_xflags |= FS_XFLAG_DAX;
	else
		fa.fsx_xflags &= ~FS_XFLAG_DAX;
	return ioctl(fd, FS_IOC_FSSETXATTR, &fa);
}

/* the same, opening and closing path */
static int set_dax_flag_path(const char *path, bool on)
{
	int fd = open(path, O_RDONLY), ret;

	if (fd < 0)
		return -1;
	ret = set_dax_flag(fd, on);
	close(fd);
	return ret;
}

/*
 * What statx() says of path: 1 if STATX_ATTR_DAX is set, 0 if not, -1 if
 * statx fails or the kernel does not report the attribute (not in the mask).
 */
static int statx_dax(const char *path)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, 0, STATX_BASIC_STATS, &stx))
		return -1;
	if (!(stx.stx_attributes_mask & STATX_ATTR_DAX))
		return -1;
	return !!(stx.stx_attributes & STATX_ATTR_DAX);
}

/* mmap(MAP_SHARED_VALIDATE|MAP_SYNC) of path, read-write: the mapping, or MAP_FAILED (errno set) */
static char *map_sync(const char *path, int *fdp)
{
	int fd = open(path, O_RDWR);
	char *map;

	*fdp = fd;
	if (fd < 0)
		return MAP_FAILED;
	map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MSV_SYNC, fd, 0);
	return map;
}

/* a file without the attribute: not DAX, MAP_SYNC refused with EOPNOTSUPP */
static void expect_not_dax(struct __test_metadata *_metadata, const char *path, const char *when)
{
	int fd, err, sx = statx_dax(path);
	char *map;

	EXPECT_EQ(0, sx) TH_LOG("%s: statx says STATX_ATTR_DAX is %s", when,
				sx < 0 ? "not reported (or statx failed)" : "set");
	errno = 0;
	map = map_sync(path, &fd);
	err = errno;
	ASSERT_LE(0, fd) TH_LOG("open %s: %s", path, strerror(errno));
	if (map != MAP_FAILED)
		munmap(map, LEN);
	EXPECT_EQ(MAP_FAILED, map) TH_LOG("%s: MAP_SHARED_VALIDATE|MAP_SYNC mapped a file that is not DAX", when);
	EXPECT_EQ(EOPNOTSUPP, err) TH_LOG("%s: MAP_SYNC failed with %s, expected EOPNOTSUPP", when, strerror(err));
	close(fd);
}

/*
 * a DAX file: statx says so, MAP_SYNC maps with VM_SYNC, and a write into
 * hole page `pg` is one synchronous fault; then the page holds c.
 */
static void expect_dax_sync_write(struct __test_metadata *_metadata, const char *path, int pg, char c,
				  const char *when)
{
	struct ms_sync_count cnt;
	struct stat st;
	int fd, sx = statx_dax(path);
	char *map;

	EXPECT_EQ(1, sx) TH_LOG("%s: statx says STATX_ATTR_DAX is %s", when,
				sx < 0 ? "not reported (or statx failed)" : "clear");
	map = map_sync(path, &fd);
	ASSERT_LE(0, fd) TH_LOG("open %s: %s", path, strerror(errno));
	ASSERT_NE(MAP_FAILED, map) TH_LOG("%s: MAP_SHARED_VALIDATE|MAP_SYNC: %s", when, strerror(errno));
	EXPECT_EQ(1, ms_vm_sync(map)) TH_LOG("%s: the MAP_SYNC mapping has no VM_SYNC (\"sf\" in smaps)", when);
	ASSERT_EQ(0, fstat(fd, &st));
	EXPECT_EQ('w', map[0]) TH_LOG("%s: page 0 through the DAX mapping reads %#x", when, map[0]);

	ASSERT_EQ(0, ms_trace_start()) TH_LOG("tracefs or the fs_dax events are missing");
	map[pg * PG] = c;
	ASSERT_EQ(0, ms_sync_count(st.st_ino, &cnt)) TH_LOG("tracefs or the fs_dax events are missing");
	EXPECT_LE(1, cnt.faults) TH_LOG("%s: the write into hole page %d was no DAX fault (no dax_pte_fault_done for inode %#lx)",
					 when, pg, (unsigned long)st.st_ino);
	EXPECT_EQ(1, cnt.needdsync) TH_LOG("%s: expected 1 synchronous fault (NEEDDSYNC), saw %d of %d faults",
					    when, cnt.needdsync, cnt.faults);
	EXPECT_EQ(1, cnt.mkwrite) TH_LOG("%s: expected 1 dax_insert_pfn_mkwrite, saw %d", when, cnt.mkwrite);
	EXPECT_EQ(1, cnt.fsyncs) TH_LOG("%s: expected 1 fsync of the inode (the fault's metadata sync), saw %d",
					 when, cnt.fsyncs);
	munmap(map, LEN);
	close(fd);
}

TEST_F(pfd, no_attribute_is_not_dax_and_refuses_map_sync)
{
	int f = dax_flag(self->path);

	ASSERT_EQ(0, f) TH_LOG("a new file in a directory without the DAX attribute: FS_XFLAG_DAX is %s",
			       f < 0 ? strerror(errno) : "set");
	expect_not_dax(_metadata, self->path, "new file, no DAX attribute");
}

TEST_F(pfd, attribute_set_while_open_changes_nothing_until_closed)
{
	int fd = open(self->path, O_RDWR), f;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, set_dax_flag(fd, true)) TH_LOG("FS_IOC_FSSETXATTR +FS_XFLAG_DAX: %s", strerror(errno));
	f = dax_flag(self->path);
	EXPECT_EQ(1, f) TH_LOG("FS_XFLAG_DAX after setting it: %s", f < 0 ? strerror(errno) : "clear");
	/* the inode stays in memory while fd is open: still not DAX */
	expect_not_dax(_metadata, self->path, "attribute set, file still open");
	close(fd);
	/* the last user gone: evicted (d_mark_dontcache), read again as DAX */
	expect_dax_sync_write(_metadata, self->path, 1, 'x', "attribute set, file closed and reopened");
}

TEST_F(pfd, attribute_set_then_closed_gives_synchronous_faults)
{
	int f;

	ASSERT_EQ(0, set_dax_flag_path(self->path, true)) TH_LOG("FS_IOC_FSSETXATTR +FS_XFLAG_DAX: %s", strerror(errno));
	f = dax_flag(self->path);
	EXPECT_EQ(1, f) TH_LOG("FS_XFLAG_DAX after setting it: %s", f < 0 ? strerror(errno) : "clear");
	expect_dax_sync_write(_metadata, self->path, 1, 'x', "attribute set, file closed and reopened");
	/* a second hole, a second synchronous fault: the mode stays */
	expect_dax_sync_write(_metadata, self->path, 3, 'y', "DAX file reopened");
}

TEST_F(pfd, mapping_keeps_the_inode_until_unmapped)
{
	int fd = open(self->path, O_RDWR);
	char *map;

	ASSERT_LE(0, fd);
	map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, map) TH_LOG("MAP_SHARED of the non-DAX file: %s", strerror(errno));
	EXPECT_EQ('w', map[0]);
	ASSERT_EQ(0, set_dax_flag(fd, true)) TH_LOG("FS_IOC_FSSETXATTR +FS_XFLAG_DAX: %s", strerror(errno));
	close(fd);
	/* no fd open, but the mapping holds the file: still the page-cache inode */
	expect_not_dax(_metadata, self->path, "attribute set, fd closed, still mapped");
	map[1] = 'm';
	ASSERT_EQ(0, munmap(map, LEN));
	expect_dax_sync_write(_metadata, self->path, 2, 'x', "attribute set, unmapped and reopened");
	/* what the page-cache mapping wrote reached the file before the switch */
	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	map = mmap(NULL, LEN, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, map);
	EXPECT_EQ('m', map[1]) TH_LOG("byte 1 after the switch to DAX reads %#x, not the 'm' written before", map[1]);
	munmap(map, LEN);
	close(fd);
}

TEST_F(pfd, attribute_cleared_then_closed_takes_dax_away)
{
	struct ms_sync_count cnt;
	struct stat st;
	char buf[PG];
	int fd, f;
	char *map;

	ASSERT_EQ(0, set_dax_flag_path(self->path, true)) TH_LOG("FS_IOC_FSSETXATTR +FS_XFLAG_DAX: %s", strerror(errno));
	expect_dax_sync_write(_metadata, self->path, 1, 'x', "attribute set, file closed and reopened");

	ASSERT_EQ(0, set_dax_flag_path(self->path, false)) TH_LOG("FS_IOC_FSSETXATTR -FS_XFLAG_DAX: %s", strerror(errno));
	f = dax_flag(self->path);
	EXPECT_EQ(0, f) TH_LOG("FS_XFLAG_DAX after clearing it: %s", f < 0 ? strerror(errno) : "set");
	expect_not_dax(_metadata, self->path, "attribute cleared, file closed and reopened");

	/* the data written through the DAX mapping is the file's */
	fd = open(self->path, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)PG, pread(fd, buf, PG, PG));
	EXPECT_EQ('x', buf[0]) TH_LOG("page 1, written through the DAX mapping, reads %#x after the switch back", buf[0]);
	/* an ordinary page-cache mapping now: its faults are no DAX faults */
	ASSERT_EQ(0, fstat(fd, &st));
	map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, map) TH_LOG("MAP_SHARED: %s", strerror(errno));
	ASSERT_EQ(0, ms_trace_start());
	map[2 * PG] = 'p';
	ASSERT_EQ(0, ms_sync_count(st.st_ino, &cnt));
	EXPECT_EQ(0, cnt.faults) TH_LOG("a write through MAP_SHARED after the switch back took %d DAX faults", cnt.faults);
	EXPECT_EQ('x', map[PG]) TH_LOG("page 1 through the page-cache mapping reads %#x", map[PG]);
	munmap(map, LEN);
	close(fd);
}

TEST_HARNESS_MAIN
