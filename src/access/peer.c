/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer.c - identifying a connection's peer (see peer.h).
 */
#include "access/peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t peer_v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0xff, 0xff };

int
peer_identify(int fd, const struct sockaddr *sa, socklen_t salen,
    struct peer *p)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	memset(p, 0, sizeof(*p));
	p->pidfd = -1;
	if (sa == NULL || salen == 0) {
		if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
			return -1;
		sa = (const struct sockaddr *)&ss;
		salen = len;
	}
	if (sa->sa_family == AF_UNIX)
		return peer_identify_unix(fd, p);
	if (sa->sa_family == AF_INET &&
	    (size_t)salen >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		p->kind = PEER_INET4;
		memcpy(p->addr, &in->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6 &&
	    (size_t)salen >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		const uint8_t *a = in6->sin6_addr.s6_addr;

		if (memcmp(a, peer_v4_mapped, sizeof(peer_v4_mapped)) == 0) {
			p->kind = PEER_INET4;
			memcpy(p->addr, a + 12, 4);
		} else {
			p->kind = PEER_INET6;
			memcpy(p->addr, a, 16);
		}
		return 0;
	}
	return -1;
}

/*
 * What counting compares (peer.h, peer_same): a Unix peer's uid; all of
 * loopback (127.0.0.0/8 and ::1) as one peer, since every address of
 * 127.0.0.0/8 can be bound by any local user; an IPv4 address; an IPv6
 * address's /64, the least a site is given (RFC 6177), so that one host
 * cannot be 2^64 peers. `key` gets the bytes compared, the class is
 * returned.
 */
enum peer_class { PC_UNKNOWN, PC_UNIX, PC_LOOPBACK, PC_INET4, PC_INET6,
    PC_PIPE };

static const uint8_t peer_v6_loopback[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 1 };

static enum peer_class
peer_key(const struct peer *p, const uint8_t **key, size_t *n)
{
	*key = NULL;
	*n = 0;
	switch (p->kind) {
	case PEER_UNIX:
		return PC_UNIX;
	case PEER_PIPE:
		return PC_PIPE;
	case PEER_INET4:
		if (p->addr[0] == 127)
			return PC_LOOPBACK;
		*key = p->addr;
		*n = 4;
		return PC_INET4;
	case PEER_INET6:
		if (memcmp(p->addr, peer_v6_loopback, 16) == 0)
			return PC_LOOPBACK;
		*key = p->addr;
		*n = 8;
		return PC_INET6;
	case PEER_UNKNOWN:
		break;
	}
	return PC_UNKNOWN;	/* all unidentified peers share one slot */
}

bool
peer_same(const struct peer *a, const struct peer *b)
{
	const uint8_t *ka, *kb;
	size_t na, nb;
	enum peer_class ca = peer_key(a, &ka, &na), cb = peer_key(b, &kb, &nb);

	if (ca != cb)
		return false;
	if (ca == PC_UNIX)
		return a->uid == b->uid;
	if (ca == PC_PIPE)
		return a->pid == b->pid;
	return na == nb && (na == 0 || memcmp(ka, kb, na) == 0);
}

uint32_t
peer_hash(const struct peer *p)
{
	/* FNV-1a over the compared bytes; peers are not secret keys, and a
	 * chain only grows with connections the limit already bounds. */
	const uint8_t *b;
	size_t n;
	enum peer_class c = peer_key(p, &b, &n);
	uint32_t h = 2166136261u ^ (uint32_t)c;
	uint32_t id = c == PC_PIPE ? (uint32_t)p->pid : (uint32_t)p->uid;

	if (c == PC_UNIX || c == PC_PIPE) {
		b = (const uint8_t *)&id;
		n = sizeof(id);
	}
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

bool
peer_is_loopback(const struct peer *p)
{
	const uint8_t *k;
	size_t n;

	return peer_key(p, &k, &n) == PC_LOOPBACK;
}

bool
peer_is_root(const struct peer *p)
{
	return p->kind == PEER_UNIX && p->uid == 0;
}

const char *
peer_format(const struct peer *p, char *buf, size_t size)
{
	char a[INET6_ADDRSTRLEN];

	switch (p->kind) {
	case PEER_UNIX:
		snprintf(buf, size, "uid=%u pid=%ld", (unsigned)p->uid,
		    (long)p->pid);
		break;
	case PEER_PIPE:
		snprintf(buf, size, "pipe_pid=%ld", (long)p->pid);
		break;
	case PEER_INET4:
	case PEER_INET6:
		if (inet_ntop(p->kind == PEER_INET4 ? AF_INET : AF_INET6,
		    p->addr, a, sizeof(a)) == NULL)
			snprintf(a, sizeof(a), "?");
		snprintf(buf, size, "addr=%s", a);
		break;
	case PEER_UNKNOWN:
		snprintf(buf, size, "peer=unknown");
		break;
	}
	return buf;
}
