/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctx.h - what a request may reach of the daemon: the configuration, the
 * node, the key, the policy, the streams and the loop, and the
 * few counters requests move. server.c owns one (struct server.ctx); each
 * request points at it (struct request.ctx), instead of at the whole
 * server: the listening socket, libmicrohttpd, the connection table and its
 * counters stay server.c's.
 *
 * Everything here is named by pointer only: an include of ctx.h draws in
 * no other header of ours.
 */
#ifndef ZEUS_CTX_H
#define ZEUS_CTX_H

#include <stdatomic.h>
#include <stdbool.h>

struct zeusd_config;
struct node;
struct auth_key;
struct policy_holder;
struct streams;
struct loop;
struct pool;
struct server;
struct tokens;
struct reply_share;
struct MHD_Response;
struct request;
struct routes;

struct http_ctx {
	/*
	 * The route table (router.h), the api's (api/routes.h: api_routes),
	 * handed over by the wiring: http names no handler itself.
	 */
	const struct routes *routes;
	const struct zeusd_config *cfg;
	struct node *node;
	/*
	 * A signing key is configured: tokens are checked. In one process
	 * `key` is it; a split daemon's network process holds none and asks
	 * the device process, keeping its verdicts in `tokens` (tokens.h).
	 */
	bool auth;
	struct auth_key *key;		/* NULL: not in this process */
	struct tokens *tokens;		/* split: the verdicts; else NULL */
	struct policy_holder *policy;	/* NULL: no node policy */
	/*
	 * --gpu-leases: the device process keeps the lease record (privsep/
	 * msg.h); GET /gpu/leases, POST /gpu/release and /metrics' ledger ask
	 * it. Nothing of it is kept here.
	 */
	bool leases;
	struct streams *streams;	/* the api's SSE streams, or NULL */
	/*
	 * The network process's loop (common/loop.h), on which device replies
	 * come back and requests are resumed; NULL when libmicrohttpd runs its
	 * own thread (one process).
	 */
	struct loop *loop;
	/*
	 * Threads for blocking look-ups off the loop (common/pool.h): a Unix
	 * peer's identity (gate.c), the device process's figures for
	 * /metrics. NULL: done on the loop (unit tests).
	 */
	struct pool *lookups;
	struct server *server;		/* for /metrics' connection figures */
	/*
	 * Bumped by every reload: a connection looks its Unix peer up again
	 * at its next request (groups edited in /etc/group, then SIGHUP,
	 * apply to connections already open).
	 */
	atomic_uint identity_gen;
	atomic_uint deferred;		/* waiting for devices */
	/*
	 * Waiting without suspending (request.c, "Waiting on the loop"): the
	 * requests whose client left while they waited, for the loop to free.
	 */
	struct request *_Atomic orphans;
	atomic_ulong waited_on_loop;	/* began waiting unsuspended */
	atomic_ulong orphaned;		/* client gone while waiting so */
	atomic_ulong requests_refused;	/* smuggling-shaped headers */
	/*
	 * The answer requests from the same merged reads share
	 * (reply_share.h); the server's thread only, made at its first use.
	 */
	struct reply_share *share;
	/* the empty answer (a write's 200), kept the same way */
	struct MHD_Response *empty;
	atomic_ulong answers_shared;	/* requests answered with it */
};

#endif
