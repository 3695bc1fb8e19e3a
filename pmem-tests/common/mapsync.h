/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by the pmem-tests programs (guest side). */
#ifndef MAPSYNC_H
#define MAPSYNC_H
#include <stdbool.h>
#include <stddef.h>

/* The mounts pmem-tests/run prepares; each is named by an environment variable. */
enum ms_mount {
	MS_EXT4_DAX,
	MS_EXT4_NODAX,
	MS_XFS_DAX,
	MS_XFS_NODAX,
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
#endif
