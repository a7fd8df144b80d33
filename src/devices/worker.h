/*
 * worker.h - one thread per device that runs queued work items in arrival
 * order. The hardware is serial anyway; a per-device thread means a slow
 * operation on one GPU never delays another, and requests on the HTTP loop
 * never block on a device.
 */
#ifndef ZEUS_WORKER_H
#define ZEUS_WORKER_H

#include <stdatomic.h>
#include <time.h>

#include "../common/err.h"

struct worker;

/* Per-device tallies, bumped by whichever thread ran the command. */
struct work_counters {
	atomic_ulong commands, failures;
};

struct work {
	struct work *next;
	struct timespec queued;		/* set by worker_submit */
	const char *what;		/* operation name for the log */
	struct work_counters *counters;	/* may be NULL */
	/*
	 * Both run on the worker thread: `exec` does the device operation
	 * and returns 0 or -1 (timed and counted); `complete` then hands the
	 * result back and may free the item.
	 */
	int (*exec)(struct work *w, void *device);
	void (*complete)(struct work *w);
};

/* Starts a worker for `device`; `label` (e.g. "gpu0") names it in logs. */
int worker_start(const char *label, void *device, struct worker **out,
    struct zerr *err);

/* Queues `w` (never blocks on the device). */
void worker_submit(struct worker *wk, struct work *w);

/* Runs everything already queued, then stops the thread and frees. */
void worker_stop(struct worker *wk);

#endif
