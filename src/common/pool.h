/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.h - a few threads for blocking calls that must not run on the event
 * loop: a Unix peer's identity (NSS, which a slow LDAP or SSSD can stall
 * for seconds) and the device process's figures for /metrics. The loop
 * hands a job over and goes on; the job's `run` blocks on a pool thread
 * and completes whatever waits for it (a suspended request) itself.
 *
 * The queue is bounded: pool_submit refuses a job when `max_queued` wait
 * already, so a flood of slow look-ups cannot grow memory; the caller then
 * answers 503, as for a full device queue. A job is plain data embedded in
 * the caller's state, which must outlive its run.
 */
#ifndef ZEUS_POOL_H
#define ZEUS_POOL_H

#include "common/err.h"

struct pool_job {
	void (*run)(struct pool_job *job);	/* on a pool thread */
	struct pool_job *next;			/* the pool's */
};

struct pool;

/* `nthreads` threads (started at once) and at most `max_queued` waiting. */
int pool_create(unsigned nthreads, unsigned max_queued, struct pool **out,
    struct zerr *err);

/* Queues `job`; 0, or -1 when the queue is full or the pool stopping. */
int pool_submit(struct pool *p, struct pool_job *job);

/* Jobs queued or running now. */
unsigned pool_pending(struct pool *p);

/*
 * Runs what is queued, then stops and joins the threads and frees the
 * pool. A job blocked for ever blocks this too: call it once nothing can
 * be waiting (the server stopped).
 */
void pool_destroy(struct pool *p);

#endif
