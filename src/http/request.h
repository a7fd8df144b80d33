/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request.h - one HTTP request as the handlers see it, and the ways to answer.
 *
 * Handlers run on the event-loop thread. A handler either answers at once
 * (request_reply_*), or defers: it queues device commands, and each
 * command's completion calls request_complete_one() from its worker thread
 * or the loop; after the last one the loop calls the `finish` function the
 * handler registered, which answers. A deferred connection is suspended
 * meanwhile, or waits unsuspended while the loop is busy (request.c).
 *
 * request.c implements all of it; server.c (libmicrohttpd glue) creates the
 * request, runs it and frees it with the life-cycle functions at the end.
 * Handlers include this header, not server.h: what they need of the server
 * they reach through the accessors below.
 */
#ifndef ZEUS_REQUEST_H
#define ZEUS_REQUEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "common/err.h"
#include "node/groups.h"

struct MHD_Connection;
struct MHD_Response;
struct http_ctx;
struct jsonw;
struct route;
struct auth_claims;
struct conn;
struct peer;
struct node;
struct zeusd_config;

#define REQUEST_PATH_MAX 256

enum request_park {
	REQ_WAITING,
	REQ_SUSPENDED,
	REQ_DONE,
	REQ_ORPHANED,
};

enum request_phase {
	REQ_NEW,		/* headers seen, body (if any) not yet */
	REQ_DEFERRED,		/* waiting for device commands */
	REQ_ANSWERED,		/* a response is queued */
};

struct request {
	struct http_ctx *ctx;		/* ctx.h; handlers: accessors */
	struct MHD_Connection *conn;
	enum request_phase phase;
	char method[8];
	char path[REQUEST_PATH_MAX];	/* canonical path */
	char *query;			/* raw query string, NUL-terminated */
	size_t query_len;
	bool bad_path;			/* undecodable path: 400 */
	size_t body_bytes;
	struct timespec t0;
	unsigned status;
	const struct route *route;
	const struct auth_claims *claims;	/* NULL when auth is off */
	struct conn *cstate;		/* the connection's state (conn.h) */
	atomic_uint pending;
	/*
	 * While deferred: REQ_WAITING (not suspended: libmicrohttpd calls
	 * the access handler again at each turn), REQ_SUSPENDED, REQ_DONE
	 * (the last completion came while waiting) or REQ_ORPHANED (the
	 * client left while waiting; the last completion hands req to the
	 * loop to free). request.c, "Waiting on the loop".
	 */
	atomic_uint park;
	bool answer_only;		/* request_finish_answers_only() */
	unsigned waits;			/* turns waited unsuspended */
	struct request *orphan_next;
	void (*finish)(struct request *req);
	void *hctx;			/* handler state while deferred */
	void (*hctx_free)(void *hctx);
};

/* Answers with a JSON body (stolen; NULL body means empty). */
void request_reply_json(struct request *req, unsigned status, json_t *body);

/* Answers `{"error": msg}` with the status of err->kind. */
void request_reply_error(struct request *req, const struct zerr *err);

/* Answers with a body of another type (`text` malloc'ed, taken over). */
void request_reply_text(struct request *req, unsigned status,
    const char *content_type, char *text, size_t len);

/* Answers with an empty body. */
void request_reply_empty(struct request *req, unsigned status);

/* Answers 405 with an `Allow` header. */
void request_reply_method(struct request *req, const char *allow);

/* Answers 401 with `WWW-Authenticate: Bearer realm="zeusd"`. */
void request_reply_unauthorized(struct request *req, const struct zerr *err);

/* Answers `{"error": msg}` with err's status (503) and `Retry-After: 1`. */
void request_reply_busy(struct request *req, const struct zerr *err);

/*
 * Queues a response built elsewhere (the SSE one: api/handlers_stream.c),
 * like every other answer.
 */
void request_reply_response(struct request *req, unsigned status,
    struct MHD_Response *resp);

/*
 * Queues a response the caller keeps its reference to (reply_share.c: one
 * response for several requests).
 */
void request_reply_kept(struct request *req, unsigned status,
    struct MHD_Response *resp);

/*
 * The body written in `w` (common/jsonw.h; finished here, so the writer is
 * empty afterwards) as a response with its Content-Type, for
 * request_reply_kept; NULL: the request was answered 500 (the writer
 * failed) or could not be given a response. And the answer with it.
 */
struct MHD_Response *request_jsonw_response(struct request *req,
    struct jsonw *w);
void request_reply_jsonw(struct request *req, unsigned status,
    struct jsonw *w);

/*
 * Waits for `n` completions (n >= 1), then calls `finish` on the loop
 * thread. Call before queueing the commands. The connection is suspended,
 * or, for a request whose finish only answers, on a busy loop, first
 * left waiting unsuspended (request.c, "Waiting on the loop").
 */
void request_defer(struct request *req, unsigned n,
    void (*finish)(struct request *req));

/*
 * Says that the finish function of the request's next request_defer only
 * answers (it logs, audits and records nothing of its own), and that the
 * commands' completions read nothing of the connection (request_peer's
 * contents): such a request may wait without suspending its connection,
 * and if its client leaves meanwhile, the answer is all that is dropped.
 */
void request_finish_answers_only(struct request *req);

/*
 * For server.c's access callback, before request_run: true while a
 * deferred request waits for its commands, unsuspended (libmicrohttpd
 * calls again at its next turn) or suspended now (fewer than 4 requests
 * wait for devices, or it has waited 32 turns); false when it is to run.
 */
bool request_wait_turn(struct request *req);

/*
 * For server.c's completion callback: false when a request whose client
 * left while it waited unsuspended is now the last completion's to hand
 * to the loop (request_free_orphans), true when it is to be freed now.
 */
bool request_closing(struct request *req);

/* Frees the requests orphaned as request_closing says (loop thread). */
void request_free_orphans(struct http_ctx *ctx);

/* The server's devices and configuration; whether GPU leases
 * (--gpu-leases), auth (a signing key) and a node policy are on. */
struct node *request_node(const struct request *req);
const struct zeusd_config *request_config(const struct request *req);
bool request_leases_on(const struct request *req);
bool request_auth_on(const struct request *req);
bool request_policy_on(const struct request *req);

/* A request header's value (the first of its name), NULL when absent. */
const char *request_header(const struct request *req, const char *name);

/* The connection's peer (NULL if unknown). */
const struct peer *request_peer(const struct request *req);

/* One completion; safe from any thread. */
void request_complete_one(struct request *req);

/* ---- Life cycle: called by server.c only --------------------------------- */

/*
 * A new request on `conn` (state `cstate`, NULL for a refused connection)
 * for request target `uri`: keeps the canonical path (or marks it bad) and
 * the raw query. NULL when out of memory.
 */
/* The connection's socket (loop thread; -1 when libmicrohttpd cannot say). */
int request_socket(const struct request *req);

struct request *request_new(struct http_ctx *ctx, struct MHD_Connection *conn,
    struct conn *cstate, const char *uri);

/*
 * Refuses requests whose framing or credentials another HTTP parser could
 * read differently (request smuggling): answers 400 with `Connection: close`
 * and marks the request never to be routed. Called once the headers are in.
 */
void request_check_framing(struct request *req);

/*
 * Whether a web browser sent the request on a page's behalf: it carries
 * `Origin` (every cross-origin request and every POST) or a
 * `Sec-Fetch-Site` other than `none` (a URL the user typed). zeusd's
 * clients are programs; a page must not reach a TCP listener on loopback
 * through the browser of a user who can (docs/security.md).
 */
bool request_from_web_page(const struct request *req);

/*
 * Runs the whole request one step on the loop thread: a new one through
 * `dispatch`, a resumed one through the finish function it deferred with.
 * One that then has neither answered nor deferred is answered 500.
 */
void request_run(struct request *req, void (*dispatch)(struct request *req));

/* The access log line (`aborted`: the response did not complete). */
void request_log(const struct request *req, bool aborted);

/* Frees the request and the handler state it holds; not its claims
 * (gate_release). */
void request_free(struct request *req);

#endif
