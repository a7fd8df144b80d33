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
 * Dependencies run one way: server.c calls this file (and gate.c, which
 * calls this file too); the handlers call only this file for anything
 * about their request; nothing here includes server.h or gate.h. A request
 * reaches the daemon through its context (ctx.h: the node, the policy, the
 * loop, ...), never the server itself; the handlers get what they need of
 * it through request_node() and the like, and see one header for
 * everything about their request. /metrics, which reports the server's own
 * counters, is the one handler that includes server.h.
 */
#include "http/request.h"

#include <arpa/inet.h>
#include <assert.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "access/auth.h"
#include "access/peer.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/loop.h"
#include "http/conn.h"
#include "http/ctx.h"
#include "http/router.h"

/* ---- What a handler may know of the server ------------------------------- */

struct node *
request_node(const struct request *req)
{
	return req->ctx->node;
}

const struct zeusd_config *
request_config(const struct request *req)
{
	return req->ctx->cfg;
}

bool
request_leases_on(const struct request *req)
{
	return req->ctx->leases;
}

bool
request_auth_on(const struct request *req)
{
	return req->ctx->auth;
}

bool
request_policy_on(const struct request *req)
{
	return req->ctx->policy != NULL;
}

const char *
request_header(const struct request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

/* ---- The peer ------------------------------------------------------------ */

const struct peer *
request_peer(const struct request *req)
{
	return req->cstate != NULL ? &req->cstate->peer : NULL;
}

/* ---- Answers ------------------------------------------------------------- */

/* Queues `resp` as the request's one answer and drops our reference. */
static void
request_queue(struct request *req, unsigned status, struct MHD_Response *resp)
{
	request_reply_kept(req, status, resp);
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

/* An encoded JSON body (taken over; NULL: encoding failed) as a response. */
static struct MHD_Response *
request_text_response(struct request *req, char *text, size_t len)
{
	struct MHD_Response *resp;

	if (text == NULL) {
		struct zerr e;

		zerr_set(&e, ZERR_INTERNAL, "cannot encode JSON");
		request_reply_error(req, &e);
		return NULL;
	}
	resp = MHD_create_response_from_buffer(len, text,
	    MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(text);
		/* unanswered: request_run answers 500 if it can */
		zlog(ZLOG_ERROR, "response_alloc_failed", "body=json");
		return NULL;
	}
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
	    "application/json");
	return resp;
}

/* `body` (stolen) encoded as a response; NULL as request_text_response. */
static struct MHD_Response *
request_json_response(struct request *req, json_t *body)
{
	char *text = json_dumps(body, JSON_COMPACT);

	json_decref(body);
	return request_text_response(req, text, text ? strlen(text) : 0);
}

struct MHD_Response *
request_jsonw_response(struct request *req, struct jsonw *w)
{
	size_t len = 0;
	char *text = jsonw_finish(w, &len);

	return request_text_response(req, text, len);
}

void
request_reply_jsonw(struct request *req, unsigned status, struct jsonw *w)
{
	struct MHD_Response *resp = request_jsonw_response(req, w);

	if (resp != NULL)
		request_queue(req, status, resp);
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

	if (body == NULL && hname == NULL) {
		/* every empty answer of the server is one response (ctx.h) */
		struct http_ctx *ctx = req->ctx;

		if (ctx->empty == NULL &&
		    (ctx->empty = MHD_create_response_from_buffer(0,
		    (void *)"", MHD_RESPMEM_PERSISTENT)) != NULL)
			(void)MHD_add_response_header(ctx->empty,
			    MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
		if (ctx->empty != NULL)
			request_reply_kept(req, status, ctx->empty);
		else
			zlog(ZLOG_ERROR, "response_alloc_failed", "status=%u",
			    status);
		return;
	}
	if (body == NULL) {
		resp = MHD_create_response_from_buffer(0, (void *)"",
		    MHD_RESPMEM_PERSISTENT);
		if (resp != NULL)
			(void)MHD_add_response_header(resp, hname, hvalue);
		request_queue_typed(req, status, resp, "application/json");
		return;
	}
	if ((resp = request_json_response(req, body)) == NULL)
		return;
	if (hname != NULL)
		(void)MHD_add_response_header(resp, hname, hvalue);
	request_queue(req, status, resp);
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

void
request_reply_response(struct request *req, unsigned status,
    struct MHD_Response *resp)
{
	request_queue(req, status, resp);
}

void
request_reply_kept(struct request *req, unsigned status,
    struct MHD_Response *resp)
{
	/* one answer per request, never while its commands are out */
	assert(req->phase == REQ_NEW);
	req->status = status;
	req->phase = REQ_ANSWERED;
	(void)MHD_queue_response(req->conn, status, resp);
}

/* ---- Deferring ----------------------------------------------------------- */

/*
 * Waiting on the loop. libmicrohttpd takes a suspended connection out of its
 * epoll set and puts it back on resume (two epoll_ctl calls and a read that
 * finds nothing: a fifth of the loop's time at 50 connections,
 * docs/performance-history.md). A connection whose handler returned without
 * an answer stays in the set, and libmicrohttpd calls the access handler
 * again at each turn instead (its timeout is 0 meanwhile). So a deferred
 * request that may (request_finish_answers_only) first waits that way, while
 * at least REQUEST_WAIT_MIN requests wait for devices (many clients at once:
 * each turn serves them all), and for at most REQUEST_WAIT_TURNS turns; then
 * it is suspended, as every deferred request was before. One client, or a
 * few, never makes the loop spin: its request is suspended at once, and the
 * loop waits in epoll as ever; a slow device costs a busy node 32 turns per
 * request, not a busy loop. 32: at 50 connections 8 left a quarter of the
 * requests to be suspended, 16 an eighth, 32 and more a twentieth
 * (bench/ab_bench.sh; docs/performance-history.md).
 *
 * `park` settles who does what, since the last completion may come from
 * another thread at any time: it moves from REQ_WAITING once, to
 * REQ_SUSPENDED (the loop suspended it; the last completion resumes it),
 * REQ_DONE (the last completion came first; the loop's next turn
 * finishes it) or REQ_ORPHANED (libmicrohttpd closed the connection, its
 * client gone; the last completion hands req to the loop to free, since
 * a completion's caller may still be in its loop over the batch).
 */
#define REQUEST_WAIT_TURNS 32
#define REQUEST_WAIT_MIN 4

/* Enough requests wait for devices for a turn of the loop to pay. */
static bool
request_many_wait(const struct http_ctx *ctx)
{
	return atomic_load(&ctx->deferred) >= REQUEST_WAIT_MIN;
}

void
request_finish_answers_only(struct request *req)
{
	req->answer_only = true;
}

void
request_defer(struct request *req, unsigned n,
    void (*finish)(struct request *req))
{
	bool may_wait;

	assert(req->phase == REQ_NEW && n >= 1 && finish != NULL);
	req->finish = finish;
	req->phase = REQ_DEFERRED;
	atomic_store(&req->pending, n);
	atomic_fetch_add(&req->ctx->deferred, 1);
	may_wait = req->answer_only;
	req->answer_only = false;	/* it was said of this finish only */
	if (may_wait && loop_on_loop() && request_many_wait(req->ctx)) {
		atomic_fetch_add(&req->ctx->waited_on_loop, 1);
		req->waits = 0;
		atomic_store(&req->park, REQ_WAITING);
		return;
	}
	atomic_store(&req->park, REQ_SUSPENDED);
	MHD_suspend_connection(req->conn);
}

bool
request_wait_turn(struct request *req)
{
	unsigned expect = REQ_WAITING;

	if (req->phase != REQ_DEFERRED ||
	    atomic_load(&req->park) != REQ_WAITING)
		return false;	/* not waiting, or its commands are done */
	if (request_many_wait(req->ctx) && ++req->waits < REQUEST_WAIT_TURNS)
		return true;
	MHD_suspend_connection(req->conn);
	if (!atomic_compare_exchange_strong(&req->park, &expect,
	    REQ_SUSPENDED))
		/* REQ_DONE since the load: the next turn finishes it */
		MHD_resume_connection(req->conn);
	return true;
}

static void
request_orphan_push(struct request *req)
{
	struct http_ctx *ctx = req->ctx;
	struct request *head = atomic_load(&ctx->orphans);

	do
		req->orphan_next = head;
	while (!atomic_compare_exchange_weak(&ctx->orphans, &head, req));
}

bool
request_closing(struct request *req)
{
	unsigned expect = REQ_WAITING;

	if (req->phase == REQ_DEFERRED && atomic_compare_exchange_strong(
	    &req->park, &expect, REQ_ORPHANED)) {
		atomic_fetch_add(&req->ctx->orphaned, 1);
		return false;
	}
	/* no command can still point at req */
	assert(atomic_load(&req->pending) == 0);
	return true;
}

void
request_free_orphans(struct http_ctx *ctx)
{
	struct request *req = atomic_exchange(&ctx->orphans, NULL), *next;

	for (; req != NULL; req = next) {
		next = req->orphan_next;
		request_free(req);
	}
}

void
request_complete_one(struct request *req)
{
	struct http_ctx *ctx = req->ctx;
	struct MHD_Connection *conn = req->conn;
	unsigned left = atomic_fetch_sub(&req->pending, 1);
	unsigned park = REQ_WAITING;

	assert(left >= 1);	/* no more completions than request_defer's n */
	if (left != 1)
		return;
	/* REQ_WAITING becomes REQ_DONE: the loop's next turn finishes it */
	if (!atomic_compare_exchange_strong(&req->park, &park, REQ_DONE)) {
		if (park == REQ_SUSPENDED)
			MHD_resume_connection(conn);
		else
			request_orphan_push(req);	/* REQ_ORPHANED */
	}
	/* req may be gone from here on */
	loop_nudge(ctx->loop);
	atomic_fetch_sub(&ctx->deferred, 1);
}

int
request_socket(const struct request *req)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(req->conn,
	    MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci != NULL ? (int)ci->connect_fd : -1;
}

/* ---- Life cycle ---------------------------------------------------------- */

struct request *
request_new(struct http_ctx *ctx, struct MHD_Connection *conn,
    struct conn *cstate, const char *uri)
{
	struct request *req = calloc(1, sizeof(*req));
	const char *q;
	size_t plen;

	if (req == NULL)
		return NULL;
	clock_gettime(CLOCK_MONOTONIC, &req->t0);
	req->ctx = ctx;
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
	unsigned origin, fetch_site, host;
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
	else if (strcasecmp(key, MHD_HTTP_HEADER_ORIGIN) == 0)
		f->origin++;
	else if (strcasecmp(key, "Sec-Fetch-Site") == 0)
		f->fetch_site++;
	else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
		f->host++;
	else if (request_bad_name(key))
		f->bad_name++;
	return MHD_YES;
}

/*
 * More than one Content-Length, Content-Length together with
 * Transfer-Encoding, more than one Transfer-Encoding or Authorization:
 * libmicrohttpd would use the first header and carry on; so it would with
 * two Origin or Sec-Fetch-Site headers (the web-page check reads the
 * first: "Sec-Fetch-Site: none" then "cross-site" must not pass as
 * "none") and two Host headers (the TCP Host check reads one); a framing header
 * it does not see as one (blanks before the colon, a folded line) or a
 * coding other than chunked: it frames the body otherwise than a lenient
 * proxy may. We answer 400 before reading any body, and the response
 * closes the connection, so nothing after the headers is ever parsed as a
 * request.
 */
void
request_check_framing(struct request *req)
{
	struct request_framing f = { 0, 0, 0, 0, 0, 0, 0, 0 };
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
	else if (f.origin > 1)
		why = "more than one Origin header";
	else if (f.fetch_site > 1)
		why = "more than one Sec-Fetch-Site header";
	else if (f.host > 1)
		why = "more than one Host header";
	else if (f.bad_name > 0)
		why = "a header name with blanks or a folded line";
	else if (f.other_coding > 0)
		why = "a Transfer-Encoding other than chunked";
	if (why == NULL)
		return;
	atomic_fetch_add(&req->ctx->requests_refused, 1);
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
