/* SPDX-License-Identifier: Apache-2.0 */
/*
 * identity.c - a local peer's user, groups and command name (identity.h).
 */
#include "common/identity.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio.h"

#define IDENTITY_NSS_BUF 16384

static void
identity_comm(pid_t pid, char *out, size_t size)
{
	char path[48];
	ssize_t n;
	int fd;

	out[0] = '\0';
	if (pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return;
	n = fileio_read_all(fd, out, size - 1);
	close(fd);
	if (n <= 0) {
		out[0] = '\0';
		return;
	}
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

/*
 * The cgroup v2 path of pid: the "0::PATH" line of /proc/PID/cgroup (on a
 * v1 or hybrid host without one, the first line's path). A path that does
 * not fit is left out, not cut.
 */
static void
identity_cgroup(pid_t pid, char *out, size_t size)
{
	char path[48], buf[2048];
	const char *line = NULL, *p;
	size_t len;
	ssize_t n;
	int fd;

	out[0] = '\0';
	if (pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/cgroup", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return;
	n = fileio_read_all(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (p = buf; *p != '\0'; p += strcspn(p, "\n"), p += *p == '\n') {
		if (strncmp(p, "0::", 3) == 0) {
			line = p + 3;
			break;
		}
		if (line == NULL && (line = strchr(p, ':')) != NULL &&
		    (line = strchr(line + 1, ':')) != NULL)
			line++;
	}
	if (line == NULL)
		return;
	len = strcspn(line, "\n");
	if (len == 0 || len >= size)
		return;
	memcpy(out, line, len);
	out[len] = '\0';
}

void
identity_user(uid_t uid, char *out, size_t size)
{
	struct passwd pw, *res = NULL;
	char buf[IDENTITY_NSS_BUF];

	if (size == 0)
		return;
	out[0] = '\0';
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res != NULL &&
	    strlen(pw.pw_name) < size)
		memcpy(out, pw.pw_name, strlen(pw.pw_name) + 1);
}

void
identity_lookup(uid_t uid, gid_t gid, pid_t pid, struct identity *out)
{
	struct passwd pw, *res = NULL;
	char buf[IDENTITY_NSS_BUF];
	int n = IDENTITY_MAX_GROUPS;

	memset(out, 0, sizeof(*out));
	out->gids[0] = gid;
	out->ngids = 1;
	identity_comm(pid, out->comm, sizeof(out->comm));
	identity_cgroup(pid, out->cgroup, sizeof(out->cgroup));
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || res == NULL)
		return;
	if (strlen(pw.pw_name) < sizeof(out->user))
		memcpy(out->user, pw.pw_name, strlen(pw.pw_name) + 1);
	/* getgrouplist puts gid first; a user in more groups than fit is
	 * judged by the first ones */
	if (getgrouplist(pw.pw_name, gid, out->gids, &n) < 0)
		n = IDENTITY_MAX_GROUPS;
	out->ngids = n > 0 ? (unsigned)n : 1;
	out->gids[0] = gid;
}
