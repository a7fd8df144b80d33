/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sampler.c - the timer thread behind stream sampling (see sampler.h).
 *
 * One mutex and one condition variable on CLOCK_MONOTONIC: the thread sleeps
 * until the earliest armed deadline (or forever when nothing is armed), and
 * arming signals it so a new earliest deadline is honoured at once. With a
 * few dozen timers a linear scan beats any heap.
 */
#include "api/sampler.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"

struct sampler_timer {
	bool armed;
	uint64_t period_ns;
	uint64_t next_ns;
};

struct sampler {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool started, stop;
	sampler_fn fn;
	void *arg;
	uint64_t skipped;
	unsigned ntimers;
	unsigned *due;			/* [ntimers], thread-owned */
	struct sampler_timer timers[];
};

uint64_t
sampler_now_ns(void)
{
	return zclock_now_ns();
}

/* Earliest armed deadline, or UINT64_MAX. Called locked. */
static uint64_t
sampler_earliest(const struct sampler *s)
{
	uint64_t min = UINT64_MAX;

	for (unsigned t = 0; t < s->ntimers; t++)
		if (s->timers[t].armed && s->timers[t].next_ns < min)
			min = s->timers[t].next_ns;
	return min;
}

/* Collects due timers and moves their deadlines on. Called locked. */
static unsigned
sampler_collect(struct sampler *s, uint64_t now)
{
	unsigned n = 0;

	for (unsigned t = 0; t < s->ntimers; t++) {
		struct sampler_timer *tm = &s->timers[t];

		if (!tm->armed || tm->next_ns > now)
			continue;
		s->due[n++] = t;
		tm->next_ns += tm->period_ns;
		if (tm->next_ns <= now) {
			/* Late by whole periods: skip them, keep the phase. */
			uint64_t missed = (now - tm->next_ns) / tm->period_ns + 1;

			s->skipped += missed;
			tm->next_ns += missed * tm->period_ns;
		}
	}
	return n;
}

static void
sampler_wait_until(struct sampler *s, uint64_t deadline)
{
	struct timespec ts;

	if (deadline == UINT64_MAX) {
		pthread_cond_wait(&s->cond, &s->lock);
		return;
	}
	ts = zclock_ts(deadline);
	(void)pthread_cond_timedwait(&s->cond, &s->lock, &ts);
}

static void *
sampler_main(void *p)
{
	struct sampler *s = p;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		uint64_t next = sampler_earliest(s), now = sampler_now_ns();
		unsigned n;

		if (next > now) {
			sampler_wait_until(s, next);
			continue;
		}
		n = sampler_collect(s, now);
		pthread_mutex_unlock(&s->lock);
		if (n > 0)
			s->fn(s->arg, s->due, n, now);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int
sampler_create(unsigned ntimers, sampler_fn fn, void *arg,
    struct sampler **out, struct zerr *err)
{
	struct sampler *s;
	pthread_condattr_t ca;

	s = calloc(1, sizeof(*s) + ntimers * sizeof(s->timers[0]));
	if (s == NULL || (s->due = calloc(ntimers ? ntimers : 1,
	    sizeof(unsigned))) == NULL) {
		free(s);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	s->ntimers = ntimers;
	s->fn = fn;
	s->arg = arg;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&s->thread, NULL, sampler_main, s) != 0) {
		sampler_destroy(s);
		return zerr_set(err, ZERR_INTERNAL,
		    "cannot start the sampler thread");
	}
	s->started = true;
	*out = s;
	return 0;
}

void
sampler_arm(struct sampler *s, unsigned t, uint64_t period_ns,
    uint64_t first_ns)
{
	if (t >= s->ntimers || period_ns == 0)
		return;
	pthread_mutex_lock(&s->lock);
	s->timers[t].armed = true;
	s->timers[t].period_ns = period_ns;
	s->timers[t].next_ns = sampler_now_ns() + first_ns;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void
sampler_disarm(struct sampler *s, unsigned t)
{
	if (t >= s->ntimers)
		return;
	pthread_mutex_lock(&s->lock);
	s->timers[t].armed = false;
	pthread_mutex_unlock(&s->lock);
}

uint64_t
sampler_skipped(struct sampler *s)
{
	uint64_t v;

	pthread_mutex_lock(&s->lock);
	v = s->skipped;
	pthread_mutex_unlock(&s->lock);
	return v;
}

void
sampler_stop(struct sampler *s)
{
	bool join;

	if (s == NULL)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	join = s->started;
	s->started = false;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (join)
		pthread_join(s->thread, NULL);
}

void
sampler_destroy(struct sampler *s)
{
	if (s == NULL)
		return;
	sampler_stop(s);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s->due);
	free(s);
}
