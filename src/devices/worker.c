/*
 * worker.c - per-device command threads (see worker.h).
 *
 * Each item's queue wait and execution time are logged at debug level (and
 * at info when execution took over a second), so a slow driver shows up.
 * The same worker type also serves the GPU power reader (node.c), whose
 * device is the whole backend rather than one GPU.
 */
#include "worker.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"

struct worker {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct work *head, *tail;
	bool stopping;
	void *device;
	char label[32];
};

static long long
worker_us_between(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000000LL +
	    (b->tv_nsec - a->tv_nsec) / 1000;
}

static void *
worker_main(void *arg)
{
	struct worker *wk = arg;

	pthread_mutex_lock(&wk->lock);
	for (;;) {
		struct work *w;
		struct timespec start, end;
		const char *what;
		struct timespec queued;
		struct work_counters *counters;
		int rc;

		while (wk->head == NULL && !wk->stopping)
			pthread_cond_wait(&wk->cond, &wk->lock);
		if (wk->head == NULL)
			break;
		w = wk->head;
		wk->head = w->next;
		if (wk->head == NULL)
			wk->tail = NULL;
		pthread_mutex_unlock(&wk->lock);

		what = w->what;
		queued = w->queued;
		counters = w->counters;
		clock_gettime(CLOCK_MONOTONIC, &start);
		rc = w->exec(w, wk->device);
		clock_gettime(CLOCK_MONOTONIC, &end);
		/* counted before the result is handed back, so an answer
		 * never reports counters without its own command */
		if (counters != NULL) {
			atomic_fetch_add(&counters->commands, 1);
			if (rc != 0)
				atomic_fetch_add(&counters->failures, 1);
		}
		w->complete(w);		/* may free w */
		long long exec_us = worker_us_between(&start, &end);
		zlog(exec_us > 1000000 ? ZLOG_INFO : ZLOG_DEBUG, "device_command",
		    "device=%s op=%s queue_us=%lld exec_us=%lld ok=%s", wk->label,
		    what, worker_us_between(&queued, &start), exec_us,
		    rc == 0 ? "true" : "false");
		pthread_mutex_lock(&wk->lock);
	}
	pthread_mutex_unlock(&wk->lock);
	return NULL;
}

int
worker_start(const char *label, void *device, struct worker **out,
    struct zerr *err)
{
	struct worker *wk = calloc(1, sizeof(*wk));
	int rc;

	if (wk == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	pthread_mutex_init(&wk->lock, NULL);
	pthread_cond_init(&wk->cond, NULL);
	wk->device = device;
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

void
worker_submit(struct worker *wk, struct work *w)
{
	clock_gettime(CLOCK_MONOTONIC, &w->queued);
	w->next = NULL;
	pthread_mutex_lock(&wk->lock);
	if (wk->tail != NULL)
		wk->tail->next = w;
	else
		wk->head = w;
	wk->tail = w;
	pthread_cond_signal(&wk->cond);
	pthread_mutex_unlock(&wk->lock);
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
