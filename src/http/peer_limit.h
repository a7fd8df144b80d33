/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_limit.h - how many connections each peer holds, and a cap on it.
 *
 * One peer (a uid on the Unix socket, a source address on TCP) must not be
 * able to take every connection slot the HTTP server has, locking everyone
 * else out before anyone authenticates. The server asks here at accept time
 * and refuses the connection when the peer is at its cap. Root on the Unix
 * socket is exempt; the caller decides that (peer_is_root) and never counts
 * such connections here.
 *
 * Not thread-safe: the HTTP event loop is the only caller.
 */
#ifndef ZEUS_PEER_LIMIT_H
#define ZEUS_PEER_LIMIT_H

#include <stdbool.h>

#include "common/err.h"
#include "access/peer.h"

struct peer_limit;

/* `max` connections per peer (>= 1). */
int peer_limit_create(unsigned max, struct peer_limit **out, struct zerr *err);
void peer_limit_destroy(struct peer_limit *pl);

/*
 * Counts one more connection of `p` and returns true, or returns false
 * (nothing counted) when `p` already holds `max` or memory ran out.
 */
bool peer_limit_acquire(struct peer_limit *pl, const struct peer *p);

/* Forgets one connection counted by peer_limit_acquire. */
void peer_limit_release(struct peer_limit *pl, const struct peer *p);

/* Connections `p` holds now. */
unsigned peer_limit_count(const struct peer_limit *pl, const struct peer *p);

/* Peers that hold at least one connection. */
unsigned peer_limit_peers(const struct peer_limit *pl);

#endif
