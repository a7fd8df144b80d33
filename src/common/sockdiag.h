/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sockdiag.h - who owns the client's socket of a loopback TCP connection,
 * as the kernel tells it over netlink (NETLINK_SOCK_DIAG, inet_diag: what
 * `ss -e` shows as uid). Linux only (sockdiag.c); the tuple itself is
 * plain data that any platform may name.
 *
 * One exact look-up per call: the client socket's own four-tuple, no dump
 * of the socket table, one bounded receive with a timeout. Reading the
 * owner needs no privilege (any user may run `ss -e`), but the network
 * process of a split daemon may open no socket at all, so there it is
 * asked of the device process (privsep/msg.h, PSMSG_TCP_OWNER).
 */
#ifndef ZEUS_SOCKDIAG_H
#define ZEUS_SOCKDIAG_H

#include <stdbool.h>
#include <stdint.h>

/* How long one look-up waits for the kernel's answer (it is synchronous:
 * the answer is queued before the request's send returns). */
#define SOCKDIAG_TIMEOUT_MS 20

/*
 * A TCP connection as its client's socket has it: `client` is that
 * socket's local end, `server` its remote one. family 4: the first 4
 * bytes of each address, the rest 0; family 6: all 16. Ports in host
 * order.
 */
struct sockdiag_tuple {
	uint8_t family;			/* 4 or 6 */
	uint8_t client[16], server[16];
	uint16_t client_port, server_port;
};

/* One end: 127.0.0.0/8 with bytes 4..15 0, or ::1. */
static inline bool
sockdiag_addr_loopback(uint8_t family, const uint8_t *a)
{
	unsigned nonzero = 0;

	for (unsigned i = family == 4 ? 4 : 0; i < 15; i++)
		nonzero |= a[i];
	if (family == 4)
		return a[0] == 127 && nonzero == 0 && a[15] == 0;
	return family == 6 && nonzero == 0 && a[15] == 1;
}

/*
 * Both ends on loopback (127.0.0.0/8, or ::1 for family 6), both ports
 * non-zero, unused address bytes 0: what a look-up is allowed to ask.
 * Inline: the platforms without sockdiag.c check tuples too.
 */
static inline bool
sockdiag_tuple_loopback(const struct sockdiag_tuple *t)
{
	return (t->family == 4 || t->family == 6) &&
	    sockdiag_addr_loopback(t->family, t->client) &&
	    sockdiag_addr_loopback(t->family, t->server) &&
	    t->client_port != 0 && t->server_port != 0;
}

/*
 * The uid that owns the client's socket of `t` (its creator's, as the
 * kernel recorded it at socket(2)). 0 with *uid set, or -1 when it cannot
 * be told: `t` is not a loopback tuple, no such connection (gone, or
 * lingering in TIME_WAIT, whose kernel record has no owner), no answer
 * within `timeout_ms`, netlink refused (errno is not kept).
 */
int sockdiag_tcp_owner(const struct sockdiag_tuple *t, unsigned timeout_ms,
    uint32_t *uid);

/*
 * A Unix stream socket's identity: its inode and its cookie (SO_COOKIE:
 * never reused while the system runs). 0, or -1 when `fd` is not a
 * socket or the kernel has no cookie for it.
 */
int sockdiag_unix_id(int fd, uint32_t *ino, uint64_t *cookie);

/*
 * Whether the Unix socket `ino` with `cookie` still exists, as the kernel
 * tells it (unix_diag, one exact look-up): 0 with its shutdown bits (1:
 * no more receiving, 2: no more sending; 3 once its peer closed), 1 when
 * there is no such socket any more (every descriptor of it closed), -1
 * when it cannot be told (no unix_diag in this kernel answers ENOENT too:
 * a caller tries once on a socket of its own, sockdiag_unix_works).
 */
int sockdiag_unix_state(uint32_t ino, uint64_t cookie, unsigned timeout_ms,
    uint8_t *shutdown_mask);

/*
 * Whether sockdiag_unix_state answers here: tried on a socket pair of its
 * own, open and then with its peer closed.
 */
bool sockdiag_unix_works(void);

#endif
