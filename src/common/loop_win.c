/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop_win.c - loop.h on Windows. zeusd's own event loop (loop.c: epoll
 * and an eventfd) exists for a split daemon's network process, which
 * reads the device process's answers on the loop that drives
 * libmicrohttpd. Windows zeusd is one process: libmicrohttpd runs its own
 * polling thread (server_win.c) and nothing creates a loop, so here a loop
 * cannot be created and every other call sees a loop that never ran, as
 * loop.c does for one not started.
 */
#include "common/loop.h"

#include <stddef.h>

int
loop_create(struct loop **out, struct zerr *err)
{
	*out = NULL;
	return zerr_set(err, ZERR_INTERNAL, "zeusd's own event loop is a "
	    "split daemon's (Linux); on Windows libmicrohttpd polls alone");
}

int
loop_watch(struct loop *l, int fd, void (*ready)(void *ctx), void *ctx,
    struct zerr *err)
{
	(void)l;
	(void)fd;
	(void)ready;
	(void)ctx;
	return zerr_set(err, ZERR_INTERNAL, "no event loop on Windows");
}

unsigned
loop_watched(const struct loop *l)
{
	(void)l;
	return 0;
}

int
loop_start(struct loop *l, const struct loop_driver *drv, struct zerr *err)
{
	(void)l;
	(void)drv;
	return zerr_set(err, ZERR_INTERNAL, "no event loop on Windows");
}

bool
loop_running(const struct loop *l)
{
	(void)l;
	return false;
}

bool
loop_on_loop(void)
{
	return false;
}

void
loop_nudge(struct loop *l)
{
	(void)l;		/* not running: nothing waits to be woken */
}

void
loop_ask(struct loop *l, unsigned cmds)
{
	(void)l;
	(void)cmds;
}

void
loop_stop(struct loop *l)
{
	(void)l;
}

void
loop_free(struct loop *l)
{
	(void)l;
}
