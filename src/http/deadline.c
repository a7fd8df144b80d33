/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deadline.c - the request-deadline thread (see deadline.h).
 */
#include "http/deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/sock.h"

struct deadlines {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct deadline_entry *head, *tail;	/* armed, oldest first */
	uint64_t timeout_ns;
	uint64_t expired;
	bool stopping;
	/*
	 * The thread waits with no timer (nothing was armed when it last
	 * looked): only then does an arm need to wake it. Otherwise it sleeps
	 * until a deadline no later than any new one, and looks again then.
	 */
	bool untimed;
};

/* Both with the lock held. */
static void
deadline_unlink(struct deadlines *d, struct deadline_entry *e)
{
	if (!e->armed)
		return;
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		d->head = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	else
		d->tail = e->prev;
	e->prev = e->next = NULL;
	e->armed = false;
}

static void
deadline_append(struct deadlines *d, struct deadline_entry *e)
{
	e->prev = d->tail;
	e->next = NULL;
	if (d->tail != NULL)
		d->tail->next = e;
	else
		d->head = e;
	d->tail = e;
	e->armed = true;
}

static void *
deadline_main(void *arg)
{
	struct deadlines *d = arg;
	char label[DEADLINE_LABEL_MAX];

	pthread_mutex_lock(&d->lock);
	while (!d->stopping) {
		struct deadline_entry *e = d->head;
		uint64_t now = zclock_now_ns();
		struct timespec until;

		if (e == NULL) {
			d->untimed = true;
			pthread_cond_wait(&d->cond, &d->lock);
			d->untimed = false;
			continue;
		}
		if (e->expires_ns > now) {
			until = zclock_ts(e->expires_ns);
			(void)pthread_cond_timedwait(&d->cond, &d->lock, &until);
			continue;
		}
		e->expired = true;
		deadline_unlink(d, e);
		d->expired++;
		memcpy(label, e->label, sizeof(label));
		/*
		 * The fd is still open: the loop forgets an entry (under this
		 * lock) before libmicrohttpd closes the socket. Last, so the
		 * entry is settled before anyone can see the effect.
		 */
		sock_shutdown(e->fd);
		pthread_mutex_unlock(&d->lock);
		zlog(ZLOG_INFO, "request_deadline_expired", "%s timeout_ms=%llu",
		    label, (unsigned long long)(d->timeout_ns / 1000000u));
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int
deadline_start(unsigned timeout_ms, struct deadlines **out, struct zerr *err)
{
	struct deadlines *d = calloc(1, sizeof(*d));
	pthread_condattr_t ca;
	int rc;

	if (d == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	d->timeout_ns = (uint64_t)timeout_ms * 1000000u;
	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cond, &ca);
	pthread_condattr_destroy(&ca);
	if ((rc = pthread_create(&d->thread, NULL, deadline_main, d)) != 0) {
		pthread_mutex_destroy(&d->lock);
		pthread_cond_destroy(&d->cond);
		free(d);
		return zerr_set(err, ZERR_INTERNAL,
		    "cannot start the request-deadline thread: %s",
		    strerror(rc));
	}
	*out = d;
	return 0;
}

void
deadline_stop(struct deadlines *d)
{
	if (d == NULL)
		return;
	pthread_mutex_lock(&d->lock);
	d->stopping = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	free(d);
}

void
deadline_init(struct deadline_entry *e, int fd, const char *label)
{
	memset(e, 0, sizeof(*e));
	e->fd = fd;
	snprintf(e->label, sizeof(e->label), "%s", label);
}

void
deadline_arm(struct deadlines *d, struct deadline_entry *e)
{
	bool wake;

	pthread_mutex_lock(&d->lock);
	if (!e->expired) {
		deadline_unlink(d, e);
		e->expires_ns = zclock_now_ns() + d->timeout_ns;
		/*
		 * Every deadline is the same timeout after its arming, so a
		 * thread sleeping until an earlier one (even one disarmed
		 * since) wakes in time for this one: a keep-alive connection's
		 * every request costs it no wake-up.
		 */
		wake = d->untimed;
		deadline_append(d, e);
		if (wake)
			pthread_cond_signal(&d->cond);
	}
	pthread_mutex_unlock(&d->lock);
}

void
deadline_disarm(struct deadlines *d, struct deadline_entry *e)
{
	pthread_mutex_lock(&d->lock);
	deadline_unlink(d, e);
	pthread_mutex_unlock(&d->lock);
}

uint64_t
deadline_expired_total(struct deadlines *d)
{
	uint64_t n;

	pthread_mutex_lock(&d->lock);
	n = d->expired;
	pthread_mutex_unlock(&d->lock);
	return n;
}
