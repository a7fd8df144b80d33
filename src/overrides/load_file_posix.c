/* SPDX-License-Identifier: Apache-2.0 */
/*
 * load_file_posix.c - overrides_load (overrides.h) on Linux: the path must
 * be one nobody else can swap (pathwalk.h), the file a regular one owned
 * by root or zeusd's user and writable by neither group nor world
 * (group-writable warns). Windows: load_file_win.c.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/log.h"
#include "common/pathwalk.h"
#include "toml.h"

/* The trust check, on the descriptor actually read (no race with a swap). */
static int
ovload_trust(int fd, const char *path, struct stat *st, struct zerr *err)
{
	uid_t euid = geteuid();

	if (fstat(fd, st) < 0)
		return zerr_set(err, ZERR_INTERNAL, "%s: cannot stat: %s",
		    path, strerror(errno));
	if (!S_ISREG(st->st_mode))
		return zerr_set(err, ZERR_FORBIDDEN, "%s: not a regular file",
		    path);
	if (st->st_uid != 0 && st->st_uid != euid)
		return zerr_set(err, ZERR_FORBIDDEN, "%s: owned by uid %u, "
		    "which is neither root nor the daemon's user (uid %u); "
		    "refusing to run commands from it", path,
		    (unsigned)st->st_uid, (unsigned)euid);
	if (st->st_mode & S_IWOTH)
		return zerr_set(err, ZERR_FORBIDDEN, "%s: world-writable "
		    "(mode %04o); refusing to run commands from it", path,
		    (unsigned)(st->st_mode & 07777));
	if (st->st_mode & S_IWGRP) {
		char q[512];

		zlog(ZLOG_WARN, "overrides_file_group_writable",
		    "path=%s mode=%04o", zlog_quote(q, sizeof(q), path),
		    (unsigned)(st->st_mode & 07777));
	}
	return 0;
}

static int
ovload_read_all(int fd, const char *path, char **text, size_t *len,
    struct zerr *err)
{
	/* one byte more than allowed tells "at the limit" from "too large" */
	char *buf = malloc(TOML_MAX_INPUT + 1);
	ssize_t n;

	if (buf == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	n = fileio_read_all(fd, buf, TOML_MAX_INPUT + 1);
	if (n < 0) {
		free(buf);
		return zerr_set(err, ZERR_INTERNAL, "%s: cannot read: %s", path,
		    strerror(errno));
	}
	if (n > TOML_MAX_INPUT) {
		free(buf);
		return zerr_set(err, ZERR_INVALID, "%s: larger than %d bytes",
		    path, TOML_MAX_INPUT);
	}
	*text = buf;
	*len = (size_t)n;
	return 0;
}

int
overrides_load(const char *path, struct overrides **out, struct zerr *err)
{
	struct stat st;
	char *text = NULL;
	size_t len = 0;
	int fd, rc;

	*out = NULL;
	/* nobody else may swap what the path names (pathwalk.h) */
	if (pathwalk_trusted(path, "--gpu-command-overrides", err) != 0)
		return -1;
	/* O_NONBLOCK: a FIFO planted at the path must not hang startup. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return zerr_set(err, errno == EACCES ? ZERR_FORBIDDEN :
		    ZERR_INVALID, "%s: cannot open: %s", path,
		    strerror(errno));
	if (ovload_trust(fd, path, &st, err) < 0 ||
	    ovload_read_all(fd, path, &text, &len, err) < 0) {
		close(fd);
		return -1;
	}
	close(fd);
	rc = overrides_parse(text, len, path, out, err);
	free(text);
	if (rc == 0)
		zlog(ZLOG_INFO, "overrides_loaded", "operations=%u",
		    overrides_count(*out));
	return rc;
}
