/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conn.h - one connection's state, shared by server.c (which creates it when
 * libmicrohttpd accepts the connection and frees it when the connection
 * closes) and request.c (which reads who the peer is and caches a Unix
 * peer's groups and name there). Handlers never see it: they ask request.h.
 */
#ifndef ZEUS_CONN_H
#define ZEUS_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "http/deadline.h"
#include "access/peer.h"
#include "access/policy.h"

/*
 * Per-connection state (libmicrohttpd's socket context), created when a
 * connection is accepted: who the peer is, whether the connection counts
 * against the peer's cap, and its whole-request deadline.
 */
/*
 * A Unix peer's groups, name and command, looked up at the connection's
 * first request that needs them (node_identity), and again at its first
 * after a reload (srv->identity_gen moved past `gen`). Allocated then: a
 * connection that never needs them (TCP, root's streams) does not carry
 * these 620 bytes (10,000 streams: 6 MB; docs/performance-history.md).
 */
struct conn_who {
	unsigned gen;
	uint64_t handle;		/* the device process's, 0: none */
	uint32_t writes;		/* GPU writes queued under `handle`
					 * (PSMSG_PEER_END tells the count) */
	struct policy_peer pp;
	struct identity id;
};

struct conn {
	struct peer peer;
	struct deadline_entry deadline;
	bool counted;			/* in srv->peers */
	bool in_table;			/* in srv->conns */
	struct conn_who *who;		/* NULL until needed; freed with it */
	/*
	 * A look-up of `who` on the pool (gate.c), from its start to the
	 * dispatch that installs it; the connection is suspended meanwhile.
	 * Plain memory: freed with the connection.
	 */
	struct conn_lookup *lookup;
	/*
	 * A bearer token the device process is verifying (gate.c), from its
	 * start to the dispatch that keeps the verdict. Freed with it.
	 */
	struct tok_lookup *tok_lookup;
};

#endif
