/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker.h - one thread per device that runs queued work items, one at a
 * time. The hardware is serial anyway; a per-device thread means a slow
 * operation on one GPU never delays another, and requests on the HTTP loop
 * never block on a device.
 *
 * The queue is bounded and ordered by what the items touch, not only by
 * arrival (docs/design.md, "Device queues"):
 *
 *  - Reads and writes each have their own bound (`max` queued items of each
 *    kind, not counting the one running), so a queue full of writes never
 *    refuses a read. Room is reserved before anything is queued, so a
 *    request that spans several devices is queued everywhere or nowhere
 *    (struct worker_batch).
 *  - A read goes ahead of every queued write it does not depend on, but
 *    after the last one it does (`depends` against `touches`), and after the
 *    reads in front of that point: read-after-write holds for the settings
 *    a read returns, and a backlog of writes never starves a read.
 *  - A write replaces queued, not yet started, supersedable writes whose
 *    settings it covers, when nothing queued after them touches or reads
 *    those settings; only the last value of a setting matters, so a client
 *    that repeats a write cannot build a backlog.
 *  - A read joins a queued, not yet started read that asks the same thing
 *    (`same`), when no queued write it depends on lies between: it is not
 *    run and takes no room, and gets the outcome of the read it joined,
 *    which is read after both arrived. Many clients polling one value cost
 *    one device read per round, not one each.
 *
 * The worker knows nothing of GPUs or CPUs: settings are bits of a mask
 * that gpu_cmd.c / cpu_cmd.c choose.
 */
#ifndef ZEUS_WORKER_H
#define ZEUS_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

struct worker;

#define WORKER_BATCH_MAX 64

/* Per-device tallies, bumped by whichever thread ran the command. */
struct work_counters {
	atomic_ulong commands, failures;
	atomic_ulong superseded;	/* dropped for a newer write */
	atomic_ulong merged;		/* reads that joined a queued read */
};

enum work_kind { WORK_READ, WORK_WRITE };

struct work {
	struct work *next;		/* the worker's queue */
	struct work *batch_next;	/* struct worker_batch */
	struct worker *reserved_on;	/* set by worker_reserve */
	int reservation;		/* worker.c's */
	uint64_t queued_ns;		/* set by worker_submit */
	const char *what;		/* operation name for the log */
	struct work_counters *counters;	/* may be NULL */
	enum work_kind kind;
	unsigned touches;		/* WORK_WRITE: settings it changes */
	unsigned depends;		/* WORK_READ: settings it returns */
	/*
	 * WORK_WRITE only: nobody waits for the result (block=false), so a
	 * newer write covering `touches` may replace the item while it is
	 * queued. `drop` is then called instead of exec/complete, on the
	 * thread that submitted the newer write, and may free the item.
	 */
	bool supersedable;
	void (*drop)(struct work *w);
	/*
	 * Room is never refused (worker_reserve), whatever is queued: for
	 * the few items that must not be skippable and that the daemon
	 * bounds itself (a lease's restore, lease.c: at most one per setting
	 * per GPU at a time), never for a client's request. Counted like any
	 * other item while queued, so clients find the queue fuller.
	 */
	bool unbounded;
	/*
	 * Both run on the worker thread: `exec` does the device operation
	 * and returns 0 or -1 (timed and counted); `complete` then hands the
	 * result back and may free the item.
	 */
	int (*exec)(struct work *w, void *device);
	/*
	 * Optional: items with the same exec_many that sit together at the
	 * head of the queue run in one call (at most WORKER_BATCH_MAX), which
	 * sets rc[i] as exec would have returned for items[i]. For reads a
	 * device can answer together (every GPU's power in one request to
	 * the device process of a split daemon); each item is then counted
	 * and completed as if it had run alone.
	 */
	int (*exec_many)(struct work **items, unsigned n, void *device,
	    int *rc);
	/*
	 * Optional, with exec_many: how many items may run in one call
	 * behind this one (at least 1; WORKER_BATCH_MAX at most counts).
	 * What a batch costs is what an item queued behind it waits, so a
	 * device whose items take long says 1 here.
	 */
	unsigned (*many_max)(const struct work *first, void *device);
	void (*complete)(struct work *w);
	/*
	 * Optional, WORK_READ only: merging. A read submitted while a queued,
	 * not yet started read `q` with the same `same` function answers
	 * `same(q, w)` (same operation, device and arguments), and no queued
	 * write that `w` depends on follows `q`, joins `q` instead of being
	 * queued: it takes no room (its reservation is released) and is not
	 * run. Once `q` has run, `share(w, q, rc)` copies q's outcome into
	 * `w` (before q completes: q may then be freed); `w` is counted in
	 * counters->merged (not in commands or failures) and completed right
	 * after `q`, on the same thread. Every joined read's value was thus
	 * read after it arrived. NULL `same`: never merged.
	 */
	bool (*same)(const struct work *queued, const struct work *w);
	void (*share)(struct work *w, const struct work *from, int rc);
	struct work *joined;		/* worker.c's: the reads that joined */
};

/*
 * Starts a worker for `device`; `label` (e.g. "gpu0") names it in logs, and
 * at most `max` reads and `max` writes may be queued at once (max >= 1).
 */
int worker_start(const char *label, void *device, unsigned max,
    struct worker **out, struct zerr *err);

/* The bound given to worker_start. */
unsigned worker_max(const struct worker *wk);

/*
 * Reserves room for `w` (its kind, masks and supersedable flag set) and
 * returns 0, or returns -1 when `max` items of its kind are already queued
 * or reserved (never for an `unbounded` item). A write that would replace
 * a queued one needs no room and is accepted even then. Follow with
 * worker_submit or worker_unreserve.
 */
int worker_reserve(struct worker *wk, struct work *w);
void worker_unreserve(struct worker *wk, struct work *w);

/*
 * Queues `w`, which holds a reservation on `wk` (never blocks on the
 * device). Items it supersedes are dropped before this returns.
 */
void worker_submit(struct worker *wk, struct work *w);

/*
 * All-or-nothing reservations across several workers: reserve every item of
 * a request, then submit them together. On a full queue the batch releases
 * what it holds, so nothing of the request is queued.
 */
struct worker_batch {
	struct work *head, *tail;
};

void worker_batch_init(struct worker_batch *b);
/* 0, or -1 when `wk` is full (the whole batch is then released). */
int worker_batch_reserve(struct worker_batch *b, struct worker *wk,
    struct work *w);
void worker_batch_release(struct worker_batch *b);
/* Submits every item, in the order they were reserved; empties `b`. */
void worker_batch_submit(struct worker_batch *b);

/*
 * Asynchronous batches (optional; set once, before anything is submitted).
 * Where a worker's device can take a request now and answer it later (the
 * shared readers of a split daemon's network process, whose answer comes
 * back on the HTTP loop), the thread hop is a waste: when the worker is
 * idle, the submitting thread pops the batch at the head itself and hands
 * it to `start` (items as exec_many would get them). `start` returns 0 when
 * it took the batch; whoever learns the outcome then calls
 * worker_async_done exactly once. -1: the worker thread runs the batch, as
 * it would have without this. One batch is out at a time, as with the
 * thread, and queue order, bounds and superseding are unchanged.
 */
struct worker_async {
	int (*start)(void *ctx, struct work **items, unsigned n);
	void *ctx;
};

void worker_set_async(struct worker *wk, const struct worker_async *a);

/*
 * The outcome of the batch `start` took: `rc` (rc[i] for items[i], whose
 * results are set as exec_many would have set them) completes every item
 * and starts the next batch; rc NULL hands the batch to the worker thread,
 * which runs it the usual way (when the quick answer was not good enough,
 * say a failure whose error only the slow path words).
 */
void worker_async_done(struct worker *wk, const int *rc);

/* Runs everything already queued, then stops the thread and frees. */
void worker_stop(struct worker *wk);

#endif
