// SPDX-License-Identifier: GPL-2.0
/*
 * interactions: a MAP_SYNC mapping meets truncate, hole punching, fork and
 * mprotect, on ext4 and xfs DAX.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PG 4096UL
#define LEN (3 * PG)

FIXTURE(mapped) {
	int fd;
	unsigned long ino;
	char *map;
};

FIXTURE_VARIANT(mapped) {
	enum ms_mount mnt;
};

FIXTURE_VARIANT_ADD(mapped, ext4) { .mnt = MS_EXT4_DAX };
FIXTURE_VARIANT_ADD(mapped, xfs) { .mnt = MS_XFS_DAX };

FIXTURE_SETUP(mapped)
{
	const char *dir = ms_mount_dir(variant->mnt);
	static char buf[LEN];
	struct stat st;

	self->map = MAP_FAILED;
	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(variant->mnt));
	self->fd = ms_create_file(dir, "interactions", 0);
	ASSERT_LE(0, self->fd);
	memset(buf, 'w', sizeof(buf));
	ASSERT_EQ((ssize_t)LEN, pwrite(self->fd, buf, LEN, 0));
	ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ(0, fstat(self->fd, &st));
	self->ino = st.st_ino;
	self->map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC,
			 self->fd, 0);
	ASSERT_NE(MAP_FAILED, self->map) TH_LOG("mmap: %s", strerror(errno));
}

FIXTURE_TEARDOWN(mapped)
{
	if (self->map != MAP_FAILED)
		munmap(self->map, LEN);
	close(self->fd);
}

static int sync_faults_of(unsigned long ino)
{
	return ms_trace_count("dax_pte_fault_done", ino, "NEEDDSYNC");
}

TEST_F(mapped, truncate_down_sigbus_then_extend_faults_synchronously)
{
	int sig;

	ASSERT_EQ(0, ms_touch(self->map + 2 * PG, true));
	ASSERT_EQ(0, ftruncate(self->fd, PG));
	sig = ms_touch(self->map + 2 * PG, false);
	EXPECT_EQ(SIGBUS, sig) TH_LOG("read beyond the new EOF raised signal %d, not SIGBUS", sig);
	ASSERT_EQ(0, ftruncate(self->fd, LEN));
	ASSERT_EQ(0, ms_trace_start());
	EXPECT_EQ(0, ms_touch(self->map + 2 * PG, true));
	EXPECT_EQ(1, sync_faults_of(self->ino))
		TH_LOG("the first write into the re-extended range must be a synchronous fault");
	EXPECT_EQ('x', self->map[2 * PG]);
	EXPECT_EQ(0, self->map[2 * PG + 1]) TH_LOG("old data came back after truncate and extend");
}

TEST_F(mapped, punched_hole_reads_zeros_then_faults_synchronously)
{
	ASSERT_EQ('w', self->map[PG]);
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, PG, PG));
	EXPECT_EQ(0, self->map[PG]) TH_LOG("a punched page still reads old data");
	ASSERT_EQ(0, ms_trace_start());
	self->map[PG + 1] = 'y';
	EXPECT_EQ(1, sync_faults_of(self->ino))
		TH_LOG("the write into the punched hole must be a synchronous fault");
}

TEST_F(mapped, fork_shares_the_map_sync_mapping)
{
	int status, sync_faults;
	pid_t pid;

	/* page 2 becomes a hole, untouched by the parent: the child's store allocates */
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * PG, PG));
	ASSERT_EQ(1, ms_vm_sync(self->map)) TH_LOG("the parent's MAP_SYNC mapping has no VM_SYNC");
	ASSERT_EQ(0, ms_trace_start());
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* exit 2: the inherited mapping lost VM_SYNC */
		if (ms_vm_sync(self->map) != 1)
			_exit(2);
		self->map[2 * PG + 7] = 'c';
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	sync_faults = sync_faults_of(self->ino);
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("the child died: status %#x", status);
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("the child's inherited mapping has no VM_SYNC (\"sf\" in smaps)");
	EXPECT_EQ(1, sync_faults)
		TH_LOG("the child's write into a hole through the inherited mapping: expected 1 synchronous fault, saw %d",
		       sync_faults);
	EXPECT_EQ('c', self->map[2 * PG + 7]) TH_LOG("the child's store is not in the shared mapping");
}

TEST_F(mapped, mprotect_write_on_read_only_file_is_refused)
{
	char path[4096];
	int fd;
	char *p;

	snprintf(path, sizeof(path), "%s/interactions", ms_mount_dir(variant->mnt));
	fd = open(path, O_RDONLY);
	ASSERT_LE(0, fd);
	p = mmap(NULL, PG, PROT_READ, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
	ASSERT_NE(MAP_FAILED, p) TH_LOG("read-only MAP_SYNC mapping: %s", strerror(errno));
	EXPECT_EQ(-1, mprotect(p, PG, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno) TH_LOG("mprotect(PROT_WRITE) of an O_RDONLY file: %s", strerror(errno));
	munmap(p, PG);
	close(fd);
}

TEST_HARNESS_MAIN
