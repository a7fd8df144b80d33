/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request.c - one request's life cycle and every way to answer it
 * (request.h).
 *
 * Phases: a request is REQ_NEW until it is answered (REQ_ANSWERED, once, by
 * request_queue) or deferred (REQ_DEFERRED, by request_defer); the last
 * completion resumes the connection and request_run puts it back to REQ_NEW
 * for its finish function, which answers or defers again.
 *
 * Dependencies run one way: server.c calls this file (and auth_gate.c,
 * which calls this file too); the handlers call only this file for anything
 * about their request; nothing here calls back into server.c or
 * auth_gate.c. This file does read `struct server` (server.h): the request
 * keeps its `srv` pointer, and the handlers get the few things they need of
 * the server through request_node() and the like. Accessors rather than a
 * public `req->srv` keep server.h (the libmicrohttpd daemon and its
 * counters) out of the handlers, which then see one header for everything
 * about their request; /metrics, which reports the server's own counters,
 * is the one handler that includes server.h.
 */
#include "request.h"

#include <assert.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "audit.h"
#include "auth.h"
#include "conn.h"
#include "node.h"
#include "peer.h"
#include "policy.h"
#include "router.h"
#include "server.h"
#include "streams.h"

/* ---- What a handler may know of the server ------------------------------- */

struct node *
request_node(const struct request *req)
{
	return req->srv->node;
}

const struct zeusd_config *
request_config(const struct request *req)
{
	return req->srv->cfg;
}

struct leases *
request_leases(const struct request *req)
{
	return req->srv->leases;
}

bool
request_auth_on(const struct request *req)
{
	return req->srv->key != NULL;
}

bool
request_policy_on(const struct request *req)
{
	return req->srv->policy != NULL;
}

const char *
request_header(const struct request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

/* ---- The peer and the node policy ---------------------------------------- */

const struct peer *
request_peer(const struct request *req)
{
	return req->cstate != NULL ? &req->cstate->peer : NULL;
}

/*
 * Out of memory for a lookup: a peer that no grant names (no uid a policy
 * can hold, no group), so the node policy fails closed.
 */
static const struct conn_who request_nobody = {
	.pp = { .uid = (uid_t)-1 },
};

/*
 * A Unix peer's identity (NULL for TCP): one lookup per connection, and one
 * more after each reload (node_identity: the device process's NSS and /proc
 * when the daemon is split).
 */
static const struct conn_who *
request_conn_pp(struct request *req)
{
	struct conn *c = req->cstate;
	unsigned gen;

	if (c == NULL || c->peer.kind != PEER_UNIX)
		return NULL;
	gen = atomic_load(&req->srv->identity_gen);
	if (c->who != NULL && c->who->gen == gen)
		return c->who;
	if (c->who == NULL && (c->who = malloc(sizeof(*c->who))) == NULL)
		return &request_nobody;
	node_identity(req->srv->node, c->peer.uid, c->peer.gid, c->peer.pid,
	    &c->who->id);
	policy_peer_init(&c->who->pp, c->peer.uid, &c->who->id);
	c->who->gen = gen;
	return c->who;
}

const struct identity *
request_identity(struct request *req)
{
	const struct conn_who *w = request_conn_pp(req);

	return w != NULL ? &w->id : NULL;
}

const char *
request_user_name(struct request *req)
{
	const struct conn_who *w = request_conn_pp(req);

	return w != NULL && w->id.user[0] != '\0' ? w->id.user : NULL;
}

group_set
request_peer_scopes(struct request *req)
{
	const struct conn_who *w = request_conn_pp(req);
	group_set s;

	if (req->srv->policy == NULL || w == NULL)
		return req->srv->cfg->enabled;
	s = policy_scopes(policy_holder_read(req->srv->policy), &w->pp);
	policy_holder_done(req->srv->policy);
	return s & req->srv->cfg->enabled;
}

/* "uid 1000 (alice)" for the messages of policy refusals. */
static void
request_who(struct request *req, char *buf, size_t size)
{
	const char *name = request_user_name(req);

	snprintf(buf, size, "uid %u%s%s%s", (unsigned)req->cstate->peer.uid,
	    name ? " (" : "", name ? name : "", name ? ")" : "");
}

/* Whether the node policy governs this request's peer at all. */
static bool
request_policy_applies(const struct request *req)
{
	return req->srv->policy != NULL && req->cstate != NULL &&
	    req->cstate->peer.kind == PEER_UNIX && req->cstate->peer.uid != 0;
}

int
request_check_scope(struct request *req, const struct route *r)
{
	const struct conn_who *w;
	group_set held;
	char who[96], names[80], msg[400];
	struct zerr err;

	if (!request_policy_applies(req) || r == NULL ||
	    r->access != ROUTE_SCOPE || r->group < 0)
		return 0;
	w = request_conn_pp(req);
	held = policy_scopes(policy_holder_read(req->srv->policy), &w->pp);
	policy_holder_done(req->srv->policy);
	if (held & GROUP_BIT(r->group))
		return 0;
	request_who(req, who, sizeof(who));
	group_set_format(held, names, sizeof(names));
	snprintf(msg, sizeof(msg), "Forbidden: %s lacks scope '%s' on this "
	    "node (the node policy grants it: %s)", who,
	    group_name((enum api_group)r->group), held ? names : "nothing");
	zerr_set(&err, ZERR_FORBIDDEN, "%s", msg);
	if (r->group == GROUP_GPU_CONTROL)
		audit_refusal(req, NULL, 0, err.msg);
	request_reply_error(req, &err);
	return -1;
}

/*
 * The index of the first of ids[0..n-1] that the node policy does not
 * grant the request's route on, or n: one lookup and one policy read for
 * the whole list.
 */
static unsigned
request_first_refused(struct request *req, const uint32_t *ids, unsigned n)
{
	const struct route *r = req->route;
	const struct conn_who *w;
	const struct policy *pol;
	unsigned bad = n;

	if (!request_policy_applies(req) || r == NULL || r->group < 0)
		return n;
	w = request_conn_pp(req);
	pol = policy_holder_read(req->srv->policy);
	for (unsigned i = 0; i < n && bad == n; i++)
		if (!policy_allows(pol, &w->pp, (enum api_group)r->group,
		    ids[i]))
			bad = i;
	policy_holder_done(req->srv->policy);
	return bad;
}

bool
request_gpu_allowed(struct request *req, unsigned gpu)
{
	uint32_t id = gpu;

	return request_first_refused(req, &id, 1) == 1;
}

int
request_check_gpus(struct request *req, const uint32_t *ids, unsigned n)
{
	const struct route *r = req->route;
	char who[96];
	struct zerr err;
	unsigned bad = request_first_refused(req, ids, n);

	if (bad == n)
		return 0;
	request_who(req, who, sizeof(who));
	zerr_set(&err, ZERR_FORBIDDEN, "Forbidden: %s holds scope '%s' but "
	    "not on GPU %u (the node policy does not grant that GPU; name "
	    "the granted GPUs in gpu_ids)", who,
	    group_name((enum api_group)r->group), (unsigned)ids[bad]);
	if (r->group == GROUP_GPU_CONTROL)
		audit_refusal(req, &ids[bad], 1, err.msg);
	request_reply_error(req, &err);
	return -1;
}

/* ---- Answers ------------------------------------------------------------- */

/* Queues `resp` as the request's one answer and drops our reference. */
static void
request_queue(struct request *req, unsigned status, struct MHD_Response *resp)
{
	/* one answer per request, never while its commands are out */
	assert(req->phase == REQ_NEW);
	req->status = status;
	req->phase = REQ_ANSWERED;
	(void)MHD_queue_response(req->conn, status, resp);
	MHD_destroy_response(resp);
}

static void
request_queue_typed(struct request *req, unsigned status,
    struct MHD_Response *resp, const char *content_type)
{
	if (resp == NULL) {
		zlog(ZLOG_ERROR, "response_alloc_failed", "status=%u", status);
		return;
	}
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
	    content_type);
	request_queue(req, status, resp);
}

void
request_reply_text(struct request *req, unsigned status,
    const char *content_type, char *text, size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, text,
	    MHD_RESPMEM_MUST_FREE);

	if (resp == NULL)
		free(text);
	request_queue_typed(req, status, resp, content_type);
}

/*
 * Encodes `body` (stolen; NULL: empty body) and queues it with `status` and,
 * when `hname` is given, one extra header.
 */
static void
request_reply(struct request *req, unsigned status, json_t *body,
    const char *hname, const char *hvalue)
{
	struct MHD_Response *resp;
	char *text = NULL;

	if (body != NULL) {
		text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		if (text == NULL) {
			struct zerr e;

			zerr_set(&e, ZERR_INTERNAL, "cannot encode JSON");
			request_reply_error(req, &e);
			return;
		}
		resp = MHD_create_response_from_buffer(strlen(text), text,
		    MHD_RESPMEM_MUST_FREE);
	} else {
		resp = MHD_create_response_from_buffer(0, (void *)"",
		    MHD_RESPMEM_PERSISTENT);
	}
	if (resp == NULL)
		free(text);
	else if (hname != NULL)
		(void)MHD_add_response_header(resp, hname, hvalue);
	request_queue_typed(req, status, resp, "application/json");
}

void
request_reply_json(struct request *req, unsigned status, json_t *body)
{
	request_reply(req, status, body, NULL, NULL);
}

void
request_reply_empty(struct request *req, unsigned status)
{
	request_reply(req, status, NULL, NULL, NULL);
}

void
request_reply_error(struct request *req, const struct zerr *err)
{
	unsigned status = zerr_http_status(err->kind);

	if (status == 200)
		status = 500;
	request_reply(req, status, json_pack("{s:s}", "error", err->msg), NULL,
	    NULL);
}

void
request_reply_method(struct request *req, const char *allow)
{
	request_reply(req, 405, json_pack("{s:s}", "error",
	    "Method not allowed"), MHD_HTTP_HEADER_ALLOW, allow);
}

void
request_reply_unauthorized(struct request *req, const struct zerr *err)
{
	request_reply(req, 401, json_pack("{s:s}", "error", err->msg),
	    MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"zeusd\"");
}

/* A full device queue drains within about one command: retry in a second. */
void
request_reply_busy(struct request *req, const struct zerr *err)
{
	request_reply(req, zerr_http_status(err->kind), json_pack("{s:s}",
	    "error", err->msg), MHD_HTTP_HEADER_RETRY_AFTER, "1");
}

/*
 * The SSE body is built by streams.c, whose reader suspends and resumes the
 * connection itself (and sets Content-Type and Cache-Control); this only
 * subscribes and queues it like every other answer.
 */
void
request_reply_stream(struct request *req, enum streams_kind kind,
    const unsigned *idx, unsigned n)
{
	const struct auth_claims *c = req->claims;
	const struct route *r = req->route;
	struct streams_grant g = { .until_s = INT64_MAX, .group = -1 };
	struct MHD_Response *resp;
	struct zerr err;

	/* the token's exp as auth_verify reads it, leeway included */
	if (c != NULL && c->has_exp && c->exp < INT64_MAX - AUTH_LEEWAY_S)
		g.until_s = c->exp + AUTH_LEEWAY_S;
	g.by_token = c != NULL;
	/* as request_check_scope and request_check_gpus decided */
	if (request_policy_applies(req) && r != NULL &&
	    r->access == ROUTE_SCOPE && r->group >= 0) {
		g.by_policy = true;
		g.group = r->group;
		g.pp = &request_conn_pp(req)->pp;	/* applies: a Unix peer */
	}
	if (streams_subscribe(req->srv->streams, kind, idx, n, req->conn,
	    &g, &resp, &err) != 0) {
		request_reply_error(req, &err);
		return;
	}
	request_queue(req, 200, resp);
}

/* ---- Deferring ----------------------------------------------------------- */

void
request_defer(struct request *req, unsigned n,
    void (*finish)(struct request *req))
{
	assert(req->phase == REQ_NEW && n >= 1 && finish != NULL);
	req->finish = finish;
	req->phase = REQ_DEFERRED;
	atomic_store(&req->pending, n);
	atomic_fetch_add(&req->srv->deferred, 1);
	MHD_suspend_connection(req->conn);
}

void
request_complete_one(struct request *req)
{
	struct server *srv = req->srv;
	unsigned left = atomic_fetch_sub(&req->pending, 1);

	assert(left >= 1);	/* no more completions than request_defer's n */
	if (left == 1) {
		MHD_resume_connection(req->conn);
		/* req may be gone from here on */
		server_loop_nudge(srv);
		atomic_fetch_sub(&srv->deferred, 1);
	}
}

/* ---- Life cycle ---------------------------------------------------------- */

struct request *
request_new(struct server *srv, struct MHD_Connection *conn,
    struct conn *cstate, const char *uri)
{
	struct request *req = calloc(1, sizeof(*req));
	const char *q;
	size_t plen;

	if (req == NULL)
		return NULL;
	clock_gettime(CLOCK_MONOTONIC, &req->t0);
	req->srv = srv;
	req->conn = conn;
	req->cstate = cstate;
	q = strchr(uri, '?');
	plen = q ? (size_t)(q - uri) : strlen(uri);
	if (router_canonical_path(uri, plen, req->path, sizeof(req->path)) != 0) {
		req->bad_path = true;
		snprintf(req->path, sizeof(req->path), "%.*s",
		    (int)(plen > 128 ? 128 : plen), uri);
	}
	if (q != NULL) {
		req->query_len = strlen(q + 1);
		req->query = strdup(q + 1);
		if (req->query == NULL) {
			free(req);
			return NULL;
		}
	}
	return req;
}

struct request_framing {
	unsigned content_length, transfer_encoding, authorization;
	unsigned bad_name, other_coding;
};

/*
 * libmicrohttpd 0.9.75 keeps "Content-Length : 5" as a header named
 * "Content-Length " and glues a folded line onto the name
 * ("Content-Length:\r\n 5" becomes "Content-Length5"), then frames by
 * neither: such names are counted as bad.
 */
static bool
request_bad_name(const char *key)
{
	return strpbrk(key, " \t") != NULL ||
	    strncasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH,
	    strlen(MHD_HTTP_HEADER_CONTENT_LENGTH)) == 0 ||
	    strncasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING,
	    strlen(MHD_HTTP_HEADER_TRANSFER_ENCODING)) == 0;
}

static enum MHD_Result
request_count_header(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *value)
{
	struct request_framing *f = cls;

	(void)kind;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
		f->content_length++;
	else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		f->transfer_encoding++;
		/* any other coding: libmicrohttpd reads until the close */
		if (value == NULL || strcasecmp(value, "chunked") != 0)
			f->other_coding++;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0)
		f->authorization++;
	else if (request_bad_name(key))
		f->bad_name++;
	return MHD_YES;
}

/*
 * More than one Content-Length, Content-Length together with
 * Transfer-Encoding, more than one Transfer-Encoding or Authorization:
 * libmicrohttpd would use the first header and carry on; a framing header
 * it does not see as one (blanks before the colon, a folded line) or a
 * coding other than chunked: it frames the body otherwise than a lenient
 * proxy may. We answer 400 before reading any body, and the response
 * closes the connection, so nothing after the headers is ever parsed as a
 * request.
 */
void
request_check_framing(struct request *req)
{
	struct request_framing f = { 0, 0, 0, 0, 0 };
	const char *why = NULL;

	(void)MHD_get_connection_values(req->conn, MHD_HEADER_KIND,
	    request_count_header, &f);
	if (f.content_length > 1)
		why = "more than one Content-Length header";
	else if (f.content_length > 0 && f.transfer_encoding > 0)
		why = "both Content-Length and Transfer-Encoding";
	else if (f.transfer_encoding > 1)
		why = "more than one Transfer-Encoding header";
	else if (f.authorization > 1)
		why = "more than one Authorization header";
	else if (f.bad_name > 0)
		why = "a header name with blanks or a folded line";
	else if (f.other_coding > 0)
		why = "a Transfer-Encoding other than chunked";
	if (why == NULL)
		return;
	atomic_fetch_add(&req->srv->requests_refused, 1);
	req->bad_path = true;	/* never routed */
	request_reply(req, 400, json_pack("{s:s+}", "error",
	    "Malformed request: ", why), MHD_HTTP_HEADER_CONNECTION, "close");
}

bool
request_from_web_page(const struct request *req)
{
	const char *site = request_header(req, "Sec-Fetch-Site");

	return request_header(req, "Origin") != NULL ||
	    (site != NULL && strcasecmp(site, "none") != 0);
}

void
request_run(struct request *req, void (*dispatch)(struct request *req))
{
	switch (req->phase) {
	case REQ_NEW:
		dispatch(req);
		break;
	case REQ_DEFERRED:
		/* resumed only by the last completion */
		assert(atomic_load(&req->pending) == 0);
		req->phase = REQ_NEW;
		req->finish(req);
		break;
	case REQ_ANSWERED:
		break;
	}
	/*
	 * A handler (or finish function) that neither answered nor deferred is
	 * a bug; answer 500 rather than leave the client hanging.
	 */
	if (req->phase == REQ_NEW) {
		struct zerr err;

		zerr_set(&err, ZERR_INTERNAL, "internal: handler did not answer");
		request_reply_error(req, &err);
	}
}

/* The access log line; nothing is formatted when its level is off. */
void
request_log(const struct request *req, bool aborted)
{
	enum zlog_level level = req->status >= 500 ? ZLOG_WARN : ZLOG_INFO;
	const char *user = req->claims ? req->claims->sub : NULL;
	const struct conn *c = req->cstate;
	char qpath[320], quser[600], who[96], qname[160];
	struct timespec now;
	long long us;

	if (!zlog_enabled(level))
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	us = (now.tv_sec - req->t0.tv_sec) * 1000000LL +
	    (now.tv_nsec - req->t0.tv_nsec) / 1000;
	/* the identity: token sub, peer uid/pid (and name once known), or
	 * the TCP address */
	who[0] = qname[0] = '\0';
	if (c != NULL) {
		who[0] = ' ';
		peer_format(&c->peer, who + 1, sizeof(who) - 1);
		if (c->who != NULL && c->who->id.user[0] != '\0') {
			memcpy(qname, " name=", 7);
			zlog_quote(qname + 6, sizeof(qname) - 6, c->who->id.user);
		}
	}
	zlog(level, "request", "method=%s path=%s status=%u dur_us=%lld%s%s"
	    "%s%s%s",
	    req->method[0] ? req->method : "?",
	    zlog_quote(qpath, sizeof(qpath), req->path), req->status, us,
	    user ? " user=" : "",
	    user ? zlog_quote(quser, sizeof(quser), user) : "", who, qname,
	    aborted ? " aborted=true" : "");
}

void
request_free(struct request *req)
{
	if (req->hctx_free != NULL)
		req->hctx_free(req->hctx);
	free(req->query);
	free(req);
}
