/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.h - the HTTP side of zeusd: one libmicrohttpd daemon in epoll mode,
 * accepting on the fd that listen.c opened. Its thread is libmicrohttpd's
 * own, or, when callers gave descriptors to watch (the device channels of a
 * split daemon's shared readers, whose replies are best read where the
 * requests they answer are resumed), the server's own loop (server.c).
 */
#ifndef ZEUS_SERVER_H
#define ZEUS_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/err.h"
#include "config.h"
#include "stats.h"

struct MHD_Daemon;
struct node;
struct auth_key;
struct streams;
struct peer_limit;
struct deadlines;
struct policy_holder;

#define SERVER_WATCH_MAX 4

/* A descriptor the loop watches: `ready` runs on the loop once it reads. */
struct server_watch {
	int fd;
	void (*ready)(void *ctx);
	void *ctx;
};

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
	struct policy_holder *policy;	/* NULL: no node policy */
	struct leases *leases;		/* NULL: no --gpu-leases */
	unsigned max_per_peer;		/* 0: no cap */
	unsigned idle_s, request_s;	/* timeouts, docs/configuration.md */
	bool configured;		/* server_configure ran */
	atomic_uint conns;		/* open, root's and the probe's aside */
	atomic_ulong conns_refused;	/* over a connection limit */
	/*
	 * Bumped by every reload: a connection looks its Unix peer up again
	 * at its next request (groups edited in /etc/group, then SIGHUP,
	 * apply to connections already open).
	 */
	atomic_uint identity_gen;
	atomic_ulong requests_refused;	/* smuggling-shaped headers */
	atomic_ulong loop_beats;	/* connection events, for the watchdog */
	struct timespec started;
	/* our own loop (server.c; when nwatch > 0): epoll set, wake-up... */
	int loop_ep, loop_wake;
	pthread_t loop;
	atomic_bool loop_running;	/* set before the thread starts */
	atomic_uint loop_cmds;		/* SERVER_LOOP_* bits */
	atomic_int loop_probe_fd;	/* server_loop_alive's, or -1 */
	atomic_bool loop_quiesced;
	unsigned nwatch;
	struct server_watch watch[SERVER_WATCH_MAX];
};

/*
 * Has the loop watch `fd` for reading once it starts (before server_start;
 * at most SERVER_WATCH_MAX; any watch makes the server run its own loop
 * rather than libmicrohttpd's thread): `ready(ctx)` runs on it, before
 * libmicrohttpd's turn, whenever fd is readable (level-triggered: it must
 * read what is there). The caller keeps the fd open while the server runs.
 */
int server_watch(struct server *srv, int fd, void (*ready)(void *ctx),
    void *ctx, struct zerr *err);

/*
 * Reads and checks the HTTP side's environment knobs (timeouts, per-peer
 * cap) into `srv`, so a bad value stops startup before anything is opened.
 */
int server_configure(struct server *srv, struct zerr *err);

/* Starts serving on `listen_fd` (the server owns it from then on); runs
 * server_configure first if the caller has not. */
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

/*
 * After MHD_resume_connection on a thread other than the loop's: wakes our
 * own loop, which libmicrohttpd's external mode does not tell of resumes
 * (its inter-thread channel exists only with its own threads); nothing to
 * do under libmicrohttpd's thread.
 */
void server_loop_nudge(struct server *srv);

/*
 * The watchdog's proof that the HTTP loop still turns (watchdog.c): hands
 * libmicrohttpd one end of a socketpair (MHD_add_connection) and closes the
 * other. Only the loop's own thread can see that connection open and close
 * again, and it counts both events in `loop_beats`; returns true once the
 * count has grown by two (any real connection's events count as well),
 * false when `timeout_ms` passes first.
 */
bool server_loop_alive(struct server *srv, unsigned timeout_ms);

#endif
