/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_worker.c - the bounded device queue (src/devices/worker.c): where
 * reads are inserted among writes, when a write supersedes queued ones, the
 * bounds of each kind, reservations and their all-or-nothing batches, and
 * reads that join a queued read of the same value (merging).
 *
 * Each test holds the worker on a "gate" item that blocks in exec until the
 * test opens it, queues items behind it, then opens the gate and stops the
 * worker (which runs everything queued): the order the items ran in is the
 * order the queue held them in.
 *
 * The asynchronous mode (worker_set_async) is tested without a gate: its
 * `start` keeps the batch out until the test calls worker_async_done.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "devices/cpu_cmd.h"
#include "devices/gpu_cmd.h"
#include "devices/worker.h"

/* settings bits, as gpu_cmd.h would choose them */
#define P 1u	/* power limit */
#define S 2u	/* persistence */
#define G 4u	/* GPU clocks */
#define M 8u	/* memory clocks */

#define MAXREC 64

struct rec {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool gate_open, gate_running;
	int ran[MAXREC], dropped[MAXREC], completed[MAXREC];
	unsigned nran, ndropped, ncompleted;
	unsigned execs;			/* exec calls begun so far */
};

struct item {
	struct work work;		/* first */
	int id;
	bool gate;
	struct rec *rec;
	/* merging: reads with the same nonzero key ask the same thing */
	int key;
	bool fail;			/* exec returns -1 */
	unsigned arrived;		/* rec.execs when it was submitted */
	unsigned value;			/* which exec it got its answer from */
	int rc;				/* what it completed with */
	bool done;
};

static struct work_counters counters;

static int
item_exec(struct work *w, void *device)
{
	struct item *it = (struct item *)w;
	struct rec *r = device;

	pthread_mutex_lock(&r->lock);
	it->value = ++r->execs;
	it->rc = it->fail ? -1 : 0;
	if (it->gate) {
		r->gate_running = true;
		pthread_cond_broadcast(&r->cond);
		while (!r->gate_open)
			pthread_cond_wait(&r->cond, &r->lock);
	}
	if (r->nran < MAXREC)
		r->ran[r->nran++] = it->id;
	pthread_mutex_unlock(&r->lock);
	return it->rc;
}

static void
item_complete(struct work *w)
{
	struct item *it = (struct item *)w;
	struct rec *r = it->rec;

	pthread_mutex_lock(&r->lock);
	it->done = true;
	if (r->ncompleted < MAXREC)
		r->completed[r->ncompleted++] = it->id;
	pthread_mutex_unlock(&r->lock);
}

static bool
item_same(const struct work *queued, const struct work *w)
{
	return ((const struct item *)queued)->key == ((const struct item *)w)->key;
}

static void
item_share(struct work *w, const struct work *from, int rc)
{
	struct item *it = (struct item *)w;

	it->value = ((const struct item *)from)->value;
	it->rc = rc;
}

static void
item_drop(struct work *w)
{
	struct item *it = (struct item *)w;
	struct rec *r = it->rec;

	pthread_mutex_lock(&r->lock);
	if (r->ndropped < MAXREC)
		r->dropped[r->ndropped++] = it->id;
	pthread_mutex_unlock(&r->lock);
}

static struct item *
item_init(struct item *it, struct rec *r, int id, enum work_kind kind)
{
	memset(it, 0, sizeof(*it));
	it->id = id;
	it->rec = r;
	it->work.kind = kind;
	it->work.what = kind == WORK_READ ? "read" : "write";
	it->work.counters = &counters;
	it->work.exec = item_exec;
	it->work.complete = item_complete;
	return it;
}

/* A write of `touches`; `sup`: block=false, may be superseded. */
static struct item *
wr(struct item *it, struct rec *r, int id, unsigned touches, bool sup)
{
	item_init(it, r, id, WORK_WRITE);
	it->work.touches = touches;
	it->work.supersedable = sup;
	it->work.drop = sup ? item_drop : NULL;
	return it;
}

static struct item *
rd(struct item *it, struct rec *r, int id, unsigned depends)
{
	item_init(it, r, id, WORK_READ);
	it->work.depends = depends;
	return it;
}

/* A read of `key`: merged with a queued read of the same key. */
static struct item *
mrd(struct item *it, struct rec *r, int id, unsigned depends, int key)
{
	rd(it, r, id, depends);
	it->key = key;
	it->work.same = item_same;
	it->work.share = item_share;
	return it;
}

static void
put(struct worker *wk, struct item *it)
{
	pthread_mutex_lock(&it->rec->lock);
	it->arrived = it->rec->execs;
	pthread_mutex_unlock(&it->rec->lock);
	assert_int_equal(worker_reserve(wk, &it->work), 0);
	worker_submit(wk, &it->work);
}

static void
rec_init(struct rec *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
}

/* Starts a worker and holds it on `gate` (id 0 unless given otherwise). */
static struct worker *
start_gated(struct rec *r, unsigned max, struct item *gate)
{
	struct worker *wk;
	struct zerr err;

	assert_int_equal(worker_start("test", r, max, &wk, &err), 0);
	gate->gate = true;
	put(wk, gate);
	pthread_mutex_lock(&r->lock);
	while (!r->gate_running)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
	return wk;
}

static void
open_gate(struct rec *r)
{
	pthread_mutex_lock(&r->lock);
	r->gate_open = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* Opens the gate, drains and stops; checks the order things ran in. */
static void
finish(struct worker *wk, struct rec *r, const int *want, unsigned n)
{
	open_gate(r);
	worker_stop(wk);
	assert_int_equal(r->nran, n + 1);
	assert_int_equal(r->ran[0], 0);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(r->ran[i + 1], want[i]);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
}

#define FINISH(wk, r, ...) do {						\
	static const int want_[] = { __VA_ARGS__ };			\
	finish((wk), (r), want_, sizeof(want_) / sizeof(want_[0]));	\
} while (0)

static int
setup(void **state)
{
	atomic_store(&counters.superseded, 0);
	atomic_store(&counters.merged, 0);
	atomic_store(&counters.commands, 0);
	atomic_store(&counters.failures, 0);
	return 0;
}

/* --- where reads go ------------------------------------------------------ */

static void
test_reads_skip_writes_they_do_not_need(void **state)
{
	struct rec r;
	struct item g, it[7];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	put(wk, wr(&it[1], &r, 1, P, false));
	put(wk, wr(&it[2], &r, 2, S, false));
	put(wk, rd(&it[3], &r, 3, 0));		/* ahead of both writes */
	put(wk, rd(&it[4], &r, 4, P));		/* after 1, ahead of 2 */
	put(wk, rd(&it[5], &r, 5, S));		/* after 2 */
	put(wk, rd(&it[6], &r, 6, 0));		/* after 3, the read before it */
	FINISH(wk, &r, 3, 6, 1, 4, 2, 5);
}

static void
test_read_after_write_of_its_setting(void **state)
{
	struct rec r;
	struct item g, it[5];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	put(wk, wr(&it[1], &r, 1, P, true));
	put(wk, rd(&it[2], &r, 2, P | S));	/* depends on 1 */
	/* 2 reads the setting after 1: 3 may not replace 1 */
	put(wk, wr(&it[3], &r, 3, P, true));
	put(wk, rd(&it[4], &r, 4, P));		/* after 3 */
	FINISH(wk, &r, 1, 2, 3, 4);
	assert_int_equal(r.ndropped, 0);
}

static void
test_reads_alone_stay_fifo(void **state)
{
	struct rec r;
	struct item g, it[6];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	for (int i = 1; i <= 5; i++)
		put(wk, rd(&it[i], &r, i, (unsigned)i & 1 ? P : 0));
	FINISH(wk, &r, 1, 2, 3, 4, 5);
}

/* --- superseding --------------------------------------------------------- */

static void
test_supersede_in_place(void **state)
{
	struct rec r;
	struct item g, it[4];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	put(wk, wr(&it[1], &r, 1, P, true));
	put(wk, wr(&it[2], &r, 2, S, true));
	put(wk, wr(&it[3], &r, 3, P, true));	/* replaces 1, before 2 */
	assert_int_equal(r.ndropped, 1);	/* dropped on this thread */
	assert_int_equal(r.dropped[0], 1);
	assert_int_equal(atomic_load(&counters.superseded), 1);
	FINISH(wk, &r, 3, 2);
}

static void
test_blocking_write_supersedes_nonblocking(void **state)
{
	struct rec r;
	struct item g, it[3];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	put(wk, wr(&it[1], &r, 1, P, true));
	put(wk, wr(&it[2], &r, 2, P, false));
	FINISH(wk, &r, 2);
	assert_int_equal(r.ndropped, 1);
}

static void
test_blocking_write_never_superseded(void **state)
{
	struct rec r;
	struct item g, it[3];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	put(wk, wr(&it[1], &r, 1, P, false));
	put(wk, wr(&it[2], &r, 2, P, true));
	FINISH(wk, &r, 1, 2);
	assert_int_equal(r.ndropped, 0);
}

static void
test_running_write_not_superseded(void **state)
{
	struct rec r;
	struct item g, it[2];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, wr(&g, &r, 0, P, true));
	put(wk, wr(&it[1], &r, 1, P, true));
	FINISH(wk, &r, 1);
	assert_int_equal(r.ndropped, 0);
}

static void
test_later_writer_of_setting_blocks_supersede(void **state)
{
	struct rec r;
	struct item g, it[7];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	/*
	 * W resets both clock domains; a blocking memory-clock write after it
	 * touches M (and cannot replace W, which also touches G): a newer
	 * reset must not take W's place, or M would end as 2 left it
	 */
	put(wk, wr(&it[1], &r, 1, G | M, true));
	put(wk, wr(&it[2], &r, 2, M, false));
	put(wk, wr(&it[3], &r, 3, G | M, true));
	/* the new write's own extra setting counts too: 6 must not jump 5 */
	put(wk, wr(&it[4], &r, 4, S, true));
	put(wk, wr(&it[5], &r, 5, P, false));
	put(wk, wr(&it[6], &r, 6, S | P, true));
	FINISH(wk, &r, 1, 2, 3, 4, 5, 6);
	assert_int_equal(r.ndropped, 0);
}

static void
test_supersede_needs_subset(void **state)
{
	struct rec r;
	struct item g, it[4];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	put(wk, wr(&it[1], &r, 1, G | M, true));	/* reset_locked_clocks */
	put(wk, wr(&it[2], &r, 2, G, true));	/* cannot replace 1 */
	assert_int_equal(r.ndropped, 0);
	put(wk, wr(&it[3], &r, 3, G | M, true));	/* replaces 1 and 2 */
	assert_int_equal(r.ndropped, 2);
	assert_int_equal(atomic_load(&counters.superseded), 2);
	FINISH(wk, &r, 3);
}

static void
test_supersede_past_unrelated_items(void **state)
{
	struct rec r;
	struct item g, it[6];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	put(wk, wr(&it[1], &r, 1, P, true));
	put(wk, wr(&it[2], &r, 2, S, false));	/* blocking, other setting */
	put(wk, rd(&it[3], &r, 3, S));		/* after 2, reads S only */
	put(wk, wr(&it[4], &r, 4, G, true));
	put(wk, wr(&it[5], &r, 5, P, true));	/* replaces 1 in place */
	FINISH(wk, &r, 5, 2, 3, 4);
	assert_int_equal(r.ndropped, 1);
	assert_int_equal(r.dropped[0], 1);
}

/* --- bounds and reservations --------------------------------------------- */

static void
test_bound_per_kind(void **state)
{
	struct rec r;
	struct item g, it[12];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 2, rd(&g, &r, 0, 0));	/* running: not counted */
	assert_int_equal(worker_max(wk), 2);
	put(wk, wr(&it[1], &r, 1, P, false));
	put(wk, wr(&it[2], &r, 2, S, true));
	/* writes full */
	assert_int_equal(worker_reserve(wk, &wr(&it[3], &r, 3, G, true)->work),
	    -1);
	/* a write the blocking one would have to jump: refused */
	assert_int_equal(worker_reserve(wk, &wr(&it[4], &r, 4, P, true)->work),
	    -1);
	/* reads have their own room */
	put(wk, rd(&it[5], &r, 5, 0));
	put(wk, rd(&it[6], &r, 6, P));
	assert_int_equal(worker_reserve(wk, &rd(&it[7], &r, 7, 0)->work), -1);
	/* a write that replaces a queued one takes no room: accepted */
	put(wk, wr(&it[8], &r, 8, S, true));
	assert_int_equal(r.ndropped, 1);
	assert_int_equal(worker_reserve(wk, &wr(&it[9], &r, 9, M, true)->work),
	    -1);
	FINISH(wk, &r, 5, 1, 6, 8);
}

/* A lease's restore: room even in a full queue, queued after what is there,
 * and counted while queued (a client then finds no room) */
static void
test_unbounded_never_refused(void **state)
{
	struct rec r;
	struct item g, it[6];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 1, rd(&g, &r, 0, 0));
	put(wk, wr(&it[1], &r, 1, P, false));
	assert_int_equal(worker_reserve(wk, &wr(&it[2], &r, 2, G, false)->work),
	    -1);
	wr(&it[3], &r, 3, G, false)->work.unbounded = true;
	put(wk, &it[3]);
	wr(&it[4], &r, 4, P, false)->work.unbounded = true;
	put(wk, &it[4]);
	assert_int_equal(worker_reserve(wk, &wr(&it[5], &r, 5, M, false)->work),
	    -1);
	FINISH(wk, &r, 1, 3, 4);
}

static void
test_room_comes_back(void **state)
{
	struct rec r;
	struct item g, it[4];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 1, rd(&g, &r, 0, 0));
	assert_int_equal(worker_reserve(wk, &wr(&it[1], &r, 1, P, false)->work),
	    0);
	assert_int_equal(worker_reserve(wk, &wr(&it[2], &r, 2, S, false)->work),
	    -1);
	worker_unreserve(wk, &it[1].work);
	put(wk, &it[2]);
	assert_int_equal(worker_reserve(wk, &wr(&it[3], &r, 3, G, false)->work),
	    -1);
	FINISH(wk, &r, 2);
}

static void
test_room_freed_when_item_starts(void **state)
{
	struct rec r;
	struct item g, it[3];
	struct worker *wk;

	rec_init(&r);
	/* the gate is a write that left the queue when it started */
	wk = start_gated(&r, 1, wr(&g, &r, 0, P, false));
	put(wk, wr(&it[1], &r, 1, P, false));
	assert_int_equal(worker_reserve(wk, &wr(&it[2], &r, 2, S, false)->work),
	    -1);
	FINISH(wk, &r, 1);
}

static void
test_batch_all_or_nothing(void **state)
{
	struct rec ra, rb;
	struct item ga, gb, a[5], b[5];
	struct worker *wa, *wb;
	struct worker_batch batch;

	rec_init(&ra);
	rec_init(&rb);
	wa = start_gated(&ra, 1, rd(&ga, &ra, 0, 0));
	wb = start_gated(&rb, 1, rd(&gb, &rb, 0, 0));
	put(wb, wr(&b[1], &rb, 1, P, false));	/* b's writes full */

	worker_batch_init(&batch);
	assert_int_equal(worker_batch_reserve(&batch, wa,
	    &wr(&a[1], &ra, 1, P, false)->work), 0);
	assert_int_equal(worker_batch_reserve(&batch, wb,
	    &wr(&b[2], &rb, 2, P, false)->work), -1);
	/* the batch let go of a's room: a can take a write again */
	assert_null(batch.head);
	worker_batch_submit(&batch);		/* empty: queues nothing */

	/* a batch that fits is queued on both, in order */
	worker_batch_init(&batch);
	assert_int_equal(worker_batch_reserve(&batch, wa,
	    &wr(&a[2], &ra, 2, S, false)->work), 0);
	assert_int_equal(worker_batch_reserve(&batch, wb,
	    &rd(&b[3], &rb, 3, 0)->work), 0);
	assert_int_equal(worker_batch_reserve(&batch, wa,
	    &rd(&a[3], &ra, 3, S)->work), 0);
	worker_batch_submit(&batch);
	assert_null(batch.head);

	/* both are full now: b's reads (b[3]), a's writes (a[2]) */
	worker_batch_init(&batch);
	assert_int_equal(worker_batch_reserve(&batch, wb,
	    &rd(&b[4], &rb, 4, 0)->work), -1);
	assert_int_equal(worker_reserve(wa, &wr(&a[4], &ra, 4, G, false)->work),
	    -1);
	FINISH(wa, &ra, 2, 3);
	FINISH(wb, &rb, 3, 1);
}

static void
test_batch_release(void **state)
{
	struct rec r;
	struct item g, it[3];
	struct worker *wk;
	struct worker_batch batch;

	rec_init(&r);
	wk = start_gated(&r, 1, rd(&g, &r, 0, 0));
	worker_batch_init(&batch);
	assert_int_equal(worker_batch_reserve(&batch, wk,
	    &wr(&it[1], &r, 1, P, false)->work), 0);
	assert_int_equal(worker_batch_reserve(&batch, wk,
	    &rd(&it[2], &r, 2, 0)->work), 0);
	worker_batch_release(&batch);
	put(wk, wr(&it[1], &r, 1, P, false));
	put(wk, rd(&it[2], &r, 2, 0));
	FINISH(wk, &r, 2, 1);
}


/* --- merging reads --------------------------------------------------------- */

/*
 * Every item that completed got its answer from an exec that began after
 * it was submitted (a joined read too), with that exec's rc.
 */
static void
check_fresh(struct item *it, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		assert_true(it[i].done);
		assert_true(it[i].value > it[i].arrived);
	}
}

static void
test_reads_merge(void **state)
{
	struct rec r;
	struct item g, it[5];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	put(wk, mrd(&it[1], &r, 1, 0, 10));
	put(wk, mrd(&it[2], &r, 2, 0, 10));	/* joins 1 */
	put(wk, mrd(&it[3], &r, 3, 0, 20));
	put(wk, mrd(&it[4], &r, 4, 0, 10));	/* joins 1 */
	FINISH(wk, &r, 1, 3);			/* 2 and 4 never ran */
	/* each joined read completed right after the one it joined */
	assert_int_equal(r.ncompleted, 5);
	assert_int_equal(r.completed[1], 1);
	assert_int_equal(r.completed[2], 2);
	assert_int_equal(r.completed[3], 4);
	assert_int_equal(r.completed[4], 3);
	assert_int_equal(it[2].value, it[1].value);
	assert_int_equal(it[4].value, it[1].value);
	assert_int_not_equal(it[3].value, it[1].value);
	check_fresh(&it[1], 4);
	assert_int_equal(atomic_load(&counters.merged), 2);
	/* the joined reads are not commands run */
	assert_int_equal(atomic_load(&counters.commands), 3);
}

/* A running read is not joined: its value may predate the new read. */
static void
test_running_read_not_joined(void **state)
{
	struct rec r;
	struct item g, it[2];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, mrd(&g, &r, 0, 0, 10));
	put(wk, mrd(&it[1], &r, 1, 0, 10));
	FINISH(wk, &r, 1);
	assert_int_not_equal(it[1].value, g.value);
	check_fresh(&it[1], 1);
	assert_int_equal(atomic_load(&counters.merged), 0);
}

/* Read-after-write: a read never joins one queued before its write. */
static void
test_merge_not_across_dependent_write(void **state)
{
	struct rec r;
	struct item g, it[6];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	put(wk, mrd(&it[1], &r, 1, P, 10));
	put(wk, wr(&it[2], &r, 2, P, false));
	put(wk, mrd(&it[3], &r, 3, P, 10));	/* must see 2: queued */
	put(wk, mrd(&it[4], &r, 4, P, 10));	/* joins 3, not 1 */
	put(wk, wr(&it[5], &r, 5, S, false));
	put(wk, mrd(&it[0], &r, 6, P, 10));	/* 5 is not its: joins 3 */
	FINISH(wk, &r, 1, 2, 3, 5);
	assert_int_equal(it[4].value, it[3].value);
	assert_int_equal(it[0].value, it[3].value);
	assert_int_not_equal(it[3].value, it[1].value);
	check_fresh(&it[0], 5);
	assert_int_equal(atomic_load(&counters.merged), 2);
}

/* A read that needs no write joins a read queued ahead of writes. */
static void
test_merge_ahead_of_unrelated_write(void **state)
{
	struct rec r;
	struct item g, it[3];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	put(wk, mrd(&it[1], &r, 1, 0, 10));
	put(wk, wr(&it[2], &r, 2, P, false));
	put(wk, mrd(&it[0], &r, 3, 0, 10));	/* joins 1 */
	FINISH(wk, &r, 1, 2);
	assert_int_equal(it[0].value, it[1].value);
	check_fresh(&it[0], 3);
	assert_int_equal(atomic_load(&counters.merged), 1);
}

/* A joined read gives its room back; reads without `same` never merge. */
static void
test_merged_read_takes_no_room(void **state)
{
	struct rec r;
	struct item g, it[6];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 2, rd(&g, &r, 0, 0));
	put(wk, mrd(&it[1], &r, 1, 0, 10));
	put(wk, mrd(&it[2], &r, 2, 0, 10));	/* joins: 1 read queued */
	put(wk, mrd(&it[3], &r, 3, 0, 20));	/* room for it */
	/* full now, and a read that would merge needs room to be reserved */
	assert_int_equal(worker_reserve(wk, &mrd(&it[4], &r, 4, 0, 30)->work),
	    -1);
	FINISH(wk, &r, 1, 3);
	assert_int_equal(atomic_load(&counters.merged), 1);

	/* without `same` two reads of one value both run */
	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	put(wk, rd(&it[4], &r, 4, 0));
	put(wk, rd(&it[5], &r, 5, 0));
	FINISH(wk, &r, 4, 5);
	assert_int_equal(atomic_load(&counters.merged), 1);
}

/* A failure is shared too, and counted once, as the one read that ran. */
static void
test_merged_failure(void **state)
{
	struct rec r;
	struct item g, it[3];
	struct worker *wk;

	rec_init(&r);
	wk = start_gated(&r, 16, rd(&g, &r, 0, 0));
	mrd(&it[1], &r, 1, 0, 10)->fail = true;
	put(wk, &it[1]);
	put(wk, mrd(&it[2], &r, 2, 0, 10));
	FINISH(wk, &r, 1);
	assert_int_equal(it[1].rc, -1);
	assert_int_equal(it[2].rc, -1);
	assert_int_equal(it[2].value, it[1].value);
	assert_int_equal(atomic_load(&counters.failures), 1);
	assert_int_equal(atomic_load(&counters.commands), 2);
	assert_int_equal(atomic_load(&counters.merged), 1);
}

static void
nop_gpu_done(struct gpu_cmd *cmd, void *arg)
{
}

static void
nop_cpu_done(struct cpu_cmd *cmd, void *arg)
{
}

/* Which GPU and CPU commands ask the same thing, and what they share. */
static void
test_device_commands_same(void **state)
{
	struct gpu_cmd g[5];
	struct cpu_cmd c[5];
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT };

	memset(g, 0, sizeof(g));
	gpu_cmd_init(&g[0], GPU_CMD_GET_POWER, 0, nop_gpu_done, NULL);
	gpu_cmd_init(&g[1], GPU_CMD_GET_POWER, 0, nop_gpu_done, NULL);
	gpu_cmd_init(&g[2], GPU_CMD_GET_POWER, 1, nop_gpu_done, NULL);
	gpu_cmd_init(&g[3], GPU_CMD_GET_ENERGY, 0, nop_gpu_done, NULL);
	gpu_cmd_init(&g[4], GPU_CMD_WRITE, 0, nop_gpu_done, NULL);
	gpu_cmd_set_write(&g[4], &w, NULL);
	assert_non_null(g[0].work.same);
	assert_true(g[0].work.same(&g[0].work, &g[1].work));
	assert_false(g[0].work.same(&g[0].work, &g[2].work));	/* GPU */
	assert_ptr_equal(g[3].work.same, g[0].work.same);
	assert_false(g[0].work.same(&g[0].work, &g[3].work));	/* op */
	assert_null(g[4].work.same);			/* writes never */
	/* the outcome, value or error, is copied */
	g[0].out.power_mw = 123456;
	g[0].rc = 0;
	g[0].work.share(&g[1].work, &g[0].work, 0);
	assert_int_equal(g[1].out.power_mw, 123456);
	assert_int_equal(g[1].rc, 0);
	g[2].rc = zerr_set(&g[2].err, ZERR_UNAVAILABLE, "GPU 1: lost");
	g[0].work.share(&g[0].work, &g[2].work, -1);
	assert_int_equal(g[0].rc, -1);
	assert_int_equal(g[0].err.kind, ZERR_UNAVAILABLE);
	assert_string_equal(g[0].err.msg, "GPU 1: lost");

	memset(c, 0, sizeof(c));
	cpu_cmd_init(&c[0], CPU_CMD_GET_POWER, 0, nop_cpu_done, NULL);
	cpu_cmd_init(&c[1], CPU_CMD_GET_POWER, 0, nop_cpu_done, NULL);
	cpu_cmd_init(&c[2], CPU_CMD_GET_POWER, 0, nop_cpu_done, NULL);
	cpu_cmd_init(&c[3], CPU_CMD_GET_ENERGY, 0, nop_cpu_done, NULL);
	cpu_cmd_init(&c[4], CPU_CMD_GET_ENERGY, 1, nop_cpu_done, NULL);
	c[0].period_ms = c[1].period_ms = 100;
	c[2].period_ms = 500;
	assert_true(c[0].work.same(&c[0].work, &c[1].work));
	assert_false(c[0].work.same(&c[0].work, &c[2].work));	/* period */
	assert_false(c[0].work.same(&c[0].work, &c[3].work));	/* op */
	assert_false(c[3].work.same(&c[3].work, &c[4].work));	/* package */
	c[0].cpu = 7;
	c[0].dram = 9;
	c[0].has_dram = true;
	c[0].work.share(&c[1].work, &c[0].work, 0);
	assert_int_equal(c[1].cpu, 7);
	assert_int_equal(c[1].dram, 9);
	assert_true(c[1].has_dram);
	assert_int_equal(c[1].rc, 0);
}

/* --- asynchronous batches ------------------------------------------------- */

struct async_rec {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int decline;			/* start returns -1 this many times */
	unsigned nstart, batch_n[8];
	int batch_first[8];
	unsigned ncomplete, nexec;
	int completed[16];
	bool exec_off_main;		/* exec_many ran on another thread */
	pthread_t main;
};

struct aitem {
	struct work work;		/* first */
	int id;
	struct async_rec *rec;
	int key;			/* merging, as struct item's */
	int from;			/* the id of the read that answered */
};

static int
aitem_many(struct work **items, unsigned n, void *device, int *rc)
{
	struct async_rec *r = device;

	pthread_mutex_lock(&r->lock);
	r->nexec += n;
	r->exec_off_main = !pthread_equal(pthread_self(), r->main);
	pthread_mutex_unlock(&r->lock);
	for (unsigned i = 0; i < n; i++)
		rc[i] = 0;
	return 0;
}

static int
aitem_exec(struct work *w, void *device)
{
	int rc;

	(void)aitem_many(&w, 1, device, &rc);
	return rc;
}

static void
aitem_complete(struct work *w)
{
	struct aitem *it = (struct aitem *)w;
	struct async_rec *r = it->rec;

	pthread_mutex_lock(&r->lock);
	if (r->ncomplete < 16)
		r->completed[r->ncomplete] = it->id;
	r->ncomplete++;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static int
async_start(void *ctx, struct work **items, unsigned n)
{
	struct async_rec *r = ctx;
	int rc = 0;

	pthread_mutex_lock(&r->lock);
	if (r->nstart < 8) {
		r->batch_n[r->nstart] = n;
		r->batch_first[r->nstart] = ((struct aitem *)items[0])->id;
	}
	r->nstart++;
	pthread_cond_broadcast(&r->cond);
	if (r->decline > 0) {
		r->decline--;
		rc = -1;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

static struct worker *
async_worker(struct async_rec *r)
{
	struct worker_async a = { .start = async_start, .ctx = r };
	struct worker *wk;
	struct zerr err;

	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->main = pthread_self();
	assert_int_equal(worker_start("async", r, 16, &wk, &err), 0);
	worker_set_async(wk, &a);
	return wk;
}

static bool
aitem_same(const struct work *queued, const struct work *w)
{
	return ((const struct aitem *)queued)->key == ((const struct aitem *)w)->key;
}

static void
aitem_share(struct work *w, const struct work *from, int rc)
{
	((struct aitem *)w)->from = ((const struct aitem *)from)->id;
}

/* Queues a read; with a nonzero `key`, one that merges (as mrd). */
static void
aput_key(struct worker *wk, struct aitem *it, struct async_rec *r, int id,
    int key)
{
	memset(it, 0, sizeof(*it));
	it->id = id;
	it->from = id;
	it->rec = r;
	it->key = key;
	it->work.kind = WORK_READ;
	it->work.what = "read";
	it->work.exec = aitem_exec;
	it->work.exec_many = aitem_many;
	it->work.complete = aitem_complete;
	if (key != 0) {
		it->work.counters = &counters;
		it->work.same = aitem_same;
		it->work.share = aitem_share;
	}
	assert_int_equal(worker_reserve(wk, &it->work), 0);
	worker_submit(wk, &it->work);
}

static void
aput(struct worker *wk, struct aitem *it, struct async_rec *r, int id)
{
	aput_key(wk, it, r, id, 0);
}

static void
wait_completed(struct async_rec *r, unsigned n)
{
	pthread_mutex_lock(&r->lock);
	while (r->ncomplete < n)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

static void
async_end(struct worker *wk, struct async_rec *r)
{
	worker_stop(wk);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
}

/*
 * The submitting thread starts the batch; what arrives meanwhile waits and
 * goes out as one batch when the first is done; the thread runs nothing.
 */
static void
test_async_started_by_submitter(void **state)
{
	struct async_rec r;
	struct aitem it[4];
	struct worker *wk = async_worker(&r);
	const int ok[4] = { 0, 0, 0, 0 };

	aput(wk, &it[1], &r, 1);
	assert_int_equal(r.nstart, 1);		/* at once, on this thread */
	assert_int_equal(r.batch_n[0], 1);
	aput(wk, &it[2], &r, 2);
	aput(wk, &it[3], &r, 3);
	assert_int_equal(r.nstart, 1);		/* one batch out at a time */
	assert_int_equal(r.ncomplete, 0);
	worker_async_done(wk, ok);
	assert_int_equal(r.ncomplete, 1);
	assert_int_equal(r.completed[0], 1);
	assert_int_equal(r.nstart, 2);		/* the rest, together */
	assert_int_equal(r.batch_n[1], 2);
	assert_int_equal(r.batch_first[1], 2);
	worker_async_done(wk, ok);
	assert_int_equal(r.ncomplete, 3);
	assert_int_equal(r.nexec, 0);		/* no thread hop at all */
	async_end(wk, &r);
}

/* A batch handed back (or declined) runs on the worker's thread. */
static void
test_async_handed_to_thread(void **state)
{
	struct async_rec r;
	struct aitem it[4];
	struct worker *wk = async_worker(&r);
	const int ok[4] = { 0, 0, 0, 0 };

	aput(wk, &it[1], &r, 1);
	aput(wk, &it[2], &r, 2);		/* waits behind 1 */
	worker_async_done(wk, NULL);		/* 1 goes to the thread */
	wait_completed(&r, 1);
	assert_int_equal(r.nexec, 1);
	assert_true(r.exec_off_main);
	/* the thread, once done, started the next batch itself */
	pthread_mutex_lock(&r.lock);
	while (r.nstart < 2)
		pthread_cond_wait(&r.cond, &r.lock);
	pthread_mutex_unlock(&r.lock);
	worker_async_done(wk, ok);
	wait_completed(&r, 2);

	r.decline = 1;				/* start says no: the thread */
	aput(wk, &it[3], &r, 3);
	wait_completed(&r, 3);
	assert_int_equal(r.nexec, 2);
	async_end(wk, &r);
}

/*
 * The batch out has started: a read of the same value waits for the next
 * one, and the reads that join it complete with it, from the batch's
 * answer (the loop's path in a split daemon).
 */
static void
test_async_merged(void **state)
{
	struct async_rec r;
	struct aitem it[5];
	struct worker *wk = async_worker(&r);
	const int ok[4] = { 0, 0, 0, 0 };

	aput_key(wk, &it[1], &r, 1, 10);	/* out at once */
	aput_key(wk, &it[2], &r, 2, 10);	/* 1 started: queued */
	aput_key(wk, &it[3], &r, 3, 10);	/* joins 2 */
	aput_key(wk, &it[4], &r, 4, 10);	/* joins 2 */
	assert_int_equal(atomic_load(&counters.merged), 0);	/* not yet */
	worker_async_done(wk, ok);
	assert_int_equal(r.ncomplete, 1);
	assert_int_equal(r.nstart, 2);
	assert_int_equal(r.batch_n[1], 1);	/* 2 alone goes out */
	assert_int_equal(r.batch_first[1], 2);
	worker_async_done(wk, ok);
	assert_int_equal(r.ncomplete, 4);
	assert_int_equal(r.completed[1], 2);
	assert_int_equal(r.completed[2], 3);
	assert_int_equal(r.completed[3], 4);
	assert_int_equal(it[1].from, 1);
	assert_int_equal(it[2].from, 2);
	assert_int_equal(it[3].from, 2);
	assert_int_equal(it[4].from, 2);
	assert_int_equal(atomic_load(&counters.merged), 2);
	assert_int_equal(r.nexec, 0);
	async_end(wk, &r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_reads_skip_writes_they_do_not_need,
		    setup),
		cmocka_unit_test_setup(test_read_after_write_of_its_setting,
		    setup),
		cmocka_unit_test_setup(test_reads_alone_stay_fifo, setup),
		cmocka_unit_test_setup(test_supersede_in_place, setup),
		cmocka_unit_test_setup(
		    test_blocking_write_supersedes_nonblocking, setup),
		cmocka_unit_test_setup(test_blocking_write_never_superseded,
		    setup),
		cmocka_unit_test_setup(test_running_write_not_superseded,
		    setup),
		cmocka_unit_test_setup(
		    test_later_writer_of_setting_blocks_supersede, setup),
		cmocka_unit_test_setup(test_supersede_needs_subset, setup),
		cmocka_unit_test_setup(test_supersede_past_unrelated_items,
		    setup),
		cmocka_unit_test_setup(test_bound_per_kind, setup),
		cmocka_unit_test_setup(test_unbounded_never_refused, setup),
		cmocka_unit_test_setup(test_room_comes_back, setup),
		cmocka_unit_test_setup(test_room_freed_when_item_starts, setup),
		cmocka_unit_test_setup(test_batch_all_or_nothing, setup),
		cmocka_unit_test_setup(test_batch_release, setup),
		cmocka_unit_test_setup(test_reads_merge, setup),
		cmocka_unit_test_setup(test_running_read_not_joined, setup),
		cmocka_unit_test_setup(test_merge_not_across_dependent_write,
		    setup),
		cmocka_unit_test_setup(test_merge_ahead_of_unrelated_write,
		    setup),
		cmocka_unit_test_setup(test_merged_read_takes_no_room, setup),
		cmocka_unit_test_setup(test_merged_failure, setup),
		cmocka_unit_test_setup(test_async_merged, setup),
		cmocka_unit_test_setup(test_device_commands_same, setup),
		cmocka_unit_test_setup(test_async_started_by_submitter, setup),
		cmocka_unit_test_setup(test_async_handed_to_thread, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
