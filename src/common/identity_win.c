/* SPDX-License-Identifier: Apache-2.0 */
/*
 * identity_win.c - identity.h on Windows. An identity is a Unix-socket
 * peer's (its uid's user name and groups, its pid's name and cgroup:
 * identity.c reads the passwd and group databases and /proc). Windows
 * zeusd has no Unix socket, so no peer ever has one: what is asked is
 * answered with the ids given and no names.
 */
#include "common/identity.h"

#include <string.h>

void
identity_lookup(uid_t uid, gid_t gid, pid_t pid, struct identity *out)
{
	(void)uid;
	(void)pid;
	memset(out, 0, sizeof(*out));
	out->ngids = 1;
	out->gids[0] = gid;
}

void
identity_user(uid_t uid, char *out, size_t size)
{
	(void)uid;
	if (size > 0)
		out[0] = '\0';		/* no user database of Unix users here */
}
