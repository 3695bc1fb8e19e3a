// SPDX-License-Identifier: GPL-2.0
/* Helpers shared by the pmem-tests programs (guest side). */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mapsync.h"

static const char *const mount_env[MS_NR_MOUNTS] = {
	[MS_EXT4_DAX] = "MAPSYNC_EXT4_DAX",
	[MS_EXT4_NODAX] = "MAPSYNC_EXT4_NODAX",
	[MS_XFS_DAX] = "MAPSYNC_XFS_DAX",
	[MS_XFS_NODAX] = "MAPSYNC_XFS_NODAX",
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
