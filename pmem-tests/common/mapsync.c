// SPDX-License-Identifier: GPL-2.0
/* Helpers shared by the pmem-tests programs (guest side). */
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mapsync.h"

static const char *const mount_env[MS_NR_MOUNTS] = {
	[MS_EXT4_DAX] = "MAPSYNC_EXT4_DAX",
	[MS_EXT4_NODAX] = "MAPSYNC_EXT4_NODAX",
	[MS_XFS_DAX] = "MAPSYNC_XFS_DAX",
	[MS_XFS_NODAX] = "MAPSYNC_XFS_NODAX",
	[MS_EXT2_DAX] = "MAPSYNC_EXT2_DAX",
	[MS_EXT2_NODAX] = "MAPSYNC_EXT2_NODAX",
};

const char *ms_mount_env(enum ms_mount m)
{
	return mount_env[m];
}

const char *ms_mount_dir(enum ms_mount m)
{
	const char *d = getenv(mount_env[m]);

	return d && *d ? d : NULL;
}

int ms_create_file(const char *dir, const char *name, off_t size)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, size)) {
		close(fd);
		return -1;
	}
	return fd;
}

int ms_mount_options(const char *dir, char *buf, size_t len)
{
	char dev[256], mnt[PATH_MAX], type[64], opts[1024];
	FILE *f = fopen("/proc/mounts", "r");
	int ret = -1;

	if (!f)
		return -1;
	while (fscanf(f, "%255s %4095s %63s %1023s %*d %*d", dev, mnt, type, opts) == 4) {
		if (!strcmp(mnt, dir)) {
			snprintf(buf, len, "%s", opts);
			ret = 0;
		}
	}
	fclose(f);
	return ret;
}

bool ms_has_option(const char *opts, const char *opt)
{
	size_t n = strlen(opt);
	const char *p = opts;

	while ((p = strstr(p, opt))) {
		if ((p == opts || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
		p += n;
	}
	return false;
}

int ms_fiemap(int fd, struct fiemap_extent *ext, int n)
{
	struct fiemap *fm = calloc(1, sizeof(*fm) + n * sizeof(*ext));
	int got = -1;

	if (!fm)
		return -1;
	fm->fm_length = FIEMAP_MAX_OFFSET;
	fm->fm_flags = FIEMAP_FLAG_SYNC;
	fm->fm_extent_count = n;
	if (!ioctl(fd, FS_IOC_FIEMAP, fm)) {
		got = fm->fm_mapped_extents;
		memcpy(ext, fm->fm_extents, got * sizeof(*ext));
	}
	free(fm);
	return got;
}

int ms_wait_child(pid_t pid, int secs, int *status)
{
	int i;

	for (i = 0; i < secs * 10; i++) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return 0;
		usleep(100000);
	}
	return ms_proc_state(pid);
}

int ms_proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	/* "pid (comm) S ...": the state follows the last ')' */
	p = p ? strrchr(buf, ')') : NULL;
	return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

int ms_page_shared(int fd, off_t off)
{
	struct {
		struct fiemap fm;
		struct fiemap_extent fe[1];
	} f;

	memset(&f, 0, sizeof(f));
	f.fm.fm_start = off / 4096 * 4096;
	f.fm.fm_length = 4096;
	f.fm.fm_flags = FIEMAP_FLAG_SYNC;
	f.fm.fm_extent_count = 1;
	if (ioctl(fd, FS_IOC_FIEMAP, &f.fm) || f.fm.fm_mapped_extents < 1 ||
	    f.fe[0].fe_logical > (__u64)f.fm.fm_start)
		return -1;
	return !!(f.fe[0].fe_flags & FIEMAP_EXTENT_SHARED);
}

static sigjmp_buf touch_jump;

static void touch_signal(int sig)
{
	siglongjmp(touch_jump, sig);
}

int ms_touch(volatile char *p, bool write)
{
	struct sigaction sa = { .sa_handler = touch_signal }, old;
	int sig;

	sigaction(SIGBUS, &sa, &old);
	sig = sigsetjmp(touch_jump, 1);
	if (!sig) {
		if (write)
			*p = 'x';
		else
			(void)*p;
	}
	sigaction(SIGBUS, &old, NULL);
	return sig;
}

/* /sys/fs/<type>/<device>/<attr> of the file system dir is on */
static int fs_attr_path(const char *dir, const char *attr, char *path, size_t len)
{
	char dev[256], mnt[PATH_MAX], type[64], real[PATH_MAX];
	FILE *f = fopen("/proc/mounts", "r");
	size_t n, best = 0;
	const char *name;
	int found = -1;

	if (!f || !realpath(dir, real)) {
		if (f)
			fclose(f);
		return -1;
	}
	while (fscanf(f, "%255s %4095s %63s %*s %*d %*d", dev, mnt, type) == 3) {
		/* the deepest mount holding dir; the last one on a path wins */
		n = strlen(mnt);
		if (strncmp(real, mnt, n) || (real[n] != '/' && real[n] != '\0' && n > 1) ||
		    n < best)
			continue;
		best = n;
		name = strrchr(dev, '/');
		found = snprintf(path, len, "/sys/fs/%s/%s/%s", type,
				 name ? name + 1 : dev, attr) < (int)len ? 0 : -1;
	}
	fclose(f);
	return found;
}

long ms_fs_attr_get(const char *dir, const char *attr)
{
	char path[PATH_MAX];
	long val = -1;
	FILE *f;

	if (fs_attr_path(dir, attr, path, sizeof(path)))
		return -1;
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &val) != 1)
		val = -1;
	fclose(f);
	return val;
}

int ms_fs_attr_set(const char *dir, const char *attr, long val)
{
	char path[PATH_MAX];
	FILE *f;
	int ret;

	if (fs_attr_path(dir, attr, path, sizeof(path)))
		return -1;
	f = fopen(path, "w");
	if (!f)
		return -1;
	ret = fprintf(f, "%ld\n", val) < 0;
	return fclose(f) || ret ? -1 : 0;
}

void *ms_map_placed(size_t len, int prot, int flags, int fd, enum ms_place place)
{
	const unsigned long pmd = 2UL << 20;
	unsigned long a;
	void *res;

	/* find room for len plus slack, then map over its aligned start */
	res = mmap(NULL, len + 2 * pmd, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED)
		return MAP_FAILED;
	munmap(res, len + 2 * pmd);
	a = ((unsigned long)res + pmd - 1) & ~(pmd - 1);
	if (place == MS_PLACE_PTE)
		a += 4096;
	return mmap((void *)a, len, prot, flags | MAP_FIXED, fd, 0);
}

#define TRACEFS MS_TRACEFS

int ms_write_file(const char *path, const char *val, bool append)
{
	int fd = open(path, O_WRONLY | (append ? O_APPEND : O_TRUNC));
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* SYSTEM/EVENT: the fs_dax fault events, and the fsync entries of ext4 and xfs */
static const char *const fault_events[] = {
	"fs_dax/dax_pte_fault_done", "fs_dax/dax_pmd_fault_done", "fs_dax/dax_insert_pfn_mkwrite",
	"ext4/ext4_sync_file_enter", "xfs/xfs_file_fsync",
};

int ms_trace_start(void)
{
	char path[PATH_MAX];
	size_t i;

	if (ms_write_file(TRACEFS "/tracing_on", "0", false) || ms_write_file(TRACEFS "/trace", "", false))
		return -1;
	for (i = 0; i < sizeof(fault_events) / sizeof(fault_events[0]); i++) {
		snprintf(path, sizeof(path), TRACEFS "/events/%s/enable", fault_events[i]);
		if (ms_write_file(path, "1", false))
			return -1;
	}
	return ms_write_file(TRACEFS "/tracing_on", "1", false);
}

/* lines of event that contain inos (" ino N ", as the event prints it) and word */
static int trace_count(const char *event, const char *inos, const char *word)
{
	char line[1024], evt[128];
	FILE *f;
	int n = 0;

	if (ms_write_file(TRACEFS "/tracing_on", "0", false))
		return -1;
	f = fopen(TRACEFS "/trace", "r");
	if (!f)
		return -1;
	snprintf(evt, sizeof(evt), " %s: ", event);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, evt) && strstr(line, inos) && (!word || strstr(line, word)))
			n++;
	fclose(f);
	return n;
}

int ms_trace_count(const char *event, unsigned long ino, const char *word)
{
	char inos[64];

	snprintf(inos, sizeof(inos), " ino %#lx ", ino);
	return trace_count(event, inos, word);
}

int ms_sync_count(unsigned long ino, struct ms_sync_count *c)
{
	char dec[64];
	int x;

	/* counting stops tracing; the buffer can be read again */
	c->faults = ms_trace_count("dax_pte_fault_done", ino, NULL);
	c->needdsync = ms_trace_count("dax_pte_fault_done", ino, "NEEDDSYNC");
	c->mkwrite = ms_trace_count("dax_insert_pfn_mkwrite", ino, NULL);
	/* ext4 prints the inode number in decimal, xfs in hex */
	snprintf(dec, sizeof(dec), " ino %lu ", ino);
	c->fsyncs = trace_count("ext4_sync_file_enter", dec, NULL);
	x = ms_trace_count("xfs_file_fsync", ino, NULL);
	if (c->fsyncs >= 0 && x >= 0)
		c->fsyncs += x;
	return c->faults < 0 || c->needdsync < 0 || c->mkwrite < 0 || c->fsyncs < 0 || x < 0 ? -1 : 0;
}

int ms_vm_sync(const void *addr)
{
	unsigned long a = (unsigned long)addr, start, end;
	char line[512];
	int in = 0, sf = -1;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		/* a mapping's first line is "start-end perms ..."; no field line parses so */
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2)
			in = start <= a && a < end;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			sf = strstr(line, " sf") != NULL;
			break;
		}
	}
	fclose(f);
	return sf;
}

int ms_set_extsize(int fd, unsigned int bytes)
{
	struct fsxattr fa;

	if (ioctl(fd, FS_IOC_FSGETXATTR, &fa))
		return -1;
	fa.fsx_extsize = bytes;
	if (bytes)
		fa.fsx_xflags |= FS_XFLAG_EXTSIZE;
	else
		fa.fsx_xflags &= ~FS_XFLAG_EXTSIZE;
	return ioctl(fd, FS_IOC_FSSETXATTR, &fa) ? -1 : 0;
}

int ms_page_byte(int fd, size_t pg)
{
	static char buf[4096];
	size_t i;

	if (pread(fd, buf, sizeof(buf), pg * sizeof(buf)) != (ssize_t)sizeof(buf))
		return -1;
	for (i = 1; i < sizeof(buf); i++)
		if (buf[i] != buf[0])
			return -1;
	return (unsigned char)buf[0];
}
