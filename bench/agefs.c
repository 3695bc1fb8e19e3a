// SPDX-License-Identifier: GPL-2.0
/*
 * agefs: age a file system for the fault benchmark (guest side).
 *
 *   agefs DIR FULL_PERCENT
 *
 * Fragments the free space of the file system holding DIR the way years of
 * small files do: creates files of 4 to 64 KiB (a fixed pseudo-random
 * sequence of sizes, whole 4 KiB blocks, written with pwrite) in
 * DIR/aged/ until the file system is FULL_PERCENT full, syncs, then removes
 * every other file.  What is left free is, apart from the tail that was
 * never filled, holes of 4-64 KiB between live files: an allocation that
 * needs more than a hole takes several extents, and 2 MiB-aligned free
 * extents are rare.  Prints one line: files made and removed, and the free
 * space before and after.  Exit 0, or 1 with the failing call.
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

static unsigned long free_kb(const char *dir)
{
	struct statvfs sv;

	if (statvfs(dir, &sv)) {
		fprintf(stderr, "agefs: statvfs %s: %s\n", dir, strerror(errno));
		exit(1);
	}
	return sv.f_bavail * (sv.f_frsize / 1024);
}

static unsigned long total_kb(const char *dir)
{
	struct statvfs sv;

	if (statvfs(dir, &sv)) {
		fprintf(stderr, "agefs: statvfs %s: %s\n", dir, strerror(errno));
		exit(1);
	}
	return sv.f_blocks * (sv.f_frsize / 1024);
}

int main(int argc, char **argv)
{
	static char buf[64 << 10];
	unsigned long total, full, before, made = 0, removed = 0, i;
	unsigned int seed = 12345;
	char path[4096];
	int fd;

	if (argc != 3 || atoi(argv[2]) < 1 || atoi(argv[2]) > 99) {
		fprintf(stderr, "usage: agefs DIR FULL_PERCENT (1-99)\n");
		return 2;
	}
	memset(buf, 0xa5, sizeof(buf));
	snprintf(path, sizeof(path), "%s/aged", argv[1]);
	if (mkdir(path, 0755) && errno != EEXIST) {
		fprintf(stderr, "agefs: mkdir %s: %s\n", path, strerror(errno));
		return 1;
	}
	total = total_kb(argv[1]);
	full = total * (unsigned long)atoi(argv[2]) / 100;
	before = free_kb(argv[1]);
	while (total - free_kb(argv[1]) < full) {
		size_t len;

		seed = seed * 1103515245 + 12345;
		len = (((seed >> 16) % 16) + 1) * 4096;	/* 4..64 KiB */
		snprintf(path, sizeof(path), "%s/aged/%lu", argv[1], made);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0 || pwrite(fd, buf, len, 0) != (ssize_t)len) {
			if (errno == ENOSPC) {
				if (fd >= 0)
					close(fd);
				break;
			}
			fprintf(stderr, "agefs: write %s: %s\n", path, strerror(errno));
			return 1;
		}
		close(fd);
		made++;
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
	printf("agefs: %s: %lu files of 4-64 KiB made (to %d%% full), %lu removed; free %lu MiB before, %lu MiB after\n",
	       argv[1], made, atoi(argv[2]), removed, before >> 10, free_kb(argv[1]) >> 10);
	return 0;
}
