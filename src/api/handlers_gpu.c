/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_gpu.c - the /gpu/... reads and writes of docs/api.md (streams
 * live in their own module).
 *
 * A request becomes one gpu_cmd per listed GPU, queued on that GPU's worker:
 * GPUs run concurrently, each GPU's commands in arrival order, so a read
 * after a non-blocking write sees the write. get_power is the exception: an
 * instantaneous reading has no order to keep with writes, so all its reads
 * go to the one power-reader thread (one thread hop per request, and never
 * stuck behind a slow write). Blocking
 * requests suspend until every command is done and then answer with the
 * results or an aggregated {"errors": {...}} whose status is the worst one.
 * Non-blocking writes answer at once; their outcome is only logged, and
 * one still queued when a newer write of the same setting arrives is
 * dropped for it (logged and counted).
 *
 * Device queues are bounded (node.h): room for every command of a request
 * is reserved before any is queued, and when one queue is full the whole
 * request is answered 503 with Retry-After before anything runs (not as a
 * per-GPU entry of {"errors": ...}). Likewise an operation the GPU driver
 * has no entry point for is refused whole, with 400, before anything is
 * queued: it would fail on every GPU, and a block=false write would
 * otherwise answer 200 for nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonw.h"
#include "common/lease_label.h"
#include "common/log.h"
#include "devices/gpu_cmd.h"
#include "access/audit.h"
#include "api/batch.h"
#include "access/peer.h"
#include "api/handlers.h"
#include "api/handlers_util.h"
#include "node/node.h"
#include "http/query.h"
#include "http/gate.h"
#include "http/reply_share.h"
#include "http/request.h"
#include "http/router.h"

#define P_IDS { "gpu_ids", Q_IDS, true }
#define P_BLOCK { "block", Q_BOOL, true }
#define P_END { NULL, Q_BOOL, false }

static const struct query_spec spec_limit[] = {
	P_IDS, P_BLOCK, { "power_limit_mw", Q_U32, true }, P_END };
static const struct query_spec spec_persist[] = {
	P_IDS, P_BLOCK, { "enabled", Q_BOOL, true }, P_END };
static const struct query_spec spec_clocks[] = {
	P_IDS, P_BLOCK, { "min_clock_mhz", Q_U32, true },
	{ "max_clock_mhz", Q_U32, true }, P_END };
static const struct query_spec spec_reset[] = { P_IDS, P_BLOCK, P_END };
static const struct query_spec spec_read[] = {
	{ "gpu_ids", Q_IDS, false }, P_END };

static const struct query_spec *const gpu_write_specs[GPU_WRITE_OP_COUNT] = {
	[GPU_SET_POWER_LIMIT] = spec_limit,
	[GPU_SET_PERSISTENCE_MODE] = spec_persist,
	[GPU_SET_GPU_LOCKED_CLOCKS] = spec_clocks,
	[GPU_RESET_GPU_LOCKED_CLOCKS] = spec_reset,
	[GPU_SET_MEM_LOCKED_CLOCKS] = spec_clocks,
	[GPU_RESET_MEM_LOCKED_CLOCKS] = spec_reset,
	[GPU_RESET_LOCKED_CLOCKS] = spec_reset,
};

/* State of a blocking request: one command per GPU. */
struct gpu_batch {
	enum gpu_cmd_op op;
	unsigned n;
	struct gpu_cmd cmds[];
};

static void
gpu_done_request(struct gpu_cmd *cmd, void *arg)
{
	(void)cmd;
	request_complete_one(arg);
}

/*
 * A non-blocking write's end, logged; `arg` is the node when the audit log
 * is on (the device process audits what ran, and is told of a write that
 * never reached it).
 */
static void
gpu_done_log_free(struct gpu_cmd *cmd, void *arg)
{
	char q[ZERR_MSG_MAX + 64];

	(void)arg;
	if (cmd->rc != 0)
		zlog(ZLOG_WARN, "nonblocking_write_failed", "gpu=%u op=%s "
		    "error=%s", cmd->gpu, gpu_cmd_name(cmd),
		    zlog_quote(q, sizeof(q), cmd->err.msg));
	else
		zlog(ZLOG_INFO, "nonblocking_write_done", "gpu=%u op=%s",
		    cmd->gpu, gpu_cmd_name(cmd));
	free(cmd);
}

static void
gpu_dropped_log_free(struct gpu_cmd *cmd, void *arg)
{
	zlog(ZLOG_INFO, "nonblocking_write_superseded", "gpu=%u op=%s",
	    cmd->gpu, gpu_cmd_name(cmd));
	/* the device process never saw it: it is told, and audits it */
	if (arg != NULL)
		node_audit_superseded(arg, &cmd->write, cmd->gpu);
	free(cmd);
}

/* One command per listed GPU, answered by `finish` once all are done. */
static void
gpu_batch_submit(struct request *req, const struct id_list *ids,
    enum gpu_cmd_op op, const struct gpu_write *w,
    void (*finish)(struct request *))
{
	struct gpu_batch *b;
	struct batch bt;

	b = batch_state(req, sizeof(*b) + ids->n * sizeof(b->cmds[0]), free);
	if (b == NULL)
		return;
	b->op = op;
	b->n = ids->n;
	batch_init(&bt, req);
	for (unsigned i = 0; i < ids->n; i++) {
		gpu_cmd_init(&b->cmds[i], op, ids->ids[i], gpu_done_request, req);
		if (w != NULL) {
			gpu_cmd_set_write(&b->cmds[i], w, NULL);
		}
		if (batch_add_gpu(&bt, &b->cmds[i]) != 0)
			return;
	}
	/*
	 * The finish only answers: its commands read nothing of the peer
	 * (the device process audits and keeps the lease, access/warden.h).
	 */
	request_finish_answers_only(req);
	if (w != NULL)
		gate_writes_queued(req, ids->n);
	batch_run(&bt, finish);
}

/* block=false: one self-freeing command per GPU, answered at once. */
static void
gpu_write_nonblocking(struct request *req, const struct id_list *ids,
    const struct gpu_write *w)
{
	struct gpu_cmd *cmds[QUERY_MAX_IDS];
	void *audit = audit_enabled() ? request_node(req) : NULL;
	struct batch bt;
	unsigned n;

	batch_init(&bt, req);
	for (n = 0; n < ids->n; n++) {
		if ((cmds[n] = calloc(1, sizeof(*cmds[n]))) == NULL) {
			batch_cancel(&bt);
			handlers_reply_oom(req);
			goto free;
		}
		gpu_cmd_init(cmds[n], GPU_CMD_WRITE, ids->ids[n],
		    gpu_done_log_free, audit);
		gpu_cmd_set_write(cmds[n], w, gpu_dropped_log_free);
		if (batch_add_gpu(&bt, cmds[n]) != 0) {
			n++;
			goto free;
		}
	}
	gate_writes_queued(req, ids->n);
	batch_queue(&bt);
	request_reply_empty(req, 200);
	return;
free:
	while (n > 0)
		free(cmds[--n]);
}

static void
gpu_write_finish(struct request *req)
{
	const struct gpu_batch *b = req->hctx;

	if (batch_gpu_errors(req, b->cmds, b->n) == 0)
		request_reply_empty(req, 200);
}

/* One GPU's answer to a read, as its member's value. */
static void
gpu_read_value(struct jsonw *w, const struct gpu_cmd *c)
{
	switch (c->op) {
	case GPU_CMD_GET_POWER:
		jsonw_int(w, c->out.power_mw);
		return;
	case GPU_CMD_GET_ENERGY:
		jsonw_open(w);
		jsonw_key_int(w, "energy_mj", (int64_t)c->out.energy_mj);
		break;
	case GPU_CMD_GET_POWER_LIMIT:
		jsonw_open(w);
		jsonw_key_int(w, "power_limit_mw", c->out.limit_mw);
		break;
	case GPU_CMD_GET_CONSTRAINTS:
		jsonw_open(w);
		jsonw_key_int(w, "min_power_limit_mw",
		    c->out.constraints.min_mw);
		jsonw_key_int(w, "max_power_limit_mw",
		    c->out.constraints.max_mw);
		break;
	case GPU_CMD_GET_PERSISTENCE:
		jsonw_open(w);
		jsonw_key(w, "enabled");
		jsonw_bool(w, c->out.persistence);
		break;
	case GPU_CMD_WRITE:
	case GPU_CMD_SNAPSHOT:
		jsonw_null(w);
		return;
	}
	jsonw_close(w);
}

static void
gpu_read_finish(struct request *req)
{
	const struct gpu_batch *b = req->hctx;
	struct reply_key rk;
	struct jsonw w;
	int64_t now_ms = 0;

	if (batch_gpu_errors(req, b->cmds, b->n) != 0)
		return;
	if (b->op == GPU_CMD_GET_POWER) {
		/* every input of the body: the time, then each GPU's reading */
		now_ms = (int64_t)handlers_now_ms();
		reply_key_init(&rk, REPLY_GPU_POWER);
		reply_key_add(&rk, (uint64_t)now_ms);
		for (unsigned i = 0; i < b->n; i++) {
			reply_key_add(&rk, b->cmds[i].gpu);
			reply_key_add(&rk, b->cmds[i].out.power_mw);
		}
		if (reply_share_try(req, &rk))
			return;
	}
	/* written, not built as a tree (common/jsonw.h) */
	jsonw_init(&w);
	jsonw_open(&w);
	if (b->op == GPU_CMD_GET_POWER) {
		jsonw_key_int(&w, "timestamp_ms", now_ms);
		jsonw_key(&w, "power_mw");
		jsonw_open(&w);
	}
	for (unsigned i = 0; i < b->n; i++) {
		jsonw_key_u(&w, b->cmds[i].gpu);
		gpu_read_value(&w, &b->cmds[i]);
	}
	jsonw_close(&w);
	if (b->op == GPU_CMD_GET_POWER) {
		jsonw_close(&w);
		reply_share_keep(req, &rk, &w);
	} else {
		request_reply_jsonw(req, 200, &w);
	}
}

void
handle_gpu_write(struct request *req)
{
	const enum gpu_write_op op = (enum gpu_write_op)req->route->op;
	const struct query_spec *spec = gpu_write_specs[op];
	struct node *node = request_node(req);
	struct query_values qv;
	struct gpu_write w;
	struct id_list ids;
	struct zerr err;
	const char *label = request_header(req, LEASE_LABEL_HEADER);
	const char *bad;

	if (handlers_parse(req, spec, &qv) != 0 ||
	    handlers_pick_gpus(req, &qv.v[0], &ids) != 0 ||
	    (ids.n > 0 && handlers_gpu_lacks(req, gpu_write_op_name(op),
	    node->gpu.ops->write_lacks(&node->gpu, op)) != 0))
		return;
	if (label != NULL && (bad = lease_label_invalid(label)) != NULL) {
		zerr_set(&err, ZERR_INVALID, "invalid value in header "
		    LEASE_LABEL_HEADER ": %s", bad);
		request_reply_error(req, &err);
		return;
	}
	memset(&w, 0, sizeof(w));
	w.op = op;
	if (spec == spec_limit)
		w.power_limit_mw = qv.v[2].u32;
	else if (spec == spec_persist)
		w.enabled = qv.v[2].b;
	else if (spec == spec_clocks) {
		w.min_clock_mhz = qv.v[2].u32;
		w.max_clock_mhz = qv.v[3].u32;
	}
	gate_writer(req, &w);	/* the device process judges it again */
	if (label != NULL && w.writer == GPU_WRITER_UNIX)
		snprintf(w.writer_label, sizeof(w.writer_label), "%s", label);
	if (request_config(req)->audit_required && !audit_ready()) {
		/* no room for its audit line: nothing runs (--audit-required) */
		audit_count_refused();
		(void)audit_refusal(&err);
		gate_audit_refusal(req, ids.ids, ids.n,
		    PSMSG_REFUSAL_AUDIT_DOWN);
		request_reply_busy(req, &err);
		return;
	}
	/*
	 * A lease (--gpu-leases) is the device process's to take, extend,
	 * label (w.writer_label, which travels with the write) or refuse.
	 * It answers first whether the request as a whole would be refused
	 * (409, in its words; audited there), so that such a request changes
	 * nothing on any GPU and a block=false one is not answered 200; a
	 * yes grants nothing: each write is decided when it runs.
	 */
	if (request_leases_on(req) && (request_peer(req) == NULL ||
	    request_peer(req)->kind != PEER_UNIX ||
	    !peer_is_root(request_peer(req)))) {
		uint64_t mask = 0;

		for (unsigned i = 0; i < ids.n; i++)
			mask |= ids.ids[i] < 64 ? UINT64_C(1) << ids.ids[i] : 0;
		if (node_lease_check(node, &w, mask, &err) != 0) {
			request_reply_error(req, &err);
			return;
		}
	}
	if (qv.v[1].b)
		gpu_batch_submit(req, &ids, GPU_CMD_WRITE, &w, gpu_write_finish);
	else
		gpu_write_nonblocking(req, &ids, &w);
}

void
handle_gpu_read(struct request *req)
{
	const enum gpu_cmd_op op = (enum gpu_cmd_op)req->route->op;
	const int rop = gpu_cmd_read_op(op);
	struct node *node = request_node(req);
	struct query_values qv;
	struct id_list ids;

	if (handlers_parse(req, spec_read, &qv) != 0 ||
	    handlers_pick_gpus(req, &qv.v[0], &ids) != 0 ||
	    (ids.n > 0 && rop >= 0 && handlers_gpu_lacks(req,
	    gpu_read_op_name((enum gpu_read_op)rop),
	    node->gpu.ops->read_lacks(&node->gpu, (enum gpu_read_op)rop)) != 0))
		return;
	gpu_batch_submit(req, &ids, op, NULL, gpu_read_finish);
}
