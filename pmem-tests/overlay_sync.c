// SPDX-License-Identifier: GPL-2.0
/*
 * overlay_sync: MAP_SYNC through overlayfs (issue #15).
 *
 * A mapping of an overlay file is a mapping of its real file: ovl_mmap()
 * hands the VMA to backing_file_mmap(), which makes the real (upper or
 * lower) file the VMA's file and calls its ->mmap().  What MAP_SYNC gives
 * must follow the real file:
 *
 *   dax_upper      lower, upper and work dirs on one DAX mount (ext4 or
 *                  xfs -o dax=always): the real file can have synchronous
 *                  faults, so MAP_SHARED|MAP_SYNC (legacy) and
 *                  MAP_SHARED_VALIDATE|MAP_SYNC both give VM_SYNC, and a
 *                  store into a hole is one synchronous fault of the REAL
 *                  inode (counted from the kernel as sync_fault_lifecycle
 *                  does: 1 NEEDDSYNC, 1 dax_insert_pfn_mkwrite, 1 fsync of
 *                  the inode; the inode number is the upper file's, read
 *                  with stat() in the upper dir), also after a copy-up.
 *   no_sync_upper  lower on the DAX mount, upper and work dirs where the
 *                  real file cannot have synchronous faults: the non-DAX
 *                  mount of the same fs, or ext2 -o dax (DAX, but ext2 has
 *                  no FOP_MMAP_SYNC).  MAP_SHARED_VALIDATE|MAP_SYNC is
 *                  refused with EOPNOTSUPP, and so is legacy
 *                  MAP_SHARED|MAP_SYNC (fail closed, as stock refuses it
 *                  on a non-DAX ext4/xfs file).
 *                  The lower file, DAX, read through a read-only fd (no
 *                  copy-up): MAP_SHARED_VALIDATE|MAP_SYNC maps it.
 *   nosync_lower   the other way round: the lower dir where a file cannot
 *                  have synchronous faults (non-DAX ext4/xfs, ext2 -o dax),
 *                  upper and work dirs on ext4/xfs DAX (image layers on
 *                  disk, the writable layer on pmem).  A read-only fd opened
 *                  before another open copied the file up keeps mapping
 *                  the lower file: legacy MAP_SHARED|MAP_SYNC and
 *                  MAP_SHARED_VALIDATE|MAP_SYNC of it are refused (decided
 *                  on the lower file, not on the DAX upper copy).
 *   volatile_upper the dax_upper layout mounted -o volatile: the overlay
 *                  omits every sync of its upper layer and is not to be
 *                  used after a crash, so MAP_SYNC (validated and legacy)
 *                  is refused with EOPNOTSUPP (issue #39).
 * dax_upper also checks that mmap(2) with MAP_SYNC of a copied-up file
 * fsyncs the upper file once (the copy-up's link into the upper dir is not
 * committed, and a store into a block copy-up wrote syncs nothing).
 *
 * The fixture makes <mount>/overlay_sync/{lower,upper,work,merged} (upper
 * and work on the upper mount), puts a file in the lower dir, mounts the
 * overlay with mount(2) on merged and unmounts it in the teardown.
 *
 * Stock 6.12: overlayfs has no FOP_MMAP_SYNC, so MAP_SHARED_VALIDATE|MAP_SYNC
 * of any overlay file is EOPNOTSUPP; the dax_upper cases that need it skip
 * there (with MAPSYNC_KERNEL=stock, and only on exactly that error).
 * Legacy MAP_SHARED|MAP_SYNC gets VM_SYNC from the raw flags on stock, and
 * backing_file_mmap() passes it to the real file.  No case write-faults
 * through a VM_SYNC mapping of an ext2 file (a stock hang).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mapsync.h"
#include "ms_expect.h"

#define PG 4096UL
#define NPG 4
#define LEN (NPG * PG)		/* the file made through the overlay */
/*
 * The lower-only file: copy-up copies 1 MiB chunks (holes inside a chunk
 * become written zeros) and skips a hole only from a chunk boundary on, so
 * a hole survives copy-up only past 1 MiB: page 0 written, the rest holes.
 */
#define LOWER_LEN ((1UL << 20) + NPG * PG)
#define LOWER_HOLE ((1UL << 20) + PG)	/* a hole in the upper file after copy-up */
#define MSV_SYNC (MAP_SHARED_VALIDATE | MAP_SYNC)
#define LEGACY_SYNC (MAP_SHARED | MAP_SYNC)

static bool stock_kernel(void)
{
	const char *k = getenv("MAPSYNC_KERNEL");

	return k && !strcmp(k, "stock");
}

/* the overlay of one test: paths, the file opened through it, its mapping */
struct ovl {
	char base_lower[1024], base_upper[1024];	/* <mount>/overlay_sync */
	char lower[1100], upper[1100], work[1100], merged[1100];
	const char *extra_opts;	/* more overlay mount options ("volatile"), or NULL */
	bool mounted;
	int fd;		/* through the overlay */
	char *map;
	size_t maplen;
};

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path) && errno != ENOENT ? -1 : 0;
}

static int rm_rf(const char *dir)
{
	if (access(dir, F_OK))
		return 0;
	return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* the kernel log since fd was opened at its end: the overlayfs lines, logged */
static void log_kmsg(struct __test_metadata *_metadata, int fd)
{
	char rec[1024], *msg;
	ssize_t n;

	if (fd < 0)
		return;
	while ((n = read(fd, rec, sizeof(rec) - 1)) > 0) {
		rec[n] = '\0';
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		if (strstr(msg, "overlay"))
			TH_LOG("mount: the kernel said: %.*s", (int)strcspn(msg, "\n"), msg);
	}
	close(fd);
}

/* the real file's statx of dir/name: DAX attribute, inode, blocks */
static int real_statx(const char *dir, const char *name, struct statx *stx)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW,
		     STATX_INO | STATX_BLOCKS | STATX_SIZE | STATX_MTIME, stx);
}

static bool is_dax(const struct statx *stx)
{
	return stx->stx_attributes & STATX_ATTR_DAX;
}

/* whether [off, off + PG) of fd is a hole (SEEK_DATA finds no data there) */
static bool page_is_hole(int fd, off_t off)
{
	off_t d = lseek(fd, off, SEEK_DATA);

	return (d < 0 && errno == ENXIO) || d >= off + (off_t)PG;
}

/*
 * Make <lower_mnt>/overlay_sync/{lower,merged}, <upper_mnt>/overlay_sync/
 * {upper,work}, the lower-only file "lower_only" (LOWER_LEN, page 0 'l'),
 * and mount the overlay; then create "f" through it (LEN, page 0 'w', pages
 * 1-3 holes), which lands in the upper dir.
 */
static void ovl_setup(struct __test_metadata *_metadata, struct ovl *o,
		      enum ms_mount lower_mnt, enum ms_mount upper_mnt, bool upper_dax)
{
	const char *ld = ms_mount_dir(lower_mnt), *ud = ms_mount_dir(upper_mnt);
	char opts[4 * PATH_MAX], buf[PG], path[PATH_MAX];
	struct statx stx;
	int fd, kmsg;

	o->fd = -1;
	o->map = MAP_FAILED;
	o->mounted = false;
	/* a missing mount is a missing device: fail, do not skip */
	ASSERT_NE(NULL, ld) TH_LOG("%s is not set: run under pmem-tests/run", ms_mount_env(lower_mnt));
	ASSERT_NE(NULL, ud) TH_LOG("%s is not set: run under pmem-tests/run", ms_mount_env(upper_mnt));
	snprintf(o->base_lower, sizeof(o->base_lower), "%s/overlay_sync", ld);
	snprintf(o->base_upper, sizeof(o->base_upper), "%s/overlay_sync", ud);
	snprintf(o->lower, sizeof(o->lower), "%s/lower", o->base_lower);
	snprintf(o->merged, sizeof(o->merged), "%s/merged", o->base_lower);
	snprintf(o->upper, sizeof(o->upper), "%s/upper", o->base_upper);
	snprintf(o->work, sizeof(o->work), "%s/work", o->base_upper);

	/*
	 * What an earlier test that failed may have left: the harness of
	 * 6.12 does not run the teardown after a failed ASSERT, so its
	 * overlay is still mounted on <its lower base>/merged, which is one
	 * of our two bases when the mounts are shared
	 */
	umount2(o->merged, MNT_DETACH);
	snprintf(path, sizeof(path), "%s/merged", o->base_upper);
	umount2(path, MNT_DETACH);
	ASSERT_EQ(0, rm_rf(o->base_lower)) TH_LOG("rm -rf %s: %s", o->base_lower, strerror(errno));
	ASSERT_EQ(0, rm_rf(o->base_upper)) TH_LOG("rm -rf %s: %s", o->base_upper, strerror(errno));
	ASSERT_EQ(0, mkdir(o->base_lower, 0755)) TH_LOG("mkdir %s: %s", o->base_lower, strerror(errno));
	if (strcmp(o->base_lower, o->base_upper)) {
		ASSERT_EQ(0, mkdir(o->base_upper, 0755)) TH_LOG("mkdir %s: %s", o->base_upper, strerror(errno));
	}
	ASSERT_EQ(0, mkdir(o->lower, 0755));
	ASSERT_EQ(0, mkdir(o->upper, 0755));
	ASSERT_EQ(0, mkdir(o->work, 0755));
	ASSERT_EQ(0, mkdir(o->merged, 0755));

	fd = ms_create_file(o->lower, "lower_only", LOWER_LEN);
	ASSERT_LE(0, fd) TH_LOG("create in %s: %s", o->lower, strerror(errno));
	memset(buf, 'l', sizeof(buf));
	ASSERT_EQ((ssize_t)PG, pwrite(fd, buf, PG, 0));
	ASSERT_EQ(0, fsync(fd));
	close(fd);

	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s%s%s", o->lower, o->upper, o->work,
		 o->extra_opts ? "," : "", o->extra_opts ? o->extra_opts : "");
	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg >= 0)
		lseek(kmsg, 0, SEEK_END);
	if (mount("overlay", o->merged, "overlay", 0, opts)) {
		TH_LOG("mount -t overlay -o %s %s: %s", opts, o->merged, strerror(errno));
		log_kmsg(_metadata, kmsg);
		ASSERT_TRUE(false);
	}
	o->mounted = true;
	log_kmsg(_metadata, kmsg);

	o->fd = ms_create_file(o->merged, "f", LEN);
	ASSERT_LE(0, o->fd) TH_LOG("create through the overlay in %s: %s", o->merged, strerror(errno));
	memset(buf, 'w', sizeof(buf));
	ASSERT_EQ((ssize_t)PG, pwrite(o->fd, buf, PG, 0));
	ASSERT_EQ(0, fsync(o->fd));

	/* the real file: in the upper dir, on the file system the variant names */
	ASSERT_EQ(0, real_statx(o->upper, "f", &stx))
		TH_LOG("%s/f: %s (the file made through the overlay is not in the upper dir)",
		       o->upper, strerror(errno));
	ASSERT_EQ(upper_dax, is_dax(&stx))
		TH_LOG("the real file %s/f is %sDAX, expected %sDAX", o->upper,
		       is_dax(&stx) ? "" : "not ", upper_dax ? "" : "not ");
}

static void ovl_teardown(struct __test_metadata *_metadata, struct ovl *o)
{
	if (o->map != MAP_FAILED)
		munmap(o->map, o->maplen);
	if (o->fd >= 0)
		close(o->fd);
	/*
	 * errno taken first, and TH_LOG only on a failure: after a failed
	 * ASSERT in the test the harness would print a TH_LOG here anyway
	 */
	if (o->mounted && umount(o->merged)) {
		int e = errno;

		EXPECT_EQ(0, e) TH_LOG("umount %s: %s", o->merged, strerror(e));
	}
}

/* The overlay file fd mapped read-write with flags, placed for 4 KiB faults. */
static char *ovl_map(struct ovl *o, int fd, size_t len, int flags)
{
	o->map = ms_map_placed(len, PROT_READ | PROT_WRITE, flags, fd, MS_PLACE_PTE);
	o->maplen = len;
	return o->map;
}

/* the page at off of fd (pread) holds byte c at offset 0 and byte rest after it */
static void expect_page_at(struct __test_metadata *_metadata, int fd, off_t off, char c,
			   char rest, const char *what)
{
	static char p[PG];
	size_t i;

	ASSERT_EQ((ssize_t)PG, pread(fd, p, PG, off)) TH_LOG("%s: pread: %s", what, strerror(errno));
	EXPECT_EQ(c, p[0]) TH_LOG("%s: byte 0 is %#x, expected %#x", what, p[0], c);
	for (i = 1; i < PG && p[i] == rest; i++)
		;
	EXPECT_EQ(PG, i) TH_LOG("%s: byte %zu is %#x, expected %#x", what, i, p[i], rest);
}

/*
 * MAP_SHARED_VALIDATE|MAP_SYNC of an overlay file failed: on stock, with
 * EOPNOTSUPP only, that is the missing feature (skip); anything else fails.
 */
#define SKIP_IF_STOCK_REFUSES(what)						\
	do {									\
		int e_ = errno;							\
		if (stock_kernel() && e_ == EOPNOTSUPP)				\
			SKIP(return, "%s: MAP_SHARED_VALIDATE|MAP_SYNC of an "	\
			     "overlayfs file (FOP_MMAP_SYNC on overlayfs) is "	\
			     "not in the stock kernel (EOPNOTSUPP)", what);	\
		ASSERT_TRUE(false) TH_LOG("%s: MAP_SHARED_VALIDATE|MAP_SYNC mmap of "	\
					  "an overlay file whose real file is DAX: %s",	\
					  what, strerror(e_));			\
	} while (0)

/*
 * Open the lower-only file O_RDWR through the overlay (a copy-up); the fd
 * replaces o->fd (closed by the teardown); *up: the upper file's statx
 */
static int copy_up_lower_only(struct __test_metadata *_metadata, struct ovl *o, struct statx *up)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/lower_only", o->merged);
	fd = open(path, O_RDWR);
	ASSERT_LE(0, fd) TH_LOG("open %s O_RDWR (copy-up): %s", path, strerror(errno));
	close(o->fd);
	o->fd = fd;
	ASSERT_EQ(0, real_statx(o->upper, "lower_only", up))
		TH_LOG("no copy-up: %s/lower_only: %s", o->upper, strerror(errno));
	return fd;
}

FIXTURE(dax_upper) {
	struct ovl o;
	unsigned long ino;	/* the real (upper) inode of "f" */
};

FIXTURE_VARIANT(dax_upper) {
	enum ms_mount mnt;
};

FIXTURE_VARIANT_ADD(dax_upper, ext4) { .mnt = MS_EXT4_DAX };
FIXTURE_VARIANT_ADD(dax_upper, xfs) { .mnt = MS_XFS_DAX };

FIXTURE_SETUP(dax_upper)
{
	struct statx stx;

	ovl_setup(_metadata, &self->o, variant->mnt, variant->mnt, true);
	ASSERT_EQ(0, real_statx(self->o.upper, "f", &stx));
	self->ino = stx.stx_ino;
	ASSERT_EQ(8ULL, (unsigned long long)stx.stx_blocks)
		TH_LOG("expected page 0 allocated and pages 1-3 holes, the real file has %llu 512-byte blocks",
		       (unsigned long long)stx.stx_blocks);
}

FIXTURE_TEARDOWN(dax_upper)
{
	ovl_teardown(_metadata, &self->o);
}

/*
 * (a) Legacy MAP_SHARED|MAP_SYNC: synchronous faults on a DAX real file,
 * as on stock (0001 first took them away: overlay files have no
 * FOP_MMAP_SYNC and the overlay inode is not DAX).
 */
TEST_F(dax_upper, legacy_map_sync_hole_write_is_synchronous)
{
	char *map = ovl_map(&self->o, self->o.fd, LEN, LEGACY_SYNC);
	int sf;

	ASSERT_NE(MAP_FAILED, map) TH_LOG("MAP_SHARED|MAP_SYNC mmap of the overlay file: %s", strerror(errno));
	sf = ms_vm_sync(map);
	TH_LOG("MAP_SHARED|MAP_SYNC through the overlay: mapped, VM_SYNC (sf) %d", sf);
	EXPECT_EQ(1, sf) TH_LOG("MAP_SHARED|MAP_SYNC of an overlay file whose real file is DAX has no VM_SYNC (\"sf\" in smaps): its faults are not synchronous");
	ASSERT_TRUE(page_is_hole(self->o.fd, PG)) TH_LOG("page 1 is no hole: the store would prove nothing");

	ASSERT_EQ(0, ms_trace_start());
	map[PG] = 'x';
	expect_one_sync_fault(_metadata, self->ino, "MAP_SHARED|MAP_SYNC store into hole page 1");
	expect_page_at(_metadata, self->o.fd, PG, 'x', 0, "page 1 through the overlay (pread)");
}

/*
 * (b) MAP_SHARED_VALIDATE|MAP_SYNC: accepted, VM_SYNC, the store into a
 * hole is one synchronous fault of the real inode, and the data is in the
 * overlay file and in the upper file.
 */
TEST_F(dax_upper, validate_map_sync_hole_write_is_synchronous_and_reads_back)
{
	char *map = ovl_map(&self->o, self->o.fd, LEN, MSV_SYNC);
	char path[PATH_MAX];
	int sf, ufd;

	if (map == MAP_FAILED)
		SKIP_IF_STOCK_REFUSES("the file made through the overlay");
	sf = ms_vm_sync(map);
	TH_LOG("MAP_SHARED_VALIDATE|MAP_SYNC through the overlay: mapped, VM_SYNC (sf) %d", sf);
	EXPECT_EQ(1, sf) TH_LOG("no VM_SYNC (\"sf\" in smaps) on a MAP_SHARED_VALIDATE|MAP_SYNC mapping");
	ASSERT_TRUE(page_is_hole(self->o.fd, 2 * PG)) TH_LOG("page 2 is no hole: the store would prove nothing");

	ASSERT_EQ(0, ms_trace_start());
	map[2 * PG] = 'x';
	expect_one_sync_fault(_metadata, self->ino, "MAP_SHARED_VALIDATE|MAP_SYNC store into hole page 2");
	expect_page_at(_metadata, self->o.fd, 2 * PG, 'x', 0, "page 2 through the overlay (pread)");
	snprintf(path, sizeof(path), "%s/f", self->o.upper);
	ufd = open(path, O_RDONLY);
	ASSERT_LE(0, ufd) TH_LOG("open %s: %s", path, strerror(errno));
	expect_page_at(_metadata, ufd, 2 * PG, 'x', 0, "page 2 of the upper file (pread)");
	close(ufd);
}

/*
 * (c) A file only in the lower dir, opened O_RDWR through the overlay
 * (copy-up), then MAP_SHARED_VALIDATE|MAP_SYNC: the store into a hole is
 * a synchronous fault of the new upper inode, and the lower file is
 * unchanged.
 */
TEST_F(dax_upper, copy_up_then_validate_map_sync_hole_write_is_synchronous_lower_unchanged)
{
	struct statx before, after, up;
	char path[PATH_MAX], *map;
	int fd, lfd, sf;

	ASSERT_EQ(0, real_statx(self->o.lower, "lower_only", &before));
	ASSERT_NE(0, real_statx(self->o.upper, "lower_only", &up)) TH_LOG("the file is in the upper dir before copy-up");

	fd = copy_up_lower_only(_metadata, &self->o, &up);
	ASSERT_TRUE(is_dax(&up)) TH_LOG("the copied-up file is not DAX");
	ASSERT_NE(before.stx_ino, up.stx_ino);
	ASSERT_TRUE(page_is_hole(fd, LOWER_HOLE))
		TH_LOG("offset %lu of the copied-up file is no hole (copy-up filled it): the store would prove nothing",
		       LOWER_HOLE);

	map = ovl_map(&self->o, fd, LOWER_LEN, MSV_SYNC);
	if (map == MAP_FAILED)
		SKIP_IF_STOCK_REFUSES("the file after copy-up");
	sf = ms_vm_sync(map);
	TH_LOG("after copy-up (upper inode %llu, lower %llu): MAP_SHARED_VALIDATE|MAP_SYNC mapped, VM_SYNC (sf) %d",
	       (unsigned long long)up.stx_ino, (unsigned long long)before.stx_ino, sf);
	EXPECT_EQ(1, sf) TH_LOG("no VM_SYNC (\"sf\" in smaps) on a MAP_SHARED_VALIDATE|MAP_SYNC mapping");
	EXPECT_EQ('l', map[0]) TH_LOG("page 0 through the mapping is not the lower file's data");

	ASSERT_EQ(0, ms_trace_start());
	map[LOWER_HOLE] = 'x';
	expect_one_sync_fault(_metadata, up.stx_ino, "store into a hole of the copied-up file");
	expect_page_at(_metadata, fd, LOWER_HOLE, 'x', 0, "the page stored into, through the overlay (pread)");

	/* the lower file: same inode, size, blocks, mtime and data */
	ASSERT_EQ(0, real_statx(self->o.lower, "lower_only", &after));
	EXPECT_EQ(before.stx_ino, after.stx_ino);
	EXPECT_EQ(before.stx_size, after.stx_size) TH_LOG("the lower file's size changed");
	EXPECT_EQ(before.stx_blocks, after.stx_blocks)
		TH_LOG("the lower file's blocks: %llu before, %llu after", (unsigned long long)before.stx_blocks,
		       (unsigned long long)after.stx_blocks);
	EXPECT_TRUE(before.stx_mtime.tv_sec == after.stx_mtime.tv_sec &&
		    before.stx_mtime.tv_nsec == after.stx_mtime.tv_nsec) TH_LOG("the lower file's mtime changed");
	snprintf(path, sizeof(path), "%s/lower_only", self->o.lower);
	lfd = open(path, O_RDONLY);
	ASSERT_LE(0, lfd) TH_LOG("open %s: %s", path, strerror(errno));
	expect_page_at(_metadata, lfd, 0, 'l', 'l', "page 0 of the lower file");
	expect_page_at(_metadata, lfd, LOWER_HOLE, 0, 0, "the page stored into, in the lower file");
	EXPECT_TRUE(page_is_hole(lfd, LOWER_HOLE)) TH_LOG("the lower file has a block where the store went");
	close(lfd);
}

/*
 * (c2) The copy-up gap: copy-up moves the new upper file into the upper
 * dir by a link (an O_TMPFILE) nothing has committed, and a store into a block that
 * copy-up wrote (page 0 here) is no synchronous fault at all.  So mmap
 * with MAP_SYNC of a copied-up file fsyncs the upper file once, which on
 * ext4 and xfs commits the link with it (the link changes the
 * inode's ctime in the same transaction): counted from the kernel, the
 * fsync entry of the upper inode during mmap(2).  legacy: MAP_SHARED|MAP_SYNC
 * (stock maps it with VM_SYNC and no fsync: the gap); validate:
 * MAP_SHARED_VALIDATE|MAP_SYNC (skips on stock: EOPNOTSUPP).
 */
static void copy_up_map_sync_fsyncs(struct __test_metadata *_metadata, struct ovl *o, int flags)
{
	const char *name = flags == MSV_SYNC ? "MAP_SHARED_VALIDATE|MAP_SYNC" : "MAP_SHARED|MAP_SYNC";
	struct ms_sync_count c;
	char *map;
	struct statx up;
	int fd;

	fd = copy_up_lower_only(_metadata, o, &up);
	ASSERT_TRUE(is_dax(&up)) TH_LOG("the copied-up file is not DAX");

	ASSERT_EQ(0, ms_trace_start());
	map = ovl_map(o, fd, LOWER_LEN, flags);
	if (map == MAP_FAILED && flags == MSV_SYNC)
		SKIP_IF_STOCK_REFUSES("the file after copy-up");
	ASSERT_NE(MAP_FAILED, map) TH_LOG("%s of the copied-up file: %s", name, strerror(errno));
	ASSERT_EQ(0, ms_sync_count(up.stx_ino, &c)) TH_LOG("tracefs or the fsync events are missing");
	TH_LOG("%s of the copied-up file (upper inode %llu): VM_SYNC (sf) %d, %d fsync of the upper inode during mmap(2)",
	       name, (unsigned long long)up.stx_ino, ms_vm_sync(map), c.fsyncs);
	ASSERT_EQ(1, ms_vm_sync(map)) TH_LOG("no VM_SYNC (\"sf\" in smaps)");
	EXPECT_EQ(1, c.fsyncs)
		TH_LOG("mmap(2) with MAP_SYNC of a copied-up file did not fsync the upper file: the link that makes it reachable may be uncommitted, and a store into page 0 (a block copy-up wrote) syncs nothing");
	EXPECT_EQ('l', map[0]);
	munmap(map, LOWER_LEN);

	/* once: the copy-up is committed now, a second mapping syncs nothing */
	ASSERT_EQ(0, ms_trace_start());
	map = ovl_map(o, fd, LOWER_LEN, flags);
	ASSERT_NE(MAP_FAILED, map) TH_LOG("%s of the copied-up file, again: %s", name, strerror(errno));
	ASSERT_EQ(0, ms_sync_count(up.stx_ino, &c)) TH_LOG("tracefs or the fsync events are missing");
	TH_LOG("%s of the same file again: %d fsync of the upper inode during mmap(2)", name, c.fsyncs);
	EXPECT_EQ(0, c.fsyncs)
		TH_LOG("a second MAP_SYNC mmap of a copied-up file fsynced it again: every mmap pays a commit or a cache flush");
	munmap(map, LOWER_LEN);
}

TEST_F(dax_upper, copy_up_then_legacy_map_sync_fsyncs_the_upper_file)
{
	copy_up_map_sync_fsyncs(_metadata, &self->o, LEGACY_SYNC);
}

TEST_F(dax_upper, copy_up_then_validate_map_sync_fsyncs_the_upper_file)
{
	copy_up_map_sync_fsyncs(_metadata, &self->o, MSV_SYNC);
}

/*
 * volatile: the same overlay over an ext4 or xfs DAX upper, mounted
 * -o volatile.  A volatile overlay omits every sync of its upper layer
 * and must not be used after a crash (Documentation/filesystems/
 * overlayfs.rst), so it cannot keep MAP_SYNC's promise even though the
 * real file could: MAP_SHARED_VALIDATE|MAP_SYNC is refused with
 * EOPNOTSUPP, and so is legacy MAP_SHARED|MAP_SYNC (fail closed: stock
 * maps it with VM_SYNC, whose durability the mount then discards).
 * A mapping made is never touched.
 */
FIXTURE(volatile_upper) {
	struct ovl o;
};

FIXTURE_VARIANT(volatile_upper) {
	enum ms_mount mnt;
};

FIXTURE_VARIANT_ADD(volatile_upper, ext4) { .mnt = MS_EXT4_DAX };
FIXTURE_VARIANT_ADD(volatile_upper, xfs) { .mnt = MS_XFS_DAX };

FIXTURE_SETUP(volatile_upper)
{
	self->o.extra_opts = "volatile";
	ovl_setup(_metadata, &self->o, variant->mnt, variant->mnt, true);
}

FIXTURE_TEARDOWN(volatile_upper)
{
	ovl_teardown(_metadata, &self->o);
}

/*
 * mmap(2) with flags through the overlay fails with EOPNOTSUPP (why: what
 * it means if it does not).  A mapping made is never touched (a write fault through
 * a VM_SYNC ext2 mapping can hang stock).
 */
static void expect_refused(struct __test_metadata *_metadata, struct ovl *o, int flags, const char *why)
{
	const char *name = flags == MSV_SYNC ? "MAP_SHARED_VALIDATE|MAP_SYNC" : "MAP_SHARED|MAP_SYNC";
	char *map = ovl_map(o, o->fd, LEN, flags);
	int e = errno;

	if (map == MAP_FAILED)
		TH_LOG("%s through the overlay: %s", name, strerror(e));
	else
		TH_LOG("%s through the overlay: mapped, VM_SYNC (sf) %d", name, ms_vm_sync(map));
	ASSERT_EQ(MAP_FAILED, map) TH_LOG("%s", why);
	EXPECT_EQ(EOPNOTSUPP, e) TH_LOG("refused with %s, expected EOPNOTSUPP", strerror(e));
}

#define VOLATILE_WHY "a MAP_SYNC mapping of a file on a volatile overlay was made: its durability is discarded after a crash"

TEST_F(volatile_upper, validate_map_sync_is_refused_eopnotsupp)
{
	expect_refused(_metadata, &self->o, MSV_SYNC, VOLATILE_WHY);
}

TEST_F(volatile_upper, legacy_map_sync_is_refused_eopnotsupp)
{
	expect_refused(_metadata, &self->o, LEGACY_SYNC, VOLATILE_WHY);
}

/* the volatile overlay itself works: a plain MAP_SHARED mapping, no VM_SYNC */
TEST_F(volatile_upper, map_shared_maps_without_vm_sync)
{
	char *map = ovl_map(&self->o, self->o.fd, LEN, MAP_SHARED);

	ASSERT_NE(MAP_FAILED, map) TH_LOG("MAP_SHARED through a volatile overlay: %s", strerror(errno));
	EXPECT_EQ(0, ms_vm_sync(map));
	EXPECT_EQ('w', map[0]);
}

FIXTURE(no_sync_upper) {
	struct ovl o;
};

FIXTURE_VARIANT(no_sync_upper) {
	enum ms_mount lower, upper;
	bool upper_dax;
};

/* (d1, e1) upper and work dirs on the non-DAX mount of the same fs */
FIXTURE_VARIANT_ADD(no_sync_upper, ext4_nodax) { .lower = MS_EXT4_DAX, .upper = MS_EXT4_NODAX };
FIXTURE_VARIANT_ADD(no_sync_upper, xfs_nodax) { .lower = MS_XFS_DAX, .upper = MS_XFS_NODAX };
/* (d2, e2) upper and work dirs on ext2 -o dax: DAX, but no FOP_MMAP_SYNC */
FIXTURE_VARIANT_ADD(no_sync_upper, ext4_lower_ext2_dax) {
	.lower = MS_EXT4_DAX, .upper = MS_EXT2_DAX, .upper_dax = true };
FIXTURE_VARIANT_ADD(no_sync_upper, xfs_lower_ext2_dax) {
	.lower = MS_XFS_DAX, .upper = MS_EXT2_DAX, .upper_dax = true };

FIXTURE_SETUP(no_sync_upper)
{
	ovl_setup(_metadata, &self->o, variant->lower, variant->upper, variant->upper_dax);
}

FIXTURE_TEARDOWN(no_sync_upper)
{
	ovl_teardown(_metadata, &self->o);
}

/* (d) the real file cannot have synchronous faults: EOPNOTSUPP, both kernels */
TEST_F(no_sync_upper, validate_map_sync_is_refused_eopnotsupp)
{
	expect_refused(_metadata, &self->o, MSV_SYNC,
		       "a MAP_SYNC mapping of a file that cannot have synchronous faults was made");
}

/*
 * (e) Legacy MAP_SHARED|MAP_SYNC of the same file: refused with EOPNOTSUPP
 * too (fail closed).  overlayfs has FOP_MMAP_SYNC (0013), so the call
 * carries VM_SYNC, and the real file's ->mmap() (non-DAX ext4/xfs) or
 * backing_file_mmap() (ext2: no FOP_MMAP_SYNC) refuses it, as stock does
 * for a non-DAX ext4/xfs file.  Stock maps the ext2 variants with a VM_SYNC
 * ext2 ignores.
 */
TEST_F(no_sync_upper, legacy_map_sync_is_refused_eopnotsupp)
{
	expect_refused(_metadata, &self->o, LEGACY_SYNC,
		       "legacy MAP_SHARED|MAP_SYNC mapped a file that cannot have synchronous faults: a program taking the success as the guarantee loses data at a crash");
}

/*
 * (e2) A copy-up, then MAP_SYNC refused (the upper file cannot have
 * synchronous faults): the refused mmap(2) syncs nothing (the fsync for
 * the copy-up's link is only for a mapping the real file granted).
 */
TEST_F(no_sync_upper, copy_up_then_refused_map_sync_syncs_nothing)
{
	struct ms_sync_count c;
	char *map;
	struct statx up;
	int fd, e;

	fd = copy_up_lower_only(_metadata, &self->o, &up);
	ASSERT_EQ(0, ms_trace_start());
	map = ovl_map(&self->o, fd, LOWER_LEN, MSV_SYNC);
	e = errno;
	ASSERT_EQ(0, ms_sync_count(up.stx_ino, &c)) TH_LOG("tracefs or the fsync events are missing");
	TH_LOG("MAP_SHARED_VALIDATE|MAP_SYNC of the copied-up file: %s, %d fsync of the upper inode during mmap(2)",
	       map == MAP_FAILED ? strerror(e) : "mapped", c.fsyncs);
	ASSERT_EQ(MAP_FAILED, map) TH_LOG("a MAP_SYNC mapping of a file that cannot have synchronous faults was made");
	EXPECT_EQ(EOPNOTSUPP, e);
	EXPECT_EQ(0, c.fsyncs) TH_LOG("a refused MAP_SYNC mmap(2) fsynced the upper file");
}

/*
 * (f) The lower-only file through a read-only fd: no copy-up, the real file
 * is the lower one, DAX here: MAP_SHARED_VALIDATE|MAP_SYNC maps it with
 * VM_SYNC, as it maps the lower file itself.  Never written (read-only).
 */
TEST_F(no_sync_upper, lower_only_readonly_validate_map_sync_follows_lower)
{
	char path[PATH_MAX], *map;
	struct statx stx;
	int ro, e;

	snprintf(path, sizeof(path), "%s/lower_only", self->o.merged);
	ro = open(path, O_RDONLY);
	ASSERT_LE(0, ro) TH_LOG("open %s: %s", path, strerror(errno));
	map = ms_map_placed(LOWER_LEN, PROT_READ, MSV_SYNC, ro, MS_PLACE_PTE);
	e = errno;
	if (map == MAP_FAILED) {
		close(ro);
		errno = e;
		SKIP_IF_STOCK_REFUSES("the lower-only file, read-only");
	}
	TH_LOG("MAP_SHARED_VALIDATE|MAP_SYNC of the lower file: VM_SYNC (sf) %d", ms_vm_sync(map));
	EXPECT_EQ(1, ms_vm_sync(map)) TH_LOG("a MAP_SYNC mapping of a DAX lower file without VM_SYNC");
	EXPECT_EQ('l', map[0]);
	EXPECT_NE(0, real_statx(self->o.upper, "lower_only", &stx))
		TH_LOG("a read-only open and a read-only mapping copied the file up");
	munmap(map, LOWER_LEN);
	close(ro);
}

FIXTURE(nosync_lower) {
	struct ovl o;
};

FIXTURE_VARIANT(nosync_lower) {
	enum ms_mount lower, upper;
};

FIXTURE_VARIANT_ADD(nosync_lower, ext4_nodax_lower) { .lower = MS_EXT4_NODAX, .upper = MS_EXT4_DAX };
FIXTURE_VARIANT_ADD(nosync_lower, xfs_nodax_lower) { .lower = MS_XFS_NODAX, .upper = MS_XFS_DAX };
FIXTURE_VARIANT_ADD(nosync_lower, ext2_dax_lower) { .lower = MS_EXT2_DAX, .upper = MS_EXT4_DAX };

FIXTURE_SETUP(nosync_lower)
{
	ovl_setup(_metadata, &self->o, variant->lower, variant->upper, true);
}

FIXTURE_TEARDOWN(nosync_lower)
{
	ovl_teardown(_metadata, &self->o);
}

/*
 * The lower-only file opened read-only, then read-write by a second open,
 * which copies it up to the DAX upper dir.  The read-only fd still maps the
 * lower file (ovl_mmap() maps the real file chosen at open).  Returns the
 * read-only fd; *rw the read-write one.
 */
static int open_ro_then_copy_up(struct __test_metadata *_metadata, struct ovl *o, int *rw)
{
	char path[PATH_MAX];
	struct statx stx;
	int ro;

	snprintf(path, sizeof(path), "%s/lower_only", o->merged);
	ro = open(path, O_RDONLY);
	if (ro < 0) {
		TH_LOG("open %s read-only: %s", path, strerror(errno));
		return -1;
	}
	if (!real_statx(o->upper, "lower_only", &stx))
		TH_LOG("lower_only is in the upper dir before any write open");
	*rw = open(path, O_RDWR);
	if (*rw < 0) {
		TH_LOG("open %s read-write (copy-up): %s", path, strerror(errno));
		close(ro);
		return -1;
	}
	if (real_statx(o->upper, "lower_only", &stx) || !is_dax(&stx)) {
		TH_LOG("no DAX copy of lower_only in %s after the read-write open", o->upper);
		close(*rw);
		close(ro);
		return -1;
	}
	return ro;
}

/*
 * (g) Legacy MAP_SHARED|MAP_SYNC of the read-only fd, which still maps the
 * lower file (ovl_mmap() maps the real file chosen at open): the lower file
 * cannot have synchronous faults, so EOPNOTSUPP (fail closed), decided on
 * the lower file and not on the DAX upper copy.  Stock: refused over
 * non-DAX ext4/xfs, mapped over ext2 (a VM_SYNC ext2 ignores).  A mapping
 * made is never touched.
 */
TEST_F(nosync_lower, readonly_fd_from_before_copy_up_legacy_map_sync_refused)
{
	int rw, ro = open_ro_then_copy_up(_metadata, &self->o, &rw);
	char *map;
	int e;

	ASSERT_LE(0, ro);
	map = ms_map_placed(LOWER_LEN, PROT_READ, LEGACY_SYNC, ro, MS_PLACE_PTE);
	e = errno;
	if (map != MAP_FAILED) {
		TH_LOG("MAP_SHARED|MAP_SYNC of the read-only fd opened before the copy-up: mapped, VM_SYNC (sf) %d",
		       ms_vm_sync(map));
		munmap(map, LOWER_LEN);
	} else {
		TH_LOG("MAP_SHARED|MAP_SYNC of the read-only fd opened before the copy-up: %s", strerror(e));
	}
	close(rw);
	close(ro);
	ASSERT_EQ(MAP_FAILED, map) TH_LOG("legacy MAP_SHARED|MAP_SYNC mapped a lower file that cannot honour it");
	EXPECT_EQ(EOPNOTSUPP, e) TH_LOG("refused with %s, expected EOPNOTSUPP", strerror(e));
}

/*
 * (h) MAP_SHARED_VALIDATE|MAP_SYNC of the same read-only fd: the lower file
 * cannot have synchronous faults, so EOPNOTSUPP (stock: overlayfs has no
 * FOP_MMAP_SYNC, the same error).  A mapping made is never touched.
 */
TEST_F(nosync_lower, readonly_fd_from_before_copy_up_validate_map_sync_refused)
{
	int rw, ro = open_ro_then_copy_up(_metadata, &self->o, &rw);
	char *map;
	int e;

	ASSERT_LE(0, ro);
	map = ms_map_placed(LOWER_LEN, PROT_READ, MSV_SYNC, ro, MS_PLACE_PTE);
	e = errno;
	if (map != MAP_FAILED) {
		TH_LOG("MAP_SHARED_VALIDATE|MAP_SYNC of the lower file: mapped, VM_SYNC (sf) %d",
		       ms_vm_sync(map));
		munmap(map, LOWER_LEN);
	}
	close(rw);
	close(ro);
	ASSERT_EQ(MAP_FAILED, map) TH_LOG("a MAP_SYNC mapping of a lower file that cannot honour it was made");
	EXPECT_EQ(EOPNOTSUPP, e) TH_LOG("refused with %s, expected EOPNOTSUPP", strerror(e));
}

TEST_HARNESS_MAIN
