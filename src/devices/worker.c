/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker.c - per-device command threads and their bounded queues (see
 * worker.h).
 *
 * Each item's queue wait and execution time are logged at debug level (and
 * at info when execution took over a second), so a slow driver shows up.
 * The same worker type also serves the shared readers (node.c), whose device
 * is the whole backend rather than one GPU or package.
 *
 * The queue is a singly linked list walked under the lock on every submit:
 * it holds at most 2 * max items, and a walk of a few thousand pointers
 * costs less than the system calls of the request that caused it.
 */
#include "worker.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

/* struct work.reservation */
enum {
	WORKER_RES_NONE,
	WORKER_RES_ROOM,	/* counted in held[kind] */
	WORKER_RES_CREDIT,	/* a write that will replace a queued one */
};

struct worker {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct work *head, *tail;
	unsigned held[2];	/* queued + reserved, by enum work_kind */
	unsigned max;
	bool stopping;
	void *device;
	char label[32];
	/* worker_set_async: the batch out, and whether the thread has it */
	struct worker_async async;
	bool busy, handoff;
	unsigned nout;
	uint64_t out_start;
	struct work *out[WORKER_BATCH_MAX];
};

/*
 * The reads that joined `w` (worker.h, `same`), in arrival order, each
 * given w's outcome; w's list is emptied. Called before w completes.
 */
static struct work *
worker_share(struct work *w, int rc)
{
	struct work *list = NULL, *f, *next;

	/* joined newest first: reversed while sharing */
	for (f = w->joined; f != NULL; f = next) {
		next = f->next;
		f->share(f, w, rc);
		f->next = list;
		list = f;
	}
	w->joined = NULL;
	return list;
}

/* Counts, completes and logs the reads that joined one that ran. */
static void
worker_finish_joined(struct worker *wk, struct work *list, uint64_t start)
{
	struct work *f, *next;

	for (f = list; f != NULL; f = next) {
		const char *what = f->what;
		uint64_t queued = f->queued_ns;

		next = f->next;
		if (f->counters != NULL)
			atomic_fetch_add(&f->counters->merged, 1);
		f->complete(f);		/* may free f */
		zlog(ZLOG_DEBUG, "device_command", "device=%s op=%s "
		    "queue_us=%lld merged=true", wk->label, what,
		    (long long)((start - queued) / 1000));
	}
}

/* Counts, completes and logs one item that ran (the worker thread). */
static void
worker_finish(struct worker *wk, struct work *w, int rc, uint64_t start,
    uint64_t end)
{
	const char *what = w->what;
	uint64_t queued = w->queued_ns;
	long long exec_us = (long long)((end - start) / 1000);
	struct work *joined = w->joined != NULL ? worker_share(w, rc) : NULL;

	/* counted before the result is handed back, so an answer never
	 * reports counters without its own command */
	if (w->counters != NULL) {
		atomic_fetch_add(&w->counters->commands, 1);
		if (rc != 0)
			atomic_fetch_add(&w->counters->failures, 1);
	}
	w->complete(w);		/* may free w */
	zlog(exec_us > 1000000 ? ZLOG_INFO : ZLOG_DEBUG, "device_command",
	    "device=%s op=%s queue_us=%lld exec_us=%lld ok=%s", wk->label,
	    what, (long long)((start - queued) / 1000), exec_us,
	    rc == 0 ? "true" : "false");
	if (joined != NULL)
		worker_finish_joined(wk, joined, start);
}

/* Takes the head item, and the batchable ones right behind it; locked. */
static unsigned
worker_pop(struct worker *wk, struct work **items)
{
	unsigned n = 0, max = WORKER_BATCH_MAX;

	if (wk->head->exec_many != NULL && wk->head->many_max != NULL) {
		max = wk->head->many_max(wk->head, wk->device);
		max = max < 1 ? 1 : max > WORKER_BATCH_MAX ? WORKER_BATCH_MAX :
		    max;
	}
	do {
		struct work *w = wk->head;

		wk->head = w->next;
		if (wk->head == NULL)
			wk->tail = NULL;
		wk->held[w->kind]--;
		items[n++] = w;
	} while (items[0]->exec_many != NULL && wk->head != NULL &&
	    wk->head->exec_many == items[0]->exec_many && n < max);
	return n;
}

/* Runs a popped batch on the calling thread and completes its items. */
static void
worker_run(struct worker *wk, struct work **items, unsigned n)
{
	int rc[WORKER_BATCH_MAX];
	uint64_t start, end;

	start = zclock_now_ns();
	if (n > 1 || items[0]->exec_many != NULL)
		(void)items[0]->exec_many(items, n, wk->device, rc);
	else
		rc[0] = items[0]->exec(items[0], wk->device);
	end = zclock_now_ns();
	for (unsigned i = 0; i < n; i++)
		worker_finish(wk, items[i], rc[i], start, end);
}

/*
 * After items were queued (lock held): wakes the thread, or for an
 * asynchronous worker that is idle pops the next batch into `out` and
 * returns true: the caller then calls worker_launch outside the lock.
 */
static bool
worker_kick_locked(struct worker *wk)
{
	if (wk->async.start == NULL) {
		pthread_cond_signal(&wk->cond);
		return false;
	}
	if (wk->busy || wk->head == NULL)
		return false;
	wk->nout = worker_pop(wk, wk->out);
	wk->busy = true;
	wk->out_start = zclock_now_ns();
	return true;
}

/* Hands the popped batch to `start`, or to the thread when it declines. */
static void
worker_launch(struct worker *wk)
{
	/* from here the batch may complete on another thread at any time */
	if (wk->async.start(wk->async.ctx, wk->out, wk->nout) == 0)
		return;
	worker_async_done(wk, NULL);
}

void
worker_async_done(struct worker *wk, const int *rc)
{
	struct work *items[WORKER_BATCH_MAX];
	unsigned n = wk->nout;
	uint64_t end = zclock_now_ns();
	bool next;

	if (rc == NULL) {
		pthread_mutex_lock(&wk->lock);
		wk->handoff = true;
		pthread_cond_signal(&wk->cond);
		pthread_mutex_unlock(&wk->lock);
		return;
	}
	memcpy(items, wk->out, n * sizeof(items[0]));
	for (unsigned i = 0; i < n; i++)
		worker_finish(wk, items[i], rc[i], wk->out_start, end);
	pthread_mutex_lock(&wk->lock);
	wk->busy = false;
	next = worker_kick_locked(wk);
	if (wk->stopping)
		pthread_cond_signal(&wk->cond);	/* the thread waits for us */
	pthread_mutex_unlock(&wk->lock);
	if (next)
		worker_launch(wk);
}

void
worker_set_async(struct worker *wk, const struct worker_async *a)
{
	pthread_mutex_lock(&wk->lock);
	wk->async = *a;
	pthread_mutex_unlock(&wk->lock);
}

/*
 * The thread: every queued batch, or for an asynchronous worker only the
 * batches handed back to it (and, when stopping, what is left queued).
 */
static void *
worker_main(void *arg)
{
	struct worker *wk = arg;
	struct work *items[WORKER_BATCH_MAX];

#ifdef __GLIBC__
	/*
	 * "gpu3", "cpu-energy": top -H and /proc/PID/task/TID/comm tell the
	 * threads apart. Its own name, so prctl(PR_SET_NAME), which the
	 * network process's filter allows (a chroot hides /proc from it).
	 */
	(void)pthread_setname_np(pthread_self(), wk->label);
#endif
	pthread_mutex_lock(&wk->lock);
	for (;;) {
		bool async = wk->async.start != NULL, next;
		unsigned n;

		if (async && wk->handoff) {
			wk->handoff = false;
			n = wk->nout;
			memcpy(items, wk->out, n * sizeof(items[0]));
			pthread_mutex_unlock(&wk->lock);
			worker_run(wk, items, n);
			pthread_mutex_lock(&wk->lock);
			wk->busy = false;
			next = worker_kick_locked(wk);
			if (next) {
				pthread_mutex_unlock(&wk->lock);
				worker_launch(wk);
				pthread_mutex_lock(&wk->lock);
			}
			continue;
		}
		if (async ? wk->busy || wk->head == NULL || !wk->stopping :
		    wk->head == NULL) {
			if (wk->stopping && (!async || !wk->busy))
				break;
			pthread_cond_wait(&wk->cond, &wk->lock);
			continue;
		}
		n = worker_pop(wk, items);
		pthread_mutex_unlock(&wk->lock);
		worker_run(wk, items, n);
		pthread_mutex_lock(&wk->lock);
	}
	pthread_mutex_unlock(&wk->lock);
	return NULL;
}

int
worker_start(const char *label, void *device, unsigned max,
    struct worker **out, struct zerr *err)
{
	struct worker *wk = calloc(1, sizeof(*wk));
	int rc;

	if (wk == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	pthread_mutex_init(&wk->lock, NULL);
	pthread_cond_init(&wk->cond, NULL);
	wk->device = device;
	wk->max = max > 0 ? max : 1;
	snprintf(wk->label, sizeof(wk->label), "%s", label);
	rc = pthread_create(&wk->thread, NULL, worker_main, wk);
	if (rc != 0) {
		pthread_mutex_destroy(&wk->lock);
		pthread_cond_destroy(&wk->cond);
		free(wk);
		return zerr_set(err, ZERR_INTERNAL,
		    "cannot start worker %s: %s", label, strerror(rc));
	}
	*out = wk;
	return 0;
}

unsigned
worker_max(const struct worker *wk)
{
	return wk->max;
}

/* Puts `w` after `prev` (NULL: at the head). Lock held. */
static void
worker_link_after(struct worker *wk, struct work *prev, struct work *w)
{
	if (prev == NULL) {
		w->next = wk->head;
		wk->head = w;
	} else {
		w->next = prev->next;
		prev->next = w;
	}
	if (w->next == NULL)
		wk->tail = w;
}

/* Takes `x`, which follows `prev` (NULL: x is the head), out. Lock held. */
static void
worker_unlink(struct worker *wk, struct work *prev, struct work *x)
{
	if (prev == NULL)
		wk->head = x->next;
	else
		prev->next = x->next;
	if (wk->tail == x)
		wk->tail = prev;
	x->next = NULL;
}

/* Whether the queued item `x` changes or returns a setting `w` writes. */
static bool
worker_interacts(const struct work *x, const struct work *w)
{
	if (x->kind == WORK_WRITE)
		return (x->touches & w->touches) != 0;
	return (x->depends & w->touches) != 0;
}

/* Whether the write `w` makes the queued item `x` pointless. */
static bool
worker_covers(const struct work *w, const struct work *x)
{
	return x->kind == WORK_WRITE && x->supersedable &&
	    (x->touches & ~w->touches) == 0;
}

/*
 * The queued items the write `w` may replace, as the first of them: the
 * trailing run of the queued items that interact with `w`, as long as each
 * of them is a write it covers. Nothing queued after that run touches or
 * reads a setting of `w`, so running `w` in the place of the run's last
 * item leaves every setting as arrival order would, and no read sees `w`
 * before its time. Checking against `w`'s settings rather than those of the
 * replaced writes matters when `w` touches more than they do (a
 * reset_locked_clocks replacing a reset of one clock domain must not jump
 * over a queued write of the other). NULL when there is none. Lock held.
 */
static struct work *
worker_replaceable(const struct worker *wk, const struct work *w)
{
	struct work *run = NULL;

	if (w->kind != WORK_WRITE || w->touches == 0)
		return NULL;
	for (struct work *x = wk->head; x != NULL; x = x->next) {
		if (!worker_interacts(x, w))
			continue;
		if (!worker_covers(w, x))
			run = NULL;
		else if (run == NULL)
			run = x;
	}
	return run;
}

/*
 * Queues the write `w`, replacing what worker_replaceable() finds; the
 * replaced items are handed back through `dropped` (linked by `next`).
 * Returns how many were replaced. Lock held.
 */
static unsigned
worker_queue_write(struct worker *wk, struct work *w, struct work **dropped)
{
	struct work *first = worker_replaceable(wk, w);
	struct work *prev = NULL, *at = NULL, *x, *next;
	unsigned n = 0;

	*dropped = NULL;
	if (first == NULL) {
		worker_link_after(wk, wk->tail, w);
		return 0;
	}
	for (x = wk->head; x != first; x = x->next)
		prev = x;
	for (x = first; x != NULL; x = next) {
		next = x->next;
		if (!worker_interacts(x, w)) {
			prev = x;
			continue;
		}
		worker_unlink(wk, prev, x);
		x->next = *dropped;
		*dropped = x;
		at = prev;	/* where the last replaced item was */
		n++;
	}
	worker_link_after(wk, at, w);
	return n;
}

/*
 * Queues the read `r` after the last queued write it depends on (the head
 * when none) and after the reads that directly follow that point, so reads
 * stay in arrival order unless keeping it would hold one behind a write it
 * does not need. Or, when a queued read after that write asks the same
 * (worker.h, `same`), joins the first such read and returns true: `r` is
 * then not in the queue. Lock held.
 */
static bool
worker_queue_read(struct worker *wk, struct work *r)
{
	struct work *after = NULL, *join = NULL, *x;

	for (x = wk->head; x != NULL; x = x->next) {
		if (x->kind == WORK_WRITE && (x->touches & r->depends) != 0) {
			after = x;
			join = NULL;	/* r must see this write */
		} else if (join == NULL && r->same != NULL &&
		    x->kind == WORK_READ && x->same == r->same &&
		    r->same(x, r))
			join = x;
	}
	if (join != NULL) {
		r->next = join->joined;
		join->joined = r;
		return true;
	}
	for (x = after != NULL ? after->next : wk->head;
	    x != NULL && x->kind == WORK_READ; x = x->next)
		after = x;
	worker_link_after(wk, after, r);
	return false;
}

int
worker_reserve(struct worker *wk, struct work *w)
{
	int rc = 0;

	/* one reservation at a time: submit or unreserve clears it */
	assert(w->reservation == WORKER_RES_NONE && w->reserved_on == NULL);
	pthread_mutex_lock(&wk->lock);
	if (wk->held[w->kind] < wk->max || w->unbounded) {
		wk->held[w->kind]++;
		w->reservation = WORKER_RES_ROOM;
	} else if (worker_replaceable(wk, w) != NULL) {
		/*
		 * Replacing takes no room. Should the replaced write start
		 * running before the submit, its leaving makes the room.
		 */
		w->reservation = WORKER_RES_CREDIT;
	} else
		rc = -1;
	if (rc == 0)
		w->reserved_on = wk;
	pthread_mutex_unlock(&wk->lock);
	return rc;
}

void
worker_unreserve(struct worker *wk, struct work *w)
{
	assert(w->reserved_on == wk);
	pthread_mutex_lock(&wk->lock);
	if (w->reservation == WORKER_RES_ROOM) {
		assert(wk->held[w->kind] > 0);
		wk->held[w->kind]--;
	}
	w->reservation = WORKER_RES_NONE;
	w->reserved_on = NULL;
	pthread_mutex_unlock(&wk->lock);
}

/* Queues w; the lock is held. Superseded writes are added to *dropped. */
static void
worker_submit_locked(struct worker *wk, struct work *w, struct work **dropped)
{
	unsigned replaced;
	struct work *d = NULL, *last;

	assert(w->reserved_on == wk);	/* worker_reserve came first */
	if (w->reservation != WORKER_RES_ROOM)
		wk->held[w->kind]++;
	w->reservation = WORKER_RES_NONE;
	w->reserved_on = NULL;
	w->joined = NULL;
	if (w->kind == WORK_READ) {
		/* a read that joined another is not queued: its room is free */
		if (worker_queue_read(wk, w))
			wk->held[WORK_READ]--;
		return;
	}
	replaced = worker_queue_write(wk, w, &d);
	/* w and each write it replaced are counted in held */
	assert(replaced < wk->held[WORK_WRITE]);
	wk->held[WORK_WRITE] -= replaced;
	if (d == NULL)
		return;
	for (last = d; last->next != NULL; last = last->next)
		;
	last->next = *dropped;
	*dropped = d;
}

/* Outside the lock: `drop` logs and frees. */
static void
worker_drop_all(struct work *dropped)
{
	struct work *next;

	for (; dropped != NULL; dropped = next) {
		next = dropped->next;
		if (dropped->counters != NULL)
			atomic_fetch_add(&dropped->counters->superseded, 1);
		dropped->drop(dropped);		/* may free it */
	}
}

void
worker_submit(struct worker *wk, struct work *w)
{
	struct work *dropped = NULL;
	bool next;

	w->queued_ns = zclock_now_ns();
	pthread_mutex_lock(&wk->lock);
	worker_submit_locked(wk, w, &dropped);
	next = worker_kick_locked(wk);
	pthread_mutex_unlock(&wk->lock);
	worker_drop_all(dropped);
	if (next)
		worker_launch(wk);
}

void
worker_batch_init(struct worker_batch *b)
{
	b->head = b->tail = NULL;
}

int
worker_batch_reserve(struct worker_batch *b, struct worker *wk,
    struct work *w)
{
	if (worker_reserve(wk, w) != 0) {
		worker_batch_release(b);
		return -1;
	}
	w->batch_next = NULL;
	if (b->tail != NULL)
		b->tail->batch_next = w;
	else
		b->head = w;
	b->tail = w;
	return 0;
}

void
worker_batch_release(struct worker_batch *b)
{
	for (struct work *w = b->head; w != NULL; w = w->batch_next)
		worker_unreserve(w->reserved_on, w);
	worker_batch_init(b);
}

void
worker_batch_submit(struct worker_batch *b)
{
	struct work *w = b->head, *next, *dropped = NULL;
	uint64_t now = zclock_now_ns();

	worker_batch_init(b);
	/*
	 * A run of items bound for one worker is queued under one lock, so
	 * the worker sees them together (and can run them as one batch).
	 */
	while (w != NULL) {
		struct worker *wk = w->reserved_on;
		bool kicked;

		pthread_mutex_lock(&wk->lock);
		do {
			/* once queued, `w` may run and be freed at any moment */
			next = w->batch_next;
			w->queued_ns = now;
			worker_submit_locked(wk, w, &dropped);
			w = next;
		} while (w != NULL && w->reserved_on == wk);
		kicked = worker_kick_locked(wk);
		pthread_mutex_unlock(&wk->lock);
		if (kicked)
			worker_launch(wk);
	}
	worker_drop_all(dropped);
}

void
worker_stop(struct worker *wk)
{
	if (wk == NULL)
		return;
	pthread_mutex_lock(&wk->lock);
	wk->stopping = true;
	pthread_cond_signal(&wk->cond);
	pthread_mutex_unlock(&wk->lock);
	pthread_join(wk->thread, NULL);
	pthread_mutex_destroy(&wk->lock);
	pthread_cond_destroy(&wk->cond);
	free(wk);
}
