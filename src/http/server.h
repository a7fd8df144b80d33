/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.h - the HTTP side of zeusd: one libmicrohttpd daemon in epoll mode,
 * accepting on the fd that listen.c opened. Its thread is libmicrohttpd's
 * own, or, when the wiring gave it a loop (ctx.loop, common/loop.h) on which
 * descriptors are watched (the device channels of a split daemon's shared
 * readers, whose replies are best read where the requests they answer are
 * resumed), that loop's, with the server as its driver (server.c).
 */
#ifndef ZEUS_SERVER_H
#define ZEUS_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "common/err.h"
#include "http/ctx.h"
#include "http/stats.h"

struct MHD_Daemon;

/* What other threads ask of the loop (loop_ask, server_loop_commands). */
enum {
	SERVER_LOOP_PROBE = 1u << 0,	/* add loop_probe_fd as a connection */
	SERVER_LOOP_QUIESCE = 1u << 1,	/* stop accepting */
};
struct peer;
struct peer_limit;
struct deadlines;

/*
 * What the wiring (zeusd/) hooks into the server's shutdown: `quiesce`
 * once it stops accepting (the streams end: they never end by themselves,
 * and suspended ones must be resumed), `stopping` before the loop stops
 * (whoever nudges the loop from another thread lets go of it). Either may
 * be NULL.
 */
struct server_hooks {
	void (*quiesce)(void *ctx);
	void (*stopping)(void *ctx);
	void *ctx;
	/*
	 * Who is on the other end of a connection the wiring handed over
	 * (server_add_connection: a Windows named pipe's relay socket, whose
	 * own peer is only this process): 0 with `p` filled, or -1 to
	 * identify the socket's peer as usual (peer_identify). NULL: always
	 * as usual. Called on the server's thread; `peer_ctx` is its own.
	 */
	int (*peer)(void *peer_ctx, int fd, struct peer *p);
	void *peer_ctx;
};

struct server {
	/*
	 * What a request may reach (ctx.h). The wiring fills cfg, node, key,
	 * policy, leases (whether on), streams and loop before
	 * server_start.
	 */
	struct http_ctx ctx;
	struct server_hooks hooks;	/* the wiring's, optional */
	struct MHD_Daemon *mhd;
	int listen_fd;
	atomic_uint active;		/* requests between start and end */
	struct stats stats;		/* for /metrics */
	struct peer_limit *peers;	/* NULL: no per-peer cap */
	struct deadlines *deadlines;	/* whole-request deadline */
	unsigned max_per_peer;		/* 0: no cap */
	/*
	 * Connections at once (root's and the probe's aside): 16384, or
	 * fewer where the descriptor limit would run out first
	 * (server_start: docs/configuration.md).
	 */
	unsigned conn_limit;
	unsigned idle_s, request_s;	/* timeouts, docs/configuration.md */
	bool configured;		/* server_configure ran */
	bool own_loop;			/* driving ctx.loop (server_start) */
	atomic_uint conns;		/* open, root's and the probe's aside */
	atomic_ulong conns_refused;	/* over a connection limit */
	atomic_ulong loop_beats;	/* connection events, for the watchdog */
	struct timespec started;
	atomic_int loop_probe_fd;	/* server_loop_alive's, or -1 */
	atomic_bool loop_quiesced;
};

/*
 * Reads and checks the HTTP side's environment knobs (timeouts, per-peer
 * cap) into `srv`, so a bad value stops startup before anything is opened.
 */
int server_configure(struct server *srv, struct zerr *err);

/*
 * Starts serving on `listen_fd` (the server owns it from then on), or on
 * no listening socket at all when it is -1 (connections then come only
 * through server_add_connection: the named pipe); runs
 * server_configure first if the caller has not. With a loop in ctx.loop on
 * which something is watched, libmicrohttpd runs in external epoll mode
 * with the server as the loop's driver, and the loop's thread is started
 * here (and stopped by server_stop); otherwise libmicrohttpd runs its own
 * thread.
 */
int server_start(struct server *srv, int listen_fd, struct zerr *err);

/*
 * Hands libmicrohttpd a connected socket that did not come from the
 * listening one (the named pipe's relay end, http/pipe_win.c); it owns `fd`
 * from then on, closing it even when it refuses it. Any thread, between
 * server_start and server_stop. 0, or -1 when refused.
 */
int server_add_connection(struct server *srv, int fd);

/*
 * Stops accepting, waits up to `grace_ms` for in-flight requests, then stops
 * the HTTP daemon and closes every connection. A request still waiting on a
 * device command keeps its connection suspended, and libmicrohttpd cannot
 * stop with suspended connections, so those are waited for up to
 * `stuck_ms` more; returns -1 (the HTTP daemon left running) if a device
 * command is still stuck then, 0 otherwise.
 */
int server_stop(struct server *srv, unsigned grace_ms, unsigned stuck_ms);

/*
 * The watchdog's proof that the HTTP loop still turns (watchdog.c): hands
 * libmicrohttpd one end of a socketpair (MHD_add_connection) and closes the
 * other. Only the loop's own thread can see that connection open and close
 * again, and it counts both events in `loop_beats`; returns true once the
 * count has grown by two (any real connection's events count as well),
 * false when `timeout_ms` passes first.
 */
bool server_loop_alive(struct server *srv, unsigned timeout_ms);

/*
 * The platform's part (server_posix.c, server_win.c): libmicrohttpd's
 * polling flags, driven by our loop (own_loop) or by its own thread.
 */
unsigned server_os_mhd_flags(bool own_loop);

/*
 * The most descriptors this process may hold (RLIMIT_NOFILE's soft limit;
 * 0: no such limit, as on Windows, whose sockets are not counted so).
 */
unsigned long server_os_fd_limit(void);

#endif
