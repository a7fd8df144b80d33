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

#include "common/sockdiag.h"

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
 * What counting compares (peer.h, peer_same): a local user's uid, a Unix
 * peer's or an owned loopback TCP peer's alike (one class: a user's
 * connections count together whichever way they come); the rest of
 * loopback (127.0.0.0/8 and ::1, owner unknown) as one peer, since every
 * address of 127.0.0.0/8 can be bound by any local user; an IPv4 address;
 * an IPv6 address's /64, the least a site is given (RFC 6177), so that one
 * host cannot be 2^64 peers. `key` gets the bytes compared, the class is
 * returned.
 */
enum peer_class { PC_UNKNOWN, PC_USER, PC_LOOPBACK, PC_INET4, PC_INET6,
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
		return PC_USER;
	case PEER_PIPE:
		return PC_PIPE;
	case PEER_INET4:
		if (p->addr[0] == 127)
			return p->owned ? PC_USER : PC_LOOPBACK;
		*key = p->addr;
		*n = 4;
		return PC_INET4;
	case PEER_INET6:
		if (memcmp(p->addr, peer_v6_loopback, 16) == 0)
			return p->owned ? PC_USER : PC_LOOPBACK;
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
	if (ca == PC_USER)
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

	if (c == PC_USER || c == PC_PIPE) {
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
	if (p->kind == PEER_INET4)
		return p->addr[0] == 127;
	return p->kind == PEER_INET6 &&
	    memcmp(p->addr, peer_v6_loopback, 16) == 0;
}

void
peer_set_owner(struct peer *p, uid_t uid)
{
	if (peer_is_loopback(p)) {
		p->uid = uid;
		p->owned = true;
	}
}

/* One end of a TCP connection into the tuple's fields; -1: not TCP/IP. */
static int
peer_tuple_end(const struct sockaddr_storage *ss, socklen_t len,
    uint8_t *family, uint8_t *addr, uint16_t *port)
{
	if (ss->ss_family == AF_INET &&
	    (size_t)len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

		*family = 4;
		memcpy(addr, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
		return 0;
	}
	if (ss->ss_family == AF_INET6 &&
	    (size_t)len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 =
		    (const struct sockaddr_in6 *)ss;
		const uint8_t *a = in6->sin6_addr.s6_addr;

		if (memcmp(a, peer_v4_mapped, sizeof(peer_v4_mapped)) == 0) {
			*family = 4;
			memcpy(addr, a + 12, 4);
		} else {
			*family = 6;
			memcpy(addr, a, 16);
		}
		*port = ntohs(in6->sin6_port);
		return 0;
	}
	return -1;
}

int
peer_loopback_tuple(int fd, struct sockdiag_tuple *t)
{
	struct sockaddr_storage ours, theirs;
	socklen_t olen = sizeof(ours), tlen = sizeof(theirs);
	uint8_t fo = 0, ft = 0;

	memset(t, 0, sizeof(*t));
	if (getsockname(fd, (struct sockaddr *)&ours, &olen) != 0 ||
	    getpeername(fd, (struct sockaddr *)&theirs, &tlen) != 0 ||
	    peer_tuple_end(&theirs, tlen, &ft, t->client,
	    &t->client_port) != 0 ||
	    peer_tuple_end(&ours, olen, &fo, t->server,
	    &t->server_port) != 0 || fo != ft)
		goto no;
	t->family = ft;
	if (sockdiag_tuple_loopback(t))
		return 0;
no:
	memset(t, 0, sizeof(*t));
	return -1;
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
		if (p->owned)
			snprintf(buf, size, "addr=%s uid=%u", a,
			    (unsigned)p->uid);
		else
			snprintf(buf, size, "addr=%s", a);
		break;
	case PEER_UNKNOWN:
		snprintf(buf, size, "peer=unknown");
		break;
	}
	return buf;
}
