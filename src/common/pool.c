/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.c - a few threads for blocking calls off the loop (pool.h): one
 * FIFO under a mutex, a condition variable the idle threads wait on. An
 * idle pool wakes nobody.
 */
#include "common/pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct pool {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct pool_job *head, *tail;
	unsigned queued, running, max_queued;
	bool stopping;
	unsigned nthreads;
	pthread_t threads[];
};

static void *
pool_main(void *arg)
{
	struct pool *p = arg;
	struct pool_job *j;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (p->head == NULL && !p->stopping)
			pthread_cond_wait(&p->wake, &p->lock);
		if ((j = p->head) == NULL)
			break;		/* stopping, and nothing left */
		if ((p->head = j->next) == NULL)
			p->tail = NULL;
		p->queued--;
		p->running++;
		pthread_mutex_unlock(&p->lock);
		j->run(j);		/* j may be gone from here on */
		pthread_mutex_lock(&p->lock);
		p->running--;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Stops and joins the first `n` threads. */
static void
pool_join(struct pool *p, unsigned n)
{
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < n; i++)
		pthread_join(p->threads[i], NULL);
}

int
pool_create(unsigned nthreads, unsigned max_queued, struct pool **out,
    struct zerr *err)
{
	struct pool *p;
	int rc;

	if (nthreads == 0 || nthreads > 64)
		return zerr_set(err, ZERR_INTERNAL, "bad pool size %u",
		    nthreads);
	if ((p = calloc(1, sizeof(*p) + nthreads * sizeof(pthread_t))) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	p->max_queued = max_queued;
	for (unsigned i = 0; i < nthreads; i++) {
		if ((rc = pthread_create(&p->threads[i], NULL, pool_main,
		    p)) != 0) {
			pool_join(p, i);
			pthread_cond_destroy(&p->wake);
			pthread_mutex_destroy(&p->lock);
			free(p);
			return zerr_set(err, ZERR_INTERNAL, "cannot start a "
			    "thread: %s", strerror(rc));
		}
	}
	p->nthreads = nthreads;
	*out = p;
	return 0;
}

int
pool_submit(struct pool *p, struct pool_job *job)
{
	int rc = -1;

	job->next = NULL;
	pthread_mutex_lock(&p->lock);
	if (!p->stopping && p->queued < p->max_queued) {
		if (p->tail != NULL)
			p->tail->next = job;
		else
			p->head = job;
		p->tail = job;
		p->queued++;
		pthread_cond_signal(&p->wake);
		rc = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

unsigned
pool_pending(struct pool *p)
{
	unsigned n;

	pthread_mutex_lock(&p->lock);
	n = p->queued + p->running;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void
pool_destroy(struct pool *p)
{
	if (p == NULL)
		return;
	pool_join(p, p->nthreads);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
