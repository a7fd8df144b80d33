/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remote_write.c - the GPU workers' waited-for writes sent from the thread
 * that queued them and answered on the HTTP loop (see remote_write.h).
 *
 * What the worker's thread would do for such a batch (gpu_cmd.c's
 * gpu_cmd_write_many over privsep/remote_gpu.c) is one message and its
 * reply: here the message is sent by whoever queued the batch (the loop,
 * for every request) and the loop, which watches the channel, applies the
 * reply: each write's outcome, the GPU's lost flag, and the time the batch
 * took, which sizes the next batches. The device process decides and
 * audits each write exactly as when the thread sent it.
 */
#include "node/remote_write.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/loop.h"
#include "devices/gpu_cmd.h"
#include "devices/worker.h"
#include "node/node.h"
#include "privsep/chan.h"
#include "privsep/msg.h"
#include "privsep/remote_gpu.h"

struct remote_writer {
	struct node *node;
	struct worker *wk;
	unsigned gpu;
	struct pschan_async ch;
	struct work **items;		/* the batch out (the worker's) */
	unsigned n;
	uint64_t sent_ns;
};

struct remote_writes {
	unsigned ngpu;
	struct remote_writer w[];	/* [ngpu] */
};

/* worker_async's start: the batch as one message, not waited for */
static int
remote_write_start(void *ctx, struct work **items, unsigned n)
{
	struct remote_writer *r = ctx;
	struct psmsg_request one;
	/* 41 KiB on the caller's stack, as psgpu_write_many has it */
	struct psmsg_writes many;

	if (n > PSMSG_WRITES_MAX)
		return -1;
	for (unsigned i = 0; i < n; i++)
		if (!gpu_cmd_is_waited_write(items[i]) ||
		    ((const struct gpu_cmd *)items[i])->gpu != r->gpu)
			return -1;
	r->items = items;
	r->n = n;
	r->sent_ns = zclock_now_ns();
	if (n == 1) {
		psmsg_request_init(&one, PSMSG_GPU_WRITE, 0);
		psgpu_write_fields(&one,
		    &((const struct gpu_cmd *)items[0])->write);
		one.dev = r->gpu;
		pschan_async_send(&r->ch, &one);
		return 0;
	}
	psmsg_writes_init(&many, n, r->gpu);
	for (unsigned i = 0; i < n; i++)
		psgpu_write_fields(&many.w[i],
		    &((const struct gpu_cmd *)items[i])->write);
	pschan_async_send_writes(&r->ch, &many);
	return 0;
}

/* The loop: the writer's channel is readable. */
static void
remote_write_ready(void *ctx)
{
	struct remote_writer *r = ctx;
	/* 33 KiB on the loop's stack, as pschan_call_writes has it */
	struct psmsg_writes_reply rep;
	struct zerr *errs[WORKER_BATCH_MAX];
	int rc[WORKER_BATCH_MAX];

	if (pschan_async_recv_writes(&r->ch, &rep) != 0)
		return;
	/* rep.n == r->n: the reply was checked against what was sent */
	for (unsigned i = 0; i < r->n; i++)
		errs[i] = &((struct gpu_cmd *)r->items[i])->err;
	psgpu_writes_done(&r->node->gpu, r->gpu, &rep, r->sent_ns, rc, errs);
	for (unsigned i = 0; i < r->n; i++)
		rc[i] = gpu_cmd_set_result((struct gpu_cmd *)r->items[i], rc[i]);
	worker_async_done(r->wk, rc);
}

unsigned
remote_write_channels(const struct node *node)
{
	return node->ngpu;
}

int
remote_write_attach(struct node *node, struct loop *loop,
    struct remote_writes **out, struct zerr *err)
{
	struct remote_writes *rw;

	*out = NULL;
	if (remote_write_channels(node) == 0)
		return 0;
	rw = calloc(1, sizeof(*rw) + node->ngpu * sizeof(rw->w[0]));
	if (rw == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	*out = rw;		/* freed after node_close, even on failure */
	rw->ngpu = node->ngpu;
	for (unsigned i = 0; i < rw->ngpu; i++) {
		struct remote_writer *r = &rw->w[i];
		struct worker_async a = {
			.start = remote_write_start,
			.ctx = r,
		};

		r->node = node;
		r->wk = node->gpu_workers[i];
		r->gpu = i;
		if (pschan_async_open(node->pool, &r->ch, err) != 0 ||
		    loop_watch(loop, r->ch.fd, remote_write_ready, r,
		    err) != 0)
			return -1;
		worker_set_async(r->wk, &a);
	}
	return 0;
}

void
remote_write_free(struct remote_writes *rw)
{
	free(rw);		/* the channels are the pool's to close */
}
