/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gate.c - who may do what, decided for each request (see gate.h): the
 * bearer token (claims, scope), the Unix peer's identity, the node policy's
 * scopes and GPU grants, and what the audit log is told about the peer.
 */
#include "http/gate.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "access/audit.h"
#include "access/auth.h"
#include "access/peer.h"
#include "access/policy.h"
#include "common/identity.h"
#include "common/pool.h"
#include "common/sock.h"
#include "common/wipe.h"
#include "devices/gpu.h"
#include "http/conn.h"
#include "http/ctx.h"
#include "http/request.h"
#include "http/router.h"
#include "http/tokens.h"
#include "node/node.h"

/* The route's scope in verified claims (attached to req): 0, or 403. */
static int
gate_token_scope(struct request *req, const struct route *r)
{
	const struct auth_claims *claims = req->claims;
	struct zerr err;
	char msg[512];

	if (r != NULL && r->access == ROUTE_SCOPE &&
	    !(claims->scopes & GROUP_BIT(r->group))) {
		auth_format_forbidden(claims, (enum api_group)r->group, msg,
		    sizeof(msg));
		zerr_set(&err, ZERR_FORBIDDEN, "%s", msg);
		request_reply_error(req, &err);
		return -1;
	}
	return 0;
}

/* The bearer token of the request, or -1 answered (401). */
static int
gate_bearer(struct request *req, const char **token, size_t *len)
{
	const char *hdr = request_header(req, "Authorization");
	struct zerr err;

	if (hdr == NULL) {
		zerr_set(&err, ZERR_UNAUTHENTICATED,
		    "Missing Authorization: Bearer token.");
		request_reply_unauthorized(req, &err);
		return -1;
	}
	if (auth_parse_bearer(hdr, token, len, &err) != 0) {
		request_reply_unauthorized(req, &err);
		return -1;
	}
	return 0;
}

/* Claims attached to the request, or -1 answered (out of memory). */
static int
gate_attach(struct request *req, const struct auth_claims *c)
{
	struct auth_claims *claims = malloc(sizeof(*claims));
	struct zerr err;

	if (claims == NULL) {
		zerr_set(&err, ZERR_INTERNAL, "out of memory");
		request_reply_error(req, &err);
		return -1;
	}
	*claims = *c;
	req->claims = claims;
	return 0;
}

/* One process: the key is here. */
static int
gate_check(struct request *req, const struct auth_key *key,
    const struct route *r)
{
	struct auth_claims claims;
	const char *token;
	size_t len;
	struct zerr err;

	if (gate_bearer(req, &token, &len) != 0)
		return -1;
	if (auth_verify(key, token, len, time(NULL), &claims, &err) != 0) {
		request_reply_unauthorized(req, &err);
		return -1;
	}
	if (gate_attach(req, &claims) != 0)
		return -1;
	return gate_token_scope(req, r);
}

/*
 * A split daemon: only the device process holds the key. A token sent to
 * it from the look-up pool (conn.h: c->tok_lookup, from gate_tok_start
 * until the re-dispatch keeps the verdict in ctx->tokens).
 */
struct tok_lookup {
	struct pool_job job;		/* first: the pool hands it back */
	struct request *req;
	struct node *node;
	uint8_t hash[TOKENS_HASH];
	bool failed;			/* the pool's queue was full */
	int rc;
	struct node_claims nc;
	struct zerr err;
	size_t len;
	char token[];			/* len bytes, wiped after the call */
};

static void
gate_tok_run(struct pool_job *job)
{
	struct tok_lookup *l = (struct tok_lookup *)job;

	l->rc = node_token(l->node, l->token, l->len, &l->nc, &l->err);
	wipe(l->token, l->len);
	request_complete_one(l->req);	/* the loop keeps the verdict */
}

/*
 * The loop: a finished verification becomes a kept verdict. 0, or -1
 * answered (the pool was full, or the device process could not say).
 */
static int
gate_tok_install(struct request *req)
{
	struct conn *c = req->cstate;
	struct tok_lookup *l = c->tok_lookup;
	struct auth_claims ac;
	struct zerr err;
	int rc = 0;

	c->tok_lookup = NULL;
	if (l->failed) {
		zerr_set(&err, ZERR_BUSY, "Too many token checks in progress; "
		    "retry later");
		request_reply_busy(req, &err);
		rc = -1;
	} else if (l->rc == 0) {
		memset(&ac, 0, sizeof(ac));
		memcpy(ac.sub, l->nc.sub, strnlen(l->nc.sub,
		    sizeof(ac.sub) - 1));	/* ac is zeroed: NUL-ended */
		ac.scopes = l->nc.scopes;
		ac.has_exp = l->nc.has_exp;
		ac.exp = l->nc.exp;
		ac.handle = l->nc.handle;
		tokens_put(req->ctx->tokens, l->hash, time(NULL), &ac, NULL);
	} else if (l->err.kind == ZERR_UNAUTHENTICATED) {
		tokens_put(req->ctx->tokens, l->hash, time(NULL), NULL,
		    &l->err);
	} else {
		request_reply_error(req, &l->err);
		rc = -1;
	}
	free(l);
	return rc;
}

/* Starts a verification on the pool: 1 deferred, -1 answered. */
static int
gate_tok_start(struct request *req, const char *token, size_t len,
    const uint8_t *hash, void (*again)(struct request *req))
{
	struct conn *c = req->cstate;
	struct tok_lookup *l;
	struct zerr err;

	if (c == NULL || len > AUTH_TOKEN_MAX) {
		zerr_set(&err, ZERR_UNAUTHENTICATED, "Token is too large (more "
		    "than %d bytes).", AUTH_TOKEN_MAX);
		request_reply_unauthorized(req, &err);
		return -1;
	}
	if ((l = calloc(1, sizeof(*l) + len)) == NULL) {
		zerr_set(&err, ZERR_INTERNAL, "out of memory");
		request_reply_error(req, &err);
		return -1;
	}
	l->job.run = gate_tok_run;
	l->req = req;
	l->node = req->ctx->node;
	memcpy(l->hash, hash, TOKENS_HASH);
	l->len = len;
	memcpy(l->token, token, len);
	c->tok_lookup = l;
	request_defer(req, 1, again);
	if (pool_submit(req->ctx->lookups, &l->job) != 0) {
		wipe(l->token, l->len);
		l->failed = true;
		request_complete_one(req);	/* answered by `again` */
	}
	return 1;
}

/*
 * A split daemon's token check: the kept verdict, or the device process's
 * (deferred: 1). 0 with claims attached, or -1 answered.
 */
static int
gate_check_remote(struct request *req, const struct route *r,
    void (*again)(struct request *req))
{
	uint8_t hash[TOKENS_HASH];
	struct auth_claims claims;
	const char *token;
	size_t len;
	struct zerr err;

	if (gate_bearer(req, &token, &len) != 0)
		return -1;
	tokens_hash(token, len, hash);
	switch (tokens_get(req->ctx->tokens, hash, time(NULL), &claims,
	    &err)) {
	case 1:
		if (gate_attach(req, &claims) != 0)
			return -1;
		return gate_token_scope(req, r);
	case 0:
		request_reply_unauthorized(req, &err);
		return -1;
	default:
		if (req->ctx->lookups == NULL) {
			zerr_set(&err, ZERR_INTERNAL, "no look-up pool");
			request_reply_error(req, &err);
			return -1;
		}
		return gate_tok_start(req, token, len, hash, again);
	}
}

/* ---- The Unix peer's identity and the node policy ------------------------- */

/*
 * Out of memory for a lookup: a peer that no grant names (no uid a policy
 * can hold, no group), so the node policy fails closed.
 */
static const struct conn_who gate_nobody = {
	.pp = { .uid = (uid_t)-1 },
};

/*
 * A Unix peer's identity (NULL for TCP): one lookup per connection, and one
 * more after each reload (node_identity: the device process's NSS and /proc
 * when the daemon is split).
 */
static const struct conn_who *
gate_conn_who(struct request *req)
{
	struct conn *c = req->cstate;
	unsigned gen;
	struct zerr err;

	if (c == NULL || c->peer.kind != PEER_UNIX)
		return NULL;
	gen = atomic_load(&req->ctx->identity_gen);
	if (c->who != NULL && c->who->gen == gen)
		return c->who;
	if (c->who == NULL) {
		if ((c->who = malloc(sizeof(*c->who))) == NULL)
			return &gate_nobody;
		c->who->handle = 0;
		c->who->writes = 0;
	}
	if (node_peer(req->ctx->node, request_socket(req), c->who->handle,
	    &c->who->id, &c->who->handle, &err) != 0)
		return &gate_nobody;	/* asked again next time */
	(void)peer_own_groups(request_socket(req), c->peer.gid, &c->who->id);
	policy_peer_init(&c->who->pp, c->peer.uid, &c->who->id);
	c->who->gen = gen;
	return c->who;
}

const struct identity *
gate_identity(struct request *req)
{
	const struct conn_who *w = gate_conn_who(req);

	return w != NULL ? &w->id : NULL;
}

const char *
gate_user_name(struct request *req)
{
	const struct conn_who *w = gate_conn_who(req);

	return w != NULL && w->id.user[0] != '\0' ? w->id.user : NULL;
}

group_set
gate_peer_scopes(struct request *req)
{
	const struct conn_who *w = gate_conn_who(req);
	group_set s;

	if (req->ctx->policy == NULL || w == NULL)
		return req->ctx->cfg->enabled;
	s = policy_scopes(policy_holder_read(req->ctx->policy), &w->pp);
	policy_holder_done(req->ctx->policy);
	return s & req->ctx->cfg->enabled;
}

/* "uid 1000 (alice)" for the messages of policy refusals. */
static void
gate_who(struct request *req, char *buf, size_t size)
{
	const char *name = gate_user_name(req);

	snprintf(buf, size, "uid %u%s%s%s", (unsigned)req->cstate->peer.uid,
	    name ? " (" : "", name ? name : "", name ? ")" : "");
}

/* Whether the node policy governs this request's peer at all. */
static bool
gate_policy_applies(const struct request *req)
{
	return req->ctx->policy != NULL && req->cstate != NULL &&
	    req->cstate->peer.kind == PEER_UNIX && req->cstate->peer.uid != 0;
}

static int
gate_check_scope(struct request *req, const struct route *r)
{
	const struct conn_who *w;
	group_set held;
	char who[96], names[80], msg[400];
	struct zerr err;

	if (!gate_policy_applies(req) || r == NULL ||
	    r->access != ROUTE_SCOPE || r->group < 0)
		return 0;
	w = gate_conn_who(req);
	held = policy_scopes(policy_holder_read(req->ctx->policy), &w->pp);
	policy_holder_done(req->ctx->policy);
	if (held & GROUP_BIT(r->group))
		return 0;
	gate_who(req, who, sizeof(who));
	group_set_format(held, names, sizeof(names));
	snprintf(msg, sizeof(msg), "Forbidden: %s lacks scope '%s' on this "
	    "node (the node policy grants it: %s)", who,
	    group_name((enum api_group)r->group), held ? names : "nothing");
	zerr_set(&err, ZERR_FORBIDDEN, "%s", msg);
	if (r->group == GROUP_GPU_CONTROL)
		gate_audit_refusal(req, NULL, 0, PSMSG_REFUSAL_SCOPE);
	request_reply_error(req, &err);
	return -1;
}

/*
 * The index of the first of ids[0..n-1] that the node policy does not
 * grant the request's route on, or n: one lookup and one policy read for
 * the whole list.
 */
static unsigned
gate_first_refused_in(struct request *req, int group, const uint32_t *ids,
    unsigned n)
{
	const struct conn_who *w;
	const struct policy *pol;
	unsigned bad = n;

	if (!gate_policy_applies(req) || group < 0)
		return n;
	w = gate_conn_who(req);
	pol = policy_holder_read(req->ctx->policy);
	for (unsigned i = 0; i < n && bad == n; i++)
		if (!policy_allows(pol, &w->pp, (enum api_group)group, ids[i]))
			bad = i;
	policy_holder_done(req->ctx->policy);
	return bad;
}

static unsigned
gate_first_refused(struct request *req, const uint32_t *ids, unsigned n)
{
	return req->route == NULL ? n :
	    gate_first_refused_in(req, req->route->group, ids, n);
}

bool
gate_policy_grants_gpu(struct request *req, enum api_group g, unsigned gpu)
{
	uint32_t id = gpu;

	return gate_first_refused_in(req, (int)g, &id, 1) == 1;
}

bool
gate_gpu_allowed(struct request *req, unsigned gpu)
{
	uint32_t id = gpu;

	return gate_first_refused(req, &id, 1) == 1;
}

int
gate_check_gpus(struct request *req, const uint32_t *ids, unsigned n)
{
	const struct route *r = req->route;
	char who[96];
	struct zerr err;
	unsigned bad = gate_first_refused(req, ids, n);

	if (bad == n)
		return 0;
	gate_who(req, who, sizeof(who));
	zerr_set(&err, ZERR_FORBIDDEN, "Forbidden: %s holds scope '%s' but "
	    "not on GPU %u (the node policy does not grant that GPU; name "
	    "the granted GPUs in gpu_ids)", who,
	    group_name((enum api_group)r->group), (unsigned)ids[bad]);
	if (r->group == GROUP_GPU_CONTROL)
		gate_audit_refusal(req, &ids[bad], 1,
		    PSMSG_REFUSAL_POLICY_GPU);
	request_reply_error(req, &err);
	return -1;
}

/*
 * What the gate decided, for an answer that outlives the request (an SSE
 * stream re-checks it at each event): the token's exp as auth_verify reads
 * it, leeway included, and the node policy's grant as gate_check_scope
 * and gate_check_gpus applied it.
 */
void
gate_grant(struct request *req, struct gate_grant *g)
{
	const struct auth_claims *c = req->claims;
	const struct route *r = req->route;

	*g = (struct gate_grant){ .until_s = INT64_MAX, .group = -1 };
	if (c != NULL && c->has_exp && c->exp < INT64_MAX - AUTH_LEEWAY_S)
		g->until_s = c->exp + AUTH_LEEWAY_S;
	g->by_token = c != NULL;
	if (gate_policy_applies(req) && r != NULL &&
	    r->access == ROUTE_SCOPE && r->group >= 0) {
		g->by_policy = true;
		g->group = r->group;
		g->pp = &gate_conn_who(req)->pp;	/* applies: a Unix peer */
	}
}

/*
 * A split daemon: the device process writes the refusal's lines (node.h,
 * node_audit_refused), sent from the look-up pool so that the loop never
 * waits for a device channel; in place when the pool is full.
 */
struct refusal_job {
	struct pool_job job;		/* first: the pool hands it back */
	struct node *node;
	struct gpu_write who;
	char op[32];
	unsigned code;			/* enum psmsg_refusal */
	unsigned n;
	uint32_t gpus[];
};

static void
gate_refusal_run(struct pool_job *job)
{
	struct refusal_job *j = (struct refusal_job *)job;

	if (j->n == 0)
		node_audit_refused(j->node, &j->who, UINT32_MAX, j->op,
		    j->code);
	for (unsigned i = 0; i < j->n; i++)
		node_audit_refused(j->node, &j->who, j->gpus[i], j->op,
		    j->code);
	free(j);
}

static void
gate_audit_refusal_remote(struct request *req, const uint32_t *gpus,
    unsigned n, const char *op, unsigned code)
{
	struct refusal_job *j = calloc(1, sizeof(*j) + n * sizeof(*gpus));
	struct gpu_write who;

	memset(&who, 0, sizeof(who));
	gate_writer(req, &who);
	if (j == NULL) {
		for (unsigned i = 0; i < (n ? n : 1); i++)
			node_audit_refused(req->ctx->node, &who, n ? gpus[i] :
			    UINT32_MAX, op, code);
		return;
	}
	j->job.run = gate_refusal_run;
	j->node = req->ctx->node;
	j->who = who;
	memcpy(j->op, op, strnlen(op, sizeof(j->op) - 1));	/* j: zeroed */
	j->code = code;
	j->n = n;
	if (n > 0)		/* gpus may be NULL then */
		memcpy(j->gpus, gpus, n * sizeof(*gpus));
	if (req->ctx->lookups == NULL ||
	    pool_submit(req->ctx->lookups, &j->job) != 0)
		gate_refusal_run(&j->job);
}

void
gate_audit_refusal(struct request *req, const uint32_t *gpus, unsigned n,
    unsigned code)
{
	const char *op;
	char q[REQUEST_PATH_MAX];

	/* the device process writes the line, in its words (node.h) */
	if (!audit_enabled())
		return;
	/* the route's operation: "/gpu/set_power_limit" -> "set_power_limit" */
	op = strrchr(req->path, '/');
	snprintf(q, sizeof(q), "%s", op != NULL ? op + 1 : req->path);
	gate_audit_refusal_remote(req, gpus, n, q, code);
}

/* ---- One decision at dispatch --------------------------------------------- */

/*
 * A Unix peer's identity looked up on a pool thread (conn.h: c->lookup from
 * gate_lookup_start until the re-dispatch installs it).
 */
struct conn_lookup {
	struct pool_job job;		/* first: the pool hands it back */
	struct request *req;
	struct node *node;
	uid_t uid;
	gid_t gid;
	unsigned gen;			/* identity_gen when it started */
	int sock;			/* a dup of the connection's socket */
	uint64_t refresh;		/* the handle it had, or 0 */
	uint32_t queued;		/* the writes queued under it */
	uint64_t handle;		/* the device process's answer */
	bool failed;			/* the pool's queue was full */
	bool busy;			/* the device process was: err */
	struct zerr err;
	bool own_groups;		/* `own` holds the kernel's groups */
	struct identity own;		/* of the socket, read on the loop */
	struct identity id;
};

/* The kernel's groups of the peer, where it has them, replace the user
 * database's (peer_own_groups). */
static void
gate_use_own_groups(struct identity *id, const struct identity *own)
{
	memcpy(id->gids, own->gids, own->ngids * sizeof(own->gids[0]));
	id->ngids = own->ngids;
}

static void
gate_lookup_run(struct pool_job *job)
{
	struct conn_lookup *l = (struct conn_lookup *)job;

	l->busy = node_peer(l->node, l->sock, l->refresh, &l->id, &l->handle,
	    &l->err) != 0;
	if (l->sock >= 0)
		close(l->sock);
	l->sock = -1;
	/* a new handle (another process after a reload): the old one ends */
	if (!l->busy && l->refresh != 0 && l->handle != l->refresh)
		node_peer_end(l->node, l->refresh, l->queued);
	if (l->own_groups)
		gate_use_own_groups(&l->id, &l->own);
	request_complete_one(l->req);	/* the loop installs it */
}

/*
 * Whether route `r` needs the Unix peer's identity: the node policy's
 * scope (and the GPU grants of its handler), a write (the audit line and
 * the lease name the user), whoami.
 */
static bool
gate_needs_identity(struct request *req, const struct route *r)
{
	if (r == NULL || req->cstate == NULL ||
	    req->cstate->peer.kind != PEER_UNIX)
		return false;
	return (gate_policy_applies(req) && r->group >= 0) ||
	    r->group == GROUP_GPU_CONTROL || r->needs_auth_enabled;
}

static bool
gate_identity_fresh(struct request *req)
{
	const struct conn *c = req->cstate;

	return c->who != NULL &&
	    c->who->gen == atomic_load(&req->ctx->identity_gen);
}

/* The loop: a finished look-up becomes the connection's identity. */
static void
gate_lookup_install(struct request *req)
{
	struct conn *c = req->cstate;
	struct conn_lookup *l = c->lookup;

	c->lookup = NULL;
	if (c->who == NULL && (c->who = calloc(1, sizeof(*c->who))) == NULL) {
		free(l);		/* gate_conn_who fails closed */
		return;
	}
	c->who->id = l->id;
	if (c->who->handle != l->handle)
		c->who->writes = 0;	/* counted per handle */
	c->who->handle = l->handle;
	policy_peer_init(&c->who->pp, l->uid, &c->who->id);
	c->who->gen = l->gen;
	free(l);
}

/*
 * Starts a look-up of the peer's identity on the pool; the request waits
 * (suspended, like a device command), the loop does not, and `again`
 * dispatches it anew once the identity is in. 1 when deferred, -1 when
 * answered (out of memory, or 503 from a full pool).
 */
static int
gate_lookup_start(struct request *req, void (*again)(struct request *req))
{
	struct conn *c = req->cstate;
	struct conn_lookup *l;
	struct zerr err;

	if ((l = calloc(1, sizeof(*l))) == NULL) {
		zerr_set(&err, ZERR_INTERNAL, "out of memory");
		request_reply_error(req, &err);
		return -1;
	}
	l->job.run = gate_lookup_run;
	l->req = req;
	l->node = req->ctx->node;
	l->uid = c->peer.uid;
	l->gid = c->peer.gid;
	l->gen = atomic_load(&req->ctx->identity_gen);
	l->refresh = c->who != NULL ? c->who->handle : 0;
	l->queued = c->who != NULL ? c->who->writes : 0;
	/* here, while the socket surely is this connection's */
	l->own_groups = peer_own_groups(request_socket(req), l->gid,
	    &l->own) == 0;
	l->sock = sock_dup_unix(request_socket(req));
	c->lookup = l;
	/* before submitting: the job may complete before submit returns */
	request_defer(req, 1, again);
	if (pool_submit(req->ctx->lookups, &l->job) != 0) {
		if (l->sock >= 0)
			close(l->sock);
		l->sock = -1;
		l->failed = true;
		request_complete_one(req);	/* answered by `again` */
	}
	return 1;
}

int
gate_decide(struct request *req, const struct route *r,
    void (*again)(struct request *req))
{
	const struct http_ctx *ctx = req->ctx;
	struct conn *c = req->cstate;
	struct zerr err;

	if (c != NULL && c->lookup != NULL) {
		if (c->lookup->failed) {
			free(c->lookup);
			c->lookup = NULL;
			zerr_set(&err, ZERR_BUSY, "Too many identity look-ups "
			    "in progress; retry later");
			request_reply_busy(req, &err);
			return -1;
		}
		if (c->lookup->busy) {	/* nothing installed: asked anew */
			err = c->lookup->err;
			free(c->lookup);
			c->lookup = NULL;
			request_reply_busy(req, &err);
			return -1;
		}
		gate_lookup_install(req);
	}
	if (c != NULL && c->tok_lookup != NULL &&
	    gate_tok_install(req) != 0)
		return -1;
	if (ctx->lookups != NULL && gate_needs_identity(req, r) &&
	    !gate_identity_fresh(req))
		return gate_lookup_start(req, again);
	if (ctx->auth && req->claims == NULL &&
	    (r == NULL || r->access != ROUTE_OPEN)) {
		int rc = ctx->key != NULL ? gate_check(req, ctx->key, r) :
		    gate_check_remote(req, r, again);

		if (rc != 0)
			return rc;	/* answered 401/403, or deferred */
	}
	return gate_check_scope(req, r);	/* answered 403 on -1 */
}

void
gate_release(struct request *req)
{
	free((void *)req->claims);
	req->claims = NULL;
}

void
gate_writer(struct request *req, struct gpu_write *w)
{
	const struct conn_who *cw;

	w->writer = GPU_WRITER_TCP;
	w->writer_handle = 0;
	w->token_handle = req->claims != NULL ? req->claims->handle : 0;
	w->writer_addr_kind = 0;
	if (req->cstate != NULL && req->cstate->peer.kind == PEER_INET4) {
		w->writer_addr_kind = 4;
		memcpy(w->writer_addr, req->cstate->peer.addr, 4);
	} else if (req->cstate != NULL &&
	    req->cstate->peer.kind == PEER_INET6) {
		w->writer_addr_kind = 6;
		memcpy(w->writer_addr, req->cstate->peer.addr, 16);
	}
	if (req->cstate != NULL && req->cstate->peer.kind == PEER_PIPE)
		w->writer = GPU_WRITER_PIPE;
	if (req->cstate == NULL || req->cstate->peer.kind != PEER_UNIX)
		return;
	w->writer = GPU_WRITER_UNIX;
	if ((cw = gate_conn_who(req)) != NULL)
		w->writer_handle = cw->handle;
}

void
gate_writes_queued(struct request *req, unsigned n)
{
	struct conn *c = req->cstate;

	if (c != NULL && c->who != NULL && c->who->handle != 0)
		c->who->writes = c->who->writes > UINT32_MAX - n ? UINT32_MAX :
		    c->who->writes + n;
}

/* ---- A connection's end ---------------------------------------------------- */

/* The device process forgets a closed peer's handle, off the loop. */
struct peer_end_job {
	struct pool_job job;		/* first: the pool hands it back */
	struct node *node;
	uint64_t handle;
	uint32_t queued;
};

static void
gate_peer_end_run(struct pool_job *job)
{
	struct peer_end_job *j = (struct peer_end_job *)job;

	node_peer_end(j->node, j->handle, j->queued);
	free(j);
}

void
gate_conn_closed(struct http_ctx *ctx, struct conn *c)
{
	struct peer_end_job *j;

	if (c->who == NULL || c->who->handle == 0)
		return;
	if (ctx->lookups == NULL || (j = malloc(sizeof(*j))) == NULL) {
		node_peer_end(ctx->node, c->who->handle, c->who->writes);
		return;
	}
	j->job.run = gate_peer_end_run;
	j->node = ctx->node;
	j->handle = c->who->handle;
	j->queued = c->who->writes;
	if (pool_submit(ctx->lookups, &j->job) != 0) {
		free(j);
		node_peer_end(ctx->node, c->who->handle,	/* rare: full */
		    c->who->writes);
	}
}
