/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_loop.c - the event loop (src/common/loop.c) and the look-up pool
 * (src/common/pool.c): a watched fd runs its callback on the loop's thread,
 * a nudge and an ask reach the driver, stop joins; the pool runs every job
 * (several at once), refuses past its bound, and runs what is queued
 * before it is destroyed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/loop.h"
#include "common/pool.h"

/* Waits up to 10 s for *v to reach `want`; a hung loop fails the test. */
static void
wait_for(atomic_uint *v, unsigned want)
{
	for (int i = 0; i < 10000 && atomic_load(v) < want; i++)
		usleep(1000);
	assert_true(atomic_load(v) >= want);
}

/* ---- The loop ------------------------------------------------------------ */

struct drv {
	atomic_uint turns, cmds, ready, on_loop;
	unsigned last_cmds;
	int fd;
};

static int
drv_timeout(void *ctx)
{
	(void)ctx;
	return -1;		/* only the fds and the wake-up end a wait */
}

static void
drv_turn(void *ctx)
{
	struct drv *d = ctx;

	atomic_fetch_add(&d->turns, 1);
	if (loop_on_loop())
		atomic_fetch_add(&d->on_loop, 1);
}

static void
drv_commands(void *ctx, unsigned cmds)
{
	struct drv *d = ctx;

	d->last_cmds = cmds;
	atomic_fetch_add(&d->cmds, 1);
}

static void
drv_ready(void *ctx)
{
	struct drv *d = ctx;
	char b[16];

	(void)!read(d->fd, b, sizeof(b));	/* level-triggered: drain */
	atomic_fetch_add(&d->ready, 1);
}

static void
test_loop_watch_nudge_ask_stop(void **state)
{
	struct drv d = { 0 };
	struct loop_driver drv = { drv_timeout, drv_turn, drv_commands, &d };
	struct loop *l;
	struct zerr err;
	int p[2];
	unsigned turns;

	(void)state;
	assert_int_equal(pipe(p), 0);
	d.fd = p[0];
	assert_int_equal(loop_create(&l, &err), 0);
	assert_int_equal(loop_watch(l, p[0], drv_ready, &d, &err), 0);
	assert_int_equal(loop_watched(l), 1);
	assert_false(loop_running(l));
	loop_nudge(l);			/* not running: a no-op */
	assert_int_equal(loop_start(l, &drv, &err), 0);
	assert_true(loop_running(l));
	assert_false(loop_on_loop());	/* this thread is not the loop */

	assert_int_equal(write(p[1], "x", 1), 1);
	wait_for(&d.ready, 1);
	wait_for(&d.turns, 1);		/* a turn follows every wait */

	turns = atomic_load(&d.turns);
	loop_nudge(l);
	wait_for(&d.turns, turns + 1);
	assert_int_equal(atomic_load(&d.on_loop), atomic_load(&d.turns));

	loop_ask(l, 1u << 3);
	wait_for(&d.cmds, 1);
	assert_int_equal(d.last_cmds, 1u << 3);

	loop_stop(l);
	assert_false(loop_running(l));
	loop_free(l);
	close(p[0]);
	close(p[1]);
}

/* A started loop watching a new pipe's read end with `ready` (ctx: the
 * driver's), and its end. */
static void
pipe_loop_start(struct loop **l, int p[2], int *fd, void (*ready)(void *),
    const struct loop_driver *drv)
{
	struct zerr err;

	assert_int_equal(pipe(p), 0);
	*fd = p[0];
	assert_int_equal(loop_create(l, &err), 0);
	assert_int_equal(loop_watch(*l, p[0], ready, drv->ctx, &err), 0);
	assert_int_equal(loop_start(*l, drv, &err), 0);
}

static void
pipe_loop_end(struct loop *l, int p[2])
{
	loop_free(l);
	close(p[0]);
	close(p[1]);
}

/* A driver whose first turn nudges its own loop (a connection resumed
 * from inside libmicrohttpd's turn): it must get another turn at once,
 * though its timeout says wait for ever. */
struct self_drv {
	struct loop *l;
	atomic_uint turns;
	int fd;
};

static void
self_ready(void *ctx)
{
	struct self_drv *d = ctx;
	char b[16];

	(void)!read(d->fd, b, sizeof(b));	/* or the wait never blocks */
}

static void
self_turn(void *ctx)
{
	struct self_drv *d = ctx;

	if (atomic_fetch_add(&d->turns, 1) == 0)
		loop_nudge(d->l);
}

static void
test_loop_nudge_from_a_turn(void **state)
{
	struct self_drv d = { 0 };
	struct loop_driver drv = { drv_timeout, self_turn, NULL, &d };
	int p[2];

	(void)state;
	pipe_loop_start(&d.l, p, &d.fd, self_ready, &drv);
	/* the first turn follows the first wait: wake it once */
	assert_int_equal(write(p[1], "x", 1), 1);
	wait_for(&d.turns, 2);		/* the nudge's turn, with no wake-up */
	usleep(20000);
	assert_int_equal(atomic_load(&d.turns), 2);	/* then it waits */
	pipe_loop_end(d.l, p);
}

/* A watched fd's callback that nudges (a device reply resuming requests):
 * the turn that follows every wait serves it, so exactly one turn runs,
 * not a second one for the nudge (a whole turn of libmicrohttpd's for
 * nothing per resumed request). */
struct ready_drv {
	struct loop *l;
	atomic_uint turns, ready;
	int fd;
};

static void
ready_nudge(void *ctx)
{
	struct ready_drv *d = ctx;
	char b[16];

	(void)!read(d->fd, b, sizeof(b));
	loop_nudge(d->l);
	atomic_fetch_add(&d->ready, 1);
}

static void
ready_turn(void *ctx)
{
	struct ready_drv *d = ctx;

	atomic_fetch_add(&d->turns, 1);
}

static void
test_loop_nudge_from_a_callback(void **state)
{
	struct ready_drv d = { 0 };
	struct loop_driver drv = { drv_timeout, ready_turn, NULL, &d };
	int p[2];

	(void)state;
	pipe_loop_start(&d.l, p, &d.fd, ready_nudge, &drv);
	for (unsigned i = 1; i <= 3; i++) {
		assert_int_equal(write(p[1], "x", 1), 1);
		wait_for(&d.ready, i);
		wait_for(&d.turns, i);
		usleep(20000);		/* room for a turn too many */
		assert_int_equal(atomic_load(&d.turns), i);
	}
	pipe_loop_end(d.l, p);
}

static void
test_loop_watch_bound(void **state)
{
	int p[LOOP_WATCH_MAX + 1][2];
	struct loop *l;
	struct zerr err;

	(void)state;
	assert_int_equal(loop_create(&l, &err), 0);
	for (int i = 0; i <= LOOP_WATCH_MAX; i++)
		assert_int_equal(pipe(p[i]), 0);
	for (int i = 0; i < LOOP_WATCH_MAX; i++)
		assert_int_equal(loop_watch(l, p[i][0], NULL, NULL, &err), 0);
	assert_int_equal(loop_watch(l, p[LOOP_WATCH_MAX][0], NULL, NULL,
	    &err), -1);
	assert_int_equal(loop_watched(l), 0);	/* no callback: not counted */
	loop_free(l);		/* never started: nothing to join */
	for (int i = 0; i <= LOOP_WATCH_MAX; i++) {
		close(p[i][0]);
		close(p[i][1]);
	}
}

/* ---- The pool ------------------------------------------------------------ */

struct job {
	struct pool_job j;
	atomic_uint *ran;
	atomic_uint *inside;	/* jobs running at once, most seen */
	atomic_uint *most;
	atomic_bool *hold;	/* blocks while set */
};

static void
job_run(struct pool_job *pj)
{
	struct job *j = (struct job *)pj;
	unsigned in = atomic_fetch_add(j->inside, 1) + 1;

	for (unsigned m = atomic_load(j->most); in > m &&
	    !atomic_compare_exchange_weak(j->most, &m, in);)
		;
	while (j->hold != NULL && atomic_load(j->hold))
		usleep(1000);
	atomic_fetch_sub(j->inside, 1);
	atomic_fetch_add(j->ran, 1);
}

static void
test_pool_runs_jobs_at_once_and_bounds(void **state)
{
	atomic_uint ran = 0, inside = 0, most = 0;
	atomic_bool hold = true;
	struct job jobs[8];
	struct pool *p;
	struct zerr err;

	(void)state;
	assert_int_equal(pool_create(3, 4, &p, &err), 0);
	for (int i = 0; i < 8; i++)
		jobs[i] = (struct job){ { job_run, NULL }, &ran, &inside,
		    &most, &hold };
	/* three run (and block), then four wait; the eighth is refused */
	for (int i = 0; i < 3; i++)
		assert_int_equal(pool_submit(p, &jobs[i].j), 0);
	wait_for(&inside, 3);
	for (int i = 3; i < 7; i++)
		assert_int_equal(pool_submit(p, &jobs[i].j), 0);
	assert_int_equal(pool_pending(p), 7);
	assert_int_equal(pool_submit(p, &jobs[7].j), -1);
	atomic_store(&hold, false);
	wait_for(&ran, 7);
	assert_int_equal(atomic_load(&most), 3);
	pool_destroy(p);
	assert_int_equal(atomic_load(&ran), 7);
}

static void
test_pool_destroy_runs_what_is_queued(void **state)
{
	atomic_uint ran = 0, inside = 0, most = 0;
	struct job jobs[5];
	struct pool *p;
	struct zerr err;

	(void)state;
	assert_int_equal(pool_create(1, 16, &p, &err), 0);
	for (int i = 0; i < 5; i++) {
		jobs[i] = (struct job){ { job_run, NULL }, &ran, &inside,
		    &most, NULL };
		assert_int_equal(pool_submit(p, &jobs[i].j), 0);
	}
	pool_destroy(p);
	assert_int_equal(atomic_load(&ran), 5);
	assert_int_equal(pool_create(0, 1, &p, &err), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loop_watch_nudge_ask_stop),
		cmocka_unit_test(test_loop_nudge_from_a_turn),
		cmocka_unit_test(test_loop_nudge_from_a_callback),
		cmocka_unit_test(test_loop_watch_bound),
		cmocka_unit_test(test_pool_runs_jobs_at_once_and_bounds),
		cmocka_unit_test(test_pool_destroy_runs_what_is_queued),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
