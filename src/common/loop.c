/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.c - the event loop of loop.h: an epoll set, an eventfd for wake-ups
 * and commands, a thread.
 *
 * A turn of the driver may ask for another at once (timeout 0): libmicro-
 * httpd takes a few in a row to step a connection through its states, and
 * each of its turns polls its own epoll fd. Polling our set before each of
 * those as well would be one system call more per turn for nothing
 * (measured: three of the six epoll_wait calls of a request at one
 * connection), so up to LOOP_STREAK such turns run back to back; then the
 * set is polled (without waiting), so that the watched fds and the wake-up
 * are never kept waiting for more than that.
 */
#include "common/loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define LOOP_STREAK 4

struct loop_watch {
	int fd;
	void (*ready)(void *ctx);
	void *ctx;
};

struct loop {
	int ep, wake;
	pthread_t thread;
	atomic_bool running;		/* set before the thread starts */
	atomic_uint cmds;		/* loop_ask's bits */
	/*
	 * A nudge from another thread is in the eventfd, not yet read: more
	 * nudges until then need no write of their own (a batch of device
	 * commands completing at once wakes the loop once, not once each).
	 */
	atomic_bool nudged;
	bool again;			/* loop thread only: a nudge from a turn */
	/*
	 * Loop thread only: the watched fds' callbacks are running. A turn
	 * follows them whatever they do, so a nudge from one (a device
	 * reply resuming its requests) needs neither a wake-up nor a turn
	 * of its own: with `again` it cost a whole turn more per resumed
	 * request (libmicrohttpd's poll of its epoll fd for nothing).
	 */
	bool in_events;
	struct loop_driver drv;
	unsigned nwatch;
	struct loop_watch watch[LOOP_WATCH_MAX];
};

/* The loop whose thread this is, if any (which needs no wake-up). */
static _Thread_local struct loop *loop_current;

int
loop_create(struct loop **out, struct zerr *err)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct loop *l;
	int e;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	l->wake = -1;
	if ((l->ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		goto fail;
	if ((l->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		goto fail;
	ev.data.ptr = &l->wake;
	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, l->wake, &ev) != 0)
		goto fail;
	*out = l;
	return 0;
fail:
	e = errno;
	if (l->wake >= 0)
		close(l->wake);
	if (l->ep >= 0)
		close(l->ep);
	free(l);
	return zerr_set(err, ZERR_INTERNAL, "cannot make an event loop: %s",
	    strerror(e));
}

int
loop_watch(struct loop *l, int fd, void (*ready)(void *ctx), void *ctx,
    struct zerr *err)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct loop_watch *w;

	if (l->nwatch >= LOOP_WATCH_MAX || fd < 0)
		return zerr_set(err, ZERR_INTERNAL, "too many descriptors for "
		    "the event loop to watch");
	w = &l->watch[l->nwatch];
	*w = (struct loop_watch){ fd, ready, ctx };
	ev.data.ptr = w;
	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot watch a descriptor "
		    "on the event loop: %s", strerror(errno));
	l->nwatch++;
	return 0;
}

unsigned
loop_watched(const struct loop *l)
{
	unsigned n = 0;

	for (unsigned i = 0; i < l->nwatch; i++)
		n += l->watch[i].ready != NULL;
	return n;
}

/* Reads the wake-up and runs what was asked; true when told to return. */
static bool
loop_commands(struct loop *l)
{
	uint64_t n;
	unsigned cmds;

	(void)!read(l->wake, &n, sizeof(n));
	/*
	 * After the read: a nudge between the two found the flag set and
	 * wrote nothing, and the turn that follows serves its resume; one
	 * after this writes again.
	 */
	atomic_store(&l->nudged, false);
	cmds = atomic_exchange(&l->cmds, 0);
	if ((cmds & ~LOOP_STOP) != 0 && l->drv.commands != NULL)
		l->drv.commands(l->drv.ctx, cmds & ~LOOP_STOP);
	return (cmds & LOOP_STOP) != 0;
}

static void *
loop_main(void *arg)
{
	struct loop *l = arg;
	struct epoll_event ev[LOOP_WATCH_MAX + 1];
	unsigned streak = 0;

	loop_current = l;
	for (;;) {
		int ms = l->drv.timeout_ms(l->drv.ctx), n;

		/* a turn that nudged (a resume from inside libmicrohttpd's
		 * callback, which its timeout does not count) gets another */
		if (l->again) {
			l->again = false;
			ms = 0;
		}

		if (ms == 0 && streak < LOOP_STREAK) {
			streak++;
			l->drv.turn(l->drv.ctx);
			continue;
		}
		streak = 0;
		n = epoll_wait(l->ep, ev, LOOP_WATCH_MAX + 1, ms);
		l->in_events = true;
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;

			if (p == &l->wake) {
				if (loop_commands(l))
					return NULL;
			} else {
				struct loop_watch *w = p;

				if (w->ready != NULL)
					w->ready(w->ctx);
			}
		}
		l->in_events = false;
		l->drv.turn(l->drv.ctx);
	}
}

int
loop_start(struct loop *l, const struct loop_driver *drv, struct zerr *err)
{
	int rc;

	l->drv = *drv;
	atomic_store(&l->cmds, 0);
	/* before the thread: other threads may nudge at once */
	atomic_store(&l->running, true);
	if ((rc = pthread_create(&l->thread, NULL, loop_main, l)) != 0) {
		atomic_store(&l->running, false);
		return zerr_set(err, ZERR_INTERNAL, "cannot start the event "
		    "loop: %s", strerror(rc));
	}
	return 0;
}

bool
loop_running(const struct loop *l)
{
	return l != NULL && atomic_load(&l->running);
}

bool
loop_on_loop(void)
{
	return loop_current != NULL;
}

void
loop_nudge(struct loop *l)
{
	uint64_t one = 1;

	if (!loop_running(l))
		return;
	if (loop_current == l) {
		if (!l->in_events)
			l->again = true;
	} else if (!atomic_exchange(&l->nudged, true))
		/* the counter cannot overflow; a failure leaves it set */
		(void)!write(l->wake, &one, sizeof(one));
}

void
loop_ask(struct loop *l, unsigned cmds)
{
	uint64_t one = 1;

	atomic_fetch_or(&l->cmds, cmds);
	(void)!write(l->wake, &one, sizeof(one));
}

void
loop_stop(struct loop *l)
{
	if (!loop_running(l))
		return;
	loop_ask(l, LOOP_STOP);
	pthread_join(l->thread, NULL);
	atomic_store(&l->running, false);
}

void
loop_free(struct loop *l)
{
	if (l == NULL)
		return;
	loop_stop(l);
	close(l->wake);
	close(l->ep);
	free(l);
}
