/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c - libmicrohttpd glue: the daemon, connections, dispatch.
 *
 * Threading: one thread runs every callback below. Nothing here blocks on
 * hardware: handlers that need a device queue commands to the device's
 * worker and suspend the connection (or, on a busy loop, leave it waiting
 * unsuspended: request.c); the worker's completion resumes it.
 *
 * Which thread: with descriptors watched on the wiring's loop (ctx.loop,
 * common/loop.h: a split daemon's network process, whose shared readers'
 * replies come back on them), that loop runs libmicrohttpd in its external
 * epoll mode (the server is its driver: server_loop_timeout, _turn,
 * _commands) and reads those descriptors too, so a reply resumes its
 * request with no thread hop. Other threads reach libmicrohttpd there only
 * through calls it allows from any thread (resume, followed by loop_nudge);
 * what must run on the loop (adding the watchdog's probe connection,
 * quiescing) is asked of it through loop_ask. With nothing to watch
 * (--no-privsep), libmicrohttpd's own epoll thread runs alone:
 * the outer epoll set would cost a wait per turn for nothing (~3 µs a
 * request at one connection, measured with bench/pinned_ab.sh).
 *
 * Life of a request:
 *   uri_log callback   allocate struct request, keep the raw path and query
 *   access, 1st call   return (answering on the first call makes libmicrohttpd
 *                      close keep-alive connections)
 *   access, body       discard and count (all parameters are in the query)
 *   access, last call  route, authorise, run the handler (phase REQ_NEW)
 *   access, waiting    return at once, or suspend (request_wait_turn)
 *   access, resumed    run the handler's finish() (phase REQ_DEFERRED)
 *   completed callback log one line, free
 *
 * The request itself (its phases, the answers, the peer and node-policy
 * checks) is request.c's; this file drives it from libmicrohttpd's
 * callbacks and decides the route (router, gate, policy scope). It knows
 * nothing of streams or handlers but the route table: what else must
 * happen at shutdown is the wiring's (struct server_hooks).
 */
#include "http/server.h"

#include <assert.h>
#include <errno.h>
#include <microhttpd.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/env.h"
#include "common/log.h"
#include "common/loop.h"
#include "common/sock.h"
#include "common/sockdiag.h"
#include "http/gate.h"
#include "http/conn.h"
#include "http/deadline.h"
#include "http/host.h"
#include "access/peer.h"
#include "http/peer_limit.h"
#include "http/reply_share.h"
#include "http/request.h"
#include "http/router.h"
#include "node/config.h"
#include "node/node.h"

/*
 * Per-connection pool; it dominates the memory of open SSE streams. 12 KiB
 * keeps 10,000 streams at ~125 MiB RSS (16 KiB: ~147, 8 KiB: ~107) and still
 * takes a 4 KiB query or a 9 KB Authorization header. See docs/streams.md.
 */
#define SERVER_MEMORY_LIMIT (12 * 1024)
#define SERVER_CONNECTION_LIMIT 16384
/*
 * Descriptors kept for everything but connections (channels, the loop,
 * the pools, logs, look-ups in flight), and what a connection costs: its
 * socket (a lease's holder is watched by the device process, which
 * keeps a pidfd only per holder process: access/warden.h).
 * A descriptor limit below what SERVER_CONNECTION_LIMIT needs lowers the
 * limit instead of letting accept(2) and pidfd_open(2) fail on the way.
 */
#define SERVER_FD_RESERVE 256
#define SERVER_CONNECTION_FLOOR 16
/*
 * libmicrohttpd's own limit is this much higher: room that only root on the
 * Unix socket and the watchdog's probe (server_loop_alive) may use, so that
 * a table full of other peers' connections locks neither out.
 */
#define SERVER_RESERVED_CONNECTIONS 64
#define SERVER_IDLE_TIMEOUT_S 60	/* ZEUSD_IDLE_TIMEOUT_S overrides */
#define SERVER_MAX_BODY 4096
#define SERVER_REQUEST_TIMEOUT_S 10	/* ZEUSD_REQUEST_TIMEOUT_S overrides */
#define SERVER_MAX_PER_PEER 64		/* ZEUSD_MAX_CONNS_PER_PEER overrides */

#define SERVER_QUIESCE_WAIT_MS 2000

static struct conn *
server_conn_state(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn,
	    MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci != NULL ? ci->socket_context : NULL;
}

/* At most a few lines a second for events a flood would repeat. */
static bool
server_log_allowed(void)
{
	static _Atomic long last_sec;
	static _Atomic int in_sec;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (atomic_exchange(&last_sec, ts.tv_sec) != ts.tv_sec)
		atomic_store(&in_sec, 0);
	return atomic_fetch_add(&in_sec, 1) < 5;
}

/*
 * Refuses a connection at accept time: a short 503 if the socket takes it
 * at once, then shutdown(2), which the loop sees as the peer leaving. No
 * request of it is ever parsed. `all`: over the limit of all connections,
 * else over the peer's.
 */
static void
server_refuse_conn(struct server *srv, int fd, const struct peer *p, bool all)
{
	char body[192], head[512], who[96];
	int blen, hlen;

	if (all)
		blen = snprintf(body, sizeof(body), "{\"error\":\"Too many "
		    "connections (limit %u); retry later\"}",
		    srv->conn_limit);
	else if (peer_is_loopback(p) && p->owned)
		blen = snprintf(body, sizeof(body), "{\"error\":\"Too many "
		    "connections from your user (uid %u; limit %u); close "
		    "some and retry\"}", (unsigned)p->uid, srv->max_per_peer);
	else if (peer_is_loopback(p))
		blen = snprintf(body, sizeof(body), "{\"error\":\"Too many "
		    "connections from loopback clients whose user zeusd "
		    "could not tell, which count as one peer (limit %u); "
		    "local clients: use the Unix socket\"}",
		    srv->max_per_peer);
	else
		blen = snprintf(body, sizeof(body), "{\"error\":\"Too many "
		    "connections from this peer (limit %u); close some and "
		    "retry\"}", srv->max_per_peer);
	hlen = snprintf(head, sizeof(head), "HTTP/1.1 503 Service Unavailable"
	    "\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
	    "Connection: close\r\nContent-Length: %d\r\n\r\n%s", blen, body);
	if (hlen > 0 && (size_t)hlen < sizeof(head))
		sock_send_nowait(fd, head, (size_t)hlen);
	sock_shutdown(fd);
	atomic_fetch_add(&srv->conns_refused, 1);
	if (server_log_allowed())
		zlog(ZLOG_WARN, "connection_refused", "%s reason=%s limit=%u%s",
		    peer_format(p, who, sizeof(who)), all ? "connection_limit" :
		    "per_peer_limit", all ? srv->conn_limit :
		    srv->max_per_peer, !all && peer_is_loopback(p) &&
		    !p->owned ? " peer=loopback" : "");
}

/*
 * Root on the Unix socket, and the watchdog's probe: a socketpair of this
 * process, whose SO_PEERCRED pid is our own (no client can claim it).
 */
static bool
server_conn_privileged(const struct peer *p)
{
	return peer_is_root(p) || (p->kind == PEER_UNIX && p->pid == getpid());
}

/*
 * A loopback TCP connection counts as the user that owns its client's
 * socket, as a Unix peer counts as its uid (docs/security.md, "Who a peer
 * is"): the kernel knows it, and the device process asks (node_tcp_owner:
 * one netlink look-up of this exact connection, behind one round trip
 * from this loop). When it cannot tell, the connection stays part of the
 * one loopback peer. Only asked with a per-peer cap to count against.
 */
static void
server_conn_owner(struct server *srv, int fd, struct peer *p)
{
	struct sockdiag_tuple t;
	uint32_t uid;

	if (!peer_is_loopback(p) || srv->ctx.node == NULL ||
	    peer_loopback_tuple(fd, &t) != 0 ||
	    node_tcp_owner(srv->ctx.node, &t, &uid) != 0)
		return;
	peer_set_owner(p, (uid_t)uid);
}

static void
server_conn_started(struct server *srv, struct MHD_Connection *mc,
    void **socket_context)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc,
	    MHD_CONNECTION_INFO_CONNECTION_FD);
	struct conn *c;
	char who[96];
	int fd;

	*socket_context = NULL;
	if (ci == NULL)
		return;
	fd = ci->connect_fd;
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		sock_shutdown(fd);
		return;
	}
	if (srv->hooks.peer == NULL ||
	    srv->hooks.peer(srv->hooks.peer_ctx, fd, &c->peer) != 0)
		(void)peer_identify(fd, NULL, 0, &c->peer);
	if (!server_conn_privileged(&c->peer)) {
		if (atomic_load(&srv->conns) >= srv->conn_limit) {
			server_refuse_conn(srv, fd, &c->peer, true);
			free(c);
			return;
		}
		if (srv->peers != NULL)
			server_conn_owner(srv, fd, &c->peer);
		/*
		 * Root over loopback TCP is not counted per peer, as on the
		 * Unix socket; unlike there it stays in the table and out of
		 * the reserved room (server_conn_privileged): that room is
		 * for the Unix socket, root's way in when all else is full.
		 */
		if (srv->peers != NULL &&
		    !(c->peer.owned && c->peer.uid == 0)) {
			if (!peer_limit_acquire(srv->peers, &c->peer)) {
				server_refuse_conn(srv, fd, &c->peer, false);
				free(c);
				return;
			}
			c->counted = true;
		}
		c->in_table = true;
		atomic_fetch_add(&srv->conns, 1);
	}
	deadline_init(&c->deadline, fd, peer_format(&c->peer, who,
	    sizeof(who)));
	deadline_arm(srv->deadlines, &c->deadline);
	*socket_context = c;
}

static void
server_conn_notify(void *cls, struct MHD_Connection *mc,
    void **socket_context, enum MHD_ConnectionNotificationCode code)
{
	struct server *srv = cls;
	struct conn *c = *socket_context;

	atomic_fetch_add(&srv->loop_beats, 1);	/* server_loop_alive */
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		server_conn_started(srv, mc, socket_context);
		return;
	}
	if (c == NULL)
		return;
	/* before libmicrohttpd closes the fd: see deadline.h */
	deadline_disarm(srv->deadlines, &c->deadline);
	if (c->counted)
		peer_limit_release(srv->peers, &c->peer);
	if (c->in_table)
		atomic_fetch_sub(&srv->conns, 1);
	gate_conn_closed(&srv->ctx, c);
	peer_release(&c->peer);
	free(c->who);
	free(c->lookup);
	free(c->tok_lookup);
	free(c);
	*socket_context = NULL;
}

static void *
server_uri_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct server *srv = cls;
	struct request *req = request_new(&srv->ctx, conn,
	    server_conn_state(conn),
	    uri);

	if (req == NULL)
		return NULL;
	atomic_fetch_add(&srv->active, 1);
	return req;
}

static void server_decide(struct request *req);

/*
 * TCP: the Host header against the address the connection came to and
 * --tcp-allowed-hosts (host.h: DNS rebinding), without auth and on a
 * loopback address only: with a key a page has no token to present, and a
 * routable address the operator opened to the network anyway. The Unix
 * socket is out of a browser's reach and its Host means nothing.
 */
static bool
server_host_ok(struct request *req)
{
	const union MHD_ConnectionInfo *ci;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (req->cstate == NULL || (req->cstate->peer.kind != PEER_INET4 &&
	    req->cstate->peer.kind != PEER_INET6) || req->ctx->auth)
		return true;	/* with auth, on any address: no check */
	ci = MHD_get_connection_info(req->conn,
	    MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci == NULL || getsockname(ci->connect_fd, (struct sockaddr *)&ss,
	    &len) != 0)
		return false;
	if (!host_check_applies((const struct sockaddr *)&ss, req->ctx->auth))
		return true;
	return host_allowed(request_header(req, MHD_HTTP_HEADER_HOST),
	    (const struct sockaddr *)&ss, req->ctx->cfg->tcp_allowed_hosts);
}

/* The new request: its framing, size and origin, its route, its group. */
static void
server_dispatch(struct request *req)
{
	struct http_ctx *ctx = req->ctx;
	const struct route *r;
	struct zerr err;

	if (req->bad_path) {
		zerr_set(&err, ZERR_INVALID, "Malformed request path");
		request_reply_error(req, &err);
		return;
	}
	if (req->body_bytes > SERVER_MAX_BODY) {
		zerr_set(&err, ZERR_INVALID,
		    "Request body too large (parameters go in the query)");
		request_reply_error(req, &err);
		return;
	}
	if (request_from_web_page(req)) {
		zerr_set(&err, ZERR_FORBIDDEN, "Requests from web pages are "
		    "refused (the request has an Origin or Sec-Fetch-Site "
		    "header); use a program such as curl");
		request_reply_error(req, &err);
		return;
	}
	if (!server_host_ok(req)) {
		char q[200];

		zlog(ZLOG_INFO, "host_refused", "host=%s msg=\"on loopback "
		    "without --signing-key-path: not the address the "
		    "connection came to, localhost, this node's name nor in "
		    "--tcp-allowed-hosts\"", zlog_quote(q, sizeof(q),
		    request_header(req, MHD_HTTP_HEADER_HOST)));
		request_reply_json(req, 421, json_pack("{s:s}", "error",
		    "Misdirected request: on loopback without a signing key, "
		    "the Host header must name this server's address, "
		    "localhost, this node's name or a name in "
		    "--tcp-allowed-hosts (refused against DNS rebinding)"));
		return;
	}
	r = router_lookup(ctx->routes, req->path);
	/* /auth/whoami: with auth, or on the Unix socket (the peer's uid) */
	if (r != NULL && r->needs_auth_enabled && !ctx->auth &&
	    (req->cstate == NULL || req->cstate->peer.kind != PEER_UNIX))
		r = NULL;
	req->route = r;
	if (r != NULL && r->group >= 0 &&
	    !(ctx->cfg->enabled & GROUP_BIT(r->group))) {
		zerr_set(&err, ZERR_NOT_FOUND,
		    "API group '%s' is not enabled on this server.",
		    group_name((enum api_group)r->group));
		request_reply_error(req, &err);
		return;
	}
	server_decide(req);
}

/*
 * The routed request, from the gate on: the gate's decision (which may
 * make the request wait for its peer's identity, and then runs this again),
 * then the method and the handler.
 */
static void
server_decide(struct request *req)
{
	const struct route *r = req->route;
	struct zerr err;

	if (gate_decide(req, r, server_decide) != 0)
		return;		/* answered 401/403, or waiting for the peer */
	if (r == NULL) {
		zerr_set(&err, ZERR_NOT_FOUND, "Not found: %.128s", req->path);
		request_reply_error(req, &err);
		return;
	}
	if (strcmp(r->method, req->method) != 0) {
		request_reply_method(req, r->method);
		return;
	}
	r->handle(req);
}

static enum MHD_Result
server_access(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **req_cls)
{
	struct request *req = *req_cls;

	if (req == NULL || req->cstate == NULL)
		return MHD_NO;	/* out of memory, or a refused connection */
	if (req->method[0] == '\0') {
		/* First call: remember the method, answer later. */
		size_t mlen = strlen(method);

		if (mlen >= sizeof(req->method) || mlen == 0)
			memcpy(req->method, "?", 2);	/* never a route's */
		else
			memcpy(req->method, method, mlen + 1);
		request_check_framing(req);	/* may answer 400 now */
		return MHD_YES;
	}
	if (*upload_data_size != 0) {
		req->body_bytes += *upload_data_size;
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (request_wait_turn(req))
		return MHD_YES;	/* still waiting for its device commands */
	if (req->phase == REQ_NEW) {
		/* a new request is whole now: its deadline is met */
		deadline_disarm(((struct server *)cls)->deadlines,
		    &req->cstate->deadline);
	}
	request_run(req, server_dispatch);
	return MHD_YES;
}

static void
server_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct server *srv = cls;
	struct request *req = *req_cls;
	struct conn *c = server_conn_state(conn);

	/* the response is out: the next request's clock starts now */
	if (c != NULL)
		deadline_arm(srv->deadlines, &c->deadline);
	if (req == NULL)
		return;
	if (req->status != 0)
		stats_record(&srv->stats, srv->ctx.routes, req->route,
		    req->status);
	request_log(req, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
	gate_release(req);
	/*
	 * A suspended connection is never completed (a client gone while
	 * its request was suspended is noticed after the resume), but one
	 * waiting unsuspended is, when its client leaves: its commands may
	 * still point at req, and the last of them hands it to the loop.
	 */
	if (request_closing(req))
		request_free(req);
	*req_cls = NULL;
	atomic_fetch_sub(&srv->active, 1);
}

/*
 * libmicrohttpd logs a line for every client that leaves mid-response; keep
 * them at debug level, and at most a few per second.
 */
static void server_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void
server_mhd_log(void *cls, const char *fmt, va_list ap)
{
	static _Atomic long last_sec;
	static _Atomic int in_sec;
	char msg[512], q[600];
	struct timespec ts;
	size_t n;

	if (!zlog_enabled(ZLOG_DEBUG))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (atomic_exchange(&last_sec, ts.tv_sec) != ts.tv_sec)
		atomic_store(&in_sec, 0);
	if (atomic_fetch_add(&in_sec, 1) >= 10)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	zlog(ZLOG_DEBUG, "http_library", "msg=%s", zlog_quote(q, sizeof(q), msg));
}

/* SERVER_CONNECTION_LIMIT, or what the descriptor limit leaves room for. */
static unsigned
server_conn_limit(const struct server *srv)
{
	unsigned long max = server_os_fd_limit(), fit;

	if (max == 0)
		return SERVER_CONNECTION_LIMIT;
	fit = max > SERVER_FD_RESERVE ? max - SERVER_FD_RESERVE : 0;
	fit = fit > SERVER_RESERVED_CONNECTIONS ? fit -
	    SERVER_RESERVED_CONNECTIONS : 0;
	if (fit < SERVER_CONNECTION_FLOOR)
		fit = SERVER_CONNECTION_FLOOR;
	return fit < SERVER_CONNECTION_LIMIT ? (unsigned)fit :
	    SERVER_CONNECTION_LIMIT;
}

int
server_configure(struct server *srv, struct zerr *err)
{
	uint64_t idle_s, request_s, per_peer;

	if (env_uint("ZEUSD_IDLE_TIMEOUT_S", 1, 86400, SERVER_IDLE_TIMEOUT_S,
	    &idle_s, err) != 0 ||
	    env_uint("ZEUSD_REQUEST_TIMEOUT_S", 1, 3600,
	    SERVER_REQUEST_TIMEOUT_S, &request_s, err) != 0 ||
	    env_uint("ZEUSD_MAX_CONNS_PER_PEER", 0, SERVER_CONNECTION_LIMIT,
	    SERVER_MAX_PER_PEER, &per_peer, err) != 0)
		return -1;
	srv->idle_s = (unsigned)idle_s;
	srv->request_s = (unsigned)request_s;
	srv->max_per_peer = (unsigned)per_peer;
	srv->configured = true;
	return 0;
}

/* ---- The server as the loop's driver (common/loop.h) -------------------- */

static int
server_loop_timeout(void *ctx)
{
	struct server *srv = ctx;
	MHD_UNSIGNED_LONG_LONG to;

	if (MHD_get_timeout(srv->mhd, &to) != MHD_YES)
		return -1;
	return to > INT_MAX ? INT_MAX : (int)to;
}

static void
server_loop_turn(void *ctx)
{
	struct server *srv = ctx;

	MHD_run(srv->mhd);
	request_free_orphans(&srv->ctx);
}

/* Runs what other threads asked of the loop. */
static void
server_loop_commands(void *ctx, unsigned cmds)
{
	struct server *srv = ctx;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	if ((cmds & SERVER_LOOP_PROBE) != 0 &&
	    (fd = atomic_exchange(&srv->loop_probe_fd, -1)) >= 0)
		/* libmicrohttpd closes fd itself, even when it refuses it */
		(void)MHD_add_connection(srv->mhd, fd,
		    (const struct sockaddr *)&sun, sizeof(sun));
	if ((cmds & SERVER_LOOP_QUIESCE) != 0) {
		MHD_socket lfd = MHD_quiesce_daemon(srv->mhd);

		if (lfd != MHD_INVALID_SOCKET)
			sock_close((int)lfd);
		atomic_store(&srv->loop_quiesced, true);
	}
}

/*
 * Has the loop watch libmicrohttpd's epoll fd (its turn follows every wait
 * anyway: the fd only ends the wait) and starts the loop's thread.
 */
static int
server_loop_start(struct server *srv, struct zerr *err)
{
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->mhd,
	    MHD_DAEMON_INFO_EPOLL_FD);
	struct loop_driver drv = {
		.timeout_ms = server_loop_timeout,
		.turn = server_loop_turn,
		.commands = server_loop_commands,
		.ctx = srv,
	};

	if (di == NULL)
		return zerr_set(err, ZERR_INTERNAL, "cannot set up the HTTP "
		    "loop: no epoll fd from libmicrohttpd");
	if (loop_watch(srv->ctx.loop, di->epoll_fd, NULL, NULL, err) != 0)
		return -1;
	return loop_start(srv->ctx.loop, &drv, err);
}

static void
server_loop_close(struct server *srv)
{
	int fd = atomic_exchange(&srv->loop_probe_fd, -1);

	if (fd >= 0)
		close(fd);
}

/* Undoes what server_start made before the daemon. */
static void
server_start_undo(struct server *srv)
{
	deadline_stop(srv->deadlines);
	peer_limit_destroy(srv->peers);
	reply_share_free(srv->ctx.share);
	if (srv->ctx.empty != NULL)
		MHD_destroy_response(srv->ctx.empty);
	srv->deadlines = NULL;
	srv->peers = NULL;
	srv->ctx.share = NULL;
	srv->ctx.empty = NULL;
}

int
server_start(struct server *srv, int listen_fd, struct zerr *err)
{
	bool own_loop = srv->ctx.loop != NULL &&
	    loop_watched(srv->ctx.loop) > 0;
	unsigned flags = server_os_mhd_flags(own_loop) |
	    MHD_ALLOW_SUSPEND_RESUME |
	    MHD_USE_ERROR_LOG | MHD_USE_TURBO |
	    (listen_fd < 0 ? MHD_USE_NO_LISTEN_SOCKET : 0);

	if (!srv->configured && server_configure(srv, err) != 0)
		return -1;
	if (srv->ctx.routes == NULL || srv->ctx.routes->n > STATS_MAX_ROUTES) {
		zerr_set(err, ZERR_INTERNAL, "The server was handed %s route "
		    "table", srv->ctx.routes == NULL ? "no" : "too large a");
		return -1;
	}
	/* here: after the wiring raised the descriptor limit */
	srv->conn_limit = server_conn_limit(srv);
	if (srv->conn_limit < SERVER_CONNECTION_LIMIT)
		zlog(ZLOG_WARN, "connection_limit_lowered", "limit=%u "
		    "fd_limit=%lu msg=\"the descriptor limit (RLIMIT_NOFILE, "
		    "LimitNOFILE= in systemd) leaves room for this many "
		    "connections at once, not %u\"", srv->conn_limit,
		    server_os_fd_limit(), (unsigned)SERVER_CONNECTION_LIMIT);
	if (srv->max_per_peer > 0 &&
	    peer_limit_create(srv->max_per_peer, &srv->peers, err) != 0)
		return -1;
	if (deadline_start(srv->request_s * 1000u, &srv->deadlines,
	    err) != 0) {
		peer_limit_destroy(srv->peers);
		srv->peers = NULL;
		return -1;
	}
	srv->listen_fd = listen_fd;
	atomic_store(&srv->active, 0);
	atomic_store(&srv->ctx.deferred, 0);
	srv->ctx.server = srv;
	srv->own_loop = false;
	atomic_store(&srv->loop_probe_fd, -1);
	atomic_store(&srv->loop_quiesced, false);
	clock_gettime(CLOCK_MONOTONIC, &srv->started);
	/* the logger first, so the options after it can log through it */
	srv->mhd = MHD_start_daemon(flags, 0, NULL, NULL, server_access, srv,
	    MHD_OPTION_EXTERNAL_LOGGER, server_mhd_log, srv,
	    MHD_OPTION_URI_LOG_CALLBACK, server_uri_cb, srv,
	    MHD_OPTION_NOTIFY_COMPLETED, server_completed, srv,
	    MHD_OPTION_NOTIFY_CONNECTION, server_conn_notify, srv,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SERVER_MEMORY_LIMIT,
	    MHD_OPTION_CONNECTION_LIMIT,
	    srv->conn_limit + SERVER_RESERVED_CONNECTIONS,
	    MHD_OPTION_CONNECTION_TIMEOUT, srv->idle_s,
	    /* last: without a listening socket the list ends here */
	    listen_fd >= 0 ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_END,
	    (MHD_socket)listen_fd,
	    MHD_OPTION_END);
	if (srv->mhd == NULL) {
		server_start_undo(srv);
		return zerr_set(err, ZERR_INTERNAL,
		    "cannot start the HTTP server (libmicrohttpd)");
	}
	if (!own_loop)
		return 0;
	if (server_loop_start(srv, err) != 0)
		goto fail;
	srv->own_loop = true;
	return 0;
fail:
	MHD_stop_daemon(srv->mhd);
	srv->mhd = NULL;
	server_start_undo(srv);
	return -1;
}

int
server_add_connection(struct server *srv, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) {
		sock_close(fd);
		return -1;
	}
	/* libmicrohttpd closes fd itself, even when it refuses it */
	return MHD_add_connection(srv->mhd, (MHD_socket)fd,
	    (const struct sockaddr *)&ss, len) == MHD_YES ? 0 : -1;
}

int
server_stop(struct server *srv, unsigned grace_ms, unsigned stuck_ms)
{
	MHD_socket fd;

	if (srv->mhd == NULL)
		return 0;
	if (srv->own_loop) {
		loop_ask(srv->ctx.loop, SERVER_LOOP_QUIESCE);
		/* a loop stuck in a callback is the watchdog's business */
		for (unsigned waited = 0; waited < SERVER_QUIESCE_WAIT_MS &&
		    !atomic_load(&srv->loop_quiesced); waited += 10)
			usleep(10000);
	} else if ((fd = MHD_quiesce_daemon(srv->mhd)) != MHD_INVALID_SOCKET)
		sock_close((int)fd);
	/* the streams end: they never end by themselves (main.c) */
	if (srv->hooks.quiesce != NULL)
		srv->hooks.quiesce(srv->hooks.ctx);
	for (unsigned waited = 0; waited < grace_ms &&
	    atomic_load(&srv->active) > 0; waited += 10)
		usleep(10000);
	if (atomic_load(&srv->active) > 0)
		zlog(ZLOG_WARN, "shutdown_grace_expired", "in_flight=%u "
		    "waiting_on_devices=%u", atomic_load(&srv->active),
		    atomic_load(&srv->ctx.deferred));
	for (unsigned waited = 0; waited < stuck_ms &&
	    atomic_load(&srv->ctx.deferred) > 0; waited += 10)
		usleep(10000);
	if (atomic_load(&srv->ctx.deferred) > 0) {
		zlog(ZLOG_ERROR, "shutdown_device_stuck", "waiting_on_devices=%u",
		    atomic_load(&srv->ctx.deferred));
		return -1;
	}
	if (srv->own_loop) {
		/*
		 * No device completion is left (deferred is 0, and a completion
		 * nudges before it counts down); whoever else nudges the loop
		 * from another thread (the sampler) lets go of it first.
		 */
		if (srv->hooks.stopping != NULL)
			srv->hooks.stopping(srv->hooks.ctx);
		loop_stop(srv->ctx.loop);
		srv->own_loop = false;
		server_loop_close(srv);
	}
	MHD_stop_daemon(srv->mhd);
	srv->mhd = NULL;
	/* deferred was 0: every orphan's last completion has run */
	request_free_orphans(&srv->ctx);
	/* every connection is closed (and forgotten) by now */
	server_start_undo(srv);
	return 0;
}
