/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.h - a small event loop on its own thread: one epoll set of watched
 * descriptors, an eventfd through which other threads wake it or ask it
 * for something, and a driver that owns the turns in between.
 *
 * Shaped like Redis's ae.c, it knows nothing of HTTP: the network
 * process's server (http/server.c) is its driver (libmicrohttpd in external
 * epoll mode: the driver says how long the loop may wait, and takes a turn
 * after every wait), and the shared readers and the GPU writers
 * (node/remote_read.c, remote_write.c) watch their device channels on it.
 * Callbacks run on the loop's thread, one at a time; a callback must not
 * block.
 *
 * Set-up (loop_watch) happens before loop_start, from one thread; after it,
 * only loop_nudge, loop_ask, loop_running and loop_on_loop may be called
 * from other threads, and loop_stop from the thread that started it.
 */
#ifndef ZEUS_LOOP_H
#define ZEUS_LOOP_H

#include <stdbool.h>

#include "common/err.h"

/*
 * A driver's own fd, the two shared readers' channels and one per GPU's
 * writer (node/remote_write.h; at most 64 GPUs), with room to spare.
 */
#define LOOP_WATCH_MAX 72

/* A driver's command bits (loop_ask) are below this one, the loop's own. */
#define LOOP_STOP (1u << 31)

struct loop_driver {
	/*
	 * Milliseconds the loop may wait for its descriptors before the next
	 * turn: -1 for ever, 0 for a turn now.
	 */
	int (*timeout_ms)(void *ctx);
	/* after every wait (and between back-to-back turns, see loop.c) */
	void (*turn)(void *ctx);
	/* the bits other threads asked for (loop_ask), LOOP_STOP aside */
	void (*commands)(void *ctx, unsigned cmds);
	void *ctx;
};

struct loop;

/* An idle loop: its epoll set and eventfd, no thread yet. */
int loop_create(struct loop **out, struct zerr *err);

/*
 * Watches `fd` for input; `ready(ctx)` runs on the loop when it is
 * readable (level-triggered). `ready` may be NULL: the fd only ends the
 * wait (a driver's own epoll fd). Before loop_start; at most
 * LOOP_WATCH_MAX.
 */
int loop_watch(struct loop *l, int fd, void (*ready)(void *ctx), void *ctx,
    struct zerr *err);

/* Descriptors watched with a `ready` callback (a driver's own not counted). */
unsigned loop_watched(const struct loop *l);

/* Starts the loop's thread with its driver. */
int loop_start(struct loop *l, const struct loop_driver *drv,
    struct zerr *err);

/* Whether the loop's thread is started and not stopped. */
bool loop_running(const struct loop *l);

/* Whether the calling thread is a loop's. */
bool loop_on_loop(void);

/*
 * Wakes the loop for a turn, from any thread (a no-op on a loop not
 * running). On the loop itself it asks for one more turn without waiting:
 * a connection resumed from inside the driver's turn is not counted in the
 * driver's timeout.
 */
void loop_nudge(struct loop *l);

/* Sets `cmds` for the driver's `commands` and wakes the loop. */
void loop_ask(struct loop *l, unsigned cmds);

/* Asks the loop to return and joins its thread; then it is not running. */
void loop_stop(struct loop *l);

/* Closes what loop_create made (stopping the loop first if it runs). */
void loop_free(struct loop *l);

#endif
