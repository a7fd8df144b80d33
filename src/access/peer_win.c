/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_win.c - peer.h's Unix-socket part on Windows, where zeusd listens
 * on TCP and a named pipe (docs/windows.md; a pipe client is PEER_PIPE,
 * named by http/pipe_win.c): no connection is ever a Unix peer, so
 * none has credentials, groups or a process handle to take.
 */
#include "access/peer.h"

#include <errno.h>

int
peer_identify_unix(int fd, struct peer *p)
{
	(void)fd;
	(void)p;
	errno = EAFNOSUPPORT;
	return -1;
}

int
peer_take_pidfd(int fd, struct peer *p)
{
	(void)fd;
	(void)p;
	errno = EINVAL;
	return -1;
}

bool
peer_exited(const struct peer *p)
{
	(void)p;
	return true;
}

void
peer_release(struct peer *p)
{
	(void)p;
}

int
peer_own_groups(int fd, gid_t gid, struct identity *id)
{
	(void)fd;
	(void)gid;
	(void)id;
	errno = EINVAL;
	return -1;
}
