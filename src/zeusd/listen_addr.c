/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listen_addr.c - TCP addresses of the listening socket (listen.h), the
 * same on Linux and Windows: parsing --tcp-bind-address and writing a
 * bound address as "tcp:HOST:PORT". The sockets themselves are made in
 * listen.c (Linux: Unix socket or TCP, systemd's) and listen_win.c.
 */
#include "zeusd/listen.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
listen_parse_tcp(const char *s, struct sockaddr_storage *ss, socklen_t *len,
    struct zerr *err)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *port, *h;
	size_t hlen;
	struct addrinfo hints, *res = NULL;
	int rc;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (close == NULL || close[1] != ':')
			goto bad;
		h = s + 1;
		hlen = (size_t)(close - h);
		port = close + 2;
	} else {
		const char *colon = strrchr(s, ':');

		if (colon == NULL || memchr(s, ':', (size_t)(colon - s)) != NULL)
			goto bad;
		h = s;
		hlen = (size_t)(colon - s);
		port = colon + 1;
	}
	if (hlen == 0 || hlen >= sizeof(host) || *port == '\0' ||
	    strlen(port) > 5 || strspn(port, "0123456789") != strlen(port) ||
	    strtoul(port, NULL, 10) > 65535)
		goto bad;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	hints.ai_family = s[0] == '[' ? AF_INET6 : AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0 || res == NULL || res->ai_addrlen > sizeof(*ss)) {
		if (res != NULL)
			freeaddrinfo(res);
		goto bad;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
bad:
	return zerr_set(err, ZERR_INVALID,
	    "invalid --tcp-bind-address '%.100s': expected IPV4:PORT or "
	    "[IPV6]:PORT with a numeric address and a port 0-65535", s);
}

void
listen_format_inet(const struct sockaddr_storage *ss, char *buf,
    size_t size)
{
	char host[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

		if (inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host)))
			snprintf(buf, size, "tcp:%s:%u", host,
			    ntohs(in->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
		    (const struct sockaddr_in6 *)ss;

		if (inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host)))
			snprintf(buf, size, "tcp:[%s]:%u", host,
			    ntohs(in6->sin6_port));
	}
}
