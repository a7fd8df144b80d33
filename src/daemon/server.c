/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c - libmicrohttpd glue: the daemon, connections, dispatch.
 *
 * Threading: one thread runs every callback below. Nothing here blocks on
 * hardware: handlers that need a device suspend the connection and queue
 * commands to the device's worker; the worker's completion resumes it.
 *
 * Which thread: with descriptors to watch (server_watch: a split daemon's
 * network process, whose shared readers' replies come back on them), our own
 * loop (server_loop_main) runs libmicrohttpd in its external epoll mode and
 * reads those descriptors too, so a reply resumes its request with no
 * thread hop. Other threads reach libmicrohttpd there only through calls it
 * allows from any thread (resume, followed by server_loop_nudge); what must
 * run on the loop (adding the watchdog's probe connection, quiescing,
 * stopping) is asked of it through `loop_cmds` and an eventfd. With nothing
 * to watch (--no-privsep), libmicrohttpd's own epoll thread runs alone:
 * the outer epoll set would cost a wait per turn for nothing (~3 µs a
 * request at one connection, measured with bench/pinned_ab.sh).
 *
 * Life of a request:
 *   uri_log callback   allocate struct request, keep the raw path and query
 *   access, 1st call   return (answering on the first call makes libmicrohttpd
 *                      close keep-alive connections)
 *   access, body       discard and count (all parameters are in the query)
 *   access, last call  route, authorise, run the handler (phase REQ_NEW)
 *   access, resumed    run the handler's finish() (phase REQ_DEFERRED)
 *   completed callback log one line, free
 *
 * The request itself (its phases, the answers, the peer and node-policy
 * checks) is request.c's; this file drives it from libmicrohttpd's
 * callbacks and decides the route (router, auth gate, policy scope).
 */
#include "server.h"

#include <assert.h>
#include <errno.h>
#include <microhttpd.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "auth_gate.h"
#include "cli.h"
#include "conn.h"
#include "deadline.h"
#include "peer.h"
#include "peer_limit.h"
#include "request.h"
#include "router.h"
#include "streams.h"

/*
 * Per-connection pool; it dominates the memory of open SSE streams. 12 KiB
 * keeps 10,000 streams at ~125 MiB RSS (16 KiB: ~147, 8 KiB: ~107) and still
 * takes a 4 KiB query or a 9 KB Authorization header. See docs/streams.md.
 */
#define SERVER_MEMORY_LIMIT (12 * 1024)
#define SERVER_CONNECTION_LIMIT 16384
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
/* libmicrohttpd turns asked for at once, run without polling our set */
#define SERVER_LOOP_STREAK 4

/* What other threads ask of the loop (struct server.loop_cmds). */
enum {
	SERVER_LOOP_PROBE = 1u << 0,	/* add loop_probe_fd as a connection */
	SERVER_LOOP_QUIESCE = 1u << 1,	/* stop accepting */
	SERVER_LOOP_STOP = 1u << 2,	/* return */
};

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
	char body[160], head[512], who[96];
	int blen, hlen;

	if (all)
		blen = snprintf(body, sizeof(body), "{\"error\":\"Too many "
		    "connections (limit %u); retry later\"}",
		    (unsigned)SERVER_CONNECTION_LIMIT);
	else
		blen = snprintf(body, sizeof(body), "{\"error\":\"Too many "
		    "connections from this peer (limit %u); close some and "
		    "retry\"}", srv->max_per_peer);
	hlen = snprintf(head, sizeof(head), "HTTP/1.1 503 Service Unavailable"
	    "\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
	    "Connection: close\r\nContent-Length: %d\r\n\r\n%s", blen, body);
	if (hlen > 0 && (size_t)hlen < sizeof(head))
		(void)send(fd, head, (size_t)hlen, MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)shutdown(fd, SHUT_RDWR);
	atomic_fetch_add(&srv->conns_refused, 1);
	if (server_log_allowed())
		zlog(ZLOG_WARN, "connection_refused", "%s reason=%s limit=%u",
		    peer_format(p, who, sizeof(who)), all ? "connection_limit" :
		    "per_peer_limit", all ? (unsigned)SERVER_CONNECTION_LIMIT :
		    srv->max_per_peer);
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
		(void)shutdown(fd, SHUT_RDWR);
		return;
	}
	(void)peer_identify(fd, NULL, 0, &c->peer);
	if (!server_conn_privileged(&c->peer)) {
		if (atomic_load(&srv->conns) >= SERVER_CONNECTION_LIMIT) {
			server_refuse_conn(srv, fd, &c->peer, true);
			free(c);
			return;
		}
		if (srv->peers != NULL) {
			if (!peer_limit_acquire(srv->peers, &c->peer)) {
				server_refuse_conn(srv, fd, &c->peer, false);
				free(c);
				return;
			}
			c->counted = true;
		}
		c->in_table = true;
		atomic_fetch_add(&srv->conns, 1);
		/*
		 * A lease is bound to the process that connected, not to its
		 * pid number (lease.h): taken now, while that process is
		 * likely alive; when this fails the process is gone, and its
		 * writes are refused (leases_claim).
		 */
		if (srv->leases != NULL && c->peer.kind == PEER_UNIX)
			(void)peer_take_pidfd(fd, &c->peer);
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
	peer_release(&c->peer);
	free(c->who);
	free(c);
	*socket_context = NULL;
}

static void *
server_uri_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct server *srv = cls;
	struct request *req = request_new(srv, conn, server_conn_state(conn),
	    uri);

	if (req == NULL)
		return NULL;
	atomic_fetch_add(&srv->active, 1);
	return req;
}

static void
server_dispatch(struct request *req)
{
	struct server *srv = req->srv;
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
	r = router_lookup(req->path);
	/* /auth/whoami: with auth, or on the Unix socket (the peer's uid) */
	if (r != NULL && r->needs_auth_enabled && srv->key == NULL &&
	    (req->cstate == NULL || req->cstate->peer.kind != PEER_UNIX))
		r = NULL;
	req->route = r;
	if (r != NULL && r->group >= 0 &&
	    !(srv->cfg->enabled & GROUP_BIT(r->group))) {
		zerr_set(&err, ZERR_NOT_FOUND,
		    "API group '%s' is not enabled on this server.",
		    group_name((enum api_group)r->group));
		request_reply_error(req, &err);
		return;
	}
	if (srv->key != NULL && (r == NULL || r->access != ROUTE_OPEN) &&
	    auth_gate_check(req, srv->key, r) != 0)
		return;		/* answered 401/403 */
	if (request_check_scope(req, r) != 0)
		return;		/* answered 403 */
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
	/* a new request is whole now: its deadline is met */
	if (req->phase == REQ_NEW)
		deadline_disarm(req->srv->deadlines, &req->cstate->deadline);
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
	/*
	 * A suspended connection is never completed, so no device command
	 * can still point at req (a client gone while its request was
	 * deferred is noticed after the resume).
	 */
	assert(atomic_load(&req->pending) == 0);
	if (req->status != 0)
		stats_record(&srv->stats, req->route, req->status);
	request_log(req, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
	auth_gate_release(req);
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

int
server_configure(struct server *srv, struct zerr *err)
{
	uint64_t idle_s, request_s, per_peer;

	if (cli_env_uint("ZEUSD_IDLE_TIMEOUT_S", 1, 86400, SERVER_IDLE_TIMEOUT_S,
	    &idle_s, err) != 0 ||
	    cli_env_uint("ZEUSD_REQUEST_TIMEOUT_S", 1, 3600,
	    SERVER_REQUEST_TIMEOUT_S, &request_s, err) != 0 ||
	    cli_env_uint("ZEUSD_MAX_CONNS_PER_PEER", 0, SERVER_CONNECTION_LIMIT,
	    SERVER_MAX_PER_PEER, &per_peer, err) != 0)
		return -1;
	srv->idle_s = (unsigned)idle_s;
	srv->request_s = (unsigned)request_s;
	srv->max_per_peer = (unsigned)per_peer;
	srv->configured = true;
	return 0;
}

int
server_watch(struct server *srv, int fd, void (*ready)(void *ctx), void *ctx,
    struct zerr *err)
{
	if (srv->nwatch >= SERVER_WATCH_MAX || fd < 0)
		return zerr_set(err, ZERR_INTERNAL, "too many descriptors for "
		    "the HTTP loop to watch");
	srv->watch[srv->nwatch++] = (struct server_watch){ fd, ready, ctx };
	return 0;
}

static void
server_loop_ask(struct server *srv, unsigned cmd)
{
	uint64_t one = 1;

	atomic_fetch_or(&srv->loop_cmds, cmd);
	/* the counter cannot overflow in practice; a failure leaves it set */
	(void)!write(srv->loop_wake, &one, sizeof(one));
}

/* Whether the calling thread is our loop (which needs no wake-up). */
static _Thread_local bool server_on_loop;

void
server_loop_nudge(struct server *srv)
{
	uint64_t one = 1;

	if (atomic_load(&srv->loop_running) && !server_on_loop)
		(void)!write(srv->loop_wake, &one, sizeof(one));
}

/* streams.c's nudge after it resumed subscribers */
static void
server_streams_nudge(void *ctx)
{
	server_loop_nudge(ctx);
}

/* Runs what other threads asked for; true when the loop is to return. */
static bool
server_loop_commands(struct server *srv)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	uint64_t n;
	unsigned cmds;
	int fd;

	(void)!read(srv->loop_wake, &n, sizeof(n));
	cmds = atomic_exchange(&srv->loop_cmds, 0);
	if ((cmds & SERVER_LOOP_PROBE) != 0 &&
	    (fd = atomic_exchange(&srv->loop_probe_fd, -1)) >= 0)
		/* libmicrohttpd closes fd itself, even when it refuses it */
		(void)MHD_add_connection(srv->mhd, fd,
		    (const struct sockaddr *)&sun, sizeof(sun));
	if ((cmds & SERVER_LOOP_QUIESCE) != 0) {
		fd = MHD_quiesce_daemon(srv->mhd);
		if (fd != MHD_INVALID_SOCKET)
			close(fd);
		atomic_store(&srv->loop_quiesced, true);
	}
	return (cmds & SERVER_LOOP_STOP) != 0;
}

/*
 * The loop: libmicrohttpd's epoll fd, the wake-up and the watched fds in
 * one epoll set; the watched replies first (they resume connections), then
 * libmicrohttpd's turn, which must come after every wait that its timeout
 * bounded.
 *
 * libmicrohttpd takes a few turns in a row to step a connection through
 * its states (a response sent, then ready for the next request) and asks
 * for them with a timeout of 0; each of its turns polls its own epoll fd.
 * Polling our set before each of those as well would be one system call
 * more per turn for nothing (measured: three of the six epoll_wait calls
 * of a request at one connection), so up to SERVER_LOOP_STREAK such turns
 * run back to back; then our set is polled (without waiting) so that the
 * watched fds and the wake-up are never kept waiting for more than that.
 */
static void *
server_loop_main(void *arg)
{
	struct server *srv = arg;
	struct epoll_event ev[SERVER_WATCH_MAX + 2];
	unsigned streak = 0;

	server_on_loop = true;

	for (;;) {
		MHD_UNSIGNED_LONG_LONG to;
		int ms = -1, n;

		if (MHD_get_timeout(srv->mhd, &to) == MHD_YES)
			ms = to > INT_MAX ? INT_MAX : (int)to;
		if (ms == 0 && streak < SERVER_LOOP_STREAK) {
			streak++;
			MHD_run(srv->mhd);
			continue;
		}
		streak = 0;
		n = epoll_wait(srv->loop_ep, ev, SERVER_WATCH_MAX + 2, ms);
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;

			if (p == &srv->loop_wake) {
				if (server_loop_commands(srv))
					return NULL;
			} else if (p != &srv->loop_ep) {
				struct server_watch *w = p;

				w->ready(w->ctx);
			}
		}
		MHD_run(srv->mhd);
	}
}

/* The loop's epoll set: 0, or -1 with everything it made closed. */
static int
server_loop_open(struct server *srv, struct zerr *err)
{
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->mhd,
	    MHD_DAEMON_INFO_EPOLL_FD);
	struct epoll_event ev = { .events = EPOLLIN };
	int e;

	srv->loop_wake = -1;
	if (di == NULL || (srv->loop_ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot make the HTTP "
		    "loop's epoll set: %s", di == NULL ? "no epoll fd from "
		    "libmicrohttpd" : strerror(errno));
	if ((srv->loop_wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		goto fail;
	ev.data.ptr = &srv->loop_ep;
	if (epoll_ctl(srv->loop_ep, EPOLL_CTL_ADD, di->epoll_fd, &ev) != 0)
		goto fail;
	ev.data.ptr = &srv->loop_wake;
	if (epoll_ctl(srv->loop_ep, EPOLL_CTL_ADD, srv->loop_wake, &ev) != 0)
		goto fail;
	for (unsigned i = 0; i < srv->nwatch; i++) {
		ev.data.ptr = &srv->watch[i];
		if (epoll_ctl(srv->loop_ep, EPOLL_CTL_ADD, srv->watch[i].fd,
		    &ev) != 0)
			goto fail;
	}
	return 0;
fail:
	e = errno;
	if (srv->loop_wake >= 0)
		close(srv->loop_wake);
	close(srv->loop_ep);
	return zerr_set(err, ZERR_INTERNAL, "cannot set up the HTTP loop: %s",
	    strerror(e));
}

static void
server_loop_close(struct server *srv)
{
	int fd = atomic_exchange(&srv->loop_probe_fd, -1);

	if (fd >= 0)
		close(fd);
	close(srv->loop_wake);
	close(srv->loop_ep);
}

/* Undoes what server_start made before the daemon. */
static void
server_start_undo(struct server *srv)
{
	deadline_stop(srv->deadlines);
	peer_limit_destroy(srv->peers);
	srv->deadlines = NULL;
	srv->peers = NULL;
}

int
server_start(struct server *srv, int listen_fd, struct zerr *err)
{
	bool own_loop = srv->nwatch > 0;
	unsigned flags = (own_loop ? MHD_USE_EPOLL :
	    MHD_USE_EPOLL_INTERNAL_THREAD) | MHD_ALLOW_SUSPEND_RESUME |
	    MHD_USE_ERROR_LOG | MHD_USE_TURBO;
	int rc;

	if (!srv->configured && server_configure(srv, err) != 0)
		return -1;
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
	atomic_store(&srv->deferred, 0);
	atomic_store(&srv->loop_cmds, 0);
	atomic_store(&srv->loop_probe_fd, -1);
	atomic_store(&srv->loop_quiesced, false);
	clock_gettime(CLOCK_MONOTONIC, &srv->started);
	/* the logger first, so the options after it can log through it */
	srv->mhd = MHD_start_daemon(flags, 0, NULL, NULL, server_access, srv,
	    MHD_OPTION_EXTERNAL_LOGGER, server_mhd_log, srv,
	    MHD_OPTION_LISTEN_SOCKET, listen_fd,
	    MHD_OPTION_URI_LOG_CALLBACK, server_uri_cb, srv,
	    MHD_OPTION_NOTIFY_COMPLETED, server_completed, srv,
	    MHD_OPTION_NOTIFY_CONNECTION, server_conn_notify, srv,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SERVER_MEMORY_LIMIT,
	    MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)(SERVER_CONNECTION_LIMIT + SERVER_RESERVED_CONNECTIONS),
	    MHD_OPTION_CONNECTION_TIMEOUT, srv->idle_s,
	    MHD_OPTION_END);
	if (srv->mhd == NULL) {
		server_start_undo(srv);
		return zerr_set(err, ZERR_INTERNAL,
		    "cannot start the HTTP server (libmicrohttpd)");
	}
	if (!own_loop)
		return 0;
	if (server_loop_open(srv, err) != 0)
		goto fail;
	/* before the thread: device workers may resume (and nudge) at once */
	atomic_store(&srv->loop_running, true);
	if ((rc = pthread_create(&srv->loop, NULL, server_loop_main,
	    srv)) != 0) {
		atomic_store(&srv->loop_running, false);
		server_loop_close(srv);
		zerr_set(err, ZERR_INTERNAL, "cannot start the HTTP loop: %s",
		    strerror(rc));
		goto fail;
	}
	if (srv->streams != NULL)
		streams_set_nudge(srv->streams, server_streams_nudge, srv);
	return 0;
fail:
	MHD_stop_daemon(srv->mhd);
	srv->mhd = NULL;
	server_start_undo(srv);
	return -1;
}

bool
server_loop_alive(struct server *srv, unsigned timeout_ms)
{
	unsigned long before = atomic_load(&srv->loop_beats);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int sv[2], old;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sv) == 0) {
		if (!atomic_load(&srv->loop_running)) {
			/* libmicrohttpd's thread: it takes it from any thread,
			 * and closes sv[0] itself, even when it refuses it */
			(void)MHD_add_connection(srv->mhd, sv[0],
			    (const struct sockaddr *)&sun, sizeof(sun));
		} else if ((old = atomic_exchange(&srv->loop_probe_fd,
		    sv[0])) >= 0)
			close(old);	/* a probe not taken yet is dropped */
		if (atomic_load(&srv->loop_running))
			server_loop_ask(srv, SERVER_LOOP_PROBE);
		close(sv[1]);	/* the loop reads EOF and closes its end */
	}
	for (unsigned waited = 0; waited < timeout_ms; waited += 5) {
		if (atomic_load(&srv->loop_beats) - before >= 2)
			return true;
		usleep(5000);
	}
	return atomic_load(&srv->loop_beats) - before >= 2;
}

int
server_stop(struct server *srv, unsigned grace_ms, unsigned stuck_ms)
{
	MHD_socket fd;

	if (srv->mhd == NULL)
		return 0;
	if (atomic_load(&srv->loop_running)) {
		server_loop_ask(srv, SERVER_LOOP_QUIESCE);
		/* a loop stuck in a callback is the watchdog's business */
		for (unsigned waited = 0; waited < SERVER_QUIESCE_WAIT_MS &&
		    !atomic_load(&srv->loop_quiesced); waited += 10)
			usleep(10000);
	} else if ((fd = MHD_quiesce_daemon(srv->mhd)) != MHD_INVALID_SOCKET)
		close(fd);
	/* Streams never end by themselves; suspended ones must be resumed. */
	if (srv->streams != NULL)
		streams_end_all(srv->streams);
	for (unsigned waited = 0; waited < grace_ms &&
	    atomic_load(&srv->active) > 0; waited += 10)
		usleep(10000);
	if (atomic_load(&srv->active) > 0)
		zlog(ZLOG_WARN, "shutdown_grace_expired", "in_flight=%u "
		    "waiting_on_devices=%u", atomic_load(&srv->active),
		    atomic_load(&srv->deferred));
	for (unsigned waited = 0; waited < stuck_ms &&
	    atomic_load(&srv->deferred) > 0; waited += 10)
		usleep(10000);
	if (atomic_load(&srv->deferred) > 0) {
		zlog(ZLOG_ERROR, "shutdown_device_stuck", "waiting_on_devices=%u",
		    atomic_load(&srv->deferred));
		return -1;
	}
	if (atomic_load(&srv->loop_running)) {
		/*
		 * No device completion is left (deferred is 0, and a completion
		 * nudges before it counts down); the sampler may still tick, so
		 * its nudge goes (streams_set_nudge waits for one in progress)
		 * before the wake-up fd does.
		 */
		if (srv->streams != NULL)
			streams_set_nudge(srv->streams, NULL, NULL);
		server_loop_ask(srv, SERVER_LOOP_STOP);
		pthread_join(srv->loop, NULL);
		atomic_store(&srv->loop_running, false);
		server_loop_close(srv);
	}
	MHD_stop_daemon(srv->mhd);
	srv->mhd = NULL;
	/* every connection is closed (and forgotten) by now */
	server_start_undo(srv);
	return 0;
}
