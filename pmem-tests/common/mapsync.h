/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by the pmem-tests programs (guest side). */
#ifndef MAPSYNC_H
#define MAPSYNC_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The mounts pmem-tests/run prepares; each is named by an environment variable. */
enum ms_mount {
	MS_EXT4_DAX,
	MS_EXT4_NODAX,
	MS_XFS_DAX,
	MS_XFS_NODAX,
	MS_EXT2_DAX,
	MS_EXT2_NODAX,
	MS_NR_MOUNTS
};

const char *ms_mount_env(enum ms_mount m);
/* The directory of mount m, or NULL when the environment does not name it. */
const char *ms_mount_dir(enum ms_mount m);
/* Create (truncate) dir/name with size bytes; returns an O_RDWR fd or -1. */
int ms_create_file(const char *dir, const char *name, off_t size);
/* The options of the mount at dir, from /proc/mounts; 0 or -1. */
int ms_mount_options(const char *dir, char *buf, size_t len);
/* Whether a comma-separated option list holds opt exactly. */
bool ms_has_option(const char *opts, const char *opt);

/*
 * The per-mount sysfs attribute `attr` of the file system holding dir
 * (/sys/fs/<type>/<device>/attr).  ms_fs_attr_get() returns its value or -1
 * when the kernel has no such attribute; ms_fs_attr_set() writes val and
 * returns 0 or -1.
 */
long ms_fs_attr_get(const char *dir, const char *attr);
int ms_fs_attr_set(const char *dir, const char *attr, long val);
/*
 * How a file asks for the MAP_SYNC allocation look-ahead (kernel-patches
 * 0011/0012).  ext4: by having unwritten extents (fallocate); the range a
 * synchronous fault converts is ext4's extent_max_zeroout_kb.  xfs: by an
 * extent size hint, which xfs then honours for DAX allocations.
 */
#define MS_EXTENT_MAX_ZEROOUT_KB "extent_max_zeroout_kb"
/* Set fd's extent size hint to bytes (0: none; FS_IOC_FSSETXATTR); 0 or -1. */
int ms_set_extsize(int fd, unsigned int bytes);

struct fiemap_extent;
/* The extents of fd (FIEMAP, synced first): how many, at most n, or -1. */
int ms_fiemap(int fd, struct fiemap_extent *ext, int n);

/*
 * Wait at most secs seconds for child pid to end.  0: it ended (*status set,
 * as by waitpid); otherwise the state letter of /proc/pid/stat ('D': stuck
 * uninterruptibly, for instance deadlocked in a page fault; '?' unknown).
 */
int ms_wait_child(pid_t pid, int secs, int *status);
/* the state letter of pid in /proc/PID/stat ('R', 'S', 'D', ...), '?' if unknown */
int ms_proc_state(pid_t pid);
/* is the 4 KiB page at off of fd in an extent FIEMAP reports shared? 1, 0, or -1 */
int ms_page_shared(int fd, off_t off);

/* Touch p (a write if write); returns the signal it raised (SIGBUS), 0 if none. */
int ms_touch(volatile char *p, bool write);

/* Where ms_map_placed() puts a mapping. */
enum ms_place {
	MS_PLACE_PMD,	/* at a 2 MiB boundary: 2 MiB faults are possible */
	MS_PLACE_PTE,	/* 4 KiB past a 2 MiB boundary: 4 KiB faults only */
};

/* mmap(fd) of len bytes placed as asked; MAP_FAILED (errno set) on error. */
void *ms_map_placed(size_t len, int prot, int flags, int fd, enum ms_place place);

#define MS_TRACEFS "/sys/kernel/tracing"

/* write val to path (a tracefs or sysfs file), appending or truncating; 0 or -1 */
int ms_write_file(const char *path, const char *val, bool append);

/*
 * fs_dax trace events (tracefs): ms_trace_start() clears the buffer and
 * enables the fault events (and the fsync entries of ext4 and xfs); ms_trace_count() stops tracing and counts the
 * lines of event `event` for inode `ino` that contain `word` (NULL: all).
 * Both return -1 when tracefs or the events are missing.
 */
int ms_trace_start(void);
int ms_trace_count(const char *event, unsigned long ino, const char *word);

/*
 * The PTE faults of inode ino since ms_trace_start(), as sync_faults counts
 * them: dax_pte_fault_done lines (faults), those of them that report
 * NEEDDSYNC (the fault must sync metadata: dax_finish_sync_fault), and
 * dax_insert_pfn_mkwrite (the PTE made writable after that sync); and the
 * fsync calls of the inode (ext4_sync_file_enter, xfs_file_fsync), the
 * sync itself (vfs_fsync_range() from dax_finish_sync_fault).  Stops
 * tracing; 0, or -1 when tracefs or the events are missing.
 */
struct ms_sync_count {
	int faults, needdsync, mkwrite, fsyncs;
};
int ms_sync_count(unsigned long ino, struct ms_sync_count *c);

/*
 * Whether the mapping holding addr has VM_SYNC ("sf" in the VmFlags of
 * /proc/self/smaps): 1 or 0; -1 when no mapping holds addr.
 */
int ms_vm_sync(const void *addr);

/* the byte every byte of page pg (4 KiB) of fd holds, or -1 if they differ */
int ms_page_byte(int fd, size_t pg);
#endif
