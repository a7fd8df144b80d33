/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_unix.c - who a Unix-socket peer is (peer.h): SO_PEERCRED, its
 * groups (SO_PEERGROUPS) and a pidfd of its process. Linux; Windows has no
 * Unix-socket peers (peer_win.c).
 */
#include "access/peer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access/pidwatch.h"
#include "common/sock.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77		/* Linux 6.5; older headers lack it */
#endif

/* SO_PEERGROUPS of a process in more groups than this is not read whole */
#define PEER_GROUPS_MAX_BYTES (65536 * sizeof(gid_t))	/* NGROUPS_MAX */

int
peer_identify_unix(int fd, struct peer *p)
{
	uid_t uid;
	gid_t gid;
	pid_t pid;

	if (sock_peer_cred(fd, &uid, &gid, &pid) != 0)
		return -1;
	p->kind = PEER_UNIX;
	p->uid = uid;
	p->gid = gid;
	p->pid = pid;
	return 0;
}

int
peer_take_pidfd(int fd, struct peer *p)
{
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);

	if (p->kind != PEER_UNIX) {
		errno = EINVAL;
		return -1;
	}
	if (p->pidfd >= 0)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 &&
	    len == sizeof(pidfd) && pidfd >= 0) {
		p->pidfd = pidfd;
		return 0;
	}
	if (errno != ENOPROTOOPT)
		return -1;	/* the process it pinned is gone (6.5 to 6.8) */
	/* before Linux 6.5: the number, right after accept (peer.h) */
	pidfd = pidwatch_open(p->pid);
	if (pidfd < 0)
		return -1;
	p->pidfd = pidfd;
	return 0;
}

bool
peer_exited(const struct peer *p)
{
	return p->pidfd < 0 || pidwatch_exited(p->pidfd);
}

void
peer_release(struct peer *p)
{
	if (p->pidfd >= 0) {
		(void)close(p->pidfd);
		p->pidfd = -1;
	}
}

int
peer_own_groups(int fd, gid_t gid, struct identity *id)
{
	gid_t buf[IDENTITY_MAX_GROUPS], *all = buf;
	socklen_t len = sizeof(buf);
	unsigned n, k = 1;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, buf, &len) != 0) {
		/* ERANGE: more than fit; len says how many bytes */
		if (errno != ERANGE || len == 0 ||
		    len > PEER_GROUPS_MAX_BYTES || (all = malloc(len)) == NULL)
			return -1;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, all, &len) != 0) {
			free(all);
			return -1;
		}
	}
	n = len / sizeof(gid_t);
	id->gids[0] = gid;
	for (unsigned i = 0; i < n && k < IDENTITY_MAX_GROUPS; i++)
		if (all[i] != gid)
			id->gids[k++] = all[i];
	id->ngids = k;
	if (all != buf)
		free(all);
	return 0;
}
