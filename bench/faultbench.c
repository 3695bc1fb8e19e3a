// SPDX-License-Identifier: GPL-2.0
/*
 * faultbench: time page faults one by one (guest side of bench/bench).
 *
 *   faultbench DIR MAP STATE SIZE COUNT RAWFILE LABEL
 *
 * MAP    sync (MAP_SHARED_VALIDATE|MAP_SYNC), shared (MAP_SHARED),
 *        msync-each (MAP_SHARED + msync of the page after each fault),
 *        msync-end (MAP_SHARED, one msync of everything at the end)
 * STATE  hole (sparse file), unwritten (fallocated), written (written and
 *        fsynced: overwrite faults), read (written and fsynced: read faults);
 *        with "-random" (hole-random...) the pages are touched in a random
 *        order (a fixed permutation), else from the first to the last;
 *        with "-stride" one page in every 64 KiB (a deliberately sparse file)
 * SIZE   4k or 2m: the fault size asked for (2m: 2 MiB-aligned mapping)
 *
 * Each fault is the first touch of one page (or 2 MiB extent), timed with
 * CLOCK_MONOTONIC around the access, after a warm-up of 64 faults on
 * another file.  Writes every latency (ns) to RAWFILE, and prints one line
 * "BENCH {json}" with percentiles, the msync time (msync-end), the number
 * of synchronous faults counted by a kprobe on dax_finish_sync_fault, and
 * for 2m the number of faults that really were 2 MiB faults (a
 * dax_pmd_fault_done event with any result but FALLBACK).  alloc_kb is the
 * file system's sync_fault_alloc_kb (the MAP_SYNC allocation look-ahead of
 * kernel-patches 0011/0012), -1 on a kernel without it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "mapsync.h"

#define PMD (2UL << 20)
#define TRACEFS "/sys/kernel/tracing"

static void die(const char *what)
{
	fprintf(stderr, "faultbench: %s: %s\n", what, strerror(errno));
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

static int trace_setup(int pmd)
{
	put(TRACEFS "/tracing_on", "0");
	put(TRACEFS "/events/mapsync/syncfault/enable", "0");
	put(TRACEFS "/kprobe_events", "");	/* also resets the hit count */
	if (put(TRACEFS "/kprobe_events", "p:mapsync/syncfault dax_finish_sync_fault") ||
	    put(TRACEFS "/events/mapsync/syncfault/enable", "1"))
		return -1;
	put(TRACEFS "/events/fs_dax/dax_pmd_fault_done/enable", pmd ? "1" : "0");
	put(TRACEFS "/events/fs_dax/dax_pte_fault_done/enable", "0");
	put(TRACEFS "/trace", "");
	return put(TRACEFS "/tracing_on", "1");
}

/* 2 MiB faults that were served as such: any result but FALLBACK */
static long pmd_faults(void)
{
	char line[1024];
	long n = 0;
	FILE *f = fopen(TRACEFS "/trace", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "dax_pmd_fault_done") && !strstr(line, "FALLBACK"))
			n++;
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

static char *map_file(const char *path, const char *state, size_t len, int flags, int pmd)
{
	static char buf[1 << 20];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	size_t off;
	char *p;

	if (fd < 0)
		die(path);
	if (!strncmp(state, "hole", 4)) {
		if (ftruncate(fd, len))
			die("ftruncate");
	} else if (!strncmp(state, "unwritten", 9)) {
		if (fallocate(fd, 0, 0, len))
			die("fallocate");
	} else {
		memset(buf, 'w', sizeof(buf));
		for (off = 0; off < len; off += sizeof(buf))
			if (pwrite(fd, buf, sizeof(buf), off) != (ssize_t)sizeof(buf))
				die("pwrite");
	}
	if (fsync(fd))
		die("fsync");
	/* pmd: 2 MiB faults possible; else 4 KiB past a 2 MiB boundary: none */
	p = ms_map_placed(len, PROT_READ | PROT_WRITE, flags, fd, pmd ? MS_PLACE_PMD : MS_PLACE_PTE);
	if (p == MAP_FAILED)
		die("mmap");
	close(fd);
	return p;
}

int main(int argc, char **argv)
{
	const char *dir, *map, *state, *raw, *label;
	uint64_t *lat, t0, t1, sum = 0, msync_ns = 0, wall;
	int flags, pmd, write_fault, each = 0, end = 0;
	size_t step, count, i, j, t, len, *order;
	char path[4096], *p;
	long sync0, syncs, pmds = -1, alloc_kb;
	FILE *f;

	if (argc != 8) {
		fprintf(stderr, "usage: faultbench DIR sync|shared|msync-each|msync-end "
				"hole|unwritten|written|read[-random] 4k|2m COUNT RAWFILE LABEL\n");
		return 2;
	}
	dir = argv[1], map = argv[2], state = argv[3], raw = argv[6], label = argv[7];
	pmd = !strcmp(argv[4], "2m");
	step = pmd ? PMD : strstr(state, "-stride") ? 65536 : 4096;
	count = strtoul(argv[5], NULL, 0);
	flags = !strcmp(map, "sync") ? MAP_SHARED_VALIDATE | MAP_SYNC : MAP_SHARED;
	each = !strcmp(map, "msync-each");
	end = !strcmp(map, "msync-end");
	write_fault = strncmp(state, "read", 4);
	len = count * step;
	lat = calloc(count, sizeof(*lat));
	order = calloc(count, sizeof(*order));
	if (!lat || !order)
		die("calloc");
	for (i = 0; i < count; i++)
		order[i] = i;
	if (strstr(state, "-random")) {
		srandom(1);	/* the same permutation in every run */
		for (i = count - 1; i > 0; i--) {
			j = random() % (i + 1);
			t = order[i], order[i] = order[j], order[j] = t;
		}
	}
	alloc_kb = ms_fs_attr_get(dir, MS_EXTENT_MAX_ZEROOUT_KB);

	/* warm-up: the same kind of faults on another file */
	snprintf(path, sizeof(path), "%s/warmup", dir);
	p = map_file(path, state, 64 * step, flags, pmd);
	for (i = 0; i < 64; i++)
		p[i * step] = p[i * step] + 1;
	munmap(p, 64 * step);
	unlink(path);

	snprintf(path, sizeof(path), "%s/bench", dir);
	p = map_file(path, state, len, flags, pmd);
	if (trace_setup(pmd))
		die("kprobe on dax_finish_sync_fault (tracefs, KPROBE_EVENTS)");
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
	if (pmd)
		pmds = pmd_faults();
	munmap(p, len);
	unlink(path);

	f = fopen(raw, "w");
	if (!f)
		die(raw);
	for (i = 0; i < count; i++)
		fprintf(f, "%llu\n", (unsigned long long)lat[i]);
	fclose(f);
	qsort(lat, count, sizeof(*lat), cmp_u64);
#define PCT(q) lat[(size_t)((q) * (count - 1))]
	printf("BENCH {\"label\":\"%s\",\"map\":\"%s\",\"state\":\"%s\",\"size\":\"%s\","
	       "\"faults\":%zu,\"p50_ns\":%llu,\"p90_ns\":%llu,\"p99_ns\":%llu,\"p999_ns\":%llu,"
	       "\"mean_ns\":%llu,\"max_ns\":%llu,\"faults_per_s\":%.1f,\"msync_end_ns\":%llu,"
	       "\"sync_faults\":%ld,\"pmd_faults\":%ld,\"alloc_kb\":%ld}\n",
	       label, map, state, argv[4], count,
	       (unsigned long long)PCT(0.50), (unsigned long long)PCT(0.90),
	       (unsigned long long)PCT(0.99), (unsigned long long)PCT(0.999),
	       (unsigned long long)(sum / count), (unsigned long long)lat[count - 1],
	       count * 1e9 / (double)wall, (unsigned long long)msync_ns, syncs, pmds, alloc_kb);
	return 0;
}
