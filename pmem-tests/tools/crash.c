// SPDX-License-Identifier: GPL-2.0
/*
 * crash: the guest side of the power-failure tests (qemu/crash).
 *
 *   crash write DIR KIND CASE...   write records, print "REC path seq off" on
 *                                  stdout right after each one is persisted
 *   crash loop DIR KIND [PREP]     the same with 4 KiB faults in one file,
 *                                  until the plug is pulled (prints
 *                                  "WRITER-START KIND" first, "WRITER-END
 *                                  KIND" if it reaches the end of the file).
 *                                  PREP: sparse (default), fallocate (ext4's
 *                                  MAP_SYNC look-ahead converts ranges of
 *                                  it, 0011) or extsize (an xfs extent size
 *                                  hint of 128 KiB, which 0012 honours)
 *   crash check RECORDS            verify every record of a REC list
 *   crash poison DIR MIB           fill up to MIB MiB of free space (all of
 *                                  it if MIB is larger) with a marker (a file
 *                                  written, synced, deleted), and note where
 *                                  it was in DIR/poisoned
 *   crash scan DIR                 after recovery: count marker words in
 *                                  every file (old data of freed blocks made
 *                                  reachable), and the blocks files now use
 *                                  that were poisoned (0: nothing proved)
 *
 * KIND is how a record is made durable:
 *   sync    MAP_SHARED_VALIDATE|MAP_SYNC, CPU cache flushes only (pmem_persist)
 *   shared  MAP_SHARED, CPU cache flushes only: no msync (a control that must lose)
 *   msync   MAP_SHARED, CPU cache flushes, then msync(MS_SYNC)
 * CASE is where the records go:
 *   sparse    pages of a file truncated up (holes)
 *   fallocate pages of a fallocated (unwritten) range
 *   extend    pages past the old EOF, after ftruncate extends the file
 *   pmd       one record per 2 MiB extent of a 2 MiB-aligned mapping
 *   files     one record in each of many small new files
 *   eof       one record in the EOF page of each of many written, synced
 *             files of 2 pages + 100 bytes (an overwrite: needs no sync)
 *   reflink   (xfs -m reflink=1) one record per page of a clone (FICLONE)
 *             of a file whose pages hold records of their own: every store
 *             a copy-on-write fault; the source's records are acknowledged
 *             too (synced before the clone is made), to show it unchanged
 * Every file of a case is created and sized, then fsynced (with its
 * directory), before the first record of the case is written: after that
 * nothing but the records' own writes (and what KIND does) touches the
 * file system, so only what the records' writes did is at stake.  The host
 * gives each case a file system of its own (pmem-tests/crash-guest): an
 * fsync anywhere on a file system commits its one journal (ext4) or log
 * (xfs) for every file on it.
 */
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <libpmem.h>
#include <limits.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>
#include "mapsync.h"

#define PG 4096UL
#define PMD (2UL << 20)
#define NREC 64			/* records per case */
#define MAGIC 0x6d617073796e6321ULL

struct rec {
	uint64_t magic, seq, off, payload[4], csum;
};

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t rec_sum(const struct rec *r)
{
	const unsigned char *p = (const void *)r;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < offsetof(struct rec, csum); i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

static void rec_make(struct rec *r, uint64_t seq, uint64_t off)
{
	int i;

	r->magic = MAGIC;
	r->seq = seq;
	r->off = off;
	for (i = 0; i < 4; i++)
		r->payload[i] = mix(seq * 4 + i + off);
	r->csum = rec_sum(r);
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "crash: %s %s: %s\n", what, path, strerror(errno));
	exit(2);
}

static uint64_t seq;
static int kind_flags;		/* mmap flags */
static int kind_msync;
static const char *loop_prep = "sparse";

static void ack(const char *path, uint64_t s, uint64_t off)
{
	char line[PATH_MAX + 64];
	int n = snprintf(line, sizeof(line), "REC %s %llu %llu\n", path,
			 (unsigned long long)s, (unsigned long long)off);

	/* unbuffered: once it is on the wire the host counts it */
	if (write(1, line, n) != n)
		exit(2);
}

/* Write one record at off through the mapping, make it durable, ack it. */
static void put(const char *path, char *map, uint64_t off)
{
	struct rec *r = (struct rec *)(map + off);

	rec_make(r, ++seq, off);
	pmem_persist(r, sizeof(*r));
	if (kind_msync && msync(map + (off & ~(PG - 1)), PG, MS_SYNC))
		die("msync", path);
	ack(path, seq, off);
}

static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	int ret;

	if (fd < 0)
		return -1;
	ret = fsync(fd);
	close(fd);
	return ret;
}

/* Create path sized size (prepared as the case says), durable before use. */
static char *prepare(const char *dir, const char *path, const char *cas, size_t size,
		     size_t *maplen)
{
	size_t len = size;
	char *map;
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("create", path);
	if (!strcmp(cas, "pte") && !strcmp(loop_prep, "extsize")) {
		struct fsxattr fa;

		/* before the file has blocks: the hint only applies then */
		if (ioctl(fd, FS_IOC_FSGETXATTR, &fa))
			die("FS_IOC_FSGETXATTR", path);
		fa.fsx_xflags |= FS_XFLAG_EXTSIZE;
		fa.fsx_extsize = 128 << 10;
		if (ioctl(fd, FS_IOC_FSSETXATTR, &fa))
			die("extent size hint", path);
	}
	if (!strcmp(cas, "fallocate") || (!strcmp(cas, "pte") && !strcmp(loop_prep, "fallocate"))) {
		if (fallocate(fd, 0, 0, size))
			die("fallocate", path);
	} else if (!strcmp(cas, "eof")) {
		char buf[2 * PG + 100];

		memset(buf, 'f', sizeof(buf));
		if (pwrite(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
			die("write", path);
	} else if (!strcmp(cas, "extend")) {
		/* one written page, synced; records go past this EOF */
		char page[PG];

		memset(page, 'e', sizeof(page));
		if (pwrite(fd, page, PG, 0) != (ssize_t)PG)
			die("write", path);
	} else if (ftruncate(fd, size)) {	/* sparse, pmd, pte, files */
		die("ftruncate", path);
	}
	if (fsync(fd) || sync_dir(dir))
		die("fsync", path);
	if (!strcmp(cas, "extend") && ftruncate(fd, size))	/* not synced */
		die("ftruncate", path);
	if (!strcmp(cas, "pmd"))	/* 2 MiB faults */
		map = ms_map_placed(len, PROT_READ | PROT_WRITE, kind_flags, fd, MS_PLACE_PMD);
	else if (!strcmp(cas, "pte"))	/* 4 KiB faults only: placed off a 2 MiB boundary */
		map = ms_map_placed(len, PROT_READ | PROT_WRITE, kind_flags, fd, MS_PLACE_PTE);
	else
		map = mmap(NULL, len, PROT_READ | PROT_WRITE, kind_flags, fd, 0);
	if (map == MAP_FAILED)
		die("mmap", path);
	close(fd);
	*maplen = len;
	return map;
}

/*
 * reflink: DIR/reflink-src, NREC+1 pages of 's' with a record in each of
 * the first NREC pages (at the offsets the other cases use), written and
 * synced; DIR/reflink-KIND a clone of it (FICLONE), synced with the
 * directory; the source's records acknowledged (they are durable); then
 * through a KIND mapping of the clone a new record (a new seq) at each of
 * those offsets: a copy-on-write store into a shared block, which xfs
 * writes into a new block and then remaps into the clone
 * (xfs_reflink_end_cow(), a transaction) when the fault ends.
 *
 * After the cut, the clone holds its own records only if the remaps
 * reached the log on the NVDIMM; otherwise its pages are the shared
 * blocks again and read the source's records ("contents differ").  With
 * MAP_SYNC the fault syncs them (dax_finish_sync_fault() -> fsync -> log
 * force) before the store can happen.  On a kernel whose MAP_SYNC does
 * nothing (mutant dax-sync-fault-noop: dax_finish_sync_fault() returns
 * without the fsync) no record of the sync unit is durable: nothing else
 * forces this file system's log between the clone's fsync and the cut
 * (the log worker is stopped, crash-guest), the data reached the new
 * blocks but the remaps stayed in the CIL in DRAM, and the clone reads the
 * source's records after recovery: every clone record is lost, as the
 * control's (MAP_SHARED, no msync) are on every kernel.  The source's
 * records must be found on every kernel: a CoW store must never reach the
 * shared block.
 */
static void reflink_case(const char *dir, const char *kind)
{
	static char buf[(NREC + 1) * PG];
	char src[PATH_MAX], path[PATH_MAX];
	uint64_t first = seq + 1;
	size_t len = sizeof(buf), i;
	int sfd, cfd;
	char *map;

	snprintf(src, sizeof(src), "%s/reflink-src", dir);
	snprintf(path, sizeof(path), "%s/reflink-%s", dir, kind);
	memset(buf, 's', len);
	for (i = 0; i < NREC; i++)
		rec_make((struct rec *)(buf + i * PG + 64 * (i % 8)), ++seq, i * PG + 64 * (i % 8));
	sfd = open(src, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (sfd < 0)
		die("create", src);
	if (pwrite(sfd, buf, len, 0) != (ssize_t)len || fsync(sfd))
		die("write", src);
	cfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (cfd < 0)
		die("create", path);
	if (ioctl(cfd, FICLONE, sfd))
		die("FICLONE", path);
	if (fsync(cfd) || fsync(sfd) || sync_dir(dir))
		die("fsync", path);
	for (i = 0; i < NREC; i++)
		ack(src, first + i, i * PG + 64 * (i % 8));
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, kind_flags, cfd, 0);
	if (map == MAP_FAILED)
		die("mmap", path);
	close(cfd);
	close(sfd);
	for (i = 0; i < NREC; i++)
		put(path, map, i * PG + 64 * (i % 8));
	munmap(map, len);
}

static void write_case(const char *dir, const char *cas, const char *kind)
{
	char path[PATH_MAX];
	size_t len, i;
	char *map;

	if (!strcmp(cas, "files") || !strcmp(cas, "eof")) {
		bool eof = !strcmp(cas, "eof");
		size_t n = eof ? 16 : NREC;
		static char *maps[NREC];

		/* every file prepared (and synced) before the first record:
		 * preparing file i+1 would commit the record of file i */
		for (i = 0; i < n; i++) {
			snprintf(path, sizeof(path), "%s/%s-%s-%03zu", dir, cas, kind, i);
			maps[i] = prepare(dir, path, cas, eof ? 3 * PG : PG, &len);
		}
		for (i = 0; i < n; i++) {
			snprintf(path, sizeof(path), "%s/%s-%s-%03zu", dir, cas, kind, i);
			put(path, maps[i], eof ? 2 * PG : 0);
		}
		for (i = 0; i < n; i++)
			munmap(maps[i], len);
		return;
	}
	if (!strcmp(cas, "reflink")) {
		reflink_case(dir, kind);
		return;
	}
	snprintf(path, sizeof(path), "%s/%s-%s", dir, cas, kind);
	if (!strcmp(cas, "pmd")) {
		map = prepare(dir, path, cas, 8 * PMD, &len);
		for (i = 0; i < 8; i++)
			put(path, map, i * PMD + 64 * i);
	} else {
		map = prepare(dir, path, cas, (NREC + 1) * PG, &len);
		for (i = 0; i < NREC; i++)
			put(path, map, (i + (!strcmp(cas, "extend") ? 1 : 0)) * PG + 64 * (i % 8));
	}
	munmap(map, len);
}

static int set_kind(const char *kind)
{
	if (!strcmp(kind, "sync"))
		kind_flags = MAP_SHARED_VALIDATE | MAP_SYNC;
	else if (!strcmp(kind, "shared"))
		kind_flags = MAP_SHARED;
	else if (!strcmp(kind, "msync"))
		kind_flags = MAP_SHARED, kind_msync = 1;
	else
		return -1;
	return 0;
}

/* Is [off, off+len) of fd in a written (mapped, not unwritten) extent? */
static int written_extent(int fd, uint64_t off, uint64_t len)
{
	struct {
		struct fiemap fm;
		struct fiemap_extent fe[1];
	} f;

	memset(&f, 0, sizeof(f));
	f.fm.fm_start = off;
	f.fm.fm_length = len;
	f.fm.fm_flags = FIEMAP_FLAG_SYNC;
	f.fm.fm_extent_count = 1;
	if (ioctl(fd, FS_IOC_FIEMAP, &f.fm))
		return -1;
	if (f.fm.fm_mapped_extents < 1 || f.fe[0].fe_logical > off)
		return 0;
	return !(f.fe[0].fe_flags & FIEMAP_EXTENT_UNWRITTEN);
}

static int check(const char *list)
{
	char path[PATH_MAX], reason[256];
	unsigned long long s, off;
	int total = 0, lost = 0;
	FILE *f = fopen(list, "r");

	if (!f)
		die("open", list);
	while (fscanf(f, "REC %4095s %llu %llu\n", path, &s, &off) == 3) {
		struct rec want, got;
		struct stat st;
		int fd, w;

		total++;
		rec_make(&want, s, off);
		reason[0] = 0;
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			snprintf(reason, sizeof(reason), "file missing (%s)", strerror(errno));
		} else if (fstat(fd, &st) || (uint64_t)st.st_size < off + sizeof(want)) {
			snprintf(reason, sizeof(reason), "file size %lld < %llu",
				 (long long)st.st_size, off + sizeof(want));
		} else if (pread(fd, &got, sizeof(got), off) != sizeof(got)) {
			snprintf(reason, sizeof(reason), "read: %s", strerror(errno));
		} else if (memcmp(&got, &want, sizeof(got))) {
			snprintf(reason, sizeof(reason), "contents differ (magic %#llx seq %llu)",
				 (unsigned long long)got.magic, (unsigned long long)got.seq);
		} else if ((w = written_extent(fd, off, sizeof(want))) != 1) {
			snprintf(reason, sizeof(reason), "%s", w < 0 ? "FIEMAP failed" :
				 "block is a hole or unwritten");
		}
		if (fd >= 0)
			close(fd);
		if (reason[0]) {
			lost++;
			printf("LOST %s seq %llu off %llu: %s\n", path, s, off, reason);
		}
	}
	fclose(f);
	printf("acknowledged %d found %d lost %d\n", total, total - lost, lost);
	return 0;
}

#define STALE 0x454c4154535f4f44ULL	/* the marker of poisoned blocks */

#define MAXEXT 4096
static struct fiemap_extent poisoned[MAXEXT], ext[MAXEXT];
static int npoisoned;

static int poison(const char *dir, long mib)
{
	static uint64_t buf[(1 << 20) / sizeof(uint64_t)];
	char path[PATH_MAX];
	FILE *f;
	long i, mb;
	int fd, n;

	for (i = 0; i < (long)(sizeof(buf) / sizeof(buf[0])); i++)
		buf[i] = STALE;
	snprintf(path, sizeof(path), "%s/poison", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("create", path);
	for (mb = 0; mb < mib; mb++)
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			break;	/* ENOSPC: poisoned what there was ... */
	if (mb < mib)	/* ... up to its last pages */
		while (write(fd, buf, PG) == (ssize_t)PG)
			;
	if (fsync(fd))
		die("fsync", path);
	n = ms_fiemap(fd, ext, MAXEXT);
	if (n <= 0)
		die("FIEMAP", path);
	close(fd);
	if (unlink(path) || sync_dir(dir))
		die("unlink", path);
	sync();	/* the deletion committed: the blocks are free, and stay free */
	/* the list after the deletion: the file system may be full until then
	 * (scan skips the list, which may now sit on poisoned blocks) */
	snprintf(path, sizeof(path), "%s/poisoned", dir);
	f = fopen(path, "w");
	if (!f)
		die("create", path);
	for (i = 0; i < n; i++)
		fprintf(f, "%llu %llu\n", (unsigned long long)ext[i].fe_physical,
			(unsigned long long)ext[i].fe_length);
	if (fflush(f) || fsync(fileno(f)) || sync_dir(dir))
		die("fsync", path);
	fclose(f);
	printf("POISONED %ld MiB in %d extents\n", mb, n);
	return 0;
}

static long stale_words, stale_files, reused_bytes;

static int scan_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	static uint64_t buf[(1 << 20) / sizeof(uint64_t)];
	long words = 0;
	ssize_t got;
	off_t off = 0;
	int fd, n, i, j;

	if (type != FTW_F || !S_ISREG(st->st_mode) || !strcmp(path + ftw->base, "poisoned"))
		return 0;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open", path);
	while ((got = pread(fd, buf, sizeof(buf), off)) > 0) {
		for (i = 0; i < got / (ssize_t)sizeof(buf[0]); i++)
			words += buf[i] == STALE;
		off += got;
	}
	n = ms_fiemap(fd, ext, MAXEXT);
	for (i = 0; i < n; i++)
		for (j = 0; j < npoisoned; j++) {
			uint64_t a = ext[i].fe_physical, b = a + ext[i].fe_length;
			uint64_t c = poisoned[j].fe_physical, d = c + poisoned[j].fe_length;

			if (a < d && c < b)
				reused_bytes += (b < d ? b : d) - (a > c ? a : c);
		}
	close(fd);
	if (words) {
		if (stale_files++ < 5)
			printf("STALE %s: %ld marker words\n", path, words);
		stale_words += words;
	}
	return 0;
}

static int scan(const char *dir)
{
	char path[PATH_MAX];
	unsigned long long a, b;
	FILE *f;

	snprintf(path, sizeof(path), "%s/poisoned", dir);
	f = fopen(path, "r");
	if (!f)
		die("open", path);
	while (npoisoned < MAXEXT && fscanf(f, "%llu %llu\n", &a, &b) == 2) {
		poisoned[npoisoned].fe_physical = a;
		poisoned[npoisoned++].fe_length = b;
	}
	fclose(f);
	if (nftw(dir, scan_one, 16, FTW_PHYS))
		die("scan", dir);
	printf("stale %ld files %ld reused %ld\n", stale_words, stale_files, reused_bytes / 4096);
	return 0;
}

int main(int argc, char **argv)
{
	int i;

	if (argc >= 3 && !strcmp(argv[1], "check"))
		return check(argv[2]);
	if (argc >= 4 && !strcmp(argv[1], "poison"))
		return poison(argv[2], atol(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "scan"))
		return scan(argv[2]);
	if (argc < 4 || set_kind(argv[3])) {
		fprintf(stderr, "usage: crash write DIR sync|shared|msync CASE...\n"
				"       crash loop DIR sync|shared|msync [sparse|fallocate|extsize]\n"
				"       crash check RECORDS\n"
				"       crash poison DIR MIB\n"
				"       crash scan DIR\n");
		return 2;
	}
	if (!strcmp(argv[1], "write")) {
		for (i = 4; i < argc; i++)
			write_case(argv[2], argv[i], argv[3]);
		tcdrain(1);	/* every ack on the wire before the plug is pulled */
		return 0;
	}
	if (!strcmp(argv[1], "loop")) {
		char path[PATH_MAX];
		/* 512 MiB: longer than the longest cut delay even with the MAP_SYNC
		 * look-ahead (about 12,000 records a second under TCG) */
		size_t len, n = 131072, i;
		char *map;

		if (argc > 4)
			loop_prep = argv[4];
		if (strcmp(loop_prep, "sparse") && strcmp(loop_prep, "fallocate") &&
		    strcmp(loop_prep, "extsize")) {
			fprintf(stderr, "crash: loop: PREP %s: sparse, fallocate or extsize\n", loop_prep);
			return 2;
		}
		snprintf(path, sizeof(path), "%s/loop-%s", argv[2], argv[3]);
		/* 4 KiB faults: allocating and synchronous, one per record in a
		 * sparse file, one per range with the look-ahead of 0011 (a
		 * fallocated file on ext4) or 0012 (an extent size hint on xfs) */
		map = prepare(argv[2], path, "pte", n * PG, &len);
		printf("WRITER-START %s (%s)\n", argv[3], loop_prep);
		fflush(stdout);
		for (i = 0; i < n; i++)
			put(path, map, i * PG + 64 * (i % 8));
		printf("WRITER-END %s\n", argv[3]);
		fflush(stdout);
		tcdrain(1);
		return 0;
	}
	fprintf(stderr, "crash: unknown command %s\n", argv[1]);
	return 2;
}
