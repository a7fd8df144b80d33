/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listen_win.c - the listening socket on Windows (listen.h): TCP only.
 * There is no Unix socket file to create, check or remove, and no systemd
 * to pass a socket (listen.c has those on Linux). The named pipe, the
 * Windows default transport, is http/pipe_win.c's (no listening socket).
 *
 * SO_EXCLUSIVEADDRUSE, not SO_REUSEADDR: on Windows SO_REUSEADDR lets
 * another process bind the same port and take connections meant for
 * zeusd. The socket is not inherited by child processes (the override
 * commands): WSA_FLAG_NO_HANDLE_INHERIT.
 */
#include "zeusd/listen.h"

#include <stdio.h>
#include <winsock2.h>
#include <ws2tcpip.h>

#define LISTEN_BACKLOG 1024

static int
listen_wsa_fail(const char *what, const char *addr, struct zerr *err)
{
	return zerr_set(err, ZERR_INTERNAL, "cannot %s TCP %s: Winsock error "
	    "%d", what, addr, WSAGetLastError());
}

int
listen_open(const struct zeusd_config *cfg, struct zerr *err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	SOCKET s;
	BOOL on = TRUE;
	DWORD v6only = 1;

	if (cfg->mode != MODE_TCP)
		return zerr_set(err, ZERR_INVALID, "only --mode tcp listens on "
		    "Windows for now");
	if (listen_parse_tcp(cfg->tcp_bind_address, &ss, &len, err) != 0)
		return -1;
	s = WSASocketW(ss.ss_family, SOCK_STREAM, IPPROTO_TCP, NULL, 0,
	    WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
	if (s == INVALID_SOCKET)
		return listen_wsa_fail("open a socket for", cfg->tcp_bind_address,
		    err);
	(void)setsockopt(s, SOL_SOCKET, SO_EXCLUSIVEADDRUSE, (const char *)&on,
	    sizeof(on));
	if (ss.ss_family == AF_INET6)
		(void)setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY,
		    (const char *)&v6only, sizeof(v6only));
	if (bind(s, (struct sockaddr *)&ss, len) != 0) {
		listen_wsa_fail("bind", cfg->tcp_bind_address, err);
		closesocket(s);
		return -1;
	}
	if (listen(s, LISTEN_BACKLOG) != 0) {
		listen_wsa_fail("listen on", cfg->tcp_bind_address, err);
		closesocket(s);
		return -1;
	}
	/* handle values fit an int (libmicrohttpd's MHD_socket is kept so) */
	return (int)s;
}

void
listen_describe(int fd, char *buf, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	snprintf(buf, size, "?");
	if (getsockname((SOCKET)fd, (struct sockaddr *)&ss, &len) == 0)
		listen_format_inet(&ss, buf, size);
}
