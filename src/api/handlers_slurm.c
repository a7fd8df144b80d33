/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_slurm.c - what zeus_spank.so, as root in slurmstepd, tells
 * zeusd about the Slurm job steps on this node (docs/slurm.md, "Confining
 * jobs to their GPUs"; docs/api.md):
 *   POST /slurm/step_start?job=J&step=S&uid=U&gpu_ids=0,1
 *                             step J.S of user U holds those GPUs
 *   POST /slurm/step_end?job=J&step=S
 *                             it ended
 * Root on the Unix socket only: refused here for anyone else, and again
 * by the device process, which keeps the table, finds the step's cgroup
 * from the asking process's own and decides every write with it
 * (access/slurmjobs.h). The call blocks on the look-up pool, never on the
 * loop.
 */
#include "api/handlers.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "access/peer.h"
#include "api/batch.h"
#include "api/handlers_util.h"
#include "common/pool.h"
#include "devices/gpu.h"
#include "http/ctx.h"
#include "http/gate.h"
#include "http/request.h"
#include "http/router.h"
#include "node/node.h"

struct slurm_call {
	struct pool_job job;		/* first: the pool hands it back */
	struct request *req;
	struct node *node;
	struct node_slurm_step s;
	int rc;
	struct zerr err;
};

static void
slurm_run(struct pool_job *job)
{
	struct slurm_call *c = (struct slurm_call *)job;

	c->rc = node_slurm_step(c->node, &c->s, &c->err);
	request_complete_one(c->req);
}

static void
slurm_finish(struct request *req)
{
	struct slurm_call *c = req->hctx;
	json_t *body;

	if (c->rc != 0) {
		if (c->err.kind == ZERR_BUSY)
			request_reply_busy(req, &c->err);
		else
			request_reply_error(req, &c->err);
		return;
	}
	body = json_pack("{s:I,s:I,s:b}", "job", (json_int_t)c->s.job,
	    "step", (json_int_t)c->s.step, "running", (int)c->s.start);
	if (body == NULL) {
		handlers_reply_oom(req);
		return;
	}
	request_reply_json(req, 200, body);
}

void
handle_slurm_step(struct request *req)
{
	static const struct query_spec start_spec[] = {
		{ "job", Q_U32, true },
		{ "step", Q_U32, true },
		{ "uid", Q_U32, true },
		{ "gpu_ids", Q_IDS, true },
		{ NULL, Q_BOOL, false },
	};
	static const struct query_spec end_spec[] = {
		{ "job", Q_U32, true },
		{ "step", Q_U32, true },
		{ NULL, Q_BOOL, false },
	};
	const bool start = req->route->op != 0;
	const struct peer *p = request_peer(req);
	struct node *node = request_node(req);
	struct query_values qv;
	struct slurm_call *c;
	struct gpu_write who;
	struct id_list ids;
	struct zerr err;

	if (p == NULL || p->kind != PEER_UNIX || !peer_is_root(p)) {
		zerr_set(&err, ZERR_FORBIDDEN, "Forbidden: only root on "
		    "zeusd's Unix socket (zeus_spank.so in slurmstepd) may say which "
		    "GPUs a Slurm job step holds");
		request_reply_error(req, &err);
		return;
	}
	if (handlers_parse(req, start ? start_spec : end_spec, &qv) != 0)
		return;
	memset(&ids, 0, sizeof(ids));
	if (start && handlers_pick_gpus(req, &qv.v[3], &ids) != 0)
		return;
	if ((c = batch_state(req, sizeof(*c), free)) == NULL)
		return;
	c->req = req;
	c->node = node;
	c->s.start = start;
	c->s.job = qv.v[0].u32;
	c->s.step = qv.v[1].u32;
	if (start) {
		c->s.uid = (uid_t)qv.v[2].u32;
		for (unsigned i = 0; i < ids.n; i++)
			c->s.gpus |= ids.ids[i] < 64 ?
			    UINT64_C(1) << ids.ids[i] : 0;
	}
	memset(&who, 0, sizeof(who));
	gate_writer(req, &who);
	c->s.who = who.writer_handle;
	if (c->s.who == 0) {
		/* no handle to name root by */
		c->rc = -1;
		zerr_set(&c->err, ZERR_INTERNAL, "the connection has no handle "
		    "of zeusd's device process");
		slurm_finish(req);
		return;
	}
	c->job.run = slurm_run;
	request_finish_answers_only(req);
	/* before submitting: the job may complete before submit returns */
	request_defer(req, 1, slurm_finish);
	if (pool_submit(req->ctx->lookups, &c->job) != 0) {
		c->rc = -1;
		zerr_set(&c->err, ZERR_BUSY, "Too many look-ups in progress; "
		    "retry later");
		request_complete_one(req);
	}
}
