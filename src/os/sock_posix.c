/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sock_posix.c - sock.h on Linux: plain fds, SIOCOUTQ, poll(2).
 */
#include "common/sock.h"

#include <linux/sockios.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int
sock_startup(struct zerr *err)
{
	(void)err;
	return 0;
}

void
sock_close(int fd)
{
	(void)close(fd);
}

void
sock_shutdown(int fd)
{
	(void)shutdown(fd, SHUT_RDWR);
}

void
sock_send_nowait(int fd, const void *buf, size_t len)
{
	(void)send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

int
sock_unsent(int fd, int *bytes)
{
	int q;

	if (ioctl(fd, SIOCOUTQ, &q) != 0 || q < 0)
		return -1;
	*bytes = q;
	return 0;
}

bool
sock_peer_gone(int fd)
{
	struct pollfd pf = { .fd = fd, .events = 0 };

	return poll(&pf, 1, 0) == 1 &&
	    (pf.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}

int
sock_dup_unix(int fd)
{
	return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

bool
sock_is_unix_stream(int fd)
{
	int v;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) != 0 ||
	    v != AF_UNIX)
		return false;
	len = sizeof(v);
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) == 0 &&
	    v == SOCK_STREAM;
}

int
sock_peer_cred(int fd, uid_t *uid, gid_t *gid, pid_t *pid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr,
	    &len) != 0 || len != sizeof(cr))
		return -1;
	*uid = cr.uid;
	*gid = cr.gid;
	*pid = cr.pid;
	return 0;
}
