/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sock_win.c - sock.h on Windows (Winsock 2.2). A socket is a SOCKET
 * handle; libmicrohttpd hands it over as MHD_socket and the shared code
 * keeps it in an int (handle values are small).
 *
 * sock_unsent has no answer here: Windows has no SIOCOUTQ, and
 * SIO_TCP_INFO (Windows 10 1703 and later; wine lacks it) reports bytes
 * in flight, not the send buffer. A stream then has no socket budget and
 * is bounded by its per-device event queue alone (streams.c does the same
 * on Linux when the ioctl fails).
 */
#include "common/sock.h"

#include <errno.h>
#include <limits.h>
#include <winsock2.h>

int
sock_startup(struct zerr *err)
{
	WSADATA wsa;
	int rc = WSAStartup(MAKEWORD(2, 2), &wsa);

	if (rc != 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot start Winsock 2.2 "
		    "(WSAStartup error %d)", rc);
	return 0;
}

void
sock_close(int fd)
{
	(void)closesocket((SOCKET)fd);
}

void
sock_shutdown(int fd)
{
	(void)shutdown((SOCKET)fd, SD_BOTH);
}

void
sock_send_nowait(int fd, const void *buf, size_t len)
{
	u_long on = 1;

	/* libmicrohttpd's sockets are non-blocking already; make sure */
	(void)ioctlsocket((SOCKET)fd, FIONBIO, &on);
	if (len > INT_MAX)
		len = INT_MAX;
	(void)send((SOCKET)fd, buf, (int)len, 0);
}

int
sock_unsent(int fd, int *bytes)
{
	(void)fd;
	(void)bytes;
	errno = ENOSYS;
	return -1;
}

bool
sock_peer_gone(int fd)
{
	WSAPOLLFD pf = { .fd = (SOCKET)fd, .events = POLLRDNORM };

	/* WSAPoll reports POLLHUP/POLLERR only with an event asked for */
	return WSAPoll(&pf, 1, 0) == 1 &&
	    (pf.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}

int
sock_dup_unix(int fd)
{
	(void)fd;
	errno = ENOSYS;
	return -1;
}

bool
sock_is_unix_stream(int fd)
{
	(void)fd;
	return false;		/* no Unix-socket peers here (sock.h) */
}

int
sock_peer_cred(int fd, uid_t *uid, gid_t *gid, pid_t *pid)
{
	(void)fd;
	(void)uid;
	(void)gid;
	(void)pid;
	errno = ENOSYS;
	return -1;
}
