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

/* A non-blocking write's context: who asked (audit log). */
struct gpu_nb {
	struct audit_who who;
	struct node *node;
	bool audit;			/* its line is ours (gpu_audit_here) */
};

/*
 * Whether this process writes the audit line of a write that ran: in a
 * split daemon the device process does (access/warden.h), with what it
 * read and who it knows; a write dropped before it ran is still ours.
 */
static bool
gpu_audit_here(struct request *req)
{
	return audit_enabled() && request_node(req)->remote == NULL;
}

/* The audit line of one finished (or dropped) write. */
static void
gpu_audit(const struct audit_who *who, const struct gpu_cmd *cmd,
    const char *dropped)
{
	const struct gpu_write *w = &cmd->write;
	char before[64], req[96];
	bool has_req = true;

	before[0] = '\0';
	if (cmd->has_before && w->op == GPU_SET_POWER_LIMIT)
		snprintf(before, sizeof(before), "{\"power_limit_mw\":%u}",
		    (unsigned)cmd->before_limit_mw);
	else if (cmd->has_before && w->op == GPU_SET_PERSISTENCE_MODE)
		snprintf(before, sizeof(before), "{\"enabled\":%s}",
		    cmd->before_persistence ? "true" : "false");
	switch (w->op) {
	case GPU_SET_POWER_LIMIT:
		snprintf(req, sizeof(req), "{\"power_limit_mw\":%u}",
		    (unsigned)w->power_limit_mw);
		break;
	case GPU_SET_PERSISTENCE_MODE:
		snprintf(req, sizeof(req), "{\"enabled\":%s}", w->enabled ?
		    "true" : "false");
		break;
	case GPU_SET_GPU_LOCKED_CLOCKS:
	case GPU_SET_MEM_LOCKED_CLOCKS:
		snprintf(req, sizeof(req), "{\"min_clock_mhz\":%u,"
		    "\"max_clock_mhz\":%u}", (unsigned)w->min_clock_mhz,
		    (unsigned)w->max_clock_mhz);
		break;
	default:
		has_req = false;
		break;
	}
	audit_write(who, cmd->gpu, gpu_write_op_name(w->op),
	    before[0] ? before : NULL, has_req ? req : NULL,
	    dropped != NULL ? dropped : cmd->rc != 0 ? cmd->err.msg : NULL,
	    NULL);
}

static void
gpu_done_log_free(struct gpu_cmd *cmd, void *arg)
{
	char q[ZERR_MSG_MAX + 64];

	if (arg != NULL) {
		const struct gpu_nb *nb = arg;

		if (nb->audit)
			gpu_audit(&nb->who, cmd, NULL);
		free(arg);
	}

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
	if (arg != NULL) {
		struct gpu_nb *nb = arg;

		/* the device process never saw it: its line is ours to give */
		if (node_is_remote(nb->node))
			node_audit_superseded(nb->node, &cmd->write, cmd->gpu);
		else
			gpu_audit(&nb->who, cmd, "superseded by a newer write "
			    "before it ran");
		free(arg);
	}
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
			/* the value before: for our own audit line only (a
			 * lease's is the device process's record) */
			b->cmds[i].want_before = gpu_audit_here(req);
		}
		if (batch_add_gpu(&bt, &b->cmds[i]) != 0)
			return;
	}
	/*
	 * A read's finish only answers; a write's too unless it audits here
	 * (one process). Its commands read nothing of the peer: a lease is
	 * the device process's (access/warden.h).
	 */
	if (w == NULL || !gpu_audit_here(req))
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
	struct gpu_nb *whos[QUERY_MAX_IDS];
	bool ctx = audit_enabled();
	struct batch bt;
	unsigned n;

	batch_init(&bt, req);
	memset(whos, 0, sizeof(whos));
	for (n = 0; n < ids->n; n++) {
		if ((cmds[n] = calloc(1, sizeof(*cmds[n]))) == NULL ||
		    (ctx && (whos[n] = malloc(sizeof(*whos[n]))) == NULL)) {
			free(cmds[n]);
			batch_cancel(&bt);
			handlers_reply_oom(req);
			goto free;
		}
		if (whos[n] != NULL) {
			gate_audit_who(req, &whos[n]->who);
			whos[n]->node = request_node(req);
			whos[n]->audit = gpu_audit_here(req);
		}
		gpu_cmd_init(cmds[n], GPU_CMD_WRITE, ids->ids[n],
		    gpu_done_log_free, whos[n]);
		gpu_cmd_set_write(cmds[n], w, gpu_dropped_log_free);
		cmds[n]->want_before = gpu_audit_here(req);
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
	while (n > 0) {
		n--;
		free(cmds[n]);
		free(whos[n]);
	}
}

static void
gpu_write_finish(struct request *req)
{
	const struct gpu_batch *b = req->hctx;

	if (gpu_audit_here(req)) {
		struct audit_who who;

		gate_audit_who(req, &who);
		for (unsigned i = 0; i < b->n; i++)
			gpu_audit(&who, &b->cmds[i], NULL);
	}
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
		    PSMSG_REFUSAL_AUDIT_DOWN, err.msg);
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
