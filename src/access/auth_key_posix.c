/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth_key_posix.c - reading the signing key file (auth.h) on Linux: the
 * path must be one nobody else can swap (pathwalk.h), the file a regular
 * one owned by root or the daemon's user and writable by no one else.
 * Windows: auth_key_win.c.
 */
#include "access/auth.h"

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
#include "common/wipe.h"

static void
auth_warn_permissions(const char *path, const struct stat *st)
{
	char q[256];

	if (S_ISREG(st->st_mode) && (st->st_mode & S_IROTH))
		zlog(ZLOG_WARN, "signing_key_world_readable",
		    "path=%s msg=\"anyone on this host can mint tokens; "
		    "chmod 600 the key file\"", zlog_quote(q, sizeof(q), path));
}

int
auth_key_load(const char *path, struct auth_key **out, struct zerr *err)
{
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return zerr_set(err, ZERR_INVALID,
		    "cannot open signing key file '%.400s': %s", path,
		    strerror(errno));
	rc = auth_key_load_fd(fd, path, out, err);
	close(fd);
	return rc;
}

int
auth_key_open(const char *path, struct zerr *err)
{
	struct stat st;
	uid_t euid = geteuid();
	int fd;

	/* nobody else may swap what the path names (pathwalk.h) */
	if (pathwalk_trusted(path, "--signing-key-path", err) != 0)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return zerr_set(err, ZERR_INVALID,
		    "cannot open signing key file '%.400s': %s", path,
		    strerror(errno));
	if (fstat(fd, &st) != 0) {
		zerr_set(err, ZERR_INVALID, "cannot read signing key file "
		    "'%.400s': %s", path, strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		zerr_set(err, ZERR_INVALID, "signing key file '%.400s' is not "
		    "a regular file", path);
	} else if (!fileio_owner_only(&st, euid)) {
		zerr_set(err, ZERR_FORBIDDEN, "signing key file '%.400s' is "
		    "owned by uid %u with mode %04o; whoever can write it can "
		    "mint any token, so it must be owned by root (or the "
		    "daemon's user) and writable by no one else", path,
		    (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	} else {
		return fd;
	}
	close(fd);
	return -1;
}

int
auth_key_load_trusted(const char *path, struct auth_key **out,
    struct zerr *err)
{
	int fd, rc;

	if ((fd = auth_key_open(path, err)) < 0)
		return -1;
	rc = auth_key_load_fd(fd, path, out, err);
	close(fd);
	return rc;
}

int
auth_key_load_fd(int fd, const char *path, struct auth_key **out,
    struct zerr *err)
{
	unsigned char *buf;
	struct stat st;
	ssize_t n;
	int rc, e = 0;

	if (fstat(fd, &st) != 0)
		e = errno;
	else if (S_ISDIR(st.st_mode))
		e = EISDIR;
	if (e != 0)
		return zerr_set(err, ZERR_INVALID,
		    "cannot read signing key file '%.400s': %s", path,
		    strerror(e));
	buf = malloc(AUTH_KEY_MAX + 1);
	if (buf == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	/* One extra byte tells "exactly the limit" from "too large". */
	n = fileio_read_all(fd, buf, AUTH_KEY_MAX + 1);
	if (n < 0)
		rc = zerr_set(err, ZERR_INVALID,
		    "cannot read signing key file '%.400s': %s", path,
		    strerror(errno));
	else if (n == 0)
		rc = zerr_set(err, ZERR_INVALID,
		    "signing key file '%.400s' is empty", path);
	else if (n > AUTH_KEY_MAX)
		rc = zerr_set(err, ZERR_INVALID,
		    "signing key file '%.400s' is larger than %d bytes", path,
		    AUTH_KEY_MAX);
	else
		rc = auth_key_from_bytes(buf, (size_t)n, out, err);
	if (rc == 0)
		auth_warn_permissions(path, &st);
	wipe(buf, AUTH_KEY_MAX + 1);
	free(buf);
	return rc;
}
