/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pathwalk.c - walking a path as written (see pathwalk.h).
 */
#include "pathwalk.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

/* Walks `given`; a link's target is walked by a call of its own. */
static int
pathwalk_from(const char *given, const char *what,
    const struct pathwalk_ops *ops, void *arg, unsigned *links,
    struct zerr *err)
{
	char buf[PATH_MAX], next[PATH_MAX];
	const char *p = given;
	size_t len, n;
	struct stat st;
	ssize_t t;
	int fd, rc;

	if (given[0] == '/')
		strcpy(buf, "/");
	else if (getcwd(buf, sizeof(buf)) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "getcwd: %s",
		    strerror(errno));
	len = strlen(buf);
	for (;;) {
		fd = open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)	/* missing, or not a directory: done */
			return 0;
		rc = ops->dir(arg, fd, buf, err);
		close(fd);
		if (rc != 0)
			return -1;
		while (*p == '/')
			p++;
		if (*p == '\0')
			return 0;
		n = strcspn(p, "/");
		if (len + n + 2 > sizeof(buf))
			return zerr_set(err, ZERR_INVALID, "invalid %s %.200s: "
			    "too long", what, given);
		if (len > 1)
			buf[len++] = '/';
		memcpy(buf + len, p, n);
		len += n;
		buf[len] = '\0';
		p += n;
		if (lstat(buf, &st) != 0 || !S_ISLNK(st.st_mode))
			continue;
		if (++*links > PATHWALK_MAX_LINKS)
			return zerr_set(err, ZERR_INVALID, "invalid %s: more "
			    "than %d symbolic links on the way", what,
			    PATHWALK_MAX_LINKS);
		if (ops->link(arg, buf, &st, err) != 0)
			return -1;
		if ((t = readlink(buf, next, sizeof(next) - 1)) < 0)
			return zerr_set(err, ZERR_INTERNAL, "readlink %s: %s",
			    buf, strerror(errno));
		next[t] = '\0';
		if (next[0] != '/') {
			/* relative to the link's directory (buf is absolute) */
			size_t dl = (size_t)(strrchr(buf, '/') - buf);

			if (dl + 1 + (size_t)t + 1 > sizeof(next))
				return zerr_set(err, ZERR_INVALID, "invalid "
				    "%s: too long", what);
			memmove(next + dl + 1, next, (size_t)t + 1);
			memcpy(next, buf, dl);
			next[dl] = '/';
		}
		if (pathwalk_from(next, what, ops, arg, links, err) != 0)
			return -1;
	}
}

int
pathwalk(const char *path, const char *what, const struct pathwalk_ops *ops,
    void *arg, struct zerr *err)
{
	unsigned links = 0;

	return pathwalk_from(path, what, ops, arg, &links, err);
}

/* ---- pathwalk_trusted ------------------------------------------------- */

struct pathwalk_rule {
	const char *what, *path;
	uid_t euid;
};

static void
pathwalk_owners(const struct pathwalk_rule *r, char *buf, size_t size)
{
	if (r->euid == 0)
		snprintf(buf, size, "root");
	else
		snprintf(buf, size, "root or uid %u", (unsigned)r->euid);
}

static int
pathwalk_trusted_dir(void *arg, int fd, const char *shown, struct zerr *err)
{
	const struct pathwalk_rule *r = arg;
	struct stat st;
	char owners[40];
	const char *why;

	if (fstat(fd, &st) != 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot stat directory "
		    "%s: %s", shown, strerror(errno));
	if (st.st_uid != 0 && st.st_uid != r->euid)
		why = "owned by another user";
	else if ((st.st_mode & (S_IWGRP | S_IWOTH)) == 0 ||
	    (st.st_mode & S_ISVTX) != 0)
		return 0;
	else if ((st.st_mode & S_IWOTH) != 0)
		why = "world-writable";
	else
		why = "group-writable";
	pathwalk_owners(r, owners, sizeof(owners));
	return zerr_set(err, ZERR_FORBIDDEN, "unsafe directory %s on the "
	    "path of %s %s (owner uid %u, mode %04o): %s, so another user "
	    "could put a file of their choice in its place; every directory "
	    "up to it must be owned by %s and not writable by group or others "
	    "(or sticky); fix: chown root and chmod go-w it, or move the "
	    "file", shown, r->what, r->path, (unsigned)st.st_uid,
	    (unsigned)(st.st_mode & 07777), why, owners);
}

static int
pathwalk_trusted_link(void *arg, const char *shown, const struct stat *st,
    struct zerr *err)
{
	const struct pathwalk_rule *r = arg;
	char owners[40];

	if (st->st_uid == 0 || st->st_uid == r->euid)
		return 0;
	pathwalk_owners(r, owners, sizeof(owners));
	return zerr_set(err, ZERR_FORBIDDEN, "unsafe symbolic link %s on the "
	    "path of %s %s (owner uid %u): its owner could point it at "
	    "another file at any time; every link on the way must be owned by "
	    "%s; fix: remove it and name the file itself", shown, r->what,
	    r->path, (unsigned)st->st_uid, owners);
}

int
pathwalk_trusted(const char *path, const char *what, struct zerr *err)
{
	static const struct pathwalk_ops ops = {
		.dir = pathwalk_trusted_dir,
		.link = pathwalk_trusted_link,
	};
	struct pathwalk_rule r = { .what = what, .path = path,
	    .euid = geteuid() };
	char q[2 * ZERR_MSG_MAX];

	if (pathwalk(path, what, &ops, &r, err) == 0)
		return 0;
	if (r.euid == 0 || err->kind != ZERR_FORBIDDEN)
		return -1;
	zlog(ZLOG_WARN, "path_unsafe", "msg=%s",
	    zlog_quote(q, sizeof(q), err->msg));
	zerr_clear(err);
	return 0;
}
