// SPDX-License-Identifier: GPL-2.0
/*
 * virtio_pmem: MAP_SYNC on a DAX file system on a virtio-pmem device
 * (QEMU's virtio-pmem-pci, qemu/mapsync-run --virtio-pmem).
 *
 * A virtio-pmem device makes its writes durable only when the guest asks
 * the host to flush (virtio_pmem's async_pmem_flush, a request on the
 * virtqueue): a CPU cache flush is not enough.  Its region is
 * ND_REGION_ASYNC, so the pmem driver does not call set_dax_synchronous()
 * (drivers/nvdimm/pmem.c: "if (is_nvdimm_sync(nd_region))"), and ext4's and
 * xfs's ->mmap refuse a VM_SYNC mapping on it: daxdev_mapping_supported()
 * (include/linux/dax.h) returns dax_synchronous(), false, and the file
 * system returns EOPNOTSUPP.  MAP_SHARED_VALIDATE|MAP_SYNC must therefore
 * fail on a DAX file there even though the file system supports MAP_SYNC;
 * an ordinary MAP_SHARED mapping works and msync() makes it durable.
 *
 * pmem-tests/run makes an ext4 on the first virtio-pmem device and an xfs on
 * the second, -o dax=always: MAPSYNC_VIRTIO_EXT4, MAPSYNC_VIRTIO_XFS.
 *
 * What legacy MAP_SHARED|MAP_SYNC (no _VALIDATE) gives is not asserted: the
 * case only checks that it is either refused with EOPNOTSUPP or gives a
 * mapping without VM_SYNC, and prints which ("# legacy ...").
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PG 4096UL
#define LEN (4 * PG)

FIXTURE(vp) {
	int fd;
	const char *dir;
};

FIXTURE_VARIANT(vp) {
	const char *env;
};

FIXTURE_VARIANT_ADD(vp, ext4) { .env = "MAPSYNC_VIRTIO_EXT4" };
FIXTURE_VARIANT_ADD(vp, xfs) { .env = "MAPSYNC_VIRTIO_XFS" };

FIXTURE_SETUP(vp)
{
	self->fd = -1;
	self->dir = getenv(variant->env);
	/* a missing device fails (pmem-tests/run stops earlier without one) */
	ASSERT_TRUE(self->dir && *self->dir)
		TH_LOG("%s is not set: boot with two --virtio-pmem devices and run under pmem-tests/run",
		       variant->env);
	self->fd = ms_create_file(self->dir, "virtio_pmem", LEN);
	ASSERT_LE(0, self->fd) TH_LOG("create in %s: %s", self->dir, strerror(errno));
}

FIXTURE_TEARDOWN(vp)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(vp, file_system_is_on_a_virtio_pmem_device)
{
	char link[PATH_MAX], path[64];
	struct stat st;

	ASSERT_EQ(0, fstat(self->fd, &st));
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	ASSERT_NE(NULL, realpath(path, link)) TH_LOG("%s: %s", path, strerror(errno));
	/* .../virtioN/ndbusM/regionK/namespaceK.0/block/pmemX */
	EXPECT_NE(NULL, strstr(link, "/virtio")) TH_LOG("%s is on %s, not on a virtio-pmem device", self->dir, link);
	EXPECT_NE(NULL, strstr(link, "/ndbus")) TH_LOG("%s is on %s, not on an nvdimm bus", self->dir, link);
}

TEST_F(vp, file_is_dax)
{
	struct statx stx;

	ASSERT_EQ(0, statx(self->fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx)) TH_LOG("statx: %s", strerror(errno));
	ASSERT_TRUE((stx.stx_attributes_mask & STATX_ATTR_DAX) != 0) TH_LOG("statx reports no DAX attribute at all");
	EXPECT_TRUE((stx.stx_attributes & STATX_ATTR_DAX) != 0)
		TH_LOG("a file of %s (-o dax=always) is not DAX: the device gave the file system no DAX", self->dir);
}

TEST_F(vp, map_shared_validate_sync_fails_with_eopnotsupp)
{
	char *map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, self->fd, 0);
	int err = errno;

	if (map != MAP_FAILED) {
		int vs = ms_vm_sync(map);

		munmap(map, LEN);
		ASSERT_EQ(MAP_FAILED, map)
			TH_LOG("MAP_SHARED_VALIDATE|MAP_SYNC of a DAX file on virtio-pmem (not synchronous) succeeded, VM_SYNC %d",
			       vs);
	}
	EXPECT_EQ(EOPNOTSUPP, err) TH_LOG("expected EOPNOTSUPP, saw %s", strerror(err));
}

TEST_F(vp, map_shared_store_msync_reads_back_with_pread)
{
	char buf[LEN], want[LEN];
	char *map;
	size_t i;

	/* a pattern of this run: a previous run's file cannot pass */
	srand(getpid() ^ time(NULL));
	for (i = 0; i < LEN; i++)
		want[i] = (char)(rand() | 1);
	map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, map) TH_LOG("MAP_SHARED mmap of a DAX file on virtio-pmem: %s", strerror(errno));
	EXPECT_EQ(0, ms_vm_sync(map)) TH_LOG("a MAP_SHARED mapping without MAP_SYNC has VM_SYNC");
	memcpy(map, want, LEN);
	EXPECT_EQ(0, msync(map, LEN, MS_SYNC)) TH_LOG("msync: %s", strerror(errno));
	munmap(map, LEN);
	ASSERT_EQ((ssize_t)LEN, pread(self->fd, buf, LEN, 0)) TH_LOG("pread: %s", strerror(errno));
	for (i = 0; i < LEN && buf[i] == want[i]; i++)
		;
	EXPECT_EQ(LEN, i) TH_LOG("byte %zu reads back %#x, the store wrote %#x", i, buf[i], want[i]);
}

TEST_F(vp, legacy_map_shared_sync_refused_or_without_vm_sync)
{
	char *map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_SYNC, self->fd, 0);
	int err = errno, vs;

	if (map == MAP_FAILED) {
		ksft_print_msg("legacy MAP_SHARED|MAP_SYNC on %s (virtio-pmem, %s kernel): failed, %s\n",
			       self->dir, getenv("MAPSYNC_KERNEL") ?: "?", strerror(err));
		EXPECT_EQ(EOPNOTSUPP, err) TH_LOG("refused, but with %s, not EOPNOTSUPP", strerror(err));
		return;
	}
	vs = ms_vm_sync(map);
	ksft_print_msg("legacy MAP_SHARED|MAP_SYNC on %s (virtio-pmem, %s kernel): succeeded, VM_SYNC %d\n",
		       self->dir, getenv("MAPSYNC_KERNEL") ?: "?", vs);
	munmap(map, LEN);
	/* VM_SYNC on a device that is not synchronous would promise what it cannot keep */
	EXPECT_EQ(0, vs) TH_LOG("the mapping has VM_SYNC on a device whose DAX is not synchronous");
}

TEST_HARNESS_MAIN
