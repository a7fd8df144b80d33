/*
 * server.h - the HTTP side of zeusd: one libmicrohttpd daemon in epoll mode
 * with its own internal thread, accepting on the fd that listen.c opened.
 */
#ifndef ZEUS_SERVER_H
#define ZEUS_SERVER_H

#include <stdatomic.h>

#include "../common/err.h"
#include "config.h"
#include "stats.h"

struct MHD_Daemon;
struct node;
struct auth_key;
struct streams;
struct peer_limit;
struct deadlines;

struct server {
	const struct zeusd_config *cfg;
	struct node *node;
	struct auth_key *key;		/* NULL: auth off */
	struct streams *streams;	/* SSE streams (streams.h), or NULL */
	struct MHD_Daemon *mhd;
	int listen_fd;
	atomic_uint active;		/* requests between start and end */
	atomic_uint deferred;		/* suspended, waiting for devices */
	struct stats stats;		/* for /metrics */
	struct peer_limit *peers;	/* NULL: no per-peer cap */
	struct deadlines *deadlines;	/* whole-request deadline */
	unsigned max_per_peer;
	atomic_ulong conns_refused;	/* over the per-peer cap */
	atomic_ulong requests_refused;	/* smuggling-shaped headers */
	struct timespec started;
};

/* Starts serving on `listen_fd` (the server owns it from then on). */
int server_start(struct server *srv, int listen_fd, struct zerr *err);

/*
 * Stops accepting, waits up to `grace_ms` for in-flight requests, then stops
 * the HTTP daemon and closes every connection. A request still waiting on a
 * device command keeps its connection suspended, and libmicrohttpd cannot
 * stop with suspended connections, so those are waited for up to
 * `stuck_ms` more; returns -1 (the HTTP daemon left running) if a device
 * command is still stuck then, 0 otherwise.
 */
int server_stop(struct server *srv, unsigned grace_ms, unsigned stuck_ms);

#endif
