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
 * Energy is read only here, at a lease's start and at its end: an idle
 * daemon with leases open reads nothing.
 */
#include "api/handlers.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "access/lease.h"
#include "access/peer.h"
#include "api/batch.h"
#include "api/handlers_util.h"
#include "devices/gpu.h"
#include "devices/gpu_cmd.h"
#include "http/gate.h"
#include "http/request.h"
#include "node/node.h"

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

static json_t *
lease_json_time(const struct timespec *t)
{
	if (t->tv_sec == 0 && t->tv_nsec == 0)
		return json_null();
	return json_real((double)t->tv_sec + (double)t->tv_nsec / 1e9);
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
lease_details_shown(const struct peer *p, const struct lease_record *r)
{
	return p != NULL && p->kind == PEER_UNIX && (p->uid == 0 ||
	    p->uid == r->uid);
}

/*
 * A record for the caller `p`; without the details, pid 0 (a number still,
 * as libzeus before 4d requires), cgroup and label null, details false.
 */
static json_t *
lease_record_json(const struct lease_record *r, const struct peer *p)
{
	static const char *const states[] = { "held", "restoring", "ended" };
	static const struct { unsigned bit; const char *name; } names[] = {
		{ GPU_SETTING_POWER_LIMIT, "power_limit" },
		{ GPU_SETTING_PERSISTENCE, "persistence" },
		{ GPU_SETTING_GPU_CLOCKS, "gpu_clocks" },
		{ GPU_SETTING_MEM_CLOCKS, "mem_clocks" },
	};
	bool started = r->start.tv_sec != 0;
	bool details = lease_details_shown(p, r);
	double j = (double)r->energy_mj / 1000;
	json_t *settings = json_array(), *o;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (r->settings & names[i].bit)
			json_array_append_new(settings,
			    json_string(names[i].name));
	o = json_pack("{s:I,s:I,s:o,s:I,s:o,s:o,s:b,s:s,s:o,s:o,s:f,s:o,s:s,"
	    "s:o,s:o}", "gpu", (json_int_t)r->gpu, "uid", (json_int_t)r->uid,
	    "user", lease_json_text(r->user), "pid",
	    (json_int_t)(details ? r->pid : 0), "cgroup",
	    details ? lease_json_text(r->cgroup) : json_null(), "label",
	    details ? lease_json_text(r->label) : json_null(), "details",
	    (int)details, "state", states[r->state], "start",
	    lease_json_time(&r->start), "end", lease_json_time(&r->end),
	    "duration_s", r->duration_s, "energy_j",
	    r->energy_ok ? json_real(j) : json_null(), "energy",
	    r->energy_ok ? "ok" : started ? "unavailable" : "pending",
	    "avg_w", r->energy_ok && r->duration_s > 0 ?
	    json_real(j / r->duration_s) : json_null(), "settings", settings);
	if (o != NULL && r->reason != NULL)
		json_object_set_new(o, "reason", json_string(r->reason));
	return o;
}

static int
lease_require(struct request *req)
{
	struct zerr err;

	if (request_leases(req) != NULL)
		return 0;
	zerr_set(&err, ZERR_NOT_FOUND, "GPU leases are not enabled on this "
	    "server (zeusd serve --gpu-leases)");
	request_reply_error(req, &err);
	return -1;
}

/* ---- GET /gpu/leases ------------------------------------------------------ */

struct leases_scrape {
	unsigned ngpu;
	bool *shown;			/* [ngpu]: the policy lets the peer see */
	uint64_t *mj;			/* [ngpu] */
	bool *ok;			/* [ngpu] */
	struct lease_record *cur;	/* [ngpu] */
	struct lease_view view;
	struct gpu_cmd cmds[];		/* [ngpu] */
};

static void
leases_finish(struct request *req)
{
	struct leases_scrape *s = req->hctx;
	json_t *cur = json_array(), *ended = json_array(), *un = json_array();

	for (unsigned i = 0; i < s->ngpu; i++) {
		s->ok[i] = s->shown[i] && s->cmds[i].op == GPU_CMD_GET_ENERGY &&
		    s->cmds[i].rc == 0;
		s->mj[i] = s->ok[i] ? s->cmds[i].out.energy_mj : 0;
	}
	s->view.cur = s->cur;
	leases_view(request_leases(req), s->mj, s->ok, &s->view);
	for (unsigned k = 0; k < s->view.ncur; k++)
		if (s->shown[s->view.cur[k].gpu])
			json_array_append_new(cur,
			    lease_record_json(&s->view.cur[k],
			    request_peer(req)));
	for (unsigned k = 0; k < s->view.nended; k++)
		if (s->view.ended[k].gpu < s->ngpu &&
		    s->shown[s->view.ended[k].gpu])
			json_array_append_new(ended,
			    lease_record_json(&s->view.ended[k],
			    request_peer(req)));
	for (unsigned i = 0; i < s->ngpu; i++)
		if (s->shown[i])
			json_array_append_new(un, json_pack("{s:I,s:o}", "gpu",
			    (json_int_t)i, "energy_j", s->view.unleased_ok[i] ?
			    json_real((double)s->view.unleased_mj[i] / 1000) :
			    json_null()));
	request_reply_json(req, 200, json_pack("{s:o,s:o,s:o}", "leases", cur,
	    "ended", ended, "unleased", un));
}

void
handle_gpu_leases(struct request *req)
{
	static const struct query_spec none[] = { { NULL, Q_BOOL, false } };
	const struct node *node = request_node(req);
	unsigned n = node->ngpu;
	struct leases_scrape *s;
	struct query_values qv;
	struct batch bt;
	char *p;

	if (lease_require(req) != 0 || handlers_parse(req, none, &qv) != 0 ||
	    (s = batch_state(req, sizeof(*s) + n * (sizeof(s->cmds[0]) +
	    sizeof(*s->cur) + sizeof(*s->mj) + 2 * sizeof(bool) +
	    sizeof(*s->view.unleased_mj) + sizeof(*s->view.unleased_ok)),
	    free)) == NULL)
		return;
	/* after the commands: the records, then the 8-byte, then the bools */
	p = (char *)&s->cmds[n];
	s->cur = (struct lease_record *)p;
	p += n * sizeof(*s->cur);
	s->mj = (uint64_t *)p;
	p += n * sizeof(*s->mj);
	s->view.unleased_mj = (uint64_t *)p;
	p += n * sizeof(*s->view.unleased_mj);
	s->shown = (bool *)p;
	s->ok = s->shown + n;
	s->view.unleased_ok = s->ok + n;
	s->ngpu = n;
	batch_init(&bt, req);
	for (unsigned i = 0; i < n; i++) {
		if (!(s->shown[i] = gate_gpu_allowed(req, i)) ||
		    !node->gpu_info[i].energy_available)
			continue;
		gpu_cmd_init(&s->cmds[i], GPU_CMD_GET_ENERGY, i, batch_gpu_done,
		    req);
		if (batch_add_gpu(&bt, &s->cmds[i]) != 0)
			return;
	}
	batch_run(&bt, leases_finish);
}

/* ---- POST /gpu/release ---------------------------------------------------- */

struct release_state {
	unsigned n;			/* GPUs named */
	int k;				/* leases ended (w[0..k-1]), -1: refused */
	unsigned nnot;
	struct zerr err;
	uint32_t *not_leased;		/* [n] */
	struct lease_waiter w[];	/* [n] */
};

/* A device worker: one lease ended (or its restore failed). */
static void
release_done(void *ctx)
{
	request_complete_one(ctx);
}

static void
release_finish(struct request *req)
{
	struct release_state *st = req->hctx;
	json_t *released, *nl;

	if (st->k < 0) {
		gate_audit_refusal(req, NULL, 0, PSMSG_REFUSAL_RELEASE,
		    st->err.msg);
		request_reply_error(req, &st->err);
		return;
	}
	for (int i = 0; i < st->k; i++)
		if (!st->w[i].ok) {
			request_reply_error(req, &st->w[i].err);
			return;
		}
	released = json_array();
	nl = json_array();
	for (int i = 0; i < st->k; i++)
		json_array_append_new(released, lease_record_json(
		    &st->w[i].rec, request_peer(req)));
	for (unsigned i = 0; i < st->nnot; i++)
		json_array_append_new(nl, json_integer(st->not_leased[i]));
	request_reply_json(req, 200, json_pack("{s:o,s:o}", "released",
	    released, "not_leased", nl));
}

void
handle_gpu_release(struct request *req)
{
	static const struct query_spec spec[] = { { "gpu_ids", Q_IDS, false },
	    { NULL, Q_BOOL, false } };
	struct release_state *st;
	struct query_values qv;
	struct id_list ids;
	struct gpu_write by = { 0 };	/* who releases, for the device */
	unsigned left;

	if (lease_require(req) != 0 || handlers_parse(req, spec, &qv) != 0 ||
	    handlers_pick_gpus(req, &qv.v[0], &ids) != 0 ||
	    (st = batch_state(req, sizeof(*st) + ids.n * (sizeof(st->w[0]) +
	    sizeof(*st->not_leased)), free)) == NULL)
		return;
	st->n = ids.n;
	st->not_leased = (uint32_t *)&st->w[ids.n];
	for (unsigned i = 0; i < ids.n; i++) {
		st->w[i].done = release_done;
		st->w[i].ctx = req;
	}
	/*
	 * One completion per GPU and one of ours: a lease that ends at once
	 * cannot resume the request before leases_release returned. What did
	 * not wait is completed here.
	 */
	gate_writer(req, &by);
	request_defer(req, ids.n + 1, release_finish);
	st->k = leases_release(request_leases(req), request_peer(req),
	    by.writer_handle, ids.ids, ids.n, st->w, st->not_leased, &st->nnot, &st->err);
	left = ids.n + 1 - (st->k > 0 ? (unsigned)st->k : 0);
	/* the last of these may resume the request: st is not used after */
	for (unsigned i = 0; i < left; i++)
		request_complete_one(req);
}
