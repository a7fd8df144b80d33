/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batch.h - the shape of every request that reads or writes devices: one
 * command per device, held in handler state attached to the request; room
 * for all of them reserved on the node's bounded queues before any is
 * queued (a full queue answers 503 with Retry-After and nothing of the
 * request runs); then the request deferred and the commands queued
 * together, and `finish` answering on the loop thread once the last one has
 * completed, with {"errors": {...}} (docs/api.md) when any failed.
 *
 *	b = batch_state(req, size, free);	// NULL: answered 500
 *	batch_init(&bt, req);
 *	for each device: prepare the command, batch_add_gpu/cpu (-1: answered)
 *	batch_run(&bt, finish);
 */
#ifndef ZEUS_BATCH_H
#define ZEUS_BATCH_H

#include <stddef.h>

#include "devices/worker.h"

struct request;
struct gpu_cmd;
struct cpu_cmd;
struct pool_job;

struct batch {
	struct request *req;
	struct worker_batch wb;		/* the reservations so far */
	unsigned n;			/* commands reserved */
	struct pool_job *job;		/* batch_add_job's, or NULL */
};

/*
 * `size` zeroed bytes made the request's handler state, freed with
 * `hctx_free` when the request ends; NULL (after answering 500) when out of
 * memory.
 */
void *batch_state(struct request *req, size_t size,
    void (*hctx_free)(void *hctx));

void batch_init(struct batch *b, struct request *req);

/*
 * Reserves room for a prepared command on the queue node.h picks for it.
 * When that queue is full, everything the batch held is released, the
 * request is answered 503 (naming the queue) and -1 returned: the handler
 * just returns.
 */
int batch_add_gpu(struct batch *b, struct gpu_cmd *cmd);
int batch_add_cpu(struct batch *b, struct cpu_cmd *cmd);

/*
 * Adds one blocking call to run on the look-up pool (ctx.lookups,
 * common/pool.h) alongside the commands, as one more completion: its `run`
 * must end with request_complete_one(b->req). With the pool's queue full
 * it does not run, and the request goes on without it. At most one.
 */
void batch_add_job(struct batch *b, struct pool_job *job);

/*
 * Once every command is reserved: defers the request, queues the commands
 * and `finish` runs when the last has completed; with no commands at all,
 * `finish` runs at once.
 */
void batch_run(struct batch *b, void (*finish)(struct request *req));

/*
 * For commands nobody waits for (block=false writes, which free
 * themselves): batch_queue queues every reserved one without deferring
 * the request, batch_cancel gives the reservations back.
 */
void batch_queue(struct batch *b);
void batch_cancel(struct batch *b);

/* The completion of a command whose request only counts it down. */
void batch_gpu_done(struct gpu_cmd *cmd, void *req);
void batch_cpu_done(struct cpu_cmd *cmd, void *req);

/*
 * When any of the finished commands failed, answers {"errors": {...}},
 * keyed by GPU index or RAPL package id, with the worst status, and
 * returns 1; otherwise returns 0 and the caller answers.
 */
int batch_gpu_errors(struct request *req, const struct gpu_cmd *cmds,
    unsigned n);
int batch_cpu_errors(struct request *req, const struct cpu_cmd *cmds,
    unsigned n);

#endif
