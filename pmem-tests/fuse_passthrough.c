// SPDX-License-Identifier: GPL-2.0
/*
 * fuse_passthrough: MAP_SYNC through FUSE passthrough (issue #39, item 3).
 *
 * A FUSE file opened with FOPEN_PASSTHROUGH maps its backing file:
 * fuse_passthrough_mmap() hands the VMA to backing_file_mmap(), which makes
 * the backing file the VMA's file and calls its ->mmap().  Over an ext4 or
 * xfs DAX file, legacy MAP_SHARED|MAP_SYNC gets synchronous faults on stock
 * (do_mmap() sets VM_SYNC from the raw flags): the durability users have
 * today, which the series must keep.  A FUSE file the server serves itself
 * (page cache, written back through the server) cannot have them.
 *
 * The test forks its own FUSE server (below: /dev/fuse read and written
 * directly, no libfuse), mounts it with mount(2) "fuse" and fd=, and the
 * server answers LOOKUP/GETATTR/OPEN for three files in its root:
 *
 *   dax      FOPEN_PASSTHROUGH, backing id (FUSE_DEV_IOC_BACKING_OPEN) of
 *            <DAX mount>/fuse_passthrough/dax (4 pages, page 0 written,
 *            pages 1-3 holes)
 *   nodax    FOPEN_PASSTHROUGH onto the same file on the non-DAX mount
 *   served   no passthrough: 4 pages of 's' the server reads itself
 *
 * Variants: ext4 and xfs (the backing files' file systems).
 *
 * Stock 6.12: FUSE files have no FOP_MMAP_SYNC, so MAP_SHARED_VALIDATE|
 * MAP_SYNC is EOPNOTSUPP for all three (the passthrough dax case skips
 * there, a missing feature); legacy MAP_SHARED|MAP_SYNC of "served" maps
 * with a VM_SYNC that nothing honours (listed in expected-stock-failures).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mapsync.h"
#include "ms_expect.h"

#define PG 4096UL
#define NPG 4
#define LEN (NPG * PG)
#define MSV_SYNC (MAP_SHARED_VALIDATE | MAP_SYNC)
#define LEGACY_SYNC (MAP_SHARED | MAP_SYNC)

/*
 * The FUSE protocol as of 7.40 (include/uapi/linux/fuse.h of 6.12), only
 * what this server uses; our own copies, so that the build does not depend
 * on the host's headers (passthrough came with 7.40).
 */
enum {
	OP_LOOKUP = 1, OP_FORGET = 2, OP_GETATTR = 3, OP_OPEN = 14, OP_READ = 15,
	OP_WRITE = 16, OP_RELEASE = 18, OP_FLUSH = 25, OP_INIT = 26,
	OP_DESTROY = 38, OP_BATCH_FORGET = 42,
};
#define K_INIT_EXT (1U << 30)
#define K_PASSTHROUGH_HI (1U << 5)	/* FUSE_PASSTHROUGH: bit 37, bit 5 of flags2 */
#define K_FOPEN_PASSTHROUGH (1U << 7)
#define K_ROOT_ID 1ULL

struct k_in_header {
	uint32_t len, opcode;
	uint64_t unique, nodeid;
	uint32_t uid, gid, pid;
	uint16_t total_extlen, padding;
};

struct k_out_header {
	uint32_t len;
	int32_t error;
	uint64_t unique;
};

struct k_init_in {
	uint32_t major, minor, max_readahead, flags, flags2, unused[11];
};

struct k_init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2, max_stack_depth, unused[6];
};

struct k_attr {
	uint64_t ino, size, blocks, atime, mtime, ctime;
	uint32_t atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev, blksize, flags;
};

struct k_entry_out {
	uint64_t nodeid, generation, entry_valid, attr_valid;
	uint32_t entry_valid_nsec, attr_valid_nsec;
	struct k_attr attr;
};

struct k_attr_out {
	uint64_t attr_valid;
	uint32_t attr_valid_nsec, dummy;
	struct k_attr attr;
};

struct k_open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id;
};

struct k_read_in {
	uint64_t fh, offset;
	uint32_t size, read_flags;
	uint64_t lock_owner;
	uint32_t flags, padding;
};

struct k_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};

#define K_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct k_backing_map)

/* the server's files: nodeid 2.. */
enum { N_DAX = 2, N_NODAX, N_SERVED, N_END };
static const char *const node_name[N_END] = {
	[N_DAX] = "dax", [N_NODAX] = "nodax", [N_SERVED] = "served",
};

#define MAX_WRITE (64 * 1024)
#define SRV_BUF (MAX_WRITE + 4096)

static void srv_reply(int fd, uint64_t unique, int err, const void *arg, size_t len)
{
	static char buf[sizeof(struct k_out_header) + LEN + 256];
	struct k_out_header *h = (void *)buf;

	if (len > sizeof(buf) - sizeof(*h))
		len = 0, err = -EIO;
	h->len = sizeof(*h) + len;
	h->error = err;
	h->unique = unique;
	if (len)
		memcpy(buf + sizeof(*h), arg, len);
	if (write(fd, buf, h->len) != (ssize_t)h->len)
		_exit(3);
}

static void srv_attr(uint64_t node, const char *const backing[], struct k_attr *a)
{
	struct stat st;

	memset(a, 0, sizeof(*a));
	a->ino = node;
	a->blksize = PG;
	if (node == K_ROOT_ID) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
		return;
	}
	a->mode = S_IFREG | 0644;
	a->nlink = 1;
	a->size = LEN;
	if (backing[node] && !stat(backing[node], &st)) {
		a->size = st.st_size;
		a->blocks = st.st_blocks;
	}
}

/*
 * The server (a child process): answers requests until the mount goes away
 * (read() fails with ENODEV).  backing[node]: the backing file of a
 * passthrough node, NULL for "served".
 */
static void fuse_server(int fd, const char *const backing[])
{
	static char buf[SRV_BUF];
	int backing_id[N_END] = { 0 };
	uint64_t node;

	for (;;) {
		struct k_in_header *in = (void *)buf;
		void *arg = buf + sizeof(*in);
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && (errno == EINTR || errno == ENOENT))
			continue;	/* an interrupted request */
		if (n < (ssize_t)sizeof(*in))
			_exit(n < 0 && errno == ENODEV ? 0 : 2);
		node = in->nodeid;

		switch (in->opcode) {
		case OP_INIT: {
			struct k_init_in *ii = arg;
			struct k_init_out io = {
				.major = 7, .minor = 40, .max_readahead = ii->max_readahead,
				.max_write = MAX_WRITE, .time_gran = 1, .max_stack_depth = 1,
			};

			io.flags = ii->flags & K_INIT_EXT;
			io.flags2 = (ii->flags & K_INIT_EXT) ? ii->flags2 & K_PASSTHROUGH_HI : 0;
			srv_reply(fd, in->unique, 0, &io, sizeof(io));
			break;
		}
		case OP_LOOKUP: {
			struct k_entry_out e = { .entry_valid = 3600, .attr_valid = 3600 };
			uint64_t i;

			for (i = N_DAX; i < N_END; i++)
				if (node == K_ROOT_ID && !strcmp(arg, node_name[i]))
					break;
			if (i == N_END) {
				srv_reply(fd, in->unique, -ENOENT, NULL, 0);
				break;
			}
			e.nodeid = i;
			srv_attr(i, backing, &e.attr);
			srv_reply(fd, in->unique, 0, &e, sizeof(e));
			break;
		}
		case OP_GETATTR: {
			struct k_attr_out a = { .attr_valid = 0 };

			if (node != K_ROOT_ID && (node < N_DAX || node >= N_END)) {
				srv_reply(fd, in->unique, -ENOENT, NULL, 0);
				break;
			}
			srv_attr(node, backing, &a.attr);
			srv_reply(fd, in->unique, 0, &a, sizeof(a));
			break;
		}
		case OP_OPEN: {
			struct k_open_out o = { .fh = node };

			if (node < N_DAX || node >= N_END) {
				srv_reply(fd, in->unique, -EISDIR, NULL, 0);
				break;
			}
			if (backing[node]) {
				if (!backing_id[node]) {
					struct k_backing_map m = { .fd = open(backing[node], O_RDWR) };
					int id;

					if (m.fd < 0) {
						srv_reply(fd, in->unique, -errno, NULL, 0);
						break;
					}
					id = ioctl(fd, K_DEV_IOC_BACKING_OPEN, &m);
					close(m.fd);
					if (id <= 0) {
						srv_reply(fd, in->unique, id < 0 ? -errno : -EIO, NULL, 0);
						break;
					}
					backing_id[node] = id;
				}
				o.open_flags = K_FOPEN_PASSTHROUGH;
				o.backing_id = backing_id[node];
			}
			srv_reply(fd, in->unique, 0, &o, sizeof(o));
			break;
		}
		case OP_READ: {
			struct k_read_in *r = arg;
			static char data[LEN];
			size_t len = r->size > LEN ? LEN : r->size;

			if (r->offset >= LEN)
				len = 0;
			else if (r->offset + len > LEN)
				len = LEN - r->offset;
			memset(data, 's', len);
			srv_reply(fd, in->unique, 0, data, len);
			break;
		}
		case OP_RELEASE:
		case OP_FLUSH:
			srv_reply(fd, in->unique, 0, NULL, 0);
			break;
		case OP_FORGET:
		case OP_BATCH_FORGET:
			break;	/* no reply */
		case OP_DESTROY:
			srv_reply(fd, in->unique, 0, NULL, 0);
			_exit(0);
		default:
			srv_reply(fd, in->unique, -ENOSYS, NULL, 0);
		}
	}
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path) && errno != ENOENT ? -1 : 0;
}

FIXTURE(fuse) {
	char base_dax[1024], base_nodax[1024], mnt[1100];
	char backing_dax[1100], backing_nodax[1100];
	unsigned long dax_ino;	/* the DAX backing file's inode */
	pid_t server;
	bool mounted;
	int fd;
	char *map;
};

FIXTURE_VARIANT(fuse) {
	enum ms_mount dax, nodax;
};

FIXTURE_VARIANT_ADD(fuse, ext4) { .dax = MS_EXT4_DAX, .nodax = MS_EXT4_NODAX };
FIXTURE_VARIANT_ADD(fuse, xfs) { .dax = MS_XFS_DAX, .nodax = MS_XFS_NODAX };

/* a backing file: LEN bytes, page 0 'b', pages 1-3 holes, synced */
static int make_backing(const char *dir, const char *path, unsigned long *ino)
{
	char buf[PG];
	struct stat st;
	int fd;

	if (mkdir(dir, 0755) && errno != EEXIST)
		return -1;
	fd = ms_create_file(dir, strrchr(path, '/') + 1, LEN);
	if (fd < 0)
		return -1;
	memset(buf, 'b', sizeof(buf));
	if (pwrite(fd, buf, PG, 0) != (ssize_t)PG || fsync(fd) || fstat(fd, &st)) {
		close(fd);
		return -1;
	}
	if (ino)
		*ino = st.st_ino;
	close(fd);
	return 0;
}

FIXTURE_SETUP(fuse)
{
	const char *dd = ms_mount_dir(variant->dax), *nd = ms_mount_dir(variant->nodax);
	const char *backing[N_END] = { NULL };
	char opts[256];
	int dev;

	self->fd = -1;
	self->map = MAP_FAILED;
	ASSERT_NE(NULL, dd) TH_LOG("%s is not set: run under pmem-tests/run", ms_mount_env(variant->dax));
	ASSERT_NE(NULL, nd) TH_LOG("%s is not set: run under pmem-tests/run", ms_mount_env(variant->nodax));
	snprintf(self->base_dax, sizeof(self->base_dax), "%s/fuse_passthrough", dd);
	snprintf(self->base_nodax, sizeof(self->base_nodax), "%s/fuse_passthrough", nd);
	snprintf(self->mnt, sizeof(self->mnt), "%s/mnt", self->base_dax);
	snprintf(self->backing_dax, sizeof(self->backing_dax), "%s/dax", self->base_dax);
	snprintf(self->backing_nodax, sizeof(self->backing_nodax), "%s/nodax", self->base_nodax);

	/* a mount an earlier failed case left (no teardown after a failed ASSERT) */
	umount2(self->mnt, MNT_DETACH);
	ASSERT_EQ(0, nftw(self->base_dax, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) && errno != ENOENT ? -1 : 0);
	ASSERT_EQ(0, nftw(self->base_nodax, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) && errno != ENOENT ? -1 : 0);
	ASSERT_EQ(0, make_backing(self->base_dax, self->backing_dax, &self->dax_ino))
		TH_LOG("backing file %s: %s", self->backing_dax, strerror(errno));
	ASSERT_EQ(0, make_backing(self->base_nodax, self->backing_nodax, NULL))
		TH_LOG("backing file %s: %s", self->backing_nodax, strerror(errno));
	ASSERT_EQ(0, mkdir(self->mnt, 0755));

	dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, dev) TH_LOG("open /dev/fuse: %s (CONFIG_FUSE_FS?)", strerror(errno));
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", dev);
	if (mount("mapsync-fuse", self->mnt, "fuse", MS_NOSUID | MS_NODEV, opts)) {
		TH_LOG("mount -t fuse -o %s %s: %s", opts, self->mnt, strerror(errno));
		close(dev);
		ASSERT_TRUE(false);
	}
	self->mounted = true;
	backing[N_DAX] = self->backing_dax;
	backing[N_NODAX] = self->backing_nodax;
	self->server = fork();
	ASSERT_LE(0, self->server);
	if (!self->server) {
		fuse_server(dev, backing);
		_exit(0);
	}
	close(dev);
}

FIXTURE_TEARDOWN(fuse)
{
	int status;

	if (self->map != MAP_FAILED)
		munmap(self->map, LEN);
	if (self->fd >= 0)
		close(self->fd);
	if (self->mounted && umount2(self->mnt, MNT_DETACH))
		TH_LOG("umount %s: %s", self->mnt, strerror(errno));
	if (self->server > 0 && ms_wait_child(self->server, 5, &status)) {
		kill(self->server, SIGKILL);
		waitpid(self->server, &status, 0);
	}
}

/* open node through the FUSE mount; the fd is closed by the teardown */
static int fuse_open(struct __test_metadata *_metadata, FIXTURE_DATA(fuse) *self, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", self->mnt, name);
	self->fd = open(path, O_RDWR);
	if (self->fd < 0)
		TH_LOG("open %s O_RDWR through the FUSE mount: %s", path, strerror(errno));
	return self->fd;
}

static const char *flags_name(int flags)
{
	return flags == MSV_SYNC ? "MAP_SHARED_VALIDATE|MAP_SYNC" :
	       flags == LEGACY_SYNC ? "MAP_SHARED|MAP_SYNC" : "MAP_SHARED";
}

/*
 * flags on the passthrough file over a DAX backing file: mapped with VM_SYNC,
 * and a store into hole page 1 is one synchronous fault of the backing inode;
 * the byte reads back through FUSE and in the backing file.
 */
static void dax_passthrough_is_synchronous(struct __test_metadata *_metadata,
					   FIXTURE_DATA(fuse) *self, int flags)
{
	char c = 0;
	int bfd, sf;

	ASSERT_LE(0, fuse_open(_metadata, self, "dax"));
	self->map = ms_map_placed(LEN, PROT_READ | PROT_WRITE, flags, self->fd, MS_PLACE_PTE);
	if (self->map == MAP_FAILED) {
		int e = errno;

		TH_LOG("%s of a passthrough file over a DAX file: %s", flags_name(flags), strerror(e));
		if (flags == MSV_SYNC && e == EOPNOTSUPP && getenv("MAPSYNC_KERNEL") &&
		    !strcmp(getenv("MAPSYNC_KERNEL"), "stock"))
			SKIP(return, "MAP_SHARED_VALIDATE|MAP_SYNC of a FUSE file (FOP_MMAP_SYNC on FUSE) is not in the stock kernel (EOPNOTSUPP)");
		ASSERT_TRUE(false);
	}
	sf = ms_vm_sync(self->map);
	TH_LOG("%s of a passthrough file over a DAX file: mapped, VM_SYNC (sf) %d", flags_name(flags), sf);
	ASSERT_EQ(1, sf) TH_LOG("no VM_SYNC (\"sf\" in smaps): the faults of this mapping are not synchronous");
	EXPECT_EQ('b', self->map[0]);

	ASSERT_EQ(0, ms_trace_start());
	self->map[PG] = 'x';
	expect_one_sync_fault(_metadata, self->dax_ino, "store into hole page 1 of the backing file");
	ASSERT_EQ(1, pread(self->fd, &c, 1, PG)) TH_LOG("pread through FUSE: %s", strerror(errno));
	EXPECT_EQ('x', c) TH_LOG("page 1 through FUSE (pread): %#x", c);
	bfd = open(self->backing_dax, O_RDONLY);
	ASSERT_LE(0, bfd);
	c = 0;
	EXPECT_EQ(1, pread(bfd, &c, 1, PG));
	EXPECT_EQ('x', c) TH_LOG("page 1 of the backing file (pread): %#x", c);
	close(bfd);
}

/* flags on node: refused with EOPNOTSUPP; a mapping made is never touched */
static void refused(struct __test_metadata *_metadata, FIXTURE_DATA(fuse) *self,
		    const char *node, int flags, const char *why)
{
	int e;

	ASSERT_LE(0, fuse_open(_metadata, self, node));
	self->map = ms_map_placed(LEN, PROT_READ | PROT_WRITE, flags, self->fd, MS_PLACE_PTE);
	e = errno;
	if (self->map == MAP_FAILED)
		TH_LOG("%s of FUSE file \"%s\": %s", flags_name(flags), node, strerror(e));
	else
		TH_LOG("%s of FUSE file \"%s\": mapped, VM_SYNC (sf) %d", flags_name(flags), node,
		       ms_vm_sync(self->map));
	ASSERT_EQ(MAP_FAILED, self->map) TH_LOG("a MAP_SYNC mapping was made although %s", why);
	EXPECT_EQ(EOPNOTSUPP, e) TH_LOG("refused with %s, expected EOPNOTSUPP", strerror(e));
}

/* (a) legacy MAP_SHARED|MAP_SYNC on passthrough over DAX: what stock gives */
TEST_F(fuse, passthrough_dax_legacy_map_sync_is_synchronous)
{
	dax_passthrough_is_synchronous(_metadata, self, LEGACY_SYNC);
}

/* (b) MAP_SHARED_VALIDATE|MAP_SYNC on passthrough over DAX (skips on stock) */
TEST_F(fuse, passthrough_dax_validate_map_sync_is_synchronous)
{
	dax_passthrough_is_synchronous(_metadata, self, MSV_SYNC);
}

/* (c) a plain MAP_SHARED of the same file: no VM_SYNC, the data of the backing file */
TEST_F(fuse, passthrough_dax_map_shared_has_no_vm_sync)
{
	ASSERT_LE(0, fuse_open(_metadata, self, "dax"));
	self->map = ms_map_placed(LEN, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, MS_PLACE_PTE);
	ASSERT_NE(MAP_FAILED, self->map) TH_LOG("MAP_SHARED: %s", strerror(errno));
	EXPECT_EQ(0, ms_vm_sync(self->map));
	EXPECT_EQ('b', self->map[0]);
}

/* (d) passthrough over a non-DAX file: the backing file system refuses, both calls */
TEST_F(fuse, passthrough_nodax_validate_map_sync_refused)
{
	refused(_metadata, self, "nodax", MSV_SYNC, "the backing file is not DAX");
}

TEST_F(fuse, passthrough_nodax_legacy_map_sync_refused)
{
	refused(_metadata, self, "nodax", LEGACY_SYNC, "the backing file is not DAX");
}

/*
 * (e) a file the server serves (no passthrough): page cache written back
 * through the server, no synchronous fault possible.  Both calls fail with
 * EOPNOTSUPP; stock maps the legacy one with an "sf" nothing honours.
 */
TEST_F(fuse, served_validate_map_sync_refused)
{
	refused(_metadata, self, "served", MSV_SYNC, "the file is not passthrough");
}

TEST_F(fuse, served_legacy_map_sync_refused)
{
	refused(_metadata, self, "served", LEGACY_SYNC, "the file is not passthrough");
}

/* (f) the served file itself works: MAP_SHARED maps it, the server's bytes */
TEST_F(fuse, served_map_shared_reads_the_servers_data)
{
	ASSERT_LE(0, fuse_open(_metadata, self, "served"));
	self->map = ms_map_placed(LEN, PROT_READ, MAP_SHARED, self->fd, MS_PLACE_PTE);
	ASSERT_NE(MAP_FAILED, self->map) TH_LOG("MAP_SHARED of the served file: %s", strerror(errno));
	EXPECT_EQ(0, ms_vm_sync(self->map));
	EXPECT_EQ('s', self->map[0]);
	EXPECT_EQ('s', self->map[LEN - 1]);
}

TEST_HARNESS_MAIN
