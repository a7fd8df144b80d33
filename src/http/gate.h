/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gate.h - who may do what, decided for each request: the one place that
 * reads the bearer token, the Unix peer's identity and the node policy.
 *
 * At dispatch, gate_decide applies the authentication order of
 * docs/security.md ("How a token is checked, in order") and the node
 * policy's scope to the route the router already chose (so routing and
 * scope can never disagree). A handler that names GPUs asks the gate for
 * their grants (gate_check_gpus, through handlers_util.c), a handler that
 * answers for every GPU which ones to show (gate_gpu_allowed), and a write
 * asks it who the writer is (gate_writer). The identity of a Unix peer is
 * looked up once per connection (and again after a reload).
 *
 * Called by server.c's dispatch and by the handlers; answers through
 * request.h and calls nothing back in server.c.
 */
#ifndef ZEUS_GATE_H
#define ZEUS_GATE_H

#include <stdbool.h>
#include <stdint.h>

#include "node/groups.h"
#include "privsep/msg.h"	/* enum psmsg_refusal */

struct request;
struct route;
struct identity;
struct policy_peer;

/*
 * The decision at dispatch for route `r` (NULL for an unknown path, which
 * needs any valid token). First, when the route needs a Unix peer's
 * identity and the connection has none fresh, it is looked up on the
 * look-up pool (ctx.lookups; a slow NSS stalls only this request): the
 * request is deferred, 1 is returned, and `again` (the dispatch) runs once
 * it is in. Then, with a signing key, the bearer token (claims attached
 * to req; 401 when missing, bad or expired, 403 without the route's
 * scope); then the node policy's scope for a Unix peer (403). 0 when the
 * request may go on, -1 when answered.
 */
int gate_decide(struct request *req, const struct route *r,
    void (*again)(struct request *req));

/*
 * A connection closes: the device process's handle for its peer (if it
 * got one) ends, on the look-up pool (blocking only when the pool is full).
 */
struct http_ctx;
struct conn;
void gate_conn_closed(struct http_ctx *ctx, struct conn *c);

/*
 * Who the device process should judge a write of this request as
 * (gpu.h's writer fields): a Unix peer's handle, or TCP.
 */
struct gpu_write;
void gate_writer(struct request *req, struct gpu_write *w);

/*
 * `n` GPU writes of this request were queued (on the loop): counted on the
 * connection, whose PSMSG_PEER_END tells the device process how many may
 * still come after it closed (warden.h).
 */
void gate_writes_queued(struct request *req, unsigned n);

/* Frees what gate_decide attached to the request. */
void gate_release(struct request *req);

/* A Unix peer's user name, NULL if unknown or not a Unix peer. */
const char *gate_user_name(struct request *req);

/*
 * A Unix peer's user, groups and command name, looked up at the first call
 * on its connection; NULL for a TCP peer.
 */
const struct identity *gate_identity(struct request *req);

/*
 * The scopes a Unix peer holds on this node: the node policy's grants
 * (--policy-file) or, without one, every enabled group.
 */
group_set gate_peer_scopes(struct request *req);

/*
 * Whether the node policy lets the peer use the request's route on GPU
 * `gpu` (always when no policy applies). For answers that cover every GPU,
 * such as /metrics, which leave out the GPUs it does not.
 */
bool gate_gpu_allowed(struct request *req, unsigned gpu);

/*
 * Whether the node policy grants scope `g` on GPU `gpu` to the peer
 * (always when no policy applies); the scope itself is not checked.
 */
bool gate_policy_grants_gpu(struct request *req, enum api_group g,
    unsigned gpu);

/*
 * The node policy's GPU decision for the request's route: 0 when the peer
 * holds the route's scope on every GPU in ids (or no policy applies),
 * otherwise answers 403 naming the first GPU it lacks (and audits the
 * refusal of a gpu-control route) and returns -1.
 */
int gate_check_gpus(struct request *req, const uint32_t *ids, unsigned n);

/*
 * What the gate decided about this request, for an answer that outlives it
 * (an SSE stream re-checks it at each event; api/streams.h).
 */
struct gate_grant {
	int64_t until_s;		/* the token's exp with its leeway, Unix
					 * seconds; INT64_MAX: never */
	bool by_token;			/* a token opened it */
	bool by_policy;			/* a Unix peer under the node policy */
	int group;			/* the route's API group (by_policy) */
	const struct policy_peer *pp;	/* by_policy: the peer's ids */
};

void gate_grant(struct request *req, struct gate_grant *g);

/*
 * A GPU write refused here (403 by the node policy, 503 by
 * --audit-required; a lease's 409 is the device process's, which audits
 * it): the device process writes one audit line per GPU named (or one
 * with "gpu": null), result "refused", worded from `code` (enum
 * psmsg_refusal) and what it knows itself: no text crosses. Nothing
 * without an audit log (or on Windows, which has none). Loop thread.
 */
void gate_audit_refusal(struct request *req, const uint32_t *gpus,
    unsigned n, unsigned code);

#endif
