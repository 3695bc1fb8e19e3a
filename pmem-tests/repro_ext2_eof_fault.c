// SPDX-License-Identifier: GPL-2.0
/*
 * repro_ext2_eof_fault: a write fault on the EOF page of an ext2 DAX file
 * mapped MAP_SHARED|MAP_SYNC.
 *
 * ext2 never opted into MAP_SYNC.  On 6.12 the mapping still gets VM_SYNC,
 * the fault wants a sync ext2 cannot do: WARN in dax_fault_iter(), SIGBUS,
 * then ext2_iomap_end() truncates under the invalidate lock the fault holds
 * and the task hangs in D state for good.  0001 (no VM_SYNC for ext2) or
 * 0007 (no IOMAP_F_DIRTY on a fault) removes the synchronous fault; 0005
 * the hang after any failed fault (repro_ext2_failed_fault shows that one).
 *
 * The fault runs in a child; the test waits for it at most WAIT_S seconds
 * and says what it saw: success, a signal, or a task stuck in state D.  It
 * runs in a boot of its own (qemu/suite), since on the stock kernel
 * the WARN fails that boot and the stuck task stays until power-off.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PG 4096
#define WAIT_S 10

TEST(ext2_dax_eof_page_write_fault_map_shared_map_sync)
{
	const char *dir = ms_mount_dir(MS_EXT2_DAX);
	static char data[PG + 100];
	int fd, status, st;
	pid_t pid;

	if (!dir)
		SKIP(return, "MAPSYNC_EXT2_DAX is not set: run under pmem-tests/run");
	fd = ms_create_file(dir, "eof_fault", 0);
	ASSERT_LE(0, fd);
	memset(data, 'e', sizeof(data));
	ASSERT_EQ((ssize_t)sizeof(data), pwrite(fd, data, sizeof(data), 0));
	ASSERT_EQ(0, fsync(fd));

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		char *p = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_SYNC, fd, 0);

		if (p == MAP_FAILED)
			_exit(2);
		p[PG + 10] = 'x';	/* write fault on the EOF page */
		_exit(p[PG + 10] == 'x' ? 0 : 3);
	}
	st = ms_wait_child(pid, WAIT_S, &status);
	if (st) {
		kill(pid, SIGKILL);
		ASSERT_TRUE(false)
			TH_LOG("the faulting task did not finish in %d s; state %c%s", WAIT_S, st,
			       st == 'D' ? " (uninterruptible: deadlocked in the fault)" : "");
	}
	ASSERT_TRUE(WIFEXITED(status))
		TH_LOG("the write fault killed the task with signal %d (%s)",
		       WTERMSIG(status), strsignal(WTERMSIG(status)));
	ASSERT_EQ(0, WEXITSTATUS(status))
		TH_LOG("child exit %d (2: mmap failed, 3: the store did not stick)",
		       WEXITSTATUS(status));
	close(fd);
}

TEST_HARNESS_MAIN
