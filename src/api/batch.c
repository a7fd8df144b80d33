/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batch.c - one command per device, reserved all or nothing, answered
 * together (see batch.h).
 */
#include "api/batch.h"

#include <stdlib.h>

#include "devices/cpu_cmd.h"
#include "devices/gpu_cmd.h"
#include "api/handlers_util.h"
#include "node/node.h"
#include "common/pool.h"
#include "http/ctx.h"
#include "http/request.h"

void *
batch_state(struct request *req, size_t size, void (*hctx_free)(void *hctx))
{
	void *p = calloc(1, size);

	if (p == NULL) {
		handlers_reply_oom(req);
		return NULL;
	}
	req->hctx = p;
	req->hctx_free = hctx_free;
	return p;
}

void
batch_init(struct batch *b, struct request *req)
{
	b->req = req;
	b->n = 0;
	b->job = NULL;
	worker_batch_init(&b->wb);
}

/* The node already released the batch when `rc` says the queue is full. */
static int
batch_reserved(struct batch *b, int rc, const struct zerr *err)
{
	if (rc != 0) {
		b->n = 0;
		request_reply_busy(b->req, err);
		return -1;
	}
	b->n++;
	return 0;
}

int
batch_add_gpu(struct batch *b, struct gpu_cmd *cmd)
{
	struct zerr err;

	return batch_reserved(b, node_gpu_reserve(request_node(b->req), &b->wb,
	    cmd, &err), &err);
}

int
batch_add_cpu(struct batch *b, struct cpu_cmd *cmd)
{
	struct zerr err;

	return batch_reserved(b, node_cpu_reserve(request_node(b->req), &b->wb,
	    cmd, &err), &err);
}

void
batch_add_job(struct batch *b, struct pool_job *job)
{
	b->job = job;
}

void
batch_run(struct batch *b, void (*finish)(struct request *req))
{
	struct pool_job *job = b->job;

	if (b->n == 0 && job == NULL) {
		finish(b->req);
		return;
	}
	/* before queueing: a command may complete before submit returns */
	request_defer(b->req, b->n + (job != NULL), finish);
	batch_queue(b);
	b->job = NULL;
	/* a full pool: the job's part of the answer is left out */
	if (job != NULL && pool_submit(b->req->ctx->lookups, job) != 0)
		request_complete_one(b->req);
}

void
batch_queue(struct batch *b)
{
	worker_batch_submit(&b->wb);
	b->n = 0;
}

void
batch_cancel(struct batch *b)
{
	worker_batch_release(&b->wb);
	b->n = 0;
}

void
batch_gpu_done(struct gpu_cmd *cmd, void *req)
{
	request_complete_one(req);
}

void
batch_cpu_done(struct cpu_cmd *cmd, void *req)
{
	request_complete_one(req);
}

int
batch_gpu_errors(struct request *req, const struct gpu_cmd *cmds,
    unsigned n)
{
	struct handlers_errors agg;

	handlers_errors_init(&agg);
	for (unsigned i = 0; i < n; i++)
		if (cmds[i].rc != 0)
			handlers_errors_add(&agg, cmds[i].gpu, &cmds[i].err);
	return handlers_errors_reply(req, &agg);
}

int
batch_cpu_errors(struct request *req, const struct cpu_cmd *cmds,
    unsigned n)
{
	const struct node *node = request_node(req);
	struct handlers_errors agg;

	handlers_errors_init(&agg);
	for (unsigned i = 0; i < n; i++)
		if (cmds[i].rc != 0)
			handlers_errors_add(&agg,
			    rapl_package_id(node->rapl, cmds[i].pkg),
			    &cmds[i].err);
	return handlers_errors_reply(req, &agg);
}
