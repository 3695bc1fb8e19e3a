/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Checks shared by the guest test programs that need the kselftest harness
 * (its _metadata and ASSERT/EXPECT macros): include after
 * kselftest_harness.h and mapsync.h.
 */
#ifndef MS_EXPECT_H
#define MS_EXPECT_H

/*
 * Count the faults of inode ino since ms_trace_start() (stops tracing): a
 * store into a hole of a MAP_SYNC mapping must be exactly one synchronous
 * fault: one NEEDDSYNC, one dax_insert_pfn_mkwrite, one fsync of the inode
 * (the fault's metadata sync).  Logs what it saw.
 */
static inline void expect_one_sync_fault(struct __test_metadata *_metadata,
					 unsigned long ino, const char *what)
{
	struct ms_sync_count c;

	ASSERT_EQ(0, ms_sync_count(ino, &c)) TH_LOG("tracefs or the fs_dax events are missing");
	TH_LOG("%s: inode %lu: %d faults, %d NEEDDSYNC, %d mkwrite, %d fsync",
	       what, ino, c.faults, c.needdsync, c.mkwrite, c.fsyncs);
	ASSERT_LE(1, c.faults) TH_LOG("%s: no dax_pte_fault_done event for inode %lu", what, ino);
	EXPECT_EQ(1, c.needdsync)
		TH_LOG("%s: expected 1 synchronous fault (NEEDDSYNC), saw %d (of %d faults)",
		       what, c.needdsync, c.faults);
	EXPECT_EQ(1, c.mkwrite)
		TH_LOG("%s: expected 1 dax_insert_pfn_mkwrite, saw %d (of %d faults)",
		       what, c.mkwrite, c.faults);
	EXPECT_EQ(1, c.fsyncs)
		TH_LOG("%s: expected 1 fsync of the inode (the fault's metadata sync), saw %d",
		       what, c.fsyncs);
}

#endif
