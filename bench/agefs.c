// SPDX-License-Identifier: GPL-2.0
/*
 * agefs: age a file system for the fault benchmark (guest side).
 *
 *   agefs DIR FULL_PERCENT
 *
 * Fragments the free space of the file system holding DIR the way years of
 * small files do: creates files of 4 to 64 KiB (a fixed pseudo-random
 * sequence of sizes, whole 4 KiB blocks, written with pwrite) in
 * DIR/aged/ until FULL_PERCENT of all the file system's blocks are used
 * (f_bfree: ext4's blocks reserved for root count as free, and root may
 * fill them) or it runs out of space, syncs, then removes every other
 * file.  What is left free is, apart from the part that was never filled,
 * holes of 4-64 KiB between live files: an allocation that needs more
 * than a hole takes several extents, and 2 MiB-aligned free extents are
 * rare.  Prints one line: files made and removed, and the free space
 * before and after.  Exit 0; 1 with the failing call, or if the file
 * system ran out of space below FULL_PERCENT - 5; 2 on bad arguments.
 * Run it as root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* total or free 1 KiB units of the file system holding dir */
static unsigned long fs_kb(const char *dir, int want_free)
{
	struct statvfs sv;

	if (statvfs(dir, &sv)) {
		fprintf(stderr, "agefs: statvfs %s: %s\n", dir, strerror(errno));
		exit(1);
	}
	return (want_free ? sv.f_bfree : sv.f_blocks) * (sv.f_frsize / 1024);
}

int main(int argc, char **argv)
{
	static char buf[64 << 10];
	unsigned long total, full, before, made = 0, removed = 0, i;
	unsigned int seed = 12345;
	char path[4096], *end = "";
	long pct = 0;
	int fd;

	if (argc == 3)
		pct = strtol(argv[2], &end, 10);
	if (argc != 3 || *end || pct < 1 || pct > 99) {
		fprintf(stderr, "usage: agefs DIR FULL_PERCENT (1-99)\n");
		return 2;
	}
	memset(buf, 0xa5, sizeof(buf));
	snprintf(path, sizeof(path), "%s/aged", argv[1]);
	if (mkdir(path, 0755) && errno != EEXIST) {
		fprintf(stderr, "agefs: mkdir %s: %s\n", path, strerror(errno));
		return 1;
	}
	total = fs_kb(argv[1], 0);
	full = total * pct / 100;
	before = fs_kb(argv[1], 1);
	while (total - fs_kb(argv[1], 1) < full) {
		size_t len;
		ssize_t n;

		seed = seed * 1103515245 + 12345;
		len = (((seed >> 16) % 16) + 1) * 4096;	/* 4..64 KiB */
		snprintf(path, sizeof(path), "%s/aged/%lu", argv[1], made);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0 && errno == ENOSPC)
			break;
		if (fd < 0) {
			fprintf(stderr, "agefs: create %s: %s\n", path, strerror(errno));
			return 1;
		}
		n = pwrite(fd, buf, len, 0);
		close(fd);
		if (n != (ssize_t)len) {
			/* a short write is the file system running out too */
			if (n >= 0 || errno == ENOSPC) {
				unlink(path);
				break;
			}
			fprintf(stderr, "agefs: write %s: %s\n", path, strerror(errno));
			return 1;
		}
		made++;
	}
	if ((total - fs_kb(argv[1], 1)) * 100 < total * (unsigned long)(pct - 5)) {
		fprintf(stderr, "agefs: %s ran out of space at %lu%% of its blocks, below %ld%%\n",
			argv[1], (total - fs_kb(argv[1], 1)) * 100 / total, pct - 5);
		return 1;
	}
	sync();
	for (i = 1; i < made; i += 2) {
		snprintf(path, sizeof(path), "%s/aged/%lu", argv[1], i);
		if (unlink(path)) {
			fprintf(stderr, "agefs: unlink %s: %s\n", path, strerror(errno));
			return 1;
		}
		removed++;
	}
	sync();
	printf("agefs: %s: %lu files of 4-64 KiB made (to %ld%% of all blocks), %lu removed; "
	       "free %lu MiB before, %lu MiB after\n",
	       argv[1], made, pct, removed, before >> 10, fs_kb(argv[1], 1) >> 10);
	return 0;
}
