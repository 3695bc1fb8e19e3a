// SPDX-License-Identifier: GPL-2.0
/*
 * smoke: the guest has what every other test stands on.
 *
 * For ext4 and xfs, each on a DAX mount and on a non-DAX mount of an fsdax
 * namespace (mounts made by pmem-tests/run, named by the environment):
 *  - /proc/mounts shows dax=always exactly on the DAX mounts;
 *  - mmap(MAP_SHARED_VALIDATE | MAP_SYNC) of a file succeeds on DAX (and the
 *    mapping can be written), and fails with EOPNOTSUPP without DAX.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include "kselftest_harness.h"
#include "mapsync.h"

FIXTURE(mount) {
	int fd;
};

FIXTURE_VARIANT(mount) {
	enum ms_mount mnt;
	bool dax;
};

FIXTURE_VARIANT_ADD(mount, ext4_dax)   { .mnt = MS_EXT4_DAX,   .dax = true };
FIXTURE_VARIANT_ADD(mount, ext4_nodax) { .mnt = MS_EXT4_NODAX, .dax = false };
FIXTURE_VARIANT_ADD(mount, xfs_dax)    { .mnt = MS_XFS_DAX,    .dax = true };
FIXTURE_VARIANT_ADD(mount, xfs_nodax)  { .mnt = MS_XFS_NODAX,  .dax = false };

FIXTURE_SETUP(mount)
{
	const char *dir = ms_mount_dir(variant->mnt);

	if (!dir)
		SKIP(return, "%s is not set: run under pmem-tests/run",
		     ms_mount_env(variant->mnt));
	self->fd = ms_create_file(dir, "smoke", 2 << 20);
	ASSERT_LE(0, self->fd) TH_LOG("cannot create a file in %s: %s", dir, strerror(errno));
}

FIXTURE_TEARDOWN(mount)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(mount, proc_mounts_shows_dax_always_only_on_dax_mounts)
{
	const char *dir = ms_mount_dir(variant->mnt);
	char opts[512];

	ASSERT_EQ(0, ms_mount_options(dir, opts, sizeof(opts)))
		TH_LOG("%s is not in /proc/mounts", dir);
	EXPECT_EQ(variant->dax, ms_has_option(opts, "dax=always"))
		TH_LOG("%s options '%s': expected dax=always %s", dir, opts,
		       variant->dax ? "present" : "absent");
}

TEST_F(mount, map_shared_validate_map_sync_needs_dax)
{
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_SHARED_VALIDATE | MAP_SYNC, self->fd, 0);
	int err = errno;

	if (variant->dax) {
		ASSERT_NE(MAP_FAILED, p)
			TH_LOG("DAX file: expected success, saw %s", strerror(err));
		p[0] = 'x';	/* a synchronous write fault */
		EXPECT_EQ('x', p[0]);
		munmap(p, 4096);
	} else {
		ASSERT_EQ(MAP_FAILED, p)
			TH_LOG("non-DAX file: expected EOPNOTSUPP, the mapping succeeded");
		EXPECT_EQ(EOPNOTSUPP, err)
			TH_LOG("non-DAX file: expected EOPNOTSUPP, saw %s", strerror(err));
	}
}

TEST_HARNESS_MAIN
