// SPDX-License-Identifier: GPL-2.0
/*
 * devdax_map: device-dax (/dev/daxX.Y, MAPSYNC_DEVDAX from pmem-tests/run)
 * beyond accepting a MAP_SYNC mapping: data stored through a
 * MAP_SHARED_VALIDATE|MAP_SYNC mapping is there when the device is mapped
 * again, and the two mappings device-dax refuses are refused.
 *
 * device-dax's ->mmap is dax_mmap() (drivers/dax/device.c:287-307, the same
 * lines in the patched and the stock 6.12 tree), which refuses what
 * check_vma() (drivers/dax/device.c:17-51) refuses, all with -EINVAL:
 *  - a private mapping: "(vma->vm_flags & VM_MAYSHARE) != VM_MAYSHARE"
 *    (device.c:26-32, "attempted private mapping");
 *  - a mapping whose start or end is not a multiple of the device's
 *    alignment, dev_dax->align (device.c:34-41, "unaligned vma").
 *    dax_get_unmapped_area() (device.c:310-340) places a mapping of at least
 *    one alignment unit on an aligned address, so a length that is not a
 *    multiple of the alignment gives an unaligned end.
 * The alignment is the device's sysfs attribute align
 * (/sys/bus/dax/devices/daxX.Y/align, drivers/dax/bus.c align_show()).
 */
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define MSV_SYNC (MAP_SHARED_VALIDATE | MAP_SYNC)

/* a number from the sysfs attribute attr of device-dax dev; 0 when unreadable */
static unsigned long devdax_attr(const char *dev, const char *attr)
{
	char path[256], copy[128];
	unsigned long v = 0;
	FILE *f;

	snprintf(copy, sizeof(copy), "%s", dev);
	snprintf(path, sizeof(path), "/sys/bus/dax/devices/%s/%s", basename(copy), attr);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%lu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

FIXTURE(dd) {
	const char *dev;
	int fd;
	unsigned long align, size;
};

FIXTURE_SETUP(dd)
{
	self->fd = -1;
	self->dev = getenv("MAPSYNC_DEVDAX");
	/* a missing device fails (pmem-tests/run stops earlier without one) */
	ASSERT_TRUE(self->dev && *self->dev)
		TH_LOG("MAPSYNC_DEVDAX is not set: boot with --pmem IMAGE,size=258M,mode=devdax and run under pmem-tests/run");
	self->align = devdax_attr(self->dev, "align");
	self->size = devdax_attr(self->dev, "size");
	ASSERT_NE(0UL, self->align) TH_LOG("no /sys/bus/dax/devices/<%s>/align", self->dev);
	ASSERT_LE(2 * self->align, self->size)
		TH_LOG("%s: %lu bytes, less than two alignment units of %lu", self->dev, self->size, self->align);
	self->fd = open(self->dev, O_RDWR);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", self->dev, strerror(errno));
}

FIXTURE_TEARDOWN(dd)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(dd, map_sync_store_then_new_mapping_reads_it_back)
{
	size_t len = 2 * self->align, i, words = len / sizeof(unsigned long);
	unsigned long seed = (unsigned long)getpid() << 32 ^ time(NULL), *map;
	int fd;

	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MSV_SYNC, self->fd, 0);
	ASSERT_NE(MAP_FAILED, map) TH_LOG("MAP_SHARED_VALIDATE|MAP_SYNC of %s, %zu bytes: %s",
					  self->dev, len, strerror(errno));
	EXPECT_EQ(1, ms_vm_sync(map)) TH_LOG("the MAP_SYNC mapping of %s has no VM_SYNC", self->dev);
	/* every word different and of this run: stale data cannot pass */
	for (i = 0; i < words; i++)
		map[i] = seed ^ (i * 0x9e3779b97f4a7c15UL);
	ASSERT_EQ(0, munmap(map, len));
	close(self->fd);

	/* a new open, a new mapping: the device, not a cache of the first one */
	fd = open(self->dev, O_RDWR);
	self->fd = fd;
	ASSERT_LE(0, fd) TH_LOG("reopen %s: %s", self->dev, strerror(errno));
	map = mmap(NULL, len, PROT_READ, MSV_SYNC, fd, 0);
	ASSERT_NE(MAP_FAILED, map) TH_LOG("second MAP_SHARED_VALIDATE|MAP_SYNC mapping of %s: %s",
					  self->dev, strerror(errno));
	for (i = 0; i < words && map[i] == (seed ^ (i * 0x9e3779b97f4a7c15UL)); i++)
		;
	EXPECT_EQ(words, i) TH_LOG("word %zu (byte %zu) reads %#lx, the first mapping stored %#lx",
				   i, i * sizeof(long), map[i], seed ^ (i * 0x9e3779b97f4a7c15UL));
	munmap(map, len);
}

/* drivers/dax/device.c:26-32: check_vma() refuses a vma without VM_MAYSHARE */
TEST_F(dd, map_private_is_refused_with_einval)
{
	void *map = mmap(NULL, self->align, PROT_READ | PROT_WRITE, MAP_PRIVATE, self->fd, 0);
	int err = errno;

	if (map != MAP_FAILED)
		munmap(map, self->align);
	ASSERT_EQ(MAP_FAILED, map) TH_LOG("MAP_PRIVATE mapping of %s succeeded", self->dev);
	EXPECT_EQ(EINVAL, err) TH_LOG("MAP_PRIVATE of %s refused with %s, expected EINVAL", self->dev, strerror(err));
}

/*
 * drivers/dax/device.c:34-41: check_vma() refuses a vma whose end is not a
 * multiple of dev_dax->align.  One alignment unit and one page: the start
 * is aligned (device.c:310-340), the end is not.
 */
TEST_F(dd, length_not_a_multiple_of_align_is_refused_with_einval)
{
	size_t len = self->align + getpagesize();
	void *map;
	int err;

	ASSERT_LT((unsigned long)getpagesize(), self->align)
		TH_LOG("%s is %lu-aligned: every page-multiple length is a multiple of it", self->dev, self->align);
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MSV_SYNC, self->fd, 0);
	err = errno;
	if (map != MAP_FAILED)
		munmap(map, len);
	ASSERT_EQ(MAP_FAILED, map) TH_LOG("a %zu-byte mapping of %s (align %lu) succeeded", len, self->dev, self->align);
	EXPECT_EQ(EINVAL, err) TH_LOG("a %zu-byte mapping of %s (align %lu) refused with %s, expected EINVAL",
				      len, self->dev, self->align, strerror(err));
}

TEST_HARNESS_MAIN
