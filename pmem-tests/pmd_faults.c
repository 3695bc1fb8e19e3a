// SPDX-License-Identifier: GPL-2.0
/*
 * pmd_faults: 2 MiB DAX faults, seen through fs_dax:dax_pmd_fault_done.
 *
 * A 2 MiB-aligned mapping of a file with 2 MiB-aligned extents (ext4 -b 4096
 * with a 2 MiB stripe, xfs -d su=2m) takes a 2 MiB fault, with and without
 * MAP_SYNC (with MAP_SYNC the first event reports NEEDDSYNC, the PMD is
 * then made writable by dax_insert_pfn_mkwrite); a mapping whose address is
 * not 2 MiB-aligned, or a file shorter than 2 MiB, falls back to 4 KiB
 * faults.  Each case also counts the synchronous faults: with MAP_SYNC the
 * first write into the sparse file reports NEEDDSYNC exactly once, on the
 * fault of the expected size, and dax_insert_pfn_mkwrite follows once;
 * without MAP_SYNC neither happens.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "kselftest_harness.h"
#include "mapsync.h"

#define PMD (2UL << 20)

FIXTURE(pmd) {
	int fd;
	unsigned long ino;
	char *map;
	size_t len;
};

FIXTURE_VARIANT(pmd) {
	enum ms_mount mnt;
	bool map_sync;
	bool misaligned;	/* address 4 KiB past a 2 MiB boundary */
	size_t file_size;
	bool want_pmd;
};

#define CASES(fs, M)								\
FIXTURE_VARIANT_ADD(pmd, fs##_aligned_shared) {					\
	.mnt = M, .file_size = 2 * PMD, .want_pmd = true,			\
};										\
FIXTURE_VARIANT_ADD(pmd, fs##_aligned_sync) {					\
	.mnt = M, .map_sync = true, .file_size = 2 * PMD, .want_pmd = true,	\
};										\
FIXTURE_VARIANT_ADD(pmd, fs##_misaligned_sync) {				\
	.mnt = M, .map_sync = true, .misaligned = true, .file_size = 2 * PMD,	\
};										\
FIXTURE_VARIANT_ADD(pmd, fs##_short_file_sync) {				\
	.mnt = M, .map_sync = true, .file_size = PMD / 2,			\
}

CASES(ext4, MS_EXT4_DAX);
CASES(xfs, MS_XFS_DAX);

FIXTURE_SETUP(pmd)
{
	const char *dir = ms_mount_dir(variant->mnt);
	struct stat st;

	self->map = MAP_FAILED;
	if (!dir)
		SKIP(return, "%s is not set", ms_mount_env(variant->mnt));
	self->fd = ms_create_file(dir, "pmd", variant->file_size);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, fstat(self->fd, &st));
	self->ino = st.st_ino;
	self->len = variant->file_size;
	self->map = ms_map_placed(self->len, PROT_READ | PROT_WRITE,
				  variant->map_sync ? MAP_SHARED_VALIDATE | MAP_SYNC : MAP_SHARED,
				  self->fd, variant->misaligned ? MS_PLACE_PTE : MS_PLACE_PMD);
	ASSERT_NE(MAP_FAILED, self->map) TH_LOG("mmap: %s", strerror(errno));
}

FIXTURE_TEARDOWN(pmd)
{
	if (self->map != MAP_FAILED)
		munmap(self->map, self->len);
	close(self->fd);
}

TEST_F(pmd, first_write_fault_size)
{
	int pmd_total, pmd_fallback, pte, pmd_sync, pte_sync, mkwrite;
	/* the first write into the sparse file allocates: with MAP_SYNC it syncs once */
	int want_sync = variant->map_sync ? 1 : 0;

	ASSERT_EQ(0, ms_trace_start());
	self->map[0] = 'p';
	pmd_total = ms_trace_count("dax_pmd_fault_done", self->ino, NULL);
	pmd_fallback = ms_trace_count("dax_pmd_fault_done", self->ino, "FALLBACK");
	pmd_sync = ms_trace_count("dax_pmd_fault_done", self->ino, "NEEDDSYNC");
	pte = ms_trace_count("dax_pte_fault_done", self->ino, NULL);
	pte_sync = ms_trace_count("dax_pte_fault_done", self->ino, "NEEDDSYNC");
	mkwrite = ms_trace_count("dax_insert_pfn_mkwrite", self->ino, NULL);
	/* a synchronous fault at the size the case expects, made writable once after its sync */
	EXPECT_EQ(variant->want_pmd ? want_sync : 0, pmd_sync)
		TH_LOG("%s: expected %d NEEDDSYNC on a 2 MiB fault, saw %d (%d PMD events)",
		       variant->map_sync ? "MAP_SYNC" : "MAP_SHARED",
		       variant->want_pmd ? want_sync : 0, pmd_sync, pmd_total);
	EXPECT_EQ(variant->want_pmd ? 0 : want_sync, pte_sync)
		TH_LOG("%s: expected %d NEEDDSYNC on a 4 KiB fault, saw %d (%d PTE events)",
		       variant->map_sync ? "MAP_SYNC" : "MAP_SHARED",
		       variant->want_pmd ? 0 : want_sync, pte_sync, pte);
	EXPECT_EQ(want_sync, mkwrite)
		TH_LOG("expected %d dax_insert_pfn_mkwrite (after the sync), saw %d", want_sync, mkwrite);
	if (variant->want_pmd) {
		EXPECT_LE(1, pmd_total - pmd_fallback)
			TH_LOG("expected a 2 MiB fault: %d PMD events (%d FALLBACK), %d PTE",
			       pmd_total, pmd_fallback, pte);
		EXPECT_EQ(0, pte) TH_LOG("a 4 KiB fault happened too");
		if (!variant->map_sync)
			EXPECT_EQ(1, ms_trace_count("dax_pmd_fault_done", self->ino, "NOPAGE"));
	} else {
		EXPECT_EQ(pmd_total, pmd_fallback)
			TH_LOG("expected no 2 MiB fault: %d PMD events, %d FALLBACK", pmd_total, pmd_fallback);
		EXPECT_LE(1, pte) TH_LOG("expected a 4 KiB fault");
	}
	EXPECT_EQ('p', self->map[0]);
}

TEST_HARNESS_MAIN
