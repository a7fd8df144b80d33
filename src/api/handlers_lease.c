/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_lease.c - the energy ledger's endpoints (docs/security.md,
 * "Shared nodes: the energy ledger"):
 *   GET /gpu/leases             the open leases with their energy so far,
 *                               the last ended ones, each GPU's energy
 *                               charged to nobody (gpu-read)
 *   POST /gpu/release?gpu_ids=  ends the caller's leases (root: anyone's);
 *                               the settings are restored before the
 *                               answer, which carries each lease's record
 *                               (gpu-control)
 * A record's pid, cgroup and label are shown to root and its holder only
 * (lease_details_shown).
 *
 * The lease record is the device process's alone (privsep/msg.h, struct
 * psmsg_lease): it decides every lease, reads the energy at a lease's
 * start and end and when asked here, and audits a release it refuses.
 * These handlers ask it (node_leases, node_release: one round trip each,
 * blocking, so on the look-up pool, never on the loop) and turn its
 * records into JSON.
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
#include "devices/gpu_cmd.h"
#include "http/ctx.h"
#include "http/gate.h"
#include "http/request.h"
#include "node/node.h"
#include "privsep/msg.h"

/* A string of the client's or the system's: JSON null when empty, and
 * printable ASCII when it is not valid UTF-8. */
static json_t *
lease_json_text(const char *s)
{
	char safe[IDENTITY_CGROUP_MAX];
	json_t *v;
	size_t i;

	if (s[0] == '\0')
		return json_null();
	if ((v = json_string(s)) != NULL)
		return v;
	for (i = 0; s[i] != '\0' && i < sizeof(safe) - 1; i++)
		safe[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	safe[i] = '\0';
	return json_string(safe);
}

/* Unix milliseconds as seconds (a real), null for none. */
static json_t *
lease_json_time(uint64_t ms)
{
	if (ms == 0)
		return json_null();
	return json_real((double)ms / 1000);
}

/*
 * Whether `p` sees a record's pid, cgroup and label (docs/api.md, "Who
 * sees what of a record"): root on the Unix socket and the lease's holder,
 * a Unix peer of its uid. Anyone else with gpu-read on the GPU sees that it is
 * leased, by whom, when and with what energy, not the holder's processes
 * or the name its job gave the lease. A TCP client is no one's holder (a
 * token's sub is no uid, and no scope makes an administrator): never.
 */
static bool
lease_details_shown(const struct peer *p, const struct psmsg_lease *r)
{
	return p != NULL && p->kind == PEER_UNIX && (p->uid == 0 ||
	    p->uid == r->uid);
}

/* How a lease ended (enum psmsg_reason), as the audit line says it. */
static const char *
lease_reason(uint32_t reason)
{
	static const char *const names[PSMSG_REASON_END] = {
		[PSMSG_REASON_PROCESS_EXIT] = "process_exit",
		[PSMSG_REASON_RELEASE] = "release",
		[PSMSG_REASON_SHUTDOWN] = "shutdown",
		[PSMSG_REASON_HOLDER_GONE] =
		    "holder_gone_while_zeusd_was_down",
	};

	return reason < PSMSG_REASON_END ? names[reason] : NULL;
}

/*
 * A record for the caller `p`; without the details, pid 0 (a number still,
 * as libzeus before 4d requires), cgroup and label null, details false.
 * Whether its settings were left as they were (r->left) is the audit
 * line's, not the API's.
 */
static json_t *
lease_record_json(const struct psmsg_lease *r, const struct peer *p)
{
	static const char *const states[] = { "held", "restoring", "ended" };
	static const struct { unsigned bit; const char *name; } names[] = {
		{ GPU_SETTING_POWER_LIMIT, "power_limit" },
		{ GPU_SETTING_PERSISTENCE, "persistence" },
		{ GPU_SETTING_GPU_CLOCKS, "gpu_clocks" },
		{ GPU_SETTING_MEM_CLOCKS, "mem_clocks" },
	};
	bool started = r->start_ms != 0;
	bool details = lease_details_shown(p, r);
	double j = (double)r->energy_mj / 1000;
	double duration_s = (double)r->duration_us / 1e6;
	const char *reason = lease_reason(r->reason);
	json_t *settings = json_array(), *o;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (r->settings & names[i].bit)
			json_array_append_new(settings,
			    json_string(names[i].name));
	/* the reply check let through no state beyond "ended" */
	o = json_pack("{s:I,s:I,s:o,s:I,s:o,s:o,s:b,s:s,s:o,s:o,s:f,s:o,s:s,"
	    "s:o,s:o}", "gpu", (json_int_t)r->gpu, "uid", (json_int_t)r->uid,
	    "user", lease_json_text(r->user), "pid",
	    (json_int_t)(details ? r->pid : 0), "cgroup",
	    details ? lease_json_text(r->cgroup) : json_null(), "label",
	    details ? lease_json_text(r->label) : json_null(), "details",
	    (int)details, "state", states[r->state], "start",
	    lease_json_time(r->start_ms), "end", lease_json_time(r->end_ms),
	    "duration_s", duration_s, "energy_j",
	    r->energy_ok ? json_real(j) : json_null(), "energy",
	    r->energy_ok ? "ok" : started ? "unavailable" : "pending",
	    "avg_w", r->energy_ok && duration_s > 0 ?
	    json_real(j / duration_s) : json_null(), "settings", settings);
	if (o != NULL && reason != NULL)
		json_object_set_new(o, "reason", json_string(reason));
	return o;
}

static int
lease_require(struct request *req)
{
	struct zerr err;

	if (request_leases_on(req))
		return 0;
	zerr_set(&err, ZERR_NOT_FOUND, "GPU leases are not enabled on this "
	    "server (zeusd serve --gpu-leases)");
	request_reply_error(req, &err);
	return -1;
}

/*
 * One call to the device process's lease record, on the look-up pool:
 * GET /gpu/leases (release false) or POST /gpu/release. What the answer
 * needs of the connection is copied here first, so that the finish reads
 * nothing of it.
 */
struct lease_call {
	struct pool_job job;		/* first: the pool hands it back */
	struct request *req;
	struct node *node;
	bool release;
	struct gpu_write by;		/* release: who asks (gate_writer) */
	uint64_t mask;			/* release: the GPUs named */
	uint64_t shown;			/* leases: the GPUs the policy shows */
	bool has_viewer;		/* `viewer` is the connection's peer */
	struct peer viewer;		/* a copy: owns no pidfd */
	int rc;
	struct zerr err;
	struct psmsg_leases_reply rep;	/* ~45 KiB: the call is on the heap */
};

static void
lease_call_run(struct pool_job *job)
{
	struct lease_call *c = (struct lease_call *)job;

	if (c->release)
		c->rc = node_release(c->node, &c->by, c->mask, &c->rep,
		    &c->err);
	else
		c->rc = node_leases(c->node, &c->rep, &c->err);
	request_complete_one(c->req);
}

/* A failed call's answer: 409 with the device process's words, or 503. */
static bool
lease_call_failed(struct request *req, struct lease_call *c)
{
	if (c->rc == 0)
		return false;
	if (c->err.kind == ZERR_BUSY)
		request_reply_busy(req, &c->err);
	else
		request_reply_error(req, &c->err);
	return true;
}

static const struct peer *
lease_viewer(const struct lease_call *c)
{
	return c->has_viewer ? &c->viewer : NULL;
}

/*
 * The call, prepared by the handler (c->release, c->by, c->mask,
 * c->shown), sent off the loop; `finish` answers once it returned.
 */
static void
lease_call_start(struct request *req, struct lease_call *c,
    void (*finish)(struct request *))
{
	const struct peer *p = request_peer(req);

	c->req = req;
	c->node = request_node(req);
	if (p != NULL) {
		c->viewer = *p;
		c->viewer.pidfd = -1;
		c->has_viewer = true;
	}
	c->job.run = lease_call_run;
	request_finish_answers_only(req);
	/* before submitting: the job may complete before submit returns */
	request_defer(req, 1, finish);
	if (req->ctx->lookups == NULL) {
		lease_call_run(&c->job);	/* no pool: on the loop */
		return;
	}
	if (pool_submit(req->ctx->lookups, &c->job) != 0) {
		c->rc = -1;
		zerr_set(&c->err, ZERR_BUSY, "Too many look-ups in progress; "
		    "retry later");
		request_complete_one(req);
	}
}

/* ---- GET /gpu/leases ------------------------------------------------------ */

static void
leases_finish(struct request *req)
{
	struct lease_call *c = req->hctx;
	const struct psmsg_leases_reply *v = &c->rep;
	unsigned ngpu = request_node(req)->ngpu;
	json_t *cur, *ended, *un, *body;

	if (lease_call_failed(req, c))
		return;
	cur = json_array();
	ended = json_array();
	un = json_array();
	for (uint32_t k = 0; k < v->nopen; k++)
		if (c->shown >> v->rec[k].gpu & 1)
			json_array_append_new(cur, lease_record_json(&v->rec[k],
			    lease_viewer(c)));
	for (uint32_t k = v->nopen; k < v->nopen + v->nended; k++)
		if (c->shown >> v->rec[k].gpu & 1)
			json_array_append_new(ended,
			    lease_record_json(&v->rec[k], lease_viewer(c)));
	for (unsigned i = 0; i < ngpu; i++)
		if (c->shown >> i & 1)
			json_array_append_new(un, json_pack("{s:I,s:o}", "gpu",
			    (json_int_t)i, "energy_j", v->unleased_ok >> i & 1 ?
			    json_real((double)v->unleased_mj[i] / 1000) :
			    json_null()));
	body = json_pack("{s:o,s:o,s:o}", "leases", cur, "ended", ended,
	    "unleased", un);
	if (body == NULL) {
		handlers_reply_oom(req);
		return;
	}
	request_reply_json(req, 200, body);
}

void
handle_gpu_leases(struct request *req)
{
	static const struct query_spec none[] = { { NULL, Q_BOOL, false } };
	unsigned n = request_node(req)->ngpu;
	struct lease_call *c;
	struct query_values qv;

	if (lease_require(req) != 0 || handlers_parse(req, none, &qv) != 0 ||
	    (c = batch_state(req, sizeof(*c), free)) == NULL)
		return;
	/* the records of a GPU the node policy does not show are left out */
	for (unsigned i = 0; i < n && i < PSMSG_MAX_GPUS; i++)
		if (gate_gpu_allowed(req, i))
			c->shown |= UINT64_C(1) << i;
	lease_call_start(req, c, leases_finish);
}

/* ---- POST /gpu/release ---------------------------------------------------- */

static void
release_finish(struct request *req)
{
	struct lease_call *c = req->hctx;
	const struct psmsg_leases_reply *v = &c->rep;
	json_t *released, *nl, *body;

	/* a refusal is the device process's to audit: it decided it */
	if (lease_call_failed(req, c))
		return;
	released = json_array();
	nl = json_array();
	for (uint32_t k = 0; k < v->nopen; k++)
		json_array_append_new(released, lease_record_json(&v->rec[k],
		    lease_viewer(c)));
	for (unsigned i = 0; i < PSMSG_MAX_GPUS; i++)
		if (v->not_leased >> i & 1)
			json_array_append_new(nl, json_integer(i));
	body = json_pack("{s:o,s:o}", "released", released, "not_leased", nl);
	if (body == NULL) {
		handlers_reply_oom(req);
		return;
	}
	request_reply_json(req, 200, body);
}

void
handle_gpu_release(struct request *req)
{
	static const struct query_spec spec[] = { { "gpu_ids", Q_IDS, false },
	    { NULL, Q_BOOL, false } };
	struct lease_call *c;
	struct query_values qv;
	struct id_list ids;

	if (lease_require(req) != 0 || handlers_parse(req, spec, &qv) != 0 ||
	    handlers_pick_gpus(req, &qv.v[0], &ids) != 0 ||
	    (c = batch_state(req, sizeof(*c), free)) == NULL)
		return;
	c->release = true;
	for (unsigned i = 0; i < ids.n; i++)
		if (ids.ids[i] < PSMSG_MAX_GPUS)
			c->mask |= UINT64_C(1) << ids.ids[i];
	gate_writer(req, &c->by);	/* the device process judges it */
	if (c->mask == 0) {
		/* no GPU named (a node without any): nothing to ask */
		release_finish(req);
		return;
	}
	lease_call_start(req, c, release_finish);
}
