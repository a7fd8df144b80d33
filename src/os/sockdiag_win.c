/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sockdiag_win.c - sockdiag.h on Windows, which has no netlink: the owner
 * of a loopback TCP client's socket cannot be told (loopback stays one
 * peer, http/server.c), and there are no Unix-socket peers whose state
 * the device half would ask about (peer_win.c).
 */
#include "common/sockdiag.h"

int
sockdiag_tcp_owner(const struct sockdiag_tuple *t, unsigned timeout_ms,
    uint32_t *uid)
{
	(void)t;
	(void)timeout_ms;
	(void)uid;
	return -1;
}

int
sockdiag_unix_id(int fd, uint32_t *ino, uint64_t *cookie)
{
	(void)fd;
	(void)ino;
	(void)cookie;
	return -1;
}

int
sockdiag_unix_state(uint32_t ino, uint64_t cookie, unsigned timeout_ms,
    uint8_t *shutdown_mask)
{
	(void)ino;
	(void)cookie;
	(void)timeout_ms;
	(void)shutdown_mask;
	return -1;
}

bool
sockdiag_unix_works(void)
{
	return false;
}
