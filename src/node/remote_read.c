/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remote_read.c - the shared readers' batches sent from the thread that
 * queued them and answered on the HTTP loop (see remote_read.h).
 *
 * Without this, a batch of reads costs, on top of the round trip to the
 * device process, a wake-up of the reader's thread and a wake-up of the
 * loop that the reader resumes. Here the thread that queues the batch (the
 * loop, for every request) sends it, and the loop, which watches the
 * channel, reads the reply and resumes the requests itself.
 *
 * Only what the reply answers by itself is finished here: every GPU's power
 * read, or every package's counters read and accepted by the network
 * process's RAPL core (in order: a package whose counters another thread is
 * reading right now is not waited for). One failed GPU takes the reply's
 * error, as psgpu_get_power_many does. Anything else (two failed GPUs, a
 * failed package, whose error only the per-device read words; a package
 * busy or refused) hands the batch to the reader's thread, which runs it
 * exactly as before: the slow path is the old path.
 */
#include "node/remote_read.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "devices/cpu_cmd.h"
#include "devices/gpu_cmd.h"
#include "devices/rapl.h"
#include "devices/worker.h"
#include "privsep/chan.h"
#include "privsep/msg.h"
#include "privsep/remote_gpu.h"
#include "privsep/remote_rapl.h"
#include "node/node.h"
#include "common/loop.h"

struct remote_reader {
	struct node *node;
	struct worker *wk;
	struct pschan_async ch;
	bool gpu;			/* the power reader, else energy */
	struct work **items;		/* the batch out (the worker's) */
	unsigned n;
};

struct remote_reads {
	struct remote_reader r[2];
};

/* worker_async's start: the batch as one PSMSG_SAMPLE, not waited for */
static int
remote_start(void *ctx, struct work **items, unsigned n)
{
	struct remote_reader *r = ctx;
	struct psmsg_request req;

	psmsg_request_init(&req, PSMSG_SAMPLE, 0);
	for (unsigned i = 0; i < n; i++) {
		const struct gpu_cmd *g = (const struct gpu_cmd *)items[i];
		const struct cpu_cmd *c = (const struct cpu_cmd *)items[i];

		if (r->gpu ? g->op != GPU_CMD_GET_POWER ||
		    g->gpu >= r->node->ngpu : c->op != CPU_CMD_GET_ENERGY ||
		    c->pkg >= r->node->ncpu)
			return -1;
		if (r->gpu)
			req.gpu_mask |= UINT64_C(1) << g->gpu;
		else
			req.pkg_mask |= UINT64_C(1) << c->pkg;
	}
	r->items = items;
	r->n = n;
	pschan_async_send(&r->ch, &req);
	return 0;
}

/* The power reads from the reply; -1: for the thread. */
static int
remote_gpu_apply(struct remote_reader *r, const struct psmsg_reply *rep,
    int *rc)
{
	unsigned failed = 0;

	psgpu_note_sample(&r->node->gpu, rep);
	for (unsigned i = 0; i < r->n; i++) {
		const struct gpu_cmd *cmd = (const struct gpu_cmd *)r->items[i];

		if (!(rep->gpu_ok >> cmd->gpu & 1))
			failed++;
	}
	if (failed > 1)
		return -1;
	for (unsigned i = 0; i < r->n; i++) {
		struct gpu_cmd *cmd = (struct gpu_cmd *)r->items[i];

		if (rep->gpu_ok >> cmd->gpu & 1) {
			cmd->rc = 0;
			cmd->out.power_mw = rep->gpu_mw[cmd->gpu];
		} else
			cmd->rc = zerr_set(&cmd->err,
			    (enum zerr_kind)rep->err_gpu_kind, "%s",
			    rep->err_msg);
		rc[i] = cmd->rc;
	}
	return 0;
}

/* The energy reads from the reply; -1: for the thread. */
static int
remote_cpu_apply(struct remote_reader *r, const struct psmsg_reply *rep,
    int *rc)
{
	struct rapl *rapl = r->node->rapl;
	uint64_t mask = 0, cpu[PSMSG_MAX_PKGS], dram[PSMSG_MAX_PKGS];

	for (unsigned i = 0; i < r->n; i++)
		mask |= UINT64_C(1) << ((const struct cpu_cmd *)
		    r->items[i])->pkg;
	if ((rep->pkg_ok & mask) != mask)
		return -1;
	/* packages in index order, as every batch of the RAPL core goes */
	for (uint64_t m = mask; m != 0; m &= m - 1) {
		unsigned p = (unsigned)__builtin_ctzll(m);
		struct rapl_raw_sample raw;

		psrapl_raw_of(rep, p, &raw);
		if (rapl_apply_try(rapl, p, &raw, &cpu[p], &dram[p]) != 0)
			return -1;
	}
	for (unsigned i = 0; i < r->n; i++) {
		struct cpu_cmd *cmd = (struct cpu_cmd *)r->items[i];

		rc[i] = cpu_cmd_energy_result(cmd, rapl, cpu[cmd->pkg],
		    dram[cmd->pkg]);
	}
	return 0;
}

/* The loop: the reader's channel is readable. */
static void
remote_ready(void *ctx)
{
	struct remote_reader *r = ctx;
	struct psmsg_reply rep;
	int rc[WORKER_BATCH_MAX];

	if (pschan_async_recv(&r->ch, &rep) != 0)
		return;
	if ((r->gpu ? remote_gpu_apply(r, &rep, rc) :
	    remote_cpu_apply(r, &rep, rc)) != 0)
		worker_async_done(r->wk, NULL);
	else
		worker_async_done(r->wk, rc);
}

static int
remote_reader_attach(struct remote_reader *r, struct node *node,
    struct worker *wk, bool gpu, struct loop *loop, struct zerr *err)
{
	struct worker_async a = {
		.start = remote_start,
		.ctx = r,
	};

	r->node = node;
	r->wk = wk;
	r->gpu = gpu;
	if (pschan_async_open(node->pool, &r->ch, err) != 0 ||
	    loop_watch(loop, r->ch.fd, remote_ready, r, err) != 0)
		return -1;
	worker_set_async(wk, &a);
	return 0;
}

int
remote_read_attach(struct node *node, struct loop *loop,
    struct remote_reads **out, struct zerr *err)
{
	struct remote_reads *rr;

	*out = NULL;
	if ((rr = calloc(1, sizeof(*rr))) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	*out = rr;		/* freed after node_close, even on failure */
	if (node->gpu_power_reader != NULL && remote_reader_attach(&rr->r[0],
	    node, node->gpu_power_reader, true, loop, err) != 0)
		return -1;
	if (node->cpu_energy_reader != NULL && remote_reader_attach(&rr->r[1],
	    node, node->cpu_energy_reader, false, loop, err) != 0)
		return -1;
	return 0;
}

void
remote_read_free(struct remote_reads *rr)
{
	free(rr);		/* the channels are the pool's to close */
}
