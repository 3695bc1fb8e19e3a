// SPDX-License-Identifier: GPL-2.0
/*
 * pmem_clients: what programs that are not ours conclude from the kernel.
 *
 *  - PMDK libpmem2 maps the file and reports its store granularity:
 *    CACHE_LINE on fsdax ext4/xfs and device-dax (flush CPU caches, no
 *    msync: it relies on MAP_SYNC), BYTE when the platform declares its
 *    caches persistent (QEMU nvdimm-persistence=cpu: MAPSYNC_PERSISTENCE=cpu),
 *    PAGE without DAX;
 *  - PMDK libpmem's pmem_map_file() says is_pmem=1 on DAX, 0 without;
 *  - xfs_io -c "mmap -S" (MAP_SHARED_VALIDATE|MAP_SYNC) succeeds on DAX, silently,
 *    and its "mwrite" through that mapping reaches the file; elsewhere it says
 *    "Operation not supported" and the file is not written.
 */
#include <fcntl.h>
#include <libpmem.h>
#include <libpmem2.h>
#include <stdio.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define LEN (2UL << 20)

FIXTURE(client) {
	int fd;
	char path[512];
};

FIXTURE_VARIANT(client) {
	enum ms_mount mnt;	/* or -1: device-dax */
	bool dax;
};

FIXTURE_VARIANT_ADD(client, ext4_dax) { .mnt = MS_EXT4_DAX, .dax = true };
FIXTURE_VARIANT_ADD(client, ext4_nodax) { .mnt = MS_EXT4_NODAX, .dax = false };
FIXTURE_VARIANT_ADD(client, xfs_dax) { .mnt = MS_XFS_DAX, .dax = true };
FIXTURE_VARIANT_ADD(client, xfs_nodax) { .mnt = MS_XFS_NODAX, .dax = false };
FIXTURE_VARIANT_ADD(client, devdax) { .mnt = -1, .dax = true };

FIXTURE_SETUP(client)
{
	const char *dir;

	self->fd = -1;
	if ((int)variant->mnt < 0) {
		dir = getenv("MAPSYNC_DEVDAX");
		if (!dir || !*dir)
			SKIP(return, "MAPSYNC_DEVDAX is not set: no device-dax namespace");
		snprintf(self->path, sizeof(self->path), "%s", dir);
		self->fd = open(self->path, O_RDWR);
	} else {
		dir = ms_mount_dir(variant->mnt);
		if (!dir)
			SKIP(return, "%s is not set", ms_mount_env(variant->mnt));
		snprintf(self->path, sizeof(self->path), "%s/client", dir);
		self->fd = ms_create_file(dir, "client", LEN);
	}
	ASSERT_LE(0, self->fd) TH_LOG("%s: %s", self->path, strerror(errno));
}

FIXTURE_TEARDOWN(client)
{
	if (self->fd >= 0)
		close(self->fd);
}

static const char *gran_name(enum pmem2_granularity g)
{
	return g == PMEM2_GRANULARITY_BYTE ? "BYTE" :
	       g == PMEM2_GRANULARITY_CACHE_LINE ? "CACHE_LINE" : "PAGE";
}

TEST_F(client, libpmem2_store_granularity)
{
	const char *pers = getenv("MAPSYNC_PERSISTENCE");
	enum pmem2_granularity want, got;
	struct pmem2_config *cfg;
	struct pmem2_source *src;
	struct pmem2_map *map = NULL;
	int ret;

	if (!variant->dax)
		want = PMEM2_GRANULARITY_PAGE;
	else if (pers && !strcmp(pers, "cpu"))
		want = PMEM2_GRANULARITY_BYTE;
	else
		want = PMEM2_GRANULARITY_CACHE_LINE;
	ASSERT_EQ(0, pmem2_config_new(&cfg));
	ASSERT_EQ(0, pmem2_source_from_fd(&src, self->fd));
	ASSERT_EQ(0, pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE));
	ret = pmem2_map_new(&map, cfg, src);
	ASSERT_EQ(0, ret) TH_LOG("pmem2_map_new: %s", pmem2_errormsg());
	got = pmem2_map_get_store_granularity(map);
	EXPECT_EQ(want, got) TH_LOG("%s: libpmem2 says %s, expected %s", self->path,
				    gran_name(got), gran_name(want));
	pmem2_map_delete(&map);
	pmem2_source_delete(&src);
	pmem2_config_delete(&cfg);
}

TEST_F(client, libpmem_is_pmem)
{
	size_t mapped;
	int is_pmem = -1;
	void *p;

	/* len 0, flags 0: map the whole file or device-dax node as it is */
	ASSERT_EQ(NULL, getenv("PMEM_IS_PMEM_FORCE"));
	p = pmem_map_file(self->path, 0, 0, 0, &mapped, &is_pmem);
	ASSERT_NE(NULL, p) TH_LOG("pmem_map_file: %s", pmem_errormsg());
	EXPECT_EQ(variant->dax, is_pmem) TH_LOG("%s: is_pmem=%d", self->path, is_pmem);
	pmem_unmap(p, mapped);
}

/* the first page of the file or device through our own MAP_SHARED mapping: fill it, or
 * count its bytes that are not `val` */
static int first_page(int fd, int fill, int val)
{
	char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int i, bad = 0;

	if (p == MAP_FAILED)
		return -1;
	for (i = 0; i < 4096; i++) {
		if (fill)
			p[i] = val;
		else
			bad += p[i] != (char)val;
	}
	munmap(p, LEN);
	return bad;
}

TEST_F(client, xfs_io_mmap_sync)
{
	char cmd[1024], out[1024] = "";
	size_t n;
	FILE *f;
	int status, bad;

	/* DAX: the MAP_SYNC mapping is made and a store through it lands in the file */
	ASSERT_EQ(0, first_page(self->fd, 1, 0)) TH_LOG("%s: mmap: %s", self->path, strerror(errno));
	snprintf(cmd, sizeof(cmd), "xfs_io -c 'mmap -S -rw 0 2m' -c 'mwrite -S 0x5a 0 4096' '%s' 2>&1",
		 self->path);
	f = popen(cmd, "r");
	ASSERT_NE(NULL, f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	status = pclose(f);
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("xfs_io did not exit: status %#x", status);
	bad = first_page(self->fd, 0, 0x5a);
	if (variant->dax) {
		EXPECT_STREQ("", out) TH_LOG("xfs_io mmap -S on DAX said something: \"%s\"", out);
		EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("xfs_io mmap -S on DAX: exit %d", WEXITSTATUS(status));
		EXPECT_EQ(0, bad) TH_LOG("%d of 4096 bytes stored through xfs_io's MAP_SYNC mapping are not in %s",
					 bad, self->path);
	} else {
		EXPECT_NE(NULL, strstr(out, "Operation not supported"))
			TH_LOG("xfs_io without DAX: expected \"Operation not supported\", saw \"%s\"", out);
		EXPECT_EQ(4096, bad) TH_LOG("without DAX, %d bytes of the page changed: xfs_io mapped it anyway",
					    4096 - bad);
	}
}

TEST_HARNESS_MAIN
