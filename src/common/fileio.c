/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fileio.c - see fileio.h.
 */
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

/* fds collected per pass of fileio_close_all_but */
#define FILEIO_CLOSE_BATCH 1024

/*
 * The one read loop: until end of file or `size` bytes, retrying on EINTR.
 * With `at_start`, pread from offset 0 (the offset follows what was read)
 * instead of read from the current position.
 */
static ssize_t
fileio_read_loop(int fd, void *buf, size_t size, bool at_start)
{
	char *p = buf;
	size_t got = 0;

	while (got < size) {
		ssize_t n = at_start ?
		    pread(fd, p + got, size - got, (off_t)got) :
		    read(fd, p + got, size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

ssize_t
fileio_read_all(int fd, void *buf, size_t size)
{
	return fileio_read_loop(fd, buf, size, false);
}

ssize_t
fileio_pread_all(int fd, void *buf, size_t size)
{
	return fileio_read_loop(fd, buf, size, true);
}

static bool
fileio_kept(int fd, const int *keep, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (keep[i] == fd)
			return true;
	return false;
}

/*
 * One pass: lists up to FILEIO_CLOSE_BATCH fds that are not kept, then
 * closes them (not while listing: closing changes the directory being
 * read). Returns how many it closed, or -1.
 */
static int
fileio_close_pass(const int *keep, unsigned nkeep)
{
	int fds[FILEIO_CLOSE_BATCH], n = 0, rc;
	struct dirent *de;
	DIR *d;

	if ((d = opendir("/proc/self/fd")) == NULL)
		return -1;
	while (n < FILEIO_CLOSE_BATCH && (de = readdir(d)) != NULL) {
		char *end;
		long v;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		v = strtol(de->d_name, &end, 10);
		if (*end != '\0' || v > 2147483647L || v == dirfd(d) ||
		    fileio_kept((int)v, keep, nkeep))
			continue;
		fds[n++] = (int)v;
	}
	rc = closedir(d);
	/* close's own errors leave nothing to undo: the fd is gone either way */
	for (int i = 0; i < n; i++)
		(void)close(fds[i]);
	return rc == 0 ? n : -1;
}

bool
fileio_owner_only(const struct stat *st, uid_t owner)
{
	return (st->st_uid == 0 || st->st_uid == owner) &&
	    (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

int
fileio_close_all_but(const int *keep, unsigned n)
{
	int closed;

	/* a process with more fds than one batch takes more passes */
	do
		closed = fileio_close_pass(keep, n);
	while (closed == FILEIO_CLOSE_BATCH);
	return closed < 0 ? -1 : 0;
}
