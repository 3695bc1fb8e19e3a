// SPDX-License-Identifier: GPL-2.0
/*
 * faultbench: time page faults one by one (guest side of bench/bench).
 *
 *   faultbench [-p pte|pmd|default] [-s STRIDE_KB] [-r] [-x HINT_KB] [-z ZEROOUT_KB]
 *              DIR MAP STATE COUNT RAWPREFIX LABEL
 *
 * MAP    sync (MAP_SHARED_VALIDATE|MAP_SYNC), shared (MAP_SHARED),
 *        msync-each (MAP_SHARED + msync of the page after each fault),
 *        msync-end (MAP_SHARED, one msync of everything at the end)
 * STATE  hole (sparse file), unwritten (fallocated), written (written and
 *        fsynced: overwrite faults), read (written and fsynced: read faults)
 * -p     where the mapping goes: pte (default; 4 KiB past a 2 MiB boundary,
 *        MAP_FIXED: no 2 MiB fault is possible), pmd (2 MiB-aligned,
 *        MAP_FIXED; one fault per 2 MiB), default (no MAP_FIXED: where the
 *        kernel puts it, as applications get it)
 * -s     one fault every STRIDE_KB (default 4, pmd: 2048); the file is
 *        COUNT x STRIDE long
 * -r     touch the pages in a random order (a fixed permutation)
 * -x     give the file an extent size hint of HINT_KB (FS_IOC_FSSETXATTR,
 *        before it has blocks; xfs) -- how a file asks for 0012; a hint
 *        inherited from DIR (xfs_io -c "extsize 64k" DIR) counts the same
 * -z     set the file system's extent_max_zeroout_kb to ZEROOUT_KB for the
 *        cell (ext4; restored at the end) -- the range of 0011
 *
 * Each fault is the first touch of one page (or 2 MiB extent), timed with
 * CLOCK_MONOTONIC around the access, after a warm-up of (at most) 64 faults
 * of the same kind on another file, and with the file system frozen and
 * thawed before the file is made and again before the fill (quiesce()).  Writes every latency (ns) to
 * RAWPREFIX-MAP-FILL-PLACE.txt (FILL: the cell's name, below), and
 * prints one line "BENCH {json}" with percentiles, the msync time
 * (msync-end), the synchronous faults counted by a kprobe on
 * dax_finish_sync_fault, the 2 MiB fault attempts (fs_dax:dax_pmd_fault_done
 * events) and how many were served as such (any result but FALLBACK), and
 * the 4 KiB blocks the file holds after the fill (st_blocks), and what two
 * clock reads cost with nothing between them (clock_ns).  FILL names
 * the cell: STATE, then -random, -sSTRIDE, -xHINT, -zZEROOUT when given,
 * and for -p default the file size (hole-x64k, unwritten-s128k-z128k,
 * hole-8m; sizes as 64k, 2m).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "mapsync.h"

#define PMD (2UL << 20)
#define TRACEFS "/sys/kernel/tracing"

static const char *zdir;	/* -z: restore extent_max_zeroout_kb here */
static long zold = -1;

static void die(const char *what)
{
	fprintf(stderr, "faultbench: %s: %s\n", what, strerror(errno));
	if (zdir && zold >= 0)
		ms_fs_attr_set(zdir, MS_EXTENT_MAX_ZEROOUT_KB, zold);
	exit(2);
}

static int put(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	ssize_t n = -1;

	if (fd >= 0) {
		n = write(fd, val, strlen(val));
		close(fd);
	}
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* synchronous faults: hits of a kprobe on dax_finish_sync_fault */
static long sync_hits(void)
{
	char line[256], name[128];
	long hits = -1, h, m;
	FILE *f = fopen(TRACEFS "/kprobe_profile", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%127s %ld %ld", name, &h, &m) == 3 &&
		    (!strcmp(name, "syncfault") || !strcmp(name, "mapsync/syncfault")))
			hits = h;
	fclose(f);
	return hits;
}

static int trace_setup(void)
{
	put(TRACEFS "/tracing_on", "0");
	put(TRACEFS "/events/mapsync/syncfault/enable", "0");
	put(TRACEFS "/kprobe_events", "");	/* also resets the hit count */
	if (put(TRACEFS "/kprobe_events", "p:mapsync/syncfault dax_finish_sync_fault") ||
	    put(TRACEFS "/events/mapsync/syncfault/enable", "1") ||
	    put(TRACEFS "/events/fs_dax/dax_pmd_fault_done/enable", "1"))
		return -1;
	put(TRACEFS "/events/fs_dax/dax_pte_fault_done/enable", "0");
	put(TRACEFS "/trace", "");
	return put(TRACEFS "/tracing_on", "1");
}

/* 2 MiB fault attempts, and those served as such (any result but FALLBACK) */
static long pmd_faults(long *tries)
{
	char line[1024];
	long n = 0;
	FILE *f = fopen(TRACEFS "/trace", "r");

	*tries = -1;
	if (!f)
		return -1;
	*tries = 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "dax_pmd_fault_done")) {
			++*tries;
			if (!strstr(line, "FALLBACK"))
				n++;
		}
	fclose(f);
	return n;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * What the two clock reads around a fault cost on their own (the median of
 * 63 empty intervals): every latency includes it, alike in every cell.
 */
static uint64_t clock_cost_ns(void)
{
	uint64_t d[63];
	size_t i;

	for (i = 0; i < 63; i++) {
		uint64_t t = now_ns();

		d[i] = now_ns() - t;
	}
	qsort(d, 63, sizeof(*d), cmp_u64);
	return d[31];
}

/*
 * Freeze and thaw the file system of dir: what the cells before (and the
 * warm-up) left behind is done with, the same way in every boot.  A freeze
 * commits and checkpoints ext4's journal, and on xfs forces the log and runs
 * the inode inactivation that unlink() defers to a workqueue (inodegc): until
 * it runs, an unlinked file's blocks are not free, and a file made meanwhile
 * is laid out around them.  syncfs() does neither (docs/bench.md, Method).
 */
static void quiesce(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);

	if (fd < 0 || ioctl(fd, FIFREEZE, 0))
		die("FIFREEZE (freeze the file system before the fill)");
	if (ioctl(fd, FITHAW, 0))
		die("FITHAW");
	close(fd);
}

/* file at path in the state asked for, its hint set first; returns the fd */
static int make_file(const char *path, const char *state, size_t len, long hint_kb)
{
	static char buf[1 << 20];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	size_t off, n;

	if (fd < 0)
		die(path);
	if (hint_kb > 0 && ms_set_extsize(fd, hint_kb << 10))
		die("FS_IOC_FSSETXATTR (extent size hint)");
	if (!strcmp(state, "hole")) {
		if (ftruncate(fd, len))
			die("ftruncate");
	} else if (!strcmp(state, "unwritten")) {
		if (fallocate(fd, 0, 0, len))
			die("fallocate");
	} else {
		memset(buf, 'w', sizeof(buf));
		for (off = 0; off < len; off += n) {
			n = len - off < sizeof(buf) ? len - off : sizeof(buf);
			if (pwrite(fd, buf, n, off) != (ssize_t)n)
				die("pwrite");
		}
	}
	if (fsync(fd))
		die("fsync");
	return fd;
}

static char *map_file(int fd, size_t len, int flags, const char *place)
{
	char *p;

	if (!strcmp(place, "default"))
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, 0);
	else
		p = ms_map_placed(len, PROT_READ | PROT_WRITE, flags, fd,
				  !strcmp(place, "pmd") ? MS_PLACE_PMD : MS_PLACE_PTE);
	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

/* "64k", "2m": the way cell names spell sizes */
static const char *kb_name(unsigned long kb, char *buf)
{
	if (kb >= 1024 && !(kb % 1024))
		sprintf(buf, "%lum", kb / 1024);
	else
		sprintf(buf, "%luk", kb);
	return buf;
}

int main(int argc, char **argv)
{
	const char *dir, *map, *state, *raw, *label, *place = "pte";
	uint64_t *lat, t0, t1, sum = 0, msync_ns = 0, wall, clock_ns;
	int flags, write_fault, each, end, random_order = 0, fd, c;
	size_t step = 0, count, i, j, t, len, *order, pages;
	long hint_kb = 0, zeroout_kb = -1, sync0, syncs, pmds, tries, got_hint = 0;
	char path[4096], fill[256], b1[32], *p;
	struct fsxattr fa;
	struct stat st;
	FILE *f;

	while ((c = getopt(argc, argv, "p:s:rx:z:")) != -1) {
		switch (c) {
		case 'p': place = optarg; break;
		case 's': step = strtoul(optarg, NULL, 0) << 10; break;
		case 'r': random_order = 1; break;
		case 'x': hint_kb = strtol(optarg, NULL, 0); break;
		case 'z': zeroout_kb = strtol(optarg, NULL, 0); break;
		default: goto usage;
		}
	}
	if (argc - optind != 6 ||
	    (strcmp(place, "pte") && strcmp(place, "pmd") && strcmp(place, "default"))) {
usage:
		fprintf(stderr, "usage: faultbench [-p pte|pmd|default] [-s STRIDE_KB] [-r] [-x HINT_KB] "
				"[-z ZEROOUT_KB] DIR sync|shared|msync-each|msync-end "
				"hole|unwritten|written|read COUNT RAWPREFIX LABEL\n");
		return 2;
	}
	dir = argv[optind], map = argv[optind + 1], state = argv[optind + 2];
	count = strtoul(argv[optind + 3], NULL, 0);
	raw = argv[optind + 4], label = argv[optind + 5];
	if (!step)
		step = !strcmp(place, "pmd") ? PMD : 4096;
	if (!count || step % 4096) {
		fprintf(stderr, "faultbench: COUNT must be positive and the stride a multiple of 4 KiB\n");
		return 2;
	}
	flags = !strcmp(map, "sync") ? MAP_SHARED_VALIDATE | MAP_SYNC : MAP_SHARED;
	each = !strcmp(map, "msync-each");
	end = !strcmp(map, "msync-end");
	write_fault = strcmp(state, "read");
	len = count * step;
	lat = calloc(count, sizeof(*lat));
	order = calloc(count, sizeof(*order));
	if (!lat || !order)
		die("calloc");
	for (i = 0; i < count; i++)
		order[i] = i;
	if (random_order) {
		srandom(1);	/* the same permutation in every run */
		for (i = count - 1; i > 0; i--) {
			j = random() % (i + 1);
			t = order[i], order[i] = order[j], order[j] = t;
		}
	}
	if (zeroout_kb >= 0) {
		zold = ms_fs_attr_get(dir, MS_EXTENT_MAX_ZEROOUT_KB);
		if (zold < 0 || ms_fs_attr_set(dir, MS_EXTENT_MAX_ZEROOUT_KB, zeroout_kb))
			die("-z: no extent_max_zeroout_kb for this file system (ext4 only)");
		zdir = dir;
	}

	/* warm-up: the same kind of faults on another file */
	snprintf(path, sizeof(path), "%s/warmup", dir);
	t = count < 64 ? count : 64;
	fd = make_file(path, state, t * step, hint_kb);
	p = map_file(fd, t * step, flags, place);
	close(fd);
	for (i = 0; i < t; i++)
		p[i * step] = p[i * step] + 1;
	munmap(p, t * step);
	unlink(path);
	quiesce(dir);

	snprintf(path, sizeof(path), "%s/bench", dir);
	fd = make_file(path, state, len, hint_kb);
	if (!ioctl(fd, FS_IOC_FSGETXATTR, &fa) && (fa.fsx_xflags & FS_XFLAG_EXTSIZE))
		got_hint = fa.fsx_extsize >> 10;
	if (hint_kb > 0 && got_hint != hint_kb) {
		errno = EINVAL;
		die("the extent size hint did not stick");
	}
	/* the cell's name: state, order, stride, hint, zeroout, file size */
	snprintf(fill, sizeof(fill), "%s%s", state, random_order ? "-random" : "");
	if (step != (strcmp(place, "pmd") ? 4096 : PMD))
		sprintf(fill + strlen(fill), "-s%s", kb_name(step >> 10, b1));
	if (got_hint > 0)	/* set by -x, or inherited from the directory */
		sprintf(fill + strlen(fill), "-x%s", kb_name(got_hint, b1));
	if (zeroout_kb >= 0)
		sprintf(fill + strlen(fill), "-z%s", kb_name(zeroout_kb, b1));
	if (!strcmp(place, "default"))
		sprintf(fill + strlen(fill), "-%s", kb_name(len >> 10, b1));

	p = map_file(fd, len, flags, place);
	/* the mapping is made; nothing that came before is still in flight */
	quiesce(dir);
	if (trace_setup())
		die("kprobe on dax_finish_sync_fault (tracefs, KPROBE_EVENTS)");
	clock_ns = clock_cost_ns();
	sync0 = sync_hits();
	wall = now_ns();
	for (i = 0; i < count; i++) {
		volatile char *q = p + order[i] * step;

		t0 = now_ns();
		if (write_fault)
			*q = 'x';
		else
			(void)*q;
		if (each && msync((char *)q, 4096, MS_SYNC))
			die("msync");
		t1 = now_ns();
		lat[i] = t1 - t0;
		sum += lat[i];
	}
	if (end) {
		t0 = now_ns();
		if (msync(p, len, MS_SYNC))
			die("msync");
		msync_ns = now_ns() - t0;
	}
	wall = now_ns() - wall;
	put(TRACEFS "/tracing_on", "0");
	syncs = sync_hits() - sync0;
	pmds = pmd_faults(&tries);
	munmap(p, len);
	if (fsync(fd) || fstat(fd, &st))
		die("fstat");
	close(fd);
	unlink(path);
	if (zdir)
		ms_fs_attr_set(zdir, MS_EXTENT_MAX_ZEROOUT_KB, zold);
	/* pages written: a pmd fault writes its 2 MiB, others one page */
	pages = write_fault ? count * (!strcmp(place, "pmd") ? 512 : 1) : 0;

	snprintf(path, sizeof(path), "%s-%s-%s-%s.txt", raw, map, fill, place);
	f = fopen(path, "w");
	if (!f)
		die(path);
	for (i = 0; i < count; i++)
		fprintf(f, "%llu\n", (unsigned long long)lat[i]);
	fclose(f);
	qsort(lat, count, sizeof(*lat), cmp_u64);
#define PCT(q) lat[(size_t)((q) * (count - 1))]
	printf("BENCH {\"label\":\"%s\",\"map\":\"%s\",\"fill\":\"%s\",\"place\":\"%s\","
	       "\"state\":\"%s\",\"order\":\"%s\",\"stride_kb\":%zu,\"hint_kb\":%ld,\"zeroout_kb\":%ld,"
	       "\"file_kb\":%zu,\"faults\":%zu,\"pages\":%zu,\"blocks\":%lld,"
	       "\"p50_ns\":%llu,\"p90_ns\":%llu,\"p99_ns\":%llu,\"p999_ns\":%llu,"
	       "\"mean_ns\":%llu,\"max_ns\":%llu,\"faults_per_s\":%.1f,\"msync_end_ns\":%llu,"
	       "\"sync_faults\":%ld,\"pmd_faults\":%ld,\"pmd_tries\":%ld,\"clock_ns\":%llu}\n",
	       label, map, fill, place, state, random_order ? "random" : "seq", step >> 10,
	       got_hint, zeroout_kb, len >> 10, count, pages, (long long)st.st_blocks / 8,
	       (unsigned long long)PCT(0.50), (unsigned long long)PCT(0.90),
	       (unsigned long long)PCT(0.99), (unsigned long long)PCT(0.999),
	       (unsigned long long)(sum / count), (unsigned long long)lat[count - 1],
	       count * 1e9 / (double)wall, (unsigned long long)msync_ns, syncs, pmds, tries,
	       (unsigned long long)clock_ns);
	return 0;
}
